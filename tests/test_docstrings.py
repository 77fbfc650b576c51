"""Every docstring example in the packages runs and prints what it says."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import pkgutil

import pytest

import kvstats
import kvstats_gpu


def _modules():
    for package in (kvstats, kvstats_gpu):
        yield package.__name__
        yield from (m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."))


@contextlib.contextmanager
def _cpu_compiles_unoptimized(name):
    """kvstats_gpu's examples off a GPU: XLA compiles with ``jax_disable_most_optimizations``,
    as tests/gpu/conftest.py does for the same reason (the Pallas interpreter's programs
    take longer to optimize than to run; the same operations are computed)."""
    import jax

    if not name.startswith("kvstats_gpu") or jax.default_backend() == "gpu":
        yield
        return
    before = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


@pytest.mark.parametrize("name", sorted(set(_modules())))
def test_docstring_examples(name):
    if name.endswith("__main__") or name == "kvstats_gpu.bench":
        pytest.skip("command-line entry point")
    module = importlib.import_module(name)
    with _cpu_compiles_unoptimized(name):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
