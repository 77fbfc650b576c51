"""Fixtures of the analysis tests."""

import pytest

from _sweep_frames import make_frame


@pytest.fixture
def frame_factory():
    return make_frame
