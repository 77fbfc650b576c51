"""The exact energy test's resolution given the data, and the floor on the scaled data.

An exact test holds every relabelling class's statistic, so the smallest p-value any
relabelling of these data could get is the share of classes tying the largest statistic.
With tied points (or pairs equal in value) that share can be far above the group's floor
(1/C(n, n_x), 2**(1 - m)): 4 values against 4 whose most extreme split gets p = 0.2 were
called resolvable at 0.05 with the floor 2/70 (critic_exact20 #1). The floor was also taken
from the data before their power-of-two scaling, which can underflow a difference the
enumeration then does not see (critic_exact20 #2).
"""

import itertools
import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from kvstats.analysis.pair_tests import _energy_row
from kvstats.analysis.resolution import attainable_adjusted
from kvstats.stats import energy_test
from kvstats.stats.sequential import energy_test_sequential


def _tied_profiles():
    """critic_exact20's reproducer: 6-D profiles, one informative column with tied values."""
    a, b = np.full((4, 6), 0.5), np.full((4, 6), 0.5)
    a[:, 0], b[:, 0] = [3, 1, 1, 3], [0, 1, 0, 1]
    return a, b


def test_tied_energy_row_whose_every_split_has_p_at_least_0_2_is_not_resolvable():
    a, b = _tied_profiles()
    row = _energy_row(a, b, 999, 10, 0)
    # brute force over all 70 splits of these 8 values (test below): the least p is 1/5, the
    # observed (most extreme) split's; the group floor 2/70 said "resolvable" at 0.05
    assert row["note"].endswith("exact (35 relabellings)")
    assert row["pvalue"] == pytest.approx(0.2) and row["min_attainable_p"] == pytest.approx(0.2)
    # in a family of one at alpha = 0.05: not resolvable (was 0.0286 <= 0.05)
    adjusted = attainable_adjusted(np.array([row["pvalue"]]), np.array([row["min_attainable_p"]]),
                                   "holm", 0.05)
    assert adjusted[0] > 0.05
    for res in (energy_test(a, b, standardize=True),
                energy_test_sequential(a, b, max_permutations=999, standardize=True)):
        assert res.method == "exact" and res.min_attainable_p == pytest.approx(0.2)
        assert not res.resolvable(0.05)


def _v_statistics(P, labels):
    """V energy distance of each (k, n) bool label row (True: first sample) of pooled P."""
    D = cdist(P, P)
    L = labels.astype(float)
    R = 1.0 - L
    n_a, n_b = L[0].sum(), R[0].sum()
    quad = lambda A, B: np.einsum("ki,ij,kj->k", A, D, B)  # noqa: E731
    return 2 * quad(L, R) / (n_a * n_b) - quad(L, L) / n_a**2 - quad(R, R) / n_b**2, D


def _least_p(stats, D):
    """The least p-value over the labellings: each one's share of statistics >= its own,
    within the energy tests' tie tolerance (1e-10 of the mean pooled distance)."""
    n = len(D)
    tol = 1e-10 * D.sum() / (n * (n - 1))
    return min(np.mean(stats >= t - tol) for t in stats)


def _brute_unpaired(P, n_a):
    """Least p over every n_a-subset of the pooled rows P (all of them, no symmetry used)."""
    n = len(P)
    labels = np.array([np.isin(np.arange(n), c) for c in itertools.combinations(range(n), n_a)])
    return _least_p(*_v_statistics(P, labels))


def _brute_paired(X, Y):
    """Least p over all 2**m within-pair swaps (no symmetry used)."""
    m = len(X)
    P = np.concatenate([X, Y])
    swaps = np.array(list(itertools.product([False, True], repeat=m)))
    labels = np.concatenate([~swaps, swaps], axis=1)   # pooled rows: X then Y; True: in x
    return _least_p(*_v_statistics(P, labels))


def test_exact_min_attainable_p_is_the_least_p_of_all_relabellings_on_random_ties():
    # random tie patterns: 2..5 vs 2..5 points drawn from 3 values (1-2 D), and 3..6 pairs
    # from 3 values; min_attainable_p against a brute-force enumeration of every relabelling
    rng = np.random.default_rng(20)
    above_floor = 0
    for case in range(40):
        d = 1 + case % 2
        vals = rng.integers(0, 3, size=(3, d)).astype(float)
        if case % 4 < 2:
            n_a, n_b = (int(v) for v in rng.integers(2, 6, size=2))
            P = vals[rng.integers(0, 3, size=n_a + n_b)]
            if np.all(P == P[0]):
                continue
            X, Y = P[:n_a], P[n_a:]
            truth = _brute_unpaired(P, n_a)
            floor = (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a)
            kw = {}
        else:
            m = int(rng.integers(3, 7))
            X, Y = vals[rng.integers(0, 3, size=m)], vals[rng.integers(0, 3, size=m)]
            truth = _brute_paired(X, Y)
            floor = min(1.0, 2.0 ** (1 - int((X != Y).any(axis=1).sum())))
            kw = {"paired": True}
        res = energy_test(X, Y, **kw)
        seq = energy_test_sequential(X, Y, max_permutations=99, **kw)
        assert res.method == seq.method == "exact"
        assert res.min_attainable_p == pytest.approx(truth, rel=1e-12), (case, X, Y)
        assert seq.min_attainable_p == pytest.approx(truth, rel=1e-12), (case, X, Y)
        assert res.pvalue >= res.min_attainable_p
        above_floor += truth > floor * (1 + 1e-9)
    # the patterns include ties that lift the least p above the group's floor (the old value)
    assert above_floor >= 5


def _underflowing_pair():
    """3 pairs near 1e300; pair 3 differs only by 1e-300 in another column, which the
    power-of-two scaling (by ~2**-998) underflows to 0: 2 differing pairs for the test."""
    X = np.array([[1e300, 0.0], [2e300, 0.0], [3e300, 0.0]])
    Y = X.copy()
    Y[0, 0], Y[1, 0], Y[2, 1] = 5e300, 7e300, 1e-300
    return X, Y


def test_floor_counts_the_pairs_that_differ_after_the_scaling():
    X, Y = _underflowing_pair()
    # exact: the 2 classes of the 2 pairs the scaled data hold; p = 0.5 is all there is
    for res in (energy_test(X, Y, paired=True),
                energy_test_sequential(X, Y, max_permutations=99, paired=True)):
        assert res.method == "exact" and res.pvalue == 0.5 and res.min_attainable_p == 0.5
        assert not res.resolvable(0.3)
    # drawn: the floor 2**(1 - 2) = 1/2, not 2**(1 - 3) from the unscaled data; each draw
    # ties T_obs with probability 1/2, so monte_carlo_resolution(1/2, B, h) (~1/2) is the
    # median p on these data, never the 0.251 of the floor 1/4
    for res in (energy_test(X, Y, paired=True, method="permutation", n_resamples=999),
                energy_test_sequential(X, Y, max_permutations=999, paired=True,
                                       method="permutation")):
        assert res.min_attainable_p > 0.45 and not res.resolvable(0.3)
