"""Named guards of the sweep's seeding and cell ids (a refactor of the runner must keep them).

Each was checked by mutation: dropping the chunk index from the scheme seed, or the chunk
size from the cell id, makes the corresponding test fail.
"""

import numpy as np

from kvstats.sweep import SweepConfig, run_sweep, work

# 8 trials in two chunks of 4: equal chunk sizes, so equal seeds would mean equal draws
TWO_CHUNKS = {"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
              "n_keys": [8], "n_trials": 8, "chunk_size": 4, "seed": 3}


def test_scheme_seed_depends_on_the_chunk_index(monkeypatch):
    calls = []
    real = work.make_scheme

    def spy(name, bits, dim, *, seed, draws, **params):
        calls.append((seed, draws))
        return real(name, bits, dim, seed=seed, draws=draws, **params)

    monkeypatch.setattr(work, "make_scheme", spy)
    run_sweep(TWO_CHUNKS, executor="serial", progress=False)
    assert [d for _, d in calls] == [4, 4]  # one cell, two chunks of 4 trials
    (seed0, _), (seed1, _) = calls
    assert seed0 != seed1
    # different seeds are different randomness: the two chunks' draws code the same data differently
    x = np.random.default_rng(0).standard_normal((4, 8, 16))
    a = real("KQV", 3, 16, seed=seed0, draws=4).roundtrip(x, x)[0]
    b = real("KQV", 3, 16, seed=seed1, draws=4).roundtrip(x, x)[0]
    assert not np.array_equal(a, b)


def test_cell_id_depends_on_the_chunk_size():
    cfg8 = SweepConfig.from_dict({**TWO_CHUNKS, "n_trials": 32, "chunk_size": 8})
    cfg16 = SweepConfig.from_dict({**TWO_CHUNKS, "n_trials": 32, "chunk_size": 16})
    (cell8,), (cell16,) = cfg8.cells(), cfg16.cells()
    assert cell8.key() == cell16.key()  # the same grid point ...
    assert cfg8.cell_id(cell8) != cfg16.cell_id(cell16)  # ... but not the same numbers, so not the same file


def test_results_depend_on_the_chunk_size():
    """Why the id must carry the chunk size: a resumed sweep would otherwise mix two draws."""
    small = run_sweep({**TWO_CHUNKS, "chunk_size": 2}, executor="serial", progress=False).frame
    large = run_sweep(TWO_CHUNKS, executor="serial", progress=False).frame
    assert not small["snr_k"].equals(large["snr_k"])
    assert set(small["cell_id"]).isdisjoint(large["cell_id"])
