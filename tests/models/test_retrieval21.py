"""run_retrieval refuses prompts beyond the model's context (referee R2, finding 2), as
capture and kl_quality refuse texts: positions past max_position_embeddings run RoPE
beyond the trained range, and the answers are an extrapolating model's.

A tiny random Llama with a 64-position context; a character-level stand-in tokenizer. A
prompt of n tokens answered with m greedy tokens feeds positions 0 .. n + m - 2 (the last
answer token is never fed back): the boundary is n + m - 1 = 64.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _tiny_llama import PasskeyTokenizer, tiny_llama  # noqa: E402
from kvstats.models.retrieval import PasskeyPrompt, run_retrieval  # noqa: E402


Tok = PasskeyTokenizer


def _prompt(n):
    return PasskeyPrompt("x" * n, "12345", n, 0.5, 0.5, 0)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab=100, hidden=32, layers=1, heads=2, kv_heads=1, max_positions=64)


def test_prompts_beyond_the_context_are_refused_before_any_run(model):
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(ValueError, match=r"prompts \(with max_new_tokens=2 answer tokens\) must fit the "
                                             r"model's context of max_position_embeddings=64 token positions: "
                                             r"item 1 needs 201"):
            run_retrieval(model, Tok(), [_prompt(10), _prompt(200)], [("KV", 4)], max_new_tokens=2)
        with pytest.raises(ValueError, match="item 0 needs 65"):
            run_retrieval(model, Tok(), [_prompt(61)], [("KV", 4)], max_new_tokens=5)
    finally:
        hook.remove()
    assert calls == []                    # the first prompt was not run either


def test_a_prompt_at_the_context_runs(model):
    df = run_retrieval(model, Tok(), [_prompt(60)], [("KV", 4)], max_new_tokens=5)
    assert len(df) == 2 and (df.prompt_tokens == 60).all()
