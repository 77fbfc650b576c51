"""Float boundaries of the family's decision rule (referee RU, F1-F3).

F1: ``required_resolution``'s B must be the smallest one whose p = 1/(1 + B) the report's own
float path (``adjust_pvalues``: adjusted <= alpha) rejects in the worst-case family.
F2: ``MultipleTestResult.reject`` is ``pvalues_adjusted <= alpha``, also at the boundary.
F3: a two-sided KS gap that is as large one way as the other has no direction (sign 0), in
``ks_2samp`` and ``ks_2samp_exact`` alike.
"""

import warnings
from fractions import Fraction

import numpy as np
import pytest

from kvstats.stats import adjust_pvalues, add_adjusted_pvalues, ks_2samp
from kvstats.stats.catalog import CORRECTIONS
from kvstats.stats.family_resolution import required_resolution
from kvstats.stats.ks_exact import ks_2samp_exact
from kvstats.stats.multitest import ADJUST_METHODS


def _first_rejected(p0: float, m: int, alpha: float, correction: str) -> bool:
    """The worst case of the first step: p0 and m - 1 p-values of 1, via adjust_pvalues."""
    family = np.ones(m)
    family[0] = p0
    res = adjust_pvalues(family, method=correction, alpha=alpha)
    assert bool(res.reject[0]) == bool(res.pvalues_adjusted[0] <= alpha)   # F2's rule
    return bool(res.reject[0])


@pytest.mark.slow
@pytest.mark.parametrize("correction", CORRECTIONS)
def test_required_resolution_is_the_smallest_b_the_report_rejects(correction, calib):
    # reference: adjust_pvalues itself, the float path kvstats.analysis.verdicts decides with;
    # every m up to 400 and three alphas (RU's scan found BH one B short at m = 49, 98, 107,
    # 196, 214, 249, 392 for alpha 0.05 and at 26 m, from m = 3, for 0.01). statsmodels'
    # Hommel is O(m^2) per call (~10 s for the full scan): m <= 100 at the "ci" scale
    m_end = calib.replicates(101, 401) if correction == "hommel" else 401
    wrong = []
    for alpha in (0.01, 0.05, 0.1):
        for m in range(1, m_end):
            b = required_resolution(m, alpha, correction).n_permutations
            if not _first_rejected(1.0 / (1 + b), m, alpha, correction) \
                    or _first_rejected(1.0 / b, m, alpha, correction):
                wrong.append((alpha, m, b))
    assert wrong == []


@pytest.mark.parametrize("m,alpha,correction,b", [
    (49, 0.05, "fdr_bh", 980),     # 1/980 adjusts to 0.05000000000000001 under BH (RU F1)
    (3, 0.01, "fdr_bh", 300),      # 1/300 adjusts to 0.010000000000000002 under BH
    # and one fewer: 0.03/75 rounds below 1/2500, yet 1/2500 adjusts to <= 0.03 under BH
    (75, 0.03, "fdr_bh", 2499),
    # 1/10 adjusts to exactly 0.1: rejected under adjusted <= alpha (statsmodels' own
    # reject, another float path, said no: the disagreement RU F2 removes)
    (1, 0.1, "sidak", 9),
])
def test_required_resolution_at_the_referees_cells(m, alpha, correction, b):
    r = required_resolution(m, alpha, correction)
    assert r.n_permutations == b and r.min_attainable_p == 1 / (1 + b)
    assert _first_rejected(r.min_attainable_p, m, alpha, correction)
    assert not _first_rejected(1 / b, m, alpha, correction)


@pytest.mark.parametrize("method,m,alpha,p0,adjusted", [
    # RU's boundary values (/tmp/RU/mt2.py); statsmodels' own reject was True, True, False
    ("holm", 11, 0.05, 0.05 / 11, 0.05000000000000001),
    ("fdr_bh", 5, 0.05, 0.010000000000000002, 0.05000000000000001),
    ("sidak", 1, 0.1, 0.1, 0.1),
])
def test_reject_is_adjusted_at_most_alpha_at_the_boundary(method, m, alpha, p0, adjusted):
    p = np.full(m, 0.99)
    p[0] = p0
    res = adjust_pvalues(p, method=method, alpha=alpha)
    assert res.pvalues_adjusted[0] == adjusted
    assert bool(res.reject[0]) is (adjusted <= alpha)
    frame = add_adjusted_pvalues(__import__("pandas").DataFrame({"pvalue": p}), method=method,
                                 alpha=alpha)
    assert frame["reject"].tolist() == res.reject.tolist()


