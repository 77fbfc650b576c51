"""energy_test draws and evaluates its relabellings in batches: the same statistics, bit for
bit, as the single (B + 1)-row label array it used before (kept here as the reference), so
every p-value computed before the change is unchanged."""

import numpy as np
import pytest

import kvstats.stats._energy_core as core
import kvstats.stats._energy_swap as swap
import kvstats.stats.energy as energy
from kvstats.stats import energy_test
from kvstats.stats._energy_core import _prepare, _subset_batches, _unit_scale


def _old_random_subsets(rng, k, n, m):
    """energy_test's draw before batching (verbatim but for the out argument): keys for all
    k rows in 64 MiB row blocks, then the rows with a tied threshold key redrawn."""
    out = np.empty((k, n), dtype=bool)
    rows_per_draw = max(1, 64 * 2**20 // (2 * 8 * n))
    todo = np.arange(k)
    while todo.size:
        bad = []
        for start in range(0, todo.size, rows_per_draw):
            idx = todo[start:start + rows_per_draw]
            keys = rng.random((idx.size, n))
            kth = np.partition(keys, m - 1, axis=1)[:, m - 1:m]
            rows = keys <= kth
            good = rows.sum(axis=1) == m
            out[idx[good]] = rows[good]
            bad.append(idx[~good])
        todo = np.concatenate(bad)
    return out


def _old_energy_test(X, Y, B, rng, kind="V", standardize=False, paired=False):
    """(statistics of rows 0..B, p-value) the way energy_test computed them before batching:
    one (B + 1)-row label array through the cores."""
    X, Y, _ = _prepare(X, Y, standardize, kind)
    n_x, n = len(X), len(X) + len(Y)
    Z, _ = _unit_scale(np.concatenate([X, Y]))
    if paired:
        keep = np.empty((B + 1, n_x), dtype=bool)
        keep[0] = True
        keep[1:] = rng.random((B, n_x)) < 0.5
        forms = swap._SwapForms(Z[:n_x], Z[n_x:])
        stats_all, total = swap._swap_statistics(forms.forms(keep), forms.total, n_x,
                                                 kind), forms.total
    else:
        labels = np.empty((B + 1, n), dtype=bool)
        labels[0] = np.arange(n) < n_x
        labels[1:] = _old_random_subsets(rng, B, n, n_x)
        stats_all, total = core._permutation_statistics(Z, labels, kind)
    tol = 1e-10 * total / (n * (n - 1))
    return stats_all, (1.0 + np.count_nonzero(stats_all[1:] >= stats_all[0] - tol)) / (1.0 + B)


def _assert_same(X, Y, B, seed, **kw):
    # the Monte Carlo path, also where the group is small enough to be enumerated
    res = energy_test(X, Y, n_resamples=B, seed=seed, method="permutation", **kw)
    stats_all, pvalue = _old_energy_test(X, Y, B, np.random.default_rng(seed), **kw)
    assert res.statistic == stats_all[0]
    assert np.array_equal(res.null_distribution, stats_all[1:])    # bit for bit
    assert res.pvalue == pvalue


@pytest.mark.parametrize("n_x,n_y,dim,B,kind,standardize,paired", [
    (100, 100, 6, 22799, "V", True, False),     # default chunks: 13981 rows, two batches
    (37, 81, 3, 999, "U", False, False),
    (3, 4, 2, 200, "V", False, False),
    (150, 150, 4, 30000, "U", False, True),
    (5, 5, 1, 5000, "V", False, True),
])
def test_batched_statistics_are_the_single_array_ones(n_x, n_y, dim, B, kind, standardize,
                                                      paired):
    for seed in (0, 1):
        rng = np.random.default_rng(seed + 10 * n_x)
        X, Y = rng.normal(size=(n_x, dim)), rng.normal(0.2, 1, (n_y, dim))
        _assert_same(X, Y, B, seed, kind=kind, standardize=standardize, paired=paired)


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few dozen rows, so that small tests cross many batch boundaries."""
    monkeypatch.setattr(core, "_CHUNK_BYTES", 3 * 8 * 40 * 29)    # 29 rows for n = 40
    monkeypatch.setattr(swap, "_CHUNK_BYTES", 8 * 40 * 23)        # 23 rows for m = 20


@pytest.mark.parametrize("paired", [False, True])
def test_many_batches_are_the_single_array(small_chunks, paired):
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(20, 3)), rng.normal(0.3, 1, (20, 3))
    assert core._pooled_blocking(40)[1] == 29 and swap._SwapForms(X, Y).chunk == 23
    for B in (1, 27, 28, 29, 57, 58, 300):
        _assert_same(X, Y, B, B, kind="U", paired=paired)


class _CoarseGenerator(np.random.Generator):
    """Uniform keys on a grid of 16 values: tied threshold keys (and their redraws) are
    frequent instead of ~n 2**-53 per row; counts the rows drawn."""

    def __init__(self, seed):
        super().__init__(np.random.PCG64(seed))
        self.rows = 0

    def random(self, size=None, dtype=np.float64, out=None):
        self.rows += size[0]
        return np.floor(super().random(size) * 16) / 16


def test_tied_keys_are_redrawn_as_before(small_chunks):
    # a batch with a tied row waits for the redraws, which come after every first draw
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    B = 300
    gen = _CoarseGenerator(1)
    res = energy_test(X, Y, n_resamples=B, seed=gen)
    assert gen.rows > B + 20                     # many rows were redrawn
    stats_all, pvalue = _old_energy_test(X, Y, B, _CoarseGenerator(1))
    assert np.array_equal(res.null_distribution, stats_all[1:]) and res.pvalue == pvalue


def test_subset_batches_are_the_old_rows_in_any_batches():
    bounds = [0, 1, 7, 8, 50, 123, 400]
    for gen_new, gen_old in [(np.random.default_rng(2), np.random.default_rng(2)),
                             (_CoarseGenerator(3), _CoarseGenerator(3))]:
        rows = np.empty((400, 9), dtype=bool)
        starts = []
        for start, batch in _subset_batches(gen_new, bounds, 9, 4):
            rows[start:start + len(batch)] = batch
            starts.append(start)
        assert sorted(starts) == bounds[:-1]
        assert np.array_equal(rows, _old_random_subsets(gen_old, 400, 9, 4))
    assert gen_new.rows > 400 + 50              # the coarse keys tied and were redrawn
