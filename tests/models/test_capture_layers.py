"""capture(..., layers=...) on a tiny random Llama: the kept layers are the full capture's,
bit for bit, and every reader selects them by model layer, never by stored slot.

The model: transformers' LlamaConfig with 3 layers, 4 query heads on 2 KV heads,
head_dim 8, eager attention, random weights from torch.manual_seed(0); 3 texts of 12
tokens. Layers 0 and 2 are kept: slot 1 of that file holds model layer 2, so a reader that
takes a selection of layer 2 as a slot index fails (there is no slot 2), and one that
takes layer 1 as slot 1 reads layer 2's arrays under layer 1's name.
"""

import numpy as np
import pytest

from _tiny_llama import CharTokenizer, tiny_llama
from kvstats.data.capture_format import read_capture, read_header, read_layers
from kvstats.models import capture

N_TOK = 12
TEXTS = ["The quick brown fox jumps.", "Pack my box with jugs!", "Sphinx of black quartz."]


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=97, hidden=32, layers=3, heads=4, kv_heads=2, head_dim=8, max_positions=64)
    return model, CharTokenizer(97)


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    """The full capture and the capture of layers [0, 2], written as files."""
    root = tmp_path_factory.mktemp("caps")
    full = capture(*tiny, TEXTS, max_tokens=N_TOK, attention_output=True, path=root / "full.npz")
    some = capture(*tiny, TEXTS, max_tokens=N_TOK, layers=[2, 0], attention_output=True,
                   path=root / "some.npz")
    return full, some, root / "full.npz", root / "some.npz"


def test_kept_layers_are_the_full_captures_bit_for_bit(files):
    full, some, _, _ = files
    assert some.K.shape == (3, 2, 2, N_TOK, 8) and some.q.shape == some.attn_out.shape == (3, 2, 4, N_TOK, 8)
    for name in ("K", "V", "q", "attn_out"):
        np.testing.assert_array_equal(getattr(some, name), getattr(full, name)[:, [0, 2]], err_msg=name)
    # the record says which model layer each slot holds (sorted); the model's count is kept
    assert some.meta["layers"] == [0, 2] and some.meta["n_layers"] == 3
    # a capture of every layer has no record: its meta is what captures always wrote
    assert "layers" not in full.meta
    assert {k: v for k, v in some.meta.items() if k != "layers"} == full.meta


def test_every_layer_listed_is_the_capture_without_layers(tiny, files):
    full = files[0]
    listed = capture(*tiny, TEXTS, max_tokens=N_TOK, layers=[0, 1, 2], attention_output=True)
    assert listed.meta == full.meta
    for name in ("K", "V", "q", "attn_out"):
        np.testing.assert_array_equal(getattr(listed, name), getattr(full, name), err_msg=name)


def test_the_file_records_the_model_layers_it_holds(files):
    _, some, full_path, some_path = files
    assert read_layers(some_path) == (0, 2) and read_layers(full_path) == (0, 1, 2)
    assert read_header(some_path).n_layers == 2
    K, _, _, meta = read_capture(some_path)
    np.testing.assert_array_equal(K, some.K)
    assert meta["layers"] == [0, 2]


def test_only_the_kept_layers_are_hooked(tiny):
    # capture recomputes the queries of a hooked layer with its q_proj: the model calls
    # q_proj once per layer and pass, the hook once more for each kept layer only
    model, tok = tiny
    calls = [0, 0, 0]
    handles = [layer.self_attn.q_proj.register_forward_hook(
        lambda *_, i=i: calls.__setitem__(i, calls[i] + 1)) for i, layer in enumerate(model.model.layers)]
    try:
        capture(model, tok, TEXTS, max_tokens=N_TOK, layers=[0, 2], batch_size=2)   # two passes
    finally:
        for h in handles:
            h.remove()
    assert calls == [4, 2, 4]


@pytest.mark.parametrize("layers, exc, match", [
    ([3], ValueError, r"layers must be distinct model layers in \[0, 2\] \(the model has 3\), at least one; "
                      r"received \[3\]"),
    ([0, -1], ValueError, r"in \[0, 2\] .*received \[0, -1\]"),
    ([1, 1], ValueError, r"distinct .*received \[1, 1\]"),
    ([], ValueError, r"at least one; received \[\]"),
    ([0.5], TypeError, r"layers must be an integer"),
    (1, TypeError, r"layers must be None or a sequence of model layers in \[0, 2\]; received 1"),
    ("0", TypeError, r"layers must be None or a sequence"),
])
def test_bad_layers_are_refused_before_the_model_runs(tiny, layers, exc, match):
    with pytest.raises(exc, match=match):
        capture(*tiny, TEXTS, max_tokens=N_TOK, layers=layers)


def test_recheck_names_model_layers(files):
    # the recomputation check of a capture of some layers names the model's layers
    from kvstats.models.kv_capture import _recheck

    some = files[1]
    q = some.q[0].copy()
    q[..., 1:, :] = q[..., :-1, :]   # queries one position late: every layer fails
    with pytest.raises(ValueError, match=r"attention output of layers \[0, 2\]"):
        _recheck(q, some.K[0], some.V[0], some.attn_out[0], 2, 1e-3, "tiny", [0, 2])


# ------------------------------------------------------------- the sweep's real source
def _sweep(path, layer, schemes):
    from kvstats.sweep import run_sweep

    return run_sweep({"schemes": schemes, "budgets": [3], "dims": [8], "n_keys": [N_TOK], "n_trials": 6,
                      "seed": 1, "comparisons": [],
                      "distributions": [{"name": "real", "params": {"path": str(path), "layer": layer}}]},
                     executor="serial", progress=False)


def test_sweep_selecting_a_model_layer_reads_it_from_either_file(files):
    from kvstats.sweep.sources import _load_real

    _, _, full_path, some_path = files
    # the trials: equal arrays, labelled with the model layer, from both files
    loaded = []
    for path in (full_path, some_path):
        res = _sweep(path, 2, ["identity"])
        loaded.append(_load_real(res.config.cells()[0], 6))
    for name in ("K", "V", "q"):
        np.testing.assert_array_equal(getattr(loaded[1], name), getattr(loaded[0], name), err_msg=name)
    assert loaded[0].meta["layer"] == loaded[1].meta["layer"] == [2] * 6
    # the frames: a deterministic quantizer gives the same numbers (randomised schemes draw
    # from seeds keyed by the capture's content, which differs between the files)
    a, b = (_sweep(p, 2, ["KV", "identity"]).frame for p in (full_path, some_path))
    assert len(a) == 12 and (a["kl"] > 0).any()
    # only the labels of the file differ: its name@fingerprint and the cell ids keyed by it
    assert (a["params"] != b["params"]).all() and (a["cell_id"] != b["cell_id"]).all()
    assert a.drop(columns=["params", "cell_id"]).equals(b.drop(columns=["params", "cell_id"]))
    # layer 1 is not in the file of layers [0, 2]: refused, listing what it holds
    with pytest.raises(ValueError, match=r"'layer' must be among the model layers \[0, 2\] "
                                         r"\(the capture '.*some\.npz' holds only these\); received 1"):
        _sweep(some_path, 1, ["KV"])
