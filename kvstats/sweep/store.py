"""The store of a sweep: checked cell files, atomic writes, the manifest.

A sweep directory holds ``cells/<cell-id>.parquet`` (one per finished cell, for
resuming), ``results.parquet`` and ``manifest.json`` (CSV instead of parquet without
pyarrow); :mod:`kvstats.results` reads them back. Only the calling process writes, so
remote workers need no shared file system. The store trusts nothing it finds:

- **every cell carries what it is**: a metadata record (the parquet schema metadata, or
  a first line ``#kvstats {...}`` in CSV) with the cell id and key, the fingerprint of
  the config that wrote it, its row count, its columns and dtypes and a content hash
  (:func:`kvstats.results.frame_digest`). :func:`check_cell` compares all of them, and
  the rows themselves (cell id, trials ``0..T-1``), with what the grid expects; a cell
  that fails (another cell's file, a short, truncated, edited or unreadable file, an
  older schema) is recomputed and the run says so;
- **every file is written atomically** (a unique temporary name in the same folder,
  flushed to disk, then renamed over the target), the manifest last; it records the
  results' file name, row count, content hash, config fingerprint and a run id, which
  the results file carries too, so :func:`kvstats.results.load_result` never pairs the
  results of one sweep with the manifest of another.

The folder itself (its lock, which folders a sweep may take, what a new sweep clears) is
:mod:`kvstats.sweep.folder`; its names are importable from here too.
"""
# _git_revision, _has_parquet, _write_table and atomic_write stay in this module: tests
# replace them here (monkeypatch.setattr(store, ...)), and the writes below look them up here.

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kvstats.metrics.profile import PROFILE_COLUMNS
from kvstats.results import (CELL_COLUMNS, MANIFEST, RESULTS, TABLE_META_KEY, _CSV_META_PREFIX,
                             config_fingerprint, frame_digest, read_table_meta, table_path)
from kvstats.sweep.folder import (_REPORT_RECORD, _TABLE_SUFFIXES, LOCK_NAME,  # noqa: F401
                                  SweepLockedError, _now, check_out_folder, check_writable,
                                  clear_outputs, lock_dir)
from kvstats.sweep.numeric_env import NumericEnvWarning, env_differences

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig
    from kvstats.sweep.plan import Cell


__all__ = ["SweepLockedError", "lock_dir", "check_cell", "check_cell_slots", "load_cell", "write_cell",
           "clear_outputs", "check_out_folder", "make_manifest", "write_result", "atomic_write"]

#: Version of the manifest layout (2: the ``"results"`` record, checked cells).
MANIFEST_VERSION = 2
#: Version of a cell's metadata record.
CELL_VERSION = 1


