"""The quantized KV cache: its static spec, random parameters, layout, encode, append, decode.

Cache layout (:class:`QuantizedKVCache`), per KV head and contiguous over tokens, so a
decode step streams it once:

- scalar Lloyd–Max codes of the rotated unit vector in bit planes ``(H, bits, C, d_pad/8)``
  uint8 (see :mod:`kvstats_gpu.codebook`) and the norm ``(H, C)`` float16;
- 1-bit QJL signs ``(H, C, m/8)`` uint8 (the numpy core's packed bits) and the norm of the
  sketched vector ``(H, C)`` float16 (the residual for TurboQuant-prod, the key itself for
  pure QJL keys);
- the fingerprint of the spec and params that built it, uint32 ``(5,)``, which calls
  given other params refuse (:mod:`kvstats_gpu.cache_checks`).

So memory is proportional to the code bits: for KQV at 4 bits, d = 128, 8 KV heads, a
token costs 8·(66 + 68) = 1072 bytes instead of 4096 in fp16 (:func:`cache_bytes_per_token`).
``C`` (capacity) is a multiple of :data:`PAGE` tokens; ``length`` counts valid tokens.

A spec and its parameters come from a numpy scheme through :mod:`kvstats_gpu.bridge`;
attention over the cache is :mod:`kvstats_gpu.decode`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Float, Int, UInt8, UInt32

from kvstats._checks import check_int, check_real
from kvstats_gpu._common import check_length, resolve_impl
from kvstats_gpu.cache_checks import _check_kv, _check_sketch_norms, check_fingerprint, params_fingerprint
from kvstats_gpu.codebook import (StaticCodebook, decode_packed, decode_reference, encode_packed,
                                  unpack_planes_reference)
from kvstats_gpu.qjl import check_sketch, qjl_sketch, unpack_signs_reference
from kvstats_gpu.rotation import check_signs, rotate_optional, unrotate_optional

# Capacity is rounded up to a multiple of this many tokens (a multiple of every block size).
PAGE = 256


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

    Examples
    --------
    >>> from kvstats_gpu.codebook import StaticCodebook
    >>> cb = StaticCodebook.from_arrays([-1.0, 1.0], [0.0])
    >>> spec = CacheSpec(dim=64, k_dpad=64, v_dpad=64, k_codebook=cb, v_codebook=cb, v_m=64, v_scale=0.02)
    >>> spec.k_bits, spec.v_bits, spec.v_m
    (1, 1, 64)
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
        """Bits of the key scalar codes (0 for pure QJL keys)."""
        return 0 if self.k_codebook is None else self.k_codebook.bits

    @property
    def v_bits(self) -> int:
        """Bits of the value scalar codes."""
        return self.v_codebook.bits

    def bytes_per_token_head(self) -> dict[str, int]:
        """Stored bytes per token and KV head, by part (float16 norms).

        Examples
        --------
        >>> from kvstats_gpu.bridge import make_cache_spec
        >>> make_cache_spec("KQV", 4, 128)[0].bytes_per_token_head()
        {'k_codes': 64, 'k_norm': 2, 'v_codes': 48, 'v_norm': 2, 'v_signs': 16, 'v_sketch_norm': 2}
        """
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

    Examples
    --------
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> params = make_cache_spec("KQV", 4, 96, seed=0)[1]  # d = 96 rotates in 128 coordinates
    >>> params.k_signs.shape, params.k_sketch is None, params.v_sketch.shape
    ((128,), True, (128, 96))
    """

    k_signs: Float[jax.Array, "k_dpad"] | None
    v_signs: Float[jax.Array, "v_dpad"] | None
    k_sketch: Float[jax.Array, "k_m dim"] | None
    v_sketch: Float[jax.Array, "v_m dim"] | None


