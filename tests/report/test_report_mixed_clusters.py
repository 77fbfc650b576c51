"""A sweep mixing real cells with texts and older real cells without (resumed into a newer
sweep): the report's aggregation by text refuses the textless cells and names both ways
out; unit = "trial" renders it, labelled (clustered-analysis referee, 2026-12-03)."""

import numpy as np
import pandas as pd
import pytest
from _sweep_frames import clustered_frame
from _sweep_frames import sweep_result as _result

from kvstats import hypothesis_report


def _mixed():
    new = clustered_frame(n_texts=6, per_text=4)
    old = clustered_frame(n_texts=6, per_text=4, seed=5).assign(params="layer=1", cluster=np.nan)
    return pd.concat([new, old], ignore_index=True)


def test_mixed_textless_cells_name_the_trial_unit(tmp_path):
    with pytest.raises(ValueError, match=r"96 real-cache trial\(s\) without a 'cluster'.*"
                                         r"run the sweep again.*unit = \"trial\""):
        hypothesis_report(_result(_mixed()), tmp_path / "r", energy_resamples=19,
                          bootstrap_resamples=99, figures=False)
    rep = hypothesis_report(_result(_mixed()), tmp_path / "t", energy_resamples=19,
                            bootstrap_resamples=99, figures=False, unit="trial")
    assert "Unit of observation: **the trial**, by request" in rep.files["markdown"].read_text()


def test_two_sample_tests_on_cluster_means_report_their_pairing_correlation(tmp_path):
    # pairing = "none" on clustered data: the cluster means of two schemes are pairs (the
    # same texts); their measured ρ is said, as for trials (it was skipped: a negative ρ,
    # which makes Mann–Whitney anti-conservative, went unreported)
    frame = clustered_frame(n_texts=8, per_text=5)
    text = hypothesis_report(_result(frame), tmp_path / "n", energy_resamples=19,
                             bootstrap_resamples=99, figures=False,
                             pairing="none").files["markdown"].read_text()
    assert "here the cluster-paired Spearman ρ of" in text
    paired = hypothesis_report(_result(frame), tmp_path / "p", energy_resamples=19,
                               bootstrap_resamples=99, figures=False).files["markdown"].read_text()
    assert "Spearman ρ" not in paired
