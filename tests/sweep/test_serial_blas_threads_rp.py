"""A serial sweep runs one BLAS thread, as the pool's workers do (referee RP, F1).

The default pool's workers limit BLAS to one thread each (pool._one_blas_thread); the
serial path (``--workers 1``, ``executor="serial"``, a one-task sweep such as every real
capture) kept the process's threads, and on a loaded 2-core machine a sweep took 61.9 s
instead of 10.1 s (the cells are bit-identical either way). The limit is restored after.
"""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

import kvstats
from kvstats.sweep import run


def _blas_threads():
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_a_serial_sweep_computes_with_one_blas_thread_and_restores_the_limit(monkeypatch):
    seen = []
    compute = run._compute_task

    def spy(task, emit=None):
        seen.append(_blas_threads())
        return compute(task, emit=emit)

    monkeypatch.setattr(run, "_compute_task", spy)
    grid = {"schemes": ["KQV"], "budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 4,
            "distributions": ["gaussian"], "comparisons": []}
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}   # the test can see a limit that was not set
        kvstats.run_sweep(grid, executor="serial", progress=False)
        assert _blas_threads() == {2}
    assert seen and all(s == {1} for s in seen)
