"""The report's sentences say what the tests and tables support, pinned on constructed frames.

Each test plants a situation (a cross-budget pair, a confidence level, clustered texts,
heavy tails behind an equivalence verdict, ...) and reads the words the report prints.
"""

import json

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import METRICS
from kvstats.report import hypothesis_report
from kvstats.report.options import validate_report_options
from kvstats.report.notation import _pct
from kvstats.report.sections import build_document
from kvstats.report.wording import (EQUIVALENCE_HEAVY_NOTE, HEAVY_MARK, HEAVY_NOTE, R_CONVENTION,
                                    _heavy_summary)

from _sweep_frames import clustered_frame as _clustered_frame, make_frame
from _sweep_frames import sweep_result as _result


def _table_rows(md, first_cell):
    return [line for line in md.splitlines() if line.startswith(f"| {first_cell} |")]


def _header(md, first="scheme"):
    return next(line for line in md.splitlines() if line.startswith(f"| {first} |"))


# ---------------------------------------------------------------- what a row compares
def test_a_cross_budget_pair_names_the_budget_of_its_second_scheme(tmp_path):
    """K4V2 (3 bits) vs K4V4 (4 bits) sits in the n = 3 table: the row must say K4V4 is at
    n = 4, or its "mean b" reads as K4V4 at 3 bits."""
    f = make_frame({("K4V2", 3): 0.0, ("K4V4", 4): 1.0}, n=30, seed=11)
    with pytest.warns(UserWarning, match="no comparison"):   # the config names no pair; the call does
        result = _result(f, ("K4V2", "K4V4"))
    rep = hypothesis_report(result, tmp_path, figures=False,
                            comparisons=[("K4V2", "K4V4")], energy_resamples=19)
    md = rep.files["markdown"].read_text()
    label = "K4V2 vs K4V4 (K4V4 at n = 4)"
    rows = _table_rows(md, label)
    assert len(rows) == len(METRICS) + 1                      # every metric and the energy row
    assert not _table_rows(md, "K4V2 vs K4V4")
    # a same-budget pair keeps the plain label
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=12)
    md = hypothesis_report(_result(g), tmp_path / "same", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert len(_table_rows(md, "KQV vs QKQV")) == len(METRICS) + 1 and " at n = " not in md
    # no closed form for these schemes: the theory section says why, not "at integer budgets"
    assert "none of the schemes that have one" in rep.files["markdown"].read_text()


# ---------------------------------------------------------------- levels and methods
@pytest.mark.parametrize("level, text", [(0.95, "95%"), (0.975, "97.5%"), (0.999, "99.9%"),
                                         (0.57, "57%"), (0.9, "90%")])
def test_confidence_levels_print_exactly(level, text):
    # int(0.975 * 100) = 97 and int(0.57 * 100) = 56: a truncated level misstates the interval
    assert _pct(level) == text


def test_header_states_the_confidence_level_the_tables_use(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=13)
    rep = hypothesis_report(_result(f, report={"confidence": 0.975, "alpha": 0.0125,
                                               "equivalence": {"kl": 0.5}}),
                            tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    assert "Means with 97.5% bootstrap CIs (BCa, 99 resamples;" in md
    # the TOST intervals are 1 − 2α = 97.5%, not the rounded "98%"
    assert "unadjusted 97.5% intervals" in md and "97.5% CI [" in md and "98%" not in md


def test_r_states_its_interval_method_and_that_it_is_unadjusted(tmp_path):
    assert "Newcombe" in R_CONVENTION and "not adjusted for the family" in R_CONVENTION
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3}, n=30, seed=14)
    md = hypothesis_report(_result(f), tmp_path, figures=False,
                           energy_resamples=19, pairing="none").files["markdown"].read_text()
    assert R_CONVENTION in md


# ---------------------------------------------------------------- heavy tails
def test_heavy_summary_counts_each_printed_table_apart():
    summary = pd.DataFrame({"metric": ["kl", "kl", "phi_t"], "ci_reliable": [False, True, True]})
    theory = pd.DataFrame({"quantity": ["k_snr_db", "ip_var_ratio_same_budget", "k_snr_bound",
                                        "v_snr_bound", "k_snr_bound"],
                           "ci_reliable": [True, False, True, True, False]})
    assert _heavy_summary(summary, theory) == (
        "1 of 3 summary means are marked ‡ (kl: 1); 1 of 2 rows of \"Theory beside "
        "measurement\", 1 of 3 rows of \"Distance to the rate–distortion limit\".")
    light = summary.assign(ci_reliable=True)
    assert _heavy_summary(light, theory[:2]).startswith(
        "no summary mean is marked ‡; 1 of 2 rows of \"Theory beside measurement\".")


def test_heavy_note_does_not_claim_an_infinite_variance_for_bounded_metrics():
    assert "bounded metric" in HEAVY_NOTE and "finite variance" in HEAVY_NOTE
    assert "The \"kl tail α\" column is that bound for KL" in HEAVY_NOTE
    assert "the variance is infinite at 95% confidence" not in HEAVY_NOTE


def test_heavy_note_says_which_tail_indices_are_not_computed():
    """The note points at summary.csv's tail_index for every metric; an SNR in dB is screened
    on both tails from its median, so a heavy left tail (a Pareto(0.7) error, snr_t = 5 − it)
    is marked as the same tail of a nonnegative metric (phi_t = it) is, as the summary
    computes it (tests/analysis/test_signed_tail_screen.py)."""
    from kvstats.analysis import summary_table

    f = make_frame({("KQV", 2): 0.0}, n=200, seed=3)
    pareto = np.random.default_rng(2).pareto(0.7, len(f))
    f["snr_t"] = 5.0 - pareto          # a heavy left tail, some values below 0
    f["phi_t"] = pareto                # the same tail, nonnegative
    s = summary_table(f, n_resamples=99).set_index("metric")
    assert s.loc["snr_t", "tail_index"] < 2 and not s.loc["snr_t", "ci_reliable"]
    assert s.loc["phi_t", "tail_index"] < 2 and not s.loc["phi_t", "ci_reliable"]
    assert "for a nonnegative metric its right tail's, from 0" in HEAVY_NOTE
    assert "for an SNR in dB (or any metric with a negative value) the smaller of its two " \
           "tails' bounds, each from the excesses over the median at 97.5%" in HEAVY_NOTE
    assert "NaN, not screened, where a value is non-finite or a tail has fewer than 10" in HEAVY_NOTE
    assert "computed only where every value is ≥ 0" not in HEAVY_NOTE


def _pareto_kl(f, seed):
    """KQV's KL Pareto-tailed (Hill α ≈ 1), QKQV's exponential: one heavy mean is enough."""
    rng = np.random.default_rng(seed)
    heavy = (f["scheme"] == "KQV").to_numpy()
    f.loc[heavy, "kl"] = 1.0 + rng.pareto(1.0, heavy.sum())
    f.loc[~heavy, "kl"] = 1.0 + rng.exponential(1.0, (~heavy).sum())
    return f


def test_a_ratio_equivalence_on_heavy_tailed_means_is_marked(tmp_path):
    f = _pareto_kl(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=400, seed=15), 16)
    rep = hypothesis_report(_result(f, report={"equivalence": {"kl": 1.0}}), tmp_path,
                            figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    kl = next(line for line in _table_rows(md, "KQV vs QKQV") if "| kl |" in line)
    assert kl.rstrip(" |").endswith(HEAVY_MARK)
    assert EQUIVALENCE_HEAVY_NOTE in md
    item = next(line for line in md.splitlines() if line.startswith("- ") and ", kl: **" in line)
    assert f"** {HEAVY_MARK} (" in item
    # a light-tailed KL: no mark, no note
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=400, seed=15)
    md = hypothesis_report(_result(g, report={"equivalence": {"kl": 1.0}}), tmp_path / "light",
                           figures=False, energy_resamples=19).files["markdown"].read_text()
    assert EQUIVALENCE_HEAVY_NOTE not in md
    assert not next(line for line in _table_rows(md, "KQV vs QKQV")
                    if "| kl |" in line).rstrip(" |").endswith(HEAVY_MARK)
    # a rank margin needs no moments: no mark on the same heavy data
    md = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.2}, "equivalence_test": "rank"}),
                           tmp_path / "rank", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert EQUIVALENCE_HEAVY_NOTE not in md
    assert not next(line for line in _table_rows(md, "KQV vs QKQV")
                    if "| kl |" in line).rstrip(" |").endswith(HEAVY_MARK)


