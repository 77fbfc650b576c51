"""Lower every kernel call of the GPU runbook's device steps (tests/gpu/_runbook_calls.py:
their exact shapes and dtypes) for CUDA from the CPU, through both Pallas backends; print
per call and backend the wall time of trace + lowering, the custom calls
of the lowered text and, for Mosaic GPU, the shared memory each launch asks for (the
``smem_bytes`` that Mosaic's lowering checks against the sm_90 limit of 227 KiB). Then the
same for the d = 256 device cases of tests/gpu/test_gpu_device_h4.py (QKQV@3, 2 KV heads,
capacity 4096, bf16): their encode, one append step and decode, and each encode kernel
alone at the shapes the encode gives it (m = 256 sketch rows).

    PYTHONPATH=. python tests/gpu/_lowering_probe.py          (from the repository root)

Not a test (no assertions; pytest does not collect it): docs/gpu.md quotes its output. The
lowering time is the Python half of a kernel's compile on the device, which adds LLVM and
ptxas. Off a GPU it lowers for an abstract "NVIDIA H200" (tests/gpu/conftest.py).
"""

import os
import re
import sys
import time
import warnings

# tests/gpu (its conftest's CUDA lowering) first, then tests/ (the conftest's _jax_compile): pytest
# puts both on the path, a script run from the repository root finds neither
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]
warnings.simplefilter("ignore", DeprecationWarning)  # Triton's deprecation, at every lowering

import jax  # noqa: E402
import jax.experimental.mosaic.gpu.core as mosaic_core  # noqa: E402

import jax.numpy as jnp  # noqa: E402
from _runbook_calls import runbook_calls  # noqa: E402
from conftest import _lower_cuda  # noqa: E402

from kvstats_gpu.bridge import make_cache_spec  # noqa: E402
from kvstats_gpu.cache import append_kv, quantize_kv  # noqa: E402
from kvstats_gpu.codebook import decode_packed, encode_packed  # noqa: E402
from kvstats_gpu.decode import decode_attention  # noqa: E402
from kvstats_gpu.qjl import qjl_sketch  # noqa: E402
from kvstats_gpu.rotation import rotate  # noqa: E402

_smem = []
_size = mosaic_core._smem_tree_size


def _recording(tree):
    n = _size(tree)
    _smem.append(n)
    return n


mosaic_core._smem_tree_size = _recording  # every Mosaic launch's SMEM passes through it


def probe(label, fn, *args):
    for backend in ("mosaic", "triton"):
        _smem.clear()
        t0 = time.perf_counter()
        try:
            text = _lower_cuda(lambda *a: fn(backend, *a), *args)
            result = "ok " + ",".join(sorted(set(re.findall(r"custom_call @([\w$.]+)", text))))
        except Exception as exc:  # report and go on: one line per kernel and backend
            result = f"FAILED {type(exc).__name__}: {str(exc)[:300]}"
        smem = ", ".join(f"{n / 1024:.1f}" for n in _smem) or "-"
        print(f"{label:70s} {backend:7s} {time.perf_counter() - t0:6.1f} s  SMEM KiB [{smem}]  {result}", flush=True)


def d256_calls():
    """``{label: (fn, args)}`` as :func:`runbook_calls`: test_gpu_device_h4's d = 256 cases."""
    S, H, C, d = jax.ShapeDtypeStruct, 2, 4096, 256
    spec, params = make_cache_spec("QKQV", 3, d, seed=0)
    kv = S((H, C, d), jnp.bfloat16)
    cache = jax.eval_shape(lambda K, V: quantize_kv(K, V, spec, params, impl="reference"), kv, kv)
    cb, x = spec.k_codebook, S((H, C, d), jnp.float32)
    planes = jax.eval_shape(lambda y: encode_packed(y, cb, impl="reference"), x)
    tag = f"QKQV@3 d = 256 ({H}, {C}, {d})"
    return {
        f"quantize_kv {tag} bf16": (lambda b, K, V: quantize_kv(K, V, spec, params, impl=b, interpret=False),
                                    (kv, kv)),
        f"append_kv {tag}, one token": (
            lambda b, c, k, v: append_kv(c, k, v, spec, params, impl=b, interpret=False),
            (cache, S((H, 1, d), jnp.bfloat16), S((H, 1, d), jnp.bfloat16))),
        f"decode_attention {tag}, 8 query heads": (
            lambda b, q, c: decode_attention(q, c, spec, params, impl=b, interpret=False, block_tokens=64),
            (S((4 * H, d), jnp.bfloat16), cache)),
        f"rotate {x.shape} f32": (lambda b, x: rotate(x, params.k_signs, impl=b, interpret=False), (x,)),
        f"encode {cb.bits} bits {x.shape} f32": (lambda b, y: encode_packed(y, cb, impl=b, interpret=False), (x,)),
        f"decode {cb.bits} bits {planes.shape}": (lambda b, p: decode_packed(p, cb, impl=b, interpret=False),
                                                  (planes,)),
        f"qjl_sketch {x.shape} f32, m = {params.k_sketch.shape[0]}": (
            lambda b, x: qjl_sketch(x, params.k_sketch, impl=b, interpret=False), (x,)),
    }


def main():
    print(f"jax {jax.__version__}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    # every call of the runbook's device steps (tests/gpu/test_gpu_device.py, kvstats_gpu.bench)
    for label, (fn, args) in runbook_calls().items():
        probe(label, fn, *args)
    for label, (fn, args) in d256_calls().items():  # test_gpu_device_h4's d = 256 cases
        probe(label, fn, *args)


if __name__ == "__main__":
    main()
