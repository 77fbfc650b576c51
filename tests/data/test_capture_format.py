"""The capture file format: what readers refuse, with messages naming the file."""

import json
import re

import numpy as np
import pytest

from kvstats.data.capture_format import read_capture
from kvstats.data.real import load_trials
from kvstats.data.spectrum import capture_spectra


def _write(path, meta, n_texts=1, n_tok=4):
    z = np.ones((n_texts, 2, 1, n_tok, 8), np.float32)
    np.savez(path, K=z, V=z, q=np.ones((n_texts, 2, 3, n_tok, 8), np.float32), meta=meta)
    return path


@pytest.mark.parametrize("meta,what", [(np.array("not json"), "no valid JSON"),
                                       (json.dumps([1, 2]), "a JSON list")])
def test_meta_must_be_a_json_object(tmp_path, meta, what):
    # was json's JSONDecodeError and an AttributeError from load_trials
    p = _write(tmp_path / "c.npz", meta)
    for read in (read_capture, load_trials):
        with pytest.raises(ValueError, match=f"path must be a capture whose meta is a JSON object; .*{what}"):
            read(p)
    assert read_capture(_write(tmp_path / "ok.npz", json.dumps({"a": 1})))[3] == {"a": 1}


def test_capture_spectra_needs_two_vectors_and_says_which_file(tmp_path):
    p = _write(tmp_path / "one.npz", json.dumps({}), n_texts=1, n_tok=1)
    with pytest.raises(ValueError, match=r"path must be a capture with at least 2 key vectors .*one\.npz"):
        capture_spectra(p)
    # two texts of one token each: two vectors per (layer, head), a (zero) covariance
    k, _ = capture_spectra(_write(tmp_path / "two.npz", json.dumps({}), n_texts=2, n_tok=1))
    assert k.eigenvalues.shape == (4, 8) and np.all(k.eigenvalues == 0)


def test_loaded_trials_cluster_by_text(tmp_path):
    # the statistical unit of a real trial is its text (its layers and heads share the
    # tokens): meta["cluster"] and trial_clusters give the text of each trial, in the
    # C order over (text, layer, head) of the selection
    from kvstats.data.real import trial_clusters
    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 4, 2, 5, 8)).astype(np.float32)
    p = tmp_path / "c.npz"
    np.savez(p, K=K, V=K, q=np.repeat(K, 2, axis=2), meta=json.dumps({}))
    t = load_trials(p, layer=[1, 3], head=[1])
    text = [i for i in range(3) for _ in range(2)]
    assert t.meta["text"] == text and t.meta["layer"] == [1, 3] * 3 and t.meta["head"] == [1] * 6
    assert t.meta["cluster"] == text and t.meta["cluster_by"] == "text"
    assert trial_clusters(t).tolist() == text
    np.testing.assert_array_equal(t.K[3], K[1, 3, 1])               # trial 3 = (text 1, layer 3)


def test_trial_clusters_refuses_labels_that_are_not_one_integer_per_trial():
    from kvstats.data import Trials
    from kvstats.data.real import trial_clusters
    K = np.zeros((3, 4, 2))
    q = np.zeros((3, 1, 2))
    assert trial_clusters(Trials(K, K, q, {"cluster": [0, 1, 1]})).tolist() == [0, 1, 1]
    assert trial_clusters(Trials(K, K, q)).tolist() == [0, 1, 2]    # synthetic: each its own
    with pytest.raises(ValueError, match=r"one cluster per trial \(3\); received 2"):
        trial_clusters(Trials(K, K, q, {"cluster": [0, 1]}))
    for bad in (["a", "b", "c"], [0.5, 1.0, 2.0]):   # was int('a') / a silent truncation
        with pytest.raises(ValueError, match="must hold integer cluster labels"):
            trial_clusters(Trials(K, K, q, {"cluster": bad}))