# ---------------------------------------------------------------- the unit of observation
def test_on_cluster_means_counts_theory_and_figures_say_texts(tmp_path):
    f = _clustered_frame()
    result = _result(f)
    rep = hypothesis_report(result, tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    header = _header(md)
    # the means' 12 texts, beside the 120 trials the KL p99, max and tail α are of
    assert header.rstrip(" |").endswith("| kl tail α (95% upper) | trials | texts")
    row = _table_rows(md, "KQV")[0]
    assert row.rstrip(" |").endswith("| 120 | 12")
    assert "every measured mean and interval is over texts (each one's trials averaged first)" in md
    assert "except the measured k_snr_db" not in md
    # the Shannon–φ note, whose words are per trial, is followed by the unit of its points
    opts = validate_report_options({"bootstrap_resamples": 99})
    trials = pd.read_csv(rep.files["comparisons_trial_level"])
    fig = tmp_path / "shannon_phi_k_x.png"
    doc = build_document(result, rep.summary, rep.comparisons, rep.crossovers, rep.theory,
                         {"shannon_phi_k_x": fig}, opts, "unit", trials)
    assert "every mean, cross and faint dot of these figures is over texts" in doc.markdown(tmp_path)
    doc = build_document(result, rep.summary, rep.comparisons, rep.crossovers, rep.theory,
                         {"shannon_phi_k_x": fig}, opts, "unit", None)
    assert "faint dot of these figures is over" not in doc.markdown(tmp_path)


def test_cluster_unit_text_says_whether_the_texts_pairing_is_used(tmp_path):
    """On cluster means every scheme sees the same texts: the paired design says it pairs
    them; the two-sample design says it ignores the pairing and what that does."""
    f = _clustered_frame()
    units = {}
    for pairing in ("trial", "none"):
        md = hypothesis_report(_result(f), tmp_path / pairing, figures=False, energy_resamples=19,
                               pairing=pairing).files["markdown"].read_text()
        units[pairing] = next(line for line in md.splitlines()
                              if line.startswith("- Unit of observation"))
    assert "The tests pair the two schemes' means of each cluster" in units["trial"]
    assert "ignore that pairing" not in units["trial"]
    assert ("two schemes' cluster means are pairs; the two-sample tests (pairing = \"none\") "
            "ignore that pairing, which makes a test conservative where the paired means are "
            "positively correlated and anti-conservative where they are negatively correlated"
            ) in units["none"]

def test_synthetic_unit_text_qualifies_the_pairing(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=17)
    md = hypothesis_report(_result(f), tmp_path, figures=False,
                           energy_resamples=19, pairing="none").files["markdown"].read_text()
    unit = next(line for line in md.splitlines() if line.startswith("- Unit of observation"))
    assert unit.startswith("- Unit of observation: the trial (an independent K, V, q")
    assert "conservative where the paired values are positively correlated" in unit
    assert "not anti-conservative" not in unit
    # the measured pairing: make_frame draws every cell independently, so ρ is near 0 both ways
    rho = unit.split("Spearman ρ of 9 of the 9 Mann–Whitney rows has median ")[1]
    median = float(rho.split(",")[0])
    assert abs(median) < 0.4 and "below −0.1; where ρ < 0 a p-value may be too small." in unit
    assert _header(md).rstrip(" |").endswith("| trials")


def test_real_trials_one_per_text_are_called_texts(tmp_path):
    """A real capture with one trial per text (e.g. one layer and KV head): not clustered,
    yet the unit is the text, not 'an independent K, V, q'."""
    f = _clustered_frame(n_texts=20, per_text=1)
    md = hypothesis_report(_result(f), tmp_path, figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    unit = next(line for line in md.splitlines() if line.startswith("- Unit of observation"))
    assert unit.startswith("- Unit of observation: the text (of a real capture)")
    assert "independent K, V, q" not in unit
    # without a cluster column nothing says the trials' texts differ: optimistic, said so
    g = f.drop(columns="cluster")
    md = hypothesis_report(_result(g), tmp_path / "nocluster", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert "records no text (cluster) per real trial" in md
    assert "optimistic p-values (too small) where such trials are positively correlated" in md


def test_a_real_only_sweep_does_not_count_synthetic_queries(tmp_path):
    path = tmp_path / "cap.npz"
    x = np.ones((2, 1, 1, 16, 8), np.float32)
    np.savez(path, K=x, V=x, q=np.ones((2, 1, 3, 16, 8), np.float32), meta=json.dumps({}))
    real = {"name": "real", "params": {"path": str(path)}}
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=18,
                   case=("real", f"path={path}", 8, 16))
    md = hypothesis_report(_result(f, distributions=(real,)), tmp_path / "rep", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    sweep = next(line for line in md.splitlines() if line.startswith("- Sweep:"))
    assert "synthetic" not in sweep and "a real trial's queries" in sweep
    md = hypothesis_report(_result(f.assign(distribution="gaussian", params="-")), tmp_path / "syn",
                           figures=False, energy_resamples=19).files["markdown"].read_text()
    sweep = next(line for line in md.splitlines() if line.startswith("- Sweep:"))
    assert "1 query per synthetic trial" in sweep and "real trial" not in sweep

def test_header_states_the_scope_of_the_tests(tmp_path):
    """The population a test generalises to is said: the generator for synthetic cases, texts
    in the one captured model for real ones; never other models or downstream accuracy."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=40)
    md = hypothesis_report(_result(f), tmp_path, figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    scope = next(line for line in md.splitlines() if line.startswith("- Scope:"))
    assert "further trials of its generator" in scope and "captured model" not in scope
    assert "not evidence about other distributions, dimensions, models or downstream accuracy" in scope
    path = tmp_path / "cap.npz"
    x = np.ones((2, 1, 1, 16, 8), np.float32)
    np.savez(path, K=x, V=x, q=np.ones((2, 1, 3, 16, 8), np.float32), meta=json.dumps({}))
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=42,
                   case=("real", f"path={path}", 8, 16))
    real = {"name": "real", "params": {"path": str(path)}}
    md = hypothesis_report(_result(g, distributions=(real,)), tmp_path / "real", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    scope = next(line for line in md.splitlines() if line.startswith("- Scope:"))
    assert "texts drawn like its texts, in the one captured model at the captured layers" in scope
    assert "generator" not in scope



def test_header_says_which_cells_its_versions_do_not_describe_and_names_the_scripts_files(tmp_path):
    """The manifest's versions are the calling process's: cells computed by workers running
    other code (n_other_code) are said to be outside them, and the files a script's own
    registrations run are named with their hashes, as a plugin's are; a manifest from before
    these keys renders as before."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=43)

    def header(**extra):
        res = _result(f)
        res.manifest.update(extra)
        md = hypothesis_report(res, tmp_path / str(len(list(tmp_path.iterdir()))), figures=False,
                               energy_resamples=19).files["markdown"].read_text()
        return md.split("## Metrics and units")[0]

    old = header()
    assert "other code" not in old and "User code" not in old
    versions = next(line for line in header(n_other_code=2).splitlines() if line.startswith("- Host:"))
    assert versions.endswith("2 cells were computed by workers running other code: the versions above "
                             "are this process's, not theirs (each such cell's code is in its entry "
                             'of manifest.json\'s "cells", under "code").')
    assert "1 cell was computed by a worker running other code" in header(n_other_code=1)
    assert "other code" not in header(n_other_code=0)
    # cells of another numerical environment (n_other_env): same values up to the last bits
    versions = next(line for line in header(n_other_code=1, n_other_env=3).splitlines()
                    if line.startswith("- Host:"))
    assert versions.endswith('under "code"). 3 cells were computed on another CPU or BLAS '
                             "(`n_other_env`): their last bits may differ.")
    assert "another CPU" not in header(n_other_env=0) and "another CPU" not in old
    sha = "ab" * 32
    code = {"plugins": [], "schemes": {"minmax": None}, "distributions": {},
            "script": [{"module": "helpers", "file": "/home/u/helpers.py", "sha256": sha},
                       {"module": "run", "file": "/home/u/run.py", "sha256": "cd" * 32}]}
    line = next(x for x in header(user_code=code).splitlines() if x.startswith("- User code"))
    assert line.endswith("scheme minmax: registered by the script; the script's registrations run "
                         f"/home/u/helpers.py (SHA-256 {sha[:12]}), /home/u/run.py (SHA-256 {'cd' * 6}).")
    # a manifest written before "script" existed
    line = next(x for x in header(user_code={k: v for k, v in code.items() if k != "script"}).splitlines()
                if x.startswith("- User code"))
    assert line.endswith("scheme minmax: registered by the script.")



def test_a_mean_of_per_vector_db_far_from_the_pooled_snr_is_named_and_the_pooled_shown(tmp_path):
    """kivi keeps its last tokens in float16: its snr_k (mean of per-vector dB) is far above
    its coded keys' SNR (docs/measurement.md). The summary carries the pooled SNRs, the
    scheme tables show them beside snr_k/snr_v, and the report names every (case, n,
    scheme, place) whose two differ by more than 1 dB, and no other."""
    from kvstats.analysis import summary_table

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=44)
    f["snr_k_pooled"] = f["snr_k"] - np.where(f["scheme"] == "QKQV", 7.6, 0.1)
    f["snr_v_pooled"] = f["snr_v"] - 0.2
    s = summary_table(f, n_resamples=99).set_index(["scheme", "metric"])
    for scheme in ("KQV", "QKQV"):
        for col in ("snr_k_pooled", "snr_v_pooled"):
            assert s.loc[(scheme, col), "mean"] == pytest.approx(f.loc[f.scheme == scheme, col].mean(), rel=1e-12)
    md = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19).files["markdown"].read_text()
    head = _header(md).split(" | ")
    assert head[3:9] == ["snr_k", "snr_k pooled", "phi_k", "snr_v", "snr_v pooled", "phi_v"]
    row = _table_rows(md, "QKQV")[0].split(" | ")
    assert row[4].startswith(f"{s.loc[('QKQV', 'snr_k_pooled'), 'mean']:.4g} [")
    gap = next(line for line in md.splitlines() if line.startswith("The mean of per-vector dB"))
    k = s.loc[("QKQV", "snr_k"), "mean"], s.loc[("QKQV", "snr_k_pooled"), "mean"]
    assert gap.startswith("The mean of per-vector dB is more than 1 dB from the pooled SNR for 1 of 4 "
                          f"(case, n, scheme, place)s: QKQV, n = 2, K: {k[0]:.2f} vs pooled {k[1]:.2f} dB "
                          "(gaussian, d = 64, N = 128). ")
    # neither SNR is declared the typical vector's (a heavy tail sets the pooled one by a few
    # large vectors, a near-exact window lifts the mean of dB): both rows are to be read
    assert "the mean of per-vector dB weighs every vector alike" in gap
    assert "the pooled SNR by energy" in gap and "Neither need be the SNR of a typical coded vector" in gap
    assert "read both rows of their tests (snr_k with snr_k_pooled, snr_v with snr_v_pooled)" in gap
    # results before the pooled columns: no column, no sentence
    md = hypothesis_report(_result(f.drop(columns=["snr_k_pooled", "snr_v_pooled"])), tmp_path / "old",
                           figures=False, energy_resamples=19).files["markdown"].read_text()
    assert "snr_k pooled |" not in _header(md) and "The mean of per-vector dB" not in md



# ---------------------------------------------------------------- the tests' own cells and counts
def test_ks_cells_say_not_resolvable_exactly_when_ks_could_not_have_rejected(tmp_path):
    """n = 4 vs 4: the KS test's smallest p (2/70) is above α/19, so every KS cell reads
    "(not resolvable)"; at n = 30 none does, significant or not."""
    small = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=4, seed=19)
    rep = hypothesis_report(_result(small), tmp_path, figures=False, energy_resamples=19, pairing="none")
    ks = rep.comparisons.query("test == 'ks'")
    assert not ks["resolvable"].any()
    rows = [r for r in _table_rows(rep.files["markdown"].read_text(), "KQV vs QKQV") if "6D" not in r]
    assert len(rows) == len(METRICS) and all("(not resolvable) |" in r for r in rows)
    big = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 3.0}, n=30,
                     seed=20)
    rep = hypothesis_report(_result(big), tmp_path / "big", figures=False, energy_resamples=19, pairing="none")
    assert rep.comparisons.query("test == 'ks'")["resolvable"].all()
    assert "(not resolvable)" not in rep.files["markdown"].read_text()


