"""Trials from a captured real KV cache (``kvstats.models.capture``), numpy only.

A capture file (``.npz``) holds post-RoPE ``K``, ``V`` of shape
``(n_texts, n_layers, n_kv_heads, N, d)``, post-RoPE queries ``q`` of shape
``(n_texts, n_layers, n_q_heads, N, d)`` and a JSON ``meta`` string; the format is
defined in :mod:`kvstats.data.capture_format`.

Causal masking. The capture is a prefill: the query at position ``t`` attends only to
keys ``0..t``. :func:`kvstats.error_profile` computes full attention of every query over
all ``N`` keys of its trial, so only the queries of the **last position** ``N - 1`` (the
decode-step query, which legitimately sees every key) are used: a trial's ``n_q`` queries
are the ``G`` query heads of its KV head's group at position ``N - 1`` (``G = 3`` for
SmolLM2). Earlier positions are never paired with keys they could not see.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from kvstats._checks import _describe, check_int
from kvstats.data.capture_format import LAYERS, held_layers, layer_slots, read_capture
from kvstats.data.trials import Trials, group_query_heads

__all__ = ["load_trials", "load_capture", "trial_clusters"]


def load_capture(path: str | os.PathLike) -> tuple[Float[np.ndarray, "texts layers kv_heads n d"],
                                                   Float[np.ndarray, "texts layers kv_heads n d"],
                                                   Float[np.ndarray, "texts layers q_heads n d"], dict]:
    """Read and validate a capture file; return ``(K, V, q, meta)`` as stored.

    Examples
    --------
    >>> import numpy as np, json, tempfile, os
    >>> from kvstats.data.real import load_capture
    >>> p = os.path.join(tempfile.mkdtemp(), "c.npz")
    >>> z = np.ones((1, 2, 1, 4, 8), np.float32)
    >>> np.savez(p, K=z, V=z, q=np.ones((1, 2, 3, 4, 8), np.float32), meta=json.dumps({}))
    >>> load_capture(p)[2].shape
    (1, 2, 3, 4, 8)
    """
    return read_capture(_capture_path(path))


def _capture_path(path: Any) -> str | os.PathLike:
    """``path``, checked to be an existing file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path to a capture .npz file; received {_describe(path)}")
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise FileNotFoundError(f"path must be an existing capture file (write one with "
                                f"kvstats.models.capture(..., path=...)); {os.fspath(path)!r} {what}")
    return path


def _native(a: np.ndarray) -> np.ndarray:
    """``a`` in native byte order (a selection of a big-endian file's map), float16 widened
    to float32 (exactly; Trials would have made it float64, twice the memory)."""
    if a.dtype.newbyteorder("=") == np.float16:
        return a.astype(np.float32)
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _select(value: int | Sequence[int] | np.ndarray | None, name: str, size: int) -> list[int]:
    if value is None:
        return list(range(size))
    if isinstance(value, np.ndarray) and value.ndim == 0:   # np.array(3): the int it holds
        value = value[()]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [check_int(value, name, low=0, high=size - 1)]
    if isinstance(value, Sequence) or (isinstance(value, np.ndarray) and value.ndim == 1):
        out = [check_int(v, name, low=0, high=size - 1) for v in value]
        if not out:
            raise ValueError(f"{name} must select at least one index in [0, {size - 1}]; received {value!r}")
        if len(set(out)) != len(out):   # copies of one (layer, head) would count as more trials
            raise ValueError(f"{name} must not repeat indices (each selected once); received {out}")
        return out
    raise TypeError(f"{name} must be None, an int or a sequence of ints in [0, {size - 1}]; "
                    f"received {_describe(value)}")


