"""The paired energy test's m x m swap form s'Cs against the pooled 2m x 2m label core.

Reference: ``kvstats.stats._energy_reference.PooledPairs``, the same swaps written as
2m-long labels through ``_permutation_statistics`` (the path ``energy_test(paired=True)``
used before the swap form; that core is tested against brute force in
test_stats_energy.py; experiments/bench_energy.py --paired times the same reference). V = -Q/m^2 and U = -(T + (2m - 1) Q)/(2 m^2 (m - 1)) are
derived in kvstats/stats/energy.py's module docstring.
"""

import numpy as np
import pytest

from kvstats.stats import energy_test
from kvstats.stats._energy_reference import PooledPairs
from kvstats.stats.energy import (_prepare, _random_keeps, _random_swaps, _swap_statistics,
                                  _SwapForms, _unit_scale)
from kvstats.stats.sequential import _run, energy_test_sequential


def _pairs(rng, m, dim=4, design="pos"):
    z = rng.normal(size=(m, dim)) * np.geomspace(0.1, 10, dim)   # columns in different units
    x = z + 0.3 * rng.normal(size=(m, dim)) + (0.1 if design == "shift" else 0.0)
    y = (-z if design == "neg" else z) + 0.3 * rng.normal(size=(m, dim))
    if design == "ties":
        x, y = np.round(x * 2) / 2, np.round(y * 2) / 2
    return x, y


def _pooled(x, y, keep, kind, standardize):
    """Statistics and pooled total of the swaps ``keep`` through the 2m x 2m core."""
    return PooledPairs.of(x, y, kind=kind, standardize=standardize).swaps(keep)


def _swap(x, y, keep, kind, standardize, **blocking):
    X, Y, _ = _prepare(x, y, standardize, kind)
    Z, _ = _unit_scale(np.concatenate([X, Y]))
    m = len(X)
    forms = _SwapForms(Z[:m], Z[m:], **{k: v for k, v in blocking.items() if k != "chunk"})
    q = forms.forms(keep, chunk=blocking.get("chunk"))
    return _swap_statistics(q, forms.total, m, kind), forms.total


BLOCKINGS = [{}, {"block": 7, "chunk": 5}, {"block": 7, "chunk": 5, "cache_bytes": 0},
             {"block": 16}]


@pytest.mark.parametrize("m", [1, 2, 3, 50])
@pytest.mark.parametrize("kind", ["V", "U"])
@pytest.mark.parametrize("standardize", [False, True])
def test_swap_form_equals_pooled_labels(m, kind, standardize):
    if kind == "U" and m < 2:
        pytest.skip("kind='U' needs 2 pairs")
    rng = np.random.default_rng(m)
    x, y = _pairs(rng, m)
    keep = rng.random((40, m)) < 0.5
    keep[0], keep[1] = True, False                       # observed and the full swap
    ref, total = _pooled(x, y, keep, kind, standardize)
    scale = np.max(np.abs(ref))
    for blocking in BLOCKINGS:     # one block; 8 blocks x 8 chunks, cached or not; 4 blocks
        new, new_total = _swap(x, y, keep, kind, standardize, **blocking)
        assert np.max(np.abs(new - ref)) <= 1e-12 * scale, blocking
        assert new_total == pytest.approx(total, rel=1e-12)
        assert new[1] == pytest.approx(new[0], rel=1e-12)   # s and -s: the same statistic
    if m == 1:                     # one pair: every labelling is the observed one
        assert np.all(new == new[0])
        if not standardize:        # V = 2|x - y| - 0 - 0
            assert new[0] == pytest.approx(2.0 * np.linalg.norm(x - y), rel=1e-15)


def test_swap_form_large_m_uncached():
    # m above the cache bound (~3,600): blocks recomputed per chunk, the default blocking
    rng = np.random.default_rng(8)
    m = 3700
    x, y = _pairs(rng, m, dim=3, design="shift")
    keep = rng.random((3, m)) < 0.5
    keep[0] = True
    X, Y, _ = _prepare(x, y, True, "U")
    Z, _ = _unit_scale(np.concatenate([X, Y]))
    assert _SwapForms(Z[:m], Z[m:])._cache is None
    for kind in ("V", "U"):
        ref, _ = _pooled(x, y, keep, kind, True)
        new, _ = _swap(x, y, keep, kind, True)
        assert np.max(np.abs(new - ref)) <= 1e-12 * np.max(np.abs(ref))


def test_keeps_are_the_swaps_draws():
    # the swap form draws exactly the uniforms the pooled-label path drew, in order,
    # across the row chunks of the draw (m = 20,000: 419 rows per rng.random call)
    for m, k in [(7, 300), (20000, 900)]:
        keep = _random_keeps(np.random.default_rng(3), k, m)
        lab = _random_swaps(np.random.default_rng(3), k, m)
        assert np.array_equal(lab[:, :m], keep) and np.array_equal(lab[:, m:], ~keep)
        g = np.random.default_rng(3)
        two = np.concatenate([_random_keeps(g, 64, m), _random_keeps(g, k - 64, m)])
        assert np.array_equal(two, keep)


def test_pvalues_equal_the_pooled_label_path():
    # 96 seeded tests (4 designs incl. heavy ties, 6 sizes, V/U, standardised or not);
    # 3,120 such cases were compared in the session that introduced the form: identical
    rng = np.random.default_rng(21)
    n_close = 0
    for case in range(96):
        m = [2, 3, 6, 12, 40, 150][case % 6]
        design = ["pos", "neg", "shift", "ties"][case // 6 % 4]
        kind, standardize = "VU"[case // 24 % 2], bool(case // 48)
        x, y = _pairs(rng, m, dim=1 + case % 3, design=design)
        res = energy_test(x, y, n_resamples=199, seed=case, paired=True, kind=kind,
                          standardize=standardize, method="permutation")   # the drawn swaps
        ref = PooledPairs.of(x, y, kind=kind, standardize=standardize)
        p_ref, t_ref, tol = ref.test(199, case)
        assert res.pvalue == p_ref, (case, res.pvalue, p_ref)
        # to rounding of a difference of mean distances: relative to the mean distance
        # (tol = 1e-10 of it), as the statistic itself can be far smaller
        assert abs(res.statistic - t_ref[0]) <= 1e-2 * tol
        # how close a permuted statistic came to the exceedance threshold (information)
        n_close += np.count_nonzero(np.abs(t_ref[1:] - (t_ref[0] - tol)) < 1e-3 * tol)
    assert n_close == 0


def test_sequential_equals_the_pooled_label_path():
    # the Besag–Clifford loop driven by the pooled-label statistics on the same draws
    rng = np.random.default_rng(22)
    for case, (m, shift, kind) in enumerate([(10, 0.0, "V"), (30, 0.05, "U"), (60, 0.0, "V"),
                                             (25, 0.4, "U")]):
        x, y = _pairs(rng, m)
        x = x + shift
        res = energy_test_sequential(x, y, max_permutations=999, h=10, seed=case, paired=True,
                                     kind=kind, standardize=True, method="permutation")
        ref = PooledPairs.of(x, y, kind=kind, standardize=True)
        t_obs, total = ref.observed()
        p, used, exceed, early = _run(ref.draw, t_obs, max_permutations=999, h=10,
                                      rng=np.random.default_rng(case),
                                      tol=ref.tolerance(total), batch=64, max_batch=8192)
        assert (res.pvalue, res.n_permutations, res.n_exceed, res.stopped_early) == \
            (p, used, exceed, early)
