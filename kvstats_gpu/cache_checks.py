"""The quantized cache's input checks that need no cache type (:mod:`kvstats_gpu.cache` runs them).

- The **params fingerprint** ties a cache to the spec and parameters that built it: codes
  decoded with another draw's rotation signs or sketch (another seed, or another scheme
  with the same shapes) are garbage without any error, so
  :func:`~kvstats_gpu.cache.quantize_kv` stores :func:`params_fingerprint` in the cache
  and every eager call that reads or extends the cache compares it with the fingerprint of
  the spec and params it is given (:func:`check_fingerprint`). It is computed on the host
  from concrete values (a hash of their bytes, deterministic across processes), so the
  jitted programs never see it; under jit it cannot be checked.
- **Vector norms against float16**, the cache's norm dtype (the numpy core's rule,
  :func:`kvstats.quant.coder.check_norm_range`): a norm above 65504 is an error (stored as
  inf, attention over it would be NaN); a nonzero norm below float16's smallest normal
  (6.1e-5) is stored as a subnormal with fewer significant bits, or as 0 below 3e-8 (the
  vector then decodes as zeros), and warns. The cache keeps the numpy scheme's layout and
  codes (float16 norms, no scale), so it keeps this rounding too; rescale such inputs.
"""

from __future__ import annotations

import functools
import hashlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from kvstats.quant.coder import NormOverflowError
from kvstats_gpu._common import as_jax_float, check_finite_concrete

# What each fingerprint entry covers, in order (named in the mismatch message).
FINGERPRINT_PARTS = ("spec (dims, codebooks, QJL scales)", "params.k_signs", "params.v_signs",
                     "params.k_sketch", "params.v_sketch")

_F16 = np.finfo(np.float16)
# The largest norm the cache's float16 can hold; a larger one would be stored as inf and
# every decode attending that token would return NaN.
_NORM_MAX = float(_F16.max)


def _digest(*chunks: bytes) -> int:
    """A 32-bit blake2b digest (deterministic: Python's hash() of a str is salted per process)."""
    h = hashlib.blake2b(digest_size=4)
    for c in chunks:
        h.update(len(c).to_bytes(8, "little"))  # lengths delimit the chunks
        h.update(c)
    return int.from_bytes(h.digest(), "little")


@functools.lru_cache(maxsize=64)
def _spec_digest(spec) -> int:
    # what decoding depends on (name aside: two specs differing only in it decode alike)
    ints = np.array([spec.dim, spec.k_dpad, spec.v_dpad, spec.k_m, spec.v_m], np.int64)
    cbs = [b"none" if cb is None else np.asarray(cb.centroids + cb.boundaries, np.float64).tobytes()
           for cb in (spec.k_codebook, spec.v_codebook)]
    return _digest(ints.tobytes(), *cbs, np.array([spec.k_scale, spec.v_scale], np.float64).tobytes())


def _array_digest(a) -> int:
    if a is None:
        return _digest(b"none")
    arr = np.asarray(a, np.float32)  # check_params' dtype: float64 and float32 copies agree
    return _digest(np.array(arr.shape, np.int64).tobytes(), arr.tobytes())


def params_fingerprint(spec, params) -> np.ndarray | None:
    """The fingerprint of a spec and its parameters: ``uint32`` array of 5 digests.

    One 32-bit blake2b digest per entry of :data:`FINGERPRINT_PARTS` (the spec's dims,
    codebooks and QJL scales; each rotation-sign vector and sketch matrix, as float32
    bytes), so a mismatch can say which part differs. Deterministic across processes
    and machines. None when a parameter is traced (under jit: unknown).

    Examples
    --------
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> from kvstats_gpu.cache_checks import params_fingerprint
    >>> spec, p0 = make_cache_spec("KQV", 4, 64, seed=0)
    >>> p1 = make_cache_spec("KQV", 4, 64, seed=1)[1]
    >>> fp0, fp1 = params_fingerprint(spec, p0), params_fingerprint(spec, p1)
    >>> fp0.dtype, fp0.shape, bool((fp0 == params_fingerprint(spec, p0)).all())
    (dtype('uint32'), (5,), True)
    >>> (fp0 != fp1).tolist()  # the spec and the absent key sketch agree
    [False, True, True, False, True]
    """
    if any(isinstance(a, jax.core.Tracer) for a in params):
        return None
    return np.array([_spec_digest(spec), *(_array_digest(a) for a in params)], np.uint32)


def _shown(fp: np.ndarray) -> str:
    return "-".join(f"{int(x):08x}" for x in fp)


