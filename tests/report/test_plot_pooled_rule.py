"""The Shannon–φ plane follows the tables' rule for a pooled SNR column some rows lack."""

import warnings

import numpy as np
import pytest

pytest.importorskip("matplotlib")


def _frame():
    import pandas as pd
    from kvstats.analysis import METRICS
    rng = np.random.default_rng(0)
    rows = []
    for scheme, snr in (("KQV", 9.0), ("QKQV", 6.0)):
        for trial in range(12):
            row = {m: 0.5 for m in METRICS}
            row.update(distribution="gaussian", params="-", dim=8, n_keys=4, budget=2.0, scheme=scheme,
                       bits_nominal=2.0, bits_total=2.0, trial=trial, snr_k=snr + rng.normal(0, 0.1),
                       phi_k=0.3 + rng.uniform(0, 0.01), snr_k_pooled=snr - 1.0, snr_v_pooled=snr - 1.0)
            rows.append(row)
    return pd.DataFrame(rows)


def _plotted_schemes_and_label(frame, place="k"):
    from kvstats.report.plots import plot_shannon_phi
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot_shannon_phi(frame, place=place, bounds=None, clouds=False)
    ax = fig.axes[0]
    labelled = sorted(c.get_label() for c in ax.collections if not c.get_label().startswith("_"))
    return labelled, ax.get_ylabel(), [str(w.message) for w in caught]


def test_complete_pooled_column_is_plotted():
    schemes, ylabel, caught = _plotted_schemes_and_label(_frame())
    assert schemes == ["KQV", "QKQV"]
    assert "pooled" in ylabel and not caught


def test_partly_missing_pooled_column_falls_back_for_every_scheme_with_the_tables_warning():
    frame = _frame()
    frame.loc[frame["scheme"] == "KQV", "snr_k_pooled"] = np.nan
    schemes, ylabel, caught = _plotted_schemes_and_label(frame)
    # before: only QKQV was drawn (KQV's rows dropped as non-finite), labelled pooled, no warning
    assert schemes == ["KQV", "QKQV"]
    assert "pooled" not in ylabel
    assert any("snr_k_pooled" in m for m in caught)
