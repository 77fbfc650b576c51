"""Attention and the mechanism proxies measured on its weights.

Conventions: the attention logits are ``q·k/√d``; softmax and log-softmax subtract the
row maximum, so they are finite wherever a logit's distance to its row's maximum is within
the float range (logits of 1e4 and far beyond; ``log_softmax([1e308, -1e308])`` gives
``-inf``, weight 0, as float64 must), and ``-inf`` entries mean "masked" (weight exactly 0). Rankings (top-k recall, argmax)
use the logits, never the probabilities, which tie once they underflow to zero.
Inputs are read in C order, each distribution contiguous (its axis last), so the numbers
depend on the values alone: not on the memory layout, nor on which axis holds them.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from kvstats._checks import _describe, as_data_array, as_float_array, check_int
from kvstats._scaling import scale_rows

__all__ = ["softmax", "log_softmax", "attention_logits", "attention_weights",
           "attention_output", "kl_divergence", "topk_recall", "argmax_shift"]


# --- unchecked kernels (callers validate) -------------------------------------------

def _log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(over="ignore"):        # x − m below −max float: −inf, weight 0 (exact limit)
        z = x - m                           # max entry becomes 0: exp never overflows
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _kl(logp: np.ndarray, logq: np.ndarray, axis: int = -1) -> np.ndarray:
    p = np.exp(logp)
    with np.errstate(invalid="ignore"):     # -inf - -inf where p == 0; masked out below
        diff = logp - logq
    # p == 0 contributes 0 (including underflowed p); p > 0 with q == 0 contributes +inf.
    terms = p * np.where(p > 0, diff, 0.0)
    # Rounding can leave a -1e-17 residue for identical rows; KL >= 0 by Gibbs.
    return np.maximum(np.sum(terms, axis=axis), 0.0)


def _topk_hits(ref: np.ndarray, quant: np.ndarray, k: int) -> np.ndarray:
    # Integer count of retrieved reference top-k keys per row (recall = hits / k), so that
    # a mean over queries can sum counts and divide once (exact, no summation-order bits).
    # A key is retrieved when its quantized score is at least the k-th largest one and
    # not masked (-inf: with fewer than k unmasked quantized keys the k-th is -inf too).
    # The reference's top k: the keys above its k-th score, and k - n_above of those tied
    # at it, chosen in favour of retrieved ones (with no tie: the k-th key itself), so the
    # recall depends on no tie-break order and recall@1 = 1 - argmax shift.
    n = ref.shape[-1]
    kth_ref = np.partition(ref, n - k, axis=-1)[..., n - k:n - k + 1]          # (..., 1)
    kth_quant = np.partition(quant, n - k, axis=-1)[..., n - k:n - k + 1]
    hit = (quant >= kth_quant) & (quant > -np.inf)
    above = ref > kth_ref
    tied_hits = np.count_nonzero(hit & (ref == kth_ref), axis=-1)
    n_above = np.count_nonzero(above, axis=-1)
    return np.count_nonzero(hit & above, axis=-1) + np.minimum(k - n_above, tied_hits)


def _topk_recall(ref: np.ndarray, quant: np.ndarray, k: int) -> np.ndarray:
    return _topk_hits(ref, quant, k) / k


def _argmax_shift(ref: np.ndarray, quant: np.ndarray) -> np.ndarray:
    # shifted when no key tied for the reference's first place is first in quant
    top = ref == np.max(ref, axis=-1, keepdims=True)
    return np.max(np.where(top, quant, -np.inf), axis=-1) < np.max(quant, axis=-1)


# --- validation helpers ---------------------------------------------------------------

#: Routing-set size of :func:`topk_recall` and of the profile's ``recall_at_5`` when no
#: ``k`` is given.
_DEFAULT_K = 5


def _check_k(k: Any, n: int, keys: str) -> int:
    """``k`` as an int in ``[1, n]``; ``keys`` says where the ``n`` keys are. A default
    ``k`` larger than ``n`` is named as the default (the caller may never have passed it)."""
    if isinstance(k, Integral) and not isinstance(k, bool) and k == _DEFAULT_K > n:
        raise ValueError(f"k must be an integer in [1, {n}] ({keys}): the default k={k} is too "
                         f"large; pass k <= {n}")
    return check_int(k, "k", low=1, high=n)


def _c_ordered(arr: np.ndarray) -> np.ndarray:
    """``arr`` in C order (itself when it is): sums and products round by memory layout,
    and a Fortran-ordered or transposed input gave other last bits than a C-ordered one."""
    return np.ascontiguousarray(arr)


def _rows(arr: np.ndarray, axis: int) -> np.ndarray:
    """``arr`` with ``axis`` last, C-ordered: each distribution contiguous, so its sums
    depend on its values alone, not on the layout or on which axis holds it (``axis=-1``
    of a C-ordered array: ``arr`` itself)."""
    return _c_ordered(np.moveaxis(arr, axis, -1))


def _logits_array(x: Any, name: str, axis: int) -> tuple[np.ndarray, int]:
    arr = as_float_array(x, name, min_ndim=1, allow_nonfinite=True)
    axis = check_int(axis, "axis", low=-arr.ndim, high=arr.ndim - 1)
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{name} must be finite or -inf (masked); received "
                         f"{int(np.isnan(arr).sum())} NaN and {int(np.isposinf(arr).sum())} "
                         f"+inf value(s) in {_describe(arr)}")
    if np.isneginf(arr).all(axis=axis).any():
        raise ValueError(f"{name} must have at least one entry > -inf along axis {axis} "
                         "(a fully masked row has no distribution)")
    return arr, axis


def _pair(a: Any, b: Any, name_a: str, name_b: str, axis: int) -> tuple[np.ndarray, np.ndarray, int]:
    x, axis = _logits_array(a, name_a, axis)
    y, _ = _logits_array(b, name_b, axis)
    if x.shape != y.shape:
        raise ValueError(f"{name_b} must have the shape of {name_a} {x.shape}; "
                         f"received {name_b} of shape {y.shape}")
    return x, y, axis


# --- public functions -----------------------------------------------------------------

def log_softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Numerically stable log-softmax along ``axis``.

    Computed as ``z - log(sum(exp(z)))`` with ``z = x - max(x)``, so it is finite and
    accurate wherever ``max(x) - x`` is within the float range (beyond it an entry is
    ``-inf``, weight 0). ``-inf`` entries (masked) stay ``-inf``.

    Parameters
    ----------
    x : array_like
        Logits; finite or ``-inf``, at least one finite entry per row.
    axis : int
        Axis over which the distribution lives.

    Returns
    -------
    numpy.ndarray
        Log-probabilities, the shape of ``x``; float32 for float32 ``x``, float64 for
        any other dtype (float16, bfloat16, integers).

    Examples
    --------
    >>> from kvstats.metrics import log_softmax
    >>> log_softmax([1e4, 0.0]).round(3)
    array([     0., -10000.])
    """
    arr, axis = _logits_array(x, "x", axis)
    return np.moveaxis(_log_softmax(_rows(arr, axis)), -1, axis)


def softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis`` (max subtraction; ``-inf`` → weight 0).

    Parameters
    ----------
    x : array_like
        Logits; finite or ``-inf``, at least one finite entry per row.
    axis : int
        Axis over which the distribution lives.

    Returns
    -------
    numpy.ndarray
        Probabilities summing to 1 along ``axis``, the shape of ``x``; float32 for
        float32 ``x``, float64 for any other dtype (float16, bfloat16, integers).

    Examples
    --------
    >>> from kvstats.metrics import softmax
    >>> softmax([1e4, 1e4 - 1.0, -float("inf")]).round(4)
    array([0.7311, 0.2689, 0.    ])
    """
    arr, axis = _logits_array(x, "x", axis)
    rows = _rows(arr, axis)
    with np.errstate(over="ignore"):        # as in _log_softmax: −inf, weight exactly 0
        z = np.exp(rows - np.max(rows, axis=-1, keepdims=True))
    return np.moveaxis(z / np.sum(z, axis=-1, keepdims=True), -1, axis)


def _check_product(a: tuple[int, ...], b: tuple[int, ...], axes: tuple[int, int],
                   size_message: str, batch_message: str) -> None:
    """ValueError unless shapes ``a`` and ``b`` are the operands of one batched matrix
    product: ``size_message`` unless they agree along the contracted ``axes`` (a's, b's),
    then ``batch_message`` unless their batch axes (all but the last two) broadcast
    (numpy's own error names neither operand)."""
    if a[axes[0]] != b[axes[1]]:
        raise ValueError(size_message)
    try:
        np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ValueError(batch_message) from None


def _q_k(q: Any, K: Any) -> tuple[np.ndarray, np.ndarray]:
    qa = _c_ordered(as_data_array(q, "q", min_ndim=2))
    Ka = _c_ordered(as_data_array(K, "K", min_ndim=2))
    _check_product(qa.shape, Ka.shape, (-1, -1),
                   f"q and K must share the feature axis d; received q of shape {qa.shape} and "
                   f"K of shape {Ka.shape}",
                   f"the batch axes of q {qa.shape[:-2]} and K {Ka.shape[:-2]} must broadcast")
    return qa, Ka


# An entry q·k smaller than this whose bound max|q_i|·max|k_j| is nonzero and smaller
# too may have lost digits to underflow in its terms (the normal minimum is 2**-126 in
# float32, 2**-1022 in float64; an entry or bound above it is accurate to rounding).
_TINY_PRODUCT = {np.dtype(np.float32): 2.0**-100, np.dtype(np.float64): 2.0**-900}


def _inner(q: np.ndarray, K: np.ndarray, names: str, divisor: np.floating | None = None,
           dtype: np.dtype | type = np.float64) -> np.ndarray:
    """``q Kᵀ`` (batched; divided by ``divisor`` when given) as ``dtype``, with the
    entries whose plain product over- or underflowed redone exactly scaled.

    The plain product runs in the inputs' dtype, and every entry it gets right keeps its
    bits, whatever shares the call. An entry is redone when it is not finite (overflow),
    or when it is below ``_TINY_PRODUCT`` in magnitude and so is the bound
    ``max|q_i|·max|k_j|`` of its terms (nonzero; compared through binary exponents, which
    cannot underflow): its terms may have been rounded to the subnormal grid. (An entry
    or a bound above ``_TINY_PRODUCT`` is accurate to rounding relative to ‖q_i‖‖k_j‖,
    so ordinary data, zero rows and exact zeros of ordinary rows take the plain path.)
    The redo scales each query and key row by 2**-e of its own largest magnitude
    (exact), multiplies in float64 and scales back with ``ldexp``. An entry beyond ``dtype``'s range is a
    ValueError naming ``names``. The one q·k routine of :func:`attention_logits` and of
    the profile (:mod:`kvstats.metrics.profile`).
    """
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):       # redone below
        raw = q @ np.swapaxes(K, -1, -2)
        out = (raw if divisor is None else raw / divisor).astype(dtype, copy=False)
    tiny = _TINY_PRODUCT[raw.dtype]
    small = np.abs(raw) < tiny                                 # NaN (inf − inf): False
    finite = np.isfinite(raw) & np.isfinite(out)
    if finite.all() and not small.any():
        return out
    mq, mk = np.max(np.abs(q), axis=-1), np.max(np.abs(K), axis=-1)     # (..., n_q), (..., N)
    eq, ek = np.frexp(mq)[1], np.frexp(mk)[1]     # as max_exponent: max in [2**(e-1), 2**e)
    e_sum = eq[..., :, None] + ek[..., None, :]
    # the bound lies in [2**(e_sum - 2), 2**e_sum): surely below tiny when 2**e_sum <= tiny
    under = (e_sum <= np.frexp(tiny)[1] - 1) & (mq > 0)[..., :, None] & (mk > 0)[..., None, :]
    redo = ~finite | (small & under)
    if not redo.any():
        return out
    prod = (scale_rows(q.astype(np.float64), eq)
            @ np.swapaxes(scale_rows(K.astype(np.float64), ek), -1, -2))
    if divisor is not None:
        prod = prod / np.float64(divisor)
    with np.errstate(over="ignore"):                          # refused just below
        redone = np.ldexp(prod, e_sum).astype(dtype)
    out = np.where(redo, redone, out)
    if not np.isfinite(out).all():
        what = "the logits q·k/√d" if divisor is not None else "the inner products q·k"
        raise ValueError(f"{names}: {what} exceed the {dtype} range (|q| up to "
                         f"2**{int(eq.max())}, |k| up to 2**{int(ek.max())}); rescale the "
                         "queries or the keys"
                         + (" or pass float64 arrays" if dtype == np.float32 else ""))
    return out


