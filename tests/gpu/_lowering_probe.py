"""Lower every kernel call of the GPU runbook's device steps (tests/gpu/_runbook_calls.py:
their exact shapes and dtypes) for CUDA from the CPU, through both Pallas backends; print
per call and backend the wall time of trace + lowering, the custom calls
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

from _runbook_calls import runbook_calls  # noqa: E402
from conftest import _lower_cuda  # noqa: E402

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


def main():
    print(f"jax {jax.__version__}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    # every call of the runbook's device steps (tests/gpu/test_gpu_device.py, kvstats_gpu.bench)
    for label, (fn, args) in runbook_calls().items():
        probe(label, fn, *args)


if __name__ == "__main__":
    main()
