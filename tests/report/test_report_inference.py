"""The report's wording follows what its tests support: resolution, equivalence, clusters, r's sign."""

import json

import pandas as pd
import pytest

from kvstats.analysis import METRICS
from kvstats.report import hypothesis_report
from kvstats.report.wording import R_CONVENTION, R_HEADER

from _sweep_frames import clustered_frame as _clustered_frame, make_frame
from _sweep_frames import sweep_result as _result


def _comparison_lines(md):
    return [line for line in md.splitlines() if line.startswith("| KQV vs QKQV |")]


def test_unresolvable_tests_never_read_no_significant_difference(tmp_path):
    """Completely separated pairs, energy test fixed at B = 19 in a 76-test family: the old
    report printed "no significant difference" for every energy row; now "not resolvable"."""
    spec = {(s, b): (3.0 if s == "KQV" else 0.0) for b in (2, 3, 4, 5) for s in ("KQV", "QKQV")}
    rep = hypothesis_report(_result(make_frame(spec, n=20, seed=1)), tmp_path, figures=False,
                            energy_resamples=19, energy_resolution="fixed", pairing="none")
    md = rep.files["markdown"].read_text()
    energy = [line for line in _comparison_lines(md) if "6D energy" in line]
    assert len(energy) == 4
    assert all("not resolvable at B = 19" in line and "no significant difference" not in line
               for line in energy)
    assert "4 test(s) could not have rejected" in md
    payload = json.loads(rep.files["json"].read_text())
    assert payload["resolution"]["n_tests"] == 76 and payload["resolution"]["not_resolvable"] == 4
    # with the family's resolution (the default) the same data are separated
    rep = hypothesis_report(_result(make_frame(spec, n=20, seed=1)), tmp_path / "family",
                            figures=False, energy_resamples=19, pairing="none")
    energy = [line for line in _comparison_lines(rep.files["markdown"].read_text()) if "6D energy" in line]
    assert all("distributions differ" in line and "(B = 1519/1519, at the floor)" in line for line in energy)


def test_sign_convention_is_stated_once_for_tables_and_figures(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 1.0, ("QKQV", 3): 0.0}, n=30, seed=2)
    rep = hypothesis_report(_result(f), tmp_path, energy_resamples=19, pairing="none")
    md = rep.files["markdown"].read_text()
    assert R_CONVENTION in md and R_HEADER in md
    assert "first scheme better" not in md and "positive = first" not in md
    kl = rep.comparisons.query("test == 'mann_whitney' and metric == 'kl'").set_index("budget")
    # KQV's KL is smaller at n = 2 (r < 0) and larger at n = 3 (r > 0): the table's sign is the data's
    assert kl.loc[2.0, "effect"] < 0 < kl.loc[3.0, "effect"]
    assert kl.loc[2.0, "winner"] == "KQV" and kl.loc[3.0, "winner"] == "QKQV"
    assert any("r > 0: the first scheme's values are larger" in line for line in md.splitlines()
               if line.startswith("!["))


def test_equivalence_margins_from_the_config(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 3.0}, n=300, seed=3)
    rep = hypothesis_report(_result(f, report={"equivalence": {"kl": 1.0}}), tmp_path, figures=False,
                            energy_resamples=19)
    eq = rep.comparisons[rep.comparisons.test == "equivalence"].set_index("budget")
    assert eq.loc[2.0, "verdict"] == "equivalent within δ" and eq.loc[3.0, "verdict"] == "different"
    md = rep.files["markdown"].read_text()
    assert "## Equivalence within declared margins" in md and "≈" not in md
    with pytest.raises(ValueError, match="report option 'equivalence' has unknown metric 'kll'"):
        hypothesis_report(_result(f, report={"equivalence": {"kll": 0.5}}), tmp_path / "bad", figures=False)


def test_clustered_frames_use_the_cluster_as_the_unit(tmp_path):
    f = _clustered_frame()
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    assert set(rep.comparisons.n_a) == {12}                      # texts, not 120 trials
    assert set(rep.summary.n_clusters) == {12}                   # the means' units
    assert set(rep.summary.n_trials) == {120}                    # their p99/max's trials
    md = rep.files["markdown"].read_text()
    assert "Unit of observation: **the cluster**" in md
    assert "## Trial-level tests (not independent)" in md
    trial = pd.read_csv(rep.files["comparisons_trial_level"])
    assert set(trial.n_a) == {120}
    payload = json.loads(rep.files["json"].read_text())
    assert "comparisons_trial_level" in payload and "cluster" in payload["unit"]
    # unit = "trial" by request: no aggregation, and the header says the p-values are not at their level
    rep = hypothesis_report(_result(f), tmp_path / "trial", figures=False, energy_resamples=19,
                            unit="trial")
    assert set(rep.comparisons.n_a) == {120} and "comparisons_trial_level" not in rep.files
    assert "trial-level (not independent) p-values, which do not hold their nominal level" \
        in rep.files["markdown"].read_text()


