"""The quantized cache inside the real model: exactness, generation, memory, KL quality."""

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache, kl_quality, summarize_quality
from kvstats.models.texts import stdlib_texts

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def ids(smollm):
    tok = smollm[1]
    return torch.tensor([tok(stdlib_texts(["heapq"])[0])["input_ids"][:40]])


def _logits(model, ids, cache):
    with torch.inference_mode():
        return model(input_ids=ids, cache=cache, use_cache=True).logits[0]


def _decode_logits(model, ids, cache, prefill=8):
    with torch.inference_mode():
        out = [model(input_ids=ids[:, :prefill], cache=cache, use_cache=True).logits[0]]
        for t in range(prefill, ids.shape[1]):
            out.append(model(input_ids=ids[:, t:t + 1], cache=cache, use_cache=True).logits[0])
    return torch.cat(out)


def test_identity_scheme_reproduces_full_precision_logits(smollm, ids):
    from transformers import DynamicCache

    model = smollm[0]
    ref = _logits(model, ids, DynamicCache(config=model.config))
    torch.testing.assert_close(_logits(model, ids, QuantizedCache("identity")), ref, rtol=0, atol=1e-5)
    # Token-by-token decoding through the identity cache: float32 reordering only.
    torch.testing.assert_close(_decode_logits(model, ids, QuantizedCache("identity")), ref,
                               rtol=0, atol=2e-4)


def test_prefill_and_teacher_forced_decoding_agree(smollm, ids):
    # Both paths code every key before attention reads it. They differ only by float32
    # rounding of the quantizer's inputs (one token vs 40 per matmul), which can flip a
    # code sitting on a boundary; after a flip the two runs are two different (equally
    # valid) quantization noises. So: layer 0's decoded keys agree almost everywhere,
    # and the end-to-end damage is of the same size.
    from transformers import DynamicCache

    model = smollm[0]
    one = QuantizedCache("KQV", 3, seed=4)
    step = QuantizedCache("KQV", 3, seed=4)
    one_pass = _logits(model, ids, one)
    decoded = _decode_logits(model, ids, step)
    k_one, k_step = one.layers[0].dequantized()[0], step.layers[0].dequantized()[0]
    assert k_one.shape == k_step.shape == (1, 3, ids.shape[1], 64)
    assert ((k_one - k_step).abs() < 1e-4).float().mean() > 0.99
    # The first positions (before any flip reaches them) agree to float tolerance.
    torch.testing.assert_close(decoded[:8], one_pass[:8], rtol=0, atol=2e-3)
    ref = torch.log_softmax(_logits(model, ids, DynamicCache(config=model.config)).double(), -1)

    def mean_kl(logits):
        return float((ref.exp() * (ref - torch.log_softmax(logits.double(), -1))).sum(-1).mean())

    kl_one, kl_step = mean_kl(one_pass), mean_kl(decoded)
    assert kl_one > 1e-3 and 0.5 < kl_step / kl_one < 2.0, (kl_one, kl_step)


def test_kqv4_bytes_per_token_within_accounting_and_far_below_fp16(smollm, ids):
    import kvstats

    model = smollm[0]
    cache = QuantizedCache("KQV", 4)
    _logits(model, ids, cache)
    n = ids.shape[1]
    assert cache.get_seq_length() == n and len(cache.layers) == 30
    budget = kvstats.make_scheme("KQV", 4, 64).bits_per_coord(n)
    accounted = budget.total * 2 * (3 * 64) * 30 / 8  # bits/coord x K,V x coords x layers / 8
    assert cache.bytes_per_token() == pytest.approx(accounted, rel=0.02)
    fp16 = cache.fp16_bytes_per_token()
    assert fp16 == 2 * 2 * 3 * 64 * 30
    assert cache.bytes_per_token() < fp16 / 3.5


def test_generate_with_quantized_cache(smollm, ids):
    model, tok = smollm
    cache = QuantizedCache("KQV", 4, window=4)
    prompt = ids[:, :12]
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), cache=cache,
                             max_new_tokens=6, do_sample=False, pad_token_id=tok.eos_token_id)
    assert out.shape[1] == 12 + 6 or (out[0, -1] == tok.eos_token_id)
    assert torch.equal(out[:, :12], prompt)
    # the last generated token is never fed back, so the cache holds one token fewer
    assert cache.get_seq_length() == out.shape[1] - 1
    assert cache.layers[0].n_coded == cache.get_seq_length() - 4


def test_kl_quality_identity_is_exact_and_budget_matters(smollm):
    model, tok = smollm
    texts = stdlib_texts(["heapq"])
    df = kl_quality(model, tok, texts, [("identity", None), ("KQV", 2), ("KQV", 6)], max_tokens=32)
    assert len(df) == 3 * 31 and set(df.scheme) == {"identity", "KQV"}
    s = summarize_quality(df)
    ident = s[s.scheme == "identity"].iloc[0]
    assert ident["max_kl"] < 1e-8 and ident["top1_agreement"] == 1.0
    assert ident["ppl_ratio"] == pytest.approx(1.0, abs=1e-6)
    kv2, kv6 = s[(s.scheme == "KQV") & (s.bits == 2)].iloc[0], s[(s.scheme == "KQV") & (s.bits == 6)].iloc[0]
    # Four more bits per coordinate cut the damage by far more than 10x (Lloyd-Max MSE
    # falls ~4x per bit).
    assert kv2["mean_kl"] > 10 * kv6["mean_kl"] > 0
    assert kv2["bytes_per_token"] < kv6["bytes_per_token"] < ident["bytes_per_token"]


def test_kl_quality_bad_input(smollm):
    model, tok = smollm
    with pytest.raises(ValueError, match="name must be one of"):
        kl_quality(model, tok, ["some text here"], "nonsense", 4)
    with pytest.raises(ValueError, match="must fit the model's context"):
        kl_quality(model, tok, ["word " * 9000], "KV", 4)
    with pytest.raises(ValueError, match="mode must be one of"):
        kl_quality(model, tok, ["some text here"], "KV", 4, mode="fast")
