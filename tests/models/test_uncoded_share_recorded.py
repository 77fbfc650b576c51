"""kl_quality and run_retrieval record how much of the cache stayed uncoded.

klt codes nothing below its block (1024 tokens): a kl_quality or run_retrieval of it on
short texts measures the unquantized model. The warning passed, but the outputs did not
say so: a reader of a saved frame saw a KL of 0 as a result.
"""

import numpy as np
import pytest
import torch

from _tiny_llama import CharTokenizer, PasskeyTokenizer, tiny_llama
from kvstats.models import QuantizedCache, kl_quality, summarize_quality
from kvstats.models.retrieval import PasskeyPrompt, run_retrieval, summarize_retrieval

VOCAB = 128
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs."]


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=VOCAB, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, max_positions=512)
    return model, CharTokenizer(VOCAB, multiplier=31)


def test_kl_quality_records_the_uncoded_share(tiny):
    model, tok = tiny
    # a window needs mode="decode": token by token after a one-token prefill
    df = kl_quality(model, tok, TEXTS, [("KQV", 3), ("kivi", 2)], window=4, mode="decode", prefill_tokens=1,
                    progress=False)
    for name, bits in (("KQV", 3), ("kivi", 2)):
        shares = []
        for i, text in enumerate(TEXTS):
            cache = QuantizedCache(name, bits, seed=i, window=4)
            with torch.inference_mode():
                for token in tok(text)["input_ids"]:
                    model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
            shares.append(cache.memory_report()["uncoded_share"])
        assert df.attrs["memory"][f"{name}:{bits}"][4] == pytest.approx(np.mean(shares))
    summary = summarize_quality(df).set_index("scheme")
    # per-vector KQV codes every token beyond the window; kivi's open group of 32 tokens
    # keeps the tokens past its last full group (32 coded, a few open in a ~40-token text)
    assert summary.loc["KQV", "uncoded_share"] == 0
    assert 0 < summary.loc["kivi", "uncoded_share"] < 0.5


def test_run_retrieval_records_the_uncoded_share(tiny):
    model, _ = tiny
    prompts = [PasskeyPrompt("x" * n, "12345", n, 0.5, 0.5, 0) for n in (120, 121)]
    df = run_retrieval(model, PasskeyTokenizer(), prompts, [("KQV", 3), ("kivi", 2)], max_new_tokens=2)
    assert set(df.columns) >= {"uncoded_share"}
    assert (df[df.config == "fp32"].uncoded_share == 1.0).all()
    assert (df[df.config.str.startswith("KQV")].uncoded_share == 0).all()
    kivi = df[df.config.str.startswith("kivi")].uncoded_share
    assert ((kivi > 0) & (kivi < 0.5)).all()   # its open group beside ~96 coded tokens
    summary = summarize_retrieval(df).set_index("config")
    assert summary.loc["fp32", "uncoded_share"] == 1.0
