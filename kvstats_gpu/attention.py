"""Decode attention over a quantized KV cache, at model scale, in one call per layer.

Cache layout (:class:`QuantizedKVCache`), per KV head and contiguous over tokens, so a
decode step streams it once:

- scalar Lloyd–Max codes of the rotated unit vector in bit planes ``(H, bits, C, d_pad/8)``
  uint8 (see :mod:`kvstats_gpu.codebook`) and the norm ``(H, C)`` float16;
- 1-bit QJL signs ``(H, C, m/8)`` uint8 (the numpy core's packed bits) and the norm of the
  sketched vector ``(H, C)`` float16 (the residual for TurboQuant-prod, the key itself for
  pure QJL keys).

So memory is proportional to the code bits: for KQV at 4 bits, d = 128, 8 KV heads, a
token costs 8·(66 + 68) = 1072 bytes instead of 4096 in fp16 (:func:`cache_bytes_per_token`).
``C`` (capacity) is a multiple of the token block; ``length`` counts valid tokens.

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
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from kvstats._checks import check_int, check_real
from kvstats_gpu._common import (MIN_DOT, NEG, as_jax_float, check_finite_concrete, compiler_params,
                                 dot_nn, dot_nt, is_pow2, next_pow2, resolve_impl)
from kvstats_gpu.codebook import (StaticCodebook, centroid_of_class, decode_packed, decode_reference,
                                  encode_packed, from_class_major, to_class_major,
                                  unpack_planes_reference)
from kvstats_gpu.qjl import check_sketch, qjl_sketch, unpack_signs_reference
from kvstats_gpu.rotation import check_signs, rotate

# Capacity is rounded up to a multiple of this many tokens (a multiple of every block size).
PAGE = 256


# --------------------------------------------------------------------------- spec and params
@dataclass(frozen=True)
class CacheSpec:
    """Static description of a quantized cache (hashable: a jit static argument).

    Attributes
    ----------
    dim : int
        Head dimension d.
    k_dpad, v_dpad : int
        Rotated (padded) dimension of keys / values (``dim`` without rotation).
    k_codebook : StaticCodebook or None
        Key scalar codebook (None: pure QJL keys, no scalar codes).
    v_codebook : StaticCodebook
        Value scalar codebook.
    k_m, v_m : int
        QJL sketch rows for the key / value (residual) signs; 0 for none.
    k_scale, v_scale : float
        The QJL estimator constants (``Sketch.scale``).
    name : str
        The scheme this spec was built from.
    """

    dim: int
    k_dpad: int
    v_dpad: int
    k_codebook: StaticCodebook | None
    v_codebook: StaticCodebook
    k_m: int = 0
    v_m: int = 0
    k_scale: float = 0.0
    v_scale: float = 0.0
    name: str = "custom"

    def __post_init__(self):
        check_int(self.dim, "dim", low=1)
        for nm in ("k_dpad", "v_dpad"):
            v = getattr(self, nm)
            if not (isinstance(v, int) and v >= self.dim and v % 8 == 0):
                raise ValueError(f"{nm} must be an int >= dim and a multiple of 8; received {v!r}")
        if self.k_codebook is None and self.k_m == 0:
            raise ValueError("keys need scalar codes (k_codebook) or QJL signs (k_m > 0); received neither")
        if not isinstance(self.v_codebook, StaticCodebook):
            raise TypeError(f"v_codebook must be a StaticCodebook; received {type(self.v_codebook).__name__}")
        for nm in ("k_m", "v_m"):
            m = getattr(self, nm)
            if not isinstance(m, int) or m < 0 or m % 8:
                raise ValueError(f"{nm} must be 0 or a positive multiple of 8; received {m!r}")
        if self.k_m:
            check_real(self.k_scale, "k_scale", low=0.0, low_open=True)
        if self.v_m:
            check_real(self.v_scale, "v_scale", low=0.0, low_open=True)

    @property
    def k_bits(self) -> int:
        return 0 if self.k_codebook is None else self.k_codebook.bits

    @property
    def v_bits(self) -> int:
        return self.v_codebook.bits

    def bytes_per_token_head(self) -> dict[str, int]:
        """Stored bytes per token and KV head, by part (float16 norms)."""
        parts = {}
        if self.k_bits:
            parts["k_codes"] = self.k_bits * self.k_dpad // 8
            parts["k_norm"] = 2
        if self.k_m:
            parts["k_signs"] = self.k_m // 8
            parts["k_sketch_norm"] = 2
        parts["v_codes"] = self.v_bits * self.v_dpad // 8
        parts["v_norm"] = 2
        if self.v_m:
            parts["v_signs"] = self.v_m // 8
            parts["v_sketch_norm"] = 2
        return parts


class CacheParams(NamedTuple):
    """The random parameters (arrays, one shared draw): rotation signs and sketch matrices.

    ``k_signs``/``v_signs``: ``(d_pad,)`` ±1 or None (no rotation); ``k_sketch``/
    ``v_sketch``: ``(m, dim)`` float32 or None.
    """

    k_signs: jax.Array | None
    v_signs: jax.Array | None
    k_sketch: jax.Array | None
    v_sketch: jax.Array | None


class QuantizedKVCache(NamedTuple):
    """A quantized KV cache for one layer (a pytree; absent parts are None).

    Shapes: ``k_planes (H, k_bits, C, k_dpad/8)`` uint8, ``k_norms (H, C)`` float16,
    ``k_signs (H, C, k_m/8)`` uint8, ``k_snorms (H, C)`` float16 (norm of the sketched
    vector), the same for values, and ``length`` (int32 scalar: valid tokens).
    """

    k_planes: jax.Array | None
    k_norms: jax.Array | None
    k_signs: jax.Array | None
    k_snorms: jax.Array | None
    v_planes: jax.Array
    v_norms: jax.Array
    v_signs: jax.Array | None
    v_snorms: jax.Array | None
    length: jax.Array

    @property
    def capacity(self) -> int:
        return int(self.v_norms.shape[1])

    @property
    def n_heads(self) -> int:
        return int(self.v_norms.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the stored codes and norms (the whole capacity)."""
        return int(sum(a.nbytes for a in self[:-1] if a is not None))


