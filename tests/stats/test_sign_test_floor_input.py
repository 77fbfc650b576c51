"""sign_test_floor checks its count (referee F2): a negative count or a bool was read as a
count and gave 1.0; 2.7 or NaN raised math.ldexp's TypeError, which named no argument."""

import numpy as np
import pytest

from kvstats.stats import sign_test_floor


@pytest.mark.parametrize("value, error", [(-3, ValueError), (-1, ValueError), (True, TypeError),
                                          (False, TypeError), (2.7, TypeError),
                                          (float("nan"), TypeError), (3.0, TypeError),
                                          ("3", TypeError), (None, TypeError)])
def test_sign_test_floor_refuses_a_bad_count(value, error):
    with pytest.raises(error, match=r"n_nonzero must be an integer in \[0, inf\]; received"):
        sign_test_floor(value)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_sign_test_floor_keeps_its_values_on_valid_counts(alternative):
    # closed form: 2^-k one-sided, min(1, 2^(1-k)) two-sided; numpy integers are counts too
    for k in [0, 1, 2, 5, 30, 1100]:
        want = min(1.0, 2.0 ** (int(alternative == "two-sided") - k))   # 0.0 at k = 1100
        assert sign_test_floor(k, alternative) == want
        assert sign_test_floor(np.int64(k), alternative) == want
