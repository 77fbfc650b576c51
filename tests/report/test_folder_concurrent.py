"""Two reports written into one folder at the same time (kvstats/report/folder.py).

``hypothesis_report`` takes no folder lock (``kvstats report`` does), so two calls from
Python, in two threads or two processes, may write into one folder at once. Each stages
its files in a hidden folder of its own, held by a lock on a file in it (``flock``, else a
POSIX record lock); a staging folder is removed as a leftover only when nobody holds its
lock; the move into place is serialised by a lock on the folder. The tests force the overlap that broke the earlier code: both calls have
created their staging folder before either writes into it (the earlier code removed the
first's folder when the second started: FileNotFoundError), and both commit at once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import shutil
import threading
from pathlib import Path

import pytest

from _sweep_frames import make_frame, sweep_result
from kvstats.report import folder as report_folder
from kvstats.report import hypothesis_report
from kvstats.report.folder import REPORT_RECORD, STAGING_PREFIX

OPTS = {"bootstrap_resamples": 99, "energy_resamples": 19, "figures": False}


def _no_lock(fd, op):
    """flock (or lockf) on a file system that keeps no such locks."""
    raise OSError(errno.ENOLCK, "simulated: no locks available")


def _result(shift):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): shift, ("KQV", 3): 0.0, ("QKQV", 3): shift}, n=12)
    return sweep_result(f, report={"energy_resolution": "fixed"})


def _check_complete(out: Path) -> dict:
    """The folder holds one whole report: its record complete, naming exactly the visible
    files, each with its content's SHA-256; no staging folder left; report.json's numbers
    are those of report.md's report (same comparisons table)."""
    record = json.loads((out / REPORT_RECORD).read_text())
    assert "in_progress" not in record and "pending" not in record
    files = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")
             and p.name != REPORT_RECORD}
    assert record["files"] == files
    assert not list(out.glob(STAGING_PREFIX + "*"))
    payload = json.loads((out / "report.json").read_text())
    table = (out / "tables" / "comparisons.csv").read_text()
    return {"payload_seed": payload["options"]["seed"], "rows": len(payload["comparisons"]),
            "table_lines": len(table.splitlines())}


def _overlapping(monkeypatch, parties, barrier_type):
    """Make every call wait, once its staging folder exists, until all have one; and again
    just before the commit, so that the commits start together."""
    staged, committing = barrier_type(parties), barrier_type(parties)
    stage_fn, commit_fn = report_folder._staging_folder, report_folder._commit

    def staging(out):
        stage = stage_fn(out)
        staged.wait(timeout=120)
        return stage

    def commit(stage, out, **kwargs):
        assert stage.is_dir()   # the other call's start left it alone
        committing.wait(timeout=120)
        return commit_fn(stage, out, **kwargs)

    import kvstats.report.render as render
    monkeypatch.setattr(render, "_staging_folder", staging)
    monkeypatch.setattr(render, "_commit", commit)


def _watch_moves(monkeypatch):
    """Count the calls moving files in at the same time; the first one in waits (up to a
    few seconds) for a second to arrive, which only a missing folder lock lets happen."""
    state = {"active": 0, "most": 0}
    guard, second = threading.Lock(), threading.Event()
    move = report_folder._move_in

    def watched(*args):
        with guard:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
            first = state["active"] == 1
            if not first:
                second.set()
        try:
            if first:
                second.wait(timeout=3)
            return move(*args)
        finally:
            with guard:
                state["active"] -= 1

    monkeypatch.setattr(report_folder, "_move_in", watched)
    return state


@pytest.mark.parametrize("flock", [True, False])
def test_two_threads_write_reports_into_one_folder(tmp_path, monkeypatch, flock):
    """Without flock (a network file system) the threads of one process still commit one
    at a time (the process's commit lock), and hold their staging folders by record locks."""
    if not flock:
        monkeypatch.setattr(report_folder.fcntl, "flock", _no_lock)
    out = tmp_path / "rep"
    _overlapping(monkeypatch, 2, threading.Barrier)
    moves = _watch_moves(monkeypatch)
    errors: list[BaseException] = []

    def write(shift, seed):
        try:
            hypothesis_report(_result(shift), out, seed=seed, **OPTS)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, k)) for k, s in enumerate((0.5, 1.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert moves["most"] == 1   # one commit at a time
    done = _check_complete(out)
    assert done["payload_seed"] in (0, 1) and done["rows"] > 0
    # and a third report over it replaces it whole
    monkeypatch.undo()
    hypothesis_report(_result(0.5), out, seed=7, **OPTS)
    assert _check_complete(out)["payload_seed"] == 7


def _process_report(out, shift, seed, staged, committing, queue):
    """A child process (forked: inherits the module and the barriers)."""
    stage_fn, commit_fn = report_folder._staging_folder, report_folder._commit
    import kvstats.report.render as render

    def staging(o):
        stage = stage_fn(o)
        staged.wait(timeout=120)
        return stage

    def commit(stage, o, **kwargs):
        committing.wait(timeout=120)
        return commit_fn(stage, o, **kwargs)

    render._staging_folder, render._commit = staging, commit
    try:
        hypothesis_report(_result(shift), out, seed=seed, **OPTS)
        queue.put("ok")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_two_processes_write_reports_into_one_folder(tmp_path):
    ctx = multiprocessing.get_context("fork")
    out = tmp_path / "rep"
    staged, committing, queue = ctx.Barrier(2), ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_process_report, args=(out, s, k, staged, committing, queue))
             for k, s in enumerate((0.5, 1.0))]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    assert results == ["ok", "ok"] and [p.exitcode for p in procs] == [0, 0]
    _check_complete(out)


