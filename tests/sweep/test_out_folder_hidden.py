"""check_out_folder: hidden entries (.DS_Store, .gitkeep, .git/) are not the user's content.

A folder holding only those was refused as "a folder of someone else's files"; no file
kvstats writes has a hidden name (its lock aside), so none of them can be overwritten.
Mutant tried: the hidden-name filter removed (the first test fails).
"""

import pytest

import kvstats
from kvstats.sweep.store import check_out_folder


def _hidden(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".DS_Store").write_bytes(b"\0")
    (folder / ".gitkeep").write_text("")
    (folder / ".git").mkdir()
    return folder


def test_a_folder_of_only_hidden_entries_is_taken_and_they_are_kept(tmp_path):
    out = _hidden(tmp_path / "sweep")
    for what in ("sweep", "report"):
        check_out_folder(out, what)
    kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
                       "dims": [16], "n_keys": [8], "n_trials": 4}, out=out, executor="serial",
                      progress=False)
    assert (out / ".DS_Store").read_bytes() == b"\0" and (out / ".gitkeep").exists()
    assert (out / "manifest.json").exists()


def test_a_visible_entry_beside_hidden_ones_is_still_refused_and_named_alone(tmp_path):
    out = _hidden(tmp_path / "mine")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds 1 entry \(notes.txt\) and nothing kvstats wrote"):
        check_out_folder(out)