def test_energy_sentence_counts_early_stops_and_names_the_resolution(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 3.0}, n=30, seed=21)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    energy = rep.comparisons.query("test == 'energy'")
    early = int((energy["n_permutations"] < energy["max_permutations"]).sum())
    assert early == 1          # the null pair stops early, the separated one draws every permutation
    b_max = int(energy["max_permutations"].max())
    assert b_max > 19          # the family's need raised the configured least cap, and it says so
    assert (f"at most B = {b_max} permutations (the family resolution, energy_resamples = 19 raised "
            f"to it), each stopping after 10 exceedances: {early} of 2 stopped early") in md
    rep = hypothesis_report(_result(f), tmp_path / "fixed", figures=False, energy_resamples=19,
                            energy_resolution="fixed")
    assert "at most B = 19 permutations (fixed resolution)" in rep.files["markdown"].read_text()


def test_crossover_section_lists_crossovers_and_only_the_rest_by_budget(tmp_path):
    """KQV and QKQV swap at n = 3 (a crossover in every metric); KV is far worse at both."""
    spec = {("KQV", 2): 0.0, ("QKQV", 2): 1.5, ("KV", 2): 4.0,
            ("KQV", 3): 1.5, ("QKQV", 3): 0.0, ("KV", 3): 4.0}
    f = make_frame(spec, n=40, seed=22)
    rep = hypothesis_report(_result(f, ("KQV", "QKQV", "KV")), tmp_path, figures=False,
                            comparisons=[("KQV", "QKQV"), ("KQV", "KV"), ("QKQV", "KV")],
                            energy_resamples=19)
    md = rep.files["markdown"].read_text()
    assert f"**{len(METRICS)} crossover(s)**" in md
    # each with the bits its two schemes store (make_frame: n + 0.25), as the terminal says
    assert ("- CROSSOVER in kl for gaussian, d = 64, N = 128: KQV wins at n = 2; QKQV wins at n = 3. "
            "Bits stored per coordinate: KQV 2.25–3.25, QKQV 2.25–3.25.\n") in md
    kl = md.split("Attention KL, winners by budget (no crossover seen):")[1].split("##")[0]
    assert [line for line in kl.splitlines() if line.startswith("- ")] == [
        "- gaussian, d = 64, N = 128, KQV vs KV: n = 2: KQV; n = 3: KQV",
        "- gaussian, d = 64, N = 128, QKQV vs KV: n = 2: QKQV; n = 3: QKQV"]
    g = make_frame({k: v for k, v in spec.items() if k[0] != "QKQV"}, n=40, seed=23)
    md = hypothesis_report(_result(g, ("KQV", "KV")), tmp_path / "none", figures=False,
                           comparisons=[("KQV", "KV")], energy_resamples=19).files["markdown"].read_text()
    assert "**No crossover**" in md and "CROSSOVER" not in md


def _crossover_section(md):
    return md.split("## Crossovers of the winner across budgets")[1].split("\n## ")[0]


