"""A capture of some layers only (``meta["layers"]``): the real-data readers select by model
layer, never by stored slot (load_trials once read slot 2, model layer 4, for layer=2)."""

import numpy as np
import pytest

from kvstats.data.capture_format import write_capture
from kvstats.data.real import load_trials
from kvstats.data.spectrum import capture_spectra


def _captures(tmp_path):
    """A full capture of 5 layers (layer l scaled by 10**l, so a wrong layer shows) and the
    capture of its layers 0, 2 and 4."""
    rng = np.random.default_rng(0)
    scale = 10.0 ** np.arange(5)[None, :, None, None, None]
    K = (rng.standard_normal((2, 5, 2, 6, 8)) * scale).astype(np.float32)
    V = rng.standard_normal((2, 5, 2, 6, 8)).astype(np.float32)
    q = rng.standard_normal((2, 5, 4, 6, 8)).astype(np.float32)
    full, part = tmp_path / "full.npz", tmp_path / "part.npz"
    write_capture(full, K, V, q, {"model": "toy"})
    keep = [0, 2, 4]
    write_capture(part, K[:, keep], V[:, keep], q[:, keep], {"model": "toy", "layers": keep})
    return full, part


@pytest.mark.parametrize("layer", [2, [4, 0], None])
def test_load_trials_reads_model_layers(tmp_path, layer):
    full, part = _captures(tmp_path)
    want = load_trials(full, layer=[0, 2, 4] if layer is None else layer)
    got = load_trials(part, layer=layer)
    np.testing.assert_array_equal(got.K, want.K)
    np.testing.assert_array_equal(got.q, want.q)
    assert got.meta["layer"] == want.meta["layer"]


def test_capture_spectra_reads_model_layers(tmp_path):
    full, part = _captures(tmp_path)
    for got, want in zip(capture_spectra(part, layer=[2, 4]), capture_spectra(full, layer=[2, 4])):
        np.testing.assert_array_equal(got.eigenvalues, want.eigenvalues)


def test_a_layer_the_capture_does_not_hold_is_refused(tmp_path):
    full, part = _captures(tmp_path)
    with pytest.raises(ValueError, match=r"layer must be among the model layers \[0, 2, 4\].*received 3"):
        load_trials(part, layer=3)
    with pytest.raises(ValueError, match=r"layer must be among the model layers \[0, 2, 4\]"):
        capture_spectra(part, layer=[1])
    # a full capture keeps its range message
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 4\]; received 5"):
        load_trials(full, layer=5)


@pytest.mark.parametrize("arg", [{"layer": [2, 2]}, {"head": [0, 1, 0]}, {"layer": [0, 4, 0], "head": [1]}])
def test_a_layer_or_head_selected_twice_is_refused(tmp_path, arg):
    # load_trials(p, layer=[2, 2], head=[0, 0]) returned 4x the trials, identical copies
    # counted as independent (pseudo-replication); the sweep already refused it
    # (critic_data19 finding 2)
    full, _ = _captures(tmp_path)
    name = "head" if "head" in arg and len(arg["head"]) > 1 else "layer"
    with pytest.raises(ValueError, match=rf"{name} must not repeat indices .*received \["):
        load_trials(full, **arg)
    with pytest.raises(ValueError, match=rf"{name} must not repeat indices"):
        capture_spectra(full, **arg)


def test_trials_meta_does_not_carry_the_captures_shape_counts(tmp_path):
    # n_texts, n_layers, n_q_heads (and the capture's layers) describe the file: after a
    # selection they were wrong (critic_data19 finding 9); the per-trial lists say it all
    rng = np.random.default_rng(1)
    K = rng.standard_normal((2, 3, 2, 6, 8)).astype(np.float32)
    q = rng.standard_normal((2, 3, 4, 6, 8)).astype(np.float32)
    path = tmp_path / "c.npz"
    write_capture(path, K, K, q, {"model": "toy", "n_texts": 2, "n_layers": 3, "n_q_heads": 4,
                                  "n_kv_heads": 2, "group_size": 2, "head_dim": 8})
    t = load_trials(path, layer=[1], head=1)
    for key in ("n_texts", "n_layers", "n_q_heads", "layers"):
        assert key not in t.meta
    assert (t.meta["n_kv_heads"], t.meta["group_size"], t.meta["batch_shape"]) == (1, 2, (2, 1))
    assert (t.meta["model"], t.meta["head_dim"], t.meta["layer"], t.meta["head"]) == ("toy", 8, [1, 1], [1, 1])


def test_a_big_endian_capture_stays_float32(tmp_path):
    # '>f4' arrays (a file written on a big-endian machine) were widened to float64 by the
    # readers' float check; now read in native order, same values (critic_data19 finding 9)
    full, _ = _captures(tmp_path)
    with np.load(full) as z:
        arrays = {k: z[k] for k in ("K", "V", "q")}
        meta = str(z["meta"])
    big = tmp_path / "big.npz"
    np.savez(big, **{k: v.astype(">f4") for k, v in arrays.items()}, meta=np.array(meta))
    got, want = load_trials(big, layer=[1, 3]), load_trials(full, layer=[1, 3])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.K, want.K)
    np.testing.assert_array_equal(got.q, want.q)
    for a, b in zip(capture_spectra(big), capture_spectra(full)):
        np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
