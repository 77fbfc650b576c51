"""The numerical environment (CPU, BLAS) is recorded in every cell and the manifest; a
resume that takes cells of another environment warns once and resumes them (documented
choice in kvstats.sweep.numeric_env: not refused).

Mutants tried: HEAD (no record, no warning: every test fails), a warning per cell (the
once-per-sweep count fails), the cell written with this process's environment instead of
its worker's (the pool test fails), env_differences blind to blas_core (the resume test
sees no warning).
"""

import concurrent.futures as cf
import warnings

import numpy as np
import pytest

import kvstats.sweep.pool as pool
import kvstats.sweep.run as run
from kvstats.results import read_table_meta
from kvstats.sweep import run_sweep
from kvstats.sweep.numeric_env import NumericEnvWarning, env_differences, numeric_env

CFG = {"schemes": ["KQV"], "budgets": [2, 3], "distributions": ["gaussian"], "dims": [16],
       "n_keys": [8], "n_trials": 4, "report": {"comparisons": []}}


def _env_warnings(record):
    return [w for w in record if issubclass(w.category, NumericEnvWarning)]


def test_the_environment_is_numpys_blas_and_this_cpu():
    env = numeric_env()
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    assert env["blas"] == f"{blas['name']} {blas['version']}"
    assert env["simd"] == ",".join(np.show_config(mode="dicts")["SIMD Extensions"]["found"])
    assert env["blas_core"] and env["machine"]
    assert env_differences({**env, "blas_core": "Zen"}, env) == f"blas_core Zen (now {env['blas_core']})"


def test_cells_and_manifest_record_it_and_a_resume_elsewhere_warns_once(tmp_path, monkeypatch):
    first = run_sweep(CFG, out=tmp_path, executor="serial", progress=False)
    here = numeric_env()
    assert first.manifest["numeric_env"] == here and first.manifest["n_other_env"] == 0
    for path in (tmp_path / "cells").iterdir():
        assert read_table_meta(path)[1]["numeric_env"] == here

    with warnings.catch_warnings():   # the same environment: no warning
        warnings.simplefilter("error", NumericEnvWarning)
        same = run_sweep(CFG, out=tmp_path, executor="serial", progress=False)
    assert same.manifest["n_computed"] == 0

    elsewhere = {**here, "blas_core": "Zen"}
    monkeypatch.setattr(run, "numeric_env", lambda: dict(elsewhere))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        moved = run_sweep(CFG, out=tmp_path, executor="serial", progress=False)
    (only,) = _env_warnings(record)   # once for the sweep, not once per cell
    assert str(only.message).startswith("2 of 2 resumed cell(s) were computed in another numerical "
                                        "environment (CPU or BLAS; e.g. cell ")
    assert f"blas_core {here['blas_core']} (now Zen)" in str(only.message)
    assert [c["status"] for c in moved.manifest["cells"]] == ["resumed"] * 2   # not refused
    assert moved.manifest["numeric_env"] == elsewhere and moved.manifest["n_other_env"] == 2
    assert all(c["numeric_env"] == here for c in moved.manifest["cells"])
    assert moved.frame.equals(first.frame)


def test_a_cell_records_the_environment_of_the_worker_that_computed_it(tmp_path, monkeypatch):
    """A remote worker may run on another CPU: its cells carry its environment, not the
    caller's, and the manifest lists them (simulated with a thread pool whose tasks report
    another environment)."""
    worker = {**numeric_env(), "machine": "aarch64"}
    monkeypatch.setattr(pool, "numeric_env", lambda: dict(worker))
    with cf.ThreadPoolExecutor(2) as threads:
        res = run_sweep(CFG, out=tmp_path, executor=threads, progress=False)
    assert res.manifest["numeric_env"] == numeric_env() and res.manifest["n_other_env"] == 2
    assert all(c["numeric_env"] == worker for c in res.manifest["cells"])
    for path in (tmp_path / "cells").iterdir():
        assert read_table_meta(path)[1]["numeric_env"] == worker
    monkeypatch.undo()
    with pytest.warns(NumericEnvWarning, match=r"machine aarch64 \(now "):
        again = run_sweep(CFG, out=tmp_path, executor="serial", progress=False)
    assert again.manifest["n_computed"] == 0


def test_a_replay_on_another_environment_says_its_last_bits_may_differ(tmp_path, monkeypatch):
    from kvstats.sweep import replay

    res = run_sweep(CFG, out=tmp_path, executor="serial", progress=False)
    cid = res.manifest["cells"][0]["id"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericEnvWarning)
        assert replay.replay_trials(tmp_path, cell_id=cid, trials=[0]).profile().equals(
            replay.replay_trials(tmp_path, cell_id=cid, trials=[0]).stored())
    monkeypatch.setattr(replay, "numeric_env", lambda: {**numeric_env(), "blas": "mkl 2025.0"})
    with pytest.warns(NumericEnvWarning, match=rf"cell {cid} was computed in another numerical environment "
                                               r"than this process runs in: blas .* \(now mkl 2025\.0\)"):
        replay.replay_trials(tmp_path, cell_id=cid, trials=[0])