def test_no_crossover_is_not_claimed_where_no_budget_could_reject(tmp_path):
    """4 pairs in a family of 20: no sign test can reject (smallest p 0.125), so "**No
    crossover**" would state a finding the tests could not have made; the section says none
    can be seen, and the KL winners keep their budgets apart with a semicolon (a "not
    resolvable" verdict holds commas: "the number of pairs, 4, itself, 3:not resolvable")."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 3.0, ("KQV", 3): 3.0, ("QKQV", 3): 0.0}, n=4, seed=2)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    loc = rep.comparisons[rep.comparisons.test == "sign"]
    assert loc["winner"].str.startswith("not resolvable").all()       # the premise
    section = _crossover_section(rep.files["markdown"].read_text())
    assert "**No crossover can be seen**: for no case, pair and metric could a budget's test" in section
    assert "**No crossover**:" not in section
    # the KL list's label too (it read "(no crossover)"), as crossovers.csv's "can be seen"
    assert "Attention KL, winners by budget (none could be seen):" in section
    assert "(no crossover" not in section
    kl = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(kl) == 1 and kl[0].count("; n = 3: not resolvable at n = 4 pairs") == 1
    assert kl[0].startswith("- gaussian, d = 64, N = 128, KQV vs QKQV: n = 2: not resolvable at n = 4 pairs")
    # tables/crossovers.csv's winners column: the bullet's wording, split at "; " by budget
    table = pd.read_csv(rep.files["crossovers"]).set_index("metric")
    assert kl[0].endswith(": " + table.loc["kl", "winners"])
    parts = table.loc["kl", "winners"].split("; ")
    assert [p.split(": ")[0] for p in parts] == ["n = 2", "n = 3"]
    assert all(", " in p for p in parts)          # each verdict holds its commas


def test_no_crossover_names_the_budgets_that_could_not_reject(tmp_path):
    """KQV and QKQV differ on only 2 of 40 trials in kl at both budgets and in phi_k at n = 2:
    those sign tests could not have rejected (not resolvable), so "no crossover" there is a
    limit of the design; the section counts them (2 of the 9 (case, pair, metric)s, 1 blind at
    every budget) under its "**No crossover**" sentence. snr_k, identical on every trial at
    both budgets, is not resolvable too, but no design hides a win there: the values were
    equal on every unit (not counted as blind)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40, seed=8)
    for budget, metrics in ((2, ["kl", "phi_k", "snr_k"]), (3, ["kl", "snr_k"])):
        a, b = ((f.scheme == s) & (f.budget == budget) for s in ("KQV", "QKQV"))
        f.loc[b, metrics] = f.loc[a, metrics].to_numpy()
        few = f.index[b][:2]                     # 2 differing pairs: 2·2⁻² = 0.5 at best
        f.loc[few, [m for m in metrics if m != "snr_k"]] *= 1.5
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    loc = rep.comparisons[rep.comparisons.test == "sign"]
    blind = loc[loc["winner"].str.startswith("not resolvable")]
    assert sorted(zip(blind.metric, blind.budget)) == [("kl", 2.0), ("kl", 3.0), ("phi_k", 2.0),
                                                       ("snr_k", 2.0), ("snr_k", 3.0)]
    assert not loc["significant"].any()                                  # no crossover anywhere
    section = _crossover_section(rep.files["markdown"].read_text())
    n = loc["metric"].nunique()
    assert "**No crossover**: for every case, pair and metric, no two budgets" in section
    assert (f"Of the {n} (case, pair, metric)s without a crossover, 2 have a budget whose test "
            "could not have rejected (\"not resolvable\"), where a win, and so a crossover, could "
            "not have been seen; at 1 of them no budget's test could") in section


def test_an_inconclusive_equivalence_row_says_when_its_location_test_could_not_reject(tmp_path):
    """At n = 2 the sign test has no differing pair to spare (kl identical on every trial:
    not resolvable), at n = 3 it could have rejected (kl unchanged): only the n = 2 bullet of
    the equivalence section says that no difference could have been shown (the old one read
    "inconclusive", "the data show neither a difference nor equivalence", for both)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40, seed=9)
    a, b = ((f.scheme == s) & (f.budget == 2) for s in ("KQV", "QKQV"))
    f.loc[b, "kl"] = f.loc[a, "kl"].to_numpy() * (1 + 1e-13)      # equal to rounding: no pair differs
    rep = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.01}}), tmp_path, figures=False,
                            energy_resamples=19)
    comp = rep.comparisons.set_index(["test", "metric", "budget"])
    assert comp.loc[("sign", "kl", 2.0), "winner"].startswith("not resolvable")       # the premises
    assert comp.loc[("sign", "kl", 3.0), "resolvable"] and not comp.loc[("sign", "kl", 3.0), "significant"]
    assert (comp.xs("equivalence")["verdict"] == "inconclusive").all()
    md = rep.files["markdown"].read_text()
    bullets = [line for line in md.splitlines() if line.startswith("- ") and "KQV vs QKQV, kl:" in line]
    said = "** (sign test not resolvable: no difference could have been shown) (estimate"
    assert [("n = 2," in line, said in line) for line in bullets] == [(True, True), (False, False)]
    assert all("kl: **inconclusive" in line for line in bullets)
    assert ("\"inconclusive\": neither — the data show neither a difference nor equivalence (where "
            "the sign test could not have rejected, the rest of the family as observed, the row says so") in md


@pytest.mark.parametrize("p_needed", [1.0, 0.5, 0.25, 0.0625, np.nextafter(0.0625, 0), 0.0624,
                                      0.05 / 104, 0.05 / 720, 2.0 ** -30, 0.05 / 3, 1e-12])
def test_sign_pairs_needed_is_the_fewest_pairs_whose_extreme_p_reaches_the_need(p_needed):
    """Reference: scipy's exact binomial test on k of k pairs one way (the sign test's most
    extreme data), the fewest k reaching p_needed, found by counting up."""
    from scipy.stats import binomtest

    from kvstats.analysis.resolution import _sign_pairs_needed

    k = next(k for k in range(1, 80) if binomtest(k, k, 0.5).pvalue <= p_needed)
    assert _sign_pairs_needed(p_needed) == k


def test_paired_header_says_how_many_differing_pairs_a_sign_test_needs(tmp_path):
    """A "not resolvable … only k of the n pairs differ" row says what limits it; the header
    says how many differing pairs would do (here 20 p-values: 0.05/20, 2·2⁻¹⁰ ≤ 0.0025 < 2·2⁻⁹),
    and the unpaired header, which has no sign test, does not. At 20 pairs the energy tests
    are exact, with the sign test's floor 2·2⁻ᵏ, so they share its need and no B is named."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=20, seed=3)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    assert rep.comparisons.attrs["n_tests"] == 20
    md = rep.files["markdown"].read_text()
    assert ("A test that can reach p ≤ 0.0025 can be rejected whatever the rest of the family shows "
            "(the correction's first step; a sign test or an exact energy test: 10 pairs that "
            "differ, its smallest p being 2·2⁻ᵏ on k of them)") in md
    assert json.loads(rep.files["json"].read_text())["resolution"]["sign_pairs_needed"] == 10
    unpaired = hypothesis_report(_result(f), tmp_path / "none", figures=False, energy_resamples=19,
                                 pairing="none").files["markdown"].read_text()
    assert "a sign test:" not in unpaired
    # 6 trials: the 10 it needs are more than any pair has, which the line says (it read as if
    # a case of 6 trials had 10 pairs that differ)
    few = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=6, seed=3)
    md = hypothesis_report(_result(few), tmp_path / "few", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert ("a sign test or an exact energy test: 10 pairs that differ, more than the 6 units of "
            "any pair here, its smallest p being 2·2⁻ᵏ on k of them)") in md
    assert "more than the" not in rep.files["markdown"].read_text()


def test_equivalence_section_names_the_tested_region(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=60, seed=24)
    md = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.5}}), tmp_path, figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert ("the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (paired Fieller-type TOST: "
            "t-tests of aᵢ − r·bᵢ over the pairs at each margin r, each also with the variance at "
            "the margin, score-type, and rejected only where both reject)") in md
    # what a TOST row's resolution says (docs/statistics.md, "Resolution of a TOST row"): a
    # ratio TOST always could conclude; a rank TOST's False is "not shown", and marked
    assert ("A ratio TOST can always conclude equivalence from two units a side; an inconclusive rank TOST row "
            "is marked \"not known to be resolvable\" when no data of its size are known to reach "
            "α after the adjustment") in md
    # the default design is paired: tost_rank(paired=True) has Munzel's (1999) paired variance,
    # not Brunner–Munzel's two-sample one, and its θ compares all values, not within pairs
    rank = {"equivalence": {"kl": 0.2}, "equivalence_test": "rank"}
    md = hypothesis_report(_result(f, report=rank), tmp_path / "rank", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert ("θ = P(a > b) + ½P(a = b) within 0.5 ± δ, θ over all values of a and b, not within "
            "pairs (paired rank TOST: the variance of the pairs' differenced placements, df n − 1, "
            "Munzel 1999; each margin also with the variance at the margin, score-type") in md
    assert "Brunner–Munzel TOST" not in md
    md = hypothesis_report(_result(f, report=rank), tmp_path / "rank_none", figures=False,
                           energy_resamples=19, pairing="none").files["markdown"].read_text()
    assert "θ = P(a > b) + ½P(a = b) within 0.5 ± δ (Brunner–Munzel TOST; each margin also" in md
    md = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.5}}), tmp_path / "ratio_none",
                           figures=False, energy_resamples=19, pairing="none").files["markdown"].read_text()
    assert "the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (Fieller-type TOST; each margin" in md


