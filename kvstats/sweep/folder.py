"""The folder of a sweep: its lock, which folders a sweep may take, and what it clears.

What :mod:`kvstats.sweep.store` writes goes into one output folder, which these rules keep
to one sweep:

- **one sweep per folder at a time**: :func:`lock_dir` takes an exclusive lock
  (``DIR/.kvstats.lock``, ``flock``, or a POSIX record lock on a file system without
  ``flock``; the kernel drops it when the process dies, even by ``kill -9``) and a second
  sweep into the folder *refuses* at once with :class:`SweepLockedError` naming the holder
  (waiting would hide a mistaken ``--out``); a file system that keeps no locks at all is
  an OSError saying so (no sweep runs unlocked);
- **one sweep per folder**: :func:`clear_outputs` removes, before any compute, what a
  previous sweep left that the new one does not own: its manifest (first), results,
  report (the tables and figures its record :data:`_REPORT_RECORD` names, where
  unchanged), temporary files and the cells of other grids (documented choice: the folder
  then always describes one sweep; cells of this grid are kept for ``--resume``). It
  removes only kvstats' fixed names and the files a report recorded as its own: a file of
  yours in ``figures/`` or ``tables/``, or a recorded one you edited, stays;
- **never a folder of someone else's files**: :func:`check_out_folder` refuses, before
  the lock file is created, a folder that holds files but neither the lock file, a
  kvstats manifest nor a report's record of its files (``--out docs`` by mistake), since
  the sweep's and the report's files would overwrite files of the same names there.

Everything here is importable from :mod:`kvstats.sweep.store` as well.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kvstats._checks import check_choice
from kvstats.results import MANIFEST, RESULTS
from kvstats.sweep.locks import NoFileLocksError, try_lock

__all__ = ["SweepLockedError", "lock_dir", "check_out_folder", "clear_outputs", "check_writable",
           "LOCK_NAME"]

#: The lock file of a sweep directory.
LOCK_NAME = ".kvstats.lock"
# What a sweep or its report writes into DIR (removed when another sweep takes the folder).
_REPORT_FILES = ("report.md", "report.html", "report.json")
# where a report's other files go: removed when the report's record names them (unchanged)
_REPORT_DIRS = ("tables", "figures")
_TABLE_SUFFIXES = (".parquet", ".csv")
# the name of a stored cell (kvstats.sweep.plan.cell_id: 20 hex digits): no other file in
# cells/ is a sweep's
_CELL_STEM = re.compile(r"[0-9a-f]{20}")
# the chunks of unfinished cells (kvstats.sweep.parts): cells/parts/<cell id>-<chunk>.parquet|csv
PARTS = "parts"
_PART_STEM = re.compile(r"([0-9a-f]{20})-([0-9]+)")
# kvstats.report.render.REPORT_RECORD (not imported: the store sits below the report;
# tests/sweep/test_out_folder.py holds the two equal)
_REPORT_RECORD = "report_files.json"
# What each command writes into its output folder (named when a folder is refused).
_WRITES = {"sweep": f"{MANIFEST}, {RESULTS}.*, cells/, report.md/.html/.json, tables/ and figures/",
           "report": "report.md/.html/.json, tables/ and figures/"}


class SweepLockedError(RuntimeError):
    """Another sweep holds the output folder's lock."""


# ---------------------------------------------------------------- the lock
_HELD: dict[str, list[Any]] = {}  # resolved dir -> [file, count, thread id]
_HELD_GUARD = threading.Lock()


def _drop_inherited_locks() -> None:
    """In a forked child, close its copies of the held lock files.

    An ``flock`` belongs to the open file until every copy of its descriptor is closed,
    and a fork copies them: a worker of a process pool forked during a sweep (an executor
    the caller keeps for the next sweep) would otherwise hold the folder after the sweep
    ends, and the caller's next sweep into it would be refused. The parent's own copy keeps
    the lock while its sweep runs.
    """
    global _HELD_GUARD
    _HELD_GUARD = threading.Lock()   # another thread may have held it at the fork
    for fh, *_ in _HELD.values():
        with contextlib.suppress(OSError):
            fh.close()
    _HELD.clear()


