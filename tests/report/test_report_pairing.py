"""The report under the paired design (option ``pairing``): its tests, tables and words."""

import json

import pandas as pd
import pytest

from kvstats.analysis import compare_schemes
from kvstats.analysis.compare import PAIRINGS
from kvstats.metrics.table import METRIC_TABLE
from kvstats.report import hypothesis_report
from kvstats.report.options import PAIRINGS as OPTION_PAIRINGS, validate_report_options
from kvstats.report.render import PAIRED_TEXT
from kvstats.report.tables import SIGN_N_HEADER, _comparison_table
from kvstats.report.wording import (DOMINANCE_HEADER, PAIRED_DESIGN, R_CONVENTION, R_CONVENTION_PAIRED,
                                    R_HEADER, TIES_NOTE, UNPAIRED_DESIGN)

from _sweep_frames import clustered_frame, make_frame
from _sweep_frames import sweep_result as _result


def _header_line(md, start):
    return next(line for line in md.splitlines() if line.startswith(start))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The same frame reported under both designs (with an equivalence margin)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.2, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=30, seed=21)
    out = {}
    for pairing in ("none", "trial"):
        rep = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.2}}),
                                tmp_path_factory.mktemp(pairing), figures=False,
                                energy_resamples=19, pairing=pairing)
        out[pairing] = rep, rep.files["markdown"].read_text()
    return out


def test_the_option_is_the_analysis_design():
    assert OPTION_PAIRINGS == PAIRINGS
    assert validate_report_options()["pairing"] == "trial"    # a sweep's schemes share trials
    assert validate_report_options({"pairing": "trial"})["pairing"] == "trial"
    with pytest.raises(ValueError, match="report option 'pairing' must be one of 'none', 'trial'; "
                                         "received 'trials' \\(did you mean 'trial'\\?\\)"):
        validate_report_options({"pairing": "trials"})


def test_paired_report_runs_the_paired_tests_and_no_ks(reports):
    rep, md = reports["trial"]
    comp = rep.comparisons
    assert comp.attrs["pairing"] == "trial"
    assert set(comp.test) == {"sign", "energy", "equivalence"}
    assert all("within-pair swaps" in n for n in comp[comp.test == "energy"].note)
    assert all("paired" in n for n in comp[comp.test == "equivalence"].note)
    payload = json.loads(rep.files["json"].read_text())
    assert payload["options"]["pairing"] == "trial"
    assert set(pd.read_csv(rep.files["comparisons"]).test) == {"sign", "energy", "equivalence"}
    # the unpaired report of the same frame: the tests as before
    assert set(reports["none"][0].comparisons.test) == {"mann_whitney", "ks", "energy", "equivalence"}


def test_paired_header_names_the_design_and_why_there_is_no_ks(reports):
    _, md = reports["trial"]
    tests = _header_line(md, "- Tests: ")
    assert "(the sign test per metric on the paired differences (exact binomial, equal values " \
           "(to rounding, relative 1e-12) dropped), a 6D energy permutation test per pair on the units' joint " \
           "profile (snr_k, phi_k, snr_v, phi_v, snr_t, phi_t, each divided by its pooled standard deviation: " \
           "\"standardised\") with labels swapped within pairs, a TOST per metric with an equivalence margin " \
           "(paired))" in tests
    # the profile named is the one the energy rows test (PROFILE_METRICS, standardised)
    from kvstats.analysis import PROFILE_METRICS
    assert f"({', '.join(PROFILE_METRICS)}, each divided by its pooled standard deviation" in tests
    # the energy test covers the six profile metrics jointly, not every metric's distribution
    assert "tests the joint distribution of the six profile metrics instead, and the others (kl, " \
           "recall_at_5, argmax_shift, snr_k_pooled, snr_v_pooled, those of the family: [report] metrics) have only their sign test" in PAIRED_DESIGN
    assert "tests the whole distribution instead" not in PAIRED_DESIGN
    assert PAIRED_DESIGN.strip() in tests and "No KS test: the two-sample KS test has no valid " \
        "null for paired samples" in tests
    # Mann–Whitney named only as what the dominance is the paired analogue of
    assert "Mann–Whitney" not in md.replace(R_CONVENTION_PAIRED, "")
    assert "KS D" not in md and TIES_NOTE not in md
    assert R_CONVENTION_PAIRED in md and R_CONVENTION not in md
    # the effect is named, and why the signed-rank test is not the report's paired test
    effect = _header_line(md, "- The effect is the sign test's dominance")
    assert "P(a > b) − P(a < b) over the units where they differ" in effect
    assert "the signed-rank test weights each unit by the rank of |a − b|" in effect
    assert "docs/statistics.md, \"The paired design\"" in effect
    winner = _header_line(md, "- Winner rule")
    assert "only when its two-sided sign test's adjusted p ≤ α; the winner is then the scheme with the " \
           "better value on more of the matched units" in winner and "KS" not in winner
    # the rule is not the mean, which the winner mostly has too: "not necessarily" (it read
    # "not the one with the better mean", false for the QKQV rows here, better in both)
    assert "(the sign of the dominance), not necessarily the one with the better mean" in winner
    won = reports["trial"][0].comparisons
    won = won[(won.test == "sign") & won.significant]
    higher = won.metric.map(lambda m: METRIC_TABLE[m].higher_is_better)
    a_better_mean = (won.mean_a > won.mean_b) == higher
    assert len(won) and ((won.winner == won.scheme_a) == a_better_mean).all()
    assert "Wilcoxon" not in md.replace(R_CONVENTION_PAIRED, "")   # named only to say why not
    # the ρ diagnostic is replaced by the sentence that the tests use the pairing
    unit = _header_line(md, "- Unit of observation")
    assert unit.endswith(PAIRED_TEXT) and "Spearman ρ" not in unit
    assert "\"different\": it does not but the sign test does" in md
    # the comparison table: the dominance, n(a > b) and the sign test's p, the energy rows there
    head = _header_line(md, "| pair |")
    assert f"| {DOMINANCE_HEADER} | {SIGN_N_HEADER} | p adj (sign) | winner |" in head
    assert "U" not in head.split("|") and R_HEADER not in head
    energy = [line for line in md.splitlines() if "6D energy (standardised, paired)" in line]
    assert len(energy) == 2 and all("E = " in line and "p adj = " in line for line in energy)


