"""Every docstring example in the packages runs and prints what it says."""

from __future__ import annotations

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


@pytest.mark.parametrize("name", sorted(set(_modules())))
def test_docstring_examples(name):
    if name.endswith("__main__") or name == "kvstats_gpu.bench":
        pytest.skip("command-line entry point")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
