"""Equal constant samples are a finding under either design (referee R8, finding 3).

Under pairing = "trial" a sign test where no pair differs (``n_informative`` 0) is counted
apart: the two schemes' values were equal on every unit. Under pairing = "none" the same
data (both samples all one value) gave Mann–Whitney and KS rows with ``n_informative`` NaN:
the Summary called them "a limit of the design, not a finding", and crossovers.csv "no
crossover can be seen". Now two-sample rows of one pooled value carry ``n_informative`` 0,
agreed_rows counts them, and both designs describe the data alike.
"""

import pytest

from kvstats.analysis import compare_schemes, find_crossovers
from kvstats.analysis.crossover import agreed_rows
from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result

SPEC = {("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}


def _frame():
    f = make_frame(SPEC, n=40, seed=5)
    f["argmax_shift"] = 0.0     # no top key moves, for either scheme, on any trial
    return f


@pytest.mark.parametrize("pairing, tests, none", [("trial", ["sign"], "no pair differs"),
                                                  ("none", ["mann_whitney", "ks"], "no value differs")])
def test_both_designs_count_equal_constant_samples_as_a_finding(tmp_path, pairing, tests, none):
    rep = hypothesis_report(sweep_result(_frame()), tmp_path, figures=False, energy=False,
                            pairing=pairing)
    comp = rep.comparisons
    rows = comp[comp.metric == "argmax_shift"]
    assert sorted(rows.test) == sorted(tests * 2)
    assert (rows.n_informative == 0).all() and agreed_rows(rows).all()
    assert agreed_rows(comp).sum() == len(rows)    # only those: every other metric's values differ
    summary = rep.files["markdown"].read_text().split("## Methods")[0]
    assert summary.count(f"2 not resolvable (could not have rejected): 2 because {none} at all (the "
                         "two schemes' values were equal on every unit: a finding") == len(tests)
    assert "a limit of the design, not a finding about the schemes" not in summary
    assert "have a budget whose test could not have rejected" not in summary
    row = rep.crossovers.set_index("metric").loc["argmax_shift"]
    assert row["description"].endswith(f"{none} at any budget (the values were equal on every unit).")


def test_a_two_sample_row_of_one_pooled_value_says_so():
    """Its verdict names the identical points (verdicts.py reads n_informative 0), and a row
    whose samples are each constant but differ is not one."""
    f = _frame()
    f.loc[(f.scheme == "QKQV") & (f.budget == 3.0), "argmax_shift"] = 0.2   # constant, not equal
    comp = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    mw = comp[(comp.metric == "argmax_shift") & (comp.test == "mann_whitney")].set_index("budget")
    assert mw.loc[2.0, "n_informative"] == 0
    assert mw.loc[2.0, "verdict"].endswith("all 80 pooled points are identical, so every "
                                           "relabelling gives the observed statistic")
    assert mw.loc[3.0, "significant"] and mw.loc[3.0, "n_informative"] != 0
    cross = find_crossovers(comp).set_index("metric").loc["argmax_shift", "description"]
    assert "no value differs at n = 2" in cross and "can be seen" not in cross