def test_theory_rows_read_in_db_or_as_a_ratio(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=30, seed=25)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    theory = [line for line in md.splitlines() if line.startswith("| gaussian, d = 64, N = 128 |")]
    snr = [line for line in theory if "| k_snr_db |" in line]
    ratio = [line for line in theory if "| ip_var_ratio" in line]
    assert snr and ratio
    # the means' intervals name their method, and the exact one of an all-0 fraction
    # (with its value at this report's own m, 30 trials: 1 − 0.025^(1/30) = 0.116; it read
    # "0.0362 at m = 100" whatever m was)
    assert ("bootstrap CIs (BCa, 99 resamples; a fraction metric (recall@5, argmax shift) whose m "
            "values (one per trial, or per text on cluster means) are all 0 gets the exact [0, 1 − "
            "((1 − c)/2)^(1/m)] at confidence c (here 0.116 at m = 30, c = 0.95), all 1 its mirror).") in md
    assert "0.0362" not in md
    # the intervals name their method
    assert "Measured: the mean (for the ratios, the ratio of the two means) with a 95% BCa " \
        "bootstrap CI (99 resamples" in md
    # the ratio's interval resamples the shared trials as pairs, and says so
    assert "a ratio resamples as pairs the units it divides (trials; texts on a clustered capture)" in md
    assert rep.theory.loc[rep.theory.quantity.str.startswith("ip_var_ratio"), "paired"].all()
    assert all(line.rstrip(" |").endswith(" dB") for line in snr)
    # the gap carries the measured interval (the prediction is exact): shifted, or divided
    k = rep.theory.query("quantity == 'k_snr_db' and budget == 2 and scheme == 'KQV'").iloc[0]
    gap = (f"{k.measured - k.predicted:+.3f} [{k.ci_low - k.predicted:+.3f}, "
           f"{k.ci_high - k.predicted:+.3f}] dB")
    assert any(line.startswith("| gaussian, d = 64, N = 128 | 2 | k_snr_db | KQV |")
               and line.rstrip(" |").endswith(gap) for line in snr), gap
    assert "| measured vs predicted [95% CI] |" in md
    # the measured per-key dB lies above the predicted dB of the mean error (Jensen): said, so that
    # an interval excluding the prediction on Gaussian keys is not read as the closed form failing
    assert "exact for Gaussian keys" not in md.replace("the relative MSE is exact for Gaussian keys", "")
    assert "by Jensen's inequality lies above the dB of the mean error" in md
    row = rep.theory.query("quantity == 'ip_var_ratio_same_budget' and budget == 2").iloc[0]
    line = next(line for line in ratio if "ip_var_ratio_same_budget" in line and "| 2 |" in line)
    p = row.predicted
    want = f"| {row.measured / p:.4g} [{row.ci_low / p:.4g}, {row.ci_high / p:.4g}]"
    assert line.rstrip(" |‡").endswith(want) and " dB" not in line, (line, want)


def test_kl_tail_column_is_kls_bound(tmp_path):
    f = _pareto_kl(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=200, seed=26), 27)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    cols = [c.strip() for c in _header(md).strip("|").split("|")]
    at = cols.index("kl tail α (95% upper)")
    for scheme in ("KQV", "QKQV"):
        cells = [c.strip() for c in _table_rows(md, scheme)[0].strip("|").split("|")]
        bound = rep.summary.query("scheme == @scheme and metric == 'kl'")["tail_index"].iloc[0]
        assert cells[at] == f"{bound:.3g}"


def test_keyword_overrides_beat_the_configs_report_table(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=28)
    rep = hypothesis_report(_result(f, report={"alpha": 0.05, "confidence": 0.9}), tmp_path,
                            figures=False, energy_resamples=19, alpha=0.01)
    md = rep.files["markdown"].read_text()
    assert "at α = 0.01" in md and "Means with 90% bootstrap CIs" in md


def test_trial_level_section_counts_its_significant_rows(tmp_path):
    f = _clustered_frame()
    f.loc[f.scheme == "QKQV", "snr_k"] += 1.0             # a shift in one metric only
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19, pairing="none")
    trials = pd.read_csv(rep.files["comparisons_trial_level"]).query("test == 'mann_whitney'")
    n_sig = int(trials["significant"].sum())
    assert 0 < n_sig < len(trials)
    md = rep.files["markdown"].read_text()
    assert (f"{n_sig} of {len(trials)} trial-level (not independent) Mann–Whitney rows have adjusted "
            "p ≤ α") in md
    # correlated trials can err either way (docs/statistics.md, "Clustered trials"): not "optimistic"
    section = md.split("## Trial-level tests (not independent)")[1]
    assert "do not hold their nominal level (too small where a text's trials are positively " \
        "correlated, too large where negatively" in section and "optimistic" not in section


def _test_row(test, metric, significant, resolvable, verdict, winner="", note=""):
    return {"test": test, "scheme_a": "KQV", "scheme_b": "QKQV", "metric": metric, "budget": 3.0,
            "budget_b": 3.0, "mean_a": 1.0, "mean_b": 2.0, "effect": -0.5, "effect_low": -0.7,
            "effect_high": -0.3, "statistic": 10.0, "pvalue": 0.01, "pvalue_adjusted": 0.01,
            "significant": significant, "resolvable": resolvable, "verdict": verdict,
            "winner": winner, "note": note, "n_permutations": 0, "max_permutations": 0}


def test_comparison_cells_follow_each_combination_of_outcomes():
    """A constructed table: the winner cell and the KS cell for every outcome pair of the
    Mann–Whitney and KS tests (the logic of sections._comparison_table)."""
    from kvstats.analysis.compare import DIFFERENT, NO_DIFFERENCE
    from kvstats.report.tables import _comparison_table
    from kvstats.report.wording import R_HEADER

    unres = "not resolvable at n = 3 vs 3 (smallest attainable adjusted p 0.6)"
    cases = {  # metric: (MW significant, MW resolvable, MW verdict/winner, KS sig, KS resolvable)
        "kl": (True, True, "KQV", True, True),
        "recall_at_5": (True, True, "QKQV", False, True),
        "phi_k": (False, True, NO_DIFFERENCE, False, True),
        "snr_k": (False, True, NO_DIFFERENCE, True, True),
        "phi_v": (False, False, unres, True, True),
        "snr_v": (False, True, NO_DIFFERENCE, False, False),
    }
    rows = []
    for m, (mw_sig, mw_res, mw_word, ks_sig, ks_res) in cases.items():
        rows.append(_test_row("mann_whitney", m, mw_sig, mw_res,
                              DIFFERENT if mw_sig else mw_word, winner=mw_word))
        rows.append(_test_row("ks", m, ks_sig, ks_res,
                              DIFFERENT if ks_sig else NO_DIFFERENCE if ks_res else unres,
                              note="ties" if m == "recall_at_5" else ""))
    table = _comparison_table(pd.DataFrame(rows)).set_index("metric")
    assert table.loc["kl", "winner"] == "KQV" and table.loc["recall_at_5", "winner"] == "QKQV"
    assert table.loc["phi_k", "winner"] == NO_DIFFERENCE
    assert table.loc["snr_k", "winner"] == "no significant shift (KS: distributions differ)"
    assert table.loc["phi_v", "winner"] == unres              # never overwritten by the KS test
    assert table.loc["snr_v", "winner"] == NO_DIFFERENCE
    ks = table["p adj (KS)"]
    assert ks["snr_v"] == "0.010 (not resolvable)"
    assert ks["recall_at_5"] == "0.010 †"
    assert all(ks[m] == "0.010" for m in ("kl", "phi_k", "snr_k", "phi_v"))
    assert table.loc["kl", R_HEADER] == "-0.500 [-0.700, -0.300]"
    assert table.loc["kl", "pair"] == "KQV vs QKQV" and "equivalence" not in table


