"""What a sweep says about the chunks it resumed (referee RE3 F1, F2, F3, F4, F5).

- F1: chunks (cells/parts) computed on another CPU or BLAS are counted into the one
  NumericEnvWarning resumed cells give, as usage.md says ("checked on resume as a cell is");
  a cell built from chunks of several environments names each that differs.
- F2: `kvstats report` / load_result on an interrupted folder says to rerun with --resume,
  not "run `kvstats sweep` first" (a rerun without --resume removes every kept chunk).
- F3: a part is not fsync'd (a torn one is refused by its hash and computed again,
  tests/sweep/test_sweep_parts.py), a cell still is.
- F4: the "removed N file(s)" line counts chunks apart from cells.
- F5: a computed cell built partly from resumed chunks records how many in the manifest
  ("resumed_chunks") and the `kvstats sweep` line says it.

The grid is tests/sweep/test_sweep_parts.py's: two cases (N = 8, 12) of two cells, 10 trials
in chunks of 3 + 3 + 3 + 1, one chunk per task, run serially in grid order.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import kvstats
from kvstats.cli import _cell_counts, main
from kvstats.sweep import run as run_mod
from kvstats.sweep.numeric_env import NumericEnvWarning, env_differences, numeric_env

GRID = {"seed": 5, "schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8, 12], "n_trials": 10, "chunk_size": 3, "comparisons": []}


def _interrupt(out: Path, monkeypatch, n: int, grid=GRID) -> KeyboardInterrupt:
    """Run the sweep into ``out`` and stop it (KeyboardInterrupt, returned) after ``n`` chunks:
    after 2 only parts of case N = 8 are kept (4 of them); after 6 its 2 cells and 4 parts of
    N = 12."""
    real, seen = run_mod._compute_task, []

    def task(t, emit=None):
        def counted(done):
            emit(done)
            seen.append(done)
            if len(seen) == n:
                raise KeyboardInterrupt
        return real(t, emit=counted)

    with monkeypatch.context() as m:
        m.setattr(run_mod, "_compute_task", task)
        with pytest.raises(KeyboardInterrupt) as info:
            kvstats.run_sweep(grid, out=out, executor="serial", progress=False)
    return info.value


def _resume_elsewhere(out: Path, monkeypatch) -> tuple:
    here = numeric_env()
    elsewhere = {**here, "blas_core": "Zen"}
    monkeypatch.setattr(run_mod, "numeric_env", lambda: dict(elsewhere))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    monkeypatch.undo()
    return res, [w for w in record if issubclass(w.category, NumericEnvWarning)], here


def test_chunks_of_another_environment_warn_as_cells_do(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _interrupt(out, monkeypatch, 2)   # no cell finished: only chunks are resumed
    res, caught, here = _resume_elsewhere(out, monkeypatch)
    (only,) = caught   # before the fix: no warning at all
    assert str(only.message).startswith("the resumed chunks of 2 cell(s) were computed in another "
                                        "numerical environment (CPU or BLAS; e.g. cell ")
    assert f"blas_core {here['blas_core']} (now Zen)" in str(only.message)
    assert res.manifest["n_other_env"] == 2   # the N = 8 cells: chunks of two environments


def test_resumed_cells_and_chunks_of_another_environment_share_one_warning(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _interrupt(out, monkeypatch, 6)   # case N = 8 written, 2 chunks of each N = 12 cell kept
    res, caught, here = _resume_elsewhere(out, monkeypatch)
    (only,) = caught
    # before the fix: "2 of 2 resumed cell(s) were computed ...", the chunks' cells left out
    assert str(only.message).startswith("2 of 2 resumed cell(s) and the resumed chunks of 2 cell(s) "
                                        "were computed in another numerical environment")
    assert res.manifest["n_other_env"] == 4
    # the N = 12 cells hold chunks of both environments: the difference is described, not the mark
    mixed = [c["numeric_env"] for c in res.manifest["cells"] if c["status"] == "computed"]
    assert len(mixed) == 2 and all(set(e) == {"mixed"} for e in mixed)
    assert env_differences(mixed[0], {**here, "blas_core": "Zen"}) == (
        f"chunks of 2 environments, 1 other: blas_core {here['blas_core']} (now Zen)")
    assert env_differences(mixed[0], here) == "chunks of 2 environments, 1 other: blas_core Zen " \
                                              f"(now {here['blas_core']})"


def test_report_on_an_interrupted_folder_says_to_resume(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    _interrupt(out, monkeypatch, 6)
    with pytest.raises(FileNotFoundError) as info:
        kvstats.load_result(out)
    text = str(info.value)
    assert "holds an interrupted sweep" in text and "2 finished cell(s) and 4 chunk(s)" in text
    assert "--resume" in text and "resume=True" in text and "run `kvstats sweep` first" not in text
    capsys.readouterr()
    assert main(["report", str(out), "--no-figures"]) == 2
    assert "rerun the same sweep with --resume" in capsys.readouterr().err
    # a folder with no sweep at all keeps the old advice
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="run `kvstats sweep` first"):
        kvstats.load_result(tmp_path / "empty")


def test_parts_are_not_fsynced_cells_are(tmp_path, monkeypatch):
    synced: list[str] = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to name the synced files")
    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "sweep"
    kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    monkeypatch.undo()
    names = [Path(p).name for p in synced]
    # 12 parts were written (3 chunks of each of 4 cells before its last): none synced
    assert not [p for p in synced if "/cells/parts/" in p], synced
    assert sum(n.startswith(".") and Path(p).parent == out / "cells" for n, p in zip(names, synced)) == 4


def test_the_clear_line_counts_chunks_apart_from_cells(tmp_path, monkeypatch, capfd):
    out = tmp_path / "sweep"
    _interrupt(out, monkeypatch, 6)
    capfd.readouterr()
    kvstats.run_sweep({**GRID, "seed": 6}, out=out, executor="serial", progress=False)
    err = capfd.readouterr().err
    # before the fix: "(6 of them cells not in this grid)"
    assert ("removed 6 file(s) an earlier sweep left there (2 cell(s) and 4 unfinished cells' "
            "chunk(s) not in this grid)") in err


def test_the_manifest_and_the_sweep_line_count_resumed_chunks(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _interrupt(out, monkeypatch, 6)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    cells = res.manifest["cells"]
    assert sorted((c["status"], c.get("resumed_chunks")) for c in cells) == [
        ("computed", 2), ("computed", 2), ("resumed", None), ("resumed", None)]
    assert json.loads((out / "manifest.json").read_text())["cells"] == cells
    assert _cell_counts(res.manifest) == ("4 cells (2 computed, 2 resumed, checked; 4 chunk(s) of 2 "
                                          "computed cell(s) resumed from cells/parts)")
