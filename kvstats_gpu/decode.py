"""Decode attention over a quantized KV cache, at model scale, in one call per layer.

The Pallas kernel (:func:`_decode_kernel`) sits beside its dense ``jnp`` reference
(:func:`_partials_reference`): both return the same :class:`Partials`, which
:func:`combine_partials` merges (over splits or devices) and :func:`finalize_partials`
turns into the output. The cache and its spec are :mod:`kvstats_gpu.cache`.

Scores never dequantize keys. With ``k = ‖k‖·Rᵀĉ`` (ĉ the centroids of the codes of the
rotated unit key, R orthogonal) ``q·k̂ = ‖k‖·(R q)·ĉ``: rotate the *query* once per step
(G·d² work) instead of inverse-rotating N keys (N·d² work). The QJL part is
``c·‖r‖·(S q)·sign(S r)`` with the sketched query computed once per step. Values are
accumulated in the rotated domain, ``Σ p_n ‖v_n‖ ĉ_n`` and ``Σ p_n ‖r_n‖ σ_n``, and
inverse-rotated (and multiplied by the sketch) once at the end, for the same reason.

The softmax is flash-decoding: the sequence is cut into ``n_splits`` parallel programs per
KV head; each keeps a running max ``m``, sum ``l`` and unnormalised accumulators over
blocks of ``block_tokens`` tokens; a combine rescales every split by ``exp(m_s − M)``.
All G query heads of a KV head (grouped-query attention) share each unpacked block, so
the cache is read once per KV head. The same partials combine across devices
(:mod:`kvstats_gpu.sharding`).

The kernel has two bodies: the Triton one below (``dot`` over a ``(16, T)`` padded query
block, each program walking its split; float32 at IEEE precision, so Triton runs these on
the CUDA cores, not the tensor cores) and the Mosaic GPU one in
:mod:`kvstats_gpu.decode_mosaic` (CUDA-core reductions, the split's blocks pipelined
through a sequential grid axis). ``impl="pallas"`` uses Mosaic GPU unless the cache's
per-token rows are under 16 bytes (d = 64 planes, m = 64 sign rows), then Triton.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.typing import ArrayLike
from jaxtyping import Float, Int

from kvstats._checks import check_int
from kvstats_gpu._common import (MIN_DOT, MOSAIC_ROWS, NEG, as_jax_float, check_finite_concrete, check_length,
                                 compiler_params, dot_nn, dot_nt, is_pow2, kernel_backend, next_pow2,
                                 resolve_impl, triton_sizes_ok)
from kvstats_gpu.cache import (PAGE, CacheParams, CacheSpec, QuantizedKVCache, check_cache, check_params,
                               kernel_refs)
from kvstats_gpu.codebook import (centroid_of_class, decode_reference, from_class_major, to_class_major,
                                  unpack_planes_reference)
from kvstats_gpu.decode_mosaic import mosaic_fits, partials_mosaic
from kvstats_gpu.qjl import unpack_signs_reference
from kvstats_gpu.rotation import rotate_optional, unrotate_optional


def dense_decode_attention(q: Float[ArrayLike, "HG d"], K: Float[ArrayLike, "H N d"], V: Float[ArrayLike, "H N d"],
                           length: int | Int[ArrayLike, ""] | None = None) -> Float[jax.Array, "HG d"]:
    """Plain float32 decode attention for GQA: ``softmax(K q / √d) V`` per query head.

    Parameters
    ----------
    q : ``(H·G, d)``
        Query heads; head ``h·G + g`` attends to KV head ``h`` (Llama's ``repeat_kv``).
    K, V : ``(H, N, d)``
    length : int, optional
        Only the first ``length`` tokens are attended (default all): an integer in
        ``[1, N]`` (a Python int or a 0-d integer array; a traced one is not checked).

    Returns
    -------
    jax.Array ``(H·G, d)`` float32

    Examples
    --------
    >>> import numpy as np
    >>> K = np.zeros((1, 4, 8)); V = np.arange(32.0).reshape(1, 4, 8); q = np.zeros((2, 8))
    >>> dense_decode_attention(q, K, V, length=2)[0, :2].tolist()
    [4.0, 5.0]
    """
    q = as_jax_float(q, "q", min_ndim=2).astype(jnp.float32)
    K = as_jax_float(K, "K", min_ndim=3).astype(jnp.float32)
    V = as_jax_float(V, "V", min_ndim=3).astype(jnp.float32)
    H, N, d = K.shape
    if q.ndim != 2 or q.shape[0] % H or q.shape[1] != d or V.shape != K.shape:
        raise ValueError(f"q must be (H*G, d) with H = {H}, d = {d} and V shaped like K {K.shape}; "
                         f"received q {q.shape}, V {V.shape}")
    G = q.shape[0] // H
    hp = jax.lax.Precision.HIGHEST
    s = jnp.einsum("hgd,hnd->hgn", q.reshape(H, G, d), K, precision=hp) / math.sqrt(d)
    if length is not None:
        # at least one token: an empty softmax is undefined
        s = jnp.where(jnp.arange(N) < check_length(length, "length", low=1, high=N), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("hgn,hnd->hgd", p, V, precision=hp).reshape(H * G, d)


class Partials(NamedTuple):
    """Unnormalised flash-decoding state per (KV head, query in group).

    ``m`` running max ``(H, G)``, ``l`` sum of ``exp(s − m)``, ``a`` value accumulator in
    the rotated domain ``(H, G, v_dpad)``, ``b`` value-sign accumulator ``(H, G, v_m)``
    (None without a value sketch).
    """

    m: Float[jax.Array, "H G"]
    l: Float[jax.Array, "H G"]
    a: Float[jax.Array, "H G v_dpad"]
    b: Float[jax.Array, "H G v_m"] | None


def _queries(q, spec, params, H):
    """Rotated and sketched queries ``(H, G, ·)`` float32, with 1/√d and c folded in."""
    q = as_jax_float(q, "q", min_ndim=2)
    check_finite_concrete(q, "q")
    if q.ndim != 2 or q.shape[1] != spec.dim or q.shape[0] % H:
        raise ValueError(f"q must be (H*G, {spec.dim}) with H = {H} KV heads; received {q.shape}")
    G = q.shape[0] // H
    qf = q.astype(jnp.float32).reshape(H, G, spec.dim) / math.sqrt(spec.dim)
    qr = sq = None
    if spec.k_bits:
        qr = rotate_optional(qf, params.k_signs, "reference", None)
        if params.k_signs is None and spec.k_dpad != spec.dim:
            qr = jnp.pad(qr, ((0, 0), (0, 0), (0, spec.k_dpad - spec.dim)))
    if spec.k_m:
        sq = spec.k_scale * jnp.matmul(qf, params.k_sketch.T, precision=jax.lax.Precision.HIGHEST)
    return qr, sq, G


def _partials_reference(qr, sq, cache, spec, length):
    """Dense jnp partials: the same quantities as the kernel, without splits or bit tricks."""
    hp = jax.lax.Precision.HIGHEST
    C = cache.capacity
    s = 0.0
    if spec.k_bits:
        chat = decode_reference(unpack_planes_reference(jnp.swapaxes(cache.k_planes, 1, 2)), spec.k_codebook)
        s = jnp.einsum("hgd,hnd->hgn", qr, chat, precision=hp) * cache.k_norms.astype(jnp.float32)[:, None]
    if spec.k_m:
        sig = unpack_signs_reference(cache.k_signs, spec.k_m)
        s = s + jnp.einsum("hgm,hnm->hgn", sq, sig, precision=hp) * cache.k_snorms.astype(jnp.float32)[:, None]
    valid = jnp.arange(C) < length
    s = jnp.where(valid, s, NEG)
    m = jnp.max(s, axis=-1)
    p = jnp.where(valid, jnp.exp(s - m[..., None]), 0.0)
    l = jnp.sum(p, axis=-1)
    vchat = decode_reference(unpack_planes_reference(jnp.swapaxes(cache.v_planes, 1, 2)), spec.v_codebook)
    a = jnp.einsum("hgn,hnd->hgd", p * cache.v_norms.astype(jnp.float32)[:, None], vchat, precision=hp)
    b = None
    if spec.v_m:
        vsig = unpack_signs_reference(cache.v_signs, spec.v_m)
        b = jnp.einsum("hgn,hnm->hgm", p * cache.v_snorms.astype(jnp.float32)[:, None], vsig, precision=hp)
    return Partials(m, l, a, b)


def _decode_kernel(*refs, spec: CacheSpec, T: int, L: int, Gp: int):
    it = iter(refs)
    (len_ref, qr_ref, sq_ref, kp_refs, kn_ref, ks_ref, ksn_ref, vp_refs, vn_ref, vs_ref, vsn_ref,
     a_ref, b_ref) = kernel_refs(it, spec)
    m_ref, l_ref = next(it), next(it)

    kd8, vd8 = spec.k_dpad // 8, spec.v_dpad // 8
    km8, vm8 = spec.k_m // 8, spec.v_m // 8
    split = pl.program_id(1)
    start = split * L
    n_valid = len_ref[0] - start  # valid tokens from this split's start (may be <= 0)
    n_blocks = jnp.clip((n_valid + T - 1) // T, 0, L // T)
    # the query side stays in registers/L1 for the whole split
    qr = [qr_ref[:, pl.ds(j * kd8, kd8)] for j in range(8)] if spec.k_bits else None
    sq = [sq_ref[:, pl.ds(j * km8, km8)] for j in range(8)] if spec.k_m else None
    tok = jax.lax.broadcasted_iota(jnp.int32, (1, T), 1)

    def body(t, carry):
        m_prev, l_prev, acc_a, acc_b = carry
        rows = pl.ds(t * T, T)
        s = jnp.zeros((Gp, T), jnp.float32)
        if spec.k_bits:
            planes = [r[rows, :].astype(jnp.int32) for r in kp_refs]
            sk = None
            for j in range(8):
                c = centroid_of_class(planes, j, spec.k_codebook.centroids)
                part = dot_nt(qr[j], c)
                sk = part if sk is None else sk + part
            s = sk * kn_ref[rows].astype(jnp.float32)[None, :]
        if spec.k_m:
            byte = ks_ref[rows, :].astype(jnp.int32)
            sj = None
            for j in range(8):
                part = dot_nt(sq[j], (((byte >> j) & 1) * 2 - 1).astype(jnp.float32))
                sj = part if sj is None else sj + part
            s = s + sj * ksn_ref[rows].astype(jnp.float32)[None, :]
        valid = (t * T + tok) < n_valid
        s = jnp.where(valid, s, NEG)
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1))
        corr = jnp.exp(m_prev - m_new)
        p = jnp.where(valid, jnp.exp(s - m_new[:, None]), 0.0)
        l_new = corr * l_prev + jnp.sum(p, axis=1)
        pv = p * vn_ref[rows].astype(jnp.float32)[None, :]
        vplanes = [r[rows, :].astype(jnp.int32) for r in vp_refs]
        new_a = tuple(corr[:, None] * acc_a[j]
                      + dot_nn(pv, centroid_of_class(vplanes, j, spec.v_codebook.centroids))
                      for j in range(8))
        new_b = acc_b
        if spec.v_m:
            pw = p * vsn_ref[rows].astype(jnp.float32)[None, :]
            vbyte = vs_ref[rows, :].astype(jnp.int32)
            new_b = tuple(corr[:, None] * acc_b[j]
                          + dot_nn(pw, (((vbyte >> j) & 1) * 2 - 1).astype(jnp.float32)) for j in range(8))
        return m_new, l_new, new_a, new_b

    init = (jnp.full((Gp,), NEG, jnp.float32), jnp.zeros((Gp,), jnp.float32),
            tuple(jnp.zeros((Gp, vd8), jnp.float32) for _ in range(8)),
            tuple(jnp.zeros((Gp, vm8), jnp.float32) for _ in range(8)) if spec.v_m else ())
    m, l, acc_a, acc_b = jax.lax.fori_loop(0, n_blocks, body, init)
    for j in range(8):
        a_ref[:, pl.ds(j * vd8, vd8)] = acc_a[j]
        if spec.v_m:
            b_ref[:, pl.ds(j * vm8, vm8)] = acc_b[j]
    m_ref[...] = m
    l_ref[...] = l


def _choose_splits(C: int, T: int, n_splits: int | None) -> int:
    n_blocks = C // T
    if n_splits is None:
        # enough programs to fill a GPU (H·splits >= ~2 per SM for H = 8), and at least a
        # few blocks per split so the per-split overhead stays small
        target = max(1, min(32, n_blocks // 4))
    else:
        target = check_int(n_splits, "n_splits", low=1, high=n_blocks)
    # largest power of two <= target dividing n_blocks (C is a multiple of 256 tokens)
    s = 1
    while s * 2 <= target and n_blocks % (s * 2) == 0:
        s *= 2
    if n_splits is not None and s != n_splits:
        raise ValueError(f"n_splits must be a power of two dividing capacity/block_tokens = {n_blocks}; "
                         f"received {n_splits}")
    return s


def _partials_pallas(qr, sq, cache, spec, length, *, block_tokens, n_splits, interpret, num_warps):
    H, G = (qr if qr is not None else sq).shape[:2]
    C = cache.capacity
    T = block_tokens
    S = _choose_splits(C, T, n_splits)
    L = C // S
    Gp = max(MIN_DOT, next_pow2(G))

    def padg(x):
        return to_class_major(jnp.pad(x, ((0, 0), (0, Gp - G), (0, 0))))

    args, specs = [jnp.reshape(length, (1,)).astype(jnp.int32)], [pl.BlockSpec((1,), lambda h, s: (0,))]
    if spec.k_bits:
        args.append(padg(qr))
        specs.append(pl.BlockSpec((None, Gp, spec.k_dpad), lambda h, s: (h, 0, 0)))
    if spec.k_m:
        args.append(padg(sq))
        specs.append(pl.BlockSpec((None, Gp, spec.k_m), lambda h, s: (h, 0, 0)))

    def planes(arr, bits, d8):
        for p in range(bits):
            args.append(arr)
            specs.append(pl.BlockSpec((None, None, L, d8), lambda h, s, p=p: (h, p, s, 0)))

    def per_token(arr):
        args.append(arr)
        specs.append(pl.BlockSpec((None, L), lambda h, s: (h, s)))

    def signs(arr, m8):
        args.append(arr)
        specs.append(pl.BlockSpec((None, L, m8), lambda h, s: (h, s, 0)))

    if spec.k_bits:
        planes(cache.k_planes, spec.k_bits, spec.k_dpad // 8)
        per_token(cache.k_norms)
    if spec.k_m:
        signs(cache.k_signs, spec.k_m // 8)
        per_token(cache.k_snorms)
    planes(cache.v_planes, spec.v_bits, spec.v_dpad // 8)
    per_token(cache.v_norms)
    if spec.v_m:
        signs(cache.v_signs, spec.v_m // 8)
        per_token(cache.v_snorms)

    out_shape = [jax.ShapeDtypeStruct((H, S, Gp, spec.v_dpad), jnp.float32)]
    out_specs = [pl.BlockSpec((None, None, Gp, spec.v_dpad), lambda h, s: (h, s, 0, 0))]
    if spec.v_m:
        out_shape.append(jax.ShapeDtypeStruct((H, S, Gp, spec.v_m), jnp.float32))
        out_specs.append(pl.BlockSpec((None, None, Gp, spec.v_m), lambda h, s: (h, s, 0, 0)))
    for _ in range(2):
        out_shape.append(jax.ShapeDtypeStruct((H, S, Gp), jnp.float32))
        out_specs.append(pl.BlockSpec((None, None, Gp), lambda h, s: (h, s, 0)))
    outs = pl.pallas_call(
        functools.partial(_decode_kernel, spec=spec, T=T, L=L, Gp=Gp),
        out_shape=tuple(out_shape),
        grid=(H, S),
        in_specs=specs,
        out_specs=tuple(out_specs),
        compiler_params=compiler_params("triton", num_warps=num_warps, num_stages=2),
        interpret=interpret,
        name="kvstats_quantized_decode_attention",
    )(*args)
    # flash-decoding combine over the splits, then back to natural coordinate order
    m, l, a, b = combine_partials(Partials(outs[-2], outs[-1], outs[0], outs[1] if spec.v_m else None), axis=1)
    return Partials(m[:, :G], l[:, :G], from_class_major(a)[:, :G],
                    None if b is None else from_class_major(b)[:, :G])


def combine_partials(parts: Partials, axis: int = 0) -> Partials:
    """Combine partials stacked along ``axis`` (splits or sequence shards) into one.

    Each part is rescaled by ``exp(m_part − M)`` with ``M`` the overall max, so the result
    is exactly the state of one pass over all their tokens (a part without valid tokens has
    ``m = -1e30``, weight 0).

    Examples
    --------
    >>> p = Partials(m=jnp.array([[0.0], [1.0]]), l=jnp.array([[1.0], [1.0]]),
    ...              a=jnp.array([[[2.0]], [[4.0]]]), b=None)
    >>> c = combine_partials(p)
    >>> float(c.m[0]), round(float(c.a[0, 0] / c.l[0]), 4)  # softmax([0, 1]) . [2, 4]
    (1.0, 3.4621)
    """
    M = jnp.max(parts.m, axis=axis)
    w = jnp.exp(parts.m - jnp.expand_dims(M, axis))
    a = jnp.sum(jnp.expand_dims(w, -1) * parts.a, axis=axis)
    b = None if parts.b is None else jnp.sum(jnp.expand_dims(w, -1) * parts.b, axis=axis)
    return Partials(M, jnp.sum(w * parts.l, axis=axis), a, b)


def finalize_partials(parts: Partials, spec: CacheSpec, params: CacheParams, *, impl: str = "auto",
                      interpret: bool | None = None) -> Float[jax.Array, "HG dim"]:
    """Normalise, inverse-rotate (once per step) and add the sketch part: ``(H·G, dim)`` float32.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 30, 64)).astype(np.float32)
    >>> cache, q = quantize_kv(K, K, spec, params), np.ones((4, 64), np.float32)
    >>> out = finalize_partials(decode_partials(q, cache, spec, params), spec, params)
    >>> bool(np.allclose(out, decode_attention(q, cache, spec, params), atol=1e-6))
    True
    """
    H, G = parts.m.shape
    inv_l = 1.0 / parts.l
    out = unrotate_optional(parts.a * inv_l[..., None], params.v_signs, spec.dim, impl, interpret)
    if spec.v_m:
        out = out + spec.v_scale * jnp.matmul(parts.b * inv_l[..., None], params.v_sketch,
                                              precision=jax.lax.Precision.HIGHEST)
    return out.reshape(H * G, spec.dim)


def decode_partials(q: Float[ArrayLike, "HG dim"], cache: QuantizedKVCache, spec: CacheSpec,
                    params: CacheParams, *, length: int | Int[ArrayLike, ""] | None = None,
                    impl: str = "auto", interpret: bool | None = None, block_tokens: int = 64,
                    n_splits: int | None = None, num_warps: int = 4) -> Partials:
    """Unnormalised attention state of one decode step (see :func:`decode_attention`).

    ``length`` overrides ``cache.length`` (the sharded path passes the valid tokens of
    its sequence shard, which may be <= 0: such a shard contributes nothing). Params other
    than the cache's (its fingerprint): a ValueError when not traced.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 30, 64)).astype(np.float32)
    >>> cache, q = quantize_kv(K, K, spec, params), np.ones((6, 64), np.float32)  # G = 3
    >>> parts = decode_partials(q, cache, spec, params)
    >>> parts.m.shape, parts.a.shape, parts.b.shape  # b: the value sketch's accumulator (m = 64)
    ((2, 3), (2, 3, 64), (2, 3, 64))
    >>> float(decode_partials(q, cache, spec, params, length=0).l.max())  # an empty shard
    0.0
    """
    impl, interpret = resolve_impl(impl, interpret)
    params = check_params(spec, params)
    check_cache(cache, spec, params)
    qr, sq, _ = _queries(q, spec, params, cache.n_heads)
    length = cache.length if length is None else check_length(length, "length")
    if impl == "reference":
        return _partials_reference(qr, sq, cache, spec, length)
    backend = _backend(impl, spec)
    _check_blocking(cache.capacity, block_tokens, n_splits, backend)
    if backend == "mosaic":
        G = (qr if qr is not None else sq).shape[1]
        S = _choose_splits(cache.capacity, block_tokens, n_splits)
        m, l, a, b = partials_mosaic(qr, sq, cache, spec, length, T=block_tokens, S=S, interpret=interpret)
        m, l, a, b = combine_partials(Partials(m, l, a, b), axis=1)
        return Partials(m, l, from_class_major(a)[:, :G], None if b is None else from_class_major(b)[:, :G])
    return _partials_pallas(qr, sq, cache, spec, length, block_tokens=block_tokens, n_splits=n_splits,
                            interpret=interpret, num_warps=check_int(num_warps, "num_warps", low=1, high=32))


def _backend(impl: str, spec: CacheSpec) -> str:
    rows = [spec.v_dpad // 8] + ([spec.k_dpad // 8] if spec.k_bits else [])
    rows += [m // 8 for m in (spec.k_m, spec.v_m) if m]
    shown = f"per-token rows of {sorted(set(rows))} bytes (bit planes of d_pad/8, sign rows of m/8)"
    return kernel_backend(impl, mosaic_fits(spec), f"the cache has {shown}; Mosaic's block copies need "
                          "multiples of 16 bytes", triton_sizes_ok(*rows),
                          f"the cache has {shown}; Triton takes only power-of-two block sizes")


def decode_attention(q: Float[ArrayLike, "HG dim"], cache: QuantizedKVCache, spec: CacheSpec,
                     params: CacheParams, *, impl: str = "auto", interpret: bool | None = None,
                     block_tokens: int = 64, n_splits: int | None = None,
                     num_warps: int = 4) -> Float[jax.Array, "HG dim"]:
    """One decode step of attention for all query heads of a layer over a quantized cache.

    Parameters
    ----------
    q : ``(H·G, dim)``
        The step's query heads (post-RoPE); head ``h·G + g`` uses KV head ``h``.
    cache : QuantizedKVCache
        H KV heads; the first ``cache.length`` tokens are attended (length >= 1). Under
        jit, where a traced length cannot raise, a length outside ``[1, C]`` gives NaN for
        every output, by design: an empty cache (the softmax of no tokens is undefined)
        or one that :func:`~kvstats_gpu.cache.append_kv` overflowed (length ``C + 1``).
        Eagerly, either is a ValueError.
    spec, params : the cache's spec and parameters.
        Those that quantized it: eagerly, others (another seed's, another scheme's; the
        cache's fingerprint says) are a ValueError; under jit they cannot be checked
        and give wrong attention.
    impl, interpret : dispatch (see :mod:`kvstats_gpu`).
    block_tokens : int
        Tokens per inner block (power of two, 16..256 for Triton, 64..256 for Mosaic).
    n_splits : int, optional
        Sequence splits per KV head (power of two; default: up to 32, >= 4 blocks each).
    num_warps : int
        Triton warps per program (Mosaic programs are one warpgroup, 128 threads).

    Returns
    -------
    jax.Array ``(H·G, dim)`` float32
        Equal (to float32 rounding) to ``dense_decode_attention(q, *dequantize_kv(...))``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import dequantize_kv, make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> rng = np.random.default_rng(0)
    >>> K, V = rng.normal(size=(2, 2, 50, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, V, spec, params)
    >>> q = rng.normal(size=(4, 64)).astype(np.float32)
    >>> o = decode_attention(q, cache, spec, params, impl="pallas", interpret=True)
    >>> ref = dense_decode_attention(q, *dequantize_kv(cache, spec, params), length=50)
    >>> bool(np.allclose(o, ref, atol=1e-4))
    True
    """
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    if not isinstance(cache.length, jax.core.Tracer) and int(cache.length) < 1:
        raise ValueError(f"cache.length must be >= 1 to attend; received {int(cache.length)}")
    # validate eagerly (clear errors), then run one compiled program
    impl, interpret = resolve_impl(impl, interpret)
    params = check_params(spec, params)
    check_cache(cache, spec, params)
    _queries(q, spec, params, cache.n_heads)
    if impl != "reference":
        _check_blocking(cache.capacity, block_tokens, n_splits, _backend(impl, spec))
    # the fingerprint was checked above; the compiled program never reads it
    return _decode_jit(q, cache._replace(fingerprint=None), params, spec=spec, impl=impl, interpret=interpret,
                       block_tokens=block_tokens, n_splits=n_splits,
                       num_warps=check_int(num_warps, "num_warps", low=1, high=32))


@functools.partial(jax.jit, static_argnames=("spec", "impl", "interpret", "block_tokens", "n_splits", "num_warps"))
def _decode_jit(q, cache, params, *, spec, impl, interpret, block_tokens, n_splits, num_warps):
    parts = decode_partials(q, cache, spec, params, impl=impl, interpret=interpret,
                            block_tokens=block_tokens, n_splits=n_splits, num_warps=num_warps)
    return _nan_unless_attendable(finalize_partials(parts, spec, params, impl=impl, interpret=interpret),
                                 cache.length, cache.capacity)


def _nan_unless_attendable(out: jax.Array, length: Int[ArrayLike, ""], capacity: int) -> jax.Array:
    """``out`` where ``1 <= length <= capacity``, else NaN throughout: the failure a traced
    length (under jit) cannot raise is made visible instead (an empty cache, or one that
    :func:`~kvstats_gpu.cache.append_kv` overflowed: length ``capacity + 1``).

    Examples
    --------
    >>> out = jnp.ones(2)
    >>> [bool(jnp.isnan(_nan_unless_attendable(out, n, 256)).all()) for n in (0, 1, 256, 257)]
    [True, False, False, True]
    """
    return jnp.where((length >= 1) & (length <= capacity), out, jnp.nan)


def _check_blocking(C, block_tokens, n_splits, backend):
    low = MOSAIC_ROWS if backend == "mosaic" else MIN_DOT
    if not (isinstance(block_tokens, int) and is_pow2(block_tokens) and low <= block_tokens <= PAGE):
        raise ValueError(f"block_tokens must be a power of two in [{low}, {PAGE}] (backend {backend!r}); "
                         f"received {block_tokens!r}")
    _choose_splits(C, block_tokens, n_splits)
