"""How a report's files reach its folder: staged, then moved into place under a record.

:func:`kvstats.report.hypothesis_report` writes every file into a hidden staging folder
inside the output folder (:func:`_staging_folder`), then :func:`_commit` moves them into
place while the folder's record (:data:`REPORT_RECORD`) says so. Whatever interrupts the
writing (KeyboardInterrupt, a crash, a full disk), the folder is left as it was or with a
record :func:`kvstats.sweep.store.check_out_folder` takes, so the retry is never refused
as a folder of someone else's files; its retry removes what the interrupted report moved
in; and a ``report.json`` is only ever beside the whole report it describes.

Reports written into one folder at the same time (two threads, two processes calling
``hypothesis_report``, which takes no folder lock) each write into a staging folder of
their own, held by a lock on a file in it (``flock``, or a POSIX record lock where the file
system keeps no ``flock``; so that neither removes the other's as a leftover), and move
their files in one after the other under a lock on the folder (:func:`_commit_lock`; not
between processes on a file system without ``flock``): both finish, and the folder holds
the whole report of the one that committed last.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# the record's reading and removal sit with the sweep's folder rules, which use them too (a
# sweep taking a folder removes the report's recorded files): the store sits below the report
from kvstats.sweep.folder import _recorded, _remove_recorded, _sha256
from kvstats.sweep.locks import NoFileLocksError, try_lock

try:
    import fcntl
except ImportError:   # pragma: no cover - not on POSIX: no locks, no leftover removal
    fcntl = None  # type: ignore[assignment]

__all__ = ["REPORT_RECORD", "STAGING_PREFIX"]

#: The report's record of the files it wrote (relative path → SHA-256), in ``out_dir``:
#: the next report into the same folder removes exactly those that are unchanged, so
#: stale figures of an earlier report do not linger and no other file is ever touched.
#: While a report moves its files into place the record carries ``"in_progress": true``
#: and the files of both reports (see :func:`_commit`).
REPORT_RECORD = "report_files.json"
#: Name prefix of the hidden folder, inside ``out_dir``, where a report writes its files
#: before moving them into place (hidden: :func:`kvstats.sweep.store.check_out_folder`
#: does not count it; removed however the write ends, or by the next report).
STAGING_PREFIX = ".report-staging-"


def _write_record(out: Path, record: dict[str, Any]) -> Path:
    """Write the record atomically (a reader sees the old record or the new one, never a part)."""
    from kvstats.sweep.store import atomic_write   # the store sits below; lazy: no cycle

    text = json.dumps({"kvstats_report_files": 1, **record}, indent=1, sort_keys=True)
    return atomic_write(out / REPORT_RECORD, lambda tmp: tmp.write_text(text, encoding="utf-8"))


#: The file in a staging folder whose lock its report holds while it writes there (a file,
#: not the folder: a POSIX record lock, the fallback where the file system keeps no
#: ``flock``, needs a descriptor open for writing, which a folder's never is).
STAGE_LOCK = ".lock"

# staging folder -> its open lock file (open while its report writes); the guard also keeps
# this process's threads from judging each other's folders (a record lock is the process's:
# it would not tell one thread's folder from another's)
_STAGES: dict[Path, Any] = {}
_STAGES_GUARD = threading.Lock()


def _try_lock(fh: Any) -> bool | None:
    """Take the exclusive lock of the open file ``fh`` without waiting, as a sweep locks its
    folder (:func:`kvstats.sweep.locks.try_lock`: ``flock``, else a POSIX record lock
    where the file system keeps no ``flock`` locks): True, False when another process
    holds it, None where the file system keeps neither kind."""
    try:
        return try_lock(fh)
    except NoFileLocksError:
        return None


def _remove_if_abandoned(stale: Path) -> None:
    """Remove the staging folder ``stale`` if no report holds its lock any more (its
    process was killed outright: ``kill -9``, power loss; the kernel dropped the lock), or
    if it has no lock file (killed between the two steps of :func:`_staging_folder`, which
    takes another folder if this was one it is making now). Called under ``_STAGES_GUARD``."""
    if stale in _STAGES:   # this process's, still writing
        return
    try:
        fh = open(stale / STAGE_LOCK, "r+b")   # noqa: SIM115 - closed below, after the removal
    except FileNotFoundError:
        shutil.rmtree(stale, ignore_errors=True)
        return
    except OSError:   # not ours to open
        return
    with fh:   # closing drops the lock, after the removal
        if _try_lock(fh) is True:   # nobody writes there: a leftover (no locks at all: kept)
            shutil.rmtree(stale, ignore_errors=True)


def _staging_folder(out: Path) -> Path:
    """A new hidden folder in ``out`` to write one report into, held by this call.

    Each call gets its own folder (a random name) and holds an exclusive lock on the file
    :data:`STAGE_LOCK` in it until :func:`_release_staging` (``flock``, or a POSIX record
    lock where the file system keeps no ``flock``, as a sweep's folder lock): two reports
    written into one folder at once, by two threads or two processes
    (``hypothesis_report`` takes no folder lock), leave each other's staging folder alone.
    A staging folder whose lock nobody holds is a leftover of a report killed outright,
    and is removed here. Where no lock works (Windows, a file system that keeps neither
    kind) only a staging folder without its lock file is taken for a leftover.
    """
    with _STAGES_GUARD:
        if fcntl is not None:
            for stale in out.glob(STAGING_PREFIX + "*"):
                if stale.is_dir() and not stale.is_symlink():
                    _remove_if_abandoned(stale)
        while True:
            stage = out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
            stage.mkdir()
            if fcntl is None:
                return stage
            try:
                fh = open(stage / STAGE_LOCK, "xb")   # noqa: SIM115 - held until released
            except FileNotFoundError:   # another report took it for a leftover between the steps
                continue
            # another report may have locked and removed it between the two steps: it is
            # ours only when we hold its lock and the path is still this very file
            try:
                mine = _try_lock(fh) is not False and os.path.samestat(os.fstat(fh.fileno()),
                                                                       os.stat(fh.name))
            except FileNotFoundError:
                mine = False
            if mine:
                _STAGES[stage] = fh
                return stage
            fh.close()


def _release_staging(stage: Path) -> None:
    """Remove the staging folder of a report, however it ended, then drop its lock."""
    shutil.rmtree(stage, ignore_errors=True)
    with _STAGES_GUARD:
        fh = _STAGES.pop(stage, None)
    if fh is not None:
        fh.close()


# this process's commits, one at a time (the folder's flock serialises processes)
_COMMITS = threading.Lock()


@contextmanager
def _commit_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s report lock (a blocking ``flock`` on the folder's own descriptor, and
    this process's commit lock) while one report moves its files in: reports written into
    one folder at once commit one after the other, each reading the record the previous
    one left complete.

    A folder cannot take the POSIX record lock a file system without ``flock`` offers
    (it needs a descriptor open for writing), so there only this process's threads are
    serialised: two processes calling ``hypothesis_report`` into one folder may commit at
    the same moment, and the folder may then hold files of both, under the record of the
    one that wrote it last (its other files kept as changed by hand). ``kvstats report``
    holds the folder's lock (:func:`kvstats.sweep.store.lock_dir`, which does fall back
    to a record lock), so two of them never commit into one folder at once.
    """
    with _COMMITS:
        if fcntl is None:
            yield
            return
        fd = os.open(out, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)   # waits: a commit takes a moment
            except OSError:   # a file system without flock: see above
                pass
            yield
        finally:
            os.close(fd)


def _commit(stage: Path, out: Path, seconds: float | None = None) -> dict[str, str]:
    """Move the report written into ``stage`` into ``out``, the record kept valid throughout.

    1. The record is rewritten, ``"in_progress": true``, naming the earlier report's files
       (``"files"``) and the staged ones with their digests (``"pending"``): from here on
       an interruption leaves a folder :func:`kvstats.sweep.store.check_out_folder` takes,
       and whose next report removes both sets' files where unchanged.
    2. ``report.json`` goes first, so that no earlier report's JSON stands beside a part
       of this one; then the earlier report's unchanged files (no stale figure stays).
    3. The staged files are renamed into place (one file system: each rename is atomic),
       ``report.json`` last: a folder holding ``report.json`` holds the whole report.
    4. The record is rewritten complete: this report's files and digests (and ``seconds``,
       the report's run time when given: kept out of ``report.json``, which a rerun of the
       same report then writes byte-identical).

    The four steps hold the folder's report lock (:func:`_commit_lock`): of two reports
    written into one folder at once, the second to commit replaces the first whole.

    Returns the record's files (relative path → SHA-256).
    """
    rels = sorted((p.relative_to(stage).as_posix() for p in stage.rglob("*")
                   if p.is_file() and p != stage / STAGE_LOCK),
                  key=lambda rel: (rel == "report.json", rel))   # report.json last
    new = {rel: _sha256(stage / rel) for rel in rels}
    with _commit_lock(out):   # another report into this folder commits before or after
        return _move_in(stage, out, rels, new, seconds)


def _move_in(stage: Path, out: Path, rels: list[str], new: dict[str, str],
             seconds: float | None = None) -> dict[str, str]:
    """Steps 1-4 of :func:`_commit`, under the folder's report lock."""
    earlier = _recorded(out)
    _write_record(out, {"in_progress": True, "files": {k: sorted(v) for k, v in earlier.items()},
                        "pending": new})
    report_json = out / "report.json"
    if report_json.is_file() or report_json.is_symlink():
        report_json.unlink()
    _remove_recorded(out, earlier)
    for rel in rels:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / rel, out / rel)
    _write_record(out, {"files": new, **({"seconds": seconds} if seconds is not None else {})})
    return new
