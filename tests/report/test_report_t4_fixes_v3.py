"""Referee T4's findings on the report layer (F1-F8), each pinned by a report it read wrong.

F1 clustered tables printed the cluster means' KL p99/max as the trials'; F2 unit = "trial"
on clustered data promised "FWER <= alpha under any dependence"; F3 the report's seed and the
config's fingerprint were not in report.md; F4 the Tests line described energy tests that
did not run; F5 the pair table lacked the "not resolvable" clause docs/usage.md promises
beside an inconclusive equivalence; F6 one adjusted p printed two ways on a row; F7 rows
without a TOST counted as TOSTs, and a 0/0 reason named one all-zero arm; F8 a mixed report
described synthetic trials as clusters sharing a text.
"""

import re

import numpy as np
import pandas as pd
import pytest
from _sweep_frames import clustered_frame
from _sweep_frames import sweep_result as _result

import kvstats
from kvstats import hypothesis_report
from kvstats.analysis import aggregate_clusters, summary_table

_FAST = dict(energy_resamples=19, bootstrap_resamples=99, figures=False)


def _summary_items(md):
    body = md.split("## Summary", 1)[1].split("## Methods", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


def _methods_items(md):
    body = md.split("## Methods", 1)[1].split("## Metrics and units", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


# --- F1 ---------------------------------------------------------------------------------

def _catastrophe():
    f = clustered_frame(n_texts=12, per_text=10)
    worst = (f["scheme"] == "KQV") & (f["budget"] == 2.0) & (f["trial"] == 3)
    f.loc[worst, "kl"] = 1000.0     # one catastrophic trial of text 0
    return f


def test_clustered_tables_give_the_trials_p99_and_max(tmp_path):
    f = _catastrophe()
    rep = hypothesis_report(_result(f), tmp_path / "r", metrics=["kl"], **_FAST)
    row = rep.summary.set_index(["scheme", "budget", "metric"]).loc[("KQV", 2.0, "kl")]
    trials = f.loc[(f["scheme"] == "KQV") & (f["budget"] == 2.0), "kl"].to_numpy()
    # the labels say "the trials' KL": the worst trial, not its text's mean (~100)
    assert row["max"] == 1000.0
    assert row["p99"] == pytest.approx(np.quantile(trials, 0.99), rel=1e-12)
    assert (row["n_trials"], row["n_clusters"]) == (120, 12)
    md = rep.files["markdown"].read_text()
    header = next(line for line in md.splitlines() if line.startswith("| scheme |"))
    assert header.endswith("| kl p99 | kl max | kl tail α (95% upper) | trials | texts |")
    assert any(line.startswith("| KQV |") and "| 1000 |" in line and line.endswith("| 120 | 12 |")
               for line in md.splitlines())


@pytest.mark.filterwarnings("ignore::kvstats.analysis.clustered.TrialsAsUnitsWarning")
def test_summary_table_checks_the_trials_it_is_given():
    f = clustered_frame(n_texts=6, per_text=3)
    means = aggregate_clusters(f)
    with pytest.raises(ValueError, match="trials must be the trials whose cluster means"):
        summary_table(means, n_resamples=99, trials=f[f["trial"] != 0])
    with pytest.raises(ValueError, match="trials is for a frame of cluster means"):
        summary_table(f, n_resamples=99, trials=f)


# --- F2 ---------------------------------------------------------------------------------

def test_trial_unit_on_clustered_data_claims_no_error_rate(tmp_path):
    f = clustered_frame(n_texts=8, per_text=5)
    md = hypothesis_report(_result(f), tmp_path / "t", unit="trial", metrics=["kl"],
                           **_FAST).files["markdown"].read_text()
    family = _summary_items(md)[0]
    assert "family-wise error rate ≤" not in family and "no error-rate guarantee" in family
    rate = next(i for i in _methods_items(md) if i.startswith("Error rate:"))
    assert "no error-rate guarantee" in rate and "is at most" not in rate
    # every verdict of a test is flagged (a sign row's, and the energy rows')
    rows = [line for line in md.splitlines() if line.startswith("| KQV vs QKQV |")]
    assert rows and all(line.rstrip(" |").endswith("(trials not independent)") for line in rows)
    # the cluster means (unit = "auto") keep the bound and no flag
    auto = hypothesis_report(_result(f), tmp_path / "a", metrics=["kl"],
                             **_FAST).files["markdown"].read_text()
    assert "under any dependence" in _summary_items(auto)[0]
    assert "(trials not independent)" not in auto and "no error-rate guarantee" not in auto


# --- F3 ---------------------------------------------------------------------------------

def test_the_report_seed_and_the_config_fingerprint_are_in_the_methods(tmp_path):
    res = _result(clustered_frame(n_texts=6, per_text=2), report={"seed": 7})
    res.manifest["config_fingerprint"] = "0123456789abcdef0123"
    md = hypothesis_report(res, tmp_path / "s", metrics=["kl"], **_FAST).files["markdown"].read_text()
    sweep = next(i for i in _methods_items(md) if i.startswith("Sweep:"))
    assert "report seed 7 (bootstrap and permutations)" in sweep      # declared, not overridden
    assert "config fingerprint 0123456789ab;" in sweep


# --- F4-F6: a small paired sweep ----------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    return kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"],
                              "dims": [32], "n_keys": [64], "n_trials": 6}, executor="serial",
                             progress=False)


