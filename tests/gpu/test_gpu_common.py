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
