"""One model load per test session (≈20 s on 2 cores), shared by every model test."""

import pytest


@pytest.fixture(scope="session")
def smollm():
    from kvstats.models import load_model

    return load_model()


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # The model tests run many tiny ops (one-token decode steps); on a loaded 2-core
    # machine, waking a second OpenMP thread per op costs more than the op (measured
    # 30x slower decode steps). Restored after each module so other tests are unaffected.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
