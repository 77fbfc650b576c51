"""The benchmarks' prompt: stdlib texts tokenized one by one, cut at n tokens."""

import pytest

from kvstats.models.texts import prompt_token_ids, stdlib_texts


def _words(text):
    return {"input_ids": [len(w) for w in text.split()]}


def test_prompt_spans_texts_in_order_and_is_cut_exactly():
    names = ["json", "re"]
    first, second = (_words(t)["input_ids"] for t in stdlib_texts(names))
    n = len(first) + 7                       # crosses into the second text
    assert prompt_token_ids(_words, n, names) == first + second[:7]
    assert prompt_token_ids(_words, 3, names) == first[:3]


@pytest.mark.parametrize("n, match", [(0, r"n_tokens must be an integer in \[1"),
                                      (10**7, "n_tokens must be at most")])
def test_prompt_length_errors_name_the_argument(n, match):
    with pytest.raises(ValueError, match=match):
        prompt_token_ids(_words, n, ["json"])


def test_a_prompt_of_exactly_all_the_tokens():
    ids = _words(stdlib_texts(["json"])[0])["input_ids"]
    assert prompt_token_ids(_words, len(ids), ["json"]) == ids
    with pytest.raises(ValueError, match=f"n_tokens must be at most {len(ids)}"):
        prompt_token_ids(_words, len(ids) + 1, ["json"])