if hasattr(os, "register_at_fork"):   # POSIX
    os.register_at_fork(after_in_child=_drop_inherited_locks)


def _holder(lock_path: Path) -> str:
    try:
        text = lock_path.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    return text or "another process"


@contextlib.contextmanager
def lock_dir(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold the exclusive lock of a sweep directory (created if missing) while inside.

    The lock is ``DIR/.kvstats.lock`` under ``flock`` (a POSIX record lock where the file
    system keeps no ``flock`` locks: :func:`kvstats.sweep.locks.try_lock`): released when
    the process ends, however it ends. Re-entrant in the thread that holds it (``kvstats sweep`` holds it
    across the sweep and its report); another process, or another thread, gets a
    :class:`SweepLockedError` at once. A process forked while it is held (a pool's worker)
    does not keep it. Without ``fcntl`` (Windows) no lock is taken.

    Raises
    ------
    SweepLockedError
        Another sweep writes into the folder.
    NotADirectoryError
        ``out_dir`` is a file.
    OSError
        The folder's file system keeps no file locks (the message names the folder and
        what to do).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with lock_dir(d), lock_dir(d):  # re-entrant in one thread
    ...     (Path(d) / ".kvstats.lock").is_file()
    True
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"output folder {str(out)!r} is a file, not a folder; choose a "
                                 "folder for --out")
    out.mkdir(parents=True, exist_ok=True)
    key = str(out.resolve())
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            if held[2] != me:
                raise SweepLockedError(f"output folder {str(out)!r} is in use by another sweep "
                                       "in this process; use another folder")
            held[1] += 1
    if held is not None:
        try:
            yield out
        finally:
            with _HELD_GUARD:
                held[1] -= 1
        return
    lock_path = out / LOCK_NAME
    fh = open(lock_path, "a+", encoding="utf-8")
    try:
        _take_lock(fh, out, lock_path)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {platform.node()} since {_now()}\n")
        fh.flush()
        with _HELD_GUARD:
            _HELD[key] = [fh, 1, me]
        try:
            yield out
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)   # gone in a forked child (_drop_inherited_locks)
            if not fh.closed:
                with contextlib.suppress(OSError):
                    fh.seek(0)
                    fh.truncate()
    finally:
        fh.close()  # closing the descriptor drops the flock


def _take_lock(fh: Any, out: Path, lock_path: Path) -> None:
    """Take the folder's lock (:func:`kvstats.sweep.locks.try_lock`: ``flock``, else a
    POSIX record lock) or refuse: held by another sweep, a :class:`SweepLockedError`
    naming the holder; a file system that keeps neither kind, an OSError naming the
    folder and what to do (without a lock, two sweeps into one folder could overwrite
    each other's cells unseen, so none runs unlocked)."""
    try:
        taken = try_lock(fh)
    except NoFileLocksError as exc:
        raise OSError(exc.errno, (
            f"output folder {str(out)!r} is on a file system that keeps no file locks "
            f"({exc.strerror}), and a sweep locks its folder so that no two sweeps write into it "
            "at once: choose an --out on a local disk (and copy the folder afterwards), or one on "
            "a file system mounted with lock support (NFS with its lock service; Lustre with "
            "-o flock)")) from None
    if not taken:
        raise SweepLockedError(f"output folder {str(out)!r} is in use by another sweep "
                               f"({_holder(lock_path)}); wait for it to finish or choose another "
                               "--out")


