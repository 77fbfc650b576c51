"""Tests of kvstats_gpu. CPU tests run the Pallas kernels in interpret mode and lower them
for CUDA (lowering needs no GPU); tests marked ``gpu`` need a real GPU and are skipped
without one."""

import pytest

jax = pytest.importorskip("jax")


def pytest_collection_modifyitems(config, items):
    on_gpu = jax.default_backend() == "gpu"
    skip = pytest.mark.skip(reason="needs a GPU (jax.default_backend() != 'gpu')")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not on_gpu:
            item.add_marker(skip)


def _lower_cuda(fn, *args):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.fixture
def lower_cuda():
    """Lower ``fn(*args)`` for CUDA from the CPU; returns the StableHLO text (raises if a kernel can't lower)."""
    return _lower_cuda
