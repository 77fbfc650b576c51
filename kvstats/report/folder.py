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
their own, held by an ``flock`` (so that neither removes the other's as a leftover), and
move their files in one after the other under a lock on the folder (:func:`_commit_lock`):
both finish, and the folder holds the whole report of the one that committed last.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _recorded(out: Path) -> dict[str, set[str]]:
    """Relative path → the SHA-256 digests the folder's record gives it (empty: no record).

    A complete record maps each path to one digest; an in-progress one (an interrupted
    :func:`_commit`) also lists, under ``"pending"``, the files it was moving in, and its
    ``"files"`` may give a path several digests. An unreadable record gives nothing.
    """
    try:
        record = json.loads((out / REPORT_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    out_files: dict[str, set[str]] = {}
    for key in ("files", "pending"):
        part = record.get(key, {})
        for rel, digests in (part.items() if isinstance(part, dict) else ()):
            digests = [digests] if isinstance(digests, str) else digests
            for d in (digests if isinstance(digests, list) else ()):
                if isinstance(d, str):
                    out_files.setdefault(str(rel), set()).add(d)
    return out_files


def _remove_recorded(out: Path, recorded: Mapping[str, set[str]]) -> list[str]:
    """Remove the recorded files of ``out`` that are unchanged (their digest is recorded).

    A file the user edited (its hash differs), a path outside ``out``, a link and anything
    not in the record stay. Returns the removed paths.
    """
    removed = []
    root = out.resolve()
    for rel, digests in recorded.items():
        path = (out / rel).resolve()
        if root not in path.parents or not path.is_file() or (out / rel).is_symlink():
            continue
        if _sha256(path) in digests:
            path.unlink()
            removed.append(rel)
    return removed


def _write_record(out: Path, record: dict[str, Any]) -> Path:
    """Write the record atomically (a reader sees the old record or the new one, never a part)."""
    from kvstats.sweep.store import atomic_write   # the store sits below; lazy: no cycle

    text = json.dumps({"kvstats_report_files": 1, **record}, indent=1, sort_keys=True)
    return atomic_write(out / REPORT_RECORD, lambda tmp: tmp.write_text(text, encoding="utf-8"))


# staging folder -> the descriptor holding its lock (open while its report writes)
_STAGES: dict[Path, int] = {}
_STAGES_GUARD = threading.Lock()


def _try_lock(fd: int) -> bool | None:
    """Take the exclusive ``flock`` of ``fd`` without waiting: True, False when another
    holds it, None where the file system has no ``flock`` (some network file systems)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _remove_if_abandoned(stale: Path) -> None:
    """Remove the staging folder ``stale`` if no report holds its lock any more (its
    process was killed outright: ``kill -9``, power loss; the kernel dropped the lock)."""
    try:
        fd = os.open(stale, os.O_RDONLY)
    except OSError:   # gone already, or not ours to open
        return
    try:
        if _try_lock(fd) is True:   # nobody writes there: a leftover (no flock: kept)
            shutil.rmtree(stale, ignore_errors=True)
    finally:
        os.close(fd)   # drops the lock, after the removal


def _staging_folder(out: Path) -> Path:
    """A new hidden folder in ``out`` to write one report into, held by this call.

    Each call gets its own folder (a random name) and holds an exclusive ``flock`` on it
    (the folder's own descriptor) until :func:`_release_staging`: two reports written into
    one folder at once, by two threads or two processes (``hypothesis_report`` takes no
    folder lock), leave each other's staging folder alone. A staging folder whose lock
    nobody holds is a leftover of a report killed outright, and is removed here. Without
    ``flock`` (Windows) other staging folders are left alone.
    """
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
            fd = os.open(stage, os.O_RDONLY)
        except FileNotFoundError:   # another report took it for a leftover between the two steps
            continue
        # another report may have locked and removed it between mkdir and here: it is ours
        # only when we hold its lock and the path is still this very folder
        try:
            mine = _try_lock(fd) is not False and os.path.samestat(os.fstat(fd), os.stat(stage))
        except FileNotFoundError:
            mine = False
        if mine:
            with _STAGES_GUARD:
                _STAGES[stage] = fd
            return stage
        os.close(fd)


def _release_staging(stage: Path) -> None:
    """Remove the staging folder of a report, however it ended, then drop its lock."""
    shutil.rmtree(stage, ignore_errors=True)
    with _STAGES_GUARD:
        fd = _STAGES.pop(stage, None)
    if fd is not None:
        os.close(fd)


@contextmanager
def _commit_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s report lock (a blocking ``flock`` on the folder's own descriptor)
    while one report moves its files in: reports written into one folder at once commit
    one after the other, each reading the record the previous one left complete."""
    if fcntl is None:
        yield
        return
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)   # waits: a commit takes a moment
        except OSError:   # a file system without flock: unserialised, as before
            pass
        yield
    finally:
        os.close(fd)


def _commit(stage: Path, out: Path) -> dict[str, str]:
    """Move the report written into ``stage`` into ``out``, the record kept valid throughout.

    1. The record is rewritten, ``"in_progress": true``, naming the earlier report's files
       (``"files"``) and the staged ones with their digests (``"pending"``): from here on
       an interruption leaves a folder :func:`kvstats.sweep.store.check_out_folder` takes,
       and whose next report removes both sets' files where unchanged.
    2. ``report.json`` goes first, so that no earlier report's JSON stands beside a part
       of this one; then the earlier report's unchanged files (no stale figure stays).
    3. The staged files are renamed into place (one file system: each rename is atomic),
       ``report.json`` last: a folder holding ``report.json`` holds the whole report.
    4. The record is rewritten complete: this report's files and digests.

    The four steps hold the folder's report lock (:func:`_commit_lock`): of two reports
    written into one folder at once, the second to commit replaces the first whole.

    Returns the record's files (relative path → SHA-256).
    """
    rels = sorted((p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()),
                  key=lambda rel: (rel == "report.json", rel))   # report.json last
    new = {rel: _sha256(stage / rel) for rel in rels}
    with _commit_lock(out):   # another report into this folder commits before or after
        return _move_in(stage, out, rels, new)


def _move_in(stage: Path, out: Path, rels: list[str], new: dict[str, str]) -> dict[str, str]:
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
    _write_record(out, {"files": new})
    return new
