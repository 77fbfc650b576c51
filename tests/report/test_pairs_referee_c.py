"""Referee C on the pairs rule, the Not compared line and the floor marker (32a1966, 5098b5a).

F1: the floor line called tests "resolved" that the same line counted not resolvable.
F2: the docs' two-operating-point recipe (TQ3, TQ4 labels of turboquant_mse at its
defaults) lost the theory rows, and the report said turboquant_mse was not run.
F3: the default pairs' warning suggested a relabel that failed or did not remove it.
F4: "more permutations (energy_resamples) or a smaller family lower the floor".
F5: a pair naming turboquant_mse, which runs as TQ3 and TQ4, got no word of them.
F6: "give the two a budget in common" for two entries of one scheme (then refused).
F7: the error for two labelled entries at a shared budget advised "give each a label".
F8: compare_schemes' warning promised a report's Summary that it does not make.
F9: the documented Python flow warns twice (documented).
F10: "no metric being tested at two or more budgets" where two pairs test it at two.
"""

import re
from pathlib import Path

import pandas as pd
import pytest

import kvstats
from kvstats.analysis import CASE_COLUMNS, compare_schemes, theory_table
from kvstats.report.crossover_text import crossover_summary_line
from kvstats.report.tables import _floor_line
from kvstats.sweep import SweepConfig

from _pair_configs import GRID, TWO_POINTS, _warned

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"


def _floor_rows(resolvable, b=19, adjusted=1.0):
    row = {"test": "energy", "note": "", "n_permutations": b, "max_permutations": b,
           "pvalue": 1 / (1 + b), "pvalue_adjusted": adjusted, "resolvable": resolvable}
    return pd.DataFrame([row] * 6)


FIXED = {"correction": "holm", "alpha": 0.05, "energy_resolution": "fixed", "energy_resamples": 19}
FAMILY = {**FIXED, "energy_resolution": "family", "energy_resamples": 499}


# --- F1, F4: the floor line -----------------------------------------------------------------

def test_floor_rows_not_resolvable_are_not_said_to_have_resolved():
    text = _floor_line(_floor_rows(False), FIXED)
    assert "resolved" not in text
    assert "6 at the floor and not resolvable: B = 19 cannot reach α = 0.05 in this family" in text
    assert 'raise energy_resamples or use energy_resolution = "family"' in text


def test_floor_rows_resolvable_are_said_to_have_resolved():
    text = _floor_line(_floor_rows(True, b=1439, adjusted=0.023), FAMILY)
    assert "6 resolved (p adj ≤ α = 0.05)" in text and "not resolvable" not in text


def test_the_floor_advice_names_what_the_floor_depends_on():
    text = _floor_line(_floor_rows(True, b=1439, adjusted=0.023), FAMILY)
    assert "more permutations (energy_resamples) lower the floor" not in text
    assert "only energy_resamples above 1439 lowers it" in text
    assert "the larger of energy_resamples and the B this family needs" in text
    assert "its B may then fall and its floor p rise" in text


def test_b_is_the_larger_of_energy_resamples_and_the_familys_need(tmp_path):
    # what the floor advice says of B under "family": energy_resamples below the family's
    # need changes nothing; above it, it is B
    from kvstats.stats.sequential import required_resolution

    res = kvstats.run_sweep({**GRID, "budgets": [2], "n_trials": 24, "schemes": ["KV", "KQV"],
                             "comparisons": [["KV", "KQV"]]}, executor="serial", progress=False)
    low = compare_schemes(res.frame, [("KV", "KQV")], energy_resamples=19, seed=1)
    need = required_resolution(low.attrs["n_tests"], 0.05, "holm").n_permutations
    assert need > 19 and low.attrs["energy_max_permutations"] == need
    high = compare_schemes(res.frame, [("KV", "KQV")], energy_resamples=need + 100, seed=1)
    assert high.attrs["energy_max_permutations"] == need + 100


def test_usage_md_floor_paragraph_says_resolved_only_below_alpha():
    text = " ".join(USAGE.read_text().split())
    para = text[text.index('**"(B = …/…, at the floor)"**'):text.index("**‡ after a mean**")]
    assert "The test resolved;" not in para
    assert "resolved only if that adjusted p is at most α" in para
    assert "only `energy_resamples` above the B shown lowers it" in para


