"""Pairwise comparisons and crossovers on synthetic frames whose truth is known by construction."""

import numpy as np
import pytest
from scipy import stats as sps

from kvstats._checks import replicate_scale
from kvstats.analysis import check_frame, compare_schemes, find_crossovers, summary_table

from _sweep_frames import make_frame


def test_compare_winner_rule_and_adjustment():
    # KQV has lower KL (better) and higher SNR (better); QKQV the opposite: known winners.
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 1.0, ("KV", 4): 0.0}, n=80)
    t = compare_schemes(f, [("KQV", "QKQV"), ("KQV", "KV")], energy_resamples=99, pairing="none")
    mw = t[t.test == "mann_whitney"].set_index(["scheme_b", "metric"])
    assert mw.loc[("QKQV", "kl"), "winner"] == "KQV"        # lower KL wins
    assert mw.loc[("QKQV", "snr_k"), "winner"] == "QKQV"    # higher SNR wins
    assert mw.loc[("QKQV", "kl"), "effect"] < 0             # r < 0: KQV's values smaller
    assert (t.pvalue_adjusted >= t.pvalue - 1e-15).all()
    # Holm over the whole table: the smallest p-value is multiplied by the number of tests
    i = t.pvalue.idxmin()
    assert t.loc[i, "pvalue_adjusted"] == pytest.approx(min(1.0, t.pvalue.min() * len(t)))
    # KQV vs KV: same distribution -> (with these seeds) no significant difference anywhere
    assert set(mw.loc["KV", "winner"]) == {"no significant difference"}
    assert set(t.test) == {"mann_whitney", "ks", "energy"}
    assert t[t.test == "energy"].metric.tolist() == ["profile_6d", "profile_6d"]


def test_compare_bh_option_is_less_strict():
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.3}, n=60)
    holm = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    bh = compare_schemes(f, [("KQV", "QKQV")], energy=False, correction="fdr_bh", pairing="none")
    assert (bh.pvalue_adjusted <= holm.pvalue_adjusted + 1e-15).all()


@pytest.mark.slow
def test_null_familywise_error_is_controlled():
    """Under the null (identical distributions) Holm keeps P(any rejection) ≤ α.

    Replicates: 40 (ci) / 200 (full) reports of 2 budgets × 9 metrics × 2 tests each.
    Reference: Holm (1979) controls the FWER at α for any dependence. Tolerance: the
    count of reports with a rejection must not exceed the binomial(reps, 0.05) 99.9% quantile.
    """
    reps = 40 if replicate_scale() == "ci" else 200
    bad = 0
    for r in range(reps):
        f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0, ("KQV", 4): 0.0, ("QKQV", 4): 0.0},
                       n=30, seed=100 + r)
        t = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
        bad += bool(t.significant.any())
    assert bad <= sps.binom.ppf(0.999, reps, 0.05)


def test_crossover_detected_and_described():
    # KL: QKQV better at n=2, KQV better at n=4, nothing at n=3 -> a crossover
    f = make_frame({("KQV", 2): 1.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0,
                    ("KQV", 4): 0.0, ("QKQV", 4): 1.0}, n=80, seed=3)
    t = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False, pairing="none")
    c = find_crossovers(t).set_index("metric")
    assert bool(c.loc["kl", "crossover"])
    assert "CROSSOVER" in c.loc["kl", "description"] and "QKQV wins at n = 2" in c.loc["kl", "description"]
    assert c.loc["kl", "winners"].startswith("n = 2: QKQV; n = 3: no significant difference; n = 4: KQV")


def test_no_crossover_when_one_side_wins():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=60)
    c = find_crossovers(compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False, pairing="none"))
    assert not c.crossover.any()
    assert c.set_index("metric").loc["kl", "description"].startswith("no crossover")


def test_fixed_budget_schemes_compared_directly():
    f = make_frame({("K4V2", 3): 0.0, ("K4V4", 4): -1.0}, n=40)
    t = compare_schemes(f, [("K4V2", "K4V4")], energy=False, ks=False, pairing="none")
    assert set(t.budget) == {3.0} and set(t.budget_b) == {4.0}
    assert t.set_index("metric").loc["kl", "winner"] == "K4V4"


