import jax
import numpy as np
import pytest

from kvstats_gpu._common import (DEFAULT_BACKEND, hadamard_np, kernel_backend, mosaic_load, mosaic_rows_ok,
                                 next_pow2, resolve_impl, row_block)


def test_dispatch_rule():
    gpu = jax.default_backend() == "gpu"
    assert resolve_impl("auto", None) == (("pallas", False) if gpu else ("reference", True))
    assert resolve_impl("pallas", None) == ("pallas", not gpu)  # interpreter unless on a GPU
    assert resolve_impl("pallas", False) == ("pallas", False)   # allowed: lowering for CUDA on a CPU
    assert resolve_impl("mosaic", True) == ("mosaic", True)
    assert resolve_impl("triton", None) == ("triton", not gpu)
    assert resolve_impl("reference", True) == ("reference", True)
    with pytest.raises(ValueError, match=r"impl must be one of \['auto', 'pallas', 'mosaic', 'triton', 'reference'\]"):
        resolve_impl("cuda", None)
    with pytest.raises(TypeError, match="interpret must be True, False or None"):
        resolve_impl("auto", 1)


def test_backend_choice():
    assert DEFAULT_BACKEND == "mosaic"
    assert kernel_backend("pallas", True) == "mosaic" and kernel_backend("pallas", False) == "triton"
    assert kernel_backend("triton", True) == "triton" and kernel_backend("mosaic", True) == "mosaic"
    with pytest.raises(ValueError, match="impl='mosaic' cannot run this call: rows of 8 bytes"):
        kernel_backend("mosaic", False, "rows of 8 bytes")
    assert mosaic_rows_ok(16, 32) and not mosaic_rows_ok(16, 8)


def test_small_helpers():
    h = hadamard_np(16)
    np.testing.assert_array_equal(h @ h.T, 16 * np.eye(16))  # Sylvester: H Hᵀ = d I
    assert [next_pow2(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]
    assert row_block(3, None) == 16 and row_block(1000, None) == 64 and row_block(5, 32) == 32
    assert row_block(3, None, "mosaic") == 64 and row_block(5, 128, "mosaic") == 128
    with pytest.raises(ValueError, match="block_rows must be a power of two >= 16"):
        row_block(5, 8)
    with pytest.raises(ValueError, match="block_rows must be a power of two >= 64 \\(backend 'mosaic'\\)"):
        row_block(5, 32, "mosaic")


def test_kvstats_never_imports_jax():
    import subprocess
    import sys
    code = "import sys, kvstats, kvstats.quant.schemes; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_mosaic_load_follows_the_signature_of_each_jax_version():
    # plgpu.load across jax versions: 0.10 requires the index (() = the whole ref); later
    # versions default it (idx=NotSpecified) and then drop it, where a positional () would
    # be a TypeError; a version without ``optimized`` must not receive it.
    calls = []

    class NotSpecified:
        pass

    def load_010(src, idx, *, layout=None, optimized=True):
        calls.append(("0.10", src, idx, layout, optimized))

    def load_default(src, idx=NotSpecified(), *, layout=None, optimized=True):
        calls.append(("default", src, type(idx).__name__, layout, optimized))

    def load_no_idx(src, *, layout=None, optimized=True):
        calls.append(("no idx", src, layout, optimized))

    def load_no_optimized(src, *, layout=None):
        calls.append(("no optimized", src, layout))

    for fn in (load_010, load_default, load_no_idx, load_no_optimized):
        mosaic_load(fn, "ref", "WGMMA")
    assert calls == [("0.10", "ref", (), "WGMMA", False), ("default", "ref", "NotSpecified", "WGMMA", False),
                     ("no idx", "ref", "WGMMA", False), ("no optimized", "ref", "WGMMA")]


def _kernel_dots(jaxpr, inside=False, out=None):
    """(precision, operand dtypes) of every dot_general inside a pallas_call of ``jaxpr``."""
    from jax.extend import core as jcore
    out = [] if out is None else out
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and inside:
            out.append((eqn.params["precision"], tuple(v.aval.dtype for v in eqn.invars)))
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                if isinstance(sub, (jcore.ClosedJaxpr, jcore.Jaxpr)):
                    _kernel_dots(getattr(sub, "jaxpr", sub), inside or eqn.primitive.name == "pallas_call", out)
    return out


def test_triton_float32_dots_are_ieee_not_tf32():
    # Triton's default float32 dot is TF32 (10-bit mantissa): scores and codes would then
    # depend on the GPU generation and miss the stated 1e-5 agreement. Every float32 dot
    # inside the Triton kernels must ask for HIGHEST (IEEE) precision; bf16 dots need not.
    # The interpreter computes float32 exactly either way, so only the traced kernel shows it.
    import jax.numpy as jnp
    from _gpu_helpers import manual_spec
    from kvstats.quant.sketch import make_sketch
    from kvstats_gpu.cache import QuantizedKVCache
    from kvstats_gpu.decode import decode_attention
    from kvstats_gpu.qjl import qjl_scores, qjl_sketch
    from kvstats_gpu.rotation import rotate
    S = make_sketch("gaussian", 128, 128, seed=0).matrix
    spec, params = manual_spec(128, 2, 2, 128, 128)
    z8 = lambda *s: jnp.zeros(s, jnp.uint8)  # noqa: E731
    h16 = jnp.zeros((2, 256), jnp.float16)
    cache = QuantizedKVCache(z8(2, 2, 256, 16), h16, z8(2, 256, 16), h16, z8(2, 2, 256, 16), h16, z8(2, 256, 16),
                             h16, jnp.asarray(256, jnp.int32))
    calls = [(lambda z: qjl_sketch(z, S, impl="triton", interpret=False), jnp.zeros((256, 128))),
             (lambda z: rotate(z, np.ones(128), impl="triton", interpret=False), jnp.zeros((256, 128))),
             (lambda q: qjl_scores(q, cache.k_signs, cache.k_snorms, S, impl="triton", interpret=False),
              jnp.zeros((2, 4, 128))),
             (lambda q: decode_attention(q, cache, spec, params, impl="triton", interpret=False),
              jnp.zeros((8, 128)))]
    for fn, arg in calls:
        found = _kernel_dots(jax.make_jaxpr(fn)(arg).jaxpr)
        f32 = [prec for prec, dtypes in found if jnp.float32 in dtypes]
        assert f32 and all(p == (jax.lax.Precision.HIGHEST,) * 2 for p in f32), found