def test_unpaired_header_keeps_the_rho_diagnostic_and_names_its_design(reports):
    _, md = reports["none"]
    tests = _header_line(md, "- Tests: ")
    assert "(Mann–Whitney and KS per metric" in tests and UNPAIRED_DESIGN.strip() in tests
    unit = _header_line(md, "- Unit of observation")
    assert "Spearman ρ of 18 of the 18 Mann–Whitney rows" in unit and PAIRED_TEXT not in md
    assert R_CONVENTION in md and TIES_NOTE in md
    assert "only when its two-sided Mann–Whitney adjusted p ≤ α" in md
    assert (f"| {R_HEADER} | U of a: #(a > b) + ½ ties | p adj (MW) | KS D | p adj (KS) |"
            in _header_line(md, "| pair |"))


def test_paired_winners_and_crossovers_follow_the_sign_test_rows(reports):
    rep, md = reports["trial"]
    w = rep.comparisons.query("test == 'sign' and budget == 2.0").set_index("metric")
    # QKQV's values are 1.2 larger in every metric at n = 2: lower KL, higher SNR
    assert w.loc["kl", "winner"] == "KQV" and w.loc["snr_k", "winner"] == "QKQV"
    assert (w.effect < 0).all()
    kl = rep.crossovers.set_index("metric").loc["kl"]
    assert kl["winners"].startswith("n = 2: KQV; n = 3: ")
    line = next(x for x in md.splitlines() if x.startswith("| KQV vs QKQV | kl |"))
    assert "| KQV |" in line


def test_a_clustered_frame_pairs_texts_and_its_trial_level_tests_pair_trials(tmp_path):
    f = clustered_frame()
    f.loc[f.scheme == "QKQV", "snr_k"] += 0.5
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19,
                            pairing="trial")
    comp, md = rep.comparisons, rep.files["markdown"].read_text()
    assert set(comp.test) == {"sign", "energy"} and set(comp.n_a) == {12}   # 12 texts
    trials = pd.read_csv(rep.files["comparisons_trial_level"])
    assert set(trials.test) == {"sign", "energy"} and set(trials.n_a) == {120}
    n_sig = int(trials.query("test == 'sign'").significant.sum())
    assert (f"{n_sig} of 18 trial-level (not independent) sign-test rows have adjusted "
            "p ≤ α") in md
    unit = _header_line(md, "- Unit of observation")
    assert "The tests pair the two schemes' means of each cluster (pairing = \"trial\")" in unit
    # unit = "trial" on the same clustered frame pairs the trials (no cluster error)
    rep = hypothesis_report(_result(f), tmp_path / "t", figures=False, energy_resamples=19,
                            pairing="trial", unit="trial")
    assert set(rep.comparisons.n_a) == {120}
    assert _header_line(rep.files["markdown"].read_text(),
                        "- Unit of observation").endswith(PAIRED_TEXT)


def test_pairing_from_the_config_and_the_crossover_figure(tmp_path):
    f = make_frame({("KQV", 2): 1.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=30, seed=22)
    rep = hypothesis_report(_result(f, report={"pairing": "trial"}), tmp_path, energy_resamples=19)
    assert rep.comparisons.attrs["pairing"] == "trial"
    assert "crossover_kqv_vs_qkqv" in rep.figures
    from kvstats.report.plots import plot_crossover

    fig = plot_crossover(rep.comparisons, ["kl"], pair=("KQV", "QKQV"))
    assert fig.axes[0].get_ylabel() == "paired dominance\n(> 0: KQV larger)"
    assert ("Paired dominance across budgets (KQV vs QKQV) for kl, phi_k, snr_k, phi_t (the "
            "crossover section above covers every tested metric); dominance > 0: the first scheme's") \
        in rep.files["markdown"].read_text()
    # an explicit keyword beats the config
    rep = hypothesis_report(_result(f, report={"pairing": "trial"}), tmp_path / "n",
                            figures=False, energy_resamples=19, pairing="none")
    assert rep.comparisons.attrs["pairing"] == "none" and "ks" in set(rep.comparisons.test)
    # the config's "none" beats the default ("trial")
    rep = hypothesis_report(_result(f, report={"pairing": "none"}), tmp_path / "c",
                            figures=False, energy_resamples=19)
    assert rep.comparisons.attrs["pairing"] == "none"
    rep = hypothesis_report(_result(f), tmp_path / "d", figures=False, energy_resamples=19)
    assert rep.comparisons.attrs["pairing"] == "trial"


def test_comparison_table_of_a_paired_table_without_energy():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=20, seed=23)
    comp = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl", "phi_k"], energy=False,
                           pairing="trial")
    table = _comparison_table(comp)
    assert list(table.columns)[-4:] == [DOMINANCE_HEADER, SIGN_N_HEADER, "p adj (sign)", "winner"]
    assert table.metric.tolist() == ["kl", "phi_k"]