def _layer_slots(meta: dict, layer: int | Sequence[int] | np.ndarray | None, n_layers: int,
                 path: str | os.PathLike) -> tuple[list[int], list[int]]:
    """The stored slots and the model layers of ``layer`` (model layers; None: every layer
    the capture holds). A capture of some layers only records them (``meta["layers"]``:
    :func:`~kvstats.data.capture_format.held_layers`); slot i is layer i in one of all."""
    where = repr(os.fspath(path))
    held = held_layers(meta, n_layers, "the capture's meta", where)
    if layer is not None:   # an int or a list of ints, range-checked as model layers
        checked = _select(layer, "layer", max(held) + 1)
        layer = checked[0] if isinstance(layer, (int, np.integer)) else checked
    slots = layer_slots(held, layer, "layer", where)
    return slots, [held[s] for s in slots]


def load_trials(path: str | os.PathLike, layer: int | Sequence[int] | None = None,
                head: int | Sequence[int] | None = None,
                texts: int | Sequence[int] | None = None, *, verify: bool = True) -> Trials:
    """Trials from a captured real cache: one per (text, layer, KV head).

    Parameters
    ----------
    path : path
        A capture ``.npz`` written by :func:`kvstats.models.capture`.
    layer : int or sequence of int, optional
        Model layers to keep (default all the capture holds; a capture of some layers
        only, ``kvstats.models.capture(..., layers=...)``, holds those it records), each
        at most once.
    head : int or sequence of int, optional
        KV heads to keep (default all), each at most once.
    texts : int or sequence of int, optional
        Texts to keep (default all), each at most once: a sweep that needs the first few
        texts' trials reads only those.
    verify : bool
        Check the file's zip CRC-32s (default), so that a corrupted capture is refused
        rather than loaded as finite garbage; see Notes for its cost. False skips it.

    Returns
    -------
    Trials
        ``K``, ``V`` of shape ``(n_texts * n_layers_sel * n_heads_sel, N, d)``, float32 for
        a float32 capture (what :func:`kvstats.models.capture` writes) or a float16 one
        (widened exactly), float64 for a float64 one (the widest of ``K``, ``V``, ``q``
        when they differ; other dtypes are refused:
        :mod:`~kvstats.data.capture_format`); ``q`` of shape ``(…, G, d)``: the ``G`` query heads of the KV head's
        group at the last position (see the module docstring for why). Trial ``t`` is
        the C-order index over (text, layer, head); ``meta["text"]``, ``meta["layer"]``,
        ``meta["head"]`` give each trial's origin, plus the capture's own metadata except
        its shape counts (``n_texts``, ``n_layers``, ``n_q_heads``, ``layers``: wrong for a
        selection; ``n_kv_heads``, ``group_size`` and ``batch_shape`` are the selection's,
        as :func:`group_query_heads` sets them).
        ``meta["cluster"]`` is each trial's statistical unit: its text (trials of one
        text share its tokens and are not independent; see :func:`trial_clusters`),
        and ``meta["cluster_by"]`` says so (``"text"``).

    Notes
    -----
    The per-trial lists of ``meta`` (``text``, ``layer``, ``head``, ``cluster``:
    :data:`~kvstats.data.trials.PER_TRIAL_META`) follow a :meth:`Trials.subset`, which
    selects them with the trials.

    Only the selection is read from the file (memory maps of its arrays:
    :func:`~kvstats.data.capture_format.read_capture` with ``mapped=True``): ``K`` and
    ``V`` of the selected layers and heads and ``q`` at the last position, so the memory
    it takes is the selection's, not the capture's.

    ``verify`` reads the whole file once more, streamed in 64 KiB chunks (bounded memory;
    the time of reading the file, about a second per GB from a warm page cache), once per
    process for each version of the file: a sweep that loads a capture cell by cell checks
    it at its first cell only (:func:`~kvstats.data.capture_format.read_capture`).

    Examples
    --------
    >>> import numpy as np, json, tempfile, os
    >>> from kvstats.data.real import load_trials
    >>> p = os.path.join(tempfile.mkdtemp(), "c.npz")
    >>> rng = np.random.default_rng(0)
    >>> K = rng.standard_normal((2, 4, 3, 16, 8)).astype(np.float32)
    >>> q = rng.standard_normal((2, 4, 9, 16, 8)).astype(np.float32)
    >>> np.savez(p, K=K, V=K, q=q, meta=json.dumps({"model": "toy"}))
    >>> t = load_trials(p, layer=[0, 3])
    >>> t.K.shape, t.q.shape, t.meta["layer"][:4]
    ((12, 16, 8), (12, 3, 8), [0, 0, 0, 3])
    >>> t.meta["cluster"][::3], t.meta["cluster_by"]
    ([0, 0, 1, 1], 'text')
    >>> load_trials(p, texts=1).meta["text"][:3]
    [1, 1, 1]
    """
    # memory maps of the file: only the selection below is read (its size, not the file's)
    K, V, q, meta = read_capture(_capture_path(path), mapped=True, verify=verify)
    n_texts, n_layers, n_kv = K.shape[:3]
    g = q.shape[2] // n_kv
    slots, layers = _layer_slots(meta, layer, n_layers, path)
    heads = _select(head, "head", n_kv)
    q_heads = [h * g + j for h in heads for j in range(g)]  # query head h reads KV head h // g
    texts = np.asarray(_select(texts, "texts", n_texts))
    Ks = _native(K[np.ix_(texts, slots, heads)])
    Vs = _native(V[np.ix_(texts, slots, heads)])
    # last position only (it sees all N keys), taken before the selection: no other is read
    qs = _native(q[:, :, :, -1][np.ix_(texts, slots, q_heads)])[:, :, :, None]
    del K, V, q   # the maps close
    tt, ll, hh = np.meshgrid(texts, layers, heads, indexing="ij")
    # the capture's shape counts describe the file, not this selection: left out
    info = {k: v for k, v in meta.items()
            if k not in ("token_ids", "n_texts", "n_layers", "n_q_heads", LAYERS)}
    info.update(distribution="real", path=os.fspath(path), query_positions="last",
                text=tt.ravel().tolist(), layer=ll.ravel().tolist(), head=hh.ravel().tolist(),
                cluster=tt.ravel().tolist(), cluster_by="text")
    return group_query_heads(Ks, Vs, qs, info)


