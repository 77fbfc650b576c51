"""The Mosaic GPU body of decode attention over a quantized cache (the Triton body and the
jnp reference are in :mod:`kvstats_gpu.decode`, which calls this one and combines).

Same mathematics as the Triton kernel (scores from the codes against the rotated and
sketched query, flash-decoding softmax, values accumulated in the rotated domain), in the
form Mosaic GPU's Pallas lowering accepts (jax 0.10.2; see :mod:`kvstats_gpu._common`):

- **No ``dot``.** The G query heads of a KV head are few (4–8), so scores are row
  reductions ``sum(ĉ_j * q_j, axis=1)`` over each of the 8 coordinate classes and value
  sums are column reductions ``sum(ĉ_j * p, axis=0)``, float32 FMAs on the CUDA cores.
  Nothing is padded to a tensor-core shape (G is exact). Per token this is ``2·G·d``
  FMAs beside the ``~2^b`` selects of the centroid multiplexer: counted from the lowered
  kernel, ~13k CUDA-core operations per token and KV head at KQV@4, G = 4, d = 128, about
  12× what an H200 can issue in the time the token's bytes take to stream. On an H200
  (2026-12-04) the step ran at 2% of HBM bandwidth, ~10× slower than dense bf16 attention
  (docs/gpu.md, "Why the quantized step is slow").
- **Blocks are copied, not pointed at.** A Mosaic program receives its blocks in SMEM
  (TMA copies), so one program cannot walk a whole split as the Triton body does. The
  grid is ``(KV head, split, block)`` with the block axis *sequential*: Pallas pipelines
  the token blocks of a split through one program, and the output blocks (the running
  max ``m`` and sum ``l``, the accumulators) stay resident in SMEM across that axis,
  which carries the softmax state. Blocks past the cache's length are still copied but
  skipped (``pl.when``).
- **Layouts.** Token rows are tiles of ``T`` (multiple of 64) rows; bit planes, signs and
  norms are loaded in the WGMMA register layout, per-query vectors in its column-vector
  layout (:class:`~kvstats_gpu._common.KernelOps`). The state sits in ``ml (G, 128)``:
  ``m`` in column 0, ``l`` in column 1 (whole-array stores need 128-element multiples).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kvstats_gpu._common import NEG, KernelOps, batch_folded, mosaic_rows_ok
from kvstats_gpu.cache import CacheSpec, QuantizedKVCache, kernel_refs
from kvstats_gpu.codebook import centroid_of_class, to_class_major
from kvstats_gpu.mosaic_call import grid_call

# Width of the per-(split, query) state row: m in column 0, l in column 1. 128 columns:
# a register array Mosaic stores whole (the zero fill) needs a multiple of 128 elements.
STATE_COLS = 128


def mosaic_fits(spec: CacheSpec) -> bool:
    """Whether the cache's per-token rows can be moved by Mosaic's block copies (16-byte
    multiples: d >= 128 for bit planes, m >= 128 for sign rows).

    Examples
    --------
    >>> from kvstats_gpu import make_cache_spec
    >>> mosaic_fits(make_cache_spec("KQV", 4, 128)[0]), mosaic_fits(make_cache_spec("KQV", 4, 64)[0])
    (True, False)
    """
    rows = [spec.v_dpad // 8] + ([spec.k_dpad // 8] if spec.k_bits else [])
    rows += [m // 8 for m in (spec.k_m, spec.v_m) if m]
    return mosaic_rows_ok(*rows)


def _kernel(ids, *refs, spec: CacheSpec, T: int, NB: int, G: int, ops: KernelOps):
    # ids: the program's (KV head, split, block) position (grid_call's program_ids)
    it = iter(refs)
    (len_ref, qr_ref, sq_ref, kp_refs, kn_ref, ks_ref, ksn_ref, vp_refs, vn_ref, vs_ref, vsn_ref,
     a_ref, b_ref) = kernel_refs(it, spec)
    ml_ref = next(it)

    kd8, vd8 = spec.k_dpad // 8, spec.v_dpad // 8
    km8, vm8 = spec.k_m // 8, spec.v_m // 8
    split, t = ids[1], ids[2]

    @pl.when(t == 0)
    def _init():
        a_ref[...] = jnp.zeros(a_ref.shape, jnp.float32)
        if spec.v_m:
            b_ref[...] = jnp.zeros(b_ref.shape, jnp.float32)
        ml_ref[...] = jnp.zeros(ml_ref.shape, jnp.float32)
        for g in range(G):
            ml_ref[g, 0] = jnp.float32(NEG)

    n_valid = len_ref[0] - (split * NB + t) * T  # valid tokens from this block's start

    def signs(ref):
        byte = ops.tile(ref).astype(jnp.int32)
        return [(((byte >> j) & 1) * 2 - 1).astype(jnp.float32) for j in range(8)]

    @pl.when(n_valid > 0)
    def _step():
        valid = ops.iota_rows(T) < n_valid
        # the block's keys and values, decoded once and shared by the G query heads
        if spec.k_bits:
            kpl = [ops.tile(r).astype(jnp.int32) for r in kp_refs]
            kc = [centroid_of_class(kpl, j, spec.k_codebook.centroids) for j in range(8)]
            kn = ops.rows(kn_ref).astype(jnp.float32)
        if spec.k_m:
            ksig = signs(ks_ref)
            ksn = ops.rows(ksn_ref).astype(jnp.float32)
        vpl = [ops.tile(r).astype(jnp.int32) for r in vp_refs]
        vc = [centroid_of_class(vpl, j, spec.v_codebook.centroids) for j in range(8)]
        vn = ops.rows(vn_ref).astype(jnp.float32)
        if spec.v_m:
            vsig = signs(vs_ref)
            vsn = ops.rows(vsn_ref).astype(jnp.float32)
        for g in range(G):
            s = None
            if spec.k_bits:
                sk = None
                for j in range(8):
                    part = ops.rowdot(kc[j], ops.cols(qr_ref.at[g, pl.ds(j * kd8, kd8)]))
                    sk = part if sk is None else sk + part
                s = sk * kn
            if spec.k_m:
                sj = None
                for j in range(8):
                    part = ops.rowdot(ksig[j], ops.cols(sq_ref.at[g, pl.ds(j * km8, km8)]))
                    sj = part if sj is None else sj + part
                s = sj * ksn if s is None else s + sj * ksn
            s = jnp.where(valid, s, NEG)
            m_prev, l_prev = ml_ref[g, 0], ml_ref[g, 1]
            m_new = jnp.maximum(m_prev, jnp.max(s))
            corr = jnp.exp(m_prev - m_new)
            p = jnp.where(valid, jnp.exp(s - m_new), 0.0)
            ml_ref[g, 0] = m_new
            ml_ref[g, 1] = corr * l_prev + jnp.sum(p)
            pv = p * vn
            for j in range(8):
                cols = pl.ds(j * vd8, vd8)
                a_ref[g, cols] = corr * ops.cols(a_ref.at[g, cols]) + ops.colsum(vc[j], pv)
            if spec.v_m:
                pw = p * vsn
                for j in range(8):
                    cols = pl.ds(j * vm8, vm8)
                    b_ref[g, cols] = corr * ops.cols(b_ref.at[g, cols]) + ops.colsum(vsig[j], pw)


def partials_mosaic(qr: jax.Array | None, sq: jax.Array | None, cache: QuantizedKVCache, spec: CacheSpec,
                    length: jax.Array, *, T: int, S: int, interpret: bool
                    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
    """Per-split state ``(m, l, a, b)``, stacked on axis 1 (``(H, S, G, ·)``), coordinates
    class-major; :func:`kvstats_gpu.decode.decode_partials` (``impl="mosaic"``) prepares
    ``qr``/``sq`` (rotated and sketched queries ``(H, G, ·)``), combines the splits and
    restores the order. ``T`` tokens per block, ``S`` splits.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("turboquant_mse", 2, 128, seed=0)
    >>> K = V = np.ones((1, 10, 128), np.float32)
    >>> cache = quantize_kv(K, V, spec, params, impl="reference")
    >>> qr = jnp.zeros((1, 2, 128))
    >>> m, l, a, b = partials_mosaic(qr, None, cache, spec, cache.length, T=64, S=2, interpret=True)
    >>> m.shape, float(l[0, 0, 0]), float(l[0, 1, 0])  # 10 equal scores; the second split is empty
    ((1, 2, 2), 10.0, 0.0)
    """
    H = (qr if qr is not None else sq).shape[0]
    arrays = [jnp.broadcast_to(jnp.asarray(length, jnp.int32), (H,))]  # one length per KV head
    arrays += [to_class_major(x) for x in (qr, sq) if x is not None]
    arrays += [x for x in (cache.k_planes, cache.k_norms, cache.k_signs, cache.k_snorms, cache.v_planes,
                           cache.v_norms, cache.v_signs, cache.v_snorms) if x is not None]
    # under vmap, the batch of sequences joins the KV heads (each head has its own length)
    fn = functools.partial(_pallas_call, spec=spec, T=T, S=S, C=cache.capacity, interpret=interpret)
    res = batch_folded(lambda *a: fn(a), (0,) * len(arrays), (0,) * (3 if spec.v_m else 2))(*arrays)
    ml = res[-1]
    return ml[..., 0], ml[..., 1], res[0], res[1] if spec.v_m else None


def _pallas_call(arrays, spec, T, S, C, interpret):
    lengths, *rest = arrays
    H = lengths.shape[0]
    G = rest[0].shape[1]
    NB = C // S // T

    def tok(h, s, t):
        return s * NB + t

    args = [jnp.broadcast_to(lengths[:, None], (H, 32))]  # 128-byte rows
    specs = [pl.BlockSpec((None, 32), lambda h, s, t: (h, 0))]
    it = iter(rest)
    if spec.k_bits:
        args.append(next(it))
        specs.append(pl.BlockSpec((None, G, spec.k_dpad), lambda h, s, t: (h, 0, 0)))
    if spec.k_m:
        args.append(next(it))
        specs.append(pl.BlockSpec((None, G, spec.k_m), lambda h, s, t: (h, 0, 0)))

    def planes(bits, d8):
        arr = next(it)
        for p in range(bits):
            args.append(arr)
            specs.append(pl.BlockSpec((None, None, T, d8), lambda h, s, t, p=p: (h, p, tok(h, s, t), 0)))

    def per_token():
        args.append(next(it))
        specs.append(pl.BlockSpec((None, T), lambda h, s, t: (h, tok(h, s, t))))

    def sign_rows(m8):
        args.append(next(it))
        specs.append(pl.BlockSpec((None, T, m8), lambda h, s, t: (h, tok(h, s, t), 0)))

    if spec.k_bits:
        planes(spec.k_bits, spec.k_dpad // 8)
        per_token()
    if spec.k_m:
        sign_rows(spec.k_m // 8)
        per_token()
    planes(spec.v_bits, spec.v_dpad // 8)
    per_token()
    if spec.v_m:
        sign_rows(spec.v_m // 8)
        per_token()

    def state(width):
        return (jax.ShapeDtypeStruct((H, S, G, width), jnp.float32),
                pl.BlockSpec((None, None, G, width), lambda h, s, t: (h, s, 0, 0)))

    outs = [state(spec.v_dpad)] + ([state(spec.v_m)] if spec.v_m else []) + [state(STATE_COLS)]
    return tuple(grid_call(
        functools.partial(_kernel, spec=spec, T=T, NB=NB, G=G, ops=KernelOps(not interpret)), "mosaic",
        out_shape=tuple(o[0] for o in outs),
        grid=(H, S, NB),
        in_specs=specs,
        out_specs=tuple(o[1] for o in outs),
        dimension_semantics=("parallel", "parallel", "sequential"),
        program_ids=True,
        interpret=interpret,
        name="kvstats_quantized_decode_attention",
    )(*args))
