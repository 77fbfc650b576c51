"""The per-trial 6D error profile and its worst-case-aware summary.

One row per trial: the trial is the unit of observation (its keys share the queries and
the scheme's randomness, so they are not independent observations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from kvstats._checks import _describe, as_data_array, as_float_array
from kvstats.data.trials import Trials
from kvstats.metrics.attention import (_DEFAULT_K, _argmax_shift, _check_k,
                                       _inner, _kl, _log_softmax, _topk_hits)
from kvstats._scaling import max_exponent, scale_rows
from kvstats.metrics.geometry import _geometry, _geometry_pooled, _sumsq
from kvstats.metrics.table import DESCRIPTORS, METRIC_DIRECTIONS, METRIC_TABLE

__all__ = ["PROFILE_COLUMNS", "METRIC_DIRECTIONS", "error_profile", "summarize_profile"]

#: Columns of :func:`error_profile`: the trial index, every metric of the metric table
#: (:mod:`kvstats.metrics.table`) in its order, then the trial descriptors
#: (``attn_entropy``: :data:`~kvstats.metrics.table.DESCRIPTORS`).
PROFILE_COLUMNS = ("trial",) + tuple(METRIC_TABLE) + tuple(DESCRIPTORS)

# float64 elements of one (chunk, N, d) or (chunk, n_q, N) array: bounds the working set
# to ~0.1 GB.
_CHUNK_ELEMENTS = 1 << 21
# Most bytes a caller's ``reference`` dict may hold (the sweep's per-case working-set target):
# beyond it a chunk's reference is computed per call, not kept -- with many queries per trial
# the logits (n_q per key) would otherwise outgrow the trials they describe
_REFERENCE_BYTES = 128 << 20


def _mean_finite_db(snr: np.ndarray) -> tuple[np.ndarray, int]:
    """Mean over the last axis of dB values, leaving out exact (+inf) vectors.

    +inf only when every vector is exact. Returns the count of exact vectors too.
    """
    exact = np.isposinf(snr)
    n_fin = snr.shape[-1] - exact.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(exact, 0.0, snr).sum(axis=-1) / n_fin
    return np.where(n_fin == 0, np.inf, m), int(exact.sum())


def _finite_or_raise(values: np.ndarray, what: str, names: str) -> np.ndarray:
    if not np.isfinite(values).all():
        raise ValueError(f"{names}: {what} exceeds the float64 range ({values[~np.isfinite(values)][0]}); "
                         f"rescale the queries or the keys")
    return values


def _ip_slope(ip: np.ndarray, ip_err: np.ndarray) -> np.ndarray:
    """Per trial (leading axis) ``Σ(q·k)(q·k̂)/Σ(q·k)²``, formed as ``1 + Σ(q·k)(q·(k̂ − k))/Σ(q·k)²``
    from the arrays the profile has anyway (no cancellation when k̂ ≈ k; exactly 1 for
    k̂ = k). ``q·k`` and the error are each scaled by a power of two (exact) so that their
    largest magnitude is about 1: the sums of squares and products neither overflow nor
    underflow whatever the data's magnitude, and the scales come back through ``ldexp``.
    A trial whose every ``q·k`` is 0 has no slope: 1 when every ``q·k̂`` is 0 as well (the
    inner products are reproduced), +inf when some is not (as ``‖x̂‖/‖x‖`` for ``x = 0``).
    """
    e1, e2 = max_exponent(ip, axis=(-1, -2)), max_exponent(ip_err, axis=(-1, -2))     # (c,)
    a = np.ldexp(ip, -e1[:, None, None])
    b = np.ldexp(ip_err, -e2[:, None, None])
    den = np.einsum("cij,cij->c", a, a)           # in [2**-2, n_q·N] unless every q·k is 0
    num = np.einsum("cij,cij->c", a, b)
    none = den == 0
    with np.errstate(over="ignore"):    # a slope beyond float64: refused just below
        slope = 1.0 + np.ldexp(num / np.where(none, 1.0, den), e2 - e1)
    _finite_or_raise(slope, "the q·k slope (ip_slope)", "q, K, K_hat")
    exact = np.max(np.abs(ip_err), axis=(-1, -2)) == 0
    return np.where(none, np.where(exact, 1.0, np.inf), slope)


def _all_finite(a: np.ndarray) -> bool:
    """``np.isfinite(a).all()`` in one BLAS pass for a contiguous array: a sum of squares
    is finite only if every value is (an inf or a NaN never sums back to a finite
    number), and needs no boolean array of a's size; when it is not finite (a non-finite
    value, or squares that overflowed) the elementwise test decides."""
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(np.dot(flat, flat)):
                return True
    return bool(np.isfinite(a).all())


def _check_hat(x: Any, name: str, like: np.ndarray, like_name: str) -> np.ndarray:
    arr = as_data_array(x, name, allow_nonfinite=True)
    if not _all_finite(arr):
        as_float_array(arr, name)  # raises its "must be finite" error (or passes: overflow only)
    if arr.shape != like.shape:
        raise ValueError(f"{name} must have the shape of trials.{like_name} {like.shape}; "
                         f"received {name} of shape {arr.shape}")
    return arr


def error_profile(trials: Trials, K_hat: Any, V_hat: Any, k: int = _DEFAULT_K) -> pd.DataFrame:
    """Per-trial 6D error profile of a reconstruction ``(K̂, V̂)`` of ``trials``.

    For each trial (keys/values averaged over the trial's ``N`` vectors, attention
    metrics averaged over its ``n_q`` queries, which stay exact):

    - ``snr_k``, ``snr_v``, ``snr_t``: mean of per-vector SNR in dB (keys, values,
      attention outputs ``T = p V`` vs ``T̂ = p̂ V̂``). Exact vectors (SNR = +inf) are left
      out of the mean; the column is +inf only when all of the trial's vectors are
      exact. ``df.attrs["exact_vectors"]`` counts the exact vectors per place.
    - ``phi_k``, ``phi_v``, ``phi_t``: mean angle in radians (robust ``atan2`` form).
    - ``norm_ratio_k``, ``norm_ratio_v``, ``norm_ratio_t``: mean ``‖x̂‖/‖x‖``.
    - ``kl``: mean over queries of ``KL(p ‖ p̂)`` in nats, ``p = softmax(q Kᵀ/√d)``,
      ``p̂ = softmax(q K̂ᵀ/√d)``, from log-probabilities (finite under underflow).
    - ``recall_at_5``: mean top-k recall of the routing set (``k`` as given, default 5;
      the column name is fixed, the k used is ``df.attrs["k"]``); ties as in
      :func:`~kvstats.metrics.topk_recall`.
    - ``argmax_shift``: fraction of queries whose top key is no longer a top key.
    - ``ip_bias``, ``ip_var``: mean and (population) variance over the trial's
      ``n_q · N`` (query, key) pairs of the inner-product error ``q·k̂ − q·k`` in raw
      units (the logit error is this divided by ``√d``). An unbiased estimator (QJL)
      shows ``ip_bias ≈ 0``; the π/2 variance inflation shows in ``ip_var``.
    - ``ip_slope``: least-squares slope through the origin of ``q·k̂`` on ``q·k`` over the
      same pairs, ``Σ(q·k)(q·k̂)/Σ(q·k)²``: the multiplicative bias ``β`` of
      ``E[q·k̂ | k] = β q·k``, which ``ip_bias`` cannot see on symmetric data (1 for an
      unbiased estimator such as TurboQuant-prod's, ``1 − D`` for TurboQuant-mse's
      Lloyd–Max codes, ``D`` the unit vector's MSE). A trial whose every ``q·k`` is 0
      (zero queries or keys) has no slope: 1 when every ``q·k̂`` is 0 too, +inf otherwise
      (as a norm ratio of a zero vector); never NaN.
    - ``snr_k_pooled``, ``snr_v_pooled``: the trial's energy-pooled SNR
      ``10·log10(Σ‖x‖²/Σ‖x − x̂‖²)`` in dB (+inf when exact), the quantity the Shannon
      distortion–rate bound limits (:mod:`kvstats.rate_distortion`).
    - ``attn_entropy``: not an error but a descriptor of the trial, the same for every
      reconstruction: the entropy ``−Σᵢ pᵢ ln pᵢ`` (nats) of the exact attention ``p``,
      averaged over the trial's queries (``ln N`` for uniform attention, 0 for one key;
      never tested by the report).

    Parameters
    ----------
    trials : Trials
        References ``K (T, N, d)``, ``V (T, N, d_v)``, queries ``q (T, n_q, d)``; several
        queries per trial cover multi-query and grouped-query attention.
    K_hat, V_hat : array_like
        Reconstructions with exactly the shapes of ``trials.K`` and ``trials.V``
        (finite; float32 or float64 kept, any other real dtype, float16 and bfloat16
        included, read as float64; a boolean array, a mask passed by mistake, is a
        TypeError).
    k : int
        Routing-set size for the recall, ``1 ≤ k ≤ N``; the default 5 needs ``N ≥ 5``
        (with fewer keys the ValueError says k was the default: pass ``k ≤ N``).

    Returns
    -------
    pandas.DataFrame
        Columns ``PROFILE_COLUMNS`` (``trial`` is the index within ``trials``), float64
        metrics, one row per trial; ``attrs``: ``k``, ``exact_vectors``.

    Notes
    -----
    Vectorised over trials and processed in chunks of trials so that the working set
    stays near 0.1 GB for any ``T`` and ``n_q``. Arithmetic on vectors and the per-vector dot
    products run in the inputs' dtype; logits, softmax, KL and the means are float64.

    Examples
    --------
    >>> import kvstats
    >>> t = kvstats.sample("gaussian", 3, 64, 16, seed=0)
    >>> df = kvstats.error_profile(t, t.K, t.V)
    >>> df[["snr_k", "phi_k", "kl", "recall_at_5", "argmax_shift"]].iloc[0].tolist()
    [inf, 0.0, 0.0, 1.0, 0.0]
    """
    return _profile(trials, K_hat, V_hat, k)


def _profile(trials: Trials, K_hat: Any, V_hat: Any, k: int = _DEFAULT_K,
             reference: dict[tuple, tuple[np.ndarray, ...]] | None = None,
             columns: dict[str, Any] | None = None) -> pd.DataFrame:
    """`error_profile`; ``reference`` (a dict the caller keeps with ``trials``) holds what
    depends on the trials alone -- per chunk the logits q·k/√d, their log-softmax, the
    reference output p V, the squared norms ‖k‖², ‖v‖² and the attention's entropy -- so
    that several reconstructions of the same trials (the cells of a sweep's case) compute
    them once (chunks past ``_REFERENCE_BYTES`` held: per call). The numbers are those of separate calls
    bit for bit (the same operations on the same inputs). ``columns`` (arrays of one
    value per trial, or scalars) are set in the frame as ``DataFrame.assign`` would set
    them, without its copy of the frame (the sweep's cell columns)."""
    if not isinstance(trials, Trials):
        raise TypeError(f"trials must be a kvstats.Trials; received {_describe(trials)}")
    Kh = _check_hat(K_hat, "K_hat", trials.K, "K")
    Vh = _check_hat(V_hat, "V_hat", trials.V, "V")
    T, N, d = trials.K.shape
    k = _check_k(k, N, f"the trials have N = {N} key(s)")
    # a caller's dict keeps each chunk's reference (its trials' other reconstructions reuse
    # them) up to _REFERENCE_BYTES; without one, only the current chunk's is held, so the
    # working set does not grow with T
    keep = reference is not None
    if reference is None:
        reference = {}
    dk = np.result_type(trials.K, Kh)
    dv = np.result_type(trials.V, Vh)
    n_q = trials.n_queries
    out = {c: np.empty(T) for c in PROFILE_COLUMNS[1:]}
    exact = {"k": 0, "v": 0, "t": 0}
    # (chunk, N, d) vectors and (chunk, n_q, N) logits: both bounded (many queries per trial
    # would otherwise scale the logits' working set by n_q/d)
    chunk = max(1, _CHUNK_ELEMENTS // (N * max(d, trials.value_dim, n_q)))
    inv_sqrt_d = 1.0 / np.sqrt(d)
    for a in range(0, T, chunk):            # chunks of trials; everything inside is batched
        s = slice(a, min(T, a + chunk))
        # C order: the row products (BLAS, numpy's dot loops) round by memory layout, and
        # a Fortran-ordered or transposed K̂ gave other last bits; C-ordered input (every
        # scheme's and data source's) is used as is, no copy
        K, Khat = (np.ascontiguousarray(x[s], dtype=dk) for x in (trials.K, Kh))
        V, Vhat = (np.ascontiguousarray(x[s], dtype=dv) for x in (trials.V, Vh))
        q = np.ascontiguousarray(trials.q[s], dtype=dk)

        key = (a, s.stop, dk.str, dv.str)
        ref = reference.pop(key, None) if not keep else reference.get(key)
        if ref is None:
            ip = _inner(q, K, "q and K")                                        # (c, n_q, N)
            with np.errstate(over="ignore", invalid="ignore"):
                logits = ip * inv_sqrt_d
                logp = _log_softmax(logits)
                nk2, nv2 = _sumsq(K), _sumsq(V)          # ‖k‖², ‖v‖² as _geometry forms them
                p = np.exp(logp)
                # the exact attention's entropy −Σ p ln p (each term ≥ 0: ln p ≤ 0), mean over
                # queries: a property of the trials, kept with them as the logits are
                # (a key whose weight underflows to 0 adds 0, not 0·(−inf) = NaN)
                entropy = (0.0 - np.einsum("cqn,cqn->c", p, np.where(p > 0, logp, 0.0))) / n_q   # one key: +0
            ref = (ip, logits, logp, p.astype(dv) @ V, nk2, nv2, entropy)   # p V: (c, n_q, d_v)
            held = sum(x.nbytes for r in reference.values() for x in r)
            if keep and held + sum(x.nbytes for x in ref) <= _REFERENCE_BYTES:
                reference[key] = ref
        ip, logits, logp, Tref, nk2, nv2, out["attn_entropy"][s] = ref

        with np.errstate(over="ignore"):    # k̂ − k beyond float64: handled scaled below
            E = Khat - K
        # the pooled SNRs from the same squared norms (one pass over K̂ and V̂)
        snr, phi, ratio, out["snr_k_pooled"][s] = _geometry_pooled(K, Khat, E, axis=-1, nx2=nk2)
        out["snr_k"][s], n_ex = _mean_finite_db(snr)
        exact["k"] += n_ex
        out["phi_k"][s], out["norm_ratio_k"][s] = phi.mean(-1), ratio.mean(-1)
        snr, phi, ratio, out["snr_v_pooled"][s] = _geometry_pooled(V, Vhat, axis=-1, nx2=nv2)
        out["snr_v"][s], n_ex = _mean_finite_db(snr)
        exact["v"] += n_ex
        out["phi_v"][s], out["norm_ratio_v"][s] = phi.mean(-1), ratio.mean(-1)

        # q·(k̂ − k) directly rather than q·k̂ − q·k: no cancellation when k̂ ≈ k.
        if _all_finite(E):
            ip_err = _inner(q, E, "q and K_hat − K")
        else:   # k̂ − k overflowed: each key row formed scaled by its own 2**-e (exact)
            e = np.maximum(max_exponent(K, axis=-1), max_exponent(Khat, axis=-1))  # (c, N)
            with np.errstate(over="ignore"):
                ip_err = np.ldexp(_inner(q, scale_rows(Khat, e) - scale_rows(K, e),
                                         "q and K_hat − K"), e[..., None, :])
        with np.errstate(over="ignore", invalid="ignore"):   # beyond float64: refused
            out["ip_bias"][s] = _finite_or_raise(ip_err.mean(axis=(-1, -2)),
                                                 "the mean inner-product error", "q, K, K_hat")
            out["ip_var"][s] = _finite_or_raise(ip_err.var(axis=(-1, -2)),
                                                "the inner-product error variance (ip_var)",
                                                "q, K, K_hat")
            out["ip_slope"][s] = _ip_slope(ip, ip_err)
            logits_hat = _finite_or_raise((ip + ip_err) * inv_sqrt_d, "a logit q·k̂/√d",
                                          "q and K_hat")
            logq = _log_softmax(logits_hat)
            # KL can exceed float64 when the logits are near its limit (inf, not a number)
            out["kl"][s] = _finite_or_raise(_kl(logp, logq).mean(-1), "the KL divergence",
                                            "q, K, K_hat")
        # Rankings from q·k̂ itself, formed exactly as the reference's q·k (same dtype, same
        # product): keys with equal k̂ (a coarse code) tie exactly, as the tie rules of
        # topk_recall and argmax_shift expect, whereas q·k + q·(k̂ − k) breaks such ties by
        # rounding noise (recall and argmax shift then depended on the unquantized keys);
        # and k̂ = k ranks exactly as k. Without exact ties the ranking is the same.
        rank_hat = _finite_or_raise(_inner(q, Khat, "q and K_hat") * inv_sqrt_d,
                                    "a logit q·k̂/√d", "q and K_hat")
        # integer counts over the trial's queries, divided once: the correctly rounded
        # fraction, whatever the query order (a mean of hits/k summed in float was not)
        out["recall_at_5"][s] = _topk_hits(logits, rank_hat, k).sum(-1) / (k * n_q)
        out["argmax_shift"][s] = np.count_nonzero(_argmax_shift(logits, rank_hat), axis=-1) / n_q

        That = np.exp(logq).astype(dv) @ Vhat
        snr, phi, ratio = _geometry(Tref, That)
        out["snr_t"][s], n_ex = _mean_finite_db(snr)
        exact["t"] += n_ex
        out["phi_t"][s], out["norm_ratio_t"][s] = phi.mean(-1), ratio.mean(-1)

    data: dict[str, Any] = {"trial": np.arange(T), **out}
    names = list(PROFILE_COLUMNS)
    for name, value in (columns or {}).items():  # as assign: existing columns replaced in place
        if name not in data:
            names.append(name)
        data[name] = value if isinstance(value, np.ndarray) else [value] * T
    df = pd.DataFrame(data, columns=names)
    df.attrs["k"] = k
    df.attrs["exact_vectors"] = exact
    df.attrs["n_queries"] = n_q
    return df


def _quantile(sorted_vals: np.ndarray, prob: float) -> float:
    # numpy's "linear" quantile, except that interpolating towards ±inf gives ±inf and
    # equal neighbours (even infinite ones) give themselves, never inf - inf = NaN.
    h = (sorted_vals.size - 1) * prob
    lo, hi = int(np.floor(h)), int(np.ceil(h))
    a, b = sorted_vals[lo], sorted_vals[hi]
    if a == b or h == lo:
        return float(a)
    if np.isinf(a):
        return float(a)
    return float(b) if np.isinf(b) else float(a + (h - lo) * (b - a))


def _worst(sorted_vals: np.ndarray, direction: str) -> float:
    if direction == "high":
        return float(sorted_vals[-1])
    if direction == "low":
        return float(sorted_vals[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        # "one": |log v|, and a sign flip (v ≤ 0, e.g. a negative q·k slope) is farthest
        dist = (np.where(sorted_vals > 0, np.abs(np.log(sorted_vals)), np.inf)
                if direction == "one" else np.abs(sorted_vals))
    return float(sorted_vals[int(np.argmax(dist))])


def summarize_profile(df: pd.DataFrame, by: str | Sequence[str] | None = None,
                      metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Summarise a per-trial profile: mean, median, tails and the worst case per metric.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`error_profile` (possibly concatenated with grouping columns such
        as scheme, bits, distribution).
    by : str or sequence of str, optional
        Grouping columns; one block of rows per group.
    metrics : sequence of str, optional
        Metric columns; default: every column of ``METRIC_DIRECTIONS`` present in ``df``
        (not the trial descriptor ``attn_entropy``). Columns without a known direction
        (it, if named) have ``worst`` = max.

    Returns
    -------
    pandas.DataFrame
        Tidy: one row per (group, metric) with columns ``*by, metric, n, mean, median,
        p01, p99, min, max, worst``. ``p01``/``p99`` are linear-interpolation quantiles
        (as numpy's default) that stay finite-or-±inf without NaN; ``worst`` is the
        extreme in the metric's bad direction (``METRIC_DIRECTIONS``): the minimum SNR and
        recall, the maximum φ, KL, argmax shift and ``ip_var``, the norm ratio and
        ``ip_slope`` farthest from 1 (in log scale; a value ≤ 0 is the farthest) and the
        ``ip_bias`` farthest from 0. A mean over +inf values (all-exact
        trials) is +inf.

    Examples
    --------
    >>> import kvstats
    >>> t = kvstats.sample("gaussian", 5, 32, 8, seed=0)
    >>> s = kvstats.summarize_profile(kvstats.error_profile(t, t.K * 1.01, t.V))
    >>> s.set_index("metric").loc["norm_ratio_k", "worst"].round(4)
    np.float64(1.01)
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame; received {_describe(df)}")
    by_cols = [] if by is None else ([by] if isinstance(by, str) else list(by))
    missing = [c for c in by_cols if c not in df.columns]
    if missing:
        raise ValueError(f"by must name columns of df {list(df.columns)}; received {missing}")
    if metrics is None:
        cols = [c for c in df.columns if c in METRIC_DIRECTIONS and c not in by_cols]
        if not cols:
            raise ValueError(f"df has none of the profile metrics {list(METRIC_DIRECTIONS)}; "
                             f"received columns {list(df.columns)}")
    else:
        cols = [metrics] if isinstance(metrics, str) else list(metrics)
        bad = [c for c in cols if c not in df.columns or c in by_cols]
        if bad or not cols:
            raise ValueError(f"metrics must name non-grouping columns of df "
                             f"{[c for c in df.columns if c not in by_cols]}; received {cols}")
    if len(df) == 0:
        raise ValueError("df must have at least one row; received an empty frame")
    non_numeric = {c: str(df[c].dtype) for c in cols if not pd.api.types.is_numeric_dtype(df[c])}
    if non_numeric:
        raise ValueError(f"metrics must name numeric columns of df; received non-numeric "
                         f"column(s) {non_numeric}")
    groups = df.groupby(by_cols, sort=True, dropna=False) if by_cols else [((), df)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        for c in cols:
            vals = np.sort(np.asarray(g[c], dtype=np.float64))
            if np.isnan(vals).any():
                raise ValueError(f"column {c!r} must not contain NaN; received "
                                 f"{int(np.isnan(vals).sum())} NaN value(s)")
            with np.errstate(invalid="ignore"):
                mean = float(np.mean(vals))
            if np.isnan(mean):
                raise ValueError(f"column {c!r} holds both +inf and -inf; its mean is undefined")
            rows.append({**dict(zip(by_cols, key)), "metric": c, "n": vals.size, "mean": mean,
                         "median": _quantile(vals, 0.5), "p01": _quantile(vals, 0.01),
                         "p99": _quantile(vals, 0.99), "min": float(vals[0]),
                         "max": float(vals[-1]),
                         "worst": _worst(vals, METRIC_DIRECTIONS.get(c, "high"))})
    return pd.DataFrame(rows, columns=[*by_cols, "metric", "n", "mean", "median", "p01", "p99",
                                       "min", "max", "worst"])
