"""A bool scalar given to the packers is a ValueError naming the argument (it was an
IndexError: the bool view returned before the dimension check)."""

from __future__ import annotations

import numpy as np
import pytest

from kvstats.quant.packing import pack_bits, pack_codes


def test_a_bool_scalar_is_a_value_error_naming_the_argument():
    with pytest.raises(ValueError, match="codes must have at least 1 dimension"):
        pack_codes(np.True_, 3)
    with pytest.raises(ValueError, match="bits must have at least 1 dimension"):
        pack_bits(np.False_)
    # bool arrays are still codes 0/1
    assert np.array_equal(pack_codes(np.array([True, False, True]), 3),
                          pack_codes(np.array([1, 0, 1], np.uint8), 3))
