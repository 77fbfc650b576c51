"""The CRC-32 verdict cache of mapped capture reads is keyed on the open file (referee RE4 F1),
and ``verify`` takes numpy booleans (RE4 F6).

Reference for "corrupted": zipfile's own check, which an unmapped read (np.load) runs and
which fails with "Bad CRC-32 for file 'K.npy'"; a fresh process refuses the same file.
"""

import os
import shutil
import time
import zipfile

import numpy as np
import pytest

from kvstats.data import capture_format
from kvstats.data.capture_format import read_capture, write_capture
from kvstats.data.real import load_trials


def _capture(path):
    rng = np.random.default_rng(1)
    K = rng.standard_normal((2, 2, 1, 4096, 32)).astype(np.float32)
    q = rng.standard_normal((2, 2, 3, 4096, 32)).astype(np.float32)
    write_capture(path, K, K, q, {"model": "toy"})
    return K


def _damaged_copy(src, dst):
    """``dst``: ``src`` with four bytes near the end of K's data set to float32 1e30, and
    ``src``'s size, modification time and zip directory (only the data bytes differ)."""
    shutil.copy2(src, dst)
    with zipfile.ZipFile(dst) as zf:
        info = zf.getinfo("K.npy")
    end = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size
    st = os.stat(src)
    with open(dst, "r+b") as fh:
        fh.seek(end - 8)
        fh.write(np.float32(1e30).tobytes())
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_damaged_copy_put_over_the_file_in_place_is_refused(tmp_path):
    # RE4's reproducer: cp -p / shutil.copy2 onto the path keeps its inode, and copies the
    # size and mtime of a damaged copy of the same capture: only the ctime moves
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    _capture(a)
    read_capture(a, mapped=True)                 # verified: the verdict is cached
    _damaged_copy(a, b)
    # file times come from a coarse clock (a few ms): let the overwrite's ctime differ
    time.sleep(0.05)
    before = os.stat(a)
    shutil.copy2(b, a)
    after = os.stat(a)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mtime_ns)
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        read_capture(a)                          # the reference: zipfile's check
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        read_capture(a, mapped=True)
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        load_trials(a, layer=0)


def test_verdict_and_maps_belong_to_the_opened_file(tmp_path, monkeypatch):
    # a damaged file renamed over the path after np.load opened the intact one: the read
    # checks and maps the opened file (intact, returned as written), and the verdict is not
    # recorded against the file now at the path, which the next read refuses
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    K = _capture(a)
    _damaged_copy(a, b)
    real = capture_format._map_member
    swapped = []

    def swap_then_map(zf, array, *rest):
        if not swapped:
            os.replace(b, a)
            swapped.append(True)
        return real(zf, array, *rest)

    monkeypatch.setattr(capture_format, "_map_member", swap_then_map)
    got = read_capture(a, mapped=True)[0]
    assert swapped
    np.testing.assert_array_equal(np.asarray(got), K)
    monkeypatch.setattr(capture_format, "_map_member", real)
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        read_capture(a, mapped=True)


@pytest.mark.parametrize("flag", [np.bool_(True), np.bool_(False)])
def test_verify_takes_numpy_booleans(tmp_path, flag):
    p = tmp_path / "cap.npz"
    K = _capture(p)
    np.testing.assert_array_equal(np.asarray(read_capture(p, mapped=True, verify=flag)[0]), K)
    np.testing.assert_array_equal(load_trials(p, layer=0, verify=flag).K.reshape(2, 4096, 32),
                                  K[:, 0, 0])


@pytest.mark.parametrize("flag", ["yes", 1, None, np.array([True])])
def test_verify_other_types_are_a_value_error_naming_it(tmp_path, flag):
    p = tmp_path / "cap.npz"
    _capture(p)
    with pytest.raises(ValueError, match=r"verify must be True or False; received"):
        read_capture(p, mapped=True, verify=flag)
