"""An equivalence row whose two arms are identical in every pair is labelled so in the report
(its score-type p is a bound, not a measured margin); arms 1e-9 apart are not."""

from kvstats.report import hypothesis_report
from kvstats.report.wording import IDENTICAL_PAIRS_NOTE

from _sweep_frames import make_frame, sweep_result


def test_identical_pairs_are_labelled_in_the_report(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=100, seed=3)
    for budget, factor in ((2, 1.0), (3, 1 + 1e-9)):
        a = (f.scheme == "KQV") & (f.budget == budget)
        b = (f.scheme == "QKQV") & (f.budget == budget)
        f.loc[b, "kl"] = f.loc[a, "kl"].to_numpy() * factor
    rep = hypothesis_report(sweep_result(f, report={"equivalence": {"kl": 0.1}}), tmp_path,
                            figures=False, energy_resamples=19)
    eq = rep.comparisons[rep.comparisons.test == "equivalence"].set_index("budget")
    assert eq.loc[2.0, "identical_pairs"] and not eq.loc[3.0, "identical_pairs"]
    md = rep.files["markdown"].read_text()
    bullets = [line for line in md.splitlines()
               if line.startswith("- ") and "KQV vs QKQV, kl:" in line]
    assert [("identical in all 100 pairs" in line) for line in bullets] == [True, False]
    assert "n = 2," in bullets[0]
    # the bullet and the equivalence table's cell, once each
    assert sum("identical in all 100 pairs" in line for line in md.splitlines()) == 2
    assert IDENTICAL_PAIRS_NOTE in md
