"""experiments/compare_designs.py: the winner transitions between two reports of one sweep.

The script is loaded from its file (experiments/ is not a package); the two reports are
real `compare_schemes` tables of a small synthetic frame under both designs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import METRICS, compare_schemes


@pytest.fixture(scope="module")
def script(load_experiment):
    return load_experiment("compare_designs")


def _frame(seed=0, n=40):
    # KQV vs QKQV on shared trials: kl differs by a shift with a large shared trial effect
    # (only the paired test sees it); snr_k differs by a lot (both see it); the rest equal
    rng = np.random.default_rng(seed)
    shared = {m: rng.normal(0, 5, n) for m in METRICS}
    cells = []
    for scheme, shift in (("KQV", 0.0), ("QKQV", 1.0)):
        values = {m: shared[m] + rng.normal(0, 0.3, n) for m in METRICS}
        values["kl"] = values["kl"] + shift
        values["snr_k"] = values["snr_k"] + 40 * shift
        cells.append(pd.DataFrame(values).assign(distribution="gaussian", params="-", dim=64, n_keys=128,
                                                 budget=4.0, scheme=scheme, bits_nominal=4.0,
                                                 bits_total=4.25, trial=np.arange(n)))
    return pd.concat(cells, ignore_index=True)


def test_transitions_label_each_row(script, tmp_path):
    f = _frame()
    none = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    trial = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="trial")
    joined = script.transitions(none, trial).reset_index().set_index("metric")
    assert joined.loc["kl", "transition"] == "appear"          # only the paired test rejects
    assert joined.loc["snr_k", "transition"] == "agree"
    assert joined.loc["snr_k", "winner_a"] == joined.loc["snr_k", "winner_b"] == "QKQV"  # higher SNR
    assert len(joined) == len(METRICS)
    # read from report folders (tables/comparisons.csv) or the CSV itself; main prints the counts
    for name, t in (("a", none), ("b", trial)):
        (tmp_path / name / "tables").mkdir(parents=True)
        t.to_csv(tmp_path / name / "tables" / "comparisons.csv", index=False)
    out = script.main([str(tmp_path / "a"), str(tmp_path / "b" / "tables" / "comparisons.csv")])
    assert out["transition"].value_counts()["appear"] >= 1
    # a winner named the other way is a flip, not an agreement
    turned = trial.copy()
    turned.loc[(turned["metric"] == "snr_k") & (turned["test"] == "sign"), "winner"] = "KQV"
    assert script.transitions(none, turned).reset_index().set_index("metric").loc["snr_k", "transition"] == "flip"
    # the reverse direction: the paired winner vanishes
    back = script.transitions(trial, none).reset_index().set_index("metric")
    assert back.loc["kl", "transition"] == "vanish"


def test_a_table_without_one_location_test_is_refused(script):
    f = _frame()
    none = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    with pytest.raises(ValueError, match="exactly one location test"):
        script.location_rows(none[none["test"] == "ks"])
