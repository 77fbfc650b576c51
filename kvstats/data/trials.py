"""The trial: kvstats' unit of observation.

A trial is one independent draw of keys ``K``, values ``V`` and the queries ``q`` that
attend over them. Statistical tests compare distributions of trials, never keys within a
trial (they share the queries and, once quantized, the scheme's randomness).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvstats._checks import _describe, as_data_array, check_int

__all__ = ["Trials", "group_query_heads", "PER_TRIAL_META"]


def _common_float_dtype(*arrays: np.ndarray) -> np.dtype:
    # float32 only when every array is float32: never silently lose precision.
    return np.result_type(*[a.dtype for a in arrays])


def _float_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as float32 or float64, else a ValueError naming it (``sample``'s and
    :meth:`Trials.astype`'s one check).

    Anything numpy cannot read as a dtype (``"bfloat16"``, a list) is refused as a wrong
    value too, and ``None`` is refused rather than read as numpy's default float64 (a
    ``None`` compares equal to ``dtype('float64')`` and would pass an ``in`` test).
    """
    try:
        dt = np.dtype(dtype) if isinstance(dtype, (type, np.dtype, str)) else None
    except TypeError:
        dt = None
    if dt is None or dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be one of [float32, float64]; received {_describe(dtype)}")
    return dt


#: ``Trials.meta`` keys that hold one value per trial (real captures: each trial's text,
#: layer, KV head and statistical cluster); :meth:`Trials.subset` selects them with the trials.
PER_TRIAL_META = ("text", "layer", "head", "cluster")