class QuantizedKVCache(NamedTuple):
    """A quantized KV cache for one layer (a pytree; absent parts are None).

    Shapes: ``k_planes (H, k_bits, C, k_dpad/8)`` uint8, ``k_norms (H, C)`` float16,
    ``k_signs (H, C, k_m/8)`` uint8, ``k_snorms (H, C)`` float16 (norm of the sketched
    vector), the same for values, ``length`` (int32 scalar: valid tokens) and ``fingerprint``
    (uint32 ``(5,)``: :func:`~kvstats_gpu.cache_checks.params_fingerprint` of the spec and
    params that quantized it; None for a cache built by hand, which is then not checked).
    Every eager call given the cache with a spec and params (append, decode, dequantize)
    refuses ones of another fingerprint, e.g. another seed's: decoding with them would
    return garbage silently. Under jit the check cannot run (the fingerprint is traced),
    and the jitted programs never read it.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> from kvstats_gpu.cache import append_kv, quantize_kv
    >>> spec, params = make_cache_spec("turboquant_mse", 2, 64, seed=0)
    >>> cache = quantize_kv(np.ones((2, 10, 64)), np.ones((2, 10, 64)), spec, params)
    >>> cache.n_heads, cache.capacity, int(cache.length), cache.nbytes  # 2 heads x 256 x (16 + 2 + 16 + 2) B
    (2, 256, 10, 18432)
    >>> other = make_cache_spec("turboquant_mse", 2, 64, seed=1)[1]
    >>> append_kv(cache, np.ones((2, 1, 64)), np.ones((2, 1, 64)), spec, other)
    Traceback (most recent call last):
    ...
    ValueError: the cache was quantized with params fingerprint ...; received spec and params with fingerprint ..., which differ in params.k_signs, params.v_signs: pass the CacheSpec and CacheParams returned together (make_cache_spec, spec_from_scheme) with those that built the cache
    """

    k_planes: UInt8[jax.Array, "H k_bits C k_dpad/8"] | None
    k_norms: Float[jax.Array, "H C"] | None
    k_signs: UInt8[jax.Array, "H C k_m/8"] | None
    k_snorms: Float[jax.Array, "H C"] | None
    v_planes: UInt8[jax.Array, "H v_bits C v_dpad/8"]
    v_norms: Float[jax.Array, "H C"]
    v_signs: UInt8[jax.Array, "H C v_m/8"] | None
    v_snorms: Float[jax.Array, "H C"] | None
    length: Int[jax.Array, ""]
    fingerprint: UInt32[jax.Array, "5"] | None = None

    @property
    def capacity(self) -> int:
        """Allocated tokens C (a multiple of :data:`PAGE`)."""
        return int(self.v_norms.shape[1])

    @property
    def n_heads(self) -> int:
        """KV heads H."""
        return int(self.v_norms.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the stored codes and norms (the whole capacity)."""
        return int(sum(a.nbytes for a in self[:8] if a is not None))


def check_params(spec: CacheSpec, params: CacheParams) -> CacheParams:
    """Validate ``params`` against ``spec``; returns them as float32 (absent parts None).

    Examples
    --------
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> check_params(spec, params).v_sketch.dtype
    dtype('float32')
    >>> check_params(spec, params._replace(v_sketch=None))
    Traceback (most recent call last):
    ...
    ValueError: params.v_sketch is required: the spec has 64 sketch rows
    """
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


def check_cache(cache: QuantizedKVCache, spec: CacheSpec, params: CacheParams | None = None) -> None:
    """Raise unless ``cache`` has exactly the parts and shapes ``spec`` describes (and was
    quantized with ``spec`` and ``params``, when given).

    Every part present or absent as the spec says, planes ``(H, bits, C, d_pad/8)``, signs
    ``(H, C, m/8)``, norms ``(H, C)``, with one H and one C throughout (so a mismatched
    cache fails here, naming the part, not deep inside a kernel), and ``length`` an
    integer scalar in ``[0, C]`` (when concrete: a longer one would attend every slot;
    ``C + 1`` is what :func:`append_kv` under jit sets when the tokens did not fit).
    With ``params``, the cache's fingerprint must be that of ``spec`` and ``params``
    (:func:`~kvstats_gpu.cache_checks.check_fingerprint`; skipped under jit, and for a
    cache without one).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> from kvstats_gpu.cache import check_cache, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> cache = quantize_kv(np.ones((2, 10, 64)), np.ones((2, 10, 64)), spec, params)
    >>> check_cache(cache, spec, params)
    >>> check_cache(cache, spec)
    >>> check_cache(cache._replace(v_signs=cache.v_signs[:, :, :4]), spec)
    Traceback (most recent call last):
    ...
    ValueError: cache.v_signs has shape (2, 256, 4), expected (2, 256, 8) for this spec (H = 2, C = 256)
    >>> check_cache(cache, spec, make_cache_spec("KQV", 4, 64, seed=1)[1])
    Traceback (most recent call last):
    ...
    ValueError: the cache was quantized with params fingerprint ...; received spec and params with fingerprint ..., which differ in params.k_signs, params.v_signs, params.v_sketch: pass the CacheSpec and CacheParams returned together (make_cache_spec, spec_from_scheme) with those that built the cache
    """
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    H, C = cache.n_heads, cache.capacity
    want = {"k_planes": (H, spec.k_bits, C, spec.k_dpad // 8) if spec.k_bits else None,
            "k_norms": (H, C) if spec.k_bits else None,
            "k_signs": (H, C, spec.k_m // 8) if spec.k_m else None,
            "k_snorms": (H, C) if spec.k_m else None,
            "v_planes": (H, spec.v_bits, C, spec.v_dpad // 8),
            "v_norms": (H, C),
            "v_signs": (H, C, spec.v_m // 8) if spec.v_m else None,
            "v_snorms": (H, C) if spec.v_m else None}
    for name, shape in want.items():
        part = getattr(cache, name)
        if (part is None) != (shape is None):
            raise ValueError(f"cache does not match spec: cache.{name} is "
                             f"{'absent' if part is None else 'present'} but the spec "
                             f"{'has' if shape is not None else 'has no'} such part")
        if part is not None and tuple(part.shape) != shape:
            raise ValueError(f"cache.{name} has shape {tuple(part.shape)}, expected {shape} for this spec "
                             f"(H = {H}, C = {C})")
    try:
        check_length(cache.length, "cache.length", low=0, high=C)
    except ValueError as exc:  # raised only for a concrete integer
        if int(cache.length) == C + 1:
            raise ValueError(f"{exc}, the length append_kv sets under jit when the tokens did not fit "
                             "(the cache is spoiled); allocate a larger capacity in quantize_kv") from None
        raise
    if params is not None:
        check_fingerprint(cache.fingerprint, params_fingerprint(spec, params))


# --------------------------------------------------------------------------- encoding
def _encode_side(x, codebook, signs, sketch, impl, interpret):
    """Encode (H, N, d) float32 vectors: planes (H,b,N,d8), norms, signs (H,N,m8), snorms."""
    planes = norms = bits = snorms = None
    if codebook is not None:
        norm = jnp.sqrt(jnp.sum(x * x, axis=-1))
        unit = x / jnp.where(norm > 0, norm, 1.0)[..., None]
        y = rotate_optional(unit, signs, impl, interpret)
        planes_tok = encode_packed(y, codebook, impl=impl, interpret=interpret)  # (H, N, b, d8)
        planes = jnp.swapaxes(planes_tok, 1, 2)
        norms = norm.astype(jnp.float16)
        if sketch is not None:
            # the residual in the original space, against the decoded vector with the stored
            # (float16) norm, as the numpy TurboQuant-prod does
            chat = decode_packed(planes_tok, codebook, impl=impl, interpret=interpret)
            xhat = norms.astype(jnp.float32)[..., None] * unrotate_optional(chat, signs, x.shape[-1], impl, interpret)
            bits, rn = qjl_sketch(x - xhat, sketch, impl=impl, interpret=interpret)
            snorms = rn.astype(jnp.float16)
    else:
        bits, rn = qjl_sketch(x, sketch, impl=impl, interpret=interpret)
        snorms = rn.astype(jnp.float16)
    return planes, norms, bits, snorms


def quantize_kv(K: Float[ArrayLike, "H N dim"], V: Float[ArrayLike, "H N dim"], spec: CacheSpec,
                params: CacheParams, *, capacity: int | None = None, impl: str = "auto",
                interpret: bool | None = None) -> QuantizedKVCache:
    """Quantize a layer's keys and values ``(H, N, d)`` into a :class:`QuantizedKVCache`.

    Parameters
    ----------
    K, V : arrays ``(H, N, dim)``
        Keys and values of the H KV heads (any float dtype; encoded in float32).
    spec, params : from :func:`~kvstats_gpu.bridge.make_cache_spec` or
        :func:`~kvstats_gpu.bridge.spec_from_scheme`
    capacity : int, optional
        Tokens to allocate (default N), rounded up to a multiple of 256; the cache grows
        in place with :func:`append_kv` up to it.
    impl, interpret
        Dispatch (see :mod:`kvstats_gpu`); the encode kernels are rotation, Lloyd–Max
        encode/decode and QJL sketch.

    Raises
    ------
    kvstats.quant.coder.NormOverflowError
        (a ValueError) A vector norm of K or V, or of a QJL residual, above 65504, the
        largest float16 (the cache's norm dtype): it would be stored as inf and attention
        over it be NaN. Rescale the inputs. Checked only for concrete inputs: under jit
        such a norm is stored as inf and :func:`~kvstats_gpu.decode.decode_attention`
        returns NaN for the heads attending it.

    Warns
    -----
    UserWarning
        A nonzero norm below float16's smallest normal (6.1e-5): stored as a subnormal with
        fewer significant bits (a norm of 1e-6 by up to 3%), or as 0 below 3e-8 (the
        vector decodes as zeros), as in the numpy scheme (:mod:`kvstats_gpu.cache_checks`).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 10, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, K, spec, params)
    >>> cache.capacity, int(cache.length), cache.k_planes.shape
    (256, 10, (2, 4, 256, 8))
    """
    params = check_params(spec, params)
    K, V = _check_kv(K, V, spec.dim)
    impl, interpret = resolve_impl(impl, interpret)
    N = K.shape[1]
    capacity = N if capacity is None else check_int(capacity, "capacity", low=N)
    C = -(-capacity // PAGE) * PAGE
    cache = _quantize_jit(K, V, params, spec=spec, C=C, impl=impl, interpret=interpret)
    _check_sketch_norms(cache, 0, N)
    fp = params_fingerprint(spec, params)  # on the host; None for traced params
    return cache if fp is None else cache._replace(fingerprint=jnp.asarray(fp))


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


def append_kv(cache: QuantizedKVCache, K: Float[ArrayLike, "H n dim"], V: Float[ArrayLike, "H n dim"],
              spec: CacheSpec, params: CacheParams, *, impl: str = "auto",
              interpret: bool | None = None) -> QuantizedKVCache:
    """Encode new tokens ``(H, n, dim)`` and write them at ``cache.length`` (a decode step).

    Keys arriving later are coded with the same rotation and sketch (one shared draw).
    Jit-friendly (``lax.dynamic_update_slice``). Zero tokens (``n = 0``, e.g. a finished
    sequence of a ragged batch) return the cache unchanged.

    Past the capacity: with a concrete ``cache.length`` a ValueError. Under jit nothing can
    raise, and ``dynamic_update_slice`` would clamp the write onto the last tokens; instead
    the returned ``length`` is ``C + 1`` (and stays so through later appends): the cache is
    spoiled (its last tokens may be overwritten), :func:`check_cache` refuses it once
    concrete, and :func:`~kvstats_gpu.decode.decode_attention` under jit returns NaN for
    it. Norms outside float16's range: as :func:`quantize_kv`. A cache quantized with other
    params (its fingerprint) is a ValueError, except under jit (:class:`QuantizedKVCache`).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, params = make_cache_spec("turboquant_mse", 3, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 10, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, K, spec, params, capacity=300)
    >>> int(append_kv(cache, K[:, :1], K[:, :1], spec, params).length)
    11
    """
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    params = check_params(spec, params)
    K, V = _check_kv(K, V, spec.dim, allow_empty=True)
    if K.shape[0] != cache.n_heads:
        raise ValueError(f"K must have {cache.n_heads} heads (the cache's); received {K.shape[0]}")
    n = K.shape[1]
    concrete = not isinstance(cache.length, jax.core.Tracer)
    if n == 0:
        check_cache(cache, spec, params)
        return cache
    check_fingerprint(cache.fingerprint, params_fingerprint(spec, params))
    if concrete and int(cache.length) + n > cache.capacity:
        raise ValueError(f"appending {n} tokens to a cache holding {int(cache.length)} exceeds its "
                         f"capacity {cache.capacity}; allocate a larger capacity in quantize_kv")
    impl, interpret = resolve_impl(impl, interpret)
    # the fingerprint stays outside the jitted program (and under jit passes through)
    new = _append_jit(cache._replace(fingerprint=None), K, V, params, spec=spec, impl=impl, interpret=interpret)
    if concrete:
        _check_sketch_norms(new, int(cache.length), n)
    return new._replace(fingerprint=cache.fingerprint)


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
    # past the capacity (only a traced length gets here) the write was clamped: mark the cache
    # spoiled with length C + 1, which check_cache refuses and decode_attention makes NaN
    end = pos + K.shape[1]
    C = cache.capacity
    return QuantizedKVCache(*new, jnp.where((pos >= 0) & (end <= C), end, C + 1).astype(cache.length.dtype))


def _dequant_side(planes, norms, bits, snorms, codebook, signs, sketch, scale, dim):
    out = 0.0
    if codebook is not None:
        codes = unpack_planes_reference(jnp.swapaxes(planes, 1, 2))  # (H, C, d_pad)
        chat = decode_reference(codes, codebook)
        out = norms.astype(jnp.float32)[..., None] * unrotate_optional(chat, signs, dim, "reference", None)
    if sketch is not None:
        sig = unpack_signs_reference(bits, sketch.shape[0])
        out = out + scale * snorms.astype(jnp.float32)[..., None] * jnp.matmul(
            sig, sketch, precision=jax.lax.Precision.HIGHEST)
    return out


def dequantize_kv(cache: QuantizedKVCache, spec: CacheSpec,
                  params: CacheParams) -> tuple[Float[jax.Array, "H C dim"], Float[jax.Array, "H C dim"]]:
    """Dequantized ``(K̂, V̂)``, float32 ``(H, C, dim)`` (the whole capacity; slice to length).

    Plain jnp; ``K̂ = ‖k‖·Rᵀĉ + c·‖r‖·Sᵀ sign(S r)`` (the parts the spec has). This is the
    numpy core's decode, so ``dense_decode_attention`` on it is the exact reference of
    :func:`decode_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(1, 20, 64)).astype(np.float32)
    >>> Kh, Vh = dequantize_kv(quantize_kv(K, K, spec, params), spec, params)
    >>> Kh.shape, bool(np.linalg.norm(Kh[:, :20] - K) < 0.2 * np.linalg.norm(K))
    ((1, 256, 64), True)
    """
    params = check_params(spec, params)
    check_cache(cache, spec, params)
    return _dequantize_jit(cache._replace(fingerprint=None), params, spec=spec)


@functools.partial(jax.jit, static_argnames=("spec",))
def _dequantize_jit(cache, params, *, spec):
    K = _dequant_side(*cache[:4], spec.k_codebook, params.k_signs, params.k_sketch, spec.k_scale, spec.dim)
    V = _dequant_side(*cache[4:8], spec.v_codebook, params.v_signs, params.v_sketch, spec.v_scale, spec.dim)
    return K, V


def cache_bytes_per_token(spec: CacheSpec, n_kv_heads: int) -> dict[str, float]:
    """Analytic cache bytes per token (all KV heads of a layer) and the ratio to fp16.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, _ = make_cache_spec("KQV", 4, 128, seed=0)
    >>> cache_bytes_per_token(spec, 8)
    {'bytes': 1072, 'fp16_bytes': 4096, 'ratio_to_fp16': 0.26171875}
    """
    if not isinstance(spec, CacheSpec):
        raise TypeError(f"spec must be a CacheSpec; received {type(spec).__name__}")
    n = check_int(n_kv_heads, "n_kv_heads", low=1)
    b = n * sum(spec.bytes_per_token_head().values())
    fp16 = n * 2 * 2 * spec.dim
    return {"bytes": b, "fp16_bytes": fp16, "ratio_to_fp16": b / fp16}


def kernel_refs(it: Iterator, spec: CacheSpec) -> tuple:
    """The refs a decode kernel (Pallas: Triton or Mosaic) receives, in the order its
    caller passes them: ``(length, rotated query, sketched query, key planes, key norms,
    key signs, key sketch norms, value planes, value norms, value signs, value sketch
    norms, value accumulator, sign accumulator)``; absent parts of the spec are None
    (planes: empty lists). ``it`` is left at the kernel's own outputs.

    Examples
    --------
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec = make_cache_spec("KQV", 2, 128)[0]  # 2-bit keys, 1-bit values + value signs
    >>> it = iter(["len", "qr", "kp0", "kp1", "kn", "vp0", "vn", "vs", "vsn", "a", "b", "ml"])
    >>> kernel_refs(it, spec), next(it)
    (('len', 'qr', None, ['kp0', 'kp1'], 'kn', None, None, ['vp0'], 'vn', 'vs', 'vsn', 'a', 'b'), 'ml')
    """
    length = next(it)
    qr = next(it) if spec.k_bits else None
    sq = next(it) if spec.k_m else None
    kp = [next(it) for _ in range(spec.k_bits)]
    kn = next(it) if spec.k_bits else None
    ks = next(it) if spec.k_m else None
    ksn = next(it) if spec.k_m else None
    vp = [next(it) for _ in range(spec.v_bits)]
    vn = next(it)
    vs = next(it) if spec.v_m else None
    vsn = next(it) if spec.v_m else None
    a = next(it)
    b = next(it) if spec.v_m else None
    return length, qr, sq, kp, kn, ks, ksn, vp, vn, vs, vsn, a, b