# --- F2: theory rows of labelled operating points ---------------------------------------------

@pytest.fixture(scope="module")
def two_points(tmp_path_factory):
    out = tmp_path_factory.mktemp("two") / "sweep"
    res = kvstats.run_sweep(TWO_POINTS, out=out, executor="serial", progress=False)
    rep = kvstats.hypothesis_report(res, out.parent / "rep")
    return res, rep


def test_the_recipes_labels_keep_their_theory_rows(two_points):
    _, rep = two_points
    k = rep.theory[rep.theory["quantity"] == "k_snr_db"]
    assert set(zip(k["scheme"], k["budget"])) == {("TQ3", 3.0), ("TQ4", 4.0)}
    md = rep.files["markdown"].read_text()
    assert "was run." not in md.split("## Theory beside measurement", 1)[1].split("\n## ", 1)[0]


def test_theory_table_aliases_match_a_label_as_its_scheme(two_points):
    res, _ = two_points
    frame = res.frame[res.frame["scheme"] == "TQ3"]
    plain = theory_table(frame.assign(scheme="turboquant_mse"), n_resamples=99)
    named = theory_table(frame, n_resamples=99, aliases={"TQ3": "turboquant_mse"})
    assert theory_table(frame, n_resamples=99)["quantity"].eq("k_snr_db").sum() == 0
    assert named["scheme"].eq("TQ3").all()
    pd.testing.assert_frame_equal(named.drop(columns="scheme"), plain.drop(columns="scheme"))


# --- F3: the relabel the default pairs' warning suggests ------------------------------------

def _relabelled(cfg, msg):
    """The config after the warning's advice, every entry it names given its label."""
    fixes = dict(re.findall(r"of (\S+) label = \"(\w+)\"", msg))
    assert fixes, msg
    schemes = []
    for entry in cfg["schemes"]:
        label = SweepConfig.from_dict({**cfg, "schemes": [entry], "comparisons": []}).schemes[0].display()
        schemes.append({**entry, "label": fixes[label]} if label in fixes else entry)
    return {**cfg, "schemes": schemes}


F32 = {"norm_dtype": "float32"}


@pytest.mark.parametrize("schemes", [
    ["KQV", {"name": "KQV", "params": F32}],                                    # relabel: duplicate
    [{"name": "KQV", "params": F32},
     {"name": "turboquant_mse", "params": {"rotation": "identity", **F32}}],   # relabel: no pair
])
def test_no_relabel_is_suggested_where_it_cannot_work(schemes):
    _, said = _warned(lambda: SweepConfig.from_dict({**GRID, "budgets": [3], "schemes": schemes}))
    (msg,) = [m for m in said if m.startswith("no comparison: none of the default pairs")]
    assert "label =" not in msg


def test_the_suggested_relabel_names_every_entry_and_removes_the_warning():
    cfg = {**GRID, "budgets": [3], "schemes": [{"name": "KQV", "params": F32}, {"name": "QKQV", "params": F32}]}
    _, said = _warned(lambda: SweepConfig.from_dict(cfg))
    (msg,) = [m for m in said if m.startswith("no comparison: none of the default pairs")]
    assert "KQV[norm_dtype='float32'] label = \"KQV\"" in msg
    assert "QKQV[norm_dtype='float32'] label = \"QKQV\"" in msg
    fixed, said = _warned(lambda: SweepConfig.from_dict(_relabelled(cfg, msg)))
    assert not [m for m in said if m.startswith("no comparison")], said


# --- F5: a pair naming the scheme of labelled operating points -------------------------------