def _quantizer_parts(q: Any, side: str) -> dict:
    """Rotation signs, codebook and sketch of a numpy MSEQuantizer / ProdQuantizer."""
    mse = getattr(q, "mse", None)
    sketch = getattr(q, "sketch", None)
    base = mse if mse is not None else q
    rot = getattr(base, "rotation", None)
    if rot is None or not hasattr(rot, "kind"):
        raise TypeError(f"the {side} quantizer {type(q).__name__} is not an MSE/prod quantizer "
                        "(the GPU path supports KV, KQV, QKQV, turboquant_mse, turboquant_prod, K{a}V{b})")
    if getattr(base, "draws", ()) not in ((), None) or (rot.signs is not None and rot.signs.ndim != 1):
        raise ValueError(f"the {side} quantizer must have one shared draw (draws=()) for a real cache")
    if rot.kind == "hadamard":
        signs = rot.signs
    elif rot.kind == "identity":
        signs = None
    else:
        raise ValueError(f"the GPU path supports rotation 'hadamard' or 'identity'; received {rot.kind!r}")
    cb = getattr(base, "codebook", None)
    if cb is None:
        from kvstats.quant.codebook import lloyd_max_codebook
        cb = lloyd_max_codebook(base.bits, "beta", dim=rot.out_dim)
    return {"signs": signs, "dpad": int(rot.out_dim), "codebook": StaticCodebook.from_codebook(cb),
            "sketch": None if sketch is None else sketch.matrix,
            "m": 0 if sketch is None else int(sketch.m),
            "scale": 0.0 if sketch is None else float(sketch.scale)}


