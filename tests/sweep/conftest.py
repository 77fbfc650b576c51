"""Fixtures of the sweep tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def assert_same_bits(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Equal bit for bit: the same columns, dtypes and values, every float compared as its
    bit pattern (``assert_frame_equal`` alone compares floats to a relative 1e-5, and
    takes -0.0 for 0.0)."""
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for col in a.columns:
        if a[col].dtype.kind == "f":
            bits = f"i{a[col].dtype.itemsize}"
            assert np.array_equal(a[col].to_numpy().view(bits), b[col].to_numpy().view(bits)), col


@pytest.fixture
def same_bits():
    """:func:`assert_same_bits`, the one bit-for-bit frame comparison of these tests."""
    return assert_same_bits
