"""The part files of a sweep: the chunks of cells not complete yet, kept for a resume.

A cell is written once all its trials are back (:func:`kvstats.sweep.store.write_cell`);
until then each chunk that arrives is kept as ``cells/parts/<cell id>-<chunk>.parquet``
(CSV without pyarrow), written atomically with a metadata record as a cell's (cell id
and key, chunk index and first trial, config fingerprint, code version, numerical
environment, rows, schema, content hash). The subfolder and the name (a hyphen after
the id) keep them apart from cells: nothing that reads ``cells/`` takes one for a cell.
When a cell is complete it is written and its parts removed.

A resume (:func:`resume_parts`) loads the parts of the cells to compute, each checked as a
cell is (:func:`check_part`; one that fails is computed again, with a line on stderr). A
chunk's trials are drawn once for all the cells of its case, so a chunk counts as done
for a case only when every cell of the case to compute has it; the others are computed
again for every cell. The data of chunk ``b`` depend only on the case seed and ``b``
(:func:`~kvstats.sweep.plan.data_seed`), so the resumed cells equal those of an
uninterrupted sweep bit for bit. The cell id hashes every setting that changes the
numbers (the chunk size included): parts of another config are of other cells, which
:func:`~kvstats.sweep.folder.clear_outputs` removes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from kvstats.results import frame_digest, read_table_meta
from kvstats.sweep import store
from kvstats.sweep.folder import _PART_STEM, _TABLE_SUFFIXES, PARTS
from kvstats.sweep.plan import chunk_span

if TYPE_CHECKING:
    from kvstats.sweep.plan import Cell

__all__ = ["PARTS", "write_part", "check_part", "load_parts", "drop_parts", "check_parts_slot",
           "resume_parts"]

#: Version of a part's metadata record.
PART_VERSION = 1


def write_part(cells_dir: Path, cid: str, chunk: int, frame: pd.DataFrame, *, key: str, config: str,
               code: dict[str, str] | None = None, env: dict[str, Any] | None = None,
               seconds: float = 0.0) -> Path:
    """Store chunk ``chunk`` of the unfinished cell ``cid`` atomically (renamed into place,
    not flushed to disk: a torn part fails its checks on resume), with its record.

    ``key``, ``config``, ``code`` and ``env`` are as :func:`~kvstats.sweep.store.write_cell`'s;
    ``seconds`` is the chunk's compute time (the cell's manifest entry adds it up).

    Examples
    --------
    >>> import tempfile
    >>> from kvstats.results import CELL_COLUMNS
    >>> from kvstats.metrics.profile import PROFILE_COLUMNS
    >>> d = Path(tempfile.mkdtemp())
    >>> f = pd.DataFrame({c: [0.0, 0.0] for c in CELL_COLUMNS + PROFILE_COLUMNS})
    >>> f = f.assign(trial=[2, 3], cell_id="0" * 20)
    >>> write_part(d, "0" * 20, 1, f, key="k", config="x").relative_to(d).as_posix()[:-8]
    'parts/00000000000000000000-1'
    >>> load_parts(d, "0" * 20, key="k", n_trials=5, chunk_size=2)[0][1][0].equals(f)
    True
    """
    folder = cells_dir / PARTS
    folder.mkdir(exist_ok=True)
    meta = {"kvstats_part": PART_VERSION, "cell_id": cid, "key": key, "chunk": int(chunk),
            "start": int(frame["trial"].iloc[0]), "config": config, "n_rows": len(frame),
            "schema": store._schema(frame), "sha256": frame_digest(frame), "seconds": float(seconds),
            **({"code": code} if code is not None else {}),
            **({"numeric_env": env} if env is not None else {})}
    # not flushed to disk (fsync), unlike a cell: store._write_table says why
    return store._write_table(frame, folder / f"{cid}-{int(chunk)}", meta)


def check_part(frame: pd.DataFrame, meta: dict[str, Any] | None, *, cid: str, key: str, chunk: int,
               start: int, count: int, code: dict[str, str] | None = None) -> str | None:
    """Why a stored part cannot be reused (one line), or None when it is chunk ``chunk``
    (trials ``start .. start + count - 1``) of the cell ``cid``.

    The checks of :func:`~kvstats.sweep.store.check_cell` for a chunk: the record (a
    part's, this cell's id and key, this chunk, ``code`` when given, ``count`` rows, the
    columns and dtypes, the content hash) and the rows (every column of the schema, the
    cell id, the chunk's trials in order).

    Examples
    --------
    >>> check_part(pd.DataFrame({"trial": [0]}), {"kvstats_cell": 1}, cid="c", key="k", chunk=0,
    ...            start=0, count=1)
    'has metadata version None, expected 1'
    """
    if not isinstance(meta, dict):
        return "carries no kvstats part record (written by another program)"
    if meta.get("kvstats_part") != PART_VERSION:
        return f"has metadata version {meta.get('kvstats_part')!r}, expected {PART_VERSION}"
    if meta.get("cell_id") != cid or meta.get("key") != key:
        return f"is a part of another cell ({meta.get('cell_id')!r})"
    if meta.get("chunk") != chunk or meta.get("start") != start:
        return f"records chunk {meta.get('chunk')!r} at trial {meta.get('start')!r}, its name chunk {chunk}"
    if code is not None and meta.get("code") != code:
        return store.OTHER_CODE
    if meta.get("n_rows") != count or len(frame) != count:
        return f"holds {len(frame)} rows (records {meta.get('n_rows')!r}), the chunk has {count} trials"
    return store._check_rows(frame, meta, cid=cid, start=start, count=count)


def _part_files(cells_dir: Path, cid: str | None = None) -> list[tuple[Path, str, int]]:
    """The part files in ``cells/parts`` (of the cell ``cid`` only, when given): (path, cell
    id, chunk), in name order; other files there are not parts."""
    folder = cells_dir / PARTS
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        match = _PART_STEM.fullmatch(path.stem)
        if (path.suffix in _TABLE_SUFFIXES and match is not None and path.is_file()
                and (cid is None or match[1] == cid)):
            found.append((path, match[1], int(match[2])))
    return found


def load_parts(cells_dir: Path, cid: str, *, key: str, n_trials: int, chunk_size: int,
               code: dict[str, str] | None = None
               ) -> tuple[dict[int, tuple[pd.DataFrame, dict[str, Any]]], list[tuple[Path, str]]]:
    """The stored parts of the cell ``cid`` that check out (chunk -> (frame, record)), and
    those that do not (path, reason: :func:`check_part`). An example is in :func:`write_part`'s.

    Examples
    --------
    >>> import tempfile
    >>> load_parts(Path(tempfile.mkdtemp()), "0" * 20, key="k", n_trials=4, chunk_size=2)
    ({}, [])
    """
    n_chunks = -(-n_trials // chunk_size)
    good: dict[int, tuple[pd.DataFrame, dict[str, Any]]] = {}
    bad: list[tuple[Path, str]] = []
    for path, _, chunk in _part_files(cells_dir, cid):
        if chunk >= n_chunks or chunk in good:
            bad.append((path, f"names chunk {chunk}, the cell has chunks 0..{n_chunks - 1} (or "
                              "is a second file of one)"))
            continue
        try:
            frame, meta = read_table_meta(path)
        except (ValueError, OSError) as exc:
            bad.append((path, f"cannot be read as a table (truncated, or not a part file): "
                              f"{type(exc).__name__}"))
            continue
        start, count = chunk_span(n_trials, chunk_size, chunk)
        reason = check_part(frame, meta, cid=cid, key=key, chunk=chunk, start=start, count=count,
                            code=code)
        if reason is None:
            good[chunk] = (frame, meta)
        else:
            bad.append((path, reason))
    return good, bad


def drop_parts(cells_dir: Path, cids: Iterable[str] | None = None, *, keep: bool = False) -> list[str]:
    """Remove the parts of the cells ``cids`` (None: every cell; ``keep``: every cell but
    those), then ``cells/parts`` when empty; returns the removed paths, relative to
    ``cells_dir``'s parent. Temporary files of interrupted writes go with ``cids=None`` or
    ``keep``. Other files there stay.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "cells"
    >>> (d / "parts").mkdir(parents=True); _ = (d / "parts" / f"{'a' * 20}-0.csv").write_text("")
    >>> drop_parts(d, {"b" * 20}, keep=True), (d / "parts").exists()
    (['cells/parts/aaaaaaaaaaaaaaaaaaaa-0.csv'], False)
    """
    chosen = None if cids is None else set(cids)
    folder = cells_dir / PARTS
    removed = []
    for path, cid, _ in _part_files(cells_dir):
        if chosen is None or (cid in chosen) != keep:
            path.unlink()
            removed.append(path)
    if folder.is_dir() and (cids is None or keep):
        for path in sorted(folder.glob(".*.tmp")):
            path.unlink()
            removed.append(path)
    with contextlib.suppress(OSError):
        folder.rmdir()   # only when empty
    return [p.relative_to(cells_dir.parent).as_posix() for p in removed]


def check_parts_slot(cells_dir: Path) -> None:
    """Refuse, before any compute, a ``cells/parts`` that is not a folder: the sweep could
    not keep its chunks there (a NotADirectoryError naming it, not a failed write later).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_parts_slot(d)   # nothing there: free
    >>> _ = (d / "parts").write_text("mine")
    >>> check_parts_slot(d)
    Traceback (most recent call last):
    ...
    NotADirectoryError: '.../parts' is not a folder, but the place of the sweep's unfinished cells' chunks; ...
    """
    folder = cells_dir / PARTS
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{str(folder)!r} is not a folder, but the place of the sweep's "
                                 "unfinished cells' chunks; move it out of the cells folder")


def resume_parts(cells_dir: Path, todo: list[tuple[Cell, str]], *, n_trials: int,
                 chunk_of: Callable[[Cell], int], code: dict[str, str] | None = None,
                 say: Callable[[str], None] = print) -> dict[str, dict[int, tuple[pd.DataFrame, dict]]]:
    """The parts a resume reuses: cell id -> {first trial: (frame, record)} for the cells
    ``todo``, holding the chunks every cell of its case in ``todo`` has a valid part of
    (:func:`load_parts`; ``chunk_of(cell)`` is its chunk size). A part that fails its
    checks is removed, with a line through ``say``; one of a chunk some other cell of its
    case lacks stays, and is computed again.

    Examples
    --------
    >>> import tempfile
    >>> from kvstats.sweep import Cell, SchemeSpec
    >>> cell = Cell("gaussian", {}, 16, 8, 3, SchemeSpec("KQV"))
    >>> resume_parts(Path(tempfile.mkdtemp()), [(cell, "0" * 20)], n_trials=4, chunk_of=lambda c: 2)
    {'00000000000000000000': {}}
    """
    loaded = {}
    for cell, cid in todo:
        good, bad = load_parts(cells_dir, cid, key=cell.key(), n_trials=n_trials,
                               chunk_size=chunk_of(cell), code=code)
        for path, reason in bad:
            say(f"cell {cid} ({cell.describe()}): the stored part {path.name} {reason}; computing "
                "its chunk again")
            path.unlink(missing_ok=True)
        loaded[cid] = good
    done = _shared_chunks((cell.case_key(), loaded[cid]) for cell, cid in todo)
    out: dict[str, dict[int, tuple[pd.DataFrame, dict]]] = {}
    for cell, cid in todo:
        label = cell.params_label()
        out[cid] = {}
        for chunk in sorted(done[cell.case_key()]):
            frame, meta = loaded[cid][chunk]
            if not (frame["params"] == label).all():   # a capture moved since: as load_cell
                frame = frame.assign(params=label)
            out[cid][int(meta["start"])] = (frame, meta)
    return out


def _shared_chunks(have: Iterable[tuple[str, Iterable[int]]]) -> dict[str, set[int]]:
    """Case key -> the chunks every cell of the case has; ``have`` holds (case key, its
    chunks) for each cell to compute, those with no chunk too.

    A chunk's trials are drawn once for all the cells of its case, so a resume reuses a
    chunk only when every cell of the case to compute has it: the one rule of
    :func:`resume_parts` and of the count an interrupted sweep's note gives
    (:func:`_kept_chunks`).

    Examples
    --------
    >>> _shared_chunks([("a", {0, 1}), ("a", [0, 2]), ("b", {3}), ("c", ()), ("c", {1})])
    {'a': {0}, 'b': {3}, 'c': set()}
    """
    done: dict[str, set[int]] = {}
    for case, chunks in have:
        done[case] = set(chunks) if case not in done else done[case] & set(chunks)
    return done


def _kept_chunks(cells_dir: Path, case_of: Mapping[str, str]) -> dict[str, set[int]]:
    """The chunks a resume will reuse, from the names of the part files on disk: cell id ->
    chunks, for the unfinished cells ``case_of`` (cell id -> its case key).

    :func:`resume_parts`' rule (:func:`_shared_chunks`) without reading the files: a part
    of a chunk another unfinished cell of its case lacks (an interrupt in the middle of a
    chunk's writes) is not counted, as a resume computes it again.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "parts").mkdir()
    >>> for name in ("a" * 20 + "-0", "a" * 20 + "-1", "b" * 20 + "-0"):
    ...     _ = (d / "parts" / f"{name}.parquet").write_bytes(b"")
    >>> _kept_chunks(d, {"a" * 20: "case", "b" * 20: "case"}) == {"a" * 20: {0}, "b" * 20: {0}}
    True
    >>> _kept_chunks(d, {"a" * 20: "case", "b" * 20: "case", "c" * 20: "case"})["a" * 20]
    set()
    """
    have: dict[str, set[int]] = {cid: set() for cid in case_of}
    for _, cid, chunk in _part_files(cells_dir):
        if cid in have:
            have[cid].add(chunk)
    done = _shared_chunks((case_of[cid], chunks) for cid, chunks in have.items())
    return {cid: done[case_of[cid]] for cid in case_of}
