"""Referee RD's F1-F3 (results/quick at 7b922fe): the bits figures' bars are the tables'
intervals; a sign row where no pair differs stores no dominance; the docs say which test
gives ``winner``.

Reference values: the figures' bars are compared with :func:`kvstats.analysis.summary_table`
(the report's "mean [95% CI]" cells, BCa; the referee checked those against
scipy.stats.bootstrap), the sign rows with :func:`kvstats.stats.sign_test`'s counts.
"""

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import compare_schemes, summary_table
from kvstats.report import hypothesis_report, plot_crossover
from kvstats.report import plots as plots_mod
from kvstats.report.plots import plot_kl_vs_bits, plot_recall_vs_bits
from kvstats.results import SweepResult, read_table
from kvstats.sweep import SweepConfig

from _sweep_frames import make_frame

ROOT = Path(__file__).resolve().parents[2]


def _bars(fig):
    """{(scheme, bits_total): (low, high)} of every error bar drawn, over all panels."""
    out = {}
    for ax in fig.axes:
        for c in ax.containers:
            for seg in c.lines[2][0].get_segments():
                out[(c.get_label(), float(seg[0][0]))] = (float(seg[0][1]), float(seg[1][1]))
    return out


def _skewed_frame(n=30):
    """KQV at n = 2: KL of 29 small values and one large (the heavy_tailed panel's shape):
    mean ± 1.96·sd/√n goes below 0 (mean 0.034, half-width 0.065), its bootstrap interval
    does not (every resampled mean is ≥ 0)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5, ("KQV", 3): -0.5, ("QKQV", 3): 0.0}, n=n, seed=3)
    rng = np.random.default_rng(1)
    cell = (f.scheme == "KQV") & (f.budget == 2.0)
    f.loc[cell, "kl"] = np.r_[1e-3 * (1 + rng.random(n - 1)), 1.0]
    f["recall_at_5"] = rng.integers(0, 6, len(f)) / 5.0    # a fraction, as the metric is
    return f


def _check_bars_are_the_tables(fig, f, metric):
    s = summary_table(f)
    s = s[s.metric == metric].set_index(["scheme", "bits_total"])
    bars = _bars(fig)
    assert len(bars) == len(s)
    for key, (low, high) in bars.items():
        row = s.loc[key]
        assert low == pytest.approx(row.ci_low, rel=1e-12) and high == pytest.approx(row.ci_high, rel=1e-12)


def test_kl_bars_are_the_tables_bootstrap_intervals_and_stay_positive():
    f = _skewed_frame()
    x = f.loc[(f.scheme == "KQV") & (f.budget == 2.0), "kl"].to_numpy()
    assert x.mean() - 1.96 * x.std(ddof=1) / math.sqrt(x.size) < 0     # the old bar's end
    fig = plot_kl_vs_bits(f)
    _check_bars_are_the_tables(fig, f, "kl")
    assert all(low > 0 for low, _ in _bars(fig).values())
    title = fig._suptitle.get_text()
    assert "95% BCa bootstrap CI over trials" in title and "as the tables" in title


def test_recall_bars_are_the_tables_intervals_at_the_callers_level():
    f = _skewed_frame()
    fig = plot_recall_vs_bits(f, confidence=0.9, n_resamples=199, seed=4)
    s = summary_table(f, confidence=0.9, n_resamples=199, seed=4)
    s = s[s.metric == "recall_at_5"].set_index(["scheme", "bits_total"])
    for key, (low, high) in _bars(fig).items():
        assert (low, high) == pytest.approx((s.loc[key].ci_low, s.loc[key].ci_high), rel=1e-12)
        assert 0 <= low <= high <= 1
    assert "90% BCa bootstrap CI over trials" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="confidence"):
        plot_recall_vs_bits(f, confidence=1.5)


def test_an_interval_reaching_zero_is_cut_at_the_axis_and_said():
    """28 of 30 KL values 0: a resample without a nonzero one has probability
    (28/30)^30 = 0.126 > 0.025, so the table's lower end is 0, which a log axis cannot
    show: the bar ends at the axis floor, ▼ there, and the panel names it."""
    f = _skewed_frame()
    cell = (f.scheme == "QKQV") & (f.budget == 3.0)
    f.loc[cell, "kl"] = np.r_[np.zeros(28), 0.5, 0.7]
    s = summary_table(f).set_index(["metric", "scheme", "budget"])
    assert s.loc[("kl", "QKQV", 3.0), "ci_low"] == 0.0
    fig = plot_kl_vs_bits(f)
    ax = fig.axes[0]
    low = _bars(fig)[("QKQV", 3.25)][0]
    assert low > 0 and ax.get_ylim()[0] < low
    carets = [ln for ln in ax.lines if ln.get_marker() == "v" and len(ln.get_xdata())]
    assert [list(ln.get_xdata()) for ln in carets] == [[3.25]]
    assert any("QKQV at n = 3: CI reaches 0" in t.get_text() for t in ax.texts)


# ----------------------------------------------------------------------------- F2 and the report
def _result(frame):
    cfg = SweepConfig.from_dict({"schemes": ["KQV", "QKQV"], "distributions": ["gaussian"],
                                 "budgets": [2, 3], "n_trials": 30,
                                 "report": {"energy_resamples": 99, "bootstrap_resamples": 199,
                                            "confidence": 0.9}})
    manifest = {"n_cells": 4, "seed": 0, "started": "t0", "finished": "t1", "seconds": 1.0,
                "n_computed": 4, "executor": "serial", "host": {"platform": "test", "cpus": 2},
                "git": None, "versions": {"numpy": np.__version__}}
    return SweepResult(frame, manifest, cfg)


def _tied_frame():
    f = _skewed_frame()
    f["argmax_shift"] = 0.0          # no pair differs: the sign test's dominance is 0/0
    return f


def test_sign_rows_without_a_differing_pair_store_no_dominance():
    t = compare_schemes(_tied_frame(), [("KQV", "QKQV")], metrics=["kl", "argmax_shift"], energy=False)
    none = t[t.metric == "argmax_shift"]
    assert len(none) == 2 and (none.test == "sign").all() and (none.n_informative == 0).all()
    assert none[["effect", "effect_low", "effect_high"]].isna().all().all()
    assert (none.pvalue == 1.0).all() and not none.significant.any()
    measured = t[t.metric == "kl"]      # pairs that differ keep sign_test's dominance
    assert (measured.n_informative == 30).all() and measured.effect.notna().all()
    assert ((measured.effect_low >= -1) & (measured.effect_high <= 1)).all()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    calls = []
    mp = pytest.MonkeyPatch()
    real = plots_mod.plot_kl_vs_bits

    def spy(frame, **kw):
        calls.append(kw)
        return real(frame, **kw)
    mp.setattr(plots_mod, "plot_kl_vs_bits", spy)
    out = tmp_path_factory.mktemp("h1")
    try:
        rep = hypothesis_report(_result(_tied_frame()), out)
    finally:
        mp.undo()
    return rep, out, calls


def test_report_csv_and_text_read_the_undefined_dominance(report):
    rep, out, _ = report
    comp = read_table(out / "tables" / "comparisons.csv")
    none = comp[(comp.metric == "argmax_shift") & (comp.test == "sign")]
    assert len(none) == 2 and none[["effect", "effect_low", "effect_high"]].isna().all().all()
    assert pd.api.types.is_float_dtype(comp["effect"])
    md = rep.files["markdown"].read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| KQV vs QKQV | argmax_shift |")]
    assert len(rows) == 2 and all(" | — | " in ln for ln in rows)       # "—", the 0/0
    assert not any(re.search(r"\bnan\b", ln, re.IGNORECASE) for ln in md.splitlines()
                   if ln.startswith("|"))                              # no table cell reads NaN
    # the crossover figure reads the CSV as written (no point for those rows)
    plot_crossover(comp, ["kl", "argmax_shift"], pair=("KQV", "QKQV"))


def test_report_figure_and_caption_use_the_tables_intervals(report):
    rep, _, calls = report
    assert calls == [{"palette": calls[0]["palette"], "confidence": 0.9, "seed": 0, "n_resamples": 199}]
    md = rep.files["markdown"].read_text()
    assert "error bars: the tables' 90% bootstrap (BCa) intervals of the mean over trials" in md
    assert "normal-approximation 95% error bars" not in md


# ----------------------------------------------------------------------------- F3 and the docs
def test_internals_names_the_winners_test_and_the_undefined_dominance():
    doc = " ".join((ROOT / "docs" / "internals.md").read_text().split())
    assert "`winner` (Mann–Whitney)" not in doc
    assert ("`winner` (the location test: the sign test under `pairing=\"trial\"`, "
            "Mann–Whitney under \"none\")") in doc
    assert "`compare_schemes`' sign row stores NaN" in doc
    assert "mean SNR = +inf" in doc                  # the Shannon–φ plane's exact-trial row
