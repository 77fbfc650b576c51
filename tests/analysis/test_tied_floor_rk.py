"""Referee RK's F1-F3: the drawn energy row's floor on tied profiles, and input checks.

F1: a drawn two-sample row took tied_permutation_floor, a lower bound, as its floor: on 6,
12, 6 copies of three collinear points split 12 vs 12 at the most extreme labelling it gave
min_attainable_p 4.4e-05 (B_max 22799, resolvable in a family of 1140), while the test's p
there was 6.6e-04 or more; the floor is 6.8e-04 (the referee's enumeration of count vectors). References: brute
force over every labelling (itertools), and the exact energy test's own least p-value.
"""

import itertools
import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from kvstats.analysis._tied_floor import tied_energy_floor
from kvstats.analysis.pair_tests import _energy_row
from kvstats.analysis.resolution import (attainable_adjusted, extreme_pvalue,
                                         not_resolvable_text, tied_permutation_floor)
from kvstats.stats import energy_test
from kvstats.stats.family_resolution import monte_carlo_resolution

LINE = np.array([0.0, 1.0, 2.0])[:, None] * np.ones(6) + np.arange(6) * 0.1   # B the midpoint


def _extreme(mult, n_x):
    """The most extreme split of ``mult`` copies of the three LINE points (by brute force over
    count vectors: the larger energy distance), as X, Y profile arrays."""
    def stat(k):
        x, y = np.repeat(LINE, k, 0), np.repeat(LINE, np.subtract(mult, k), 0)
        return 2 * cdist(x, y).mean() - cdist(x, x).mean() - cdist(y, y).mean()
    ks = [k for k in itertools.product(*(range(m + 1) for m in mult)) if sum(k) == n_x]
    k = max(ks, key=stat)
    return np.repeat(LINE, k, 0), np.repeat(LINE, np.subtract(mult, k), 0)


def _brute_floor(X, Y):
    """Every labelling of the pooled rows: the share whose V-statistic (unstandardised: LINE's
    coordinates have equal spreads, so standardising scales all distances alike) is within
    1e-9 relative of the largest."""
    Z = np.concatenate([X, Y])
    D, n, n_x = cdist(Z, Z), len(Z), len(X)
    stats = []
    for a in itertools.combinations(range(n), n_x):
        b = np.setdiff1d(np.arange(n), a)
        stats.append(2 * D[np.ix_(a, b)].mean() - D[np.ix_(a, a)].mean() - D[np.ix_(b, b)].mean())
    stats = np.array(stats)
    return np.mean(stats >= stats.max() - 1e-9 * D.mean())


def test_floor_equals_brute_force_on_every_labelling():
    for mult, n_x in (((2, 4, 2), 4), ((3, 4, 3), 5), ((2, 6, 2), 5), ((1, 3, 4), 4)):
        X, Y = _extreme(mult, n_x)
        assert tied_energy_floor(X, Y) == pytest.approx(_brute_floor(X, Y), rel=1e-9)
        # and the exact test's own least p-value on these data
        assert tied_energy_floor(X, Y) == pytest.approx(
            energy_test(X, Y, standardize=True, method="exact").min_attainable_p, rel=1e-9)


