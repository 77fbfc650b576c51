"""Off a GPU, the tests' jax programs compile without XLA's optimisations (tests/gpu's
conftest for its tests, tests/test_docstrings.py for kvstats_gpu's examples)."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def cpu_compiles_unoptimized():
    """Off a GPU: XLA compiles with ``jax_disable_most_optimizations`` (LLVM at -O0, no
    expensive passes) and the previous setting is restored on exit. The CPU tests spend
    most of their time compiling the Pallas interpreter's programs (a kernel body unrolled
    over query heads and coordinate classes: ~10 s each at -O2, ~4 s at -O0) that then run
    once on small inputs; the same operations are computed, so every comparison is the
    same. On a GPU nothing changes (the compiled kernels are what the gpu tests check)."""
    import jax

    if jax.default_backend() == "gpu":
        yield
        return
    before = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