def spec_from_scheme(scheme: Any) -> tuple[CacheSpec, CacheParams]:
    """The GPU cache spec and parameters of a numpy :func:`kvstats.make_scheme` scheme.

    Same rotation signs, codebooks and sketch matrices, so the GPU codes equal the numpy
    scheme's codes for the same inputs (up to float32 vs float64 rounding at boundaries).

    Examples
    --------
    >>> import kvstats
    >>> spec, params = spec_from_scheme(kvstats.make_scheme("KQV", 4, 64, seed=0))
    >>> spec.k_bits, spec.v_bits, spec.v_m
    (4, 3, 64)
    """
    k = _quantizer_parts(scheme.key_quantizer, "key")
    v = _quantizer_parts(scheme.value_quantizer, "value")
    if k["m"] % 8 or v["m"] % 8:
        raise ValueError(f"sketch rows must be multiples of 8 on the GPU path; received m = {k['m']}, {v['m']}")
    spec = CacheSpec(dim=int(scheme.dim), k_dpad=k["dpad"], v_dpad=v["dpad"], k_codebook=k["codebook"],
                     v_codebook=v["codebook"], k_m=k["m"], v_m=v["m"], k_scale=k["scale"],
                     v_scale=v["scale"], name=str(scheme.name))
    f32 = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    return spec, CacheParams(f32(k["signs"]), f32(v["signs"]), f32(k["sketch"]), f32(v["sketch"]))


def make_cache_spec(name: str, bits: Any, dim: int, seed: Any = 0, **params: Any) -> tuple[CacheSpec, CacheParams]:
    """Spec and parameters for a registered scheme: ``spec_from_scheme(make_scheme(...))``.

    Supported names: ``"KV"``, ``"KQV"``, ``"QKQV"``, ``"turboquant_mse"``,
    ``"turboquant_prod"`` and ``"K{a}V{b}"``; ``params`` as in :func:`kvstats.make_scheme`
    (rotation "hadamard" or "identity"; sketch; m a multiple of 8).

    Examples
    --------
    >>> spec, params = make_cache_spec("QKQV", 3, 128, seed=1)
    >>> sum(spec.bytes_per_token_head().values())
    104
    """
    supported = ("KV", "KQV", "QKQV", "turboquant_mse", "turboquant_prod")
    if not (isinstance(name, str) and (name in supported or re.fullmatch(r"K\d+V\d+", name))):
        raise ValueError(f"name must be one of {list(supported)} or 'K{{a}}V{{b}}'; received {name!r}")
    from kvstats.quant.schemes import make_scheme
    return spec_from_scheme(make_scheme(name, bits, dim, seed=seed, **params))


def _check_params(spec: CacheSpec, params: CacheParams) -> CacheParams:
    if not isinstance(spec, CacheSpec):
        raise TypeError(f"spec must be a CacheSpec; received {type(spec).__name__}")
    if not isinstance(params, CacheParams):
        raise TypeError(f"params must be a CacheParams; received {type(params).__name__}")
    out = []
    for nm, dpad in (("k_signs", spec.k_dpad), ("v_signs", spec.v_dpad)):
        s = getattr(params, nm)
        if s is None:
            if dpad != spec.dim:
                raise ValueError(f"params.{nm} is None (no rotation) but the spec pads to {dpad} != dim")
            out.append(None)
        else:
            s = check_signs(s, f"params.{nm}")
            if s.shape[0] != dpad:
                raise ValueError(f"params.{nm} must have length {dpad}; received {s.shape[0]}")
            out.append(s)
    for nm, m in (("k_sketch", spec.k_m), ("v_sketch", spec.v_m)):
        s = getattr(params, nm)
        if m == 0:
            out.append(None)
        else:
            if s is None:
                raise ValueError(f"params.{nm} is required: the spec has {m} sketch rows")
            s = check_sketch(s, spec.dim, f"params.{nm}")
            if s.shape[0] != m:
                raise ValueError(f"params.{nm} must have {m} rows; received {s.shape[0]}")
            out.append(s)
    return CacheParams(*out)


def _rot(x, signs, impl, interpret):
    return x if signs is None else rotate(x, signs, impl=impl, interpret=interpret)


def _unrot(y, signs, dim, impl, interpret):
    return y[..., :dim] if signs is None else rotate(y, signs, inverse=True, dim=dim, impl=impl,
                                                     interpret=interpret)