def test_no_energy_clause_where_no_energy_test_ran(tmp_path):
    res = kvstats.run_sweep({"schemes": ["identity", "KV"], "budgets": [3], "distributions":
                             ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 12,
                             "comparisons": [["identity", "KV"]]}, executor="serial", progress=False)
    rep = hypothesis_report(res, tmp_path / "i", comparisons=[("identity", "KV")], **_FAST)
    assert not (rep.comparisons["test"] == "energy").any()      # identity's SNR is +inf
    tests = next(i for i in _methods_items(rep.files["markdown"].read_text()) if i.startswith("Tests:"))
    assert "energy permutation test" not in tests and "B ≥" not in tests
    assert "the 6D energy test with within-pair swaps tests the joint" not in tests
    assert "no 6D energy test (no pair's 6D profile is finite)" in tests


def test_inconclusive_beside_a_blind_sign_test_says_so_in_the_table(small, tmp_path):
    # 6 pairs, a family of 2 (sign + TOST): the sign test's smallest adjusted p is 2·2⁻⁶·2 = 0.0625
    rep = hypothesis_report(small, tmp_path / "e", metrics=["phi_v"], energy=False,
                            equivalence={"phi_v": 0.2}, **_FAST)
    sign = rep.comparisons[rep.comparisons["test"] == "sign"].iloc[0]
    assert not sign["resolvable"] and sign["pvalue_adjusted"] == 0.0625
    row = next(line for line in rep.files["markdown"].read_text().splitlines()
               if line.startswith("| KQV vs KV | phi_v |"))
    assert "inconclusive" in row
    assert "(sign test not resolvable: no difference could have been shown)" in row
    # F6: the adjusted p reads as the verdict's smallest attainable p, the same number
    assert "| 0.0625 | not resolvable at n = 6 pairs (smallest attainable adjusted p 0.0625)" in row
    assert "0.062 " not in row


# --- F7 ---------------------------------------------------------------------------------

def test_rows_without_a_tost_are_counted_apart_and_name_both_zero_arms(tmp_path):
    f = clustered_frame(n_texts=20, per_text=1).assign(distribution="gaussian", params="-",
                                                       argmax_shift=0.0)
    f["cluster"] = f["trial"]
    rep = hypothesis_report(_result(f), tmp_path / "z", metrics=["argmax_shift", "kl"],
                            energy=False, equivalence={"argmax_shift": 0.1}, **_FAST)
    eq = rep.comparisons[rep.comparisons["test"] == "equivalence"]
    assert len(eq) == 2 and eq["pvalue"].isna().all()
    assert eq["note"].str.contains("KQV's 20 values and QKQV's 20 values are all 0").all()
    items = _summary_items(rep.files["markdown"].read_text())
    assert items[0].startswith(f"Family: {rep.comparisons.attrs['n_tests']} p-values")
    assert not any("equivalence tests (TOST" in i for i in items)
    assert "2 equivalence rows without a TOST, so not in the family" in "\n".join(items)


# --- F8 ---------------------------------------------------------------------------------

def test_a_mixed_report_names_each_kind_of_case_units(tmp_path):
    real = clustered_frame(n_texts=8, per_text=4)
    synthetic = clustered_frame(n_texts=32, per_text=1, seed=1).assign(distribution="gaussian",
                                                                       params="-")
    synthetic["cluster"] = synthetic["trial"]
    rep = hypothesis_report(_result(pd.concat([real, synthetic], ignore_index=True)), tmp_path / "m",
                            metrics=["kl"], **_FAST)
    md = rep.files["markdown"].read_text()
    spans = ("real cases: 8 texts per mean, 4 trials per text; synthetic cases: 32 trials per "
             "mean, each its own cluster")
    assert f"its trials averaged first ({spans})" in _summary_items(md)[0]
    unit = next(i for i in _methods_items(md) if i.startswith("Unit of observation"))
    assert spans in unit and "whose trials share the text" not in unit
    assert not re.search(r"\d+–\d+ clusters", md)
