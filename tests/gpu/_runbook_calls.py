"""Every kernel call the GPU runbook's device steps make, at their exact shapes and dtypes
and with the same concrete parameters (codebooks, sketches, signs): what
tests/gpu/test_gpu_device.py and kvstats_gpu.bench (its correctness check and its timed
rows) run on the device. tests/gpu/test_gpu_runbook_lowering.py lowers each for CUDA
through both backends, and tests/gpu/_lowering_probe.py prints what each lowering costs.

Arrays are ``jax.ShapeDtypeStruct`` (lowering needs no data: the 8 x 128k-token inputs
take no memory here); a cache is the abstract result of the reference encode of such
inputs, so its capacity and dtypes are those the runbook's encode makes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import kvstats
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import quantize_kv
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.qjl import qjl_scores, qjl_sketch
from kvstats_gpu.rotation import rotate

S = jax.ShapeDtypeStruct
F32, BF16, U8 = jnp.float32, jnp.bfloat16, jnp.uint8


def _small_kernel_calls():
    # test_gpu_device.test_compiled_small_kernels_equal_references: 4,096 rows of d = 128,
    # float32; its signs and sketch are numpy draws (their values do not change the program)
    signs = np.where(np.random.default_rng(0).random(128) < 0.5, -1.0, 1.0)
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    sketch = np.random.default_rng(0).normal(size=(128, 128)).astype(np.float32)
    x = S((4096, 128), F32)
    bits, norms = jax.eval_shape(lambda x: qjl_sketch(x, sketch, impl="reference"), x)
    keys = S((8, 512, 16), bits.dtype)  # the test reshapes the sketch's (4096, 16) bits
    return {
        "rotate (4096, 128) f32": (lambda b, x: rotate(x, signs, impl=b, interpret=False), (x,)),
        "rotate inverse (4096, 128) f32": (lambda b, x: rotate(x, signs, inverse=True, impl=b, interpret=False),
                                           (x,)),
        "encode 4 bits (4096, 128) f32": (lambda b, y: encode_packed(y, cb, impl=b, interpret=False), (x,)),
        "decode 4 bits (4096, 4, 16)": (lambda b, p: decode_packed(p, cb, impl=b, interpret=False),
                                        (S((4096, 4, 16), U8),)),
        "qjl_sketch (4096, 128) f32, m = 128": (lambda b, x: qjl_sketch(x, sketch, impl=b, interpret=False), (x,)),
        "qjl_scores (8, 4, 128) f32, 512 keys": (
            lambda b, q, k, n: qjl_scores(q, k, n, sketch, impl=b, interpret=False),
            (S((8, 4, 128), F32), keys, S((8, 512), norms.dtype))),
    }


# (scheme, bits, seed, KV heads, tokens, K/V/q dtype, block_tokens, who runs it)
_CACHE_CALLS = [
    ("KQV", 4, 0, 8, 32768, BF16, 64, "device test and bench row"),
    ("QKQV", 3, 0, 8, 32768, BF16, 64, "device test"),
    ("KQV", 4, 0, 8, 131072, BF16, 64, "bench row"),
    ("KQV", 4, 1, 2, 300, F32, 64, "bench check"),
    ("QKQV", 3, 1, 2, 300, F32, 64, "bench check"),
]


def _tag(name, bits, H, n, dtype, who):
    return f"{name}@{bits} {H} x {n} {jnp.dtype(dtype).name} ({who})"


def _cache_calls():
    # test_gpu_device.test_compiled_decode_attention_at_32k_tokens (bf16 K, V, q; 32 query
    # heads), bench.run's rows (the same, jitted as `lambda q, c: decode_attention(...)`) and
    # bench.correctness_check (float32, 2 KV heads x 300 tokens, 8 query heads)
    calls = {}
    for name, bits, seed, H, n, dtype, T, who in _CACHE_CALLS:
        spec, params = make_cache_spec(name, bits, 128, seed=seed)
        kv = S((H, n, 128), dtype)
        cache = jax.eval_shape(lambda K, V, spec=spec, params=params: quantize_kv(K, V, spec, params,
                                                                                  impl="reference"), kv, kv)
        tag = _tag(name, bits, H, n, dtype, who)
        calls[f"quantize_kv {tag}"] = (
            lambda b, K, V, spec=spec, params=params: quantize_kv(K, V, spec, params, impl=b, interpret=False),
            (kv, kv))
        calls[f"decode_attention {tag}"] = (
            lambda b, q, c, spec=spec, params=params, T=T: decode_attention(q, c, spec, params, impl=b,
                                                                          interpret=False, block_tokens=T),
            (S((4 * H, 128), dtype), cache))
    return calls


def runbook_calls() -> dict[str, tuple]:
    """``{label: (fn, args)}``: ``fn(backend, *args)`` is one call of the runbook's device
    steps through that Pallas backend (``"mosaic"`` or ``"triton"``), compiled."""
    return {**_small_kernel_calls(), **_cache_calls()}


SMALL_LABELS = ["rotate (4096, 128) f32", "rotate inverse (4096, 128) f32", "encode 4 bits (4096, 128) f32",
                "decode 4 bits (4096, 4, 16)", "qjl_sketch (4096, 128) f32, m = 128",
                "qjl_scores (8, 4, 128) f32, 512 keys"]
# runbook_calls()'s keys, in order, without building anything (for pytest's parametrize)
LABELS = SMALL_LABELS + [f"{op} {_tag(name, bits, H, n, dtype, who)}" for name, bits, _, H, n, dtype, _, who
                         in _CACHE_CALLS for op in ("quantize_kv", "decode_attention")]