# --------------------------------------------------------------------------- encoding
def _encode_side(x, codebook, signs, sketch, impl, interpret):
    """Encode (H, N, d) float32 vectors: planes (H,b,N,d8), norms, signs (H,N,m8), snorms."""
    planes = norms = bits = snorms = None
    if codebook is not None:
        norm = jnp.sqrt(jnp.sum(x * x, axis=-1))
        unit = x / jnp.where(norm > 0, norm, 1.0)[..., None]
        y = _rot(unit, signs, impl, interpret)
        planes_tok = encode_packed(y, codebook, impl=impl, interpret=interpret)  # (H, N, b, d8)
        planes = jnp.swapaxes(planes_tok, 1, 2)
        norms = norm.astype(jnp.float16)
        if sketch is not None:
            # the residual in the original space, against the decoded vector with the stored
            # (float16) norm, as the numpy TurboQuant-prod does
            chat = decode_packed(planes_tok, codebook, impl=impl, interpret=interpret)
            xhat = norms.astype(jnp.float32)[..., None] * _unrot(chat, signs, x.shape[-1], impl, interpret)
            bits, rn = qjl_sketch(x - xhat, sketch, impl=impl, interpret=interpret)
            snorms = rn.astype(jnp.float16)
    else:
        bits, rn = qjl_sketch(x, sketch, impl=impl, interpret=interpret)
        snorms = rn.astype(jnp.float16)
    return planes, norms, bits, snorms


def _check_kv(K, V, dim):
    K = as_jax_float(K, "K", min_ndim=3)
    V = as_jax_float(V, "V", min_ndim=3)
    if K.ndim != 3 or K.shape != V.shape or K.shape[-1] != dim:
        raise ValueError(f"K and V must both have shape (H, N, {dim}); received {K.shape} and {V.shape}")
    check_finite_concrete(K, "K")
    check_finite_concrete(V, "V")
    return K.astype(jnp.float32), V.astype(jnp.float32)


def quantize_kv(K: Any, V: Any, spec: CacheSpec, params: CacheParams, *, capacity: int | None = None,
                impl: str = "auto", interpret: bool | None = None) -> QuantizedKVCache:
    """Quantize a layer's keys and values ``(H, N, d)`` into a :class:`QuantizedKVCache`.

    Parameters
    ----------
    K, V : arrays ``(H, N, dim)``
        Keys and values of the H KV heads (any float dtype; encoded in float32).
    spec, params : from :func:`make_cache_spec` or :func:`spec_from_scheme`
    capacity : int, optional
        Tokens to allocate (default N), rounded up to a multiple of 256; the cache grows
        in place with :func:`append_kv` up to it.
    impl, interpret
        Dispatch (see :mod:`kvstats_gpu`); the encode kernels are rotation, Lloyd–Max
        encode/decode and QJL sketch.

    Examples
    --------
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 10, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, K, spec, params)
    >>> cache.capacity, int(cache.length), cache.k_planes.shape
    (256, 10, (2, 4, 256, 8))
    """
    params = _check_params(spec, params)
    K, V = _check_kv(K, V, spec.dim)
    impl, interpret = resolve_impl(impl, interpret)
    N = K.shape[1]
    capacity = N if capacity is None else check_int(capacity, "capacity", low=N)
    C = -(-capacity // PAGE) * PAGE
    return _quantize_jit(K, V, params, spec=spec, C=C, impl=impl, interpret=interpret)


@functools.partial(jax.jit, static_argnames=("spec", "C", "impl", "interpret"))
def _quantize_jit(K, V, params, *, spec, C, impl, interpret):
    N = K.shape[1]
    ks = _encode_side(K, spec.k_codebook, params.k_signs, params.k_sketch, impl, interpret)
    vs = _encode_side(V, spec.v_codebook, params.v_signs, params.v_sketch, impl, interpret)

    def pad(a, axis):
        if a is None or C == N:
            return a
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, C - N)
        return jnp.pad(a, widths)

    return QuantizedKVCache(pad(ks[0], 2), pad(ks[1], 1), pad(ks[2], 1), pad(ks[3], 1),
                            pad(vs[0], 2), pad(vs[1], 1), pad(vs[2], 1), pad(vs[3], 1),
                            jnp.asarray(N, jnp.int32))


