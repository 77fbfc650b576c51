"""capture() on a tiny random Llama (no download): the same checks as test_capture.py's
real-model ones, fast enough to run with every change of kvstats.models.capture.

The model: transformers' LlamaConfig with 3 layers, 6 query heads on 2 KV heads (GQA
group 3), head_dim 16, eager attention, random weights from torch.manual_seed(0).
"""

import numpy as np
import pytest
import torch

from _tiny_llama import CharTokenizer, tiny_llama
from kvstats.models import capture

N_TOK = 10


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=97, hidden=48, layers=3, heads=6, kv_heads=2, head_dim=16, max_positions=64)
    return model, CharTokenizer(97)


TEXTS = ["The quick brown fox jumps.", "Pack my box with jugs!"]


@pytest.fixture(scope="module")
def cap(tiny):
    return capture(*tiny, TEXTS, max_tokens=N_TOK, attention_output=True, batch_size=1)


def test_shapes_and_group(cap):
    assert cap.K.shape == cap.V.shape == (2, 3, 2, N_TOK, 16)
    assert cap.q.shape == cap.attn_out.shape == (2, 3, 6, N_TOK, 16)
    assert cap.meta["group_size"] == 3 and cap.meta["n_tokens"] == N_TOK and cap.meta["post_rope"]
    # keys and values are different arrays (a copy of one into the other would pass shapes)
    assert not np.allclose(cap.K, cap.V)


def test_attention_recomputed_from_the_capture_is_the_modules_output(cap):
    # softmax(q Kᵀ/√d + causal) V in float64 from the captured arrays against the input of
    # o_proj: checks the queries' RoPE (written out in capture, not borrowed), post-RoPE
    # keys, the values and the GQA mapping h -> h // group together.
    g = cap.meta["group_size"]
    K = np.repeat(cap.K.astype(np.float64), g, axis=2)
    V = np.repeat(cap.V.astype(np.float64), g, axis=2)
    s = np.einsum("tlhnd,tlhmd->tlhnm", cap.q.astype(np.float64), K) / np.sqrt(16)
    s[..., np.triu(np.ones((N_TOK, N_TOK), bool), 1)] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    out = np.einsum("tlhnm,tlhmd->tlhnd", p / p.sum(-1, keepdims=True), V)
    np.testing.assert_allclose(out, cap.attn_out, rtol=0, atol=2e-5 * np.abs(cap.attn_out).max())


def test_queries_are_post_rope(cap, tiny):
    # At position 0 RoPE is the identity: the query is q_proj of the layer's normed input;
    # at later positions it is rotated, so the pre-RoPE projection differs (checked on the
    # first layer, whose input is the embedding).
    model, tok = tiny
    attn = model.model.layers[0]
    ids = torch.tensor([tok(TEXTS[0])["input_ids"][:N_TOK]])
    with torch.inference_mode():
        h = attn.input_layernorm(model.model.embed_tokens(ids))
        raw = attn.self_attn.q_proj(h).view(1, N_TOK, 6, 16).transpose(1, 2)[0].numpy()
    np.testing.assert_allclose(cap.q[0, 0, :, 0], raw[:, 0], rtol=0, atol=1e-6)
    assert np.abs(cap.q[0, 0, :, 1:] - raw[:, 1:]).max() > 1e-3
    # RoPE is a rotation: it keeps each query's norm
    np.testing.assert_allclose(np.linalg.norm(cap.q[0, 0], axis=-1), np.linalg.norm(raw, axis=-1), rtol=1e-5)


def test_batching_does_not_change_the_capture(cap, tiny):
    both = capture(*tiny, TEXTS, max_tokens=N_TOK, batch_size=2)
    for name in ("K", "V", "q"):
        np.testing.assert_allclose(getattr(both, name), getattr(cap, name), rtol=0, atol=1e-5)
    assert both.attn_out is None


def test_capture_is_the_same_in_16_bit_and_records_what_it_ran(tiny):
    # a bfloat16 model passes the recomputation check (2e-2 relative; measured 2e-3) and
    # its arrays are float32 copies of its states; meta names the model actually run
    model, tok = tiny
    half = capture(model.to(torch.bfloat16), tok, TEXTS, max_tokens=N_TOK)
    model.to(torch.float32)
    full = capture(model, tok, TEXTS, max_tokens=N_TOK)
    assert half.K.dtype == np.float32
    np.testing.assert_allclose(half.K, full.K, rtol=0, atol=0.05 * np.abs(full.K).max())
    assert "LlamaForCausalLM" in full.meta["source"] and "float32" in full.meta["source"]
    assert "bfloat16" in half.meta["source"] and "SmolLM2" not in half.meta["source"]


def test_progress_bar_only_when_asked(tiny, capsys):
    capture(*tiny, TEXTS, max_tokens=N_TOK, batch_size=1, progress=True)
    assert "capture" in capsys.readouterr().err
    capture(*tiny, TEXTS, max_tokens=N_TOK, batch_size=1)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress must be True or False"):
        capture(*tiny, TEXTS, max_tokens=N_TOK, progress=1)


def _arch(arch, **config):
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, f"{arch}Config")(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, pad_token_id=0, eos_token_id=2,
        attn_implementation="eager", **config)
    return getattr(transformers, f"{arch.removesuffix('Text')}ForCausalLM")(cfg).eval()


@pytest.mark.parametrize("arch,config,match", [
    ("Qwen3", {}, r"applies \['q_norm', 'k_norm'\]"),          # query/key norms after q_proj
    ("Granite", {}, "scales them by 1"),                         # attention_multiplier, not 1/sqrt(d)
    ("StableLm", {}, "partial rotary"),                          # RoPE on 4 of 16 dimensions
    ("Cohere", {}, "do not reproduce the attention output"),     # interleaved RoPE: only the numbers show it
    ("Mistral", {"sliding_window": 4}, "sliding window")])
def test_attention_capture_cannot_recompute_is_refused(arch, config, match):
    # Each of these captured silently wrong queries before (relative error of the recomputed
    # attention 0.6 for Qwen3, 0.07 for Granite, 0.014 for Cohere) or failed inside torch.
    with pytest.raises(ValueError, match=match):
        capture(_arch(arch, **config), CharTokenizer(97), TEXTS, max_tokens=N_TOK)


def test_llama_like_architectures_still_capture():
    # Qwen2 and Mistral (no window) have Llama's attention: captured, and the check passes
    for arch in ("Qwen2", "Mistral"):
        assert capture(_arch(arch), CharTokenizer(97), TEXTS, max_tokens=N_TOK).K.shape == (2, 2, 2, N_TOK, 16)


def test_the_recomputation_check_sees_a_wrong_query(cap):
    # the numeric check alone (what catches an interleaved RoPE): the captured arrays pass,
    # a query rotated by one position's RoPE too many does not
    from kvstats.models.kv_capture import _recheck

    _recheck(cap.q[0], cap.K[0], cap.V[0], cap.attn_out[0], 3, 1e-3, "tiny")
    q = cap.q[0].copy()
    q[..., 1:, :] = q[..., :-1, :]
    with pytest.raises(ValueError, match=r"layers \[0, 1, 2\]"):
        _recheck(q, cap.K[0], cap.V[0], cap.attn_out[0], 3, 1e-3, "tiny")
