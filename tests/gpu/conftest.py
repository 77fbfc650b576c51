"""Tests of kvstats_gpu. CPU tests run the Pallas kernels in interpret mode and lower them
for CUDA through both Pallas GPU backends, Mosaic GPU and Triton (lowering needs no GPU);
tests marked ``gpu`` need a real GPU and are skipped without one, unless
``KVSTATS_REQUIRE_GPU=1`` (set by experiments/gpu_runbook.sh), which makes a missing GPU a
usage error: on a GPU machine whose CUDA plugin failed to load, jax falls back to the CPU
and every gpu test would otherwise skip and the run pass."""

import contextlib
import os

import pytest

jax = pytest.importorskip("jax")

from _jax_compile import cpu_compiles_unoptimized  # noqa: E402  (tests/, for the doctests too)

# The custom call each backend's kernels lower to (StableHLO text of a CUDA lowering; the
# bare words also occur in source locations, e.g. test names).
LOWERED_AS = {"mosaic": "custom_call @mosaic_gpu", "triton": "custom_call @__gpu$xla.gpu.triton"}


def pytest_collection_modifyitems(config, items):
    on_gpu = jax.default_backend() == "gpu"
    if not on_gpu and os.environ.get("KVSTATS_REQUIRE_GPU") == "1" \
            and any(item.get_closest_marker("gpu") is not None for item in items):
        raise pytest.UsageError(f"KVSTATS_REQUIRE_GPU=1 but jax's default backend is {jax.default_backend()!r} "
                                f"(devices {jax.devices()}): the gpu tests would only skip")
    skip = pytest.mark.skip(reason="needs a GPU (jax.default_backend() != 'gpu')")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not on_gpu:
            item.add_marker(skip)


# The GPU the lowering targets off a GPU: the lent machine's. jax >= 0.11's Triton lowering
# reads the compute capability from the device kind and, without a GPU, raises "No supported
# GPU devices found, please specify an abstract GPU device using AbstractDevice" (0.10.2
# assumed sm_90). Mosaic's lowering does not look at it.
CUDA_TARGET = "NVIDIA H200"


def cuda_target():
    """A context in which a CUDA lowering from the CPU targets :data:`CUDA_TARGET` (an
    abstract mesh of no axes carrying that device kind); nothing on a GPU."""
    if jax.default_backend() == "gpu":
        return contextlib.nullcontext()
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh
    return use_abstract_mesh(AbstractMesh((), (), abstract_device=AbstractDevice(
        device_kind=CUDA_TARGET, num_cores=None, platform="gpu")))


def _lower_cuda(fn, *args):
    with cuda_target():
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.fixture
def lower_cuda():
    """Lower ``fn(*args)`` for CUDA from the CPU; returns the StableHLO text (raises if a kernel can't lower)."""
    return _lower_cuda


@pytest.fixture(autouse=True)
def _unoptimized_cpu_compiles():
    with cpu_compiles_unoptimized():
        yield


@pytest.fixture(params=["mosaic", "triton"])
def backend(request):
    """Each Pallas GPU backend, as an ``impl`` value."""
    return request.param


@pytest.fixture
def lowers_through():
    """``lowers_through(text, backend)``: the lowered text calls that backend's kernels and
    no other backend's."""
    def check(text, backend):
        others = [v for k, v in LOWERED_AS.items() if k != backend]
        return LOWERED_AS[backend] in text and not any(o in text for o in others)
    return check
