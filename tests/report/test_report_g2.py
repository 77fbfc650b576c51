"""The Shannon–φ plane plots the tables' means when some trials are exact, and the Summary's
family line states the dependence under which its correction bounds the error rate.

1. An exact trial (SNR = +inf, φ = 0) used to be dropped before the plane's means: a cell
   exact on some trials plotted the mean of the others, not what the tables print
   (:func:`kvstats.analysis.summary_table`: φ's mean counts the 0, the SNR's mean is +inf).
   The reference values here are summary_table's, on the same frame.
2. The Summary said "(family-wise error rate ≤ α)" without the condition the Methods'
   error-rate line states; both now come from header._error_rate_condition.
"""

import re

import numpy as np
import pytest

import kvstats
from kvstats.analysis import summary_table
from kvstats.report import hypothesis_report
from kvstats.report.shannon_phi import SHANNON_PHI_NOTE

from _sweep_frames import make_frame
from _sweep_frames import sweep_result as _result


@pytest.fixture(scope="module")
def exact_frame():
    """A small sweep; KQV at n = 4 exact on 3 of its 10 trials, QKQV at n = 2 on all 10."""
    res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [2, 3, 4],
                             "distributions": ["gaussian"], "dims": [32], "n_keys": [64],
                             "n_trials": 10}, executor="serial", progress=False)
    f = res.frame.copy()
    some = f.index[(f["scheme"] == "KQV") & (f["budget"] == 4.0)][[1, 4, 7]]
    f.loc[some, ["snr_k_pooled", "phi_k"]] = [np.inf, 0.0]
    every = (f["scheme"] == "QKQV") & (f["budget"] == 2.0)
    f.loc[every, ["snr_k_pooled", "phi_k"]] = [np.inf, 0.0]
    return f


def _offsets(fig, label):
    (points,) = [c for c in fig.axes[0].collections if c.get_label() == label]
    return np.asarray(points.get_offsets())


def _table_mean(table, scheme, budget, metric):
    row = table[(table["scheme"] == scheme) & (table["budget"] == budget) & (table["metric"] == metric)]
    return float(row["mean"].iloc[0])


def test_partly_exact_cell_is_drawn_at_the_tables_mean(exact_frame):
    table = summary_table(exact_frame, n_resamples=99)
    fig = kvstats.plot_shannon_phi(exact_frame, "k", bounds=None)
    # the table's mean SNR of the partly exact cell is +inf, its φ the mean with the three 0s
    assert _table_mean(table, "KQV", 4.0, "snr_k_pooled") == np.inf
    phi = _table_mean(table, "KQV", 4.0, "phi_k")
    kept = exact_frame[(exact_frame["scheme"] == "KQV") & (exact_frame["budget"] == 4.0)
                       & (exact_frame["phi_k"] > 0)]["phi_k"].mean()
    assert phi == pytest.approx(kept * 7 / 10)           # the old plot's x was `kept`
    # no finite disk at n = 4: a triangle on the +inf row, at the table's φ, above every disk
    disks = _offsets(fig, "KQV")
    assert disks.shape == (2, 2), disks                   # the old plot drew n = 4 as a disk
    assert np.allclose(disks, [[_table_mean(table, "KQV", b, "phi_k"),
                                _table_mean(table, "KQV", b, "snr_k_pooled")] for b in (2.0, 3.0)])
    (tri,) = _offsets(fig, "_KQV: mean SNR = +inf")
    assert tri[0] == pytest.approx(phi)
    assert tri[1] > max(_offsets(fig, "KQV")[:, 1].max(), _offsets(fig, "QKQV")[:, 1].max())
    ax = fig.axes[0]
    assert ax.get_ylim()[0] < tri[1] < ax.get_ylim()[1]   # inside the axes, not clipped away
    texts = [t.get_text() for t in ax.texts]
    assert "mean SNR = +inf" in texts and "4: 3/10 exact" in texts
    # no dB tick on the +inf row: its height is not a value
    assert all(t < tri[1] for t in ax.get_yticks())


def test_exact_cell_without_a_place_is_named_not_dropped(exact_frame):
    table = summary_table(exact_frame, n_resamples=99)
    assert _table_mean(table, "QKQV", 2.0, "phi_k") == 0.0
    fig = kvstats.plot_shannon_phi(exact_frame, "k", bounds=None)
    title = fig.axes[0].get_title()
    assert "exact on every trial (SNR = +inf, φ = 0): QKQV at n = 2" in title
    assert np.allclose(_offsets(fig, "QKQV"),
                       [[_table_mean(table, "QKQV", b, "phi_k"),
                         _table_mean(table, "QKQV", b, "snr_k_pooled")] for b in (3.0, 4.0)])
    # the caption says how exact trials enter the plane
    assert "+inf" in SHANNON_PHI_NOTE and "exact on every trial" in SHANNON_PHI_NOTE


def test_all_exact_is_a_value_error(exact_frame):
    f = exact_frame.assign(snr_k_pooled=np.inf, phi_k=0.0)
    with pytest.raises(ValueError, match=r"no budget has a mean φ > 0 at place 'k'"):
        kvstats.plot_shannon_phi(f, "k", bounds=None)


def test_finite_frame_means_unchanged(exact_frame):
    """Without exact trials the plane is the plain means, no +inf row, no title note."""
    res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [2, 3], "distributions": ["gaussian"],
                             "dims": [32], "n_keys": [64], "n_trials": 8},
                            executor="serial", progress=False)
    fig = kvstats.plot_shannon_phi(res.frame, "k", bounds=None)
    means = res.frame.groupby("budget")[["phi_k", "snr_k_pooled"]].mean().to_numpy()
    assert np.allclose(_offsets(fig, "KQV"), means)
    assert "mean SNR = +inf" not in [t.get_text() for t in fig.axes[0].texts]
    assert "\n" not in fig.axes[0].get_title()


def _lines(md, title):
    body = md.split(f"\n## {title}\n\n", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("correction, condition", [
    ("holm", "under any dependence"),                      # Boole's inequality
    ("hommel", "Simes inequality"),                        # Sarkar 1998: MTP2, PRDS
    ("sidak", "positive orthant dependence"),              # Šidák 1967
    ("fdr_bh", "positive regression dependence"),          # Benjamini & Yekutieli 2001
])
def test_summary_family_line_states_the_condition_as_methods_does(tmp_path, correction, condition):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=20, seed=1)
    rep = hypothesis_report(_result(f, report={"correction": correction, "energy_resamples": 19}),
                            tmp_path, figures=False)
    md = rep.files["markdown"].read_text()
    (family,) = [s for s in _lines(md, "Summary") if s.startswith("Family: ")]
    said = re.search(r"\((family-wise error rate|false discovery rate) ≤ ([\d.]+), (.+)\); design:", family)
    assert said is not None, family
    assert condition in said[3], family
    # the same words as the Methods' error-rate line (one source, no second copy)
    (methods,) = [s for s in md.split("\n## Methods", 1)[1].splitlines() if "Error rate: with" in s]
    assert f"({said[1]}, {said[3]}" in methods
