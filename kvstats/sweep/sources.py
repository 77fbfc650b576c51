"""The sweep's real data source: a captured KV cache (``distribution = "real"``).

Validates a real source's parameters (``path``, ``layer``, ``head``), reads what the grid
needs of the capture file (its shapes, content fingerprint and the model layers it holds,
through :func:`kvstats.data.capture_format.read_header` and ``read_layers``, cached per
file version) and loads a case's trials for the workers
(:func:`kvstats.data.real.load_trials`), checking that the file is the one the grid was
built from, and gives each trial's ``cluster`` (its text for real trials, the trial
itself for synthetic ones). ``layer`` names model layers: on a capture of some layers
only (``meta["layers"]``) it is read from the slot that holds it.
"""

from __future__ import annotations

import functools
import os
import warnings
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
from jaxtyping import Int

from kvstats._checks import _describe, check_int
from kvstats.data.capture_format import CaptureHeader, layer_slots, read_header, read_layers
from kvstats.data.real import load_trials
from kvstats.data.trials import Trials
from kvstats.results import REAL, _user_stacklevel

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig
    from kvstats.sweep.plan import Cell

#: Parameters of the data source that reads a captured real cache.
_REAL_PARAMS = ("path", "layer", "head")
# How error messages call the capture file of a real source.
_PATH_ARG = "distribution 'real' params 'path'"


def _index_list(value: Any, name: str) -> int | list[int] | None:
    """``layer``/``head`` of a real source: None, an int, or a non-empty list of distinct ints."""
    if value is None or (isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))):
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


def _resolve_real(entry: Any, base_dir: str | os.PathLike) -> Any:
    """A ``real`` distribution entry with its relative capture path(s) resolved against ``base_dir``."""
    if not (isinstance(entry, Mapping) and entry.get("name") == REAL and "params" in entry):
        return entry
    params = entry["params"]
    sets = params if isinstance(params, list) else [params]
    resolved = [_real_params(p, base_dir) for p in sets]
    return {**entry, "params": resolved if isinstance(params, list) else resolved[0]}


@functools.lru_cache(maxsize=64)
def _capture_read(path: str, size: int, mtime_ns: int) -> tuple[CaptureHeader, tuple[int, ...]]:
    # size and mtime_ns are only cache keys: a rewritten file is read again.
    return read_header(path, _PATH_ARG), read_layers(path, _PATH_ARG)


def _capture_stat(path: str) -> tuple[CaptureHeader, tuple[int, ...]]:
    if not os.path.isfile(path):
        error, what = ((IsADirectoryError, "is a folder") if os.path.isdir(path)
                       else (FileNotFoundError, "does not exist"))
        raise error(f"distribution 'real' params 'path' must be an existing capture file "
                    f"(write one with experiments/real_capture.py); {path!r} {what}")
    st = os.stat(path)
    return _capture_read(path, st.st_size, st.st_mtime_ns)


def _capture_info(path: str) -> CaptureHeader:
    """The capture's shapes and content fingerprint."""
    return _capture_stat(path)[0]


def _capture_layers(path: str) -> tuple[int, ...]:
    """The model layer of each stored slot of the capture."""
    return _capture_stat(path)[1]


def _real_selection(params: Mapping[str, Any], info: CaptureHeader) -> tuple[list[int], list[int]]:
    """The model layers and KV heads a real source selects, checked against the capture."""
    held = _capture_layers(params["path"])
    layers = [held[i] for i in layer_slots(held, params.get("layer"), "distribution 'real' params 'layer'",
                                           repr(params["path"]))]
    value, size = params.get("head"), info.n_kv_heads
    heads = list(range(size)) if value is None else ([value] if isinstance(value, int) else list(value))
    if any(i >= size for i in heads):
        raise ValueError(f"distribution 'real' params 'head' must be in [0, {size - 1}] (the capture "
                         f"{params['path']!r} has {size} heads); received {value!r}")
    return layers, heads