@dataclass(frozen=True, eq=False)
class Trials:
    """Independent trials of keys, values and queries.

    Parameters
    ----------
    K : array_like, shape (T, N, d)
        Keys: ``T`` trials of ``N`` keys of dimension ``d``.
    V : array_like, shape (T, N, d_v)
        Values, one per key. ``d_v`` may differ from ``d`` (it rarely does).
    q : array_like, shape (T, n_q, d)
        Queries. The ``n_q`` queries of a trial share its keys and values: several
        positions of one head, or the query heads of a grouped-query attention group
        (see :func:`group_query_heads`).
    meta : dict, optional
        Provenance: distribution and parameters and seed for synthetic data, model,
        layer and head for real data. The entries named in :data:`PER_TRIAL_META`, when
        present, hold one value per trial and follow :meth:`subset`. Deep-copied: the
        ``Trials`` owns its provenance (changing the caller's dict, or another
        ``Trials``' made from this one by :meth:`subset` or :meth:`astype`, leaves it alone).

    Notes
    -----
    Arrays are float32 or float64 (other numeric dtypes become float64; booleans, a mask
    passed by mistake, are refused); if the three
    dtypes differ, all are promoted to the wider one. Non-finite values are rejected.
    Equality is identity (``eq=False``): comparing arrays element-wise belongs to tests.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.data import Trials
    >>> t = Trials(np.zeros((2, 8, 4)), np.zeros((2, 8, 4)), np.ones((2, 3, 4)))
    >>> t.n_trials, t.n_keys, t.dim, t.n_queries
    (2, 8, 4, 3)
    >>> t.subset([1]).n_trials
    1
    """

    K: np.ndarray
    V: np.ndarray
    q: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        K = as_data_array(self.K, "K")
        V = as_data_array(self.V, "V")
        q = as_data_array(self.q, "q")
        for name, arr, axes in (("K", K, "(T, N, d)"), ("V", V, "(T, N, d_v)"),
                                ("q", q, "(T, n_q, d)")):
            if arr.ndim != 3:
                raise ValueError(f"{name} must have shape {axes} (3 dimensions); "
                                 f"received {_describe(arr)}")
        if V.shape[:2] != K.shape[:2]:
            raise ValueError("V must have the same number of trials and keys as K "
                             f"(K has shape {K.shape}); received V of shape {V.shape}")
        if q.shape[0] != K.shape[0] or q.shape[2] != K.shape[2]:
            raise ValueError("q must have shape (T, n_q, d) with T and d as in K "
                             f"(K has shape {K.shape}); received q of shape {q.shape}")
        if not isinstance(self.meta, dict):
            raise TypeError(f"meta must be a dict; received {_describe(self.meta)}")
        try:
            object.__setattr__(self, "meta", copy.deepcopy(self.meta))
        except Exception as exc:   # a lock, a file handle: nothing a provenance record holds
            raise TypeError(f"meta must hold values that can be copied (a Trials keeps its own "
                            f"copy); received {_describe(self.meta)}: {exc}") from None
        dtype = _common_float_dtype(K, V, q)
        object.__setattr__(self, "K", K.astype(dtype, copy=False))
        object.__setattr__(self, "V", V.astype(dtype, copy=False))
        object.__setattr__(self, "q", q.astype(dtype, copy=False))

    @property
    def n_trials(self) -> int:
        """Number of trials ``T``."""
        return self.K.shape[0]

    @property
    def n_keys(self) -> int:
        """Keys (and values) per trial ``N``."""
        return self.K.shape[1]

    @property
    def dim(self) -> int:
        """Key and query dimension ``d``."""
        return self.K.shape[2]

    @property
    def value_dim(self) -> int:
        """Value dimension ``d_v``."""
        return self.V.shape[2]

    @property
    def n_queries(self) -> int:
        """Queries per trial ``n_q``."""
        return self.q.shape[1]

    @property
    def dtype(self) -> np.dtype:
        """Common float dtype of ``K``, ``V`` and ``q``."""
        return self.K.dtype

    def __len__(self) -> int:
        return self.n_trials

    def __repr__(self) -> str:
        return (f"Trials(n_trials={self.n_trials}, n_keys={self.n_keys}, dim={self.dim}, "
                f"n_queries={self.n_queries}, dtype={self.dtype}, meta={self.meta!r})")

    def subset(self, idx: Any) -> Trials:
        """Return the trials selected by ``idx`` (an int, slice, index array or boolean mask).

        An integer keeps the trial axis (a ``Trials`` of one trial). ``meta`` is copied,
        its per-trial entries (:data:`PER_TRIAL_META`) are selected too, and any selection
        but all trials in order (an int, a slice, an index array or a mask) is recorded
        under ``"subset"`` as indices (non-negative) into the first ``Trials``: a subset of
        a recorded subset records the original trials it holds.

        Examples
        --------
        >>> import kvstats
        >>> t = kvstats.sample("gaussian", 10, 16, 8, seed=0)
        >>> t.subset(slice(0, 4)).n_trials, t.subset(3).n_trials
        (4, 1)
        >>> t.subset(slice(2, 5)).subset([2, 0]).meta["subset"]
        [4, 2]
        """
        if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
            i = check_int(idx, "idx", low=-self.n_trials, high=self.n_trials - 1)
            sel: Any = slice(i, i + 1) if i != -1 else slice(-1, None)
        elif isinstance(idx, slice):
            try:   # Python's own check of a slice (its message would not name idx)
                range(self.n_trials)[idx]
            except (TypeError, ValueError) as exc:   # a float bound: TypeError; step 0: ValueError
                raise type(exc)(f"idx as a slice must have integer (or None) start, stop and a "
                                f"non-zero step; received {idx!r}") from None
            sel = idx
        else:
            sel = np.asarray(idx)
            if sel.ndim == 1 and sel.size == 0:   # [] is float64 to numpy: an empty index list
                sel = sel.astype(np.intp)
            if sel.dtype == bool:
                if sel.shape != (self.n_trials,):
                    raise ValueError(f"idx as a boolean mask must have shape ({self.n_trials},); "
                                     f"received {_describe(sel)}")
            elif sel.dtype.kind in "iu":
                if sel.ndim != 1:   # the right kind of index, the wrong shape
                    raise ValueError(f"idx as an integer array must be 1-D; received "
                                     f"{_describe(sel)}")
                if sel.size and (sel.min() < -self.n_trials or sel.max() >= self.n_trials):
                    raise ValueError(f"idx must index trials in [-{self.n_trials}, "
                                     f"{self.n_trials - 1}]; received values in "
                                     f"[{sel.min()}, {sel.max()}]")
            else:
                raise TypeError("idx must be an int, a slice, a 1-D integer array or a "
                                f"boolean mask; received {_describe(idx)}")
        K, V, q = self.K[sel], self.V[sel], self.q[sel]
        if K.shape[0] == 0:
            raise ValueError(f"idx must select at least one trial; received {_describe(idx)}")
        meta = dict(self.meta)
        for key in PER_TRIAL_META:  # per-trial provenance follows the selection
            values = meta.get(key)
            if isinstance(values, (list, tuple, np.ndarray)) and len(values) == self.n_trials:
                picked = np.asarray(values)[sel]
                meta[key] = picked.tolist() if isinstance(values, (list, tuple)) else picked
        earlier = meta.get("subset")   # a subset's record (one index per trial), or not one
        if not (isinstance(earlier, (list, tuple, np.ndarray)) and len(earlier) == self.n_trials):
            earlier = None
        picked = np.arange(self.n_trials)[sel]
        if earlier is not None:        # indices into the first Trials, through the record
            meta["subset"] = np.asarray(earlier)[picked].tolist()
        elif not np.array_equal(picked, np.arange(self.n_trials)):   # all in order: no record
            meta["subset"] = picked.tolist()
        return Trials(K, V, q, meta)

    def astype(self, dtype: Any) -> Trials:
        """Return a copy with ``K``, ``V`` and ``q`` cast to float32 or float64.

        ``dtype`` is checked as :func:`kvstats.sample` checks it: anything but a spelling
        of float32 or float64 (``None`` included) is a ValueError.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> kvstats.sample("gaussian", 2, 4, 8).astype(np.float32).dtype
        dtype('float32')
        """
        dt = _float_dtype(dtype)
        return Trials(self.K.astype(dt), self.V.astype(dt), self.q.astype(dt), self.meta)