def attention_logits(q: Any, K: Any, mask: Any = None) -> np.ndarray:
    """Scaled attention logits ``q Kᵀ / √d``.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d)
        Queries; several queries (positions, or the query heads of a grouped-query
        group) share the keys.
    K : array_like, shape (..., N, d)
        Keys; batch axes broadcast against those of ``q``.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n_q, N)``; ``False`` entries get logit ``-inf``.

    Returns
    -------
    numpy.ndarray, shape (..., n_q, N)
        Logits (unitless); float32 when ``q`` and ``K`` are both float32, float64
        otherwise (other dtypes are read as float64).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.metrics import attention_logits
    >>> attention_logits(np.ones((1, 4)), np.eye(4) * 2).tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    qa, Ka = _q_k(q, K)
    dtype = np.result_type(qa, Ka)
    logits = _inner(qa, Ka, "q and K", divisor=np.sqrt(qa.shape[-1]).astype(dtype), dtype=dtype)
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != bool:
            raise TypeError(f"mask must be a boolean array; received {_describe(m)}")
        try:
            m = np.broadcast_to(m, logits.shape)
        except ValueError:
            raise ValueError(f"mask must broadcast to the logits' shape {logits.shape}; "
                             f"received {_describe(m)}") from None
        logits = np.where(m, logits, -np.inf)
    return logits


def attention_weights(q: Any, K: Any, mask: Any = None) -> np.ndarray:
    """Attention weights ``softmax(q Kᵀ / √d)`` over the keys.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d)
    K : array_like, shape (..., N, d)
    mask : array_like of bool, optional
        As in :func:`attention_logits`; every query needs one unmasked key.

    Returns
    -------
    numpy.ndarray, shape (..., n_q, N)
        Rows sum to one; the dtype of :func:`attention_logits`.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.metrics import attention_weights
    >>> attention_weights(np.zeros((2, 1, 8)), np.ones((2, 5, 8))).shape
    (2, 1, 5)
    """
    logits = attention_logits(q, K, mask)
    if mask is not None:
        # a query with every key masked has no distribution: say so naming mask (softmax
        # would name its own argument, x, which the caller never passed)
        empty = np.isneginf(logits).all(axis=-1)
        if empty.any():
            raise ValueError(f"mask must leave at least one key unmasked for every query; "
                             f"received a mask that masks every key of {int(empty.sum())} of "
                             f"the {empty.size} queries")
    return softmax(logits)


def attention_output(q: Any, K: Any, V: Any, mask: Any = None) -> np.ndarray:
    """Attention output ``T = softmax(q Kᵀ/√d) V``.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d)
    K : array_like, shape (..., N, d)
    V : array_like, shape (..., N, d_v)
        Values (finite), one row per key; batch axes broadcast against the weights'.
    mask : array_like of bool, optional
        As in :func:`attention_logits`; every query needs one unmasked key.

    Returns
    -------
    numpy.ndarray, shape (..., n_q, d_v)
        The weighted sums of the values; float32 when ``q``, ``K`` and ``V`` are all
        float32, float64 otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.metrics import attention_output
    >>> attention_output(np.zeros((1, 4)), np.ones((3, 4)), np.arange(6.).reshape(3, 2))
    array([[2., 3.]])
    """
    p = attention_weights(q, K, mask)
    Va = _c_ordered(as_data_array(V, "V", min_ndim=2))
    _check_product(p.shape, Va.shape, (-1, -2),
                   f"V must have one row per key (N = {p.shape[-1]}); received V of shape "
                   f"{Va.shape}",
                   f"the batch axes of V {Va.shape[:-2]} must broadcast against those of the "
                   f"attention weights {p.shape[:-2]} (of q and K)")
    return p.astype(np.result_type(p, Va), copy=False) @ Va


def _normalisation_tolerance(dtype: np.dtype, n: int) -> float:
    """How far from 0 ``log Σ exp`` of a row of ``n`` log-probabilities held in ``dtype``
    may be: 1e-6 (float64, integers), 1e-3 (float32); a narrower float (float16,
    bfloat16, fp8) rounds each log p_i by up to eps/2 relative, which moves log Σ exp by
    up to eps/2 · H(p) <= eps/2 · log n: eps · max(1, log n), at least 1e-3."""
    try:
        eps = float(np.finfo(dtype).eps)
    except ValueError:                  # integers (numpy's, ml_dtypes' int4): exact values
        return 1e-6
    if dtype == np.float64:
        return 1e-6
    if dtype == np.float32:
        return 1e-3
    return max(1e-3, eps * max(1.0, float(np.log(n))))


def kl_divergence(logp: Any, logq: Any, axis: int = -1) -> np.ndarray:
    """Kullback–Leibler divergence ``KL(p ‖ q) = Σ p (log p − log q)`` from log-probabilities.

    Working from log-probabilities keeps the result finite and accurate when a
    probability underflows: a term with ``p = exp(log p) = 0`` contributes exactly 0,
    whatever ``log q`` is. A term with ``p > 0`` and ``log q = -inf`` gives ``+inf``
    (``q`` cannot explain ``p``). The result is clipped at 0 (rounding can leave
    ``-1e-17`` for identical rows; KL ≥ 0 exactly).

    Parameters
    ----------
    logp, logq : array_like, same shape
        Normalised log-probabilities (e.g. from :func:`log_softmax`), finite or ``-inf``.
        Normalisation is checked: ``|log Σ exp| ≤ 1e-6`` (float64) or ``1e-3`` (float32);
        log-probabilities held in a narrower float (float16, bfloat16) within what its
        rounding allows, ``eps · max(1, log N)`` (N entries per row; at least 1e-3).
    axis : int
        Axis of the distribution.

    Returns
    -------
    numpy.ndarray
        float64 divergences in nats, ``logp``'s shape without ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.metrics import kl_divergence, log_softmax
    >>> lp, lq = log_softmax(np.array([2000.0, 0.0])), log_softmax(np.array([0.0, 0.0]))
    >>> float(kl_divergence(lp, lq).round(6))      # p = (1, e^-2000): log 2
    0.693147
    """
    lp, lq, axis = _pair(logp, logq, "logp", "logq", axis)
    lp, lq = _rows(lp, axis), _rows(lq, axis)
    for name, arr, given in (("logp", lp, logp), ("logq", lq, logq)):
        tol = _normalisation_tolerance(np.asarray(given).dtype, arr.shape[-1])
        m = np.max(arr, axis=-1, keepdims=True)
        lse = (m + np.log(np.sum(np.exp(arr - m), axis=-1, keepdims=True)))
        if np.abs(lse).max() > tol:
            raise ValueError(f"{name} must be normalised log-probabilities (log Σ exp = 0 "
                             f"within {tol:g}); received rows with log Σ exp up to "
                             f"{np.abs(lse).max():.3g} (pass logits through log_softmax)")
    return _kl(lp.astype(np.float64), lq.astype(np.float64))


def topk_recall(ref: Any, quant: Any, k: int = _DEFAULT_K, axis: int = -1) -> np.ndarray:
    """Top-k routing recall ``|topk(ref) ∩ topk(quant)| / k`` along ``axis``.

    Pass scores in which the ranking lives: logits or log-probabilities (preferred to
    probabilities, which tie at 0 once they underflow).

    Ties: a reference top-k key counts as retrieved when its quantized score is at least
    the k-th largest quantized score (and is not ``-inf``: a masked key is never
    retrieved), so ties at the quantized boundary count as hits and no arbitrary
    tie-break is needed there. Ties in ``ref`` at its k-th place are resolved alike, in
    favour of retrieved keys: the reference's top k are the keys above its k-th score
    and as many retrieved keys among those tied at it as there are places left, so the
    result depends on no key order, and ``k = 1`` gives ``1 - argmax_shift``. Identical
    inputs always give recall 1.

    Parameters
    ----------
    ref, quant : array_like, same shape
        Reference and quantized scores (finite or ``-inf`` for a masked key).
    k : int
        Size of the routing set, ``1 ≤ k ≤`` the number of finite reference scores of
        every row (a ValueError otherwise: masked keys cannot be retrieved); the default
        5 needs 5 keys along ``axis`` (with fewer, the ValueError says k was the default).
    axis : int
        Axis of the keys.

    Returns
    -------
    numpy.ndarray
        float64 recall in ``{0, 1/k, ..., 1}``, ``ref``'s shape without ``axis``.

    Examples
    --------
    >>> from kvstats.metrics import topk_recall
    >>> float(topk_recall([5., 4., 3., 2., 1.], [5., 4., 1., 2., 3.], k=3))
    0.6666666666666666
    """
    r, s, axis = _pair(ref, quant, "ref", "quant", axis)
    n = r.shape[axis]
    k = _check_k(k, n, f"ref has {n} key(s) along axis {axis}")
    # a masked key (-inf) in the reference's top k would count as retrieved whenever the
    # quantized k-th score is -inf too: recall@k needs k unmasked keys in every row
    valid = np.isfinite(r).sum(axis=axis)
    if valid.size and int(valid.min()) < k:
        raise ValueError(f"k must be at most the number of finite (unmasked) reference scores "
                         f"in every row; received k = {k}, and a row with {int(valid.min())} "
                         f"(select the rows with at least k visible keys)")
    return _topk_recall(np.moveaxis(r, axis, -1), np.moveaxis(s, axis, -1), k)


def argmax_shift(ref: Any, quant: Any, axis: int = -1) -> np.ndarray:
    """Whether the top key changed: ``quant[argmax(ref)] < max(quant)``.

    With this definition a tie for first place in ``quant`` that still includes the
    reference's top key is no shift, and identical inputs never shift. When several keys
    tie for first place in ``ref``, each is a top key: a shift is when none of them is
    first in ``quant`` (``max quant[argmax set of ref] < max quant``), whatever the key
    order; so it is ``1 - topk_recall(ref, quant, k=1)``.

    Parameters
    ----------
    ref, quant : array_like, same shape
        Reference and quantized scores (logits preferred).
    axis : int
        Axis of the keys.

    Returns
    -------
    numpy.ndarray of bool
        ``ref``'s shape without ``axis``.

    Examples
    --------
    >>> from kvstats.metrics import argmax_shift
    >>> argmax_shift([[3., 1.], [3., 1.]], [[2., 2.], [1., 2.]]).tolist()
    [False, True]
    """
    r, s, axis = _pair(ref, quant, "ref", "quant", axis)
    return _argmax_shift(np.moveaxis(r, axis, -1), np.moveaxis(s, axis, -1))
