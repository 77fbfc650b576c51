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