def append_kv(cache: QuantizedKVCache, K: Any, V: Any, spec: CacheSpec, params: CacheParams, *,
              impl: str = "auto", interpret: bool | None = None) -> QuantizedKVCache:
    """Encode new tokens ``(H, n, dim)`` and write them at ``cache.length`` (a decode step).

    Keys arriving later are coded with the same rotation and sketch (one shared draw).
    Jit-friendly (``lax.dynamic_update_slice``); writing past the capacity raises when
    ``length`` is concrete.

    Examples
    --------
    >>> spec, params = make_cache_spec("turboquant_mse", 3, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 10, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, K, spec, params, capacity=300)
    >>> int(append_kv(cache, K[:, :1], K[:, :1], spec, params).length)
    11
    """
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    params = _check_params(spec, params)
    K, V = _check_kv(K, V, spec.dim)
    if K.shape[0] != cache.n_heads:
        raise ValueError(f"K must have {cache.n_heads} heads (the cache's); received {K.shape[0]}")
    n = K.shape[1]
    if not isinstance(cache.length, jax.core.Tracer) and int(cache.length) + n > cache.capacity:
        raise ValueError(f"appending {n} tokens to a cache holding {int(cache.length)} exceeds its "
                         f"capacity {cache.capacity}; allocate a larger capacity in quantize_kv")
    impl, interpret = resolve_impl(impl, interpret)
    return _append_jit(cache, K, V, params, spec=spec, impl=impl, interpret=interpret)


@functools.partial(jax.jit, static_argnames=("spec", "impl", "interpret"))
def _append_jit(cache, K, V, params, *, spec, impl, interpret):
    ks = _encode_side(K, spec.k_codebook, params.k_signs, params.k_sketch, impl, interpret)
    vs = _encode_side(V, spec.v_codebook, params.v_signs, params.v_sketch, impl, interpret)
    pos = cache.length.astype(jnp.int32)
    z = jnp.zeros((), jnp.int32)

    def put(old, new, axis):
        if old is None:
            return None
        start = [z] * old.ndim
        start[axis] = pos
        return jax.lax.dynamic_update_slice(old, new.astype(old.dtype), start)

    axes = (2, 1, 1, 1)
    new = [put(o, nw, ax) for o, nw, ax in zip(cache[:4], ks, axes)]
    new += [put(o, nw, ax) for o, nw, ax in zip(cache[4:8], vs, axes)]
    return QuantizedKVCache(*new, cache.length + K.shape[1])


