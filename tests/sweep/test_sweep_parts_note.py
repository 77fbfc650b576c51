"""The note an interrupted sweep's error gets counts the chunks it kept of unfinished cells
(kvstats.sweep.run._kept), not only the finished cells: a user deciding whether to resume an
hours-long case must learn that its finished chunks are on disk."""

from __future__ import annotations

import pytest

import kvstats
from kvstats.sweep import run as run_mod

GRID = {"seed": 5, "schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8, 12], "n_trials": 10, "chunk_size": 3, "comparisons": []}


def _stop_after(monkeypatch, n: int) -> None:
    """Raise KeyboardInterrupt once the serial runner has been given ``n`` chunks."""
    real, seen = run_mod._compute_task, []

    def task(t, emit=None):
        def counted(done):
            emit(done)
            seen.append(done)
            if len(seen) == n:
                raise KeyboardInterrupt
        return real(t, emit=counted)

    monkeypatch.setattr(run_mod, "_compute_task", task)


def test_the_interrupt_note_counts_the_kept_chunks_of_unfinished_cells(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    # 4 chunks per case, one case after the other: after 6 chunks case N = 8's two cells are
    # written and chunks 0, 1 of case N = 12's two cells are parts
    _stop_after(monkeypatch, 6)
    with pytest.raises(KeyboardInterrupt) as info:
        kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    cells = out / "cells"
    assert info.value.__notes__ == [
        f"[2 of 4 cells finished, kept in {cells} (and 4 finished chunk(s) of 2 unfinished cell(s) "
        f"in {cells / 'parts'}): rerun with resume (kvstats sweep --resume; run_sweep's default) to "
        "compute only the other 2 (their missing chunks)]"]


def test_without_kept_chunks_the_note_is_unchanged(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _stop_after(monkeypatch, 4)   # exactly case N = 8: its cells written, nothing of N = 12
    with pytest.raises(KeyboardInterrupt) as info:
        kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    assert info.value.__notes__ == [
        f"[2 of 4 cells finished, kept in {out / 'cells'}: rerun with resume (kvstats sweep --resume; "
        "run_sweep's default) to compute only the other 2]"]