def test_missing_pairs_are_skipped_and_errors_are_clear():
    f = make_frame({("KQV", 4): 0.0}, n=10)
    assert compare_schemes(f).empty     # default pairs: the absent ones are skipped
    with pytest.raises(ValueError, match=r"comparisons label must be one of \['KQV'\]; received 'QKQV'"):
        compare_schemes(f, [("KQV", "QKQV")])    # a given pair: its labels must be in the frame
    with pytest.raises(ValueError, match="correction must be one of"):
        compare_schemes(f, correction="bonferroni-ish")
    with pytest.raises(ValueError, match=r"two different scheme labels; received \['KQV', 'KQV'\]"):
        compare_schemes(f, [("KQV", "KQV")])
    with pytest.raises(ValueError, match="must not repeat a pair, either way round"):
        compare_schemes(f, [("KQV", "QKQV"), ("QKQV", "KQV")])
    with pytest.raises(ValueError, match="lacks the sweep column"):
        check_frame(f.drop(columns=["kl"]))
    with pytest.raises(TypeError, match="DataFrame"):
        summary_table({"kl": [1.0]})
    g = f.copy()
    g.loc[0, "phi_k"] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        summary_table(g)


def test_rows_carry_the_typed_test_results():
    from kvstats.stats import ks_2samp, mann_whitney

    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.5}, n=30, seed=2)
    t = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], energy=False, pairing="none")
    x, y = (f[f.scheme == s]["kl"].to_numpy() for s in ("KQV", "QKQV"))
    mw, ks = mann_whitney(x, y), ks_2samp(x, y)
    row = t[t.test == "mann_whitney"].iloc[0]
    assert (row.statistic, row.pvalue, row.effect, row.effect_low, row.effect_high) == (
        mw.statistic, mw.pvalue, mw.rank_biserial, mw.rank_biserial_low, mw.rank_biserial_high)
    row = t[t.test == "ks"].iloc[0]
    assert not ks.has_ties   # continuous data: the classical KS p-value
    assert (row.statistic, row.pvalue, row.effect) == (ks.statistic, ks.pvalue, ks.statistic)
    assert row.note == ""


def test_crossovers_read_only_the_mann_whitney_rows_of_two_budgets_or_more():
    f = make_frame({("KQV", 2): 1.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=60, seed=3)
    t = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], energy=False, equivalence={"kl": 0.1},
                        pairing="none")
    assert set(t.test) == {"mann_whitney", "ks", "equivalence"}
    c = find_crossovers(t)
    assert len(c) == 1 and c.loc[0, "winners"] == "n = 2: QKQV; n = 3: KQV" and c.loc[0, "crossover"]
    one = compare_schemes(f[f.budget == 2], [("KQV", "QKQV")], metrics=["kl"], energy=False,
                          pairing="none")
    assert find_crossovers(one).empty              # one budget: nothing can cross


def test_progress_bar_over_the_energy_tests_goes_to_stderr_and_changes_nothing(capsys):
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5, ("KQV", 4): 0.0, ("QKQV", 4): 0.5}, n=20)
    quiet = compare_schemes(f, [("KQV", "QKQV")], energy_resamples=99, energy_resolution="fixed",
                            pairing="none")
    assert capsys.readouterr().err == ""
    shown = compare_schemes(f, [("KQV", "QKQV")], energy_resamples=99, energy_resolution="fixed",
                            progress=True, pairing="none")
    err = capsys.readouterr().err
    assert "energy tests" in err and "2/2" in err          # one energy test per budget
    assert shown.equals(quiet)


def test_no_crossover_names_the_budgets_that_could_not_have_rejected():
    """3 pairs per budget: no sign test can reject (2/2³ = 0.25), so "no significant winner
    at any budget" would read as a finding; it says none could have rejected. With one
    budget resolvable, the others are named."""
    from kvstats.analysis.verdicts import NOT_RESOLVABLE

    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=3)
    c = find_crossovers(compare_schemes(f, [("KQV", "QKQV")], energy=False)).set_index("metric")
    assert c.loc["kl", "description"] == ("no crossover can be seen in kl for gaussian, d = 64, "
                                          "N = 128: no budget's test could have rejected.")
    t = compare_schemes(f, [("KQV", "QKQV")], energy=False, metrics=["kl"])
    t.loc[t.budget == 2, "winner"] = "KQV"                  # as if resolvable and won at n = 2
    assert t.loc[t.budget == 3, "winner"].iloc[0].startswith(NOT_RESOLVABLE)
    assert find_crossovers(t).description.iloc[0] == (
        "no crossover in kl for gaussian, d = 64, N = 128: only KQV wins significantly "
        "(not resolvable at n = 3).")