def trial_clusters(trials: Trials) -> Int[np.ndarray, "T"]:
    """Each trial's cluster (statistical unit): the text for real trials, the trial itself otherwise.

    Trials of one captured text (its layers and KV heads) share the text's tokens, so
    their metrics are correlated: the text is the independent unit, and tests on real
    trials use it (:func:`kvstats.analysis.aggregate_clusters`). Synthetic trials are
    independent draws: each is its own cluster.

    Parameters
    ----------
    trials : Trials
        From :func:`load_trials` (``meta["cluster"]`` is read) or any other source (no
        ``meta["cluster"]``: trial ``t`` is cluster ``t``).

    Returns
    -------
    ndarray of int64, shape (T,)

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.data.real import trial_clusters
    >>> trial_clusters(kvstats.sample("gaussian", 3, 4, 8)).tolist()
    [0, 1, 2]
    """
    if not isinstance(trials, Trials):
        raise TypeError(f"trials must be a kvstats Trials; received {_describe(trials)}")
    clusters = trials.meta.get("cluster")
    if clusters is None:
        return np.arange(trials.n_trials, dtype=np.int64)
    raw = np.asarray(clusters)
    if raw.dtype.kind not in "iu":
        raise ValueError(f"trials.meta['cluster'] must hold integer cluster labels, one per trial; "
                         f"received {_describe(raw)}")
    out = raw.astype(np.int64)
    if out.shape != (trials.n_trials,):
        # a hand-built meta (load_trials and Trials.subset keep one entry per trial)
        raise ValueError(f"trials.meta['cluster'] must hold one cluster per trial ({trials.n_trials}); "
                         f"received {out.size}")
    return out