@pytest.mark.parametrize("method", ADJUST_METHODS)
def test_reject_never_disagrees_with_the_adjusted_pvalues(method, monkeypatch):
    # boundary families (p0 at and one ulp around alpha/m and the Sidak level) and random
    # ones; where statsmodels' reject differs, the adjusted value is within 2 ulp of alpha.
    # Its Holm calls gc.collect() each time (no effect on the numbers; minutes here): stubbed
    import gc

    from statsmodels.stats.multitest import multipletests

    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)
    rng = np.random.default_rng(11)
    n_differ = 0
    for alpha in (0.01, 0.05, 0.1):
        for m in range(1, 41):
            level = alpha / m
            for p0 in (level, np.nextafter(level, 1), np.nextafter(level, 0), level * (1 + 2e-16),
                       -np.expm1(np.log1p(-alpha) / m)):
                p = np.full(m, 0.99)
                p[0] = p0
                families = (p, np.sort(rng.random(m) ** 3))
                for fam in families:
                    res = adjust_pvalues(fam, method=method, alpha=alpha)
                    assert np.array_equal(res.reject, res.pvalues_adjusted <= alpha)
                    with np.errstate(divide="ignore"):
                        ref = multipletests(fam, alpha=alpha, method=method)[0]
                    differ = res.reject != ref
                    n_differ += int(differ.sum())
                    assert np.all(np.abs(res.pvalues_adjusted[differ] - alpha)
                                  <= 2 * np.spacing(alpha))
    if method in ("holm", "fdr_bh", "sidak"):
        assert n_differ > 0      # the scan does reach the one-ulp boundary


def _integer_gaps(x, y):
    pooled = sorted(set(x) | set(y))
    d = [Fraction(sum(v <= t for v in x), len(x)) - Fraction(sum(v <= t for v in y), len(y))
         for t in pooled]
    return pooled, d


def test_ks_balanced_gap_has_no_direction_in_either_function():
    # RU's example: F_x - F_y reaches +1/3 at -1.9 and -1/3 at 1.15 (by hand); scipy's float
    # gaps called it -1 at 1.15, the exact function +1 at -1.9
    x, y = [-0.2, 1.3, -1.9], [1.15, 1.05, -1.35]
    a, b = ks_2samp(x, y), ks_2samp_exact(x, y)
    assert (a.statistic_sign, a.statistic_location) == (0, -1.9)
    assert (b.statistic_sign, b.statistic_location) == (0, -1.9)
    assert a.statistic == b.statistic == 1 / 3


@pytest.mark.parametrize("tied", [False, True])
def test_ks_sign_and_location_agree_with_exact_fractions(tied):
    # reference: the ECDF gaps in Fractions; sign 0 exactly when max(F_x - F_y) = max(F_y - F_x),
    # location the first pooled value where |gap| = D; otherwise the side of the larger gap
    rng = np.random.default_rng(5)
    n_balanced = 0
    for _ in range(400):
        nx, ny = (int(v) for v in rng.integers(2, 9, size=2))
        draw = (lambda n: rng.integers(0, 5, n).astype(float)) if tied else \
            (lambda n: np.round(rng.normal(size=n), 3))
        x, y = draw(nx).tolist(), draw(ny).tolist()
        pooled, d = _integer_gaps(x, y)
        up, down = max(max(d), 0), max(-min(d), 0)
        sign = 0 if up == down else (1 if up > down else -1)
        target = up if sign >= 0 else -down
        loc = next(t for t, g in zip(pooled, d) if (abs(g) == up if sign == 0 else g == target))
        n_balanced += sign == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = ks_2samp(x, y)
        b = ks_2samp_exact(x, y)
        assert b.statistic_sign == sign and b.statistic_location == loc, (x, y)
        assert a.statistic_sign == sign and a.statistic_location == loc, (x, y)   # integer gaps in both
        assert abs(a.statistic - float(max(up, down))) < 1e-15
    assert n_balanced > 20               # the draws do exercise balanced gaps