def _check_cache(cache, spec):
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    if (cache.k_planes is None) != (spec.k_bits == 0) or (cache.k_signs is None) != (spec.k_m == 0) \
            or (cache.v_signs is None) != (spec.v_m == 0):
        raise ValueError("cache does not match spec (key/value parts present or absent differ)")
    if cache.k_planes is not None and cache.k_planes.shape[1:] != (spec.k_bits, cache.capacity, spec.k_dpad // 8):
        raise ValueError(f"cache.k_planes has shape {cache.k_planes.shape}, expected "
                         f"(H, {spec.k_bits}, {cache.capacity}, {spec.k_dpad // 8})")
    if cache.v_planes.shape[1:] != (spec.v_bits, cache.capacity, spec.v_dpad // 8):
        raise ValueError(f"cache.v_planes has shape {cache.v_planes.shape}, expected "
                         f"(H, {spec.v_bits}, {cache.capacity}, {spec.v_dpad // 8})")


def _dequant_side(planes, norms, bits, snorms, codebook, signs, sketch, scale, dim):
    out = 0.0
    if codebook is not None:
        codes = unpack_planes_reference(jnp.swapaxes(planes, 1, 2))  # (H, C, d_pad)
        chat = decode_reference(codes, codebook)
        out = norms.astype(jnp.float32)[..., None] * _unrot(chat, signs, dim, "reference", None)
    if sketch is not None:
        sig = unpack_signs_reference(bits, sketch.shape[0])
        out = out + scale * snorms.astype(jnp.float32)[..., None] * jnp.matmul(
            sig, sketch, precision=jax.lax.Precision.HIGHEST)
    return out


def dequantize_kv(cache: QuantizedKVCache, spec: CacheSpec, params: CacheParams) -> tuple[jax.Array, jax.Array]:
    """Dequantized ``(K̂, V̂)``, float32 ``(H, C, dim)`` (the whole capacity; slice to length).

    Plain jnp; ``K̂ = ‖k‖·Rᵀĉ + c·‖r‖·Sᵀ sign(S r)`` (the parts the spec has). This is the
    numpy core's decode, so ``dense_decode_attention`` on it is the exact reference of
    :func:`decode_attention`.

    Examples
    --------
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(1, 20, 64)).astype(np.float32)
    >>> Kh, Vh = dequantize_kv(quantize_kv(K, K, spec, params), spec, params)
    >>> Kh.shape, bool(np.linalg.norm(Kh[:, :20] - K) < 0.2 * np.linalg.norm(K))
    ((1, 256, 64), True)
    """
    params = _check_params(spec, params)
    _check_cache(cache, spec)
    return _dequantize_jit(cache, params, spec=spec)


@functools.partial(jax.jit, static_argnames=("spec",))
def _dequantize_jit(cache, params, *, spec):
    K = _dequant_side(*cache[:4], spec.k_codebook, params.k_signs, params.k_sketch, spec.k_scale, spec.dim)
    V = _dequant_side(*cache[4:8], spec.v_codebook, params.v_signs, params.v_sketch, spec.v_scale, spec.dim)
    return K, V


def cache_bytes_per_token(spec: CacheSpec, n_kv_heads: int) -> dict[str, float]:
    """Analytic cache bytes per token (all KV heads of a layer) and the ratio to fp16.

    Examples
    --------
    >>> spec, _ = make_cache_spec("KQV", 4, 128, seed=0)
    >>> cache_bytes_per_token(spec, 8)
    {'bytes': 1072, 'fp16_bytes': 4096, 'ratio_to_fp16': 0.26171875}
    """
    n = check_int(n_kv_heads, "n_kv_heads", low=1)
    b = n * sum(spec.bytes_per_token_head().values())
    fp16 = n * 2 * 2 * spec.dim
    return {"bytes": b, "fp16_bytes": fp16, "ratio_to_fp16": b / fp16}


# --------------------------------------------------------------------------- attention
def dense_decode_attention(q: Any, K: Any, V: Any, length: Any = None) -> jax.Array:
    """Plain float32 decode attention for GQA: ``softmax(K q / √d) V`` per query head.

    Parameters
    ----------
    q : ``(H·G, d)``
        Query heads; head ``h·G + g`` attends to KV head ``h`` (Llama's ``repeat_kv``).
    K, V : ``(H, N, d)``
    length : int, optional
        Only the first ``length`` tokens are attended (default all).

    Returns
    -------
    jax.Array ``(H·G, d)`` float32

    Examples
    --------
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
        if not isinstance(length, jax.core.Tracer) and int(length) < 1:
            raise ValueError(f"length must be >= 1 (an empty softmax is undefined); received {int(length)}")
        s = jnp.where(jnp.arange(N) < length, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("hgn,hnd->hgd", p, V, precision=hp).reshape(H * G, d)


class Partials(NamedTuple):
    """Unnormalised flash-decoding state per (KV head, query in group).

    ``m`` running max ``(H, G)``, ``l`` sum of ``exp(s − m)``, ``a`` value accumulator in
    the rotated domain ``(H, G, v_dpad)``, ``b`` value-sign accumulator ``(H, G, v_m)``
    (None without a value sketch).
    """

    m: jax.Array
    l: jax.Array
    a: jax.Array
    b: jax.Array | None


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
        qr = _rot(qf, params.k_signs, "reference", None)
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
    len_ref = next(it)
    qr_ref = next(it) if spec.k_bits else None
    sq_ref = next(it) if spec.k_m else None
    kp_refs = [next(it) for _ in range(spec.k_bits)]
    kn_ref = next(it) if spec.k_bits else None
    ks_ref = next(it) if spec.k_m else None
    ksn_ref = next(it) if spec.k_m else None
    vp_refs = [next(it) for _ in range(spec.v_bits)]
    vn_ref = next(it)
    vs_ref = next(it) if spec.v_m else None
    vsn_ref = next(it) if spec.v_m else None
    a_ref = next(it)
    b_ref = next(it) if spec.v_m else None
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
        compiler_params=compiler_params(num_warps=num_warps, num_stages=2),
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
                      interpret: bool | None = None) -> jax.Array:
    """Normalise, inverse-rotate (once per step) and add the sketch part: ``(H·G, dim)`` float32."""
    H, G = parts.m.shape
    inv_l = 1.0 / parts.l
    out = _unrot(parts.a * inv_l[..., None], params.v_signs, spec.dim, impl, interpret)
    if spec.v_m:
        out = out + spec.v_scale * jnp.matmul(parts.b * inv_l[..., None], params.v_sketch,
                                              precision=jax.lax.Precision.HIGHEST)
    return out.reshape(H * G, spec.dim)


def decode_partials(q: Any, cache: QuantizedKVCache, spec: CacheSpec, params: CacheParams, *,
                    length: Any = None, impl: str = "auto", interpret: bool | None = None,
                    block_tokens: int = 64, n_splits: int | None = None, num_warps: int = 4) -> Partials:
    """Unnormalised attention state of one decode step (see :func:`decode_attention`).

    ``length`` overrides ``cache.length`` (the sharded path passes the valid tokens of
    its sequence shard, which may be <= 0: such a shard contributes nothing).
    """
    impl, interpret = resolve_impl(impl, interpret)
    params = _check_params(spec, params)
    _check_cache(cache, spec)
    qr, sq, _ = _queries(q, spec, params, cache.n_heads)
    length = cache.length if length is None else jnp.asarray(length, jnp.int32)
    if impl == "reference":
        return _partials_reference(qr, sq, cache, spec, length)
    _check_blocking(cache.capacity, block_tokens, n_splits)
    return _partials_pallas(qr, sq, cache, spec, length, block_tokens=block_tokens, n_splits=n_splits,
                            interpret=interpret, num_warps=check_int(num_warps, "num_warps", low=1, high=32))


def decode_attention(q: Any, cache: QuantizedKVCache, spec: CacheSpec, params: CacheParams, *,
                     impl: str = "auto", interpret: bool | None = None, block_tokens: int = 64,
                     n_splits: int | None = None, num_warps: int = 4) -> jax.Array:
    """One decode step of attention for all query heads of a layer over a quantized cache.

    Parameters
    ----------
    q : ``(H·G, dim)``
        The step's query heads (post-RoPE); head ``h·G + g`` uses KV head ``h``.
    cache : QuantizedKVCache
        H KV heads; the first ``cache.length`` tokens are attended (length >= 1).
    spec, params : the cache's spec and parameters.
    impl, interpret : dispatch (see :mod:`kvstats_gpu`).
    block_tokens : int
        Tokens per inner block (power of two, 16..256).
    n_splits : int, optional
        Sequence splits per KV head (power of two; default: up to 32, >= 4 blocks each).
    num_warps : int
        Triton warps per program.

    Returns
    -------
    jax.Array ``(H·G, dim)`` float32
        Equal (to float32 rounding) to ``dense_decode_attention(q, *dequantize_kv(...))``.

    Examples
    --------
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
    params = _check_params(spec, params)
    _check_cache(cache, spec)
    _queries(q, spec, params, cache.n_heads)
    if impl == "pallas":
        _check_blocking(cache.capacity, block_tokens, n_splits)
    return _decode_jit(q, cache, params, spec=spec, impl=impl, interpret=interpret, block_tokens=block_tokens,
                       n_splits=n_splits, num_warps=check_int(num_warps, "num_warps", low=1, high=32))


@functools.partial(jax.jit, static_argnames=("spec", "impl", "interpret", "block_tokens", "n_splits", "num_warps"))
def _decode_jit(q, cache, params, *, spec, impl, interpret, block_tokens, n_splits, num_warps):
    parts = decode_partials(q, cache, spec, params, impl=impl, interpret=interpret,
                            block_tokens=block_tokens, n_splits=n_splits, num_warps=num_warps)
    return finalize_partials(parts, spec, params, impl=impl, interpret=interpret)


def _check_blocking(C, block_tokens, n_splits):
    if not (isinstance(block_tokens, int) and is_pow2(block_tokens) and MIN_DOT <= block_tokens <= PAGE):
        raise ValueError(f"block_tokens must be a power of two in [{MIN_DOT}, {PAGE}]; received {block_tokens!r}")
    _choose_splits(C, block_tokens, n_splits)
