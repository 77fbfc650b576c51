"""The results schema of a sweep: its columns, default comparisons, and how it is loaded.

This module is what a finished sweep *is*, apart from how it was computed: the runner
(:mod:`kvstats.sweep`) writes frames with these columns and files with these names, and
the analysis and the report read them through :func:`load_result`, so that they never
import the runner.

A sweep directory holds

- ``results.parquet`` (``results.csv`` without pyarrow): one row per (cell, trial), the
  columns of :func:`kvstats.error_profile` plus :data:`CELL_COLUMNS`;
- ``manifest.json``: the config (``"config"``, read back by
  :meth:`kvstats.sweep.SweepConfig.from_dict`), seed, versions, git revision, times,
  host and per-cell status;
- ``cells/<cell-id>.parquet``: the finished cells (for resuming).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # the config schema lives with the runner; loading imports it on demand
    from kvstats.sweep.config import SweepConfig

__all__ = ["CELL_COLUMNS", "CASE_COLUMNS", "DEFAULT_COMPARISONS", "REAL", "SweepResult",
           "load_result", "read_table", "table_path"]

#: Pairs compared by default in reports: (a, b) means "a vs b".
DEFAULT_COMPARISONS = (("KQV", "QKQV"), ("KQV", "KV"), ("QKQV", "KV"))

#: Columns the sweep adds to :func:`kvstats.error_profile`'s per-trial columns.
#: ``cluster`` is the trial's statistical unit: its text for a real case (trials of one
#: text are correlated), the trial itself for a synthetic case (independent draws).
CELL_COLUMNS = ("distribution", "params", "dim", "n_keys", "budget", "scheme",
                "bits_nominal", "bits_total", "key_bits_total", "value_bits_total",
                "trial", "cell_id", "cluster")

#: Columns identifying a case: the trials all schemes of a case share.
CASE_COLUMNS = ("distribution", "params", "dim", "n_keys")

#: The ``distribution`` of a case whose trials come from a captured real cache.
REAL = "real"

#: File names inside a sweep directory.
MANIFEST = "manifest.json"
RESULTS = "results"
_TABLE_SUFFIXES = (".parquet", ".csv")


def table_path(directory: str | os.PathLike, stem: str) -> Path | None:
    """The table ``directory/stem.parquet`` (or ``.csv``) if either exists, else None.

    Examples
    --------
    >>> import tempfile
    >>> table_path(tempfile.mkdtemp(), "results") is None
    True
    """
    for ext in _TABLE_SUFFIXES:
        path = Path(directory) / f"{stem}{ext}"
        if path.is_file():
            return path
    return None


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a table written by the sweep (parquet, or CSV with ``"-"`` kept as text).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> pd.DataFrame({"params": ["-", "None"], "kl": [0.5, 1.0]}).to_csv(p, index=False)
    >>> read_table(p)["params"].tolist()
    ['-', 'None']
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    # text such as "-" (no params) or "None" stays text; only "NaN"/"nan" are missing values
    return pd.read_csv(path, keep_default_na=False, na_values=["NaN", "nan"])


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: the tidy per-trial ``frame``, the ``manifest`` dict and the config.

    ``frame`` has one row per (cell, trial): the columns of :func:`kvstats.error_profile`
    plus :data:`CELL_COLUMNS`. ``out`` is the directory it was written to or read from
    (None for a sweep run without one).
    """

    frame: pd.DataFrame
    manifest: dict[str, Any]
    config: SweepConfig
    out: Path | None = None


def load_result(out: str | os.PathLike) -> SweepResult:
    """Load a sweep written by :func:`kvstats.run_sweep` (``results.parquet``/``.csv`` + ``manifest.json``).

    Raises
    ------
    FileNotFoundError
        ``out`` holds no finished sweep.

    Examples
    --------
    >>> import tempfile, kvstats
    >>> out = tempfile.mkdtemp()
    >>> _ = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [16], "n_keys": [8], "n_trials": 4}, out=out, executor="serial", progress=False)
    >>> res = load_result(out)
    >>> len(res.frame), res.config.n_trials, res.manifest["n_cells"]
    (4, 4, 1)
    """
    from kvstats.sweep.config import SweepConfig

    out = Path(out)
    manifest_path = out / MANIFEST
    table = table_path(out, RESULTS)
    if not manifest_path.is_file() or table is None:
        raise FileNotFoundError(f"{str(out)!r} holds no finished sweep (needs manifest.json and "
                                "results.parquet or results.csv; run `kvstats sweep` first)")
    manifest = json.loads(manifest_path.read_text())
    return SweepResult(read_table(table), manifest, SweepConfig.from_dict(manifest["config"]), out)
