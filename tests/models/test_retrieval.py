"""Passkey retrieval: prompts, scoring, the paired statistics, and the run loop on a tiny
random Llama (no download); one real-model check behind the ``model`` marker."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from kvstats.models.retrieval import (PasskeyPrompt, common_prefix, config_label, extract_answer,
                                      haystack_ids, loss_upper_bound, make_prompt, make_prompts,
                                      mcnemar_exact, run_retrieval, summarize_retrieval,
                                      wilson_interval)

VOCAB = 300
EOS = 299


class CharTokenizer:
    """One id per character (code points >= 256 become '?'); a toy chat template."""

    eos_token_id = EOS

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [o if o < 256 else ord("?") for o in map(ord, text)]}

    def decode(self, ids):
        return "".join(chr(i) if i < 256 else "" for i in ids)

    def convert_tokens_to_ids(self, token):
        return EOS if token == "<|im_end|>" else None

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<user>{m['content']}</user>" for m in messages) + "<assistant>"


TOK = CharTokenizer()
HAY = TOK("first line\nsecond line\nthird line\nfourth line\n" * 10)["input_ids"]


# ---------------------------------------------------------------------- prompts
@pytest.mark.parametrize("depth", [0.0, 0.33, 0.57, 1.0])
def test_needle_sits_on_a_line_break_near_the_depth(depth):
    p = make_prompt(TOK, HAY, len(HAY), depth, "12345", chat=False)
    body = TOK.decode(HAY)
    needle = "\nThe pass key is 12345. Remember it. 12345 is the pass key.\n"
    assert p.text.count(needle) == 1
    start = p.text.index(needle)
    before = p.text[:start].split("\n\n", 1)[1]            # after the instruction
    assert body.startswith(before) and (before == "" or before.endswith("\n"))
    # the needle is at the last line break at or before the requested character
    assert depth * len(body) - 12 <= len(before) <= depth * len(body) + 1e-9
    assert abs(p.realized_depth - len(before) / len(body)) < 1e-12
    assert p.text.endswith("What is the pass key?\nThe pass key is")


@pytest.mark.parametrize("text", ["first line\nsecond line\n\nthird\n", "no break at all", "\nx\n\n"])
def test_needle_goes_to_the_last_line_boundary_at_or_before_every_depth(text):
    # the contract: realized_depth = characters of the filler before the needle / characters,
    # at the last line boundary (a line's start or its end, before its break) at or before
    # round(depth · characters). A depth landing on a line's break went to the start of that
    # line (0.5 of "one\ntwo\nthree\n" gave 0.286, not 0.5)
    hay = TOK(text)["input_ids"]
    n = len(text)
    breaks = [i for i, ch in enumerate(text) if ch == "\n"]
    boundaries = {0, n, *breaks, *(i + 1 for i in breaks)}
    needle = "\nThe pass key is 1. Remember it. 1 is the pass key.\n"
    for pos in range(n + 1):
        for depth in (pos / n, min(1.0, (pos + 0.49) / n)):      # every character, and its rounding
            p = make_prompt(TOK, hay, n, depth, "1", chat=False)
            start = p.text.index(needle)
            before = p.text[:start].split("\n\n", 1)[1]
            expected = max(b for b in boundaries if b <= pos)
            assert before == text[:expected] and p.text[start + len(needle):].startswith(text[expected:])
            assert p.realized_depth == expected / n
    assert make_prompt(TOK, TOK("one\ntwo\nthree\n")["input_ids"], 14, 0.5, "1", chat=False).realized_depth == 0.5


def test_chat_prompt_uses_the_template_and_ends_with_the_answer_prefix():
    p = make_prompt(TOK, HAY, 40, 0.5, "777", offset=5)
    assert p.text.startswith("<user>There is a pass key hidden") and p.text.endswith("<assistant>The pass key is")
    assert TOK.decode(HAY[5:45]).replace("\n", "") in p.text.replace("\n", "").replace(
        "The pass key is 777. Remember it. 777 is the pass key.", "")
    assert (p.length, p.offset, p.passkey) == (40, 5, "777")


@pytest.mark.parametrize("kw,err", [(dict(passkey="12a"), ValueError), (dict(passkey=""), ValueError),
                                    (dict(length=0), ValueError), (dict(depth=1.5), ValueError),
                                    (dict(offset=len(HAY)), ValueError), (dict(chat=1), TypeError)])
def test_make_prompt_rejects_bad_arguments(kw, err):
    args = dict(length=10, depth=0.5, passkey="123", offset=0, chat=False) | kw
    with pytest.raises(err, match=next(iter(kw))):
        make_prompt(TOK, HAY, args.pop("length"), args.pop("depth"), args.pop("passkey"), **args)


def test_make_prompts_draws_every_prompt_independently_and_is_seeded():
    # the prompt is the unit of the tests: no passkey or filler start shared across cells
    # (trial t of every depth shared both before, 5 draws for 25 prompts in the docs' run)
    ps = make_prompts(TOK, [50, 100], [0.0, 0.5, 1.0], 4, seed=3, haystack=HAY, chat=False)
    assert len(ps) == 2 * 3 * 4 and all(isinstance(p, PasskeyPrompt) for p in ps)
    assert [(p.length, p.depth) for p in ps[:5]] == [(50, 0.0)] * 4 + [(50, 0.5)]
    keys = np.array([p.passkey for p in ps])
    assert len(set(keys)) == 24 and all(len(k) == 5 for k in keys)
    assert len({p.offset for p in ps[:12]}) > 4       # 12 draws over 411 starts, not 4
    assert all(0 <= p.offset <= len(HAY) - p.length for p in ps)
    again = make_prompts(TOK, [50, 100], [0.0, 0.5, 1.0], 4, seed=3, haystack=HAY, chat=False)
    other = make_prompts(TOK, [50, 100], [0.0, 0.5, 1.0], 4, seed=4, haystack=HAY, chat=False)
    assert [p.text for p in again] == [p.text for p in ps] != [p.text for p in other]
    with pytest.raises(ValueError, match="lengths"):
        make_prompts(TOK, [len(HAY) + 1], [0.5], 1, haystack=HAY)
    # a single number where a list is expected: a TypeError naming the argument (was
    # Python's "object of type 'float' has no len()")
    with pytest.raises(TypeError, match=r"depths must be a sequence .*received 0.5"):
        make_prompts(TOK, [50], 0.5, 1, haystack=HAY)
    with pytest.raises(TypeError, match=r"lengths must be a sequence .*received 50"):
        make_prompts(TOK, 50, [0.5], 1, haystack=HAY)
    assert len(make_prompts(TOK, np.array([50]), (0.5,), 1, haystack=HAY)) == 1


def test_haystack_joins_texts_with_blank_lines():
    assert TOK.decode(haystack_ids(TOK, ["ab", "cd"])) == "ab\n\ncd"
    with pytest.raises(TypeError, match="texts"):
        haystack_ids(TOK, ["ab", ""])


# ---------------------------------------------------------------------- scoring
def test_answer_extraction_and_prefix_agreement():
    assert extract_answer(" 48213.<|im_end|>") == "48213"
    assert extract_answer(" 482130") == "482130"              # an extra digit is wrong
    assert extract_answer("no number") is None
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2 and common_prefix([1], [2]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert config_label(("qjl", 3)) == "qjl@3" and config_label(("kivi", 2, 32)) == "kivi@2/w32"
    assert config_label(("qjl", 3, 0, {"n_outliers": 4, "m": 64})) == "qjl@3[m=64,n_outliers=4]"
    with pytest.raises(TypeError, match="config"):
        config_label(("qjl", 3, 0, "n_outliers=4"))
    with pytest.raises(TypeError, match="config"):
        config_label("KV")


# ---------------------------------------------------------------------- statistics
def test_wilson_matches_scipy():
    # reference: scipy.stats.binomtest(k, n).proportion_ci(method="wilson")
    for n in (1, 7, 30, 120):
        for k in sorted({0, 1, n // 3, n - 1, n}):
            ref = sps.binomtest(k, n).proportion_ci(0.9, method="wilson")
            lo, hi = wilson_interval(k, n, 0.9)
            assert abs(lo - ref.low) < 1e-12 and abs(hi - ref.high) < 1e-12
    with pytest.raises(ValueError, match="k and n"):
        wilson_interval(5, 4)


def test_wilson_coverage():
    # Wilson coverage oscillates around the nominal level; at n = 40 it stays above 0.92
    # for these p (Brown, Cai & DasGupta 2001, Fig. 4). 4000 draws: band ±3 binomial sd.
    rng = np.random.default_rng(0)
    for p in (0.2, 0.5, 0.9):
        k = rng.binomial(40, p, size=4000)
        lo, hi = wilson_interval(k, 40)
        cover = np.mean((lo <= p) & (p <= hi))
        assert cover > 0.92 - 3 * np.sqrt(0.08 * 0.92 / 4000), (p, cover)


def test_mcnemar_matches_statsmodels():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(1)
    for _ in range(30):
        x, y = rng.random(25) < 0.7, rng.random(25) < rng.uniform(0.3, 0.9)
        r = mcnemar_exact(x, y)
        table = [[np.sum(x & y), np.sum(x & ~y)], [np.sum(~x & y), np.sum(~x & ~y)]]
        assert (r.b, r.c) == (table[0][1], table[1][0])
        assert abs(r.pvalue - min(1.0, mcnemar(table, exact=True).pvalue)) < 1e-12


def test_mcnemar_is_calibrated_under_the_null_and_has_power():
    rng = np.random.default_rng(2)
    reps, n = 2000, 60

    def reject(p_ref_only, p_other_only):
        u = rng.random((reps, n))
        ref = u >= p_other_only                        # ref wrong only where other-only
        other = (u < p_other_only) | (u >= p_other_only + p_ref_only)
        return np.mean([mcnemar_exact(r, o).pvalue <= 0.05 for r, o in zip(ref, other)])

    null = reject(0.1, 0.1)
    assert null <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)     # exact test: level at most alpha
    assert reject(0.2, 0.0) > 0.95                               # 12 lost answers of 60
    assert mcnemar_exact([1, 0], [1, 0]).pvalue == 1.0
    with pytest.raises(ValueError, match="reference and other"):
        mcnemar_exact([1, 0], [1])
    with pytest.raises(ValueError, match="booleans"):
        mcnemar_exact([2, 0], [1, 0])


def test_loss_bound_closed_form_and_coverage():
    # b = 0: the bound solves (1 - q)^n = alpha
    assert abs(loss_upper_bound(0, 60) - (1 - 0.05 ** (1 / 60))) < 1e-12
    assert loss_upper_bound(60, 60) == 1.0
    rng = np.random.default_rng(3)
    for q in (0.02, 0.1, 0.3):
        b = rng.binomial(50, q, size=4000)
        miss = np.mean(loss_upper_bound(b, 50) < q)
        assert miss <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000), (q, miss)
    with pytest.raises(ValueError, match="b and n"):
        loss_upper_bound(3, 2)


def _frame(correct: dict) -> pd.DataFrame:
    rows = []
    for config, c in correct.items():
        for t, ok in enumerate(c):
            rows.append(dict(trial=t, config=config, correct=bool(ok), agree_tokens=3 if ok else 1,
                             identical=bool(ok), bytes_per_token=1.0))
    return pd.DataFrame(rows)


def test_summary_verdicts():
    ref = [True] * 30
    df = _frame({"fp32": ref, "bad": [False] * 12 + [True] * 18, "few": [False] * 2 + [True] * 28,
                 "same": ref})
    s = summarize_retrieval(df).set_index("config")
    assert s.loc["bad", "verdict"] == "worse" and s.loc["bad", "ref_only"] == 12
    assert abs(s.loc["bad", "p_mcnemar"] - 2 * 0.5 ** 12) < 1e-15
    # Holm over three tests: the smallest p times 3
    assert abs(s.loc["bad", "p_holm"] - 3 * 2 * 0.5 ** 12) < 1e-15
    assert s.loc["few", "verdict"] == "not resolvable" and s.loc["few", "min_p"] == 0.5
    assert s.loc["same", "verdict"] == "not resolvable" and s.loc["same", "p_mcnemar"] == 1.0
    assert s.loc["fp32", "verdict"] == "reference" and s.loc["bad", "accuracy"] == 0.6
    lo, hi = wilson_interval(18, 30)
    assert (s.loc["bad", "acc_low"], s.loc["bad", "acc_high"]) == (lo, hi)
    # Holm, not Bonferroni: the second smallest p is multiplied by 2 (of 3), not 3
    df3 = _frame({"fp32": ref, "b12": [False] * 12 + [True] * 18, "b8": [False] * 8 + [True] * 22,
                  "same": ref})
    s3 = summarize_retrieval(df3).set_index("config")
    assert abs(s3.loc["b8", "p_holm"] - 2 * 2 * 0.5 ** 8) < 1e-15
    assert abs(s3.loc["b12", "p_holm"] - 3 * 2 * 0.5 ** 12) < 1e-15
    df7 = _frame({"fp32": [True] * 7 + [False] * 3, "mid": [False] * 6 + [True] * 4})
    assert summarize_retrieval(df7).set_index("config").loc["mid", "verdict"] == "no difference detected"
    with pytest.raises(ValueError, match="paired"):
        summarize_retrieval(df[~((df.config == "bad") & (df.trial == 0))])
    with pytest.raises(ValueError, match="reference"):
        summarize_retrieval(df, reference="fp16")


# ---------------------------------------------------------------------- the run loop
@pytest.fixture(scope="module")
def tiny_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                      eos_token_id=EOS, bos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg).eval()
    model.config._attn_implementation = "eager"
    return model


def test_run_loop_on_a_tiny_llama(tiny_llama):
    prompts = make_prompts(TOK, [60], [0.0, 1.0], 2, haystack=HAY)
    df = run_retrieval(tiny_llama, TOK, prompts, [("identity", None), ("KV", 2), ("qjl", 3, 0, {"n_outliers": 2})],
                       max_new_tokens=5)
    assert len(df) == 4 * 4 and set(df.config) == {"fp32", "identity", "KV@2", "qjl@3[n_outliers=2]"}
    assert (df.correct == [extract_answer(a) == k for a, k in zip(df.answer, df.passkey)]).all()
    ref = df[df.config == "fp32"]
    assert (ref.agree_tokens == ref.ref_tokens).all() and ref.identical.all()
    # an uncoded cache read through the quantized path gives the float32 answers exactly
    assert df[df.config == "identity"].identical.all()
    # 2-bit codes of a random model's keys change some greedy continuation
    assert not df[df.config == "KV@2"].identical.all()
    assert (df.agree_tokens <= df.ref_tokens).all() and (df.ref_tokens <= 5).all()
    assert (df[df.config != "fp32"].bytes_per_token > 0).all()
    coded = run_retrieval(tiny_llama, TOK, prompts[:1], [("identity", None)], max_new_tokens=5, prefill="coded")
    assert coded.identical.all()
    with pytest.raises(ValueError, match="prefill"):
        run_retrieval(tiny_llama, TOK, prompts, [], prefill="fp16")
    with pytest.raises(TypeError, match="prompts"):
        run_retrieval(tiny_llama, TOK, ["text"], [])
    # a bad configuration fails before any forward pass (was: after the float32 run of
    # the first prompt and the configurations before it)
    calls = []
    hook = tiny_llama.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(ValueError, match="bits must be an integer in"):
            run_retrieval(tiny_llama, TOK, prompts[:1], [("KV", 2), ("KQV", 1)])
    finally:
        hook.remove()
    assert calls == []


@pytest.mark.model
def test_fp32_cache_finds_the_passkey_at_256_tokens(smollm):
    # Measured: the float32 cache answers these prompts (experiments/retrieval.py --scan).
    model, tok = smollm
    prompts = make_prompts(tok, [256], [0.5], 1, seed=0)
    df = run_retrieval(model, tok, prompts, [])
    assert df.correct.all(), df.answer.tolist()


def test_confidence_and_alpha_are_validated():
    # confidence = 1 made the Wilson bounds NaN (z = inf); alpha was never checked
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"confidence must be in \(0.0, 1.0\)"):
            wilson_interval(3, 10, bad)
    df = _frame({"fp32": [True] * 5, "x": [False] * 5})
    with pytest.raises(ValueError, match=r"confidence must be in \(0.0, 1.0\)"):
        summarize_retrieval(df, confidence=1.0)
    with pytest.raises(ValueError, match=r"alpha must be in \(0.0, 1.0\)"):
        summarize_retrieval(df, alpha=0.0)
    with pytest.raises(TypeError, match="alpha must be a finite real number"):
        summarize_retrieval(df, alpha="0.05")


def test_offsets_reach_every_start_of_the_haystack():
    # offset of trial t: uniform over the len(haystack) - length + 1 possible starts; with
    # one token to spare both starts 0 and 1 occur (40 trials: P(one missing) = 2^-39)
    ps = make_prompts(TOK, [len(HAY) - 1], [0.5], 40, seed=0, haystack=HAY, chat=False)
    assert {p.offset for p in ps} == {0, 1}


def test_resolvable_means_rejectable_inside_the_holm_family():
    # The 2026-12-02 passkey table: 6 discordant prompts reach p = 2 * 0.5**6 = 0.031 alone,
    # but after 8 rejections Holm compares the 9th smallest of 17 with 0.05/9: no split of
    # 6 prompts could be declared worse, so the row is "not resolvable" (it read "no
    # difference detected" when min_p alone was compared with alpha). 9 discordant
    # (min p 0.0039 <= 0.05/9 = 0.0056) stay resolvable.
    ref = [True] * 24 + [False]                      # 17 configurations as in the table:
    rows = {"fp32": ref, **{f"bad{i}": [False] * 20 + [True] * 4 + [False] for i in range(8)},
            "six": [False] * 5 + [True] * 20,         # 5 lost, 1 gained
            "nine": [False] * 8 + [True] * 17,        # 8 lost, 1 gained
            **{f"same{i}": list(ref) for i in range(7)}}
    s = summarize_retrieval(_frame(rows)).set_index("config")
    assert (s.loc["six", "ref_only"], s.loc["six", "only"]) == (5, 1)
    assert (s.loc["nine", "ref_only"], s.loc["nine", "only"]) == (8, 1)
    assert s.loc["six", "min_p"] < 0.05 < s.loc["six", "min_p_holm"]
    assert s.loc["six", "verdict"] == "not resolvable"
    assert s.loc["nine", "min_p_holm"] <= 0.05 < s.loc["nine", "p_holm"]
    assert s.loc["nine", "verdict"] == "no difference detected"
    assert (s.filter(like="bad", axis=0).verdict == "worse").all()


def test_a_p_value_equal_to_alpha_is_a_rejection():
    # "Holm-adjusted p <= alpha": 4 lost answers of 4 discordant pairs, one configuration:
    # p = 2 * 0.5**4 = 0.125 exactly
    df = _frame({"fp32": [True] * 6, "x": [False] * 4 + [True] * 2})
    s = summarize_retrieval(df, alpha=0.125).set_index("config")
    assert s.loc["x", "p_holm"] == 0.125 and s.loc["x", "verdict"] == "worse"


class _Scripted:
    """A stand-in model whose greedy token at step i is script[i] (for _greedy)."""

    def __init__(self, script):
        self.script, self.calls = list(script), 0

    def __call__(self, input_ids, cache, use_cache):
        import torch

        logits = torch.zeros(1, 1, VOCAB)
        logits[0, 0, self.script[self.calls]] = 1.0
        self.calls += 1
        return type("Out", (), {"logits": logits})()


def test_greedy_answer_stops_after_the_number_or_at_an_end_token():
    from kvstats.models.retrieval import _greedy

    ids = TOK(" 4711. It is")["input_ids"]
    model = _Scripted(ids)
    # the first non-digit token after a digit ends the answer (the "." is kept)
    assert _greedy(model, TOK, None, 0, 10, {EOS}) == ids[:6] and model.calls == 6
    model = _Scripted(TOK(" ab")["input_ids"] + [EOS] + TOK("12")["input_ids"])
    assert _greedy(model, TOK, None, 0, 10, {EOS}) == TOK(" ab")["input_ids"] + [EOS]
    model = _Scripted(TOK("abcdef")["input_ids"])
    assert len(_greedy(model, TOK, None, 0, 4, {EOS})) == 4  # max_new_tokens


def test_run_seeds_prompt_i_with_seed_plus_i_and_answers_after_the_full_prompt(tiny_llama, monkeypatch):
    import kvstats.models.cache as cache_module
    import kvstats.models.retrieval as retrieval

    seeds, starts = [], []

    class Recording(cache_module.QuantizedCache):
        def __init__(self, *args, seed=0, **kw):
            seeds.append(seed)
            super().__init__(*args, seed=seed, **kw)

    def greedy(model, tokenizer, cache, first, steps, stop):
        starts.append((cache.get_seq_length(), first))
        return real_greedy(model, tokenizer, cache, first, steps, stop)

    real_greedy = retrieval._greedy
    monkeypatch.setattr(cache_module, "QuantizedCache", Recording)
    monkeypatch.setattr(retrieval, "_greedy", greedy)
    prompts = make_prompts(TOK, [40], [0.5], 3, haystack=HAY)
    for prefill in ("fp32", "coded"):
        seeds.clear(), starts.clear()
        run_retrieval(tiny_llama, TOK, prompts, [("KQV", 2), ("KV", 3)], max_new_tokens=4, seed=10,
                      prefill=prefill)
        assert seeds[-6:] == [10, 10, 11, 11, 12, 12]  # after the up-front check of each config
        # every answer (float32 and coded) starts from a cache holding the whole prompt but
        # its last token, which is fed first
        ids = [TOK(p.text)["input_ids"] for p in prompts]
        assert starts == [(len(i) - 1, i[-1]) for i in ids for _ in range(3)]
