"""Marks and claims read as the numbers and the literature say (referee R8, findings 4, 5 and
the first "not demonstrated" item).

4. The KL tail index's 95% upper bound, printed to 3 significant digits, rounded across its
   own threshold: 1.996 (marked ‡: below 2) and 2.004 (not marked) both printed "2".
5. The rate–distortion table marked an unreliable pooled SNR ‡ but not the gap computed from
   it, whose interval resamples the same means.
N. The Methods' "Error rate" line claimed a family-wise bound for hommel, sidak and
   holm-sidak under any dependence. Šidák's bound rests on the product inequality (exact
   under independence, holding under positive orthant dependence: Šidák 1967), Holm–Šidák's
   on it for the true nulls (Holland & Copenhaver 1987), Hommel's (the closure of Simes'
   test, Hommel 1988) on the Simes inequality, proved under independence (Simes 1986) and
   positive dependence (MTP2: Sarkar 1998; PRDS: Benjamini & Yekutieli 2001). Only Holm and
   Bonferroni (Boole's inequality) hold under any dependence.
"""

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis.theory import BOUND_QUANTITIES
from kvstats.report import hypothesis_report
from kvstats.report.tables import _bound_fmt, _scheme_table

from _sweep_frames import make_frame, sweep_result


def _summary(tail: float, reliable: bool) -> pd.DataFrame:
    rows = [{"scheme": "KV", "metric": m, "mean": 1.0, "ci_low": 0.5, "ci_high": 1.5,
             "ci_reliable": reliable if m == "kl" else True, "p99": 2.0, "max": 3.0,
             "tail_index": tail if m == "kl" else np.nan, "n_trials": 50, "bits_nominal": 2.0,
             "bits_total": 2.125} for m in ("kl", "phi_k")]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("tail", [1.996, 1.9996, 1.99999, 2.004, 2.0004, 2.0, 1.95, 2.5, 13.7])
def test_the_tail_index_is_printed_on_its_side_of_2(tail):
    """The ‡ of summary_table (ci_reliable False where the bound is below 2) and the printed
    bound agree: below 2 exactly when marked, "2" only where the bound is 2."""
    reliable = not tail < 2
    row = _scheme_table(_summary(tail, reliable)).iloc[0]
    printed = row["kl tail α (95% upper)"]
    assert (float(printed) < 2) == (not reliable) == row["kl"].endswith("‡")
    assert (printed == "2") == (tail == 2.0)
    assert abs(float(printed) - tail) <= 5e-3 * tail          # still the value, to ≥ 3 digits


def test_the_gap_is_marked_beside_its_pooled_snr():
    r = {"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128, "budget": 2.0,
         "quantity": BOUND_QUANTITIES["k"], "scheme": "KV", "rate": 2.125, "predicted": 9.3,
         "measured": 14.0, "ci_low": 12.0, "ci_high": 15.0, "gap_db": 4.7, "gap_low": 3.7,
         "gap_high": 6.7}
    table = _bound_fmt(pd.DataFrame([{**r, "ci_reliable": False}, {**r, "ci_reliable": True}]))
    assert table["pooled SNR (dB) [95% CI]"].tolist() == ["14.00 [12.00, 15.00] ‡", "14.00 [12.00, 15.00]"]
    assert table["gap (dB) [95% CI]"].tolist() == ["4.70 [3.70, 6.70] ‡", "4.70 [3.70, 6.70]"]


@pytest.mark.parametrize("correction, words", [
    ("holm", "(family-wise error rate, under any dependence;"),
    ("bonferroni", "(family-wise error rate, under any dependence;"),
    ("sidak", "(family-wise error rate, under independence or positive orthant dependence of the "
              "tests (Šidák's product inequality), which is not known to hold for two-sided tests "
              "on shared trials (holm and bonferroni hold under any);"),
    ("holm-sidak", "(family-wise error rate, under independence or positive orthant dependence of "
                   "the tests (Šidák's product inequality, for the tests of the true nulls), which "
                   "is not known to hold for two-sided tests on shared trials"),
    ("hommel", "(family-wise error rate, when the Simes inequality holds for the tests of the true "
               "nulls: under independence or positive dependence (MTP2, PRDS), which is not known "
               "to hold for two-sided tests on shared trials")])
def test_the_error_rate_line_states_each_corrections_condition(tmp_path, correction, words):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30, seed=21)
    rep = hypothesis_report(sweep_result(f), tmp_path, figures=False, energy=False,
                            correction=correction)
    line = next(x for x in rep.files["markdown"].read_text().splitlines() if x.startswith("- Error rate:"))
    assert words in line, line
