"""The arrays-only fingerprint (referee T8, F2): ``read_header(...).arrays_fingerprint``
hashes K, V and q alone, so of two captures whose content fingerprint differs it says
whether the floats differ or only ``meta``. The content fingerprint (in every sweep cell
key) is unchanged: the formula is checked against a recomputation from the zip directory.
Old captures (no ``format``, no ``env``) still read and have both fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np

from kvstats.data.capture_format import CaptureHeader, read_capture, read_header, write_capture
from kvstats.data.real import load_trials


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((2, 2, 1, 4, 8)).astype(np.float32)
    V = rng.standard_normal((2, 2, 1, 4, 8)).astype(np.float32)
    q = rng.standard_normal((2, 2, 3, 4, 8)).astype(np.float32)
    return K, V, q


def _old_savez(path, K, V, q, meta):
    """A capture as kvstats wrote it before 2026-12-03: no ``format``, no ``env``."""
    np.savez(path, K=K, V=V, q=q, meta=np.array(json.dumps(meta)))
    return path


def test_the_arrays_fingerprint_ignores_meta_and_sees_one_float(tmp_path):
    K, V, q = _arrays()
    write_capture(tmp_path / "a.npz", K, V, q, {"model": "toy", "env": {"cpu": "Intel Xeon"}})
    write_capture(tmp_path / "b.npz", K, V, q, {"model": "toy", "env": {"cpu": "AMD EPYC"}})
    a, b = read_header(tmp_path / "a.npz"), read_header(tmp_path / "b.npz")
    assert a.fingerprint != b.fingerprint                       # the records differ
    assert a.arrays_fingerprint == b.arrays_fingerprint         # the floats do not
    assert len(a.arrays_fingerprint) == 16 and a.arrays_fingerprint != a.fingerprint
    for name in ("K", "V", "q"):                                # one float, one ulp, in each array
        moved = {"K": K.copy(), "V": V.copy(), "q": q.copy()}
        moved[name][1, 1, 0, 3, 7] = np.nextafter(moved[name][1, 1, 0, 3, 7], np.float32(np.inf))
        write_capture(tmp_path / "c.npz", moved["K"], moved["V"], moved["q"],
                      {"model": "toy", "env": {"cpu": "Intel Xeon"}})
        assert read_header(tmp_path / "c.npz").arrays_fingerprint != a.arrays_fingerprint, name


def test_the_arrays_fingerprint_sees_a_reshape(tmp_path):
    # the same bytes in another shape are other arrays (the .npy header is in the CRC)
    K, V, q = _arrays()
    write_capture(tmp_path / "a.npz", K, V, q, {})
    write_capture(tmp_path / "b.npz", K.reshape(2, 2, 1, 8, 4), V.reshape(2, 2, 1, 8, 4),
                  q.reshape(2, 2, 3, 8, 4), {})
    assert read_header(tmp_path / "a.npz").arrays_fingerprint != read_header(tmp_path / "b.npz").arrays_fingerprint


def test_the_content_fingerprint_is_unchanged(tmp_path):
    # cell keys hold it: it stays the SHA-256 of every member's (name, CRC-32, size), meta included
    K, V, q = _arrays()
    path = tmp_path / "a.npz"
    write_capture(path, K, V, q, {"model": "toy"})
    with zipfile.ZipFile(path) as zf:
        rows = sorted((i.filename, i.CRC, i.file_size) for i in zf.infolist())
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=str)
    assert read_header(path).fingerprint == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_an_old_capture_reads_and_has_both_fingerprints(tmp_path):
    K, V, q = _arrays()
    old = _old_savez(tmp_path / "old.npz", K, V, q, {"model": "/root/.cache/kvstats", "post_rope": True})
    write_capture(tmp_path / "new.npz", K, V, q,
                  {"format": 1, "model": "SmolLM2-135M-Instruct", "env": {"cpu": "AMD EPYC", "batch_size": 4}})
    K2, V2, q2, meta = read_capture(old)
    assert "env" not in meta and np.array_equal(K2, K) and np.array_equal(q2, q)
    assert np.array_equal(load_trials(old, layer=1).K, load_trials(tmp_path / "new.npz", layer=1).K)
    h_old, h_new = read_header(old), read_header(tmp_path / "new.npz")
    assert h_old.fingerprint != h_new.fingerprint
    assert h_old.arrays_fingerprint == h_new.arrays_fingerprint


def test_a_header_built_by_hand_needs_no_arrays_fingerprint():
    h = CaptureHeader(n_texts=4, n_layers=30, n_kv_heads=3, n_keys=128, dim=64, n_q_heads=9, fingerprint="0")
    assert h.arrays_fingerprint is None
