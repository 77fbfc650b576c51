"""The Summary's unit line counts a mean's units, not trials: on a clustered capture each
scheme mean is over texts, each text's mean over its own trials (referee RH F1: a real capture
of 16 texts x 2 KV heads read "its trials averaged first (16 per mean)", 16 being the texts)."""

import re

from _sweep_frames import clustered_frame
from _sweep_frames import sweep_result as _result

from kvstats import hypothesis_report


def _unit_line(frame, tmp_path, **kw):
    rep = hypothesis_report(_result(frame), tmp_path, energy_resamples=19, bootstrap_resamples=99,
                            figures=False, **kw)
    md = rep.files["markdown"].read_text()
    return re.search(r"unit: (.*?)[;.]", md).group(1), rep


def test_unequal_texts_name_texts_per_mean_and_the_trials_per_text(tmp_path):
    frame = clustered_frame(n_texts=8, per_text=4)
    # every cell stops inside texts 0 and 1 (2 and 3 trials), the others keep 4: the same
    # trials in each cell, so the cluster means still pair
    frame = frame[~frame["trial"].isin([2, 3, 7])].reset_index(drop=True)
    line, rep = _unit_line(frame, tmp_path / "u")
    # 8 texts behind each scheme mean (the summary's n_clusters; its n_trials counts the 29
    # trials, over which the KL p99 and max are taken), 2 to 4 trials behind each text's
    assert set(rep.summary["n_clusters"]) == {8} and set(rep.summary["n_trials"]) == {29}
    assert line == "the text, its trials averaged first (8 texts per mean, 2–4 trials per text)"


def test_equal_texts_give_one_count_of_each(tmp_path):
    line, _ = _unit_line(clustered_frame(n_texts=8, per_text=2), tmp_path / "e")
    assert line == "the text, its trials averaged first (8 texts per mean, 2 trials per text)"


def test_trial_unit_counts_trials(tmp_path):
    # unit = "trial" by request: the mean's count is of trials, and no per-text count is said
    line, rep = _unit_line(clustered_frame(n_texts=8, per_text=2), tmp_path / "t", unit="trial")
    assert set(rep.summary["n_trials"]) == {16}
    assert line == "the trial (16 trials per mean)"


def test_a_trial_without_a_cluster_is_its_own():
    # aggregate_clusters' rule (a synthetic trial of a mixed sweep has cluster NaN)
    import numpy as np
    from kvstats.report.sections import _trials_per_cluster

    f = clustered_frame(n_texts=2, per_text=3)
    f.loc[f["cluster"] == 1, "cluster"] = np.nan
    assert _trials_per_cluster(f) == [1, 3]
    assert _trials_per_cluster(f.dropna()) == [3]