def test_resolution_sentence_does_not_overstate_what_a_rejection_needs(tmp_path):
    """Holm's later steps reject at (m − i + 1)·p ≤ α: a test that cannot reach α/m can still be
    rejected when others are (the quick report's energy tests: p adj 0.020 at B = 22799, so
    multiplied by 456, not 1140); the header says α/m suffices, not that it is required."""
    from kvstats.stats.multitest import adjust_pvalues

    p = np.array([1e-9] * 10 + [0.01])        # the last is above α/m = 0.0045, yet rejected
    assert p[-1] > 0.05 / p.size
    assert adjust_pvalues(p, method="holm", alpha=0.05).pvalues_adjusted[-1] == pytest.approx(0.01)
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=29)
    md = hypothesis_report(_result(f), tmp_path, figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert "must be able to reach" not in md
    assert "can be rejected whatever the rest of the family shows" in md
    assert "the rest of the family as observed (\"not resolvable\")" in md


@pytest.mark.parametrize("correction", ["holm", "fdr_by"])
def test_resolution_threshold_is_the_corrections_own(tmp_path, correction):
    """BY's first step is α/(m·H_m), not Holm's α/m: the header prints the family's correction's."""
    from kvstats.analysis.resolution import _sign_pairs_needed
    from kvstats.stats.sequential import required_resolution

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=30)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19,
                            correction=correction)
    need = required_resolution(rep.comparisons.attrs["n_tests"], 0.05, correction)
    md = rep.files["markdown"].read_text()
    assert f"by **{correction}** at α = 0.05" in md
    assert (f"A test that can reach p ≤ {need.p_needed:.3g} can be rejected whatever the rest of "
            f"the family shows (the correction's first step; a permutation test: B ≥ "
            f"{need.n_permutations} permutations; a sign test: {_sign_pairs_needed(need.p_needed)} "
            "pairs that differ") in md


def test_pairing_correlation_is_measured_on_the_paired_trials():
    """QKQV's trials copy KQV's (ρ = 1) at n = 2 and mirror them (ρ = −1) at n = 3."""
    from kvstats.analysis import compare_schemes
    from kvstats.report.render import _pairing_correlations, _pairing_text

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=30, seed=31)
    for budget, sign in ((2.0, 1.0), (3.0, -1.0)):
        a = (f.scheme == "KQV") & (f.budget == budget)
        b = (f.scheme == "QKQV") & (f.budget == budget)
        f.loc[b, "snr_k"] = sign * f.loc[a, "snr_k"].to_numpy() + 5.0
    comp = compare_schemes(f, [("KQV", "QKQV")], metrics=["snr_k"], energy=False, ks=False, pairing="none")
    rho = _pairing_correlations(f, comp)
    assert sorted(rho.round(12)) == [-1.0, 1.0]
    assert "ρ of 2 of the 2 Mann–Whitney rows has median +0.00, range [-1.00, +1.00], 1 below −0.1" \
        in _pairing_text(rho)
    # a constant side leaves its row out, and the sentence says how many rows the ρ cover
    g = f.copy()
    g.loc[(g.scheme == "QKQV") & (g.budget == 2.0), "snr_k"] = 5.0
    rho = _pairing_correlations(g, compare_schemes(g, [("KQV", "QKQV")], metrics=["snr_k"],
                                                   energy=False, ks=False, pairing="none"))
    assert rho.round(12).tolist() == [-1.0] and rho.attrs["n_rows"] == 2
    assert "ρ of 1 of the 2 Mann–Whitney rows (the others: a constant side)" in _pairing_text(rho)
    # a shuffled trial order is re-paired by trial index, not by row order
    shuffled = f.sample(frac=1.0, random_state=0)
    assert sorted(_pairing_correlations(shuffled, comp).round(12)) == [-1.0, 1.0]
    assert _pairing_text(None).endswith("negatively correlated.")
    # only ρ below −0.1 are counted: near-zero correlations are not flagged
    assert "median +0.03, range [-0.50, +0.90], 1 below −0.1;" in _pairing_text(
        pd.Series([-0.5, 0.0, 0.05, 0.9]))
    # a cross-budget pair (fixed-budget schemes) is paired across its two budgets
    h = make_frame({("K4V2", 3): 0.0, ("K4V4", 4): 0.0}, n=30, seed=32)
    h.loc[h.scheme == "K4V4", "snr_k"] = -h.loc[h.scheme == "K4V2", "snr_k"].to_numpy()
    comp = compare_schemes(h, [("K4V2", "K4V4")], metrics=["snr_k"], energy=False, ks=False, pairing="none")
    assert _pairing_correlations(h, comp).round(12).tolist() == [-1.0]


def test_unit_cluster_on_unclustered_trials_stays_trial_level(tmp_path):
    """unit = "cluster" on synthetic trials (each its own cluster): the cluster means are the
    trials, so no trial-level section, and the counts are still called trials."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=33).assign(cluster=lambda d: d.trial)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19, unit="cluster")
    md = rep.files["markdown"].read_text()
    assert "comparisons_trial_level" not in rep.files and "Trial-level tests" not in md
    assert _header(md).rstrip(" |").endswith("| trials") and set(rep.comparisons.n_a) == {30}


def test_an_unresolvable_sign_row_says_how_few_pairs_differ(tmp_path):
    """'not resolvable at n = 40 pairs' alone reads as if 40 pairs could not resolve; what
    limits the sign test is the pairs whose values differ, which the verdict counts (in the
    report's cell and in tables/comparisons.csv alike)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40, seed=41)
    f["argmax_shift"] = 0.0
    f.loc[(f.scheme == "KQV") & (f.trial < 3), "argmax_shift"] = 1.0     # 3 of 40 pairs differ
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    row = rep.comparisons.query("metric == 'argmax_shift' and test == 'sign'").iloc[0]
    assert row.verdict.startswith("not resolvable at n = 40 pairs")
    assert row.verdict.endswith(": only 3 of the 40 pairs differ") and row.winner == row.verdict
    assert (pd.read_csv(rep.files["comparisons"])["verdict"] == row.verdict).any()
    cell = next(line for line in _table_rows(rep.files["markdown"].read_text(), "KQV vs QKQV")
                if "| argmax_shift |" in line)
    assert f"| {row.verdict} |" in cell
    # a resolvable row keeps its winner cell as it was
    kl = next(line for line in _table_rows(rep.files["markdown"].read_text(), "KQV vs QKQV")
              if "| kl |" in line)
    assert "pairs differ" not in kl
    # one pair is "differs"; none, or all (the limit is then the number of pairs itself)
    from kvstats.analysis.resolution import differ_text
    assert [differ_text(k, 40) for k in (1, 0, 40)] == [
        "only 1 of the 40 pairs differs", "none of the 40 pairs differs",
        "all 40 pairs differ: the limit is the number of pairs, 40, itself"]
    f.loc[(f.scheme == "KQV") & (f.trial < 3), "argmax_shift"] = 0.0
    f.loc[(f.scheme == "KQV") & (f.trial == 0), "argmax_shift"] = 1.0     # 1 of 40
    rep = hypothesis_report(_result(f), tmp_path / "one", figures=False, energy_resamples=19)
    cell = next(line for line in _table_rows(rep.files["markdown"].read_text(), "KQV vs QKQV")
                if "| argmax_shift |" in line)
    assert cell.endswith(": only 1 of the 40 pairs differs |")
    # all 5 of 5 pairs differ, and 5 pairs cannot reach p ≤ α (2·0.5⁵ = 0.0625)
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=5, seed=42)
    g["argmax_shift"] = np.where(g.scheme == "KQV", 1.0, 0.0)
    rep = hypothesis_report(_result(g), tmp_path / "five", figures=False, energy_resamples=19)
    cell = next(line for line in _table_rows(rep.files["markdown"].read_text(), "KQV vs QKQV")
                if "| argmax_shift |" in line)
    assert cell.endswith(": all 5 pairs differ: the limit is the number of pairs, 5, itself |")
    assert "only 5 of the 5" not in rep.files["markdown"].read_text()


def test_the_count_of_pairs_that_differ_is_read_from_n_informative_not_the_note():
    """The verdict's "only k of the n pairs differ" comes from the comparisons table's
    n_informative column (written by compare_schemes), never from the free-text note,
    and the report's cell is that verdict."""
    from kvstats.analysis import compare_schemes
    from kvstats.analysis.verdicts import _verdicts
    from kvstats.report.tables import _comparison_table

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40, seed=41)
    f["argmax_shift"] = 0.0
    f.loc[(f.scheme == "KQV") & (f.trial < 3), "argmax_shift"] = 1.0     # 3 of 40 pairs differ
    comp = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl", "argmax_shift"], energy=False)
    rows = _comparison_table(comp).set_index("metric")
    assert rows.loc["argmax_shift", "winner"].endswith(": only 3 of the 40 pairs differ")

    def verdict(c):
        c = c.copy()
        c.attrs = comp.attrs
        return _verdicts(c, 0.05)[list(c.metric).index("argmax_shift")]

    assert verdict(comp.assign(note="")).endswith(": only 3 of the 40 pairs differ")
    sign = comp.test == "sign"
    assert verdict(comp.assign(n_informative=np.where(sign, 7.0, np.nan))).endswith(
        ": only 7 of the 40 pairs differ")


