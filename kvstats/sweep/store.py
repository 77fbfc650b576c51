"""The store of a sweep: cell files, atomic writes, the manifest, versions and git revision.

A sweep directory holds ``cells/<cell-id>.parquet`` (one per finished cell, for
resuming), ``results.parquet`` and ``manifest.json`` (CSV instead of parquet without
pyarrow); :mod:`kvstats.results` reads them back. Only the calling process writes, so
remote workers need no shared file system.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from kvstats.results import MANIFEST, RESULTS, read_table, table_path

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig
    from kvstats.sweep.plan import Cell

#: Version of the manifest layout.
MANIFEST_VERSION = 1


def _has_parquet() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _write_table(frame: pd.DataFrame, stem: Path) -> Path:
    """Write ``stem.parquet`` (or ``stem.csv`` without pyarrow) atomically."""
    path = stem.with_suffix(".parquet" if _has_parquet() else ".csv")
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        frame.to_parquet(tmp, index=False)
    else:
        frame.to_csv(tmp, index=False)
    os.replace(tmp, path)  # a crash never leaves a half-written cell behind
    return path


def load_cell(cells_dir: Path, cid: str) -> pd.DataFrame | None:
    """The finished cell ``cid`` stored in ``cells_dir``, or None."""
    path = table_path(cells_dir, cid)
    return None if path is None else read_table(path)


def write_cell(cells_dir: Path, cid: str, frame: pd.DataFrame) -> Path:
    """Store a finished cell (atomically: a resume never reads half a cell)."""
    return _write_table(frame, cells_dir / cid)


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
    root = Path(__file__).resolve().parents[2]  # the checkout holding kvstats/sweep/store.py
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return {"revision": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def make_manifest(config: SweepConfig, cells: list[tuple[Cell, str]], status: dict[str, dict[str, Any]],
                  n_rows: int, *, started: str, seconds: float, git: dict[str, Any] | None,
                  executor: str) -> dict[str, Any]:
    """The manifest of a finished sweep: config, seed, versions, git revision, times, host,
    executor and per-cell status (``"computed"`` or ``"resumed"``, seconds)."""
    return {
        "kvstats_sweep": MANIFEST_VERSION,
        "config": config.to_dict(),
        "seed": config.seed,
        "versions": _versions(),
        "git": git,
        "started": started,
        "finished": _now(),
        "seconds": round(seconds, 3),
        "host": {"node": platform.node(), "platform": platform.platform(),
                 "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "executor": executor,
        "n_cells": len(cells),
        "n_computed": sum(s["status"] == "computed" for s in status.values()),
        "n_rows": int(n_rows),
        "cells": [{"id": cid, "key": json.loads(cell.key()), **status[cid]} for cell, cid in cells],
    }


def write_result(out_dir: Path, frame: pd.DataFrame, manifest: dict[str, Any]) -> None:
    """Write ``results.parquet`` (or ``.csv``) and ``manifest.json`` into ``out_dir``."""
    _write_table(frame, out_dir / RESULTS)
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
