"""The note an interrupted sweep's error gets counts the chunks it kept of unfinished cells
(kvstats.sweep.run._kept), not only the finished cells: a user deciding whether to resume an
hours-long case must learn that its finished chunks are on disk."""

from __future__ import annotations

# the grid (two cases of two cells, chunks of 3 + 3 + 3 + 1 trials, run serially in grid
# order) and the interrupt after n chunks of the resume-notes tests
from test_sweep_parts_resume_notes import _interrupt


def test_the_interrupt_note_counts_the_kept_chunks_of_unfinished_cells(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    # after 6 chunks case N = 8's two cells are written and chunks 0, 1 of case N = 12's two
    # cells are parts
    exc = _interrupt(out, monkeypatch, 6)
    cells = out / "cells"
    assert exc.__notes__ == [
        f"[2 of 4 cells finished, kept in {cells} (and 4 finished chunk(s) of 2 unfinished cell(s) "
        f"in {cells / 'parts'}): rerun with resume (kvstats sweep --resume; run_sweep's default) to "
        "compute only the other 2 (their missing chunks)]"]


def test_without_kept_chunks_the_note_is_unchanged(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    exc = _interrupt(out, monkeypatch, 4)   # exactly case N = 8: its cells written, nothing of N = 12
    assert exc.__notes__ == [
        f"[2 of 4 cells finished, kept in {out / 'cells'}: rerun with resume (kvstats sweep --resume; "
        "run_sweep's default) to compute only the other 2]"]
