"""A folder at ``cells/<id>.parquet`` (a cell's file name) is an IsADirectoryError naming
it, found before any compute, with or without resume; it was taken as an absent cell
(and, without pyarrow's luck, a failed write after the compute).

Mutants tried: HEAD (both sweeps start computing the cell: both cases fail), the check
only in load_cell (the sweep without resume computes first: its case fails).
"""

import pytest

from kvstats.sweep import run_sweep

CFG = {"schemes": ["KQV"], "budgets": [2, 3], "distributions": ["gaussian"], "dims": [16],
       "n_keys": [8], "n_trials": 4, "report": {"comparisons": []}}


def _blocked(out):
    run_sweep(CFG, out=out, executor="serial", progress=False)
    cells = sorted((out / "cells").iterdir())
    blocked = cells[0]
    blocked.unlink()
    (blocked / "inner").mkdir(parents=True)   # a folder at the cell's file name
    return blocked, {p: p.stat().st_mtime_ns for p in cells[1:]}


@pytest.mark.parametrize("resume", [True, False])
def test_a_folder_at_a_cells_file_name_is_refused_before_any_compute(tmp_path, resume, monkeypatch):
    blocked, others = _blocked(tmp_path)
    import kvstats.sweep.run as run

    def no_compute(*args, **kwargs):
        raise AssertionError("computed before the check")

    monkeypatch.setattr(run, "_compute_task", no_compute)
    with pytest.raises(IsADirectoryError) as exc:
        run_sweep(CFG, out=tmp_path, executor="serial", progress=False, resume=resume)
    assert str(exc.value).startswith(f"{str(blocked)!r} is not a file, but the place of cell "
                                     f"{blocked.stem}'s file")
    assert "move it out of the cells folder" in str(exc.value)
    assert {p: p.stat().st_mtime_ns for p in others} == others   # nothing rewritten
    assert (blocked / "inner").is_dir()                           # nor removed
