"""Edge inputs a script feeds the data layer: each gets a right answer or an error naming
the argument (found by the data API referee, 2026-12-02; each test failed before its fix)."""

import json

import numpy as np
import pytest

from kvstats.data import sample
from kvstats.data.capture_format import read_capture, write_capture
from kvstats.data.real import load_trials
from kvstats.data.register import registered_distribution
from kvstats.data.spectrum import measured_spectrum


@pytest.mark.parametrize("dtype", [None, "bfloat16", [1], "float16", "int32"])
def test_sample_refuses_a_dtype_it_cannot_draw_by_name(dtype):
    # None (== dtype('float64') to numpy, so it passed the check) and a list ended in an
    # AttributeError on meta; 'bfloat16' in numpy's "data type not understood"
    with pytest.raises(ValueError, match=r"dtype must be one of \[float32, float64\]; received "):
        sample("gaussian", 1, 2, 2, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", np.float64, np.dtype("float32"), "f8"])
def test_sample_takes_every_spelling_of_its_two_dtypes(dtype):
    assert sample("gaussian", 1, 2, 2, dtype=dtype).dtype == np.dtype(dtype)


def test_sample_refuses_a_size_no_array_can_hold_by_name():
    with pytest.raises(ValueError, match=r"n_trials \* max\(n_keys, n_queries\) \* dim must fit "
                                         r"one array .* received n_trials=4611686018427387904"):
        sample("gaussian", 2**62, 2**62, 2**62)


@pytest.mark.parametrize("bit_generator", [np.random.Philox, np.random.MT19937, np.random.SFC64])
def test_meta_seed_replays_a_generator_on_another_bit_generator(bit_generator):
    # meta["seed"] was the bare SeedSequence, which replays on PCG64: other numbers
    t = sample("heavy_tailed", 3, 8, 4, seed=np.random.Generator(bit_generator(11)))
    assert t.meta["seed"].startswith(f"Generator({bit_generator.__name__}(SeedSequence(")
    names = {n: getattr(np.random, n) for n in ("Generator", "SeedSequence", bit_generator.__name__)}
    again = sample("heavy_tailed", 3, 8, 4, seed=eval(t.meta["seed"], names))
    for name in "KVq":
        np.testing.assert_array_equal(getattr(again, name), getattr(t, name))
    # numpy's default bit generator keeps the record stored results hold: a bare sequence
    assert sample("gaussian", 1, 2, 2, seed=np.random.default_rng(3)).meta["seed"].startswith("SeedSequence(")


def test_measured_spectrum_bits_do_not_depend_on_memory_layout():
    # a Fortran-ordered x gave other last bits (sums round in memory order)
    x = np.random.default_rng(0).standard_normal((3, 50, 6))
    ref = measured_spectrum(x)
    for other in (np.asfortranarray(x), np.swapaxes(np.ascontiguousarray(np.swapaxes(x, 0, 2)), 0, 2)):
        s = measured_spectrum(other)
        np.testing.assert_array_equal(s.eigenvalues, ref.eigenvalues)
        np.testing.assert_array_equal(s.mean_square, ref.mean_square)
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(measured_spectrum(np.asfortranarray(x32)).eigenvalues,
                                  measured_spectrum(x32).eigenvalues)


def test_measured_spectrum_refuses_squares_beyond_float64_and_scales_below():
    x = np.random.default_rng(1).standard_normal((40, 5))
    with pytest.raises(ValueError, match=r"x must have squares within the float64 range .* rescale x"):
        measured_spectrum(x * 1e200)          # was mean_square inf (or NaN eigenvalues), silently
    big, ref = measured_spectrum(x * 1e150), measured_spectrum(x)   # the covariance scales by c²
    np.testing.assert_allclose(big.eigenvalues, ref.eigenvalues * 1e300, rtol=1e-12)
    np.testing.assert_allclose(big.mean_square, ref.mean_square * 1e300, rtol=1e-12)


def test_a_registered_distribution_takes_numpy_scalar_defaults_as_python_values():
    # np.int64 was refused ("must map str to a number") while np.float64 was kept as numpy's
    def shifted(n, N, d, rng, p):
        return p["shift"] + p["width"] * rng.standard_normal((n, N, d))

    with registered_distribution("np_defaults", shifted, {"shift": np.int64(2), "width": np.float32(0.5),
                                                          "flag": np.bool_(True)}) as ddef:
        assert ddef.defaults == {"shift": 2, "width": 0.5, "flag": True}
        assert [type(v) for v in ddef.defaults.values()] == [int, float, bool]
        t = sample("np_defaults", 2, 8, 4, seed=0)
        json.dumps(t.meta["params"])            # what a sweep's manifest stores
        direct = 2 + 0.5 * sample("gaussian", 2, 8, 4, seed=0).K
        np.testing.assert_array_equal(t.K, direct)   # the keys' stream is gaussian's keys' stream