def group_query_heads(K: Any, V: Any, q: Any, meta: dict[str, Any] | None = None) -> Trials:
    """Arrange grouped-query attention heads into trials (one trial per batch entry and KV head).

    In grouped-query attention (Llama-3, SmolLM2) ``H_q = g · H_kv`` query heads share
    ``H_kv`` key/value heads; query head ``h`` reads KV head ``h // g`` (the order of
    ``transformers``' ``repeat_kv``). Each KV head with its ``g`` query heads at all
    query positions becomes one trial whose ``n_q = g · n_pos`` queries are ordered
    head-major (query ``j`` is head ``j // n_pos`` of the group, position ``j % n_pos``).

    Parameters
    ----------
    K, V : array_like, shape (..., H_kv, N, d)
        Keys and values; leading axes (e.g. texts, layers) are batch axes.
    q : array_like, shape (..., H_q, n_pos, d)
        Queries with the same leading axes; ``H_q`` must be a multiple of ``H_kv``.
    meta : dict, optional
        Copied into the result, with ``group_size``, ``n_kv_heads``, ``batch_shape``
        added so that trial ``t`` can be traced back (trial index = C-order index over
        ``(*batch_shape, H_kv)``).

    Returns
    -------
    Trials
        ``K``, ``V`` of shape ``(prod(batch) · H_kv, N, d)`` and ``q`` of shape
        ``(prod(batch) · H_kv, g · n_pos, d)``.

    Notes
    -----
    Causal masking is not applied: every query attends over all ``N`` keys. For captured
    prefill caches, select the query positions that may see all keys (the last ones).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.data import group_query_heads
    >>> K = np.ones((2, 3, 10, 64)); q = np.ones((2, 9, 1, 64))   # SmolLM2: 9 q heads, 3 kv
    >>> t = group_query_heads(K, K, q)
    >>> t.K.shape, t.q.shape
    ((6, 10, 64), (6, 3, 64))
    """
    if meta is not None and not isinstance(meta, dict):   # before dict(meta) reads a str's letters
        raise TypeError(f"meta must be a dict or None; received {_describe(meta)}")
    K = as_data_array(K, "K", min_ndim=3)
    V = as_data_array(V, "V", min_ndim=3)
    q = as_data_array(q, "q", min_ndim=3)
    if V.shape[:-1] != K.shape[:-1]:
        raise ValueError(f"V must have shape (..., H_kv, N, d_v) matching K {K.shape} except "
                         f"the last axis; received V of shape {V.shape}")
    if q.ndim != K.ndim or q.shape[:-3] != K.shape[:-3] or q.shape[-1] != K.shape[-1]:
        raise ValueError(f"q must have shape (..., H_q, n_pos, d) with the leading axes and d "
                         f"of K {K.shape}; received q of shape {q.shape}")
    h_kv, h_q = K.shape[-3], q.shape[-3]
    if h_q % h_kv:
        raise ValueError(f"q's head axis (H_q = {h_q}) must be a multiple of K's "
                         f"(H_kv = {h_kv}); received shapes q {q.shape}, K {K.shape}")
    g = h_q // h_kv
    batch = K.shape[:-3]
    n, d, n_pos = K.shape[-2], K.shape[-1], q.shape[-2]
    # (..., H_q, n_pos, d) -> (..., H_kv, g, n_pos, d): query head h = kv * g + j.
    qg = q.reshape(*batch, h_kv, g * n_pos, d)
    out_meta = dict(meta or {})
    out_meta.update(group_size=g, n_kv_heads=h_kv, batch_shape=tuple(batch))
    return Trials(K.reshape(-1, n, d), V.reshape(-1, n, V.shape[-1]), qg.reshape(-1, g * n_pos, d),
                  out_meta)