def test_synthetic_frames_stay_trial_level(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=30, seed=5).assign(cluster=lambda d: d.trial)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    assert set(rep.comparisons.n_a) == {30} and "comparisons_trial_level" not in rep.files
    assert "Trial-level tests" not in rep.files["markdown"].read_text()


def test_a_spread_difference_is_not_called_no_difference(tmp_path):
    """Same median, 4x the spread: Mann–Whitney finds no shift, KS rejects; the table says so."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=300, seed=6)
    wide = f.scheme == "QKQV"
    f.loc[wide, "snr_k"] *= 4.0
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19, pairing="none")
    line = next(line for line in _comparison_lines(rep.files["markdown"].read_text())
                if "| snr_k |" in line)
    assert line.rstrip(" |").endswith("no significant shift (KS: distributions differ)")


def test_a_rank_tost_not_shown_resolvable_is_counted_and_marked_apart(tmp_path):
    """A rank TOST's ``resolvable`` False means "not shown" (docs/statistics.md, "Resolution of a
    TOST row"): at 4 pairs and δ = 0.1 no known data reach α, so the row is counted in its own
    weaker sentence, not among the tests that "could not have rejected", and marked in the
    section's list and in the comparison table. A ratio TOST at the same size is resolvable."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=4, seed=5)
    rank = {"equivalence": {"kl": 0.1}, "equivalence_test": "rank"}
    rep = hypothesis_report(_result(f, report=rank), tmp_path, figures=False, energy_resamples=19)
    comp, md = rep.comparisons, rep.files["markdown"].read_text()
    eq = comp[comp.test == "equivalence"]
    assert len(eq) == 1 and not eq["resolvable"].any() and not eq["significant"].any()
    others = comp[(comp.test != "equivalence") & ~comp.resolvable & ~comp.significant
                  & comp.pvalue.notna()]
    assert f"{len(others)} test(s) could not have rejected even on the most extreme data" in md
    assert ("1 equivalence test(s) are not known to be able to conclude equivalence at their n "
            "and margin") in md
    res = json.loads(rep.files["json"].read_text())["resolution"]
    assert res["not_resolvable"] == len(others) and res["equivalence_not_shown_resolvable"] == 1
    marked = [line for line in md.splitlines() if "(not known to be resolvable)" in line]
    assert len(marked) == 2 and any(line.startswith("| KQV vs QKQV |") for line in marked)
    assert any(line.startswith("- ") and "**inconclusive**" in line for line in marked)
    ratio = hypothesis_report(_result(f, report={"equivalence": {"kl": 0.1}}), tmp_path / "ratio",
                              figures=False, energy_resamples=19).files["markdown"].read_text()
    assert "(not known to be resolvable)" not in ratio
    assert "0 equivalence test(s) are not known to be able to conclude equivalence" in ratio


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_a_different_verdict_is_not_marked_not_known_to_be_resolvable(tmp_path, pairing):
    """A rank TOST not known to be resolvable (10 units, δ = 0.05) beside a location test that
    rejects: the verdict "different" is the location test's conclusion, so it carries no
    "not known to be resolvable" mark and is not counted in the header's sentence (the old
    report printed "**different** (not known to be resolvable)", a doubt on a conclusion)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 10.0}, n=10, seed=5)
    rank = {"equivalence": {"kl": 0.05}, "equivalence_test": "rank", "pairing": pairing}
    rep = hypothesis_report(_result(f, report=rank), tmp_path, figures=False, energy_resamples=19)
    comp, md = rep.comparisons, rep.files["markdown"].read_text()
    eq = comp[comp.test == "equivalence"]
    assert eq["verdict"].tolist() == ["different"] and not eq["resolvable"].any()
    assert "**different (the difference test rejects; not a test that the margin is exceeded)**" in md
    assert "(not known to be resolvable)" not in md
    assert "0 equivalence test(s) are not known to be able to conclude equivalence" in md
    assert json.loads(rep.files["json"].read_text())["resolution"]["equivalence_not_shown_resolvable"] == 0
