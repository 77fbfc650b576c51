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
  host, per-cell status and ``"results"``: the results file's name, row count, content
  hash and the config fingerprint, so that a results file and a manifest of two
  different sweeps are never read as one (:func:`load_result` checks them);
- ``cells/<cell-id>.parquet``: the finished cells (for resuming), each carrying what it
  is (see :mod:`kvstats.sweep.store`).

Every table carries a small metadata record (``"kvstats"`` in the parquet schema
metadata; a first line ``#kvstats {...}`` in CSV): :func:`read_table_meta` returns it,
:func:`frame_digest` is the content hash it records.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kvstats._checks import did_you_mean
from kvstats.data.catalog import REAL   # the distribution of a captured cache's case

if TYPE_CHECKING:  # the config schema lives with the runner; loading imports it on demand
    import pandas as pd

    from kvstats.sweep.config import SweepConfig

__all__ = ["CELL_COLUMNS", "CASE_COLUMNS", "DEFAULT_COMPARISONS", "REAL", "SweepResult", "check_comparisons",
           "load_result", "read_table", "read_table_meta", "results_file", "table_path", "frame_digest", "config_fingerprint"]

#: Pairs compared by default in reports: (a, b) means "a vs b".
DEFAULT_COMPARISONS = (("KQV", "QKQV"), ("KQV", "KV"), ("QKQV", "KV"))

def _check_distinct_pairs(pairs: "list[tuple[str, str]] | tuple[tuple[str, str], ...]",
                          name: str = "comparisons") -> None:
    """Refuse a pair of one label twice, and a pair given twice (either way round).

    A scheme compared with itself tests nothing, and a repeated pair (``(a, b)`` and
    ``(b, a)`` are one test with r's sign flipped) would count its tests twice in the
    family every p-value is adjusted over.
    """
    seen: dict[frozenset, tuple[str, str]] = {}
    for a, b in pairs:
        if a == b:
            raise ValueError(f"{name} must pair two different scheme labels; received {[a, b]!r}")
        key = frozenset((a, b))
        if key in seen:
            raise ValueError(f"{name} must not repeat a pair, either way round (its tests would count "
                             f"twice in the family); received {list(seen[key])!r} and {[a, b]!r}")
        seen[key] = (a, b)


_PAIR_EXAMPLE = "[('KQV', 'QKQV')] (in a TOML config: comparisons = [[\"KQV\", \"QKQV\"]])"


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the caller point at user code.

    That is the first frame outside the kvstats package (a dataclass ``__init__`` counts as
    its class's module; a doctest example is the user's), so a warning points at the
    user's ``SweepConfig.from_dict``, ``run_sweep``, ``compare_schemes`` or
    ``hypothesis_report`` call, however deep in kvstats it was given.
    """
    frame = sys._getframe(1)   # the caller: stacklevel 1
    level = 1
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        # a doctest runs in a copy of its module's globals: its example is the user's line
        if (name != "kvstats" and not name.startswith("kvstats.")
                or frame.f_code.co_filename.startswith("<doctest")):
            break
        frame = frame.f_back
        level += 1
    return level


def check_comparisons(comparisons: Iterable[Sequence[str]] | None, labels: Iterable[str] | None = None,
                      names: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The scheme pairs to compare, checked (against the scheme labels when given).

    The one check of the ``comparisons`` of a sweep config, of the ``[report]`` options, of
    :func:`kvstats.compare_schemes` and of :func:`kvstats.hypothesis_report`. Given pairs must each name two
    labels of ``labels``: a label absent from the data is a typo, which would otherwise be skipped like a pair
    absent from one case, leaving a table of 0 tests without a word. The default pairs (:data:`DEFAULT_COMPARISONS`, also when written out pair for
    pair) skip the pairs the data lack; when none of them names two of two or more labels, one ``UserWarning``
    says so, pointing at the user's call (the first frame outside kvstats). ``[]`` asks for no comparison.

    Parameters
    ----------
    comparisons : sequence of (str, str) or None
        Pairs ``(a, b)`` ("a vs b"); None: the default pairs. A generator or the rows of a
        2-column string array are accepted.
    labels : iterable of str, optional
        The scheme labels the data have (e.g. ``frame["scheme"].unique()``, a sweep's
        scheme labels); None checks only the form (the ``[report]`` options, read before
        the sweep's schemes are known).
    names : mapping, optional
        Label → its config entry's scheme name (``{"TQ3": "turboquant_mse"}``): a pair naming
        a scheme that runs only under labels of its own is told them.

    Returns
    -------
    list of (str, str)
        The pairs, in the given order (the default pairs whole, absent ones included).

    Raises
    ------
    TypeError
        ``comparisons`` is one string, not iterable, or holds an item that is not a pair of
        two strings (e.g. ``"KV"``, which would be the pair ("K", "V")).
    ValueError
        A given label absent from ``labels`` (the message lists them), a scheme paired with
        itself or a pair given twice (either way round).

    Examples
    --------
    >>> check_comparisons([("KQV", "QKQV")], ["KQV", "QKQV", "KV"])
    [('KQV', 'QKQV')]
    >>> check_comparisons([("KQV", "TurboQuant")], ["KQV", "QKQV"])
    Traceback (most recent call last):
    ...
    ValueError: comparisons label must be one of ['KQV', 'QKQV']; received 'TurboQuant' (a given pair must name two scheme labels of the data; only the default pairs skip absent schemes)
    >>> check_comparisons(["KV", "QK"])
    Traceback (most recent call last):
    ...
    TypeError: comparisons must be a list of (scheme_a, scheme_b) pairs, e.g. [('KQV', 'QKQV')] (in a TOML config: comparisons = [["KQV", "QKQV"]]); received the item 'KV' of ['KV', 'QK']
    >>> len(check_comparisons(None, ["KQV", "KV"]))     # the default pairs; KQV/KV is present
    3
    """
    what = "a list of (scheme_a, scheme_b) pairs, e.g. " + _PAIR_EXAMPLE
    if comparisons is None:
        pairs = list(DEFAULT_COMPARISONS)
    else:
        if isinstance(comparisons, (str, bytes, Mapping)) or not isinstance(comparisons, Iterable):
            # a string would be iterated into pairs of its characters, a dict into its keys
            raise TypeError(f"comparisons must be {what}; received {comparisons!r}")
        items = list(comparisons)    # a generator is read once
        pairs = []
        for pair in items:
            p = () if isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable) else tuple(pair)
            if len(p) != 2 or not all(isinstance(s, str) for s in p):
                raise TypeError(f"comparisons must be {what}; received the item {pair!r} of {items!r}")
            pairs.append((str(p[0]), str(p[1])))   # np.str_ of array rows: plain labels
    _check_distinct_pairs(pairs)
    if labels is None:
        return pairs
    present = sorted({str(lab) for lab in labels})
    if tuple(pairs) != DEFAULT_COMPARISONS:
        for label in (lab for pair in pairs for lab in pair):
            if label not in present:
                renamed = [lab for lab in present if lab.startswith(f"{label}[")]
                hint = f'; a scheme with params is labelled name[params] ({renamed[0]}): give its [[schemes]] entry label = "{label}"' if renamed else ""
                runs_as = [lab for lab, n in (names or {}).items() if n == label and lab in present and lab not in renamed]
                hint += f"; {label!r} runs here as {', '.join(runs_as)}: name one of them" if runs_as else ""
                raise ValueError(f"comparisons label must be one of {present}; received {label!r}{did_you_mean(label, present)} "
                                 f"(a given pair must name two scheme labels of the data; only the default pairs skip absent schemes){hint}")
    elif len(present) > 1 and not any(a in present and b in present for a, b in pairs):
        # every default pair would be skipped: 0 tests, which nothing else would say. The command quoted for a
        # shell (name[k='v'] holds quotes and a glob's brackets); a relabel (KQV[...] as KQV) only where it keeps
        # labels distinct and forms a default pair of present schemes, every entry it needs named at once
        (a, b), base = present[:2], {lab: lab.split("[")[0] for lab in present if "[" in lab}
        move = {lab: n for lab, n in base.items() if n not in present and list(base.values()).count(n) == 1}
        formed = [p for p in pairs if set(p) <= {move.get(lab, lab) for lab in present}]
        own = [f"of {lab} label = {json.dumps(n)}" for lab, n in move.items() if any(n in p for p in formed)]
        warnings.warn(f"no comparison: none of the default pairs {[list(p) for p in pairs]} names "
                      f"two schemes of the data ({present}), so the comparisons table (and the "
                      f"report) holds no tests; name the pairs to test: `kvstats report DIR --comparison "
                      f"{shlex.quote(f'{a}:{b}')}`, or in the config's [report], comparisons = "
                      f"[[{json.dumps(a)}, {json.dumps(b)}]] (from Python: comparisons=[({a!r}, {b!r})]); "
                      "comparisons = [] asks for none" + (f"; or give the [[schemes]] entr{'ies' if len(own) > 1 else 'y'} {' and '.join(own)}, "
                      f"which the default pairs name ({', '.join(f'{x} vs {y}' for x, y in formed)})" if own else ""),
                      UserWarning, stacklevel=_user_stacklevel())
    return pairs


