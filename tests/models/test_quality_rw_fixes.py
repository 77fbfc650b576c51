"""Referee RW's F3, F4(a), F6 on kl_quality / summarize_quality (tiny random Llama, no download).

F3: ``window > 0`` with ``mode="prefill"`` ran and labelled its rows with the window, though
one pass keeps the text's *last* tokens in full precision for every position (RW measured,
SmolLM2 KQV@4 window 8: positions 0-7 KL 0.70 in prefill, 4e-11 in decode). F6:
``mode="decode"`` on texts of at most ``prefill_tokens + 1`` tokens ran no decode step for
any row, rows labelled decode. F4(a): concatenated single-text frames (each numbering its
text 0) were pooled into one text (RW: n_texts 1, se_kl_text NaN instead of 4 texts).
"""

import warnings

import numpy as np
import pandas as pd
import pytest

from _tiny_llama import CharTokenizer, tiny_llama
from kvstats.models import kl_quality, summarize_quality

VOCAB = 128
LONG = "The quick brown fox jumps over the lazy dog."   # 45 tokens with BOS


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=VOCAB, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, max_positions=256)
    return model, CharTokenizer(VOCAB, multiplier=31)


# ---------------------------------------------------------------- F3: window needs decode
def test_a_window_in_prefill_mode_is_refused_before_any_model_run():
    # model and tokenizer None: the check comes before either is used
    with pytest.raises(ValueError, match=r"window must be 0 with mode='prefill'.*window=8.*mode='decode'"):
        kl_quality(None, None, [LONG], "KQV", 4, window=8, progress=False)
    with pytest.raises(ValueError, match="window"):
        kl_quality(None, None, [LONG], [("kivi", 2), ("KQV", 4)], window=32, mode="prefill", progress=False)


def test_the_decode_window_is_full_precision_up_to_its_length(tiny):
    # what the refusal points to: token by token after a one-token prefill, positions 0..W-1
    # read only tokens inside the window (KL at float rounding), later ones read coded keys
    model, tok = tiny
    w = 8
    df = kl_quality(model, tok, [LONG], "KQV", 2, window=w, mode="decode", prefill_tokens=1, progress=False)
    assert (df["window"] == w).all() and (df["mode"] == "decode").all()
    assert df.kl.iloc[:w].max() < 1e-9
    assert df.kl.iloc[w:].mean() > 1e-4   # the check can fail: 2-bit codes move the distribution


# ---------------------------------------------------------------- F6: decode needs decode steps
def test_decode_on_texts_without_a_decoded_position_is_refused(tiny):
    model, tok = tiny
    # "abc": 4 tokens, rows for positions 0..2, all inside a 3-token prefill chunk
    with pytest.raises(ValueError, match=r"prefill_tokens \+ 1 = 4.*\[4\] tokens.*prefill labelled decode"):
        kl_quality(model, tok, ["abc"], "KQV", 4, mode="decode", prefill_tokens=3, progress=False)
    # the default prefill of 16 tokens on a 16-token text (RW's reproducer)
    with pytest.raises(ValueError, match="prefill labelled decode"):
        kl_quality(model, tok, ["fifteen chars.."], "KQV", 4, mode="decode", progress=False)


def test_decode_with_some_short_texts_warns_naming_them(tiny):
    model, tok = tiny
    with pytest.warns(UserWarning, match=r"1 of 2 texts \(indices \[1\]\).*no decode step"):
        df = kl_quality(model, tok, [LONG, "abc"], "KQV", 4, mode="decode", prefill_tokens=3, progress=False)
    assert sorted(df.text.unique()) == [0, 1]


def test_one_decoded_position_is_enough(tiny):
    # the boundary: prefill_tokens + 2 tokens give one row (the last) from a decode step, so
    # neither the refusal nor the warning (an off-by-one in either fails here)
    model, tok = tiny
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = kl_quality(model, tok, ["abcd"], "KQV", 2, mode="decode", prefill_tokens=3, progress=False)
    assert len(df) == 4 and (df["mode"] == "decode").all()


# ---------------------------------------------------------------- F4(a): duplicated units
def _rows(text, kl, scheme="KV"):
    return pd.DataFrame({"scheme": scheme, "bits": 2.0, "window": 0, "mode": "prefill", "text": text,
                         "position": np.arange(len(kl)), "kl": kl, "top1_agree": True,
                         "nll_ref": 1.0, "nll_quant": 1.0})


def test_concatenated_single_text_frames_are_refused_until_renumbered():
    kls = [[0.1, 0.3], [0.2, 0.2], [0.6, 0.8], [0.0, 0.4]]
    pooled = pd.concat([_rows(0, kl) for kl in kls], ignore_index=True)   # each call: text 0
    with pytest.raises(ValueError, match=r"\(scheme, bits, window, mode, text, position\) once; received 8 "
                                         r"rows.*'text': 0, 'position': 0.*renumber"):
        summarize_quality(pooled)
    fixed = pd.concat([_rows(i, kl) for i, kl in enumerate(kls)], ignore_index=True)
    s = summarize_quality(fixed).iloc[0]
    # equal lengths: se_kl_text = sd(ddof=1)/sqrt(4) of the per-text means (0.2, 0.2, 0.7, 0.2)
    means = np.array([0.2, 0.2, 0.7, 0.2])
    assert s.n_texts == 4 and s.n_positions == 8
    assert s.se_kl_text == pytest.approx(np.std(means, ddof=1) / 2, rel=1e-12)


def test_a_configuration_run_twice_is_refused_and_distinct_ones_pass():
    one = _rows(0, [0.1, 0.2])
    with pytest.raises(ValueError, match="received 4 rows sharing a key"):
        summarize_quality(pd.concat([one, one], ignore_index=True))
    both = summarize_quality(pd.concat([one, _rows(0, [0.1, 0.2], scheme="KQV")], ignore_index=True))
    assert list(both.scheme) == ["KV", "KQV"]
    with pytest.raises(ValueError, match=r"missing columns \['position'\]"):
        summarize_quality(one.drop(columns="position"))