def _real_case(config: SweepConfig, params: Mapping[str, Any]) -> tuple[str, list[tuple[int, int]]]:
    """The capture fingerprint and the one (d, N) case of a real source, checked against the config."""
    info = _capture_info(params["path"])
    layers, heads = _real_selection(params, info)
    where = f"distribution 'real' ({params['path']!r})"
    if info.dim not in config.dims or info.n_keys not in config.n_keys:
        raise ValueError(f"dims and n_keys must include the capture's head dimension and length for "
                         f"{where}: it holds d={info.dim}, N={info.n_keys}; received dims="
                         f"{list(config.dims)}, n_keys={list(config.n_keys)}")
    available = info.n_texts * len(layers) * len(heads)
    if config.n_trials > available:
        raise ValueError(f"n_trials must be at most the number of captured trials of {where}: "
                         f"{info.n_texts} texts x {len(layers)} layers x {len(heads)} KV heads = "
                         f"{available}; received n_trials={config.n_trials}")
    per_text = len(layers) * len(heads)
    # once per config (its grid is built again by every cells() call), at the user's call
    warned, key = vars(config).setdefault("_partial_text_warned", set()), (where, str(layers), str(heads))
    if config.n_trials % per_text and key not in warned:
        warned.add(key)
        # trials come text by text: a partial last text counts as a whole cluster (a unit
        # of the tests) holding only its first layers or heads (valid tests, another mean)
        whole = config.n_trials // per_text * per_text
        warnings.warn(f"n_trials={config.n_trials} is not a whole number of texts for {where}: "
                      f"a text holds {len(layers)} layers x {len(heads)} KV heads = {per_text} "
                      f"trials, so the last text (a cluster, the statistical unit) holds only "
                      f"{config.n_trials - whole} of them and its mean is of its first layers or "
                      f"heads alone; use a multiple of {per_text}", UserWarning, stacklevel=_user_stacklevel())
    return info.fingerprint, [(info.dim, info.n_keys)]


def _load_real(cell: Cell, n_trials: int) -> Trials:
    """The first ``n_trials`` trials of a real cell's capture, checked against the grid's fingerprint."""
    path = cell.params["path"]
    if _capture_info(path).fingerprint != cell.source:
        # the file changed between building the grid and running this task
        raise ValueError(f"distribution 'real' params 'path' {path!r} changed while the sweep ran "
                         f"(content fingerprint {_capture_info(path).fingerprint}, expected {cell.source})")
    # model layers (load_trials reads their stored slots and labels trials with them); trials
    # come text by text, so the first n_trials need only the first texts: only those are read
    info = _capture_info(path)
    layers, heads = _real_selection(cell.params, info)
    per_text = len(layers) * len(heads)
    trials = load_trials(path, layer=cell.params.get("layer"), head=cell.params.get("head"),
                         texts=range(min(-(-n_trials // per_text), info.n_texts)))
    if trials.K.shape[1:] != (cell.n_keys, cell.dim):
        raise ValueError(f"distribution 'real' capture {path!r} holds trials of shape {trials.K.shape[1:]}; "
                         f"the grid expected (N, d) = ({cell.n_keys}, {cell.dim})")
    return trials.subset(slice(0, n_trials))   # its per-trial meta (text, cluster, ...) too


def _trial_clusters(captured: Trials | None, start: int, count: int) -> Int[np.ndarray, "count"]:
    """The ``cluster`` column of trials ``start .. start + count - 1`` of a case.

    A real case's trials (``captured``, from :func:`_load_real`) cluster by text
    (``meta["cluster"]``); a synthetic case's (``captured`` None) are independent draws,
    each its own cluster (cluster = trial).
    """
    if captured is None:
        return np.arange(start, start + count, dtype=np.int64)
    return np.asarray(captured.meta["cluster"][start:start + count], dtype=np.int64)
