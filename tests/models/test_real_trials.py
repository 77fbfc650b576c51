"""kvstats.data.real.load_trials on synthetic capture files (no model needed)."""

import json

import numpy as np
import pytest

from kvstats.data.real import load_trials


@pytest.fixture
def capture_file(tmp_path):
    rng = np.random.default_rng(0)
    # (n_texts, n_layers, n_kv_heads, N, d) with G = 3 query heads per KV head.
    K = rng.standard_normal((2, 4, 3, 16, 8)).astype(np.float32)
    V = rng.standard_normal((2, 4, 3, 16, 8)).astype(np.float32)
    q = rng.standard_normal((2, 4, 9, 16, 8)).astype(np.float32)
    path = tmp_path / "cap.npz"
    np.savez(path, K=K, V=V, q=q, meta=json.dumps({"model": "toy", "token_ids": [[1], [2]]}))
    return path, K, V, q


def test_layout_and_gqa_grouping(capture_file):
    path, K, V, q = capture_file
    t = load_trials(path)
    assert t.K.shape == (2 * 4 * 3, 16, 8) and t.q.shape == (24, 3, 8)
    assert t.dtype == np.float32
    # Trial index is C-order over (text, layer, kv head); query j of a trial is query
    # head 3*h + j at the last position (the only one that sees all N keys).
    for text, layer, head in [(0, 0, 0), (1, 2, 1), (1, 3, 2)]:
        i = (text * 4 + layer) * 3 + head
        np.testing.assert_array_equal(t.K[i], K[text, layer, head])
        np.testing.assert_array_equal(t.V[i], V[text, layer, head])
        np.testing.assert_array_equal(t.q[i], q[text, layer, 3 * head:3 * head + 3, -1])
        assert (t.meta["text"][i], t.meta["layer"][i], t.meta["head"][i]) == (text, layer, head)
    assert "token_ids" not in t.meta and t.meta["query_positions"] == "last"


def test_selection(capture_file):
    path, K, _, q = capture_file
    t = load_trials(path, layer=[1, 3], head=2)
    assert t.n_trials == 2 * 2 * 1
    np.testing.assert_array_equal(t.K[1], K[0, 3, 2])
    np.testing.assert_array_equal(t.q[1], q[0, 3, 6:9, -1])
    assert t.meta["layer"] == [1, 3, 1, 3] and t.meta["head"] == [2, 2, 2, 2]


def test_bad_input(capture_file, tmp_path):
    path = capture_file[0]
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 3\]; received 4"):
        load_trials(path, layer=4)
    with pytest.raises(TypeError, match="head must be None, an int or a sequence"):
        load_trials(path, head=1.5)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_trials(tmp_path / "nope.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, K=np.zeros((1, 1, 2, 4, 8)), V=np.zeros((1, 1, 2, 4, 8)),
             q=np.zeros((1, 1, 3, 4, 8)), meta="{}")
    with pytest.raises(ValueError, match="multiple of n_kv_heads=2"):
        load_trials(bad)
    bad2 = tmp_path / "bad2.npz"
    np.savez(bad2, K=np.zeros((1, 1, 2, 4, 8)), meta="{}")
    with pytest.raises(ValueError, match=r"lacks \['V', 'q'\]"):
        load_trials(bad2)


# ---------------------------------------------------------------- the capture file format
def test_format_round_trip_and_header(capture_file, tmp_path):
    from kvstats.data.capture_format import read_capture, read_header, write_capture

    path, K, V, q = capture_file
    meta = {"model": "toy", "token_ids": [[1], [2]]}
    copy = tmp_path / "sub" / "copy.npz"
    copy.parent.mkdir()
    write_capture(copy, K, V, q, meta)
    K2, V2, q2, meta2 = read_capture(copy)
    for a, b in ((K, K2), (V, V2), (q, q2)):
        np.testing.assert_array_equal(a, b)
    assert meta2 == meta
    h = read_header(copy)
    assert (h.n_texts, h.n_layers, h.n_kv_heads, h.n_keys, h.dim, h.n_q_heads) == (2, 4, 3, 16, 8, 9)
    # the fingerprint is of content: the same for the fixture's file, another for other data
    assert h.fingerprint == read_header(path).fingerprint
    write_capture(tmp_path / "other.npz", K, V + 1, q, meta)
    assert read_header(tmp_path / "other.npz").fingerprint != h.fingerprint


def test_capture_save_writes_the_format(capture_file, tmp_path):
    from kvstats.data.capture_format import write_capture
    from kvstats.models.kv_capture import Capture

    _, K, V, q = capture_file
    saved = Capture(K, V, q, {"model": "toy"}).save(tmp_path / "a.npz")
    write_capture(tmp_path / "b.npz", K, V, q, {"model": "toy"})
    assert saved.read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_empty_and_misshapen_captures_are_errors(tmp_path):
    from kvstats.data.capture_format import read_header

    z = np.zeros((1, 1, 0, 4, 8), np.float32)
    np.savez(tmp_path / "empty.npz", K=z, V=z, q=z, meta="{}")
    for read in (load_trials, read_header):
        with pytest.raises(ValueError, match=r"none empty; .*empty.npz' holds K \(1, 1, 0, 4, 8\)"):
            read(tmp_path / "empty.npz")
