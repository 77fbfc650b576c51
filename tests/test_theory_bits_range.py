"""The closed-form bounds in 4^-bits take bits up to 511 and name bits beyond.

4^-511 = 2^-1022 is float64's smallest normal number. Before, bits = 10**400 raised
OverflowError ("int too large to convert to float") from 4.0 ** -bits, and 538 to ~1e308
bits returned a silent 0.0.
"""

import math

import pytest

from kvstats.theory import high_rate_distortion, turboquant_mse_bounds, turboquant_prod_bounds

SMALLEST_NORMAL = 2.0 ** -1022          # = 4^-511

CALLS = {
    "turboquant_mse_bounds": (lambda b: turboquant_mse_bounds(b), 1),
    "turboquant_prod_bounds": (lambda b: turboquant_prod_bounds(b, 8), 1),
    "high_rate_distortion": (lambda b: high_rate_distortion(b), 0),
    "high_rate_distortion_beta": (lambda b: high_rate_distortion(b, "beta", 3), 0),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bits", [10 ** 400, 2 ** 1100, 538, 512],
                         ids=["1e400", "2**1100", "538", "512"])
def test_bits_beyond_the_range_is_a_value_error_naming_it(name, bits):
    call, low = CALLS[name]
    # an integer of 80 digits or more is named by its size (check_int)
    received = str(bits) if bits < 10**80 else rf"an integer of about {len(str(bits))} digits"
    with pytest.raises(ValueError, match=rf"^bits must be an integer in \[{low}, 511\]; "
                                         rf"received {received}$"):
        call(bits)


def _values(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_bits_at_the_top_of_the_range_follow_the_formula(name):
    # 4^-511 is normal; a constant below 1 (1/dim, 1/3) takes the value into the
    # subnormals, where ~50 bits are left: hence rel=1e-12, not an ulp
    call, low = CALLS[name]
    for top, first in zip(_values(call(511)), _values(call(low))):
        assert top > 0
        assert top == pytest.approx(first * 4.0 ** -(511 - low), rel=1e-12)


def test_the_mse_bounds_at_511_bits_are_exact():
    lo, hi = turboquant_mse_bounds(511)
    assert lo == SMALLEST_NORMAL
    assert hi == pytest.approx(math.sqrt(3) * math.pi / 2 * SMALLEST_NORMAL, rel=1e-15)


@pytest.mark.parametrize("call,where", [
    (lambda: turboquant_prod_bounds(511, 2 ** 60), "turboquant_prod_bounds at bits=511, dim=1152921504606846976"),
    (lambda: high_rate_distortion(511, "beta", 2 ** 62), "high_rate_distortion at bits=511, dim=4611686018427387904"),
    (lambda: turboquant_prod_bounds(500, 2 ** 60), "turboquant_prod_bounds at bits=500"),
])
def test_a_value_deep_in_the_subnormals_is_a_value_error_not_a_silent_zero(call, where):
    # these were 0.0 (or a subnormal of a few bits) before, returned silently
    with pytest.raises(ValueError, match=rf"^{where}.* below 2\^-1050"):
        call()
    # the edge: 4^-511 / 2^28 = 2^-1050 keeps its 24 bits and is returned exactly
    assert turboquant_prod_bounds(511, 2 ** 28)[0] == 2.0 ** -1050
