"""Multi-device decode attention: KV heads (and optionally the sequence) sharded with shard_map.

Heads are independent, so sharding them needs no communication: each device runs
:func:`kvstats_gpu.decode.decode_attention` on its KV heads and their query heads.
Sharding the sequence as well splits each head's cache across devices; every device
computes flash-decoding partials (max ``m``, sum ``l``, unnormalised accumulators) over
its tokens, and the partials are combined exactly with one ``pmax`` and three ``psum``
(rescaling by ``exp(m_dev − M)``), then normalised and inverse-rotated. A shard holding no
valid tokens contributes ``l = 0`` and is ignored by the combine.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax.typing import ArrayLike
from jaxtyping import Float

from kvstats_gpu._common import resolve_impl
from kvstats_gpu.cache import CacheParams, CacheSpec, QuantizedKVCache, check_cache, check_params
from kvstats._checks import check_int
from kvstats_gpu.decode import Partials, _queries, decode_partials, finalize_partials, _nan_unless_attendable


def _cache_specs(head_axis, seq_axis) -> QuantizedKVCache:
    planes = P(head_axis, None, seq_axis, None)
    tok = P(head_axis, seq_axis)
    signs = P(head_axis, seq_axis, None)
    return QuantizedKVCache(planes, tok, signs, tok, planes, tok, signs, tok, P(), P())


def _check_mesh(mesh: Mesh, head_axis: str, seq_axis: str | None) -> None:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh; received {type(mesh).__name__}")
    for nm, ax in (("head_axis", head_axis), ("seq_axis", seq_axis)):
        if (ax is not None or nm == "head_axis") and ax not in mesh.axis_names:
            raise ValueError(f"{nm} must be one of the mesh axes {list(mesh.axis_names)}; received {ax!r}")


def shard_cache(cache: QuantizedKVCache, mesh: Mesh, head_axis: str = "heads",
                seq_axis: str | None = None) -> QuantizedKVCache:
    """Place a cache on ``mesh``: heads along ``head_axis``, tokens along ``seq_axis`` (optional).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> cache = quantize_kv(np.ones((2, 8, 64)), np.ones((2, 8, 64)), spec, params)
    >>> mesh = Mesh(np.array(jax.devices()[:1]), ("heads",))
    >>> shard_cache(cache, mesh).k_norms.sharding.spec
    P('heads', None)
    """
    if not isinstance(cache, QuantizedKVCache):
        raise TypeError(f"cache must be a QuantizedKVCache; received {type(cache).__name__}")
    _check_mesh(mesh, head_axis, seq_axis)
    specs = _cache_specs(head_axis, seq_axis)
    return QuantizedKVCache(*[None if a is None else jax.device_put(a, NamedSharding(mesh, s))
                              for a, s in zip(cache, specs)])


def sharded_decode_attention(q: Float[ArrayLike, "HG dim"], cache: QuantizedKVCache, spec: CacheSpec,
                             params: CacheParams, mesh: Mesh, *, head_axis: str = "heads", seq_axis: str | None = None,
                             impl: str = "auto", interpret: bool | None = None, block_tokens: int = 64,
                             n_splits: int | None = None) -> Float[jax.Array, "HG dim"]:
    """:func:`~kvstats_gpu.decode.decode_attention` with heads (and tokens) sharded over ``mesh``.

    Parameters
    ----------
    q : ``(H·G, dim)``
    cache : QuantizedKVCache
        H must be divisible by ``mesh.shape[head_axis]``; with ``seq_axis`` the capacity
        must be divisible by ``mesh.shape[seq_axis] · block_tokens``.
    mesh : jax.sharding.Mesh
        With an axis ``head_axis`` and optionally ``seq_axis``.
    Other arguments as in :func:`~kvstats_gpu.decode.decode_attention`.

    Returns
    -------
    jax.Array ``(H·G, dim)`` float32, sharded over heads; equal to the single-device
    result up to float32 summation order.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu import decode_attention, make_cache_spec, quantize_kv
    >>> spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    >>> K = np.random.default_rng(0).normal(size=(2, 40, 64)).astype(np.float32)
    >>> cache = quantize_kv(K, K, spec, params)
    >>> mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("heads", "seq"))
    >>> q = np.ones((4, 64), np.float32)
    >>> o = sharded_decode_attention(q, cache, spec, params, mesh, seq_axis="seq")
    >>> bool(np.allclose(o, decode_attention(q, cache, spec, params), atol=1e-5))
    True
    """
    _check_mesh(mesh, head_axis, seq_axis)
    params = check_params(spec, params)
    check_cache(cache, spec, params)
    if not isinstance(cache.length, jax.core.Tracer) and int(cache.length) < 1:
        # as decode_attention: every shard would have l = 0 and the output be 0/0
        raise ValueError(f"cache.length must be >= 1 to attend; received {int(cache.length)}")
    n_head_dev = mesh.shape[head_axis]
    if cache.n_heads % n_head_dev:
        raise ValueError(f"the cache's {cache.n_heads} KV heads must be divisible by mesh axis "
                         f"{head_axis!r} of size {n_head_dev}")
    # q as decode_attention checks it (shape, finite values), before shard_map sees it
    _queries(q, spec, params, cache.n_heads)
    block_tokens = check_int(block_tokens, "block_tokens", low=1)
    n_seq_dev = 1 if seq_axis is None else mesh.shape[seq_axis]
    if cache.capacity % (n_seq_dev * block_tokens):
        raise ValueError(f"the cache capacity {cache.capacity} must be divisible by "
                         f"{n_seq_dev} sequence shards x block_tokens {block_tokens}")
    # validated here, as they key the cache of compiled steps (an unhashable one would fail there)
    impl, interpret = resolve_impl(impl, interpret)
    if n_splits is not None:
        n_splits = check_int(n_splits, "n_splits", low=1)
    q = jnp.asarray(q)
    fn = _sharded_step(spec, mesh, head_axis, seq_axis, impl, interpret, block_tokens, n_splits,
                       tuple(a is None for a in cache), tuple(a is None for a in params))
    return fn(q, cache, params)


@functools.lru_cache(maxsize=64)
def _sharded_step(spec: CacheSpec, mesh: Mesh, head_axis: str, seq_axis: str | None, impl: str,
                  interpret: bool | None, block_tokens: int, n_splits: int | None,
                  cache_none: tuple[bool, ...], params_none: tuple[bool, ...]):
    """The jitted shard_map of one decode step, built once per static configuration.

    jit caches compilations per function object: a fresh closure on every call (as before)
    recompiled the whole step, Pallas kernels included, on each decode step. Keyed on every
    static the body closes over (the mesh and spec are hashable; which cache/params fields
    are None fixes the pytree), so a later call with the same shapes reuses the executable.
    """

    def local(q_l, cache_l, params_l):
        length = cache_l.length
        if seq_axis is not None:
            # valid tokens counted from this shard's first position (may be <= 0)
            length = length - jax.lax.axis_index(seq_axis) * cache_l.capacity
        parts = decode_partials(q_l, cache_l, spec, params_l, length=length, impl=impl,
                                interpret=interpret, block_tokens=block_tokens, n_splits=n_splits)
        if seq_axis is not None:
            M = jax.lax.pmax(parts.m, seq_axis)
            w = jnp.exp(parts.m - M)
            parts = Partials(M, jax.lax.psum(w * parts.l, seq_axis),
                             jax.lax.psum(w[..., None] * parts.a, seq_axis),
                             None if parts.b is None else jax.lax.psum(w[..., None] * parts.b, seq_axis))
        out = finalize_partials(parts, spec, params_l, impl=impl, interpret=interpret)
        # under jit: NaN for an empty or overflowed cache, as decode_attention (the global capacity)
        return _nan_unless_attendable(out, cache_l.length, cache_l.capacity * n_seq_dev)

    n_seq_dev = 1 if seq_axis is None else mesh.shape[seq_axis]
    param_specs = CacheParams(*[None if none else P() for none in params_none])
    cache_specs = QuantizedKVCache(*[None if none else s
                                     for none, s in zip(cache_none, _cache_specs(head_axis, seq_axis))])
    fn = jax.shard_map(local, mesh=mesh, in_specs=(P(head_axis, None), cache_specs, param_specs),
                       out_specs=P(head_axis, None), check_vma=False)
    return jax.jit(fn)
