"""The sweep runner: schemes × bit budgets × distributions × d × N × trials.

A sweep is a grid of *cells*. A cell is one ``(distribution, params, d, N, budget,
scheme)``; its result is one row per trial with the 6D error profile
(:func:`kvstats.error_profile`) and the cell's coordinates. The runner is

- **reproducible cell by cell**: every random number of a cell comes from seeds derived
  from the root seed and a stable SHA-256 hash of the cell's key (never Python's
  ``hash()``, which is salted per process), so a cell's result does not depend on the
  order cells run in, on the executor, or on which other cells are in the grid;
- **paired**: all schemes and budgets of one ``(distribution, params, d, N)`` *case* see
  the same trials (same K, V, q): the data seed depends on the case only, the scheme seed
  on the full cell key (each trial gets an independent draw of the scheme's randomness,
  ``draws=T``);
- **vectorised** over trials inside a cell, in chunks of ``chunk_size`` trials to bound
  memory (the data of chunk ``b`` comes from the case seed and ``b``, so results depend
  on ``chunk_size``: it is part of the configuration and of every cell's id); a chunk
  is drawn once and coded by every scheme and budget of its case (``Scheme.roundtrip``);
- **resumable**: each finished cell is written to ``out/cells/<cell-id>.parquet`` (CSV
  without pyarrow); a rerun with the same configuration loads finished cells instead of
  recomputing them;
- **parallel** through any :class:`concurrent.futures.Executor` (local processes by
  default, ``"serial"`` in-process, or ``dask.distributed.Client.get_executor()``).
  A task is a run of chunks of one case; workers return frames, and only the calling
  process writes files (a cell once all its chunks are back), so remote workers need no
  shared file system.

Real caches are a data source like the synthetic distributions: a distribution named
``"real"`` with ``params = {path = ..., layer = ..., head = ...}`` reads the trials of a
capture file (:func:`kvstats.data.real.load_trials`). Its d and N are the capture's (they
must be listed in ``dims`` and ``n_keys``), ``n_trials`` takes the first trials of the
selection, and the case key carries a content fingerprint of the file (the CRC-32s the
``.npz`` stores for its arrays) so that a resumed sweep never mixes two captures. The
workers read the file themselves (a remote worker needs it at the same path).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import datetime as _dt
import functools
import hashlib
import json
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import time
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from kvstats._checks import _describe, check_choice, check_int
from kvstats.results import (CELL_COLUMNS, DEFAULT_COMPARISONS, REAL, SweepResult, load_result,
                              read_table as _read_table, table_path as _cell_path)

__all__ = ["SweepConfig", "SchemeSpec", "DistributionSpec", "Cell", "SweepResult",
           "run_sweep", "load_config", "load_result", "DEFAULT_COMPARISONS",
           "CELL_COLUMNS"]


_MIXED_NAME = re.compile(r"^K([1-8])V([1-8])$")
# Schemes whose budget is fixed by their own parameters (make_scheme's bits=None).
_FIXED_BUDGET = ("mixed", "identity")
# Target number of float64 entries per chunk-sized array for automatic chunking: 2**24
# entries = 128 MiB per array. The largest per-trial arrays are the data (N × d: K, V,
# K̂, V̂, codes) and each draw's rotation or sketch (m × d with m = d), hence max(N, d)·d.
_AUTO_CHUNK_ENTRIES = 2 ** 24


#: Parameters of the data source that reads a captured real cache.
_REAL_PARAMS = ("path", "layer", "head")


def _registries() -> tuple[tuple[str, ...], tuple[str, ...]]:
    from kvstats.data.synthetic import DISTRIBUTIONS
    from kvstats.quant.schemes import SCHEMES
    return tuple(SCHEMES), tuple(DISTRIBUTIONS) + (REAL,)


def _fmt_params(params: Mapping[str, Any]) -> str:
    """Stable, human-readable rendering of a parameter dict: ``"nu=1.5,rank=8"`` or ``"-"``."""
    if not params:
        return "-"
    return ",".join(f"{k}={params[k]!r}" if isinstance(params[k], str) else f"{k}={params[k]}"
                    for k in sorted(params))


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _check_params(params: Any, name: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a table/dict of parameters; received {params!r}")
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be strings; received {key!r}")
        if not isinstance(value, (int, float, str, bool)):
            raise TypeError(f"{name}[{key!r}] must be a number, string or boolean; received {value!r}")
    return dict(params)


def _index_list(value: Any, name: str) -> int | list[int] | None:
    """``layer``/``head`` of a real source: None, an int, or a non-empty list of distinct ints."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None if value is None else check_int(value, name, low=0)
    if isinstance(value, (list, tuple)) and value:
        out = [check_int(v, name, low=0) for v in value]
        if len(set(out)) != len(out):
            raise ValueError(f"{name} must not repeat indices; received {out}")
        return out
    raise TypeError(f"{name} must be a non-negative int or a non-empty list of them; "
                    f"received {_describe(value)}")