def test_bits_figure_captions_say_what_a_hollow_marker_means(tmp_path):
    """The KL and recall figures draw heavy-tailed means hollow (their error bars are not
    valid there); the captions say so."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=43)
    result = _result(f)
    rep = hypothesis_report(result, tmp_path, figures=False, energy_resamples=19)
    figs = {"kl_vs_bits": tmp_path / "kl.png", "recall_vs_bits": tmp_path / "recall.png"}
    md = build_document(result, rep.summary, rep.comparisons, rep.crossovers, rep.theory, figs,
                        validate_report_options({"bootstrap_resamples": 99}), "unit",
                        None).markdown(tmp_path)
    captions = [line for line in md.splitlines() if line.startswith("*Mean ")]
    assert len(captions) == 2 and all("Hollow markers, where drawn: a heavy right tail" in c
                                      for c in captions)


# ---------------------------------------------------------------- rounding never flips a verdict
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.001, 0.1])
def test_a_printed_pvalue_stays_on_its_side_of_alpha(alpha):
    """Three decimals wrote 0.0504 as "0.050" beside "no significant difference" at α = 0.05
    (and 0.00104 as "0.001" at α = 0.001): the printed number read as a rejection. With α
    the cell takes the digits that keep it on its value's side of α; elsewhere unchanged."""
    from kvstats.report.notation import _p

    ps = np.concatenate([alpha * (1 + np.array([-1e-9, -1e-4, -0.009, 0.0, 1e-12, 1e-9, 1e-4,
                                                0.008, 0.009, 0.01])),
                         np.geomspace(1e-6, 1, 400)])
    for p in ps:
        assert (float(_p(p, alpha)) <= alpha) == (p <= alpha), (p, _p(p, alpha))
        # never fewer digits than without α, and the same text where no side is at stake
        assert _p(p, alpha).startswith(_p(p)[:-1])
    assert _p(0.0504, 0.05) == "0.0504" and _p(0.0496, 0.05) == "0.050" and _p(0.3, 0.05) == "0.300"


def test_report_cells_keep_p_and_interval_ends_apart_from_alpha_and_margins(tmp_path):
    """The document's cells, not only the helpers: a sign row at adjusted p 0.0504 (not
    significant) and an equivalence interval whose lower end lies just inside its margin
    1/1.02 = 0.980392… (0.98041) or just outside it (0.98037): at 4 significant digits both
    read "0.9804", the margin's own text, hiding on which side of it the interval lies."""
    from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table
    from kvstats.report.tables import _comparison_table

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=30, seed=31)
    comp = compare_schemes(f, [("KQV", "QKQV")], energy=False, equivalence={"kl": 0.02})
    sign = (comp["test"] == "sign") & (comp["metric"] == "kl")
    comp.loc[sign, ["pvalue_adjusted", "significant"]] = [0.0504, False]
    eq = comp["test"] == "equivalence"
    margin = 1 / 1.02
    for low in (0.98041, 0.98037):
        comp.loc[eq, ["effect_low", "effect_high", "margin_low", "margin_high", "pvalue_adjusted"]] = \
            [low, 1.01, margin, 1.02, 0.0502]
        table = _comparison_table(comp, alpha=0.05).set_index("metric")
        assert table.loc["kl", "p adj (sign)"] == "0.0504"
        cell = table.loc["kl", "equivalence"]
        assert f"[{low:.5g}, 1.01] in [0.98039, 1.02]? p adj 0.0502" in cell, cell
        opts = validate_report_options({"equivalence": {"kl": 0.02}})
        md = build_document(_result(f), summary_table(f, n_resamples=49), comp, find_crossovers(comp),
                            theory_table(f, n_resamples=49), {}, opts, "unit", None).markdown(tmp_path)
        assert (f"90% CI [{low:.5g}, 1.01], region [0.98039, 1.02], adjusted TOST p 0.0502"
                in md), md[md.find("## Equivalence"):][:1500]
        assert "| 0.0504 |" in md


def test_an_empty_theory_table_says_why():
    """"none ... was run at an integer budget" was printed for key_favored.toml, whose
    schemes (K4V2, ...) have no closed form at all, and for KQV at d = 96, which ran at
    whole budgets but pads its rotation: each case now names its own reason."""
    from kvstats.report.wording import _no_theory_text

    def text(scheme, budget, dim=128):
        return _no_theory_text(pd.DataFrame({"scheme": [scheme], "budget": [budget], "dim": [dim]}))

    assert text("K4V2", 3.0).endswith("(KV, KQV, turboquant_mse, QKQV, turboquant_prod) was run.")
    assert text("KQV", 3.5).endswith("KQV ran only at budgets that are not whole bits.")
    padded = text("KQV", 3.0, 96)
    assert "KQV ran only where none applies" in padded and "not a power of two" in padded
    assert "integer budget" not in text("K4V2", 3.0) + padded


def test_lowrank_vs_heavytail_boxes_never_pool_two_cases():
    """A sweep with N = 64 and N = 128 drew the trials of both N in one box per key setting
    (the figure split d and the setting, not N); each box is now one case, and the caption
    names Gaussian keys only where the sweep has them."""
    import matplotlib.pyplot as plt

    from kvstats.report.plots import plot_lowrank_vs_heavytail

    parts = [make_frame({("KQV", 3): 0.0}, n=12, seed=40 + i, case=(dist, params, 32, n_keys))
             for i, (dist, params, n_keys) in enumerate(
                 [("low_rank", "rank=8", 64), ("low_rank", "rank=8", 128),
                  ("heavy_tailed", "nu=1.5", 64), ("heavy_tailed", "nu=1.5", 128)])]
    fig = plot_lowrank_vs_heavytail(pd.concat(parts, ignore_index=True))
    labels = sorted(t.get_text() for t in fig.legends[0].get_texts())
    plt.close(fig)
    assert labels == ["heavy_tailed (nu=1.5), N = 128", "heavy_tailed (nu=1.5), N = 64",
                      "low_rank (rank=8), N = 128", "low_rank (rank=8), N = 64"], labels
    one = plot_lowrank_vs_heavytail(pd.concat(parts[::2], ignore_index=True))
    assert "N =" not in " ".join(t.get_text() for t in one.legends[0].get_texts())
    plt.close(one)


def test_lowrank_vs_heavytail_caption_names_only_the_keys_drawn(tmp_path):
    from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table

    fig = tmp_path / "figures" / "lowrank_vs_heavytail.png"
    fig.parent.mkdir()
    fig.write_bytes(b"")
    for dists, gaussian in ((("low_rank", "heavy_tailed"), False),
                            (("low_rank", "heavy_tailed", "gaussian"), True)):
        f = pd.concat([make_frame({("KQV", 3): 0.0}, n=12, seed=50 + i, case=(d, "-", 32, 64))
                       for i, d in enumerate(dists)], ignore_index=True)
        comp = compare_schemes(f, [], energy=False)
        md = build_document(_result(f), summary_table(f, n_resamples=49), comp, find_crossovers(comp),
                            theory_table(f, n_resamples=49), {"lowrank_vs_heavytail": fig},
                            validate_report_options(), "unit", None).markdown(tmp_path)
        caption = next(line for line in md.splitlines() if line.startswith("*Per-trial KL"))
        assert ("Gaussian" in caption) == gaussian, caption
        assert "one box per case" in caption and "1e-6" in caption


