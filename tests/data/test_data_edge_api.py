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


def _arrays():
    rng = np.random.default_rng(2)
    K = rng.standard_normal((2, 3, 2, 5, 4)).astype(np.float32)
    return K, K + 1, rng.standard_normal((2, 3, 4, 5, 4)).astype(np.float32)


def test_read_capture_names_a_file_numpy_cannot_read(tmp_path):
    K, V, q = _arrays()
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, K=K, V=V, q=q, meta=np.array([{"model": "toy"}], dtype=object))
    for path in (junk, pickled):   # numpy's allow_pickle messages, naming nothing
        with pytest.raises(ValueError, match=rf"path must be a capture \.npz .*{path.name}' could "
                                             "not be read"):
            load_trials(path)
    with pytest.raises(ValueError, match=r"capture \.npz .*could not be read"):
        read_capture(junk)


@pytest.mark.parametrize("what,args,error,match", [
    ("V of other layers", lambda K, V, q: (K, V[:, :2], q, {}), ValueError,
     r"capture K and V must both have shape .* the capture being written holds K \(2, 3, 2, 5, 4\), "
     r"V \(2, 2, 2, 5, 4\)"),
    ("q heads not a multiple", lambda K, V, q: (K, V, q[:, :, :3], {}), ValueError,
     r"capture q must have shape .* multiple of n_kv_heads=2"),
    ("meta a list", lambda K, V, q: (K, V, q, [1]), TypeError, r"meta must be a dict .* received \[1\]"),
    ("meta not JSON", lambda K, V, q: (K, V, q, {"n": np.int64(1)}), TypeError,
     r"meta must hold only JSON values .* int64 is not JSON serializable"),
])
def test_write_capture_refuses_what_its_reader_refuses_and_writes_nothing(tmp_path, what, args, error,
                                                                            match):
    # the first two were written, and load_trials then refused the file it had written
    path = tmp_path / "c.npz"
    with pytest.raises(error, match=match):
        write_capture(path, *args(*_arrays()))
    assert not path.exists()


def test_load_trials_reads_a_0d_array_as_its_int_and_names_other_arrays(tmp_path):
    K, V, q = _arrays()
    path = tmp_path / "c.npz"
    write_capture(path, K, V, q, {"model": "toy"})
    by_int = load_trials(path, layer=2, head=1)
    by_array = load_trials(path, layer=np.array(2), head=np.array(1, np.uint8))  # "iteration over a 0-d array"
    for name in "KVq":
        np.testing.assert_array_equal(getattr(by_array, name), getattr(by_int, name))
    assert by_array.meta["layer"] == by_int.meta["layer"] == [2, 2]
    with pytest.raises(TypeError, match=r"layer must be None, an int or a sequence of ints in \[0, 2\]; "
                                        r"received array of shape \(1, 1\)"):
        load_trials(path, layer=np.array([[2]]))    # was told a row "must be an integer"
    with pytest.raises(FileNotFoundError, match=r"capture file .* is a directory"):
        load_trials(tmp_path)                       # was "does not exist"


@pytest.mark.parametrize("idx,error", [(slice(0, 3, 0), ValueError), (slice(0.5, 2), TypeError),
                                       (slice("a", None), TypeError)])
def test_subset_names_a_bad_slice(idx, error):
    t = sample("gaussian", 5, 4, 2, seed=0)
    with pytest.raises(error, match=r"idx as a slice must have integer .* received slice\("):
        t.subset(idx)            # was Python's 'slice step cannot be zero' / numpy's TypeError


@pytest.mark.parametrize("idx", [slice(1, None, 2), slice(None, None, -1), slice(-2, None),
                                 slice(np.int64(1), np.int8(4))])
def test_subset_by_a_slice_is_numpys_slice(idx):
    t = sample("gaussian", 5, 4, 2, seed=0)
    s = t.subset(idx)
    for name in "KVq":
        np.testing.assert_array_equal(getattr(s, name), getattr(t, name)[idx])


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
