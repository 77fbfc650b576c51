"""An equivalence row with no test says why in a reader's words: which scheme, how many of
its values. Before, the ratio TOST's own error reached the report: "inconclusive (no
equivalence test: x must be finite; received 3 inf value(s) in array of shape (40,) and
dtype float64)", x being an argument's name inside kvstats."""

import numpy as np
import pytest

from kvstats.analysis import compare_schemes
from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result


def _equivalence(f, pairing, metric):
    t = compare_schemes(f, [("KQV", "QKQV")], pairing=pairing, energy=False, metrics=[metric],
                        equivalence={metric: 0.2}, equivalence_test="ratio")
    return t[t["test"] == "equivalence"].iloc[0]


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_which_scheme_and_how_many(pairing):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40)
    f.loc[(f["scheme"] == "QKQV") & (f["trial"] < 3), "kl"] = np.inf
    row = _equivalence(f, pairing, "kl")
    assert row["verdict"] == ("inconclusive (no equivalence test: QKQV has 3 non-finite value(s) "
                              "of 40 (3 +inf), so its mean is not finite and no ratio of means "
                              "exists)")
    # the other reasons name the scheme too
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40).assign(argmax_shift=0.0)
    assert _equivalence(f, pairing, "argmax_shift")["note"] == (
        "no equivalence test: KQV's 40 values and QKQV's 40 values are all 0; a ratio of means "
        "0/0 is undefined")   # both arms all 0: both named (referee T4 F7)
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40).assign(argmax_shift=0.0)
    f.loc[f["scheme"] == "QKQV", "argmax_shift"] = 0.5
    assert _equivalence(f, pairing, "argmax_shift")["note"] == (
        "no equivalence test: KQV's 40 values are all 0; a ratio to a mean of 0 is undefined")
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=40)
    f.loc[(f["scheme"] == "KQV") & (f["trial"] == 5), "kl"] = -1.0     # a hand-made frame
    assert _equivalence(f, pairing, "kl")["note"] == (
        "no equivalence test: KQV has 1 negative value(s) of 40; a ratio of means is tested "
        "on values ≥ 0")


def test_the_report_names_the_scheme_not_an_argument(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40)
    f.loc[(f["scheme"] == "KQV") & (f["budget"] == 3) & (f["trial"] < 2), "kl"] = np.inf
    result = sweep_result(f, report={"equivalence": {"kl": 0.2}, "energy_resamples": 49,
                                     "figures": False})
    rep = hypothesis_report(result, tmp_path, metrics=["kl"])
    md = rep.files["markdown"].read_text()
    assert "KQV has 2 non-finite value(s) of 40 (2 +inf)" in md
    assert "x must" not in md and "dtype" not in md
