"""Lower every kernel at the GPU runbook's shapes for CUDA from the CPU, through both Pallas
backends; print per kernel and backend the wall time of trace + lowering, the custom calls
of the lowered text and, for Mosaic GPU, the shared memory each launch asks for (the
``smem_bytes`` that Mosaic's lowering checks against the sm_90 limit of 227 KiB).

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
import numpy as np  # noqa: E402

import kvstats  # noqa: E402
from conftest import _lower_cuda  # noqa: E402
from kvstats_gpu.bridge import make_cache_spec  # noqa: E402
from kvstats_gpu.cache import quantize_kv  # noqa: E402
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed  # noqa: E402
from kvstats_gpu.decode import decode_attention  # noqa: E402
from kvstats_gpu.qjl import qjl_scores, qjl_sketch  # noqa: E402
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
        print(f"{label:40s} {backend:7s} {time.perf_counter() - t0:6.1f} s  SMEM KiB [{smem}]  {result}", flush=True)


def main():
    print(f"jax {jax.__version__}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    x = jnp.zeros((4096, 128))
    s = jnp.ones(128)
    # tests/gpu/test_gpu_device.py: the small kernels at 4,096 rows
    probe("rotate (4096, 128)", lambda b, x: rotate(x, s, impl=b, interpret=False), x)
    probe("rotate inverse (4096, 128)", lambda b, x: rotate(x, s, inverse=True, impl=b, interpret=False), x)
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    probe("encode 4 bits (4096, 128)", lambda b, x: encode_packed(x, cb, impl=b, interpret=False), x)
    probe("decode 4 bits (4096, 4, 16)", lambda b, p: decode_packed(p, cb, impl=b, interpret=False),
          jnp.zeros((4096, 4, 16), jnp.uint8))
    S = jnp.asarray(np.random.default_rng(0).normal(size=(128, 128)), jnp.float32)
    probe("qjl_sketch (4096, 128), m = 128", lambda b, x: qjl_sketch(x, S, impl=b, interpret=False), x)
    probe("qjl_scores (8, 4, 128), 512 keys", lambda b, q, k, n: qjl_scores(q, k, n, S, impl=b, interpret=False),
          jnp.zeros((8, 4, 128)), jnp.zeros((8, 512, 16), jnp.uint8), jnp.ones((8, 512)))
    # the device tests' and the bench's caches: quantize_kv and one decode step
    for name, bits, n in (("KQV", 4, 32768), ("QKQV", 3, 32768), ("KQV", 4, 131072), ("KQV", 4, 300),
                          ("QKQV", 3, 300)):
        spec, params = make_cache_spec(name, bits, 128, seed=0)
        H = 8 if n > 1000 else 2  # the bench's correctness check: 2 heads x 300 tokens
        K = jnp.zeros((H, n, 128), jnp.bfloat16)
        probe(f"quantize_kv {name}@{bits} {H} x {n}",
              lambda b, K: quantize_kv(K, K, spec, params, impl=b, interpret=False), K)
        cache = quantize_kv(K[:, :8], K[:, :8], spec, params, impl="reference", capacity=n)
        probe(f"decode_attention {name}@{bits} {H} x {n}",
              lambda b, q, c: decode_attention(q, c, spec, params, impl=b, interpret=False),
              jnp.zeros((4 * H, 128), jnp.bfloat16), cache)


if __name__ == "__main__":
    main()