def _real_params(params: Any, base_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Validate the parameters of a ``real`` source; the path becomes absolute.

    A relative path is resolved against ``base_dir`` (the config file's directory), else
    against the working directory. The file itself is read later, when the grid is built.
    """
    if not isinstance(params, Mapping) or "path" not in params:
        raise ValueError("distribution 'real' needs params with 'path' (a capture .npz) and optionally "
                         f"'layer' and 'head'; received params {params!r}")
    unknown = sorted(set(params) - set(_REAL_PARAMS))
    if unknown:
        raise ValueError(f"distribution 'real' params must be among {list(_REAL_PARAMS)}; "
                         f"received unknown {unknown}")
    path = params["path"]
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"distribution 'real' params 'path' must be a path string; received {_describe(path)}")
    path = Path(path).expanduser()
    if not path.is_absolute():
        path = Path(base_dir if base_dir is not None else os.getcwd()) / path
    out: dict[str, Any] = {"path": os.path.normpath(path)}
    for key in ("layer", "head"):
        value = _index_list(params.get(key), f"distribution 'real' params {key!r}")
        if value is not None:
            out[key] = value
    return out


@dataclass(frozen=True)
class _CaptureInfo:
    """What the grid needs to know of a capture file, read from its zip directory and array headers."""

    n_texts: int
    n_layers: int
    n_kv_heads: int
    n_keys: int
    dim: int
    n_q_heads: int
    fingerprint: str


@functools.lru_cache(maxsize=64)
def _capture_info_cached(path: str, size: int, mtime_ns: int) -> _CaptureInfo:
    # size and mtime_ns are only cache keys: a rewritten file is read again.
    try:
        with zipfile.ZipFile(path) as zf:
            members = {info.filename: info for info in zf.infolist()}
            shapes = {}
            for name in ("K", "V", "q"):
                if f"{name}.npy" not in members:
                    continue
                with zf.open(f"{name}.npy") as fh:
                    version = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shapes[name] = read(fh)[0]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"distribution 'real' params 'path' must be a capture .npz written by "
                         f"kvstats.models.capture; {path!r} could not be read: {exc}") from exc
    missing = sorted({"K", "V", "q", "meta"} - {m[:-4] for m in members if m.endswith(".npy")})
    if missing:
        raise ValueError(f"distribution 'real' params 'path' must be a capture file with arrays "
                         f"K, V, q, meta; {path!r} lacks {missing}")
    K, V, q = shapes["K"], shapes["V"], shapes["q"]
    if (len(K) != 5 or V != K or len(q) != 5 or min(K) < 1 or q[:2] != K[:2] or q[3:] != K[3:]
            or q[2] % K[2]):
        raise ValueError("distribution 'real' capture must hold K, V of shape (n_texts, n_layers, "
                         "n_kv_heads, N, d) and q of shape (n_texts, n_layers, n_q_heads, N, d), none "
                         f"empty; {path!r} holds K {K}, V {V}, q {q}")
    # The CRC-32 of every stored array (written by zipfile, read from the central directory
    # without touching the data) identifies the content for resuming.
    crcs = sorted((n, m.CRC, m.file_size) for n, m in members.items())
    return _CaptureInfo(K[0], K[1], K[2], K[3], K[4], q[2],
                        hashlib.sha256(_canonical(crcs).encode()).hexdigest()[:16])


def _capture_info(path: str) -> _CaptureInfo:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"distribution 'real' params 'path' must be an existing capture file "
                                f"(write one with experiments/real_capture.py); {path!r} does not exist")
    st = os.stat(path)
    return _capture_info_cached(path, st.st_size, st.st_mtime_ns)


def _real_selection(params: Mapping[str, Any], info: _CaptureInfo) -> tuple[list[int], list[int]]:
    """The layers and KV heads a real source selects, checked against the capture."""
    out = []
    for key, size in (("layer", info.n_layers), ("head", info.n_kv_heads)):
        value = params.get(key)
        idx = list(range(size)) if value is None else ([value] if isinstance(value, int) else list(value))
        bad = [i for i in idx if i >= size]
        if bad:
            raise ValueError(f"distribution 'real' params {key!r} must be in [0, {size - 1}] (the capture "
                             f"{params['path']!r} has {size} {key}s); received {value!r}")
        out.append(idx)
    return out[0], out[1]


@dataclass(frozen=True)
class SchemeSpec:
    """One scheme of a sweep: a registry name, its settings, and a display label.

    ``label`` (default: the name, or ``name[k=v,...]`` with settings) is what reports and
    the ``scheme`` column show, so two settings of one scheme can be compared.
    ``budgets`` overrides the sweep's budgets for this scheme (``None``: the sweep's).
    Mixed precision (``"K4V2"``) and ``identity`` have a budget fixed by their name; they
    run once per case with ``budget`` = their nominal bits per coordinate.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    budgets: tuple[int, ...] | None = None

    @property
    def fixed_budget(self) -> bool:
        return bool(_MIXED_NAME.match(self.name)) or self.name in _FIXED_BUDGET

    def display(self) -> str:
        if self.label:
            return self.label
        return self.name if not self.params else f"{self.name}[{_fmt_params(self.params)}]"


@dataclass(frozen=True)
class DistributionSpec:
    """One data source of a sweep with one parameter set: a synthetic distribution (see
    :func:`kvstats.sample`) or ``"real"`` (``params``: ``path``, optional ``layer``, ``head``;
    see :func:`kvstats.data.real.load_trials`)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    """One grid point. ``key`` is the stable text the seeds and the id are derived from.

    ``source`` is the content fingerprint of a real capture (None for synthetic data); it
    is part of the case key only when set, so synthetic keys are those of earlier versions.
    """

    distribution: str
    params: dict[str, Any]
    dim: int
    n_keys: int
    budget: float | None
    scheme: SchemeSpec
    source: str | None = None

    def case_key(self) -> str:
        case = {"distribution": self.distribution, "params": self.params,
                "dim": self.dim, "n_keys": self.n_keys}
        if self.source is not None:
            case["capture"] = self.source
        return _canonical(case)

    def params_label(self) -> str:
        """The ``params`` column: ``k=v,...``; a real capture shows as ``file@fingerprint``
        (its full path is in the cell key and the manifest), so tables and figure names do
        not carry a machine-specific directory."""
        if self.source is None:
            return _fmt_params(self.params)
        return _fmt_params({**self.params, "path": f"{os.path.basename(self.params['path'])}@{self.source[:8]}"})

    def key(self) -> str:
        return _canonical({"case": json.loads(self.case_key()), "budget": self.budget,
                           "scheme": self.scheme.name, "scheme_params": self.scheme.params,
                           "label": self.scheme.display()})


def _stable_words(text: str) -> tuple[int, ...]:
    """Eight 32-bit words of SHA-256(text): a process-independent spawn key."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4))


def _derive_seed(root: int, *parts: Any) -> int:
    """A 64-bit integer seed from the root seed and the stable hash of ``parts``."""
    ss = np.random.SeedSequence(root, spawn_key=_stable_words(_canonical(list(parts))))
    return int(ss.generate_state(1, dtype=np.uint64)[0])


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs; :meth:`from_dict` / :meth:`from_toml` read the file format.

    Parameters
    ----------
    schemes : sequence of SchemeSpec, str or dict
        Schemes to run (``{"name": ..., "params": {...}, "label": ..., "budgets": [...]}``).
    distributions : sequence of DistributionSpec, str or dict
        Distributions; a dict's ``params`` may be a list of parameter tables (one
        distribution entry each). ``{"name": "real", "params": {"path": ..., "layer": ...,
        "head": ...}}`` reads a captured real cache (layer and head: an int or a list,
        default all; a relative path is resolved against the TOML file's directory, or
        the working directory for a dict). A real case runs at the capture's d and N,
        which must be listed in ``dims`` and ``n_keys``; its trials are the first
        ``n_trials`` of the selection (C order over text, layer, KV head; more than the
        selection holds is an error), its queries the capture's (``n_queries`` and
        ``dtype`` other than float64/float32 casting do not apply to it).
    budgets : sequence of int
        Bit budgets n per coordinate (default 2..6).
    dims, n_keys : sequence of int
        Head dimensions d and context lengths N (of the synthetic distributions; a real
        capture's own d and N must be among them).
    n_trials : int
        Independent trials per cell (each a fresh (K, V, q) and scheme draw; for a real
        source, the first ``n_trials`` captured trials with a fresh scheme draw each).
    n_queries : int
        Queries per trial sharing its keys.
    seed : int
        Root seed; every cell's seeds derive from it and the cell key.
    chunk_size : int or None
        Trials processed at once; ``None`` picks ``max(1, 2**24 // (max(N, d)·d))``
        (128 MiB per float64 array of keys or of sketches), a function of (N, d) only, so
        results stay reproducible.
    comparisons : sequence of (str, str)
        Scheme label pairs the report compares (default KQV/QKQV, KQV/KV, QKQV/KV; pairs
        whose schemes are not in the sweep are skipped).
    report : dict
        Options passed to :func:`kvstats.hypothesis_report` (``alpha``, ``correction``,
        ``energy_resamples``, ``bootstrap_resamples``, ...).
    dtype : {"float64", "float32"}
        Floating type of the sampled K, V, q (float32 halves memory and time; the float32
        draw is the float64 draw rounded). Real captures are float32 and are cast to it.

    Examples
    --------
    >>> cfg = SweepConfig.from_dict({"schemes": ["KV", "KQV"], "budgets": [3, 4],
    ...     "distributions": [{"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]}],
    ...     "dims": [64], "n_keys": [128], "n_trials": 20})
    >>> len(cfg.cells())
    8

    A captured real cache (here a tiny fake one) as a data source:

    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> x = np.ones((2, 4, 1, 16, 8), np.float32)  # (texts, layers, KV heads, N, d)
    >>> np.savez(path, K=x, V=x, q=np.ones((2, 4, 3, 16, 8), np.float32), meta=json.dumps({}))
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "budgets": [3, 4], "dims": [8],
    ...     "n_keys": [16], "n_trials": 2, "distributions": [{"name": "real",
    ...     "params": [{"path": path, "layer": 0}, {"path": path, "layer": [1, 2]}]}]})
    >>> cells = cfg.cells()  # 2 layer selections x 2 budgets, at the capture's d and N
    >>> len(cells), cells[0].dim, cells[0].n_keys
    (4, 8, 16)
    """

    schemes: tuple[SchemeSpec, ...]
    distributions: tuple[DistributionSpec, ...]
    budgets: tuple[int, ...] = (2, 3, 4, 5, 6)
    dims: tuple[int, ...] = (128,)
    n_keys: tuple[int, ...] = (1024,)
    n_trials: int = 1000
    n_queries: int = 1
    seed: int = 0
    chunk_size: int | None = None
    comparisons: tuple[tuple[str, str], ...] = DEFAULT_COMPARISONS
    report: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float64"

    def __post_init__(self) -> None:
        schemes = tuple(self._scheme(s) for s in _as_list(self.schemes, "schemes"))
        dists = tuple(d for entry in _as_list(self.distributions, "distributions")
                      for d in self._distributions(entry))
        if not schemes:
            raise ValueError("schemes must name at least one scheme; received none")
        if not dists:
            raise ValueError("distributions must name at least one distribution; received none")
        labels = [s.display() for s in schemes]
        dup = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dup:
            raise ValueError(f"schemes must have distinct labels; received duplicates {dup} "
                             "(give each a 'label')")
        keys = [(d.name, _canonical(d.params)) for d in dists]
        if len(set(keys)) != len(keys):
            raise ValueError("distributions must not repeat a (name, params) pair; received "
                             f"{[f'{n}({p})' for n, p in keys]}")
        object.__setattr__(self, "schemes", schemes)
        object.__setattr__(self, "distributions", dists)
        object.__setattr__(self, "budgets", _int_tuple(self.budgets, "budgets", 1, 8))
        object.__setattr__(self, "dims", _int_tuple(self.dims, "dims", 2, None))
        object.__setattr__(self, "n_keys", _int_tuple(self.n_keys, "n_keys", 1, None))
        object.__setattr__(self, "n_trials", check_int(self.n_trials, "n_trials", low=2))
        object.__setattr__(self, "n_queries", check_int(self.n_queries, "n_queries", low=1))
        object.__setattr__(self, "seed", check_int(self.seed, "seed", low=0))
        if self.chunk_size is not None:
            object.__setattr__(self, "chunk_size", check_int(self.chunk_size, "chunk_size", low=1))
        pairs = []
        for pair in _as_list(self.comparisons, "comparisons"):
            if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                    or not all(isinstance(p, str) for p in pair)):
                raise TypeError(f"comparisons must be pairs of scheme labels; received {pair!r}")
            pairs.append((pair[0], pair[1]))
        object.__setattr__(self, "comparisons", tuple(pairs))
        if not isinstance(self.report, Mapping):
            raise TypeError(f"report must be a table/dict of report options; received {self.report!r}")
        object.__setattr__(self, "report", dict(self.report))
        check_choice(self.dtype, "dtype", ["float64", "float32"])

    # ------------------------------------------------------------------ parsing
    @staticmethod
    def _scheme(entry: Any) -> SchemeSpec:
        known, _ = _registries()
        if isinstance(entry, SchemeSpec):
            spec = entry
        elif isinstance(entry, str):
            spec = SchemeSpec(entry)
        elif isinstance(entry, Mapping):
            extra = set(entry) - {"name", "params", "label", "budgets"}
            if extra or "name" not in entry:
                raise ValueError("a scheme entry must have 'name' and optionally 'params', 'label', "
                                 f"'budgets'; received {dict(entry)}")
            budgets = entry.get("budgets")
            spec = SchemeSpec(entry["name"], _check_params(entry.get("params"), "scheme params"),
                              str(entry.get("label", "")),
                              None if budgets is None else _int_tuple(budgets, "scheme budgets", 1, 8))
        else:
            raise TypeError(f"schemes entries must be names, dicts or SchemeSpec; received {entry!r}")
        if not isinstance(spec.name, str) or not (spec.name in known or _MIXED_NAME.match(spec.name)):
            raise ValueError(f"scheme name must be one of {list(known)} or 'K{{a}}V{{b}}' (e.g. 'K4V2'); "
                             f"received {spec.name!r}")
        return spec

    @staticmethod
    def _distributions(entry: Any) -> list[DistributionSpec]:
        _, known = _registries()
        if isinstance(entry, DistributionSpec):
            specs = [entry]
        elif isinstance(entry, str):
            specs = [DistributionSpec(entry)]
        elif isinstance(entry, Mapping):
            extra = set(entry) - {"name", "params"}
            if extra or "name" not in entry:
                raise ValueError("a distribution entry must have 'name' and optionally 'params' "
                                 f"(a table or a list of tables); received {dict(entry)}")
            params = entry.get("params")
            param_sets = params if isinstance(params, list) else [params]
            if not param_sets:
                raise ValueError(f"distribution {entry['name']!r} has an empty params list")
            specs = [DistributionSpec(entry["name"], p if entry["name"] == REAL
                                      else _check_params(p, "distribution params"))
                     for p in param_sets]
        else:
            raise TypeError(f"distributions entries must be names, dicts or DistributionSpec; "
                            f"received {entry!r}")
        for spec in specs:
            if spec.name not in known:
                raise ValueError(f"distribution name must be one of {list(known)}; received {spec.name!r}")
        return [DistributionSpec(REAL, _real_params(s.params)) if s.name == REAL else s for s in specs]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: str | os.PathLike | None = None) -> "SweepConfig":
        """Build from a dict with the TOML layout: optional ``[sweep]`` table of scalars and
        lists, ``[[schemes]]``, ``[[distributions]]``, optional ``[report]`` (a flat dict
        with the same keys also works). ``base_dir`` resolves relative ``real`` capture
        paths (default: the working directory)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"config must be a dict; received {type(data).__name__}")
        flat = dict(data)
        sweep = flat.pop("sweep", {})
        if not isinstance(sweep, Mapping):
            raise TypeError(f"config [sweep] must be a table; received {sweep!r}")
        flat = {**sweep, **flat}
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = set(flat) - allowed
        if unknown:
            raise ValueError(f"unknown config key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        for required in ("schemes", "distributions"):
            if required not in flat:
                raise ValueError(f"config must define {required!r}")
        if "comparisons" in flat.get("report", {}):
            report = dict(flat["report"])
            flat.setdefault("comparisons", report.pop("comparisons"))
            flat["report"] = report
        if base_dir is not None:
            flat["distributions"] = [_resolve_real(e, base_dir) for e in _as_list(flat["distributions"],
                                                                                  "distributions")]
        return cls(**flat)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "SweepConfig":
        """Read a TOML config file (see docs/usage.md for the format)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {str(path)!r} does not exist")
        with path.open("rb") as fh:
            try:
                data = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
        return cls.from_dict(data, base_dir=path.resolve().parent)

    def to_dict(self) -> dict[str, Any]:
        """A JSON/TOML-ready dict that :meth:`from_dict` reads back to an equal config."""
        return {
            "schemes": [{"name": s.name, "params": s.params, "label": s.label,
                         **({"budgets": list(s.budgets)} if s.budgets is not None else {})}
                        for s in self.schemes],
            "distributions": [{"name": d.name, "params": d.params} for d in self.distributions],
            "budgets": list(self.budgets), "dims": list(self.dims), "n_keys": list(self.n_keys),
            "n_trials": self.n_trials, "n_queries": self.n_queries, "seed": self.seed,
            "chunk_size": self.chunk_size, "comparisons": [list(p) for p in self.comparisons],
            "report": self.report, "dtype": self.dtype,
        }

    # ------------------------------------------------------------------ grid
    def cells(self) -> list[Cell]:
        """Every cell of the grid, cases outermost (distribution, params, d, N).

        A real source contributes one case, at its capture's d and N; its file is read
        (header only) and checked here, so a bad capture fails before any work.
        """
        out = []
        for dist in self.distributions:
            source = None
            cases = [(d, n) for d in self.dims for n in self.n_keys]
            if dist.name == REAL:
                source, cases = self._real_case(dist.params)
            for d, n in cases:
                for scheme in self.schemes:
                    if scheme.fixed_budget:
                        budgets: Iterable[float | None] = [None]
                    else:
                        budgets = scheme.budgets or self.budgets
                    for b in budgets:
                        out.append(Cell(dist.name, dist.params, d, n, b, scheme, source))
        return out

    def _real_case(self, params: Mapping[str, Any]) -> tuple[str, list[tuple[int, int]]]:
        info = _capture_info(params["path"])
        layers, heads = _real_selection(params, info)
        where = f"distribution 'real' ({params['path']!r})"
        if info.dim not in self.dims or info.n_keys not in self.n_keys:
            raise ValueError(f"dims and n_keys must include the capture's head dimension and length for "
                             f"{where}: it holds d={info.dim}, N={info.n_keys}; received dims="
                             f"{list(self.dims)}, n_keys={list(self.n_keys)}")
        available = info.n_texts * len(layers) * len(heads)
        if self.n_trials > available:
            raise ValueError(f"n_trials must be at most the number of captured trials of {where}: "
                             f"{info.n_texts} texts x {len(layers)} layers x {len(heads)} KV heads = "
                             f"{available}; received n_trials={self.n_trials}")
        return info.fingerprint, [(info.dim, info.n_keys)]

    def chunk_for(self, n_keys: int, dim: int) -> int:
        """Trials per chunk for a case with N keys of dimension d."""
        if self.chunk_size is not None:
            return min(self.chunk_size, self.n_trials)
        return int(min(self.n_trials, max(1, _AUTO_CHUNK_ENTRIES // (max(n_keys, dim) * dim))))

    def cell_id(self, cell: Cell) -> str:
        """File-safe id: SHA-256 of the cell key and every setting that changes its numbers."""
        text = _canonical({"cell": json.loads(cell.key()), "seed": self.seed,
                           "n_trials": self.n_trials, "n_queries": self.n_queries,
                           "chunk": self.chunk_for(cell.n_keys, cell.dim), "dtype": self.dtype})
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def _resolve_real(entry: Any, base_dir: str | os.PathLike) -> Any:
    """A ``real`` distribution entry with its relative capture path(s) resolved against ``base_dir``."""
    if not (isinstance(entry, Mapping) and entry.get("name") == REAL and "params" in entry):
        return entry
    params = entry["params"]
    sets = params if isinstance(params, list) else [params]
    resolved = [_real_params(p, base_dir) for p in sets]
    return {**entry, "params": resolved if isinstance(params, list) else resolved[0]}


def _as_list(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
        value = [value]
    return list(value)


def _int_tuple(values: Any, name: str, low: int | None, high: int | None) -> tuple[int, ...]:
    items = _as_list(values, name)
    if not items:
        raise ValueError(f"{name} must contain at least one integer; received {values!r}")
    out = tuple(check_int(v, name, low=low, high=high) for v in items)
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat values; received {list(out)}")
    return out


def load_config(config: "SweepConfig | Mapping[str, Any] | str | os.PathLike") -> SweepConfig:
    """Accept a SweepConfig, a dict, or a path to a TOML file."""
    if isinstance(config, SweepConfig):
        return config
    if isinstance(config, Mapping):
        return SweepConfig.from_dict(config)
    if isinstance(config, (str, os.PathLike)):
        return SweepConfig.from_toml(config)
    raise TypeError(f"config must be a SweepConfig, dict or TOML path; received {type(config).__name__}")


# ---------------------------------------------------------------------- the work
# A case's chunks are split over about this many tasks in all (at least one chunk per
# task), so that a few cases still keep a pool of workers busy and the progress bar
# moves; results do not depend on the split (every chunk's data and scheme seeds come
# from the case/cell key and the chunk index).
_TARGET_TASKS = 64


@dataclass(frozen=True)
class _Task:
    """Chunks ``[first, stop)`` of one case, for every cell of the case (all budgets and
    schemes): a chunk's trials are drawn once and every cell quantizes the same draw."""

    cells: tuple[tuple[Cell, str], ...]  # (cell, cell id)
    n_trials: int
    n_queries: int
    chunk: int
    seed: int
    first: int
    stop: int
    dtype: str = "float64"


def _compute_task(task: _Task) -> list[tuple[str, int, pd.DataFrame, float]]:
    """Run one task; returns (cell id, first trial, per-trial frame, seconds) per cell
    and chunk. Runs in workers."""
    from kvstats.data.synthetic import sample
    from kvstats.metrics.profile import error_profile
    from kvstats.quant.schemes import make_scheme

    first = task.cells[0][0]
    case_key = first.case_key()
    d, n = first.dim, first.n_keys
    out = []
    captured = _load_real(first, task.n_trials) if first.distribution == REAL else None
    for b in range(task.first, task.stop):
        start = b * task.chunk
        t = min(task.chunk, task.n_trials - start)
        if captured is not None:
            trials = captured.subset(slice(start, start + t)).astype(task.dtype)
        else:
            # The data seed depends on the case and chunk only: every scheme and budget of a
            # case sees the same trials (paired comparisons).
            trials = sample(first.distribution, t, n, d, seed=_derive_seed(task.seed, "data", case_key, b),
                            n_queries=task.n_queries, dtype=np.dtype(task.dtype), **first.params)
        for cell, cid in task.cells:
            tic = time.perf_counter()
            spec = cell.scheme
            bits = None if spec.fixed_budget else cell.budget
            try:
                scheme = make_scheme(spec.name, bits, d, seed=_derive_seed(task.seed, "scheme", cell.key(), b),
                                     draws=t, **spec.params)
                K_hat, V_hat = scheme.roundtrip(trials.K, trials.V)
                prof = error_profile(trials, K_hat, V_hat)
            except (ValueError, TypeError) as exc:
                # say which cell: the message alone does not tell a 90-cell grid apart
                raise type(exc)(f"{exc} [cell: {spec.display()} at n={cell.budget}, "
                                f"{cell.distribution}({cell.params_label()}), d={d}, N={n}]") from exc
            bb = scheme.bits_per_coord(n)
            budget = float(bb.nominal) if cell.budget is None else float(cell.budget)
            prof = prof.assign(trial=np.arange(start, start + t), distribution=cell.distribution,
                               params=cell.params_label(), dim=d, n_keys=n, budget=budget,
                               scheme=spec.display(), bits_nominal=float(bb.nominal),
                               bits_total=float(bb.total), key_bits_total=float(bb.key_total),
                               value_bits_total=float(bb.value_total), cell_id=cid)
            out.append((cid, start, prof, time.perf_counter() - tic))
        del trials
    return out


def _load_real(cell: Cell, n_trials: int):
    """The first ``n_trials`` trials of a real cell's capture, checked against the grid's fingerprint."""
    from kvstats.data.real import load_trials

    path = cell.params["path"]
    if _capture_info(path).fingerprint != cell.source:
        # the file changed between building the grid and running this task
        raise ValueError(f"distribution 'real' params 'path' {path!r} changed while the sweep ran "
                         f"(content fingerprint {_capture_info(path).fingerprint}, expected {cell.source})")
    trials = load_trials(path, layer=cell.params.get("layer"), head=cell.params.get("head"))
    if trials.K.shape[1:] != (cell.n_keys, cell.dim):
        raise ValueError(f"distribution 'real' capture {path!r} holds trials of shape {trials.K.shape[1:]}; "
                         f"the grid expected (N, d) = ({cell.n_keys}, {cell.dim})")
    return trials.subset(slice(0, n_trials))


def _tasks(config: SweepConfig, todo: list[tuple[Cell, str]]) -> list[_Task]:
    groups: dict[str, list[tuple[Cell, str]]] = {}
    for cell, cid in todo:
        groups.setdefault(cell.case_key(), []).append((cell, cid))
    tasks = []
    for cells in groups.values():
        chunk = config.chunk_for(cells[0][0].n_keys, cells[0][0].dim)
        n_chunks = -(-config.n_trials // chunk)
        # a real case is not split: every task of it would load the whole capture file
        real = cells[0][0].distribution == REAL
        splits = 1 if real else min(n_chunks, -(-_TARGET_TASKS // len(groups)))
        bounds = np.linspace(0, n_chunks, splits + 1).round().astype(int)
        tasks += [_Task(tuple(cells), config.n_trials, config.n_queries, chunk, config.seed,
                        int(a), int(b), config.dtype) for a, b in zip(bounds[:-1], bounds[1:])]
    return tasks


# ---------------------------------------------------------------------- storage
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


# ---------------------------------------------------------------------- manifest
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
    root = Path(__file__).resolve().parent.parent
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


# ---------------------------------------------------------------------- runner
def _one_blas_thread() -> None:
    """Worker initializer: one BLAS thread per worker process.

    The pool already puts one process on every core; a multi-threaded BLAS inside each
    then oversubscribes the cores, and its spin-waiting threads make a small batched
    matmul take ~1 s instead of ~1 ms on a loaded machine (measured: median of 15 calls
    of (24, 64, 128) @ (24, 128, 128), 1.1 s with 2 OpenBLAS threads under load, 0.8 ms
    with 1).
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _default_workers(n_tasks: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, n_tasks))


def run_sweep(config: "SweepConfig | Mapping[str, Any] | str | os.PathLike", out: str | os.PathLike | None = None,
              executor: "cf.Executor | str | None" = None, progress: bool = True, *,
              resume: bool = True, workers: int | None = None) -> SweepResult:
    """Run a sweep and return its tidy per-trial frame and manifest.

    Parameters
    ----------
    config : SweepConfig, dict or path
        The grid (a TOML path is read with :meth:`SweepConfig.from_toml`).
    out : path, optional
        Directory for ``cells/<cell-id>.parquet``, ``results.parquet`` and
        ``manifest.json``. Without it nothing is written and nothing can be resumed.
    executor : Executor, "serial", "process" or None
        Where tasks run: any :class:`concurrent.futures.Executor` (e.g. a
        ``dask.distributed.Client(...).get_executor()``), ``"serial"`` (in this process),
        or ``None``/``"process"`` (a :class:`~concurrent.futures.ProcessPoolExecutor`
        with ``workers`` forkserver processes, default min(CPUs, tasks), each limited to
        one BLAS thread; one task runs serially).
        An executor passed in is not shut down.
    progress : bool
        Show a tqdm progress bar over cells.
    resume : bool
        Reuse finished cells found in ``out/cells`` (default). With False every cell is
        recomputed and overwritten.
    workers : int, optional
        Processes of the default executor.

    Returns
    -------
    SweepResult
        ``frame`` (one row per cell and trial; columns of :func:`kvstats.error_profile`
        plus :data:`CELL_COLUMNS`) and ``manifest`` (config, seed, versions, git
        revision, times, host, per-cell status: ``"computed"`` or ``"resumed"``).

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 8},
    ...     executor="serial", progress=False)
    >>> sorted(res.frame["scheme"].unique()), len(res.frame)
    (['KQV', 'QKQV'], 16)
    """
    config = load_config(config)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False; received {progress!r}")
    if workers is not None:
        workers = check_int(workers, "workers", low=1)
    started, tic = _now(), time.perf_counter()
    git = _git_revision()  # the code that runs: the tree may change while a long sweep runs
    cells = [(c, config.cell_id(c)) for c in config.cells()]
    out_dir = None if out is None else Path(out)
    cells_dir = None
    if out_dir is not None:
        cells_dir = out_dir / "cells"
        cells_dir.mkdir(parents=True, exist_ok=True)
    frames: dict[str, pd.DataFrame] = {}
    status: dict[str, dict[str, Any]] = {}
    todo = []
    for cell, cid in cells:
        path = _cell_path(cells_dir, cid) if (cells_dir is not None and resume) else None
        if path is not None:
            frames[cid] = _read_table(path)
            status[cid] = {"status": "resumed", "seconds": None}
        else:
            todo.append((cell, cid))
    tasks = _tasks(config, todo)

    from tqdm.auto import tqdm
    # counts trials (integers: no float drift), shown in cells
    bar = tqdm(total=len(cells) * config.n_trials, initial=(len(cells) - len(todo)) * config.n_trials,
               desc="sweep", disable=not progress, file=sys.stderr, unit_scale=1 / config.n_trials,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.0f} cells [{elapsed}<{remaining}]")

    # A cell is computed in chunks, possibly by several tasks; it is written (and counts
    # as done for a resume) once all its trials have arrived.
    pending: dict[str, dict[int, pd.DataFrame]] = {cid: {} for _, cid in todo}
    seconds = dict.fromkeys(pending, 0.0)

    def collect(results: list[tuple[str, int, pd.DataFrame, float]]) -> None:
        for cid, start, part, secs in results:
            pending[cid][start] = part
            seconds[cid] += secs
            bar.update(len(part))
            if sum(map(len, pending[cid].values())) == config.n_trials:
                parts = pending.pop(cid)
                frame = pd.concat([parts[s] for s in sorted(parts)], ignore_index=True)
                if cells_dir is not None:
                    _write_table(frame, cells_dir / cid)
                frames[cid] = frame
                status[cid] = {"status": "computed", "seconds": round(seconds[cid], 3)}

    own_pool = None
    if executor is None or executor == "process":
        n_workers = workers or _default_workers(len(tasks))
        if n_workers > 1 and len(tasks) > 1:
            # forkserver, not fork: forking a process that has started threads (JAX, BLAS)
            # can deadlock the child.
            own_pool = cf.ProcessPoolExecutor(max_workers=n_workers, initializer=_one_blas_thread,
                                              mp_context=multiprocessing.get_context("forkserver"))
            pool: cf.Executor | None = own_pool
        else:
            pool = None
        executor_name = f"ProcessPoolExecutor({n_workers})" if own_pool else "serial"
    elif executor == "serial":
        pool, executor_name = None, "serial"
    elif isinstance(executor, cf.Executor):
        pool, executor_name = executor, type(executor).__name__
    else:
        raise TypeError("executor must be a concurrent.futures.Executor, 'serial', 'process' or None; "
                        f"received {executor!r}")
    try:
        if pool is None:
            for task in tasks:
                collect(_compute_task(task))
        else:
            futures = [pool.submit(_compute_task, task) for task in tasks]
            try:
                for fut in cf.as_completed(futures):
                    collect(fut.result())
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
    finally:
        bar.close()
        if own_pool is not None:
            own_pool.shutdown(wait=True, cancel_futures=True)

    # Cells in grid order, trials in order: the frame does not depend on completion order.
    frame = pd.concat([frames[cid] for _, cid in cells], ignore_index=True)
    manifest = {
        "kvstats_sweep": 1,
        "config": config.to_dict(),
        "seed": config.seed,
        "versions": _versions(),
        "git": git,
        "started": started,
        "finished": _now(),
        "seconds": round(time.perf_counter() - tic, 3),
        "host": {"node": platform.node(), "platform": platform.platform(),
                 "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "executor": executor_name,
        "n_cells": len(cells),
        "n_computed": sum(s["status"] == "computed" for s in status.values()),
        "n_rows": int(len(frame)),
        "cells": [{"id": cid, "key": json.loads(cell.key()), **status[cid]} for cell, cid in cells],
    }
    if out_dir is not None:
        _write_table(frame, out_dir / "results")
        (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    return SweepResult(frame, manifest, config, out_dir)
