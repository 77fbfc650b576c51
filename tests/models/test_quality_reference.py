"""kl_quality's columns against the same numbers computed by hand (no download).

A tiny random Llama and a character tokenizer; the reference drives a DynamicCache and a
QuantizedCache seeded ``seed + text index`` through the model directly and computes, per
position t predicting token t+1: KL(p_ref ‖ p_quant), both argmaxes, both NLLs of the
true next token.
"""

import numpy as np
import pytest
import torch

from _tiny_llama import CharTokenizer, tiny_llama
from kvstats.models import QuantizedCache, kl_quality, summarize_quality

VOCAB = 128


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=VOCAB, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, max_positions=256)
    return model, CharTokenizer(VOCAB, multiplier=31)


TEXTS = ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs."]


def _log_probs(model, ids, cache, prefill=None):
    x = torch.tensor([ids])
    with torch.inference_mode():
        if prefill is None:
            logits = model(input_ids=x, cache=cache, use_cache=cache is not None).logits[0]
        else:
            out = [model(input_ids=x[:, :prefill], cache=cache, use_cache=True).logits[0]]
            out += [model(input_ids=x[:, t:t + 1], cache=cache, use_cache=True).logits[0]
                    for t in range(prefill, len(ids))]
            logits = torch.cat(out)
    return torch.log_softmax(logits.double(), -1)[:-1]


@pytest.mark.parametrize("mode,window,prefill", [("prefill", 0, None), ("decode", 3, 5)])
def test_every_column_is_the_hand_computed_number(tiny, mode, window, prefill):
    model, tok = tiny
    df = kl_quality(model, tok, TEXTS, "KQV", 2, seed=7, window=window, mode=mode,
                    prefill_tokens=prefill or 16)
    assert list(df.text.unique()) == [0, 1]
    for i, text in enumerate(TEXTS):
        ids = tok(text)["input_ids"]
        ref = _log_probs(model, ids, None)
        quant = _log_probs(model, ids, QuantizedCache("KQV", 2, seed=7 + i, window=window), prefill)
        nxt = torch.tensor(ids[1:])[:, None]
        rows = df[df.text == i]
        np.testing.assert_array_equal(rows.position, np.arange(len(ids) - 1))
        np.testing.assert_allclose(rows.kl, (ref.exp() * (ref - quant)).sum(-1).clamp_min(0).numpy(),
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(rows.top1_ref, ref.argmax(-1).numpy())
        np.testing.assert_array_equal(rows.top1_quant, quant.argmax(-1).numpy())
        np.testing.assert_allclose(rows.nll_ref, -ref.gather(-1, nxt)[:, 0].numpy(), rtol=1e-12)
        np.testing.assert_allclose(rows.nll_quant, -quant.gather(-1, nxt)[:, 0].numpy(), rtol=1e-9)
        # the checks can fail: 2-bit codes move the distribution and the true token's NLL
        assert rows.kl.min() >= 0 and rows.kl.max() > 1e-4
        assert not np.allclose(rows.nll_quant, rows.nll_ref)
    # texts are independent draws of the scheme: text 1 run with text 0's seed differs
    other = _log_probs(model, tok(TEXTS[1])["input_ids"], QuantizedCache("KQV", 2, seed=7, window=window), prefill)
    assert not np.allclose(df[df.text == 1].nll_quant, -other.gather(-1, torch.tensor(
        tok(TEXTS[1])["input_ids"][1:])[:, None])[:, 0].numpy())


def test_memory_is_the_mean_over_texts(tiny):
    # attrs["memory"]: (stored, fp16, held bytes per token, fixed bytes), means over texts of
    # different lengths (with a full-precision window of 3 tokens, the per-token figures
    # differ from text to text; a window needs mode="decode").
    model, tok = tiny
    df = kl_quality(model, tok, TEXTS + ["ab"], "KQV", 4, seed=0, window=3, mode="decode", prefill_tokens=1)
    per_text = []
    for i, text in enumerate(TEXTS + ["ab"]):
        cache = QuantizedCache("KQV", 4, seed=i, window=3)
        _log_probs(model, tok(text)["input_ids"], cache, prefill=1)
        rep = cache.memory_report()
        per_text.append((rep["bytes_per_token"], rep["fp16_bytes_per_token"], rep["fixed_bytes"]))
    stored, fp16, fixed = np.mean(per_text, axis=0)
    mem = df.attrs["memory"]["KQV:4"]
    assert mem[0] == pytest.approx(stored, rel=1e-12) and mem[1] == fp16 and mem[3] == pytest.approx(fixed)
    assert len({round(p[0], 6) for p in per_text}) > 1  # the mean is not any one text's value
    assert df.attrs["bytes_per_token"] == mem[0]
    s = summarize_quality(df).iloc[0]
    assert s.bytes_per_token == mem[0] and s.ratio_to_fp16 == pytest.approx(mem[0] / fp16)


def test_kl_is_clamped_at_zero_where_float_rounding_makes_it_negative(tiny, monkeypatch):
    # Σ p (log p − log q) of two equal models lands on either side of 0 by rounding alone;
    # which side depends on the BLAS kernels, so the rounding is made explicit: the quantized
    # log-probabilities are the reference's shifted by ±1e-9 on alternate positions, a raw KL
    # of ∓1e-9. The negative rows must report 0, the positive ones their value.
    import kvstats.models.quality as quality

    model, tok = tiny
    exact = quality._log_probs

    def shifted(model, ids, cache, mode, prefill_tokens):
        out = exact(model, ids, None, "prefill", prefill_tokens)
        if cache is None:
            return out
        exact(model, ids, cache, mode, prefill_tokens)  # fills the cache its memory is read from
        sign = torch.where(torch.arange(out.shape[0]) % 2 == 0, 1.0, -1.0).to(out.dtype)
        return out + 1e-9 * sign[:, None]

    monkeypatch.setattr(quality, "_log_probs", shifted)
    df = kl_quality(model, tok, TEXTS, "identity", None, mode="decode", prefill_tokens=3)
    even = df.position.to_numpy() % 2 == 0
    assert (df.kl[even] == 0).all()
    assert np.allclose(df.kl[~even], 1e-9, rtol=1e-3, atol=0) and len(df.kl[~even]) > 0


def test_a_progress_bar_over_the_runs_unless_turned_off(tiny, capfd):
    model, tok = tiny
    kl_quality(model, tok, TEXTS[:2], [("KQV", 4), ("identity", None)], mode="decode",
               prefill_tokens=3, progress=False)
    assert "kl_quality" not in capfd.readouterr().err
    kl_quality(model, tok, TEXTS[:2], [("KQV", 4), ("identity", None)], mode="decode", prefill_tokens=3)
    err = capfd.readouterr().err
    assert "kl_quality (decode)" in err and "4/4" in err   # 2 texts x 2 configurations
    with pytest.raises(TypeError, match="progress must be True or False; received 'yes'"):
        kl_quality(model, tok, TEXTS[:1], "identity", progress="yes")
