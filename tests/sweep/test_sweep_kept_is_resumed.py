"""An interrupted sweep's note counts the chunks the resume then reuses (referee T10 F1).

A chunk's trials are drawn once for all the cells of its case, so a resume
(kvstats.sweep.parts.resume_parts) reuses a chunk only when every unfinished cell of the case
has its part file. The note (kvstats.sweep.run._kept) counted every part file: an interrupt
between a chunk's cells' writes made it promise chunks the resume computed again (T10: 82
kept, 72 resumed). A task's parts are also written chunk by chunk across its cells (all cells
of chunk b, then b + 1), not cell by cell: an interrupt while a task's results are written
loses at most one chunk, where cell by cell it lost every chunk of the task.

The grid: one case of four cells (KQV, QKQV at 2 and 3 bits), 12 trials in chunks of 3, in
two tasks of two chunks each (plan._TARGET_TASKS = 2). The interrupt comes at the 7th part
write: chunk by chunk, 6 writes are chunk 0 of the four cells and chunk 1 of two, so chunk 0
(4 part files) is what a resume reuses.
"""

from __future__ import annotations

import concurrent.futures as cf
import re

import pytest

import kvstats
from kvstats.sweep import plan as plan_mod
from kvstats.sweep import run as run_mod
from kvstats.sweep.run import _kept

GRID = {"seed": 11, "schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8], "n_trials": 12, "chunk_size": 3, "comparisons": []}
N_WRITES = 6   # part files on disk when the interrupt comes


def _interrupted(out, monkeypatch, executor) -> tuple[KeyboardInterrupt, list[tuple[str, int]]]:
    """Run GRID into ``out`` and stop it at the 7th part write; returns the error and the
    (cell id, chunk) of the parts written, in order."""
    real, written = run_mod.write_part, []

    def counted(cells_dir, cid, chunk, frame, **kw):
        if len(written) == N_WRITES:
            raise KeyboardInterrupt
        written.append((cid, chunk))
        return real(cells_dir, cid, chunk, frame, **kw)

    with monkeypatch.context() as m:
        m.setattr(plan_mod, "_TARGET_TASKS", 2)
        m.setattr(run_mod, "write_part", counted)
        with pytest.raises(KeyboardInterrupt) as info:
            kvstats.run_sweep(GRID, out=out, executor=executor, progress=False)
    return info.value, written


@pytest.mark.parametrize("pool", [False, True], ids=["serial", "executor"])
def test_the_note_counts_the_chunks_the_resume_reuses(tmp_path, monkeypatch, capsys, same_bits, pool):
    out = tmp_path / "sweep"
    # an executor returns a whole task (two chunks of four cells) at once; serially each
    # chunk's four cells come together
    if pool:
        with cf.ThreadPoolExecutor(max_workers=1) as ex:
            exc, written = _interrupted(out, monkeypatch, ex)
    else:
        exc, written = _interrupted(out, monkeypatch, "serial")
    # chunk by chunk: every cell's chunk 0, then chunk 1 (before: cell by cell, a task's two
    # chunks of cell 1, then of cell 2, ..., and the fourth cell got none)
    assert [chunk for _, chunk in written] == [0, 0, 0, 0, 1, 1]
    (note,) = exc.__notes__
    said = re.search(r"\(and (\d+) finished chunk\(s\) of (\d+) unfinished cell\(s\) in ", note)
    assert said is not None, note
    # before: "6 finished chunk(s) of 4 unfinished cell(s)" (serial) or "of 3" (executor)
    assert (int(said[1]), int(said[2])) == (4, 4), note
    assert note.startswith(f"[0 of 4 cells finished, kept in {out / 'cells'} (and 4 finished chunk(s)")
    capsys.readouterr()

    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    err = capsys.readouterr().err
    # the resume reuses exactly what the note counted, and says the same numbers
    assert f"resuming {said[1]} chunk(s) of {said[2]} unfinished cell(s) from " in err, err
    assert sum(c.get("resumed_chunks", 0) for c in res.manifest["cells"]) == int(said[1])
    same_bits(res.frame, kvstats.run_sweep(GRID, executor="serial", progress=False).frame)


def test_a_part_another_cell_of_its_case_lacks_is_not_counted(tmp_path):
    """By the files' names: cells a, b of one case, c of another. Chunk 1 of a is not one
    b has, so only chunk 0 counts for the case; c's chunks count alone."""
    from kvstats.sweep.parts import _kept_chunks, _shared_chunks   # here: the old code lacks them
    cells = tmp_path / "cells"
    (cells / "parts").mkdir(parents=True)
    a, b, c = "a" * 20, "b" * 20, "c" * 20
    for name in (f"{a}-0", f"{a}-1", f"{b}-0", f"{c}-0", f"{c}-2"):
        (cells / "parts" / f"{name}.parquet").write_bytes(b"")
    case_of = {a: "one", b: "one", c: "two"}
    assert _kept_chunks(cells, case_of) == {a: {0}, b: {0}, c: {0, 2}}
    note = _kept(cells, 1, 4, unfinished=set(case_of), case_of=case_of)
    assert f"(and 4 finished chunk(s) of 3 unfinished cell(s) in {cells / 'parts'})" in note, note
    # an unfinished cell of the case with no part at all: nothing of the case is reused
    assert _kept_chunks(cells, {**case_of, "d" * 20: "one"})[a] == set()
    # the rule resume_parts applies to the parts that check out
    assert _shared_chunks([("one", {0, 1}), ("one", {0}), ("two", {0, 2})]) == {"one": {0}, "two": {0, 2}}
