"""kl_quality (referee R2, findings 1, 2, 6): the transformers peers are scored on the
positions kvstats' schemes are, the texts must fit the context (one shared check), and a
text given twice is refused.

A tiny random Llama (no download) and a character tokenizer. Reference facts: a peer's
prefill chunk returns its raw states (transformers' QuantizedLayer.update, checked by
tests/models/test_peers.py), so with a p-token prefill its first p positions have KL 0
up to float rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _tiny_llama import CharTokenizer, tiny_llama  # noqa: E402
from kvstats.models import kl_quality, summarize_quality  # noqa: E402

VOCAB = 512
TEXTS = ["The quick brown fox jumps over the lazy dog. " * 2, "Pack my box with five dozen jugs, twice."]


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=VOCAB, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=64, max_positions=96)
    return model, CharTokenizer(VOCAB)


def test_a_peer_beside_kvstats_schemes_is_coded_from_the_second_position(tiny):
    # the default prefill was 16 tokens: hf:fp8's positions 0..15 were exact (KL 0) while
    # KV@4 in the same call paid for them
    model, tok = tiny
    df = kl_quality(model, tok, TEXTS, [("hf:fp8", None), ("KV", 4)], mode="decode", progress=False)
    for name in ("hf:fp8", "KV"):
        kl = df[(df.scheme == name) & (df.position >= 1) & (df.position < 16)].kl.to_numpy()
        assert kl.size == 2 * 15 and np.all(kl > 1e-9), (name, kl.min())
    # the one-token prefill: position 0 reads its own raw key for the peer (documented)
    assert np.all(df[(df.scheme == "hf:fp8") & (df.position == 0)].kl.to_numpy() < 1e-12)


def test_a_longer_prefill_beside_kvstats_schemes_is_refused_and_alone_allowed(tiny):
    model, tok = tiny
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(ValueError, match=r"prefill_tokens must be 1 when transformers peers \['hf:fp8'\] "
                                             r"run beside kvstats schemes.*exact \(KL 0\).*received "
                                             r"prefill_tokens=16"):
            kl_quality(model, tok, TEXTS, [("hf:fp8", None), ("KV", 4)], mode="decode", prefill_tokens=16,
                       progress=False)
    finally:
        hook.remove()
    assert calls == []                         # refused before any forward pass
    # a peer alone, asked for explicitly (fp8 calibrated on a longer prompt): its prefill
    # positions are exact, as the docstring says
    alone = kl_quality(model, tok, TEXTS[:1], "hf:fp8", mode="decode", prefill_tokens=8, progress=False)
    assert np.all(alone.kl.to_numpy()[:8] < 1e-12) and np.all(alone.kl.to_numpy()[8:] > 1e-9)
    # kvstats schemes alone keep the 16-token default (the same numbers as asked for)
    a = kl_quality(model, tok, TEXTS[:1], "KV", 4, mode="decode", progress=False)
    b = kl_quality(model, tok, TEXTS[:1], "KV", 4, mode="decode", prefill_tokens=16, progress=False)
    np.testing.assert_array_equal(a.kl.to_numpy(), b.kl.to_numpy())


def test_texts_beyond_the_context_are_refused(tiny):
    model, tok = tiny
    long = "x" * 120                           # 121 tokens with the BOS, context 96
    with pytest.raises(ValueError, match=r"texts must fit the model's context of max_position_embeddings=96 "
                                         r"token positions: item 1 needs 121, longer than the model's context; "
                                         r"pass max_tokens <= 96"):
        kl_quality(model, tok, [TEXTS[1], long], "KV", 4, progress=False)
    df = kl_quality(model, tok, [TEXTS[1], long], "KV", 4, max_tokens=96, progress=False)
    assert df.position.max() == 94             # 96 tokens, 95 predicted positions


def test_repeated_texts_are_refused(tiny):
    # three copies of one text gave n_texts 3 and se_kl_text ~1e-20: one unit counted thrice
    model, tok = tiny
    with pytest.raises(ValueError, match=r"texts must be distinct token streams .*item 1 repeats item 0, "
                                         r"item 2 repeats item 0"):
        kl_quality(model, tok, [TEXTS[0]] * 3, "KV", 2, progress=False)
    # equal once truncated: the same stream
    with pytest.raises(ValueError, match=r"texts \(each truncated to max_tokens=8\) must be distinct.*"
                                         r"item 1 repeats item 0"):
        kl_quality(model, tok, ["The quick one", "The quick two"], "KV", 2, max_tokens=8, progress=False)
    s = summarize_quality(kl_quality(model, tok, TEXTS, "KV", 2, progress=False))
    assert int(s.n_texts.iloc[0]) == 2 and s.se_kl_text.iloc[0] > 0
