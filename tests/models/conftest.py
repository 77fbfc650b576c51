"""One model load per test session (≈20 s on 2 cores), shared by every model test."""

import pytest


@pytest.fixture(scope="session")
def smollm():
    from kvstats.models import load_model

    return load_model()
