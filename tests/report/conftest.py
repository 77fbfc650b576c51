"""Fixtures of the report tests."""

import sys
from pathlib import Path

import pytest

# the synthetic sweep frames are shared with the analysis tests (one definition, there)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))

from _sweep_frames import make_frame  # noqa: E402


@pytest.fixture
def frame_factory():
    return make_frame