#: Columns the sweep adds to :func:`kvstats.error_profile`'s per-trial columns.
#: ``cluster`` is the trial's statistical unit: its text for a real case (trials of one
#: text are correlated), the trial itself for a synthetic case (independent draws).
#: ``key_bits_nominal``/``value_bits_nominal`` (each side's coder's code bits) are newer than
#: the rest: results written before lack them, and load and report all the same.
CELL_COLUMNS = ("distribution", "params", "dim", "n_keys", "budget", "scheme",
                "bits_nominal", "bits_total", "key_bits_total", "value_bits_total",
                "key_bits_nominal", "value_bits_nominal", "trial", "cell_id", "cluster")

#: Columns identifying a case: the trials all schemes of a case share.
CASE_COLUMNS = ("distribution", "params", "dim", "n_keys")

#: File names inside a sweep directory.
MANIFEST = "manifest.json"
# the newest manifest layout ("kvstats_sweep") this version reads: the one it writes
# (kvstats.sweep.store.MANIFEST_VERSION)
_MANIFEST_LAYOUT = 2
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


# The text columns of a sweep's tables (CELL_COLUMNS), and the dtypes a table's recorded
# schema gives text: what CSV reads as text (read_table_meta)
_TEXT_COLUMNS = ("distribution", "params", "scheme", "cell_id")
_TEXT_DTYPES = ("object", "str", "string")

