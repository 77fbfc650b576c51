"""A report's sentences as claims: each one backed by the test and the family it names.

Found in a fresh-eyes review of the quick and real-cache reports (session 9, H5): the
header did not say that the location tests are two-sided, what error rate the correction
bounds (family-wise or false discovery), that a Mann–Whitney winner need not have the
better mean, which pairs have no energy test; the trial-level section did not say in
which family its p-values were adjusted; an energy test limited by its few texts said
"at B = …".
"""

import re

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import METRICS
from kvstats.report import hypothesis_report

from _sweep_frames import clustered_frame, make_frame
from _sweep_frames import sweep_result as _result


def _line(md, start):
    return next((line for line in md.splitlines() if line.startswith(start)), None)


def _report(tmp_path, frame, **kw):
    kw.setdefault("energy_resamples", 19)
    return hypothesis_report(_result(frame, **kw.pop("result", {})), tmp_path, figures=False, **kw)


@pytest.mark.parametrize("correction, words", [
    ("holm", "family-wise error rate"), ("bonferroni", "family-wise error rate"),
    ("fdr_bh", "false discovery rate, under independence or positive regression dependence of the tests, "
               "which is not known to hold for two-sided tests on shared trials (fdr_by holds under any)"),
    ("fdr_by", "false discovery rate, under any dependence")])
def test_header_says_what_error_rate_the_family_bounds(tmp_path, correction, words):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=21)
    rep = _report(tmp_path, f, correction=correction)
    line = _line(rep.files["markdown"].read_text(), "- Error rate:")
    assert line is not None and words in line
    # the family it names is the report's: every p-value adjusted together
    n = int(rep.comparisons["pvalue"].notna().sum())
    assert f"with {correction} over the family of {n} p-values" in line
    assert ("no crossover" in line) == correction.startswith("fdr")


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_a_winner_is_read_from_a_two_sided_test_and_need_not_have_the_better_mean(tmp_path, pairing):
    """KL of a is lower on most trials, but its rare large values give it the larger
    mean: a wins (lower is better), and the header says the winner is not the better mean."""
    rng = np.random.default_rng(22)
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=200, seed=22)
    base = rng.exponential(1.0, 200)
    a = base * 0.3
    a[rng.random(200) < 0.2] *= 40.0
    f.loc[f["scheme"] == "KQV", "kl"] = a
    f.loc[f["scheme"] == "QKQV", "kl"] = base
    rep = _report(tmp_path, f, pairing=pairing)
    row = rep.comparisons.query("metric == 'kl' and test in ('sign', 'mann_whitney')").iloc[0]
    assert row["winner"] == "KQV" and row["mean_a"] > row["mean_b"]
    rule = _line(rep.files["markdown"].read_text(), "- Winner rule:")
    name = "sign" if pairing == "trial" else "Mann–Whitney"
    assert f"only when its two-sided {name}" in rule
    assert re.search(r"not (necessarily )?the one with the better mean", rule)


