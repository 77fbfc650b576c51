"""Fixtures of the report tests."""

import pytest

from _report_frames import make_frame


@pytest.fixture
def frame_factory():
    return make_frame