def _write_zip(path, arrays, version):
    # an .npz by hand, every array in .npy format `version` (numpy writes 1.0 when it can)
    import io
    import zipfile
    with zipfile.ZipFile(path, "w") as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(a), version=version)
            zf.writestr(f"{name}.npy", buf.getvalue())
    return path


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_read_header_matches_the_arrays_for_both_npy_versions(tmp_path, version):
    from kvstats.data.capture_format import read_header
    K = np.zeros((2, 3, 2, 5, 8), np.float32)
    q = np.zeros((2, 3, 6, 5, 8), np.float32)
    p = _write_zip(tmp_path / "c.npz", {"K": K, "V": K, "q": q, "meta": np.array("{}")}, version)
    h = read_header(p)
    assert (h.n_texts, h.n_layers, h.n_kv_heads, h.n_keys, h.dim, h.n_q_heads) == (2, 3, 2, 5, 8, 6)
    assert read_capture(p)[0].shape == K.shape


def test_fingerprint_follows_content_not_path(tmp_path):
    from kvstats.data.capture_format import read_header, write_capture
    rng = np.random.default_rng(0)
    K = rng.standard_normal((1, 2, 1, 4, 8)).astype(np.float32)
    q = rng.standard_normal((1, 2, 3, 4, 8)).astype(np.float32)
    write_capture(tmp_path / "a.npz", K, K, q, {"model": "toy"})
    write_capture(tmp_path / "b.npz", K, K, q, {"model": "toy"})
    K2 = K.copy()
    K2[0, 0, 0, 0, 0] += 1.0
    write_capture(tmp_path / "c.npz", K2, K, q, {"model": "toy"})
    a, b, c = (read_header(tmp_path / f"{n}.npz").fingerprint for n in "abc")
    assert a == b and a != c


def test_empty_axes_are_not_a_capture():
    from kvstats.data.capture_format import check_shapes
    with pytest.raises(ValueError, match="none empty; 'e.npz' holds K"):
        check_shapes((1, 2, 1, 0, 8), (1, 2, 1, 0, 8), (1, 2, 3, 0, 8), "capture", "'e.npz'")


def test_layers_record_maps_model_layers_to_slots(tmp_path):
    # slot i of a capture holds model layer meta["layers"][i]; without the record, layer i
    from kvstats.data.capture_format import layer_slots, read_layers, write_capture
    rng = np.random.default_rng(1)
    held = [int(x) for x in rng.permutation(30)[:5]]
    K = rng.standard_normal((1, 5, 1, 4, 8)).astype(np.float32)
    write_capture(tmp_path / "some.npz", K, K, np.repeat(K, 3, axis=2), {"layers": held})
    assert read_layers(tmp_path / "some.npz") == tuple(held)
    assert layer_slots(tuple(held), held[::-1], "layer", "'c'") == [4, 3, 2, 1, 0]
    assert layer_slots(tuple(held), None, "layer", "'c'") == [0, 1, 2, 3, 4]
    absent = next(i for i in range(30) if i not in held)
    listed = re.escape(str(held))
    with pytest.raises(ValueError, match=rf"among the model layers {listed} .*received {absent}"):
        layer_slots(tuple(held), absent, "layer", "'c'")
    # a file without the record: every layer, and the range message of before
    write_capture(tmp_path / "all.npz", K, K, np.repeat(K, 3, axis=2), {})
    assert read_layers(tmp_path / "all.npz") == (0, 1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"layer must be in \[0, 4\] \(the capture 'c' has 5 layers\); received \[5\]"):
        layer_slots((0, 1, 2, 3, 4), [5], "layer", "'c'")


def test_write_capture_refuses_a_layers_record_that_does_not_fit(tmp_path):
    from kvstats.data.capture_format import write_capture
    z = np.zeros((1, 2, 1, 4, 8), np.float32)
    q = np.zeros((1, 2, 3, 4, 8), np.float32)
    for bad in ([0], [0, 0], [0, -2], [0, 1.0]):
        with pytest.raises(ValueError, match=r"meta 'layers' must list the model layer of each of the 2 stored layers "
                                             rf"of K \(distinct non-negative ints\); received {re.escape(repr(bad))}"):
            write_capture(tmp_path / "c.npz", z, z, q, {"layers": bad})
    assert not (tmp_path / "c.npz").exists()
