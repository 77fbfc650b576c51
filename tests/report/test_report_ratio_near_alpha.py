"""A paired ratio TOST's "equivalent within δ" whose adjusted p lies within a factor 4 of α is
marked §: the t approximation's one-sided error on skewed pairs was measured at up to 2.7 × α
at a family's small α (docs/statistics.md, "Calibration at small α"). Far below α, unpaired,
or not "equivalent": no mark."""

import numpy as np

from kvstats.report import hypothesis_report
from kvstats.report.tables import RATIO_NEAR_ALPHA_MARK, RATIO_NEAR_ALPHA_NOTE

from _sweep_frames import make_frame, sweep_result


def _report(tmp_path, pairing):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=100, seed=3)
    rng = np.random.default_rng(1)
    # b = a times log-normal noise: sd 0.13 puts budget 2's adjusted TOST p in (α/4, α] in this
    # family of 22 tests, sd 0.01 puts budget 3's far below α
    for budget, sd in ((2, 0.13), (3, 0.01)):
        a = (f.scheme == "KQV") & (f.budget == budget)
        b = (f.scheme == "QKQV") & (f.budget == budget)
        f.loc[b, "kl"] = f.loc[a, "kl"].to_numpy() * np.exp(rng.normal(0, sd, 100))
    rep = hypothesis_report(sweep_result(f, report={"equivalence": {"kl": 0.1}, "pairing": pairing}),
                            tmp_path / pairing, figures=False, energy_resamples=19)
    eq = rep.comparisons[rep.comparisons.test == "equivalence"].set_index("budget")
    return eq, rep.files["markdown"].read_text()


def test_paired_verdict_near_alpha_is_marked(tmp_path):
    eq, md = _report(tmp_path, "trial")
    alpha = 0.05
    assert (eq["verdict"] == "equivalent within δ").all()
    assert alpha / 4 < eq.loc[2.0, "pvalue_adjusted"] <= alpha < 4 * alpha
    assert eq.loc[3.0, "pvalue_adjusted"] < alpha / 4
    bullets = [line for line in md.splitlines()
               if line.startswith("- ") and "KQV vs QKQV, kl:" in line]
    assert [RATIO_NEAR_ALPHA_MARK in line for line in bullets] == [True, False]
    cells = [line for line in md.splitlines() if line.startswith("| KQV vs QKQV | kl |")]
    assert [RATIO_NEAR_ALPHA_MARK in line for line in cells] == [True, False]
    assert RATIO_NEAR_ALPHA_NOTE in md


def test_unpaired_rows_are_not_marked(tmp_path):
    eq, md = _report(tmp_path, "none")
    assert RATIO_NEAR_ALPHA_MARK not in md and RATIO_NEAR_ALPHA_NOTE not in md
