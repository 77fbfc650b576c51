"""The capture file format: what readers refuse, with messages naming the file."""

import json

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