def test_a_staging_folder_still_held_is_not_a_leftover(tmp_path):
    """Another call's staging folder stays while its lock is held, and goes once released
    (and an unheld one, a killed report's, goes at once)."""
    out = tmp_path / "rep"
    out.mkdir()
    held = report_folder._staging_folder(out)
    (held / "part.csv").write_text("another report, writing")
    killed = out / f"{STAGING_PREFIX}0123456789ab"
    killed.mkdir()
    mine = report_folder._staging_folder(out)
    assert held.is_dir() and (held / "part.csv").is_file() and not killed.exists()
    report_folder._release_staging(mine)
    report_folder._release_staging(held)
    assert not held.exists() and not mine.exists() and report_folder._STAGES == {}


# a staging folder held by another process whose file system keeps no flock (as the test's)
_HOLDER = """
import errno, fcntl, sys
from pathlib import Path
def no_flock(fd, op):
    raise OSError(errno.ENOLCK, "simulated")
fcntl.flock = no_flock
from kvstats.report import folder
print(folder._staging_folder(Path(sys.argv[1])), flush=True)
sys.stdin.read()   # until the test closes it
"""


def test_without_flock_staging_folders_are_held_by_a_record_lock(tmp_path, monkeypatch):
    """Some network file systems refuse flock (ENOLCK): a staging folder is then held by a
    POSIX record lock, as a sweep's folder is (kvstats.sweep.locks.try_lock). Another
    process's held folder and this process's own (a record lock is the process's: it
    cannot tell them apart, the registry does) are kept; a killed report's, with its lock
    file unheld or without one, is removed; the report is written whole."""
    import subprocess
    import sys

    monkeypatch.setattr(report_folder.fcntl, "flock", _no_lock)
    out = tmp_path / "rep"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        theirs = Path(holder.stdout.readline().strip())
        own = report_folder._staging_folder(out)
        killed = out / f"{STAGING_PREFIX}0123456789ab"
        killed.mkdir()
        (killed / report_folder.STAGE_LOCK).write_bytes(b"")
        born_dead = out / f"{STAGING_PREFIX}ba9876543210"   # killed before its lock file
        born_dead.mkdir()
        hypothesis_report(_result(0.5), out, **OPTS)
        assert theirs.is_dir() and own.is_dir() and not killed.exists() and not born_dead.exists()
        report_folder._release_staging(own)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0
    theirs.rename(tmp_path / "theirs")   # its process is gone: _check_complete counts no stage
    _check_complete(out)


def test_a_file_system_without_any_lock_still_gets_its_report(tmp_path, monkeypatch):
    """Neither flock nor a record lock: the report is written as before the locks, and a
    staging folder it cannot tell abandoned from held (it has its lock file) is kept."""
    monkeypatch.setattr(report_folder.fcntl, "flock", _no_lock)
    monkeypatch.setattr(report_folder.fcntl, "lockf", _no_lock)
    out = tmp_path / "rep"
    out.mkdir()
    other = out / f"{STAGING_PREFIX}0123456789ab"
    other.mkdir()
    (other / report_folder.STAGE_LOCK).write_bytes(b"")
    hypothesis_report(_result(0.5), out, **OPTS)
    assert other.is_dir()
    shutil.rmtree(other)
    _check_complete(out)


def _hold_a_staging_folder(out, ready):
    """A child report that has staged its files and then hangs (until killed)."""
    stage = report_folder._staging_folder(out)
    (stage / "part.csv").write_text("a report being written")
    ready.put(str(stage))
    threading.Event().wait()


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_killed_reports_staging_folder_goes_only_once_it_is_dead(tmp_path):
    import os
    import signal

    ctx = multiprocessing.get_context("fork")
    out = tmp_path / "rep"
    out.mkdir()
    ready = ctx.Queue()
    child = ctx.Process(target=_hold_a_staging_folder, args=(out, ready))
    child.start()
    try:
        theirs = Path(ready.get(timeout=120))
        mine = report_folder._staging_folder(out)      # the child is alive: its folder stays
        assert (theirs / "part.csv").is_file()
        report_folder._release_staging(mine)
        os.kill(child.pid, signal.SIGKILL)             # kill -9: no finally runs
        child.join()
        assert theirs.is_dir()
        mine = report_folder._staging_folder(out)      # its lock died with it: a leftover
        assert not theirs.exists()
        report_folder._release_staging(mine)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
