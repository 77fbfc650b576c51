"""TurboQuant-prod's bound and prediction at a huge ||y|| (referee pass 3): y_norm ** 2 of
a Python float past ~1.3e154 raised a bare OverflowError; it is a ValueError naming
y_norm. Values below that keep their numbers (the formula is unchanged)."""

import pytest

from kvstats.theory import turboquant_prod_bounds, turboquant_prod_distortion


@pytest.mark.parametrize("fn", [turboquant_prod_bounds, turboquant_prod_distortion])
def test_huge_y_norm_is_a_value_error_naming_it(fn):
    with pytest.raises(ValueError, match="y_norm must be below"):
        fn(2, 128, 1e200)


def test_large_but_representable_y_norm_still_scales_as_its_square():
    # ||y||^2 / d 4^-b and sqrt(3) pi^2 times it (Zandieh et al. 2025, Theorems 2-3): exact
    # scaling by y_norm^2 = 2**400 (a power of two) of the y_norm = 1 values
    lo1, hi1 = turboquant_prod_bounds(3, 64)
    lo, hi = turboquant_prod_bounds(3, 64, 2.0**200)
    assert (lo, hi) == (lo1 * 2.0**400, hi1 * 2.0**400)
    assert turboquant_prod_distortion(3, 64, 2.0**200) == turboquant_prod_distortion(3, 64) * 2.0**400