def test_a_pair_naming_the_scheme_is_told_its_labels(two_points, tmp_path):
    with pytest.raises(ValueError, match=r"'turboquant_mse' runs here as TQ3, TQ4: name one of them"):
        SweepConfig.from_dict({**TWO_POINTS, "comparisons": [["turboquant_mse", "kivi1"]]})
    with pytest.raises(ValueError, match=r"'turboquant_mse' runs here as TQ3, TQ4: name one of them"):
        SweepConfig.from_dict({**{k: v for k, v in TWO_POINTS.items() if k != "comparisons"},
                               "report": {**GRID["report"], "comparisons": [["turboquant_mse", "kivi1"]]}})
    res, _ = two_points
    with pytest.raises(ValueError, match=r"'turboquant_mse' runs here as TQ3, TQ4: name one of them"):
        kvstats.hypothesis_report(res, tmp_path / "r", comparisons=[("turboquant_mse", "kivi1")])


# --- F6, F7: one scheme twice ----------------------------------------------------------------

E4 = {**GRID, "budgets": [2, 3], "comparisons": [["A", "B"]],
      "schemes": [{"name": "turboquant_mse", "label": "A", "budgets": [4]},
                  {"name": "turboquant_mse", "label": "B"}]}


def test_two_entries_of_one_scheme_are_advised_single_budgets_and_the_advice_works():
    _, said = _warned(lambda: SweepConfig.from_dict(E4))
    (msg,) = [m for m in said if m.startswith("no comparison of A and B")]
    assert "Give the two a budget in common" not in msg
    assert msg.endswith("give each a single budget (A at [4], B at [3]) to compare them")
    after = {**E4, "schemes": [E4["schemes"][0], {**E4["schemes"][1], "budgets": [3]}]}
    _, said = _warned(lambda: SweepConfig.from_dict(after))
    assert not [m for m in said if m.startswith("no comparison")], said


def test_two_labelled_entries_at_a_shared_budget_are_advised_disjoint_budgets_not_labels():
    cfg = {**GRID, "budgets": [3], "comparisons": [],
           "schemes": [{"name": "turboquant_mse", "label": "TQ3", "budgets": [3]},
                       {"name": "turboquant_mse", "label": "TQ4", "budgets": [3, 4]}]}
    with pytest.raises(ValueError) as exc:
        SweepConfig.from_dict(cfg)
    assert "give each a label" not in str(exc.value)
    assert str(exc.value).endswith(", or give the two disjoint budgets (two operating points)")


def test_usage_md_says_each_entry_needs_a_label_of_its_own():
    text = " ".join(USAGE.read_text().split())
    assert "and so are two entries unless each has a label of its own" in text
    assert "so is a labelled `turboquant_mse` beside an unlabelled one" in text


# --- F8: compare_schemes makes no report ---------------------------------------------------

def test_compare_schemes_warning_promises_no_report():
    res = kvstats.run_sweep({**GRID, "budgets": [3, 4], "comparisons": [],
                             "schemes": [{"name": "turboquant_mse", "label": "TQ", "budgets": [3, 4]},
                                         {"name": "kivi", "budgets": [1, 2]}]},
                            executor="serial", progress=False)
    _, said = _warned(lambda: compare_schemes(res.frame, [("TQ", "kivi")], energy=False))
    (msg,) = [m for m in said if m.startswith("no comparison of TQ and kivi")]
    assert "Summary" not in msg and "report" not in msg.split("; see docs")[0]


# --- F9: documented ---------------------------------------------------------------------------

def test_usage_md_says_the_python_flow_warns_twice_and_how_not_to():
    text = " ".join(USAGE.read_text().split())
    assert "a pair in both that no budget compares is warned of twice" in text


# --- F10: the crossover line -------------------------------------------------------------------

def test_the_crossover_line_says_no_pair_tests_a_metric_at_two_budgets():
    case = {c: 0 for c in CASE_COLUMNS}
    comp = pd.DataFrame([{**case, "scheme_a": a, "scheme_b": b, "metric": "kl", "test": "sign",
                          "budget": n, "budget_b": nb, "winner": a, "verdict": a, "n_informative": 30}
                         for a, b, n, nb in [("TQ3", "kivi1", 3.0, 1.0), ("TQ4", "kivi2", 4.0, 2.0)]])
    line = crossover_summary_line(comp, pd.DataFrame())
    assert line == ("Crossovers: none can be read, no pair having a metric tested at two or more budgets "
                    "(operating points given as separate labels are separate pairs).")