def check_fingerprint(fingerprint, expected: np.ndarray | None) -> None:
    """Raise unless a cache's ``fingerprint`` equals ``expected`` (:func:`params_fingerprint`).

    Skipped when either is unknown: a traced fingerprint or params (under jit, where it
    cannot run), a cache built by hand (fingerprint None), traced params (expected None).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats_gpu.cache_checks import check_fingerprint
    >>> fp = np.array([1, 2, 3, 4, 5], np.uint32)
    >>> check_fingerprint(fp, fp.copy())
    >>> check_fingerprint(None, fp)  # a cache built by hand: not checked
    >>> check_fingerprint(fp, np.array([1, 9, 3, 4, 5], np.uint32))
    Traceback (most recent call last):
    ...
    ValueError: the cache was quantized with params fingerprint 00000001-00000002-00000003-00000004-00000005; received spec and params with fingerprint 00000001-00000009-00000003-00000004-00000005, which differ in params.k_signs: pass the CacheSpec and CacheParams returned together (make_cache_spec, spec_from_scheme) with those that built the cache
    """
    if fingerprint is None or expected is None or isinstance(fingerprint, jax.core.Tracer):
        return
    have = np.asarray(fingerprint)
    if have.shape != expected.shape or not np.issubdtype(have.dtype, np.integer):
        raise ValueError(f"cache.fingerprint must be None or an integer array of shape {expected.shape} "
                         f"(params_fingerprint); received shape {have.shape}, dtype {have.dtype}")
    differ = have.astype(np.int64) != expected.astype(np.int64)
    if differ.any():
        parts = ", ".join(p for p, d in zip(FINGERPRINT_PARTS, differ) if d)
        raise ValueError(f"the cache was quantized with params fingerprint {_shown(have)}; received spec and "
                         f"params with fingerprint {_shown(expected)}, which differ in {parts}: pass the "
                         "CacheSpec and CacheParams returned together (make_cache_spec, spec_from_scheme) "
                         "with those that built the cache")


def _warn_subnormal(stored: np.ndarray, computed: np.ndarray | None, what: str, name: str) -> None:
    """Warn for nonzero norms float16 stores as 0 (known only from ``computed``) or as subnormals."""
    low = (stored > 0) & (stored < float(_F16.smallest_normal))
    fix = f"rescale {name} (e.g. multiply it by a power of two; the GPU cache stores float16 norms only)"
    if computed is not None:
        lost = (computed > 0) & (stored == 0)
        if lost.any():
            warnings.warn(f"{what}: {int(lost.sum())} of {stored.size} norms are below float16's smallest subnormal "
                          f"(smallest {float(computed[lost].min()):.3g}) and are stored as 0: those vectors "
                          f"decode as exact zeros; {fix}", UserWarning, stacklevel=2)
    if low.any():
        smallest = float((stored if computed is None else computed)[low].min())
        rel = float(_F16.smallest_subnormal) / smallest / 2  # half a subnormal step
        warnings.warn(f"{what}: {int(low.sum())} of {stored.size} norms are float16 subnormals (below "
                      f"{float(_F16.smallest_normal):.3g}; smallest {smallest:.3g}): stored with "
                      f"fewer significant bits, relative error up to {rel:.2g}; {fix}", UserWarning, stacklevel=2)


def _check_norms(X, name):
    """Refuse a concrete ``X`` with a vector norm above float16's largest (the numpy core's rule,
    ``kvstats.quant.coder.check_norm_range``; the GPU cache has no wider norm dtype), and warn
    for norms float16 stores as subnormals or 0. Traced inputs cannot be checked: such a norm
    is stored as inf and attention over it is NaN."""
    if isinstance(X, jax.core.Tracer) or X.size == 0:
        return
    norms = np.linalg.norm(np.asarray(X, np.float32), axis=-1)  # float32, as the encode computes it
    top = float(norms.max())
    if top > _NORM_MAX:
        raise NormOverflowError(f"{name} has a vector norm of {top:.4g}, above the largest float16 ({_NORM_MAX:.6g}), "
                                f"the GPU cache's norm dtype; rescale {name} (e.g. divide it by a power of two)")
    _warn_subnormal(norms.astype(np.float16).astype(np.float32), norms, f"{name}'s vectors", name)


def _check_sketch_norms(cache, start, n):
    """Refuse a concrete cache whose new tokens' QJL norms (a residual's, computed in the encode)
    overflowed float16, and warn for subnormal ones; the inputs' own norms were checked
    before encoding."""
    for name, part in (("K", cache.k_snorms), ("V", cache.v_snorms)):
        if part is None or isinstance(part, jax.core.Tracer):
            continue
        stored = np.asarray(part[:, start:start + n], np.float32)
        if np.isinf(stored).any():
            raise NormOverflowError(f"the QJL residual of {name} has a norm above the largest float16 "
                                    f"({_NORM_MAX:.6g}), the GPU cache's norm dtype; rescale {name}")
        _warn_subnormal(stored, None, f"the QJL residual of {name}", name)


def _check_kv(K, V, dim, allow_empty=False):
    K = as_jax_float(K, "K", min_ndim=3, allow_empty=allow_empty)
    V = as_jax_float(V, "V", min_ndim=3, allow_empty=allow_empty)
    if K.ndim != 3 or K.shape != V.shape or K.shape[-1] != dim:
        raise ValueError(f"K and V must both have shape (H, N, {dim}); received {K.shape} and {V.shape}")
    for X, name in ((K, "K"), (V, "V")):
        check_finite_concrete(X, name)
        _check_norms(X, name)
    return K.astype(jnp.float32), V.astype(jnp.float32)
