"""The default report's words say only what its tests support (referee RS, F1–F6): the docs'
quick-report numbers, the crossover counts beside the Methods' "could not have rejected", the
header without margins, the pair tables' unadjusted interval and the sign test's n, and the
sparse-mean note by kind."""

import re
from pathlib import Path

import pandas as pd
import pytest

from kvstats.analysis import CASE_COLUMNS
from kvstats.analysis.compare import NOT_RESOLVABLE
from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """KQV vs QKQV at n = 2, 3 on 40 trials. argmax_shift: 3 trials shift under KQV at n = 2,
    1 under QKQV at n = 3 (a lone success: ‡), so its sign tests differ on 3 and 1 pairs and
    could not have rejected (a limit of the design); recall@5 is 1 on every trial of both
    (no pair differs at either budget: equal on every unit, a finding)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=40, seed=7)
    f["argmax_shift"] = 0.0
    f.loc[(f.scheme == "KQV") & (f.budget == 2) & (f.trial < 3), "argmax_shift"] = 1.0
    f.loc[(f.scheme == "QKQV") & (f.budget == 3) & (f.trial == 0), "argmax_shift"] = 1.0
    f["recall_at_5"] = 1.0
    rep = hypothesis_report(sweep_result(f), tmp_path_factory.mktemp("rs"), figures=False,
                            energy_resamples=19)
    return rep, rep.files["markdown"].read_text()


def _line(md, start):
    return next(line for line in md.splitlines() if line.startswith(start))


def test_f3_crossover_counts_add_up_to_the_tables(report):
    """The referee's count: (case, pair, metric)s with some "not resolvable" sign row (here
    argmax_shift, too few pairs differ, and recall@5, none differs): 2. Before, the crossover
    paragraph and the Summary named only the first, the second left out without a word."""
    rep, md = report
    s = rep.comparisons[rep.comparisons.test == "sign"]
    keys = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric"]
    tables = int(s.groupby(keys).verdict.apply(lambda v: v.str.startswith(NOT_RESOLVABLE).any()).sum())
    assert tables == 2
    section = md.split("## Crossovers of the winner across budgets")[1].split("\n## ")[0]
    blind = re.search(r"(\d+) have a budget whose test could not have rejected", section)
    equal = re.search(r"at (\d+) every \"not resolvable\" budget is one where no unit tells", section)
    assert blind and equal, section
    assert int(blind[1]) + int(equal[1]) == tables
    bullet = _line(md, "- Crossovers:")
    assert "1 of them has a budget whose test could not have rejected" in bullet
    assert "at 1 more every \"not resolvable\" budget is one where no unit tells" in bullet
    # the Methods count both kinds
    assert "4 test(s) could not have rejected" in md


def test_f4_no_margins_no_equivalence_claims(report, tmp_path):
    rep, md = report
    methods = md.split("## Methods")[1]
    assert not (rep.comparisons.test == "equivalence").any()
    assert "no equivalence margins were declared, so nothing in this report supports \"≈\"" in methods
    assert "equivalence tests (declared margins) are for" not in methods
    err = _line(methods.lstrip("\n"), "- Error rate:")
    assert "equivalent within δ" not in err and "\"distributions differ\")" in err
    # with a margin: the text as before
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=40, seed=3)
    eq = hypothesis_report(sweep_result(f, report={"equivalence": {"kl": 1.0}}), tmp_path,
                           figures=False, energy_resamples=19).files["markdown"].read_text()
    assert "that is what the equivalence tests (declared margins) are for." in eq
    assert "no equivalence margins were declared" not in eq
    assert "\"equivalent within δ\") rejects a true null" in _line(eq.split("## Methods")[1].lstrip("\n"),
                                                                 "- Error rate:")


def test_f5_pair_table_says_unadjusted_and_shows_the_sign_tests_n(report):
    rep, md = report
    head = _line(md, "| pair | metric |")
    assert "dominance [95% CI, unadjusted] (> 0: a larger)" in head
    assert "| n(a > b) of k (pairs that differ) |" in head
    rows = [line for line in md.splitlines() if line.startswith("| KQV vs QKQV | argmax_shift |")]
    assert len(rows) == 2
    assert "| 3 of 3 |" in rows[0] and "| 0 of 1 |" in rows[1]
    # the tables' data columns are unchanged: the count and its n stay two columns
    csv = pd.read_csv(rep.files["markdown"].parent / "tables" / "comparisons.csv")
    assert {"statistic", "n_informative", "effect", "effect_low", "effect_high"} <= set(csv.columns)


def test_f6_sparse_note_is_worded_by_kind(report):
    from kvstats.report.wording import HEAVY_NOTE

    rep, md = report
    note = " ".join(HEAVY_NOTE.split())   # in a report only where a mean is marked
    assert "sparse continuous values (a few KLs, the rest 0) covered about 0.89" in note
    assert "is a proportion: its interval is the exact Clopper–Pearson one of its count" in note
    # this report's lone success (QKQV n = 3, argmax_shift: 1 of 40) is not marked: exact
    assert "‡" not in md


def test_f1_usage_names_no_winner_the_paired_test_does_not_support():
    usage = (DOCS / "usage.md").read_text()
    para = usage[usage.index("**One more bit can be worse**"):usage.index("Not a bug:")]
    assert "beats" not in para
    assert "the paired sign test finds no significant difference" in " ".join(para.split())
    assert "KQV is better on every" in " ".join(para.split())


def test_f2_statistics_quick_report_numbers_are_todays_or_dated():
    from kvstats.stats.power import pairs_for_power
    from kvstats.stats.sequential import required_resolution

    text = " ".join((DOCS / "statistics.md").read_text().split())
    for stale in ("m = 1,140 (the quick report)", "quick report's family size** (m = 1,140",
                  "whose 600-test family", "(α = 0.05/1,140): n = 92"):
        assert stale not in text, stale
    # the numbers given for today's family (m = 720) are what the code computes
    assert required_resolution(720).n_permutations == 14399
    assert "m = 720 (today's quick report) → B = 14,399" in text
    n = pairs_for_power(0.5, alpha=0.05 / 720).n_pairs
    assert f"(α = 0.05/720, m = 720 today: `pairs_for_power(0.5, alpha=0.05/720)`, 2026-12-03): n = {n}" in text
    assert "quick report's family size of 2026-12-01" in text
