"""run_retrieval refuses repeated prompts (fixer G4): each prompt is one unit of
summarize_retrieval's tests, so the same prompt text twice (a list concatenated with
itself, or make_prompts called twice with one seed) is one draw counted twice; before the
fix it ran and inflated n. Refused before any forward pass, naming the repeated items.

A tiny random Llama (tests/models/_tiny_llama.py) and a character-level stand-in tokenizer.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _tiny_llama import PasskeyTokenizer, tiny_llama  # noqa: E402
from kvstats.models.retrieval import PasskeyPrompt, make_prompts, run_retrieval  # noqa: E402


Tok = PasskeyTokenizer


HAY = Tok()("one\ntwo\nthree\nfour\n" * 4)["input_ids"]


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab=100, hidden=32, layers=1, heads=2, kv_heads=1, max_positions=256)


def _refused_before_any_run(model, prompts, match):
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(ValueError, match=match):
            run_retrieval(model, Tok(), prompts, [("KV", 4)], max_new_tokens=2)
    finally:
        hook.remove()
    assert calls == []


def test_the_same_seed_twice_is_refused_naming_the_repeats(model):
    a = make_prompts(Tok(), [20], [0.0, 1.0], 1, seed=3, haystack=HAY, chat=False)
    again = make_prompts(Tok(), [20], [0.0, 1.0], 1, seed=3, haystack=HAY, chat=False)
    _refused_before_any_run(model, a + again,
                            rf"prompts must be distinct \(one unit each\); received 2 repeated: "
                            rf"prompts\[2\] = prompts\[0\] \(passkey {a[0].passkey}, length 20, depth 0.0\); "
                            rf"prompts\[3\] = prompts\[1\] \(passkey {a[1].passkey}, length 20, depth 1.0\)$")


def test_the_same_text_is_a_repeat_whatever_the_other_fields(model):
    # the model reads only the text: metadata that differs does not make a new unit
    p = PasskeyPrompt("abc " * 5, "12345", 5, 0.5, 0.5, 0)
    q = PasskeyPrompt("abc " * 5, "12345", 6, 0.25, 0.25, 3)
    _refused_before_any_run(model, [p, PasskeyPrompt("x" * 20, "1", 20, 0.5, 0.5, 0), q],
                            r"received 1 repeated: prompts\[2\] = prompts\[0\] \(passkey 12345, length 6")


def test_many_repeats_are_listed_up_to_five(model):
    p = PasskeyPrompt("abc " * 5, "12345", 5, 0.5, 0.5, 0)
    _refused_before_any_run(model, [p] * 8, r"received 7 repeated: (prompts\[\d\] = prompts\[0\] [^;]*; ){5}\.\.\.$")


def test_distinct_prompts_run_one_row_per_prompt_and_config(model):
    # the check is not over-eager: a seed's prompts are distinct, and another seed's are new
    prompts = (make_prompts(Tok(), [20], [0.0, 1.0], 2, seed=3, haystack=HAY, chat=False)
               + make_prompts(Tok(), [20], [0.0, 1.0], 2, seed=4, haystack=HAY, chat=False))
    assert len({p.text for p in prompts}) == 8
    df = run_retrieval(model, Tok(), prompts, [("KV", 4)], max_new_tokens=2)
    assert len(df) == 16 and sorted(set(df.trial)) == list(range(8))