@pytest.mark.filterwarnings("ignore:no comparison")   # the helper's config has no pair to test
def test_a_pair_that_shares_a_case_but_no_budget_is_not_called_absent(tmp_path):
    """identity (its own n = 32) against KV at n = 2 and 3: both ran in the case, but a
    pair is compared across budgets only when each ran at a single one, so no test. The
    report said that no pair "names two schemes of one case of this sweep", which is false
    and sends the reader to look for a typo; it now names the budgets and the rule."""
    from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table

    f = make_frame({("identity", 32): 0.0, ("KV", 2): 0.0, ("KV", 3): 0.0}, n=8, seed=60)
    pairs = [("identity", "KV")]
    comp = compare_schemes(f, pairs, energy=False)
    assert comp.empty
    md = build_document(_result(f, schemes=("identity", "KV")), summary_table(f, n_resamples=49),
                        comp, find_crossovers(comp), theory_table(f, n_resamples=49), {},
                        validate_report_options(), "unit", None, comparisons=pairs).markdown(tmp_path)
    assert "names two schemes of one case" not in md
    assert ("identity vs KV (identity at n = 32; KV at n = 2, 3): no budget in common" in md)
    # a pair absent from every case keeps the old sentence
    md = build_document(_result(f, schemes=("identity", "KV")), summary_table(f, n_resamples=49),
                        comp, find_crossovers(comp), theory_table(f, n_resamples=49), {},
                        validate_report_options(), "unit", None,
                        comparisons=[("identity", "KQV")]).markdown(tmp_path)
    assert "none of the pairs asked for (identity vs KQV) names two schemes of one case" in md


# ---------------------------------------------------------------- session 12 referee review
def test_shannon_phi_captions_say_which_dashed_lines_are_the_limit(tmp_path):
    """The second scheme's trajectory is drawn dashed too (plots' line styles), so "dashed:
    the rate–distortion limit" pointed at a scheme; the caption names the grey labelled lines."""
    f = make_frame({("KV", 3): 0.0, ("KQV", 3): 0.5}, n=12, seed=61)
    f["snr_k_pooled"], f["snr_v_pooled"] = f["snr_k"], f["snr_v"]
    result = _result(f)
    rep = hypothesis_report(result, tmp_path, figures=False, energy_resamples=19)
    from kvstats.report.notation import _case_title, _slug

    slug = _slug(_case_title({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128}))
    figs = {f"shannon_phi_{p}_{slug}": tmp_path / f"{p}.png" for p in "kvt"}
    md = build_document(result, rep.summary, rep.comparisons, rep.crossovers, rep.theory, figs,
                        validate_report_options({"bootstrap_resamples": 99}), "unit",
                        None).markdown(tmp_path)
    caps = [line for line in md.splitlines() if line.startswith("*Shannon–φ plane")]
    assert len(caps) == 3, [c[:40] for c in caps]
    for cap in caps[:2]:
        assert 'grey dashed horizontal lines labelled "limit, n = …"' in cap
        assert "; dashed (where" not in cap
    assert "no limit line" in caps[2]


def test_the_exact_all_zero_interval_names_its_count_and_confidence(tmp_path):
    """The header wrote 1 − ((1 − c)/2)^(1/n) with n, the report's bit budget, for the
    count of values and c undefined; its example value is the summary's own bound, at this
    report's m (30 trials; it printed m = 100 whatever m was)."""
    from kvstats.analysis.intervals import unit_interval_bound

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=62)
    line = _header_line(hypothesis_report(_result(f), tmp_path, figures=False,
                                          energy_resamples=19).files["markdown"].read_text())
    assert f"(1/m)] at confidence c (here {1 - unit_interval_bound(30, 0.95):.3g} at m = 30, c = 0.95)" in line
    assert "(1/n)" not in line and "n values" not in line


def _header_line(md):
    return next(line for line in md.splitlines() if line.startswith("- Tests:"))


def test_identical_pairs_note_gives_the_p_values_the_ratio_tost_returns():
    """The note's example p-values depend on the values' spread (identical arms uniform on
    [0, 1] vs on [1, 2]); it names the distribution and both ranges, as tost_ratio gives."""
    from kvstats.report.wording import IDENTICAL_PAIRS_NOTE
    from kvstats.stats import tost_ratio

    assert "uniform on [0, 1]" in IDENTICAL_PAIRS_NOTE and "0.010–0.017" in IDENTICAL_PAIRS_NOTE
    assert "on [1, 2]: 2–5·10⁻⁵" in IDENTICAL_PAIRS_NOTE
    for lo, (low, high) in ((0.0, (0.0095, 0.0175)), (1.0, (2e-5, 5.5e-5))):
        xs = [np.random.default_rng(s).uniform(lo, lo + 1, 100) for s in range(20)]
        ps = [tost_ratio(x, x.copy(), 0.1, paired=True).pvalue for x in xs]
        assert low <= min(ps) and max(ps) <= high, (lo, min(ps), max(ps))
    apart = [tost_ratio(x, x * (1 + 1e-9), 0.1, paired=True).pvalue for x in xs[:3]]
    assert max(apart) < 1e-26


def test_a_report_on_few_units_says_its_intervals_are_too_narrow(tmp_path):
    """Bootstrap intervals over fewer than 20 units undercover (docs/statistics.md, "Few
    units"): the header says so, with the smallest count, and only then."""
    import kvstats
    from kvstats.report import hypothesis_report

    def header(n_trials):
        res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [2], "distributions": ["gaussian"],
                                 "dims": [16], "n_keys": [16], "n_trials": n_trials,
                                 "report": {"energy_resamples": 19, "bootstrap_resamples": 99}},
                                executor="serial", progress=False)
        md = hypothesis_report(res, tmp_path / str(n_trials), figures=False).files["markdown"].read_text()
        return md.split("## Metrics and units")[0]

    few = header(12)
    assert "Few units: some means rest on only 12 trials (fewer than 20)" in few
    assert "Few units" not in header(20)
    # which tests keep their level: the exact and permutation ones, not the TOSTs (t-based
    # or asymptotic); it read "The tests (exact or permutation) keep their level"
    line = next(x for x in few.splitlines() if "Few units" in x)
    assert ("The sign test (exact binomial) and the permutation tests (energy, KS) keep their "
            "level") in line
    assert ("the equivalence tests do not rest on an exact null law (a ratio's TOST is a "
            "t-test, exact for normal data only; the rank TOST is asymptotic)") in line
    assert "The tests (exact or permutation)" not in line


def test_the_u_column_says_whose_u_it_is():
    """Mann–Whitney's U is scheme a's, #(a > b) + ½ ties: the column says so, and the header's
    effect sentence gives b's (n_a·n_b − U) and r from it."""
    from kvstats.report.tables import _comparison_table
    from kvstats.report.wording import R_CONVENTION
    from kvstats.report.wording import U_HEADER

    table = _comparison_table(pd.DataFrame([_test_row("mann_whitney", "kl", True, True, "different",
                                                       winner="KQV")]))
    assert U_HEADER == "U of a: #(a > b) + ½ ties" and table.loc[0, U_HEADER] == "10"
    assert "U" not in table.columns
    assert "#(a > b) + ½#(a = b) (b's U is n_a·n_b − U; r = 2U/(n_a·n_b) − 1)" in R_CONVENTION


def test_a_dominance_without_a_differing_pair_is_undefined_not_zero():
    """0 of n pairs differ: the sign test's dominance (n+ − n−)/(n+ + n−) is 0/0. The cell
    read "+0.000 [-1.000, +1.000]" (the test's placeholder), a zero effect no data showed;
    it reads "—", which the header's effect sentence explains; one differing pair keeps its
    number."""
    from kvstats.report.tables import _comparison_table
    from kvstats.report.wording import R_CONVENTION_PAIRED
    from kvstats.report.wording import DOMINANCE_HEADER, UNDEFINED_EFFECT

    rows = [{**_test_row("sign", m, False, False, "not resolvable"), "effect": 0.0,
             "effect_low": -1.0, "effect_high": 1.0, "n_informative": float(k)}
            for m, k in (("kl", 0), ("phi_k", 1))]
    table = _comparison_table(pd.DataFrame(rows)).set_index("metric")
    assert table.loc["kl", DOMINANCE_HEADER] == UNDEFINED_EFFECT == "—"
    assert table.loc["phi_k", DOMINANCE_HEADER] == "+0.000 [-1.000, +1.000]"
    assert 'the dominance is 0/0, undefined: its cell reads "—", not 0' in R_CONVENTION_PAIRED
    # the crossover figure draws no point there (it drew 0 with bars to ±1)
    from kvstats.report.plots import plot_crossover

    case = {"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128}
    fig = plot_crossover(pd.DataFrame([{**row, **case} for row in rows]).assign(
        metric="kl", budget=[2.0, 3.0], budget_b=[2.0, 3.0], effect=[0.0, 1.0]), ["kl"])
    from matplotlib.collections import PathCollection

    markers = np.concatenate([c.get_offsets() for c in fig.axes[0].collections
                              if isinstance(c, PathCollection)])
    assert markers[np.isfinite(markers).all(axis=1), 1].tolist() == [1.0]