def _json_record(path: Path) -> dict | None:
    """The JSON object in ``path``; None when it is missing, unreadable or not an object."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _kvstats_record(path: Path, key: str) -> bool:
    """Whether ``path`` is a JSON record kvstats wrote (an object carrying ``key``)."""
    record = _json_record(path)
    return record is not None and key in record


def check_out_folder(out_dir: str | os.PathLike, what: str = "sweep", *,
                     report_of: Any = None) -> None:
    """Refuse an output folder that holds files but no kvstats output, before touching it.

    A folder is taken when it does not exist yet, is empty (hidden entries such as
    ``.DS_Store`` or ``.gitkeep`` do not count: kvstats overwrites no hidden name), or
    was written by kvstats:
    it holds the lock file :data:`LOCK_NAME` (every sweep and ``kvstats report`` takes
    it first), a kvstats ``manifest.json`` or a report's record of its files
    (:data:`kvstats.report.render.REPORT_RECORD`, written by ``hypothesis_report``, also
    while it moves its files into place: a report interrupted there is retried, not
    refused). Any other folder with something in it (``--out docs``,
    ``--out .`` or ``--out results`` by mistake) is a ValueError naming the folder and
    what it holds: a sweep (``what="sweep"``) writes ``manifest.json``, ``results.*``,
    ``cells/`` and the report, a report (``what="report"``) ``report.md/.html/.json``,
    ``tables/`` and ``figures/``, and either would overwrite files of those names. Refusing is the safer and simpler rule: whether an existing
    ``report.md`` is kvstats' cannot be told from its name. Call it before
    :func:`lock_dir`, which creates the lock file.

    ``report_of`` (a report's :class:`~kvstats.results.SweepResult`) also refuses a folder
    holding *another* sweep (a ``manifest.json`` of another run): it would hold one sweep's
    results beside another's report. A copy of the same sweep (same run id) is taken.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_out_folder(d)  # empty: taken
    >>> _ = (d / ".DS_Store").write_bytes(b"")
    >>> check_out_folder(d)  # only hidden entries: taken
    >>> _ = (d / "report.md").write_text("my notes")
    >>> check_out_folder(d)
    Traceback (most recent call last):
    ...
    ValueError: output folder '...' holds 1 entry (report.md) and nothing kvstats wrote ...
    """
    writes = check_choice(what, "what", list(_WRITES))
    out = Path(out_dir)
    if report_of is not None:
        _check_not_another_sweep(out, report_of)
    if (not out.is_dir() or (out / LOCK_NAME).exists() or _kvstats_record(out / MANIFEST, "kvstats_sweep")
            or _kvstats_record(out / _REPORT_RECORD, "kvstats_report_files")):
        return  # new (or a file: lock_dir says so), or written by kvstats
    # hidden entries (.DS_Store, .gitkeep, .git/) are not the user's results, and the only
    # hidden names kvstats writes (its lock, its .<name>.<random>.tmp files, a report's
    # .report-staging-<id>/ folder) are its own:
    # a folder of only those counts as empty
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir()
                     if not p.name.startswith("."))
    if not entries:
        return
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    raise ValueError(
        f"output folder {str(out)!r} holds {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} "
        f"({shown}) and nothing kvstats wrote (no {LOCK_NAME}, {MANIFEST} or {_REPORT_RECORD}); "
        f"a {what} writes "
        f"{_WRITES[writes]} there and would overwrite files of those names: choose a new or empty "
        "folder")


def _run_id(manifest: Any) -> Any:
    record = manifest.get("results") if isinstance(manifest, dict) else None
    return record.get("run") if isinstance(record, dict) else None


def _check_not_another_sweep(out: Path, result: Any) -> None:
    path = out / MANIFEST
    if not path.is_file():
        return
    theirs = _run_id(_json_record(path))   # unreadable: None, not known to be the same sweep
    ours = _run_id(result.manifest)
    if theirs != ours:
        source = "this sweep" if result.out is None else repr(str(result.out))
        raise ValueError(
            f"output folder {str(out)!r} holds another sweep (its manifest.json is of run "
            f"{theirs!r}; {source} is run {ours!r}): the folder would hold one sweep's results "
            f"beside another's report. Write the report into the sweep's own folder or a "
            "folder of its own")


def _sha256(path: Path) -> str:
    """The SHA-256 of the file ``path`` (hex), read in blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _recorded(out: Path) -> dict[str, set[str]]:
    """Relative path → the SHA-256 digests the folder's report record gives it (empty: no
    record; :data:`kvstats.report.folder.REPORT_RECORD`).

    A complete record maps each path to one digest; an in-progress one (an interrupted
    :func:`kvstats.report.folder._commit`) also lists, under ``"pending"``, the files it was moving in, and its
    ``"files"`` may give a path several digests. An unreadable record gives nothing.
    """
    try:
        record = json.loads((out / _REPORT_RECORD).read_text(encoding="utf-8"))
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
    for rel, digests in sorted(recorded.items()):
        path = (out / rel).resolve()
        if root not in path.parents or not path.is_file() or (out / rel).is_symlink():
            continue
        if _sha256(path) in digests:
            path.unlink()
            removed.append(rel)
    return removed


def clear_outputs(out_dir: Path, keep_cells: set[str]) -> list[str]:
    """Remove what a previous sweep left in ``out_dir`` that this one does not own.

    In this order: ``manifest.json`` (first, so that nothing left pairs with anything),
    ``results.*``, the report (``report.md/.html/.json``, then the other files its record
    ``report_files.json`` names and that are unchanged, its ``tables/*.csv`` and
    ``figures/*``, then the record), temporary files of interrupted writes, and cells
    (``cells/<20 hex digits>.parquet|csv``) and the chunks of unfinished cells
    (``cells/parts/<20 hex digits>-<chunk>.parquet|csv``) whose id is not in ``keep_cells``. Only those
    names are removed: a file of yours beside them (``figures/mine.png``,
    ``tables/mine.csv``, a recorded figure you edited since) stays. Call it while holding
    :func:`lock_dir`. Returns the removed paths, relative to ``out_dir``. A folder that
    holds no sweep (neither ``manifest.json`` nor ``cells/``) is left alone
    (:func:`run_sweep` refuses such a folder before, with :func:`check_out_folder`, when it
    is not empty).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "figures").mkdir(); (d / "figures" / "mine.png").write_bytes(b"")
    0
    >>> (d / "report.md").write_text("old")
    3
    >>> clear_outputs(d, set())  # no sweep here: nothing removed
    []
    >>> (d / "cells").mkdir()
    >>> clear_outputs(d, set()), sorted(p.name for p in d.iterdir())
    (['report.md'], ['cells', 'figures'])
    """
    removed: list[str] = []
    if not ((out_dir / MANIFEST).is_file() or (out_dir / "cells").is_dir()):
        return removed

    def rm(path: Path) -> None:
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path.relative_to(out_dir).as_posix())

    rm(out_dir / MANIFEST)
    for ext in _TABLE_SUFFIXES:
        rm(out_dir / f"{RESULTS}{ext}")
    for name in _REPORT_FILES:
        rm(out_dir / name)
    # the report's tables and figures: only those it recorded, unchanged (as the next report
    # into the folder would remove them); then the record, which names nothing left here
    removed += _remove_recorded(out_dir, _recorded(out_dir))
    rm(out_dir / _REPORT_RECORD)
    for sub in _REPORT_DIRS:
        with contextlib.suppress(OSError):
            (out_dir / sub).rmdir()  # only when empty
    for path in sorted(out_dir.glob(".*.tmp")):
        rm(path)
    cells = out_dir / "cells"
    if cells.is_dir():
        for path in sorted(cells.iterdir()):
            stale_tmp = path.name.startswith(".") and path.suffix == ".tmp"
            foreign = (path.suffix in _TABLE_SUFFIXES and _CELL_STEM.fullmatch(path.stem) is not None
                       and path.stem not in keep_cells)
            if stale_tmp or foreign:
                rm(path)
        parts = cells / PARTS
        for path in sorted(parts.iterdir()) if parts.is_dir() else ():
            match = _PART_STEM.fullmatch(path.stem)
            if ((path.name.startswith(".") and path.suffix == ".tmp")
                    or (path.suffix in _TABLE_SUFFIXES and match is not None and match[1] not in keep_cells)):
                rm(path)
        with contextlib.suppress(OSError):
            parts.rmdir()   # only when empty
    return removed


def check_writable(folder: Path) -> None:
    """Raise the OSError of creating a file in ``folder`` now, before any compute.

    Examples
    --------
    >>> import tempfile
    >>> check_writable(Path(tempfile.mkdtemp()) / "cells")  # created, writable: no error
    """
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".write-check.", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(name)


def _now() -> str:
    """The time now, in UTC, to the second (the lock file's and the manifest's record)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
