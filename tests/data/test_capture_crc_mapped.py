"""Memory-mapped capture reads check the zip CRC-32 (referee RW, F5).

load_trials reads a capture through memory maps, so zipfile never read the arrays' bytes
and never compared their CRC-32: a corrupted large capture loaded as finite garbage. The
reference is zipfile's own check: an unmapped read (np.load) of the same file fails with
"Bad CRC-32 for file 'K.npy'". The capture is large enough (K: 2 MiB) that reading its
array header does not read the member to its end (which checks the CRC by accident).
"""

import os
import zipfile

import numpy as np
import pytest

from kvstats.data import capture_format
from kvstats.data.capture_format import read_capture, write_capture
from kvstats.data.real import load_trials


def _capture(path):
    rng = np.random.default_rng(0)
    K = rng.standard_normal((2, 2, 1, 4096, 32)).astype(np.float32)
    q = rng.standard_normal((2, 2, 3, 4096, 32)).astype(np.float32)
    write_capture(path, K, K, q, {"model": "toy"})
    return K


def _corrupt(path, array="K.npy"):
    """Four bytes near the end of ``array``'s data set to float32 1e30 (finite), in place;
    the modification time moves on (as any rewrite's would)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(array)
    end = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(end - 8)
        fh.write(np.float32(1e30).tobytes())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_mapped_read_refuses_a_corrupted_capture(tmp_path):
    p = tmp_path / "cap.npz"
    _capture(p)
    _corrupt(p)
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        read_capture(p)                                   # the reference: zipfile's check
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        load_trials(p)
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'K.npy'"):
        read_capture(p, mapped=True)


@pytest.mark.parametrize("array", ["V.npy", "q.npy"])
def test_every_mapped_array_is_checked(tmp_path, array):
    p = tmp_path / "cap.npz"
    _capture(p)
    _corrupt(p, array)
    with pytest.raises(ValueError, match=f"Bad CRC-32 for file '{array}'"):
        load_trials(p, layer=0, head=0, texts=0)


def test_verify_false_skips_the_check(tmp_path):
    p = tmp_path / "cap.npz"
    _capture(p)
    _corrupt(p)
    assert np.abs(load_trials(p, verify=False).K).max() == pytest.approx(1e30, rel=1e-6)


def test_intact_capture_loads_the_same_and_is_checked_once(tmp_path, monkeypatch):
    p = tmp_path / "cap.npz"
    K = _capture(p)
    read = []
    real_read = zipfile.ZipExtFile.read

    def counting(self, n=-1):
        out = real_read(self, n)
        read.append(len(out))
        return out

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting)
    size = os.path.getsize(p)
    t = load_trials(p)
    first = sum(read)
    assert first >= 0.99 * size                          # every array streamed once
    np.testing.assert_array_equal(t.K.reshape(2, 2, 4096, 32), K[:, :, 0])
    read.clear()
    load_trials(p, layer=1)
    assert sum(read) < 0.01 * size                       # the verdict is cached: the header only
    # the file rewritten in place (a new version): checked again, and refused
    monkeypatch.setattr(zipfile.ZipExtFile, "read", real_read)
    _corrupt(p)
    with pytest.raises(ValueError, match="Bad CRC-32"):
        load_trials(p, layer=1)


def test_bad_verify_argument(tmp_path):
    p = tmp_path / "cap.npz"
    _capture(p)
    with pytest.raises(ValueError, match="verify must be True or False; received"):
        read_capture(p, mapped=True, verify="yes")


def test_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_format, "_VERIFIED", {("x", i): True for i in range(1024)})
    p = tmp_path / "cap.npz"
    _capture(p)
    load_trials(p)
    assert len(capture_format._VERIFIED) == 1