def test_pairs_without_an_energy_test_are_named(tmp_path):
    """An exact reconstruction (SNR = +inf) has no point in the 6D space: its pair has no
    energy test, and the header says how many, not "an energy test per pair"."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5, ("KQV", 3): 0.0, ("QKQV", 3): 1.0},
                   n=30, seed=23)
    f.loc[(f["scheme"] == "QKQV") & (f["budget"] == 3.0) & (f["trial"] == 0), "snr_v"] = np.inf
    rep = _report(tmp_path / "inf", f)
    assert rep.comparisons.attrs["energy_skipped"] == 1
    assert (rep.comparisons["test"] == "energy").sum() == 1
    line = _line(rep.files["markdown"].read_text(), "- No 6D energy test")
    assert line is not None and "for 1 of the 2 compared (case, budget, pair)s" in line
    finite = f.replace(np.inf, 1e3)
    rep = _report(tmp_path / "finite", finite)
    assert rep.comparisons.attrs["energy_skipped"] == 0
    assert _line(rep.files["markdown"].read_text(), "- No 6D energy test") is None


def test_trial_level_counts_name_their_own_family(tmp_path):
    rep = hypothesis_report(_result(clustered_frame(), distributions=("gaussian",)), tmp_path,
                            figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    trial = pd.read_csv(tmp_path / "tables" / "comparisons_trial_level.csv")
    n = int(trial["pvalue"].notna().sum())
    assert f"adjusted within this table's own family of {n} p-values, not with the report's" in md


def test_an_energy_test_of_few_texts_names_the_texts_not_b(tmp_path):
    """6 texts: the paired energy test cannot go below 2/2^6 whatever B; the table says
    "not resolvable at n = 6 pairs"."""
    f = clustered_frame(n_texts=6, per_text=4)
    profile = ["snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t"]
    f.loc[f["scheme"] == "QKQV", profile] += 10.0
    rep = hypothesis_report(_result(f, distributions=("gaussian",)), tmp_path, figures=False,
                            energy_resamples=99)
    md = rep.files["markdown"].read_text()
    energy = [line for line in md.splitlines() if "6D energy" in line and line.startswith("| KQV")]
    assert len(energy) == 2
    assert all("not resolvable at n = 6 pairs (" in line for line in energy)
    assert not any("not resolvable at B =" in line for line in energy)
    assert set(METRICS) <= set(rep.comparisons["metric"])


@pytest.mark.parametrize("pairing, interval", [("trial", "Clopper–Pearson"), ("none", "Newcombe")])
def test_crossover_caption_names_its_panels_and_its_unadjusted_bars(tmp_path, pairing, interval):
    """The figure draws four metrics; a crossover in another (snr_v) is only in the list,
    so the caption says which metrics it shows, and that its bars are not the test."""
    from kvstats.report.plots import CROSSOVER_METRICS

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5, ("KQV", 3): 0.0, ("QKQV", 3): 1.0},
                   n=30, seed=24)
    rep = hypothesis_report(_result(f), tmp_path, figures=True, energy_resamples=19,
                            bootstrap_resamples=99, pairing=pairing)
    md = rep.files["markdown"].read_text()
    caption = next(line for line in md.splitlines() if line.startswith("*")
                   and "across budgets" in line)
    assert f"for {', '.join(CROSSOVER_METRICS)} (the crossover section above covers every tested metric)" \
        in caption
    assert f"bars: the unadjusted 95% interval of the effect ({interval})" in caption
    # a paired figure leaves out the budgets where no pair differs (dominance 0/0)
    assert ("no point where no pair differs" in caption) == (pairing == "trial")


def test_html_renders_the_emphasis_the_markdown_has():
    """The rate–distortion note defines *limit* and *gap* in Markdown emphasis; the HTML
    printed the asterisks. A lone asterisk (tables/*.csv) stays."""
    from kvstats.report.document import inline_html
    from kvstats.report.wording import BOUND_NOTE

    out = inline_html(BOUND_NOTE)
    assert "<em>limit</em>" in out and "<em>gap</em>" in out and "*" not in out
    assert inline_html("tables/*.csv and report.json") == "tables/*.csv and report.json"
    assert inline_html("a * b * c") == "a * b * c"
    assert inline_html("**x** and *y*") == "<strong>x</strong> and <em>y</em>"


def test_rows_without_a_test_are_not_counted_as_unresolvable(tmp_path):
    # argmax shift 0 on every trial: its equivalence rows have no test (the ratio of means
    # needs a positive mean) and say so; only the tests that ran count in the header
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=40, seed=3)
    f["argmax_shift"] = 0.0
    f["recall_at_5"] = 1.0
    rep = _report(tmp_path, f, result={"report": {"equivalence": {"argmax_shift": 0.1, "kl": 0.1}}})
    comp = rep.comparisons
    untested = comp[(comp["test"] == "equivalence") & comp["pvalue"].isna()]
    assert len(untested) == 2 and untested["verdict"].str.contains("no equivalence test").all()
    counted = int((~comp["resolvable"] & ~comp["significant"] & comp["pvalue"].notna()).sum())
    assert counted == 4
    md = rep.files["markdown"].read_text()
    assert f"{counted} test(s) could not have rejected even on the most extreme data" in md


def test_a_bound_row_leaves_out_an_interval_of_one_point():
    # every trial alike: [x, x] is no interval (the other tables print the value alone)
    from kvstats.analysis.theory import BOUND_QUANTITIES
    from kvstats.report.tables import _bound_fmt

    row = {"distribution": "gaussian", "params": "-", "dim": 16, "n_keys": 32, "budget": 3.0,
           "quantity": BOUND_QUANTITIES["k"], "scheme": "KQV", "rate": 3.25, "predicted": 19.57,
           "measured": 14.0, "ci_low": 14.0, "ci_high": 14.0, "gap_db": 5.57, "gap_low": 5.0,
           "gap_high": 6.0}
    out = _bound_fmt(pd.DataFrame([row])).iloc[0]
    assert out["pooled SNR (dB) [95% CI]"] == "14.00"
    assert out["gap (dB) [95% CI]"] == "5.57 [5.00, 6.00]"


def test_the_bound_note_names_the_qjl_residual_as_a_cause_of_a_large_gap():
    """The note read a gap far above the Lloyd–Max gap as structure left unused; on white
    Gaussian keys (no structure to use) QKQV's keys, whose last bit is a QJL sign, sit
    more than 6 dB beyond the Lloyd–Max gap and their overhead (KQV's keys within it), so
    the note names that cause too."""
    import kvstats
    from kvstats.analysis import theory_table
    from kvstats.analysis.theory import BOUND_QUANTITIES
    from kvstats.report.wording import BOUND_NOTE

    res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
                             "dims": [32], "n_keys": [64], "n_trials": 20}, executor="serial", progress=False)
    rows = theory_table(res.frame, n_resamples=99)
    k = rows[rows["quantity"] == BOUND_QUANTITIES["k"]].set_index("scheme")
    # the gap less the overhead's 6.02 dB per bit: KQV within the Lloyd–Max gap (< 4.35 dB),
    # QKQV far beyond it
    excess = k["gap_db"] - 20 * np.log10(2) * (k["rate"] - 3.0)
    assert excess["KQV"] < 4.35 and excess["QKQV"] > 4.35 + 6.0
    assert "a 1-bit QJL residual buys unbiased inner products at a larger error" in BOUND_NOTE
    assert "or leaves the source's structure (low rank, outlier channels) unused" in BOUND_NOTE
