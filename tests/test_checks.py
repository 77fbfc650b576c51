"""The shared input checks (kvstats._checks): the exception type says what was wrong."""
import math

import numpy as np
import pytest

from kvstats._checks import check_int, check_real
from kvstats.quant.fp8 import FP8Coder


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("inf")])
def test_a_non_finite_real_is_a_value_error_naming_the_argument(bad):
    with pytest.raises(ValueError, match=r"^alpha must be a finite real number; received"):
        check_real(bad, "alpha")


@pytest.mark.parametrize("bad", ["0.5", None, True, [0.5]])
def test_a_value_that_is_not_a_real_number_is_a_type_error(bad):
    with pytest.raises(TypeError, match=r"^alpha must be a finite real number; received"):
        check_real(bad, "alpha")


def test_a_public_entry_point_refuses_nan_with_a_value_error():
    # reported by a review: FP8Coder(scale=nan) raised TypeError although NaN is a float
    with pytest.raises(ValueError, match="scale"):
        FP8Coder("fp8_e4m3", 64, scale=float("nan"))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_narrow_ml_dtypes_floats_are_inputs_like_float16(dtype):
    # a review found bfloat16 keys refused ("must be a real numeric array") though caches hold them
    import ml_dtypes

    from kvstats.quant.mse import MSEQuantizer

    x = np.random.default_rng(0).standard_normal((3, 96)).astype(getattr(ml_dtypes, dtype))
    q = MSEQuantizer(96, 3, seed=1)
    np.testing.assert_array_equal(q.roundtrip(x), q.roundtrip(x.astype(np.float64)))


def test_other_void_dtypes_stay_refused():
    from kvstats._checks import as_float_array

    with pytest.raises(TypeError, match="^x must be a real numeric array"):
        as_float_array(np.zeros(3, dtype="V4"), "x")


def test_load_result_says_a_missing_folder_does_not_exist(tmp_path):
    # a review found `kvstats report nodir` told "'nodir' holds no finished sweep" for a typo
    from kvstats.results import load_result

    with pytest.raises(FileNotFoundError, match=r"'.*nodir' does not exist or is not a folder"):
        load_result(tmp_path / "nodir")
    with pytest.raises(FileNotFoundError, match="holds no finished sweep"):
        load_result(tmp_path)                     # a folder, but no sweep in it



@pytest.mark.parametrize("exponent, negative", [(400, False), (5000, False), (5000, True)])
def test_an_integer_too_long_to_print_is_refused_by_name_with_its_size(exponent, negative):
    # Python refuses str() of an int past 4,300 digits: the message gives its size instead
    huge = -10**exponent if negative else 10**exponent
    with pytest.raises(ValueError) as err:
        check_int(huge, "bits", low=1, high=511)
    sign = "a negative" if negative else "an"
    assert str(err.value) == (f"bits must be an integer in [1, 511]; received {sign} integer "
                              f"of about {exponent + 1} digits")


@pytest.mark.parametrize("exponent", [19, 20, 400])
def test_a_python_int_beyond_int64_is_checked_as_a_real_number(exponent):
    # np.isfinite refused ints past int64 with a TypeError naming no argument
    value = 10**exponent
    with pytest.raises(ValueError, match="^confidence must be "):
        check_real(value, "confidence", low=0, high=1, low_open=True, high_open=True)
    if exponent < 300:
        assert check_real(value, "n") == float(value)