#: Key of the metadata record in a parquet file's schema metadata, and the first-line
#: marker of a CSV table.
TABLE_META_KEY = "kvstats"
_CSV_META_PREFIX = "#kvstats "


def read_table_meta(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """Read a table written by the sweep and the metadata record it carries (or None).

    Parquet keeps the record in its schema metadata; CSV in a first line
    ``#kvstats {json}``. Floats in CSV are parsed round-trip exactly; the text columns
    (those the record's ``"schema"`` gives a text dtype, else the sweep's ``distribution``,
    ``params``, ``scheme`` and ``cell_id``) stay text, ``"123"``, ``"True"`` or ``"nan"``
    included; in the other columns only ``"NaN"``/``"nan"`` are missing values.

    Raises
    ------
    ValueError
        The file cannot be read as a table (truncated, not parquet/CSV), naming the file.
    ImportError
        A parquet file without pyarrow installed (the ``parquet`` extra).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> with open(p, "w") as fh:
    ...     _ = fh.write('#kvstats {"n_rows": 1}\\nparams,kl\\n-,0.5\\n')
    >>> frame, meta = read_table_meta(p)
    >>> frame["params"].tolist(), meta
    (['-'], {'n_rows': 1})
    """
    import pandas as pd   # here, not at the top: the command's parser reads this module

    path = Path(path)
    # pandas < 3 parses CSV floats to within an ulp unless asked for round-trip parsing;
    # pandas 3 parses exactly and deprecates the option
    round_trip = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            raw = (table.schema.metadata or {}).get(TABLE_META_KEY.encode())
            meta = None if raw is None else json.loads(raw)
            return table.to_pandas(), meta
        meta = None
        with path.open("r", encoding="utf-8") as fh:
            first = fh.readline()
        if first.startswith(_CSV_META_PREFIX):
            meta = json.loads(first[len(_CSV_META_PREFIX):])
        skip = 1 if meta is not None else 0
        # text stays text: a label or name such as "123", "True", "1e3" or "nan" is not a
        # number, a bool or a missing value (the columns the record's schema calls text, else
        # the sweep's text columns); only numeric columns have missing values
        schema = meta.get("schema") if isinstance(meta, dict) else None
        text = ({str(c) for c, kind in schema if kind in _TEXT_DTYPES} if isinstance(schema, list)
                else set(_TEXT_COLUMNS))
        columns = pd.read_csv(path, nrows=0, skiprows=skip).columns
        frame = pd.read_csv(path, keep_default_na=False, skiprows=skip,
                            dtype={c: str for c in columns if c in text},
                            na_values={c: ["NaN", "nan"] for c in columns if c not in text}, **round_trip)
        return frame, meta
    except (OSError, ImportError):  # not the file's fault: pyarrow (an extra) not installed
        raise
    except Exception as exc:  # pyarrow, pandas and json each raise their own types
        raise ValueError(f"table {str(path)!r} cannot be read (truncated or not a table?): {type(exc).__name__}: {_one_line(exc)}") from exc


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a table written by the sweep (parquet, or CSV with ``"-"`` kept as text).

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> pd.DataFrame({"params": ["-", "None"], "kl": [0.5, 1.0]}).to_csv(p, index=False)
    >>> read_table(p)["params"].tolist()
    ['-', 'None']
    """
    return read_table_meta(path)[0]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def frame_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a table's content, the same for its parquet and its CSV copy.

    Column names and order count; numeric and boolean columns are hashed as float64
    bytes (NaNs made one bit pattern: CSV keeps no NaN payload), other columns as text.

    Examples
    --------
    >>> import pandas as pd
    >>> a = pd.DataFrame({"trial": [0, 1], "kl": [0.5, 0.25], "scheme": ["KQV", "KQV"]})
    >>> frame_digest(a) == frame_digest(a.copy()), frame_digest(a) == frame_digest(a.iloc[:1])
    (True, False)
    """
    h = hashlib.sha256()
    h.update(f"{len(frame)}|{len(frame.columns)}".encode())
    for name in frame.columns:
        col = frame[name]
        h.update(b"\x00" + str(name).encode("utf-8") + b"\x00")
        if col.dtype.kind in "biuf":
            values = col.to_numpy(dtype=np.float64, copy=True)
            values[np.isnan(values)] = np.nan
            h.update(b"n" + values.astype("<f8").tobytes())
        else:
            h.update(b"s" + "\x1f".join(map(str, col.tolist())).encode("utf-8"))
    return h.hexdigest()


def config_fingerprint(config: SweepConfig | Mapping[str, Any]) -> str:
    """SHA-256 (first 20 hex digits) of a sweep config's canonical form (its ``to_dict``).

    A dict is read as a config first (:meth:`~kvstats.sweep.SweepConfig.from_dict`), so a
    config written out by hand has the fingerprint its sweep's manifest records.

    Examples
    --------
    >>> cfg = {"schemes": ["KQV"], "distributions": ["gaussian"]}
    >>> from kvstats.sweep import SweepConfig
    >>> config_fingerprint(cfg) == config_fingerprint(SweepConfig.from_dict(cfg))
    True
    """
    from kvstats.sweep.config import SweepConfig

    if isinstance(config, Mapping):
        config = SweepConfig.from_dict(config)
    if not isinstance(config, SweepConfig):
        raise TypeError(f"config must be a SweepConfig or a config dict; received {type(config).__name__}")
    return _digest(config.to_dict())


def _digest(data: Mapping[str, Any]) -> str:
    """The fingerprint of a config's dict as it stands (:func:`config_fingerprint` of its
    canonical form; a manifest's ``"config"`` as recorded)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


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

    The pair is checked: the manifest's ``"results"`` record (file, row count, content
    hash, config fingerprint) must match the results file and the metadata it carries,
    and the fingerprint must be that of the manifest's config, so that a results file
    and a manifest of two different sweeps (or a torn or edited file) are never read as
    one sweep. Manifests of the first layout (``"kvstats_sweep": 1``, no record) are
    read without this check.

    Parameters
    ----------
    out : str or path
        The folder a sweep wrote (``kvstats sweep --out``, ``run_sweep(out=...)``).

    Returns
    -------
    SweepResult
        The per-trial frame, the config, the manifest and ``out``.

    Raises
    ------
    FileNotFoundError
        ``out`` does not exist, holds no finished sweep, or lacks the results file its
        manifest names (the one read, even where the other suffix lies beside it).
    ValueError
        The manifest is not valid JSON, or the results do not belong to it; the message
        names the file.
    kvstats.plugins.PluginError
        A plugin file the sweep used is no longer where the manifest says (a ValueError
        naming the recorded path and hash, ``kvstats report --plugins PATH`` and, from
        Python, :func:`kvstats.plugins.relocate_plugins`, to call before this), or a
        module plugin cannot be found.

    Examples
    --------
    >>> import tempfile, kvstats
    >>> out = tempfile.mkdtemp()
    >>> _ = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [16], "n_keys": [8], "n_trials": 4}, out=out, executor="serial", progress=False)
    >>> res = kvstats.load_result(out)
    >>> len(res.frame), res.config.n_trials, res.manifest["n_cells"]
    (4, 4, 1)
    """
    from kvstats.plugins import PluginError, relocate_plugins
    from kvstats.sweep.config import SweepConfig

    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a folder path (str or os.PathLike); received {out!r}")
    out = Path(out)
    manifest_path = out / MANIFEST
    if not out.is_dir():
        raise FileNotFoundError(f"{str(out)!r} does not exist or is not a folder (give the folder "
                                "a sweep wrote; run `kvstats sweep` first)")
    if not manifest_path.is_file():
        raise FileNotFoundError(_no_finished_sweep(out))
    manifest = _read_manifest(manifest_path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise ValueError(f"manifest {str(manifest_path)!r} holds no sweep config ('config' table)")
    layout = manifest.get("kvstats_sweep")
    if isinstance(layout, (int, float)) and layout > _MANIFEST_LAYOUT:
        # a newer layout may mean things this version would read wrongly without a word
        raise ValueError(f"manifest {str(manifest_path)!r} has the layout 'kvstats_sweep' {layout!r}, "
                         f"newer than this kvstats reads (layouts up to {_MANIFEST_LAYOUT}): it was "
                         "written by a newer kvstats; read it with that version")
    table = results_file(out, manifest)
    # its plugins as relocate_plugins finds them (none given: a moved file is an error
    # naming its hash and both fixes, CLI and Python; an edited one a warning), before
    # the config imports them; plugins relocated or imported already are left as they are
    relocate_plugins(out)
    try:
        config = SweepConfig.from_dict(manifest["config"])
    except PluginError as exc:
        if exc.__cause__ is None:   # not the plugin's code failing: the config's plugins entry
            raise PluginError(f"manifest {str(manifest_path)!r}: its config is not valid: {exc}") from exc
        raise PluginError(f"the sweep in {str(out)!r}: its plugin fails to import now (the manifest "
                          f"is intact): {str(exc).removeprefix('config [sweep] plugins: ')}") from exc
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"manifest {str(manifest_path)!r}: its config is not valid: {exc}") from exc
    frame, meta = read_table_meta(table)
    record = manifest.get("results")
    # only the first layout, which says so ("kvstats_sweep": 1), has no record to check
    if record is not None or manifest.get("kvstats_sweep") != 1:
        # the config as recorded too: a folder written before a canonical form changed (an int
        # for a float parameter, nu = 3, read as 3.0 since 2026-12-03) keeps its fingerprint
        _check_pair(frame, meta, record, (config_fingerprint(config), _digest(manifest["config"])),
                    table, manifest_path)
    return SweepResult(frame, manifest, config, out)


def _no_finished_sweep(out: Path) -> str:
    """Why ``out`` holds no finished sweep, and what to run. An interrupted sweep leaves
    cells and chunks (``cells/``, ``cells/parts/``: :mod:`kvstats.sweep.parts`) that only
    a rerun with resume reuses: a rerun without it would compute them all again.

    Examples
    --------
    >>> import tempfile
    >>> _no_finished_sweep(Path(tempfile.mkdtemp())).split(" (")[1]
    'needs manifest.json and results.parquet or results.csv; run `kvstats sweep` first)'
    """
    cells = [p for ext in _TABLE_SUFFIXES for p in (out / "cells").glob(f"*{ext}")]
    parts = [p for ext in _TABLE_SUFFIXES for p in (out / "cells" / "parts").glob(f"*-*{ext}")]
    if not (cells or parts):
        return (f"{str(out)!r} holds no finished sweep (needs manifest.json and results.parquet or "
                "results.csv; run `kvstats sweep` first)")
    return (f"{str(out)!r} holds an interrupted sweep, not a finished one ({len(cells)} finished "
            f"cell(s) and {len(parts)} chunk(s) of unfinished cells kept in {str(out / 'cells')!r}, no "
            "results yet): rerun the same sweep with --resume (kvstats sweep --config FILE --out "
            f"{str(out)} --resume; run_sweep(..., resume=True)) to finish it from them; without "
            "--resume it computes every cell again")


def _read_manifest(path: Path) -> Any:
    """The JSON of a sweep's manifest; a ValueError naming the file where it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"manifest {str(path)!r} is not valid JSON (truncated or edited?): {_one_line(exc)}") from exc


def results_file(out: str | os.PathLike, manifest: Mapping[str, Any] | None = None) -> Path:
    """The results table of the sweep folder ``out``: the file its manifest names.

    A folder may hold both ``results.parquet`` and ``results.csv`` (one left by another
    run), so the manifest, not the suffix order, says which is this sweep's; only a
    manifest that names none (the first layout) falls back to :func:`table_path`'s pick.

    Parameters
    ----------
    out : path
        A folder :func:`kvstats.run_sweep` wrote.
    manifest : mapping, optional
        Its manifest, when already read (default: read ``out/manifest.json``).

    Returns
    -------
    Path

    Raises
    ------
    FileNotFoundError
        No manifest, or the named file (or, for a manifest naming none, either) is missing.
    ValueError
        The manifest names a file other than results.parquet / results.csv.

    Examples
    --------
    >>> import tempfile, kvstats
    >>> cfg = {"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...        "dims": [16], "n_keys": [8], "n_trials": 2}
    >>> out = tempfile.mkdtemp()
    >>> _ = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    >>> results_file(out).name in ("results.parquet", "results.csv")
    True
    """
    out = Path(out)
    manifest_path = out / MANIFEST
    if manifest is None:
        if not manifest_path.is_file():
            raise FileNotFoundError(_no_finished_sweep(out))
        manifest = _read_manifest(manifest_path)
    record = manifest.get("results") if isinstance(manifest, Mapping) else None
    name = record.get("file") if isinstance(record, dict) else None
    if name is None:
        table = table_path(out, RESULTS)
        if table is None:
            raise FileNotFoundError(_no_finished_sweep(out))
        return table
    allowed = [f"{RESULTS}{ext}" for ext in _TABLE_SUFFIXES]
    if name not in allowed:
        raise ValueError(f"manifest {str(manifest_path)!r}: its results file must be one of {allowed}; received {name!r}")
    table = out / name
    if not table.is_file():
        raise FileNotFoundError(f"manifest {str(manifest_path)!r} names the results file {name!r}, "
                                f"which {str(out)!r} does not hold (deleted or moved? rerun the sweep)")
    return table


def _check_pair(frame: pd.DataFrame, meta: dict[str, Any] | None, record: Any,
                fingerprints: tuple[str, ...], table: Path, manifest_path: Path) -> None:
    """Raise a ValueError unless the results table, its metadata, the manifest's record
    of it and the manifest's config (one of its ``fingerprints``) all describe one sweep."""
    where = f"{str(table)!r} and {str(manifest_path)!r}"
    if not isinstance(record, dict):
        raise ValueError(f"manifest {str(manifest_path)!r} has no 'results' record; it cannot be paired with a results file (rerun the sweep)")
    if meta is None:
        raise ValueError(f"results {str(table)!r} carry no kvstats metadata; they cannot be paired with {str(manifest_path)!r} (rerun the sweep)")
    problems = []
    if record.get("file") != table.name:
        problems.append(f"the manifest describes {record.get('file')!r}, found {table.name!r}")
    if record.get("config") not in fingerprints:
        problems.append("the manifest's record was written for another config")
    if meta.get("config") not in fingerprints:
        problems.append("the results were written by a sweep of another config")
    if meta.get("run") != record.get("run"):
        problems.append("the results and the manifest come from different runs")
    if len(frame) != record.get("n_rows") or len(frame) != meta.get("n_rows"):
        problems.append(f"{len(frame)} rows, the manifest records {record.get('n_rows')}")
    elif frame_digest(frame) != record.get("sha256") or record.get("sha256") != meta.get("sha256"):
        problems.append("the content hash differs from the manifest's")
    if problems:
        raise ValueError(f"{where} do not belong together: {'; '.join(problems)} "
                         "(two sweeps wrote into one folder, or a file was edited; rerun the sweep)")