def _has_parquet() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- atomic files
def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Write ``path`` through ``write(tmp)`` on a unique temporary name, then rename it.

    The temporary file is in the same folder (a rename within one file system is atomic),
    named ``.<name>.<random>.tmp`` so that concurrent writers never share it, flushed to
    disk before the rename; a failed write removes it. Readers see the old file or the
    new one, never a part.

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = atomic_write(p, lambda tmp: tmp.write_text("done"))
    >>> p.read_text(), sorted(q.name for q in p.parent.iterdir())
    ('done', ['x.txt'])
    """
    return _atomic_write(path, write, sync=True)


def _atomic_write(path: Path, write: Callable[[Path], None], *, sync: bool) -> Path:
    """:func:`atomic_write`, flushed to disk before the rename only with ``sync``."""
    # O_EXCL on a random name (not mkstemp: its files are 0600; this keeps the umask's mode)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:16]}.tmp"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(tmp)
        if sync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def _write_table(frame: pd.DataFrame, stem: Path, meta: dict[str, Any]) -> Path:
    """Write ``stem.parquet`` (``stem.csv`` without pyarrow) atomically, carrying ``meta``;
    flushed to disk before the rename, but for a part (:mod:`kvstats.sweep.parts`)."""
    path = stem.with_suffix(".parquet" if _has_parquet() else ".csv")
    text = json.dumps(meta, sort_keys=True, default=str)

    def write(tmp: Path) -> None:
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(frame, preserve_index=False)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                                   TABLE_META_KEY.encode(): text.encode()})
            pq.write_table(table, tmp)
        else:
            with tmp.open("w", encoding="utf-8", newline="") as fh:
                fh.write(_CSV_META_PREFIX + text + "\n")
                frame.to_csv(fh, index=False, na_rep="NaN")

    if "kvstats_part" in meta:
        # a chunk of an unfinished cell is not flushed (fsync), unlike a cell: a part torn
        # by a crash or power loss is refused on resume (unreadable, or its content hash
        # differs) and its chunk computed again. A flush waits on the disk: measured per
        # part 0.5 ms on an idle disk, several ms on a busy one (RE3 F3, chunk_size=2: the
        # sweep with out= 3.5x the one without, 2.0x unflushed, in one such run)
        return _atomic_write(path, write, sync=False)
    return atomic_write(path, write)


# ---------------------------------------------------------------- cells
def _schema(frame: pd.DataFrame) -> list[list[str]]:
    # frame.dtypes, not frame[c]: each column taken copies the frame's attrs (a third of a
    # part's write for the sweep's 31 columns, RE3 F3)
    return [[str(c), str(t)] for c, t in frame.dtypes.items()]


def write_cell(cells_dir: Path, cid: str, frame: pd.DataFrame, *, key: str, config: str,
               code: dict[str, str] | None = None, env: dict[str, Any] | None = None) -> Path:
    """Store a finished cell atomically, with its metadata record.

    ``key`` is the cell's key (:meth:`Cell.key`), ``config`` the fingerprint of the
    config that computed it (provenance; the cell id already covers every setting that
    changes the cell's numbers), ``code`` the :func:`~kvstats.sweep.plan.code_version`
    that computed it (checked on resume), ``env`` the
    :func:`~kvstats.sweep.numeric_env.numeric_env` it was computed in (compared on
    resume: :func:`load_cell`).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> columns = CELL_COLUMNS + PROFILE_COLUMNS       # a cell: its case and its profile
    >>> f = pd.DataFrame({c: [0, 0] for c in columns}).assign(trial=[0, 1], cell_id="c1")
    >>> _ = write_cell(d, "c1", f, key="k", config="x")
    >>> load_cell(d, "c1", key="k", n_trials=2)[0].equals(f)
    True
    >>> load_cell(d, "c1", key="k", n_trials=3)
    (None, 'records 2 rows, the cell has 3 trials')
    """
    meta = {"kvstats_cell": CELL_VERSION, "cell_id": cid, "key": key, "config": config,
            "n_rows": len(frame), "schema": _schema(frame), "sha256": frame_digest(frame),
            **({"code": code} if code is not None else {}),
            **({"numeric_env": env} if env is not None else {})}
    return _write_table(frame, cells_dir / cid, meta)


OTHER_CODE = "was computed by other code"   # the reason's start the CLI's cell counts read


def check_cell(frame: pd.DataFrame, meta: dict[str, Any] | None, *, cid: str, key: str,
               n_trials: int, code: dict[str, str] | None = None) -> str | None:
    """Why a stored cell cannot be reused (one line), or None when it is the cell expected.

    Checks the metadata record (present, this cell's id and key, ``n_trials`` rows, the
    columns and dtypes of the frame, its content hash) and the rows (the
    :data:`~kvstats.results.CELL_COLUMNS` and every
    :data:`~kvstats.metrics.profile.PROFILE_COLUMNS` present, ``cell_id`` equal to ``cid``, trials
    ``0 .. n_trials-1`` in order) and, when ``code`` is given, that the cell was computed
    by that :func:`~kvstats.sweep.plan.code_version`.

    Examples
    --------
    >>> f = pd.DataFrame({"trial": [0, 1], "cell_id": ["c1", "c1"]})
    >>> check_cell(f, None, cid="c1", key="k", n_trials=2)
    'carries no kvstats metadata (written by an older version or another program)'
    """
    if meta is None:
        return "carries no kvstats metadata (written by an older version or another program)"
    if not isinstance(meta, dict):   # valid JSON of another shape: not a record kvstats wrote
        return f"carries a metadata record that is not kvstats' (a JSON {type(meta).__name__})"
    if meta.get("kvstats_cell") != CELL_VERSION:
        return f"has metadata version {meta.get('kvstats_cell')!r}, expected {CELL_VERSION}"
    if meta.get("cell_id") != cid or meta.get("key") != key:
        return f"is the file of another cell ({meta.get('cell_id')!r})"
    if code is not None and meta.get("code") != code:
        stored = meta.get("code")
        if not isinstance(stored, dict):
            return "records no code version (written by an older kvstats)"
        diff = [f"{k} {_short(stored.get(k))} (now {_short(code.get(k))})"
                for k in sorted(set(stored) | set(code)) if stored.get(k) != code.get(k)]
        return OTHER_CODE + ": " + ", ".join(diff)
    if meta.get("n_rows") != n_trials:
        return f"records {meta.get('n_rows')} rows, the cell has {n_trials} trials"
    if len(frame) != n_trials:
        return f"holds {len(frame)} rows of {n_trials} (short or truncated)"
    return _check_rows(frame, meta, cid=cid, start=0, count=n_trials)


def _check_rows(frame: pd.DataFrame, meta: dict[str, Any], *, cid: str, start: int,
                count: int) -> str | None:
    """Why the rows of a stored cell or chunk (kvstats.sweep.parts) disagree with their
    record or with trials ``start .. start + count - 1`` of the cell ``cid``, or None."""
    if meta.get("schema") != _schema(frame):
        return "has columns or dtypes other than those it records"
    if frame_digest(frame) != meta.get("sha256"):
        return "content differs from its recorded hash (edited or damaged)"
    # every profile column too: a cell of a version before a metric was added is recomputed
    # (dict.fromkeys: 'trial' is in both tuples, and named once)
    missing = [c for c in dict.fromkeys(CELL_COLUMNS + PROFILE_COLUMNS) if c not in frame.columns]
    if missing:
        return f"lacks the column(s) {missing} of this version's schema"
    if not (frame["cell_id"].astype(str) == cid).all():
        return "holds rows of another cell"
    if not np.array_equal(frame["trial"].to_numpy(), np.arange(start, start + count)):
        return f"does not hold trials {start}..{start + count - 1} in order"
    return None


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 else text   # a SHA-256: its first 12 hex digits


def load_cell(cells_dir: Path, cid: str, *, key: str, n_trials: int,
              code: dict[str, str] | None = None,
              env: dict[str, str] | None = None) -> tuple[pd.DataFrame | None, str | None]:
    """The finished cell ``cid`` if it is stored and checks out: ``(frame, None)``;
    ``(None, reason)`` when a file is there but cannot be reused; ``(None, None)`` when
    there is none (more in :func:`write_cell`'s example). A cell that checks out but was
    computed in a numerical environment other than ``env`` (when given) is still
    returned, with a :class:`~kvstats.sweep.numeric_env.NumericEnvWarning` (its last
    bits may differ from a cell computed here; :mod:`kvstats.sweep.numeric_env`).

    Examples
    --------
    >>> import tempfile
    >>> load_cell(Path(tempfile.mkdtemp()), "c1", key="k", n_trials=2)
    (None, None)
    """
    check_cell_slots(cells_dir, [cid])
    path = table_path(cells_dir, cid)
    if path is None:
        return None, None
    try:
        frame, meta = read_table_meta(path)
    except (ValueError, OSError) as exc:
        # the reader's own error (its message repeats the path the caller names already)
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        text = " ".join(f"{type(cause).__name__}: {cause}".replace(str(path), path.name).split())
        return None, f"cannot be read as a table (truncated, or not a cell file): {text[:160]}"
    reason = check_cell(frame, meta, cid=cid, key=key, n_trials=n_trials, code=code)
    if reason:
        return None, reason
    stored = meta.get("numeric_env") if isinstance(meta, dict) else None
    diff = None if env is None else env_differences(stored, env)
    if diff:
        warnings.warn(NumericEnvWarning(f"cell {cid} was computed in another numerical environment: "
                                        f"{diff}", cid, stored), stacklevel=2)
    return frame, None


def check_cell_slots(cells_dir: Path, cids: Iterable[str]) -> None:
    """Refuse, before any compute, a cell's file name taken by something that is not a file.

    A folder (or a link to one, or a device) at ``cells/<id>.parquet`` or ``.csv`` is not
    a stored cell to resume, nor a place the cell can be written: an IsADirectoryError
    naming the path, not a cell silently taken as absent and a failed write after hours
    of compute.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_cell_slots(d, ["c1"])   # nothing there: free
    >>> (d / "c1.parquet").mkdir()
    >>> check_cell_slots(d, ["c1"])
    Traceback (most recent call last):
    ...
    IsADirectoryError: .../c1.parquet' is not a file, but the place of cell c1's file: ...
    """
    for cid in cids:
        for ext in _TABLE_SUFFIXES:
            path = cells_dir / f"{cid}{ext}"
            if path.exists() and not path.is_file():
                raise IsADirectoryError(
                    f"{str(path)!r} is not a file, but the place of cell {cid}'s file: the sweep "
                    "can neither resume nor write it there; move it out of the cells folder")


# ---------------------------------------------------------------- manifest
def _versions() -> dict[str, str]:
    from importlib import metadata

    import kvstats
    out = {"python": platform.python_version(), "kvstats": kvstats.__version__}
    for pkg in ("numpy", "scipy", "pandas", "statsmodels", "matplotlib", "seaborn", "pyarrow",
                "tqdm", "dask", "distributed"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def _git_revision() -> dict[str, Any] | None:
    """The revision of the git checkout whose ``kvstats/`` runs, and whether it is dirty;
    None when kvstats is not run from a checkout's top folder (an installed copy, even one
    inside some repository's ``.venv``, whose HEAD says nothing of the code that ran)."""
    root = Path(__file__).resolve().parents[2]  # the checkout holding kvstats/sweep/store.py
    try:
        rev = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=root,
                             capture_output=True, text=True, timeout=10)
        lines = rev.stdout.split()   # the top folder, then the revision
        if rev.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        if dirty.returncode != 0:   # unknown, not clean: the record would claim a clean tree
            return {"revision": lines[1], "dirty": None}
        return {"revision": lines[1], "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: ``taskset``, a cgroup's cpuset), which
    the default pool sizes itself by; every CPU of the machine where that is not known."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _resumed_chunks(cells: list[dict[str, Any]]) -> str:
    """What the manifest's cell entries ``cells`` took from an interrupted run's chunks (their
    ``"resumed_chunks"``), for the ``kvstats sweep`` line; ``""`` if none.

    Examples
    --------
    >>> _resumed_chunks([{"status": "computed", "resumed_chunks": 3}, {"status": "computed"},
    ...                  {"status": "computed", "resumed_chunks": 3}])
    '; 6 chunk(s) of 2 computed cell(s) resumed from cells/parts'
    """
    counts = [c["resumed_chunks"] for c in cells if isinstance(c.get("resumed_chunks"), int)]
    return (f"; {sum(counts)} chunk(s) of {len(counts)} computed cell(s) resumed from cells/parts"
            if counts else "")


def make_manifest(config: SweepConfig, cells: list[tuple[Cell, str]], status: dict[str, dict[str, Any]],
                  n_rows: int, *, started: str, seconds: float, git: dict[str, Any] | None,
                  executor: str, code: dict[str, str] | None = None,
                  env: dict[str, str] | None = None) -> dict[str, Any]:
    """The manifest of a finished sweep: config and its fingerprint, seed, versions, git
    revision, times, host (``cpus``: the machine's; ``cpus_usable``: those this process may
    run on, which the default pool sizes itself by), executor and per-cell status (``"computed"``, ``"resumed"`` or
    ``"recomputed"`` with the ``reason`` a stored cell was not reused; seconds; ``"code"``
    for a cell a worker running other code computed, counted in ``"n_other_code"``;
    ``"numeric_env"`` for a cell computed in another numerical environment than ``env``,
    this process's, counted in ``"n_other_env"``; ``"resumed_chunks"`` for a computed cell
    built partly from the chunks an interrupted run kept, :mod:`kvstats.sweep.parts`: how many).
    ``code`` (:func:`~kvstats.sweep.plan.code_version` of this process, which computed
    every other cell, resumed ones included) puts the source digest among the versions
    the report's header prints.
    :func:`write_result` adds the ``"results"`` record (example there).

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"]})
    >>> cells = [(c, cfg.cell_id(c)) for c in cfg.cells()]
    >>> m = make_manifest(cfg, cells, {cells[0][1]: {"status": "computed", "seconds": 1.0}}, 1000,
    ...                   started="2026-01-01T00:00:00+00:00", seconds=1.0, git=None, executor="serial")
    >>> m["n_cells"], m["n_computed"], m["n_other_code"], m["cells"][0]["status"]
    (1, 1, 0, 'computed')
    """
    return {
        "kvstats_sweep": MANIFEST_VERSION,
        "config": config.to_dict(),
        "config_fingerprint": config_fingerprint(config),
        "seed": config.seed,
        "versions": {**_versions(), **({"kvstats_source": f"sha256:{code['kvstats_source'][:12]}"}
                                        if code is not None else {})},
        "git": git,
        "started": started,
        "finished": _now(),
        "seconds": round(seconds, 3),
        "host": {"node": platform.node(), "platform": platform.platform(),
                 "cpus": os.cpu_count(), "cpus_usable": _usable_cpus(), "python": sys.version.split()[0]},
        "executor": executor,
        "n_cells": len(cells),
        "n_computed": sum(s["status"] != "resumed" for s in status.values()),
        # cells a worker running other code computed (their entries say which): a reader
        # of the versions above must know they do not describe every cell
        "n_other_code": sum("code" in s for s in status.values()),
        # ... and those computed on another CPU or BLAS (last bits may differ: numeric_env)
        **({"numeric_env": env, "n_other_env": sum("numeric_env" in s for s in status.values())}
           if env is not None else {}),
        "n_rows": int(n_rows),
        "cells": [{"id": cid, "key": json.loads(cell.key()), **status[cid]} for cell, cid in cells],
    }


def config_settings(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A config dict (``SweepConfig.to_dict``) with its plugins by file name: a folder
    moved with its plugins holds the same settings (the cell ids see the plugins' content).

    Examples
    --------
    >>> from kvstats.sweep.store import config_settings
    >>> config_settings({"seed": 1, "plugins": ["/a/b/plug.py"]})
    {'seed': 1, 'plugins': ['plug.py']}
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("plugins"), list):
        return config
    return {**config, "plugins": [Path(str(p)).name for p in config["plugins"]]}


def previous_config(out_dir: Path) -> Mapping[str, Any] | None:
    """The :func:`config_settings` of the sweep the manifest in ``out_dir`` records (None
    without a readable one).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from kvstats.sweep.store import previous_config
    >>> previous_config(Path(tempfile.mkdtemp())) is None
    True
    """
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        return config_settings(json.loads((out_dir / MANIFEST).read_text(encoding="utf-8")).get("config"))
    return None


def write_result(out_dir: Path, frame: pd.DataFrame, manifest: dict[str, Any]) -> None:
    """Write ``results.parquet`` (or ``.csv``), then ``manifest.json``, both atomically.

    Both carry the same record (config fingerprint, run id, row count, content hash), so
    :func:`kvstats.results.load_result` can tell whether they belong together;
    ``manifest`` gets it as ``manifest["results"]`` (with the file name).

    Examples
    --------
    >>> import tempfile, kvstats
    >>> out = tempfile.mkdtemp()
    >>> res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [16], "n_keys": [8], "n_trials": 4}, out=out, executor="serial", progress=False)
    >>> sorted(res.manifest["results"]), res.manifest["results"]["n_rows"]
    (['config', 'file', 'n_rows', 'run', 'sha256'], 4)
    """
    record = {"config": manifest["config_fingerprint"], "run": uuid.uuid4().hex,
              "n_rows": len(frame), "sha256": frame_digest(frame)}
    # the column dtypes too: a CSV reader then reads exactly the text columns as text
    path = _write_table(frame, out_dir / RESULTS, {"kvstats_results": 1, **record,
                                                   "schema": _schema(frame)})
    manifest["results"] = {"file": path.name, **record}
    text = json.dumps(manifest, indent=2, default=str)
    atomic_write(out_dir / MANIFEST, lambda tmp: tmp.write_text(text, encoding="utf-8"))
