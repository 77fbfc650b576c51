"""Edges of the rank tests that a mutation run found unpinned (referee RJ): each test here
fails on the mutant named in its docstring.

References: closed forms written in the tests, and statsmodels' multipletests for the
Bonferroni boundary.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kvstats.stats import adjust_pvalues, mann_whitney, wilcoxon_signed_rank
from kvstats.stats import paired as paired_module
from kvstats.stats import rank as rank_module


def test_exact_mann_whitney_pvalue_is_capped_at_one():
    """At U = mn/2 doubling the tail gives 4/3: the two-sided p is 1, untied and tied (the
    exact law under ties), on every split of small samples (mutants: either cap removed)."""
    assert mann_whitney([1.0, 4.0], [2.0, 3.0], method="exact").pvalue == 1.0
    assert mann_whitney([1.0, 2.0], [1.0, 2.0], method="exact").pvalue == 1.0
    for (n_x, n_y), tied in itertools.product(((2, 2), (3, 3), (2, 5), (4, 4)), (False, True)):
        values = np.arange(n_x + n_y, dtype=float) // (2 if tied else 1)
        for split in itertools.combinations(range(n_x + n_y), n_x):
            x = values[list(split)]
            y = np.delete(values, list(split))
            for alternative in ("two-sided", "less", "greater"):
                p = mann_whitney(x, y, alternative=alternative, method="exact").pvalue
                assert 0.0 < p <= 1.0


def test_signed_rank_biserial_drops_zero_differences():
    """r = (T+ − T−)/(T+ + T−) over the non-zero differences: 1 when every one is positive,
    whatever the zeros (mutant: n_pairs instead of the non-zero count gave r = −0.2)."""
    res = wilcoxon_signed_rank([1.0, 2.0, 3.0, 0.0, 0.0], np.zeros(5))
    assert res.n_nonzero == 3 and res.rank_biserial == 1.0
    d = np.array([1.5, -0.5, 2.0, 0.0, -3.0, 4.0, 0.0])
    ranks = np.argsort(np.argsort(np.abs(d[d != 0]))) + 1.0      # no ties among |d|
    t_plus, t_minus = ranks[d[d != 0] > 0].sum(), ranks[d[d != 0] < 0].sum()
    res = wilcoxon_signed_rank(d, np.zeros(d.size))
    assert res.rank_biserial == pytest.approx((t_plus - t_minus) / (t_plus + t_minus), abs=1e-15)


def test_bonferroni_rejects_at_exactly_alpha_over_m_as_statsmodels():
    """p = α/m is rejected (p ≤ α/m), as multipletests does (mutant: p < α/m)."""
    from statsmodels.stats.multitest import multipletests

    p = [0.025, 0.5]
    ours = adjust_pvalues(p, method="bonferroni", alpha=0.05)
    theirs = multipletests(p, alpha=0.05, method="bonferroni")
    assert list(ours.reject) == list(theirs[0]) == [True, False]


def _unequal_spreads(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 0.05, n), rng.normal(0.0, 3.0, n)


def test_mann_whitney_interval_inflation_starts_at_five_values(monkeypatch):
    """Below 5 values in the smaller sample the interval is Newcombe's model interval
    (documented); from 5 on, unequal spreads widen it (mutants: threshold 2, or 10 as
    before 2026-12-04, when N(0, 0.2²) against N(0, 3²), 9 vs 9, covered 0.877)."""
    def plain(x, y):
        with monkeypatch.context() as m:
            m.setattr(rank_module, "_variance_inflation", lambda *a: 1.0)
            res = mann_whitney(x, y)
        return res.rank_biserial_low, res.rank_biserial_high

    def interval(x, y):
        res = mann_whitney(x, y)
        return res.rank_biserial_low, res.rank_biserial_high

    x4, y4 = _unequal_spreads(4)
    assert rank_module._variance_inflation(x4, y4, 0.5) == 1.0
    assert interval(x4, y4) == plain(x4, y4)
    for n in (5, 9):
        x, y = _unequal_spreads(n)
        lo, hi = interval(x, y)
        plain_lo, plain_hi = plain(x, y)
        assert lo < plain_lo and hi > plain_hi    # this data's inflation is active at n


def test_signed_rank_interval_inflation_starts_at_ten_differences(monkeypatch):
    """The same rule for the signed-rank interval's ζ₁ inflation (mutant: threshold 3)."""
    def plain(d):
        with monkeypatch.context() as m:
            m.setattr(paired_module, "_zeta1_inflation", lambda *a: 1.0)
            res = wilcoxon_signed_rank(d, np.zeros(d.size))
        return res.rank_biserial_low, res.rank_biserial_high

    def interval(d):
        res = wilcoxon_signed_rank(d, np.zeros(d.size))
        return res.rank_biserial_low, res.rank_biserial_high

    d9 = np.array([-5.0, -0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert interval(d9) == plain(d9)
    d10 = np.append(d9, 0.9)
    lo, hi = interval(d10)
    plain_lo, plain_hi = plain(d10)
    assert lo < plain_lo or hi > plain_hi         # heavy left tail: inflation active at n = 10
