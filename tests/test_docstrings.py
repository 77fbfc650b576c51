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


def _cpu_compiles_unoptimized(name):
    """kvstats_gpu's examples off a GPU compile unoptimised, as tests/gpu's tests do (the
    Pallas interpreter's programs take longer to optimize than to run)."""
    if not name.startswith("kvstats_gpu"):
        return contextlib.nullcontext()
    from _jax_compile import cpu_compiles_unoptimized

    return cpu_compiles_unoptimized()


@pytest.mark.parametrize("name", sorted(set(_modules())))
def test_docstring_examples(name):
    if name.endswith("__main__") or name == "kvstats_gpu.bench":
        pytest.skip("command-line entry point")
    module = importlib.import_module(name)
    with _cpu_compiles_unoptimized(name):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