def test_paired_floor_equals_the_exact_tests_on_random_tied_pairs():
    """Within-pair swaps with repeated pairs: the count-vector floor is the exact test's."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        pts = rng.integers(0, 3, (int(rng.integers(2, 5)), 2)).astype(float)
        n = int(rng.integers(3, 10))
        X, Y = pts[rng.integers(0, len(pts), n)], pts[rng.integers(0, len(pts), n)]
        if not (X != Y).any() or np.unique(np.concatenate([X, Y]), axis=0).shape[0] < 2:
            continue
        exact = energy_test(X, Y, standardize=True, paired=True, method="exact").min_attainable_p
        assert tied_energy_floor(X, Y, paired=True) == pytest.approx(exact, rel=1e-9)


def test_rk_reproducer_row_takes_the_enumerated_floor():
    X, Y = _extreme((6, 12, 6), 12)
    floor = tied_energy_floor(X, Y)
    # the reference: count vectors weighted by Π C(m_j, k_j), the referee's own enumeration
    assert floor == pytest.approx(0.000684, abs=5e-7)
    assert floor > 900 * tied_permutation_floor([6, 12, 6], 12)
    B = 22799
    for seed in range(2):
        row = _energy_row(X, Y, B, 10, seed)
        assert "exact" not in row["note"]
        assert row["min_attainable_p"] == monte_carlo_resolution(floor, B, 10)
        # Holm with 1140 tests needs 0.05/1140 = 4.4e-05: not resolvable
        assert 1140 * row["min_attainable_p"] > 0.05


def test_drawn_p_at_the_extreme_meets_the_row_resolution_half_the_time():
    """The row's min_attainable_p is the p-value the most extreme data get at least half the
    time (fixed B: h > B): over 120 seeds P(p <= it) and P(p >= it) are each >= ~1/2 (each
    seed a Bernoulli with probability >= 1/2; 0.36 is 3 SE below). The old floor (4.4e-07 at
    B = 2999: 1/3000) had P(p <= it) near 0 (f B = 2 draws tie it on average)."""
    X, Y = _extreme((6, 12, 6), 12)
    B = 2999
    rows = [_energy_row(X, Y, B, B + 1, seed) for seed in range(120)]
    p = np.array([r["pvalue"] for r in rows])
    res = rows[0]["min_attainable_p"]
    assert all(r["min_attainable_p"] == res for r in rows)
    assert np.mean(p <= res) >= 0.36 and np.mean(p >= res) >= 0.36


def test_beyond_the_enumeration_a_row_keeps_the_floor_of_copies():
    """30 points twice each, 30 vs 30: about 1e13 count vectors, beyond the enumeration. The
    row keeps tied_permutation_floor (copies counted; distinct profiles assumed in general
    position, as the untied floor assumes) and says so in its note."""
    v = np.repeat(np.arange(30.0), 2)[:, None] * np.ones(6)
    X, Y = v[::2], v[1::2]
    assert tied_energy_floor(X, Y) is None
    row = _energy_row(X, Y, 999, 10, 0)
    counts = np.unique(np.concatenate([X, Y]), axis=0, return_counts=True)[1]
    assert row["min_attainable_p"] == monte_carlo_resolution(tied_permutation_floor(counts, 30), 999, 10)
    assert "floor of tied profiles counting copies only" in row["note"]


def test_one_copied_trial_among_many_distinct_keeps_its_resolution():
    """One duplicated profile among 40 distinct (a drawn row): the row stays resolvable at
    its B, as without the copy (an earlier version left it 'not known', never resolvable)."""
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(40, 6)), rng.normal(size=(40, 6)) + 0.1
    Y[0] = X[0]
    row = _energy_row(X, Y, 499, 10, 0)
    assert row["min_attainable_p"] == pytest.approx(monte_carlo_resolution(
        tied_permutation_floor(np.r_[2, np.ones(78, int)], 40), 499, 10))
    assert row["min_attainable_p"] < 0.01


def test_the_enumeration_stays_within_the_size_of_its_result():
    """Three points, 1000 copies each, 1500 vs 1500: ~750k count vectors, enumerated without
    an intermediate array larger than the result (one that was took 11 GiB)."""
    pts = np.repeat([0.0, 1.0, 2.0], 1000)[:, None]
    floor = tied_energy_floor(pts[:1500], pts[1500:])
    assert floor is not None and 0.0 <= floor < 1e-6


def test_attainable_adjusted_keeps_an_unknown_floor_unknown():
    adj = attainable_adjusted(np.array([0.5, 1e-4]), np.array([math.nan, 1e-4]), "holm", 0.05)
    assert math.isnan(adj[0]) and adj[1] == pytest.approx(2e-4)
    assert "(smallest attainable adjusted p –)" in not_resolvable_text("energy", 999, 30, 30, adj[0])


@pytest.mark.parametrize("counts", [[0, 3], [-2, 5], [1.5, 2.5], [[2, 2], [2, 2]], [], ["2", "3"]])
def test_tied_permutation_floor_refuses_bad_counts(counts):
    with pytest.raises(ValueError, match="counts must be 1-D integers >= 1"):
        tied_permutation_floor(counts, 1)


def test_extreme_pvalue_and_attainable_adjusted_name_the_bad_input():
    with pytest.raises(ValueError, match="^x must not contain NaN"):
        extreme_pvalue("ks", [1, math.nan], [1, 2])
    with pytest.raises(ValueError, match="^y must not contain NaN"):
        extreme_pvalue("mann_whitney", [1, 2], [math.nan, 2])
    with pytest.raises(ValueError, match="^x must not be empty"):
        extreme_pvalue("mann_whitney", [], [1, 2])
    with pytest.raises(ValueError, match="^pvalues must not contain NaN"):
        attainable_adjusted([math.nan, 0.1], [0, 0], "holm", 0.05)
    with pytest.raises(ValueError, match="same shape"):
        attainable_adjusted([0.1, 0.2, 0.3], [0, 0], "holm", 0.05)
    with pytest.raises(ValueError, match=r"method must be one of \['holm'"):
        attainable_adjusted([0.1], [0.0], "holmes", 0.05)
