"""Capture files (referee R2, findings 3, 8, 9): unreadable files are the module's
ValueError, the format carries a version readers check, ``post_rope`` is read, and the
arrays' dtypes are the format's (float16 trials are float32, not float64).

Reference values: the arrays written (equality), numpy's own float16 -> float32 widening
(exact for every float16 value).
"""

import json
import zipfile

import numpy as np
import pytest

from kvstats.data.capture_format import read_capture, read_header, read_layers, write_capture
from kvstats.data.real import load_capture, load_trials

FORMAT = "format"   # the meta key (capture_format.FORMAT), spelt out: the file's contract

READERS = {"read_capture": read_capture, "read_capture(mapped)": lambda p: read_capture(p, mapped=True),
           "load_capture": load_capture, "load_trials": load_trials}


def _arrays(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((2, 3, 1, 8, 4)).astype(dtype)
    q = rng.standard_normal((2, 3, 2, 8, 4)).astype(dtype)
    return K, K + 1, q


def _savez(path, meta, dtype=np.float32):
    K, V, q = _arrays(dtype)
    np.savez(path, K=K, V=V, q=q, meta=np.array(json.dumps(meta)))
    return path


# ------------------------------------------------------------ finding 3: unreadable files
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ["plain .npy", "empty file", "two bytes"])
def test_a_file_that_is_no_npz_is_the_modules_value_error(tmp_path, reader, kind):
    path = tmp_path / ("x.npy" if kind == "plain .npy" else "x.npz")
    if kind == "plain .npy":
        np.save(path, np.zeros((2, 3), np.float32))    # was TypeError (no context manager)
    else:
        path.write_bytes(b"" if kind == "empty file" else b"PK")   # was EOFError for the empty one
    with pytest.raises(ValueError, match=r"must be a capture \.npz written by kvstats\.models\.capture; "
                                         r".*could not be read"):
        READERS[reader](path)


# ------------------------------------------------------------ finding 8: version and post_rope
def test_files_without_a_version_are_version_1_and_load(tmp_path):
    old = _savez(tmp_path / "old.npz", {"model": "toy", "post_rope": True})   # as every file so far
    K, V, q, meta = read_capture(old)
    from kvstats.data.capture_format import FORMAT as KEY, FORMAT_VERSION

    assert FORMAT not in meta and (KEY, FORMAT_VERSION) == (FORMAT, 1)
    np.testing.assert_array_equal(K, _arrays()[0])
    assert read_layers(old) == (0, 1, 2) and load_trials(old).n_trials == 6
    now = _savez(tmp_path / "now.npz", {"model": "toy", FORMAT: 1})
    assert read_capture(now)[3][FORMAT] == 1


@pytest.mark.parametrize("version", [2, 0, "1", True, None])
def test_another_format_version_is_refused_by_every_reader_and_the_writer(tmp_path, version):
    path = _savez(tmp_path / "v.npz", {"model": "toy", FORMAT: version})
    for read in (*READERS.values(), read_layers):   # read_layers: the sweep's reader of meta
        with pytest.raises(ValueError, match=rf"meta 'format' must be 1 .*records {version!r}"):
            read(path)
    K, V, q = _arrays()
    with pytest.raises(ValueError, match="meta 'format' must be 1"):
        write_capture(tmp_path / "w.npz", K, V, q, {FORMAT: version})
    assert not (tmp_path / "w.npz").exists()


@pytest.mark.parametrize("post_rope", [False, None, "yes", 0])
def test_a_capture_not_after_rope_is_refused(tmp_path, post_rope):
    path = _savez(tmp_path / "pre.npz", {"post_rope": post_rope})
    for read in (*READERS.values(), read_layers):
        with pytest.raises(ValueError, match=r"'post_rope' must be true .*after RoPE"):
            read(path)
    from kvstats.data.capture_format import check_meta

    with pytest.raises(ValueError, match="'post_rope' must be true"):
        check_meta({"post_rope": post_rope}, "meta", "'c.npz'")


def test_the_version_does_not_touch_a_fingerprint(tmp_path):
    # the fingerprint is of the file's stored content: an existing capture keeps its own
    a = _savez(tmp_path / "a.npz", {"model": "toy"})
    b = _savez(tmp_path / "b.npz", {"model": "toy"})
    assert read_header(a).fingerprint == read_header(b).fingerprint
    with zipfile.ZipFile(a) as zf:
        assert sorted(zf.namelist()) == ["K.npy", "V.npy", "meta.npy", "q.npy"]


# ------------------------------------------------------------ finding 9: dtypes
def test_float16_capture_gives_float32_trials_exactly(tmp_path):
    path = _savez(tmp_path / "h.npz", {}, np.float16)
    t = load_trials(path)
    assert t.K.dtype == t.V.dtype == t.q.dtype == np.float32      # was float64
    K16 = _arrays(np.float16)[0]
    np.testing.assert_array_equal(t.K, K16.astype(np.float32).reshape(6, 8, 4))
    assert load_trials(_savez(tmp_path / "s.npz", {}, np.float32)).K.dtype == np.float32
    assert load_trials(_savez(tmp_path / "d.npz", {}, np.float64)).K.dtype == np.float64
    big = tmp_path / "be.npz"      # a big-endian float16 file: the same trials
    K, V, q = _arrays(np.float16)
    np.savez(big, K=K.astype(">f2"), V=V.astype(">f2"), q=q.astype(">f2"), meta=np.array("{}"))
    np.testing.assert_array_equal(load_trials(big).K, t.K)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.complex64, np.bool_])
def test_other_dtypes_are_refused_on_write_and_read(tmp_path, dtype):
    K, V, q = (a.astype(dtype) for a in _arrays())
    with pytest.raises(ValueError, match=r"capture arrays must be float16, float32 or float64; .*"
                                         + np.dtype(dtype).name):
        write_capture(tmp_path / "w.npz", K, V, q, {})
    np.savez(tmp_path / "i.npz", K=K, V=V, q=q, meta=np.array("{}"))
    for read in READERS.values():     # load_trials made int8 trials float64 before
        with pytest.raises(ValueError, match="capture arrays must be float16, float32 or float64"):
            read(tmp_path / "i.npz")
