"""Referee T9's report findings F1, F3, F4, F5, each pinned by the output it read wrong.

F1 the Shannon–φ limits were chosen from side bits grouped across cases: qjl with a fixed
sketch m codes keys at m/d bits, so one case's plane labelled "3 (keys at 2)" and drew no
limit at 2; F3 unit = "trial" on a report mixing real (clustered) and synthetic cases marked
every verdict "(trials not independent)"; F4 the unit spans named "real cases" twice; F5 the
Methods explained missing TOSTs by equivalence rows that did not exist. Each test fails on
the code before the fix.
"""

from __future__ import annotations

import warnings

import matplotlib
import pandas as pd
import pytest
from _sweep_frames import clustered_frame
from _sweep_frames import sweep_result as _result

import kvstats
from kvstats import hypothesis_report
from kvstats.analysis.theory import nominal_bounds
from kvstats.report.notation import _cluster_spans
from kvstats.report.shannon_phi import _side_bits, _with_side_budgets, plot_shannon_phi

matplotlib.use("Agg")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_FAST = dict(energy_resamples=19, bootstrap_resamples=99, figures=False)


# --- F1 ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qjl_two_dims():
    # qjl with m = 256 codes each key coordinate at m/d bits: 4 at d = 64, 2 at d = 128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kvstats.run_sweep({"seed": 1, "budgets": [3], "dims": [64, 128], "n_keys": [16],
                                  "n_trials": 4, "distributions": ["gaussian"], "comparisons": [],
                                  "schemes": [{"name": "qjl", "params": {"m": 256}}, "KQV"]},
                                 executor="serial", progress=False).frame


def test_each_case_gets_the_limits_of_its_own_side_bits(qjl_two_dims):
    f = qjl_two_dims
    qjl = next(s for s in f["scheme"].unique() if s.startswith("qjl"))
    # the premise: the keys' bits differ between the two cases
    assert {d: _side_bits(f[f["dim"] == d], "k")[(qjl, 3.0)] for d in (64, 128)} == {64: 4.0, 128: 2.0}
    extended = _with_side_budgets(f)
    assert {d: set(extended.loc[extended["dim"] == d, "budget"]) for d in (64, 128)} == \
        {64: {3.0, 4.0}, 128: {2.0, 3.0}}
    # as hypothesis_report draws each case's plane (render._figures): every "keys at b" label
    # has its "limit, n = b" line
    nb = nominal_bounds(extended)
    for d, side in ((64, 4), (128, 2)):
        here = nb[(nb["dim"] == d) & (nb["place"] == "k") & nb["bound_snr_db"].notna()]
        fig = plot_shannon_phi(f, "k", dim=d, bounds=dict(zip(here["budget"], here["bound_snr_db"])))
        texts = {t.get_text() for ax in fig.axes for t in ax.texts}
        matplotlib.pyplot.close(fig)
        assert f"3 (keys at {side})" in texts and f"limit, n = {side}" in texts, (d, sorted(texts))


# --- F3 ---------------------------------------------------------------------------------

def _mixed():
    real = clustered_frame(n_texts=8, per_text=4)
    synthetic = clustered_frame(n_texts=32, per_text=1, seed=1).assign(distribution="gaussian",
                                                                       params="-")
    synthetic["cluster"] = synthetic["trial"]     # each synthetic trial its own cluster
    return pd.concat([real, synthetic], ignore_index=True)


def _rows_of(md: str, heading: str) -> list[str]:
    body = md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line.startswith("| KQV vs QKQV |")]


def test_trial_unit_on_a_mixed_report_marks_only_the_clustered_cases(tmp_path):
    md = hypothesis_report(_result(_mixed()), tmp_path / "m", unit="trial", metrics=["kl"],
                           **_FAST).files["markdown"].read_text()
    real, synthetic = _rows_of(md, "real (layer=0)"), _rows_of(md, "gaussian, d = 64")
    assert real and all(line.rstrip(" |").endswith("(trials not independent)") for line in real)
    assert synthetic and not any("(trials not independent)" in line for line in synthetic)
    methods = md.split("## Methods", 1)[1].split("## Metrics and units", 1)[0]
    unit = next(line for line in methods.splitlines() if line.startswith("- Unit of observation"))
    assert "trials of some cases come in fewer clusters" in unit
    # the means are of trials here (32), which come from 8 texts (referee T11 F2)
    assert "real cases: 32 trials per mean from 8 texts (4 per text)" in unit
    assert "the other cases' trials are independent" in unit
    rate = next(line for line in methods.splitlines() if line.startswith("- Error rate"))
    assert "no error-rate guarantee" in rate and "only those cases' verdicts are marked" in rate
    assert "every verdict of a test is marked" not in rate


# --- F4 ---------------------------------------------------------------------------------

def test_unit_spans_name_two_kinds_of_real_case_apart():
    a = clustered_frame(n_texts=8, per_text=4)
    b = clustered_frame(n_texts=32, per_text=1, seed=1).assign(params="layer=1")
    text = _cluster_spans(pd.concat([a, b], ignore_index=True))
    assert text == ("real cases: 8 texts per mean, 4 trials per text; the other real cases: "
                    "32 trials per mean, each its own cluster")


# --- F5 ---------------------------------------------------------------------------------

def test_no_pairs_compared_is_not_explained_by_absent_equivalence_rows(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"],
                                 "dims": [32], "n_keys": [64], "n_trials": 12}, executor="serial",
                                progress=False)
        rep = hypothesis_report(res, tmp_path / "e", comparisons=[], equivalence={"kl": 0.2}, **_FAST)
    assert rep.comparisons.empty
    rule = next(line for line in rep.files["markdown"].read_text().splitlines()
                if line.startswith("- Winner rule"))
    assert "each equivalence row says why" not in rule
    assert "no pairs were compared, so no TOST ran" in rule
