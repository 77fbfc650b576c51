"""Tests that kill mutants of kvstats/report/wording.py and notation.py that survived referee
T12's mutation run (/tmp/brief/T12_out.md items 2-5b, 8-8c). Each checks a sentence or cell a
reader of the report relies on; the expected text comes from the function's documented rule."""
import math

import pandas as pd

from kvstats.report.notation import _apart, _ci, _cluster_spans, _num
from kvstats.report.wording import _resolution, _tests_text, _verdict_counts


def _comp(**cols):
    comp = pd.DataFrame(cols)
    comp.attrs.update(n_tests=len(comp), alpha=0.05, correction="holm")
    return comp


def test_resolution_does_not_count_a_rejected_test_as_unable_to_reject():
    # A drawn energy test whose p (0.001) beat its median-based resolution: resolvable=False but
    # significant=True. It did reject, so the Methods' "could not have rejected even on the most
    # extreme data" count must not include it; the not-rejected unresolvable sign row is counted.
    comp = _comp(test=["energy", "sign"], resolvable=[False, False], significant=[True, False],
                 pvalue=[0.001, 0.5], verdict=["different", "not resolvable at n = 4"])
    assert _resolution(comp)["not_resolvable"] == 1


def test_ci_keeps_an_interval_whose_end_equals_the_mean():
    # Only a degenerate interval (mean == low == high) prints as a point; an all-0 fraction metric
    # with upper bound 0.3 is an interval and must show it (and likewise a mean at the top end).
    assert _ci(0.0, 0.0, 0.3) == "0 [0, 0.3]"
    assert _ci(0.3, 0.0, 0.3) == "0.3 [0, 0.3]"
    assert _ci(0.2, 0.2, 0.2) == "0.2"


def test_cluster_spans_says_the_range_of_texts_per_mean():
    # Two real cells: d=16 with 2 texts of 2 trials, d=32 with 3 texts of 2 trials. The docstring's
    # rule writes a range min–max where the cells differ: "2–3 texts per mean".
    f = pd.DataFrame({"distribution": "real", "params": "-", "dim": [16] * 4 + [32] * 6, "n_keys": 32,
                      "budget": 3.0, "scheme": "KV", "trial": list(range(4)) + list(range(6)),
                      "cluster": [0, 0, 1, 1, 0, 0, 1, 1, 2, 2]})
    assert _cluster_spans(f) == "2–3 texts per mean, 2 trials per text"
    assert _cluster_spans(f, trial_means=True).startswith("4–6 trials per mean from 2–3 texts")


def _drawn_energy(b_max):
    return _comp(test=["energy"], note=[""], max_permutations=[b_max], n_permutations=[b_max],
                 resolvable=[True], significant=[False], pvalue=[0.5], verdict=["no significant difference"])


OPTS = dict(confidence=0.95, bootstrap_resamples=1000, correction="holm", alpha=0.05,
            energy_resolution="family", energy_resamples=999, energy_stop=10)


def test_tests_text_says_raised_only_when_b_exceeds_energy_resamples():
    # energy_resolution = "family": B is raised to the family's need only when that exceeds the
    # user's energy_resamples. B = 999 = energy_resamples was not raised; B = 1999 was.
    kept = _tests_text(_drawn_energy(999), OPTS)
    assert "at most B = 999 permutations (the family resolution)" in kept
    assert "raised" not in kept
    assert "(the family resolution, energy_resamples = 999 raised to it)" in _tests_text(_drawn_energy(1999), OPTS)


def test_verdict_counts_folds_every_not_resolvable_at_into_one_count():
    # The Summary's counts: "not resolvable at B = …" and "at n = …" are one kind of verdict
    # (a limit of the design), counted together in _VERDICT_WORDS' order.
    rows = pd.DataFrame({"verdict": ["not resolvable at B = 999", "not resolvable at n = 4", "different"]})
    assert _verdict_counts(rows) == {"different": 1, "not resolvable": 2}


def test_num_boundaries_and_signs():
    # _num's rule: e-notation at |x| >= 1e4 (so 1e4 itself), exact "0" for zero, the sign of an
    # infinity kept (a dB value of an all-zero error is −inf).
    assert _num(1e4) == "1.000e+04"
    assert _num(9999.0) == "9999"
    assert _num(0.0) == "0"
    assert _num(-math.inf) == "−inf"
    assert _num(math.inf) == "+inf"
    # two equal numbers need no extra digits to be told apart: the default 4
    assert _apart(0.5, 0.5) == 4
