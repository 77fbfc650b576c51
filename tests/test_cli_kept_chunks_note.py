"""The command's words for a sweep stopped with chunks kept (kvstats._cli_output.kept_note):
the note run_sweep attaches (kvstats.sweep.run._kept) counts the finished chunks of
unfinished cells in cells/parts; the command must say to rerun with --resume even when no
cell had finished (a rerun without it deletes the chunks), in its own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvstats._cli_output import kept_note
from kvstats.sweep.run import _kept

CID = ["0123456789abcdef0123", "fedcba9876543210fedc"]


@pytest.fixture()
def cells(tmp_path) -> Path:
    """cells/ with 3 chunks of 2 unfinished cells in cells/parts."""
    parts = tmp_path / "cells" / "parts"
    parts.mkdir(parents=True)
    for name in (f"{CID[0]}-0", f"{CID[0]}-1", f"{CID[1]}-0"):
        (parts / f"{name}.parquet").write_bytes(b"")
    return tmp_path / "cells"


def test_no_cell_finished_but_chunks_kept_says_resume(cells):
    text = kept_note(_kept(cells, 0, 6, unfinished=set(CID)))
    assert text == (f"no cell of 6 had finished; 3 finished chunk(s) of 2 unfinished cell(s) are kept "
                    f"in {cells / 'parts'}: rerun the same command with --resume to compute only the "
                    "missing chunks")


def test_some_cells_finished_and_chunks_kept_in_the_commands_words(cells):
    text = kept_note(_kept(cells, 2, 6, unfinished=set(CID)))
    assert text == (f"2 of 6 cells finished, kept in {cells} (and 3 finished chunk(s) of 2 unfinished "
                    f"cell(s) in {cells / 'parts'}): rerun the same command with --resume to compute "
                    "only the other 4 (their missing chunks)")


def test_without_chunks_the_words_are_as_before(cells):
    assert kept_note(_kept(cells, 0, 6)) == "no cell of 6 had finished: rerun the same command"
    assert kept_note(_kept(cells, 2, 6)) == (f"2 of 6 cells finished, kept in {cells}: rerun the same "
                                            "command with --resume to compute only the other 4")
