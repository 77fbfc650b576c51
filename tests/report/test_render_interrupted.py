"""A report interrupted while writing its files: the retry is taken and completes it.

hypothesis_report writes every file into a hidden staging folder, then moves them into
place under a record marked in progress, report.json last (kvstats.report.folder._commit).
Each test interrupts the write at one stage (a writer monkeypatched to raise
KeyboardInterrupt, or OSError as a full disk would) into an empty folder and into a folder
holding an earlier report, and checks: (1) no staging folder is left; (2) report.json is
there only beside the whole new report (never a stale or partial one); (3)
check_out_folder takes the folder; (4) the retry writes exactly the report a fresh folder
gets, the earlier report's stale files removed and a file of the user's kept. A folder of
someone else's files is still refused, untouched.

Mutants tried (each fails a test here): the render of HEAD before this file (files
written straight into the folder: 14 of 15 fail, e.g. "holds 1 entry (tables/) and nothing
kvstats wrote" on the retry); no in-progress record before the moves (4 fail: the commit
stages refused on retry); report.json moved first instead of last (the partial move leaves
a report.json beside a part of the report); the earlier report.json not removed first (a
stale report.json beside new files); the in-progress record without the earlier report's
files, or _recorded ignoring "pending" (stale files left by the retry); the staging folder
not removed on error (left behind: 13 fail).
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from _sweep_frames import make_frame, sweep_result
from kvstats.report import hypothesis_report
from kvstats.report import folder as report_folder
from kvstats.report.folder import REPORT_RECORD, STAGING_PREFIX
from kvstats.sweep.store import check_out_folder

OPTS = {"bootstrap_resamples": 99, "energy_resamples": 19}


def _result(shift=0.5, extra_case=False):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): shift, ("KQV", 3): 0.0, ("QKQV", 3): shift}, n=12)
    if extra_case:   # the earlier report: a second case, whose figures the new one lacks
        import pandas as pd
        f = pd.concat([f, make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=12, seed=3,
                                     case=("low_rank", "rank=4", 64, 128))], ignore_index=True)
    return sweep_result(f, report={"energy_resolution": "fixed"})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(folder: Path) -> dict[str, object]:
    """Every visible file's content (report.json without its run time and folder paths)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if not p.is_file() or rel.startswith(".") or rel.endswith(".svg"):   # svg: dated
            continue
        if rel == "report.json":
            payload = json.loads(p.read_text())
            payload["figures"] = sorted(payload["figures"])
            out[rel] = payload
        elif rel == REPORT_RECORD:
            record = json.loads(p.read_text())
            out[rel] = (sorted(record), sorted(record["files"]))
        else:
            out[rel] = _digest(p)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The new report, written into a fresh folder: what every retry must leave."""
    out = tmp_path_factory.mktemp("reference")
    hypothesis_report(_result(), out, figures=False, **OPTS)
    return _snapshot(out)


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """A folder holding an earlier report (two cases) and a file of the user's.

    The earlier report's figure is written by hand into its record (drawing real figures
    takes seconds): a file the new report does not write, which the retry must remove.
    """
    out = tmp_path_factory.mktemp("earlier")
    hypothesis_report(_result(shift=1.0, extra_case=True), out, figures=False, **OPTS)
    (out / "figures").mkdir()
    stale = out / "figures" / "kl_vs_bits_low_rank.png"
    stale.write_bytes(b"an earlier report's figure")
    record = json.loads((out / REPORT_RECORD).read_text())
    record["files"]["figures/" + stale.name] = _digest(stale)
    (out / REPORT_RECORD).write_text(json.dumps(record))
    (out / "figures" / "mine.png").write_bytes(b"the user's")
    return out


def _raise_on(monkeypatch, obj, name, when, exc=KeyboardInterrupt):
    """Make ``obj.name`` raise ``exc`` on the calls for which ``when(*args)`` is true."""
    original = getattr(obj, name)

    def patched(*args, **kwargs):
        if when(*args, **kwargs):
            raise exc("interrupted by the test")
        return original(*args, **kwargs)

    monkeypatch.setattr(obj, name, patched)


def _calls_after(k):
    """A ``when`` that is true from the k-th call on (k = 0: the first)."""
    seen = []

    def when(*args, **kwargs):
        seen.append(1)
        return len(seen) > k
    return when


def _writes(name):
    return lambda self, *a, **k: Path(self).name == name


def _interrupt_table(mp):        # the second table: one CSV already in the staging folder
    import pandas as pd
    _raise_on(mp, pd.DataFrame, "to_csv", _calls_after(1))


def _interrupt_markdown(mp):
    _raise_on(mp, Path, "write_text", _writes("report.md"))


def _interrupt_html(mp):
    _raise_on(mp, Path, "write_text", _writes("report.html"), OSError)   # a full disk


def _interrupt_json(mp):
    _raise_on(mp, Path, "write_text", _writes("report.json"))


def _interrupt_removal(mp):      # after the in-progress record, before the earlier files go
    _raise_on(mp, report_folder, "_remove_recorded", lambda *a, **k: True)


def _interrupt_last_move(mp):    # every file but report.json moved
    _raise_on(mp, report_folder.os, "replace", lambda src, dst: STAGING_PREFIX in str(src)
              and Path(dst).name == "report.json")


def _interrupt_final_record(mp):  # every file in place, the record still in progress
    _raise_on(mp, report_folder, "_write_record", lambda out, record: "in_progress" not in record)


STAGES = {"table": _interrupt_table, "markdown": _interrupt_markdown, "html": _interrupt_html,
          "json": _interrupt_json, "removal": _interrupt_removal, "moves": _interrupt_last_move,
          "final_record": _interrupt_final_record}


def _check_interrupted_then_retry(out: Path, interrupt, reference, before):
    with pytest.MonkeyPatch.context() as mp:
        interrupt(mp)
        with pytest.raises((KeyboardInterrupt, OSError), match="interrupted by the test"):
            hypothesis_report(_result(), out, figures=False, **OPTS)
    assert not list(out.glob(STAGING_PREFIX + "*"))                       # (1)
    now = _snapshot(out)
    if "report.json" in now:                                              # (2)
        assert now == before or now["report.json"] == reference["report.json"], \
            "a report.json that is not the new report's, beside new files"
        if now != before:   # the new report.json: every file of the new report is in place
            record = json.loads((out / REPORT_RECORD).read_text())
            assert all(_digest(out / rel) == d for rel, d in record["pending" if "pending" in record
                                                               else "files"].items())
    check_out_folder(out, "report")                                       # (3)
    hypothesis_report(_result(), out, figures=False, **OPTS)             # (4)
    after = _snapshot(out)
    mine = after.pop("figures/mine.png", None)
    assert after == reference
    assert not list(out.glob(STAGING_PREFIX + "*")) and not list(out.glob(".*.tmp"))
    return mine


@pytest.mark.parametrize("stage", ["table", "html", "removal", "moves", "final_record"])
def test_an_interrupted_report_into_a_new_folder_is_retried(tmp_path, reference, stage):
    out = tmp_path / "rep"
    assert _check_interrupted_then_retry(out, STAGES[stage], reference, {}) is None


@pytest.mark.parametrize("stage", list(STAGES))
def test_an_interrupted_report_over_an_earlier_one_is_retried(tmp_path, earlier, reference, stage):
    out = tmp_path / "rep"
    shutil.copytree(earlier, out)
    before = _snapshot(out)
    assert any("low_rank" in rel for rel in before)    # stale figures the retry must remove
    mine = _check_interrupted_then_retry(out, STAGES[stage], reference, before)
    assert mine == hashlib.sha256(b"the user's").hexdigest()      # the user's file: kept


def test_an_interrupted_figure_leaves_nothing_in_the_folder(tmp_path, reference):
    """Figures go to the staging folder too: a failure while drawing adds nothing to out."""
    from kvstats.report import plots

    out = tmp_path / "rep"
    out.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        _raise_on(mp, plots, "save_figure", _calls_after(1))
        with pytest.raises(KeyboardInterrupt):
            hypothesis_report(_result(), out, figures=True, **OPTS)
    assert list(out.iterdir()) == []
    hypothesis_report(_result(), out, figures=False, **OPTS)
    assert _snapshot(out) == reference


def test_a_partial_move_is_completed_by_the_retry(tmp_path, reference, earlier):
    """Interrupted after some files were renamed into place (two figures, which the retry
    does not draw): the record is in progress, no report.json, and the retry removes the
    moved files (its "pending", unchanged) and the earlier report's ("files")."""
    out = tmp_path / "rep"
    shutil.copytree(earlier, out)
    moved = []

    def replace(src, dst, _orig=os.replace):
        if STAGING_PREFIX in str(src):
            if len(moved) == 2:
                raise KeyboardInterrupt("interrupted by the test")
            moved.append(Path(dst))
        return _orig(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_folder.os, "replace", replace)
        with pytest.raises(KeyboardInterrupt):
            hypothesis_report(_result(), out, figures=True, **OPTS)
    record = json.loads((out / REPORT_RECORD).read_text())
    assert record["in_progress"] is True and not (out / "report.json").exists()
    assert len(moved) == 2 and all(m.is_file() and m.parent.name == "figures" for m in moved)
    assert any("low_rank" in rel for rel in record["files"])    # the earlier report's, to remove
    check_out_folder(out, "report")
    hypothesis_report(_result(), out, figures=False, **OPTS)
    after = _snapshot(out)
    after.pop("figures/mine.png")
    assert after == reference


def test_a_folder_of_someone_elses_files_is_still_refused(tmp_path):
    """Hidden entries (a staging folder's name included) do not make a folder kvstats'."""
    (tmp_path / "report.md").write_text("theirs")
    (tmp_path / f"{STAGING_PREFIX}0").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match="nothing kvstats wrote"):
        hypothesis_report(_result(), tmp_path, figures=False, **OPTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "report.md").read_text() == "theirs"


def test_a_staging_folder_left_by_a_killed_report_is_removed_by_the_next(tmp_path, reference):
    """kill -9 skips the finally that removes the staging folder: the next report does."""
    out = tmp_path / "rep"
    out.mkdir()
    left = out / f"{STAGING_PREFIX}0123456789ab"
    (left / "tables").mkdir(parents=True)
    (left / "tables" / "summary.csv").write_text("a part of a killed report")
    hypothesis_report(_result(), out, figures=False, **OPTS)
    assert not left.exists() and not list(out.glob(STAGING_PREFIX + "*"))
    assert _snapshot(out) == reference
