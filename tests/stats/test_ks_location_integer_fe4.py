"""ks_2samp and ks_2samp_exact report the same location of the KS gap (referee RE4 F5).

Both take it from the integer gaps i n_y - j n_x: the first pooled value where the chosen
side reaches D (two-sided and balanced: sign 0, the first |gap| = D). ks_2samp took scipy's
location, chosen on float gaps, which can be a later one of several equal gaps. Reference:
the ECDF gaps in Fractions (exact), computed here.
"""

import warnings
from fractions import Fraction

import numpy as np
import pytest

from kvstats.stats import ks_2samp, ks_2samp_exact


def _reference(x, y, alternative):
    pooled = sorted(set(x) | set(y))
    d = [Fraction(sum(v <= t for v in x), len(x)) - Fraction(sum(v <= t for v in y), len(y))
         for t in pooled]
    up, down = max(max(d), 0), max(-min(d), 0)
    if alternative == "two-sided" and up == down:
        return next(t for t, g in zip(pooled, d) if abs(g) == up), 0, up
    if alternative == "less" or (alternative == "two-sided" and down > up):
        return next(t for t, g in zip(pooled, d) if -g == down), -1, down
    return next(t for t, g in zip(pooled, d) if g == up), 1, up


def _ks(x, y, alternative):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ks_2samp(x, y, alternative=alternative)


def test_res_example():
    # RE4: F_x - F_y = -1/3 at 0 and again at 1 (by hand: x <= 0: 1/3, y <= 0: 2/3;
    # x <= 1: 2/3, y <= 1: 1), +0 nowhere above: sign -1, the first is 0
    x, y = [2.0, 0.0, 1.0], [0.0, 0.0, 1.0]
    a, b = _ks(x, y, "two-sided"), ks_2samp_exact(x, y)
    assert (a.statistic_location, a.statistic_sign) == (0.0, -1)
    assert (b.statistic_location, b.statistic_sign) == (0.0, -1)
    assert a.statistic == b.statistic == pytest.approx(1 / 3, rel=1e-15)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_both_functions_agree_with_fractions_on_tied_draws(alternative):
    rng = np.random.default_rng(11)
    n_later = 0   # draws where several points reach D on the winning side (the case at issue)
    for t in range(600):
        nx, ny = (int(v) for v in rng.integers(1, 9, size=2))
        if t % 2:
            x, y = (rng.integers(0, 4, n).astype(float).tolist() for n in (nx, ny))
        else:
            x, y = (np.round(rng.standard_normal(n), 2).tolist() for n in (nx, ny))
        loc, sign, d = _reference(x, y, alternative)
        a, b = _ks(x, y, alternative), ks_2samp_exact(x, y, alternative=alternative)
        assert (a.statistic_location, a.statistic_sign) == (loc, sign), (x, y)
        assert (b.statistic_location, b.statistic_sign) == (loc, sign), (x, y)
        assert a.statistic == b.statistic and abs(a.statistic - float(d)) < 1e-15, (x, y)
        pooled = sorted(set(x) | set(y))
        gaps = [Fraction(sum(v <= s for v in x), nx) - Fraction(sum(v <= s for v in y), ny)
                for s in pooled]
        n_later += sign != 0 and sum(g * sign == d for g in gaps) > 1
    assert n_later > 20
