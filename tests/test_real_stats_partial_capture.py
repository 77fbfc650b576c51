"""experiments/real_stats.py on a capture of some layers only (referee RW, F1).

A capture of model layers [0, 2] (real_capture.py --layers ...) records them in
``meta["layers"]``: the statistics must name the model layers (not the slots 0, 1) and the
weights must be those of layers 0 and 2 alone, so that experiments/real_report.py sets each
layer's ‖W‖ beside its own E‖k‖². The capture is read through read_capture, whose checks a
bare np.load skipped. The model is a stand-in (tests/test_real_stats.py's) with 3 layers;
reference norms are numpy's.
"""

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.data.capture_format import write_capture
from test_real_stats import SOURCE, fake_model

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, monkeypatch, meta, model, raw=False):
    """real_stats.py on a capture with ``meta``; ``raw``: written with np.savez, past the
    writer's checks (a file of another kvstats, or a hand-made one)."""
    import kvstats.models

    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 2, 2, 8, 4)).astype(np.float32)
    K[:, 1] *= 5.0                                   # slot 1 distinguishable by its norm
    if raw:
        np.savez(tmp_path / "cap.npz", K=K, V=K, q=np.concatenate([K, K], axis=2), meta=json.dumps(meta))
    else:
        write_capture(tmp_path / "cap.npz", K, K, np.concatenate([K, K], axis=2), meta)
    out = tmp_path / "res"
    monkeypatch.setattr(kvstats.models, "load_model", lambda: (model, None))
    monkeypatch.setattr(sys, "argv", ["real_stats.py", "--capture", str(tmp_path / "cap.npz"),
                                      "--out", str(out)])
    runpy.run_path(str(ROOT / "experiments" / "real_stats.py"), run_name="__main__")
    return out, K


def test_partial_capture_names_model_layers_and_their_weights(tmp_path, monkeypatch, load_experiment):
    model = fake_model(3, 2, 4)
    out, K = _run(tmp_path, monkeypatch, {"source": SOURCE, "layers": [0, 2]}, model)
    stats = pd.read_csv(out / "stats_layer_head.csv")
    assert sorted(stats.layer.unique()) == [0, 2]
    row = stats[(stats.tensor == "K") & (stats.layer == 2) & (stats["head"] == 1)].iloc[0]
    assert row.mean_sq_norm == pytest.approx(float((K[:, 1, 1].astype(np.float64) ** 2).sum(-1).mean()))
    w = pd.read_csv(out / "weights.csv", dtype={"head": str})
    assert sorted(w.layer.unique()) == [0, 2] and len(w) == 2 * 2 * 3   # layers x (K, V) x (all, 2 heads)
    v2 = model.model.layers[2].self_attn.v_proj.weight.double().numpy()
    row = w[(w.tensor == "V") & (w.layer == 2) & (w["head"] == "all")].iloc[0]
    assert row.frobenius == pytest.approx(np.linalg.norm(v2))
    # the report's norms section pairs them by layer (it crashed on the slot-numbered rows)
    text = load_experiment("real_report").section_norms(str(out))
    table = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert table == ["layer", "0", "2"]
    assert "Layers with ‖W_K‖_F > ‖W_V‖_F: " in text and "/2; spectral: " in text


def test_capture_checks_apply(tmp_path, monkeypatch):
    """read_capture's checks: a meta of another layout (post_rope false) is refused."""
    with pytest.raises(ValueError, match="post_rope"):
        _run(tmp_path, monkeypatch, {"source": SOURCE, "post_rope": False}, fake_model(2, 2, 4), raw=True)


def test_layers_beyond_the_model_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="must name layers of load_model"):
        _run(tmp_path, monkeypatch, {"source": SOURCE, "layers": [0, 7]}, fake_model(3, 2, 4))


def test_report_refuses_weights_of_other_layers(tmp_path, load_experiment):
    """Statistics and weights of different layers (files of an older run): an error naming
    both, not a table pairing them by position."""
    pd.DataFrame({"tensor": ["K", "V", "K", "V"], "layer": [0, 0, 1, 1], "head": 0,
                  "mean_sq_norm": 1.0}).to_csv(tmp_path / "stats_layer_head.csv", index=False)
    w = pd.MultiIndex.from_product([[0, 15], ["K", "V"]], names=["layer", "tensor"]).to_frame(index=False)
    w.assign(head="all", frobenius=1.0, spectral=1.0).to_csv(tmp_path / "weights.csv", index=False)
    with pytest.raises(ValueError, match=r"same model layers.*\[0, 15\].*\[0, 1\]"):
        load_experiment("real_report").section_norms(str(tmp_path))
