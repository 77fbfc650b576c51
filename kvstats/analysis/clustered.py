"""The cluster as the unit of observation: one row per (cell, cluster) of a per-trial frame.

Trials of one real text (its layers and KV heads) share the text's tokens, so their
metrics are correlated; a test that treats them as independent counts one text's
tendency many times over and rejects far more often than its level (measured in
docs/real_model.md, "Clustered inference"). :func:`aggregate_clusters` replaces each
cluster's trials by their mean, so that every two-sample test of
:mod:`kvstats.analysis.compare` (Mann–Whitney, KS, energy) applied to its output
compares independent units (and the paired design, ``pairing="trial"``, pairs the two
schemes' means of each cluster). Why per-cluster aggregation rather than a cluster
permutation or a cluster bootstrap: docs/statistics.md, "Clustered trials".

Synthetic trials are independent draws: each is its own cluster (``cluster`` = ``trial``)
and aggregation leaves their metrics exactly as they were.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from kvstats.analysis.frame import CASE_COLUMNS, POOLED_SNRS, check_frame
from kvstats.metrics.table import DESCRIPTORS, METRIC_TABLE
from kvstats.results import REAL

__all__ = ["aggregate_clusters", "CLUSTER_KEYS", "N_IN_CLUSTER", "TrialsAsUnitsWarning",
           "warn_if_trials_share_clusters", "warn_if_real_trials_lack_clusters"]

#: Columns that identify one cluster of one cell in a per-trial frame.
CLUSTER_KEYS = (*CASE_COLUMNS, "budget", "scheme", "cluster")
#: The column :func:`aggregate_clusters` adds: how many trials a row's mean is over.
N_IN_CLUSTER = "n_trials_in_cluster"


class TrialsAsUnitsWarning(UserWarning):
    """A table treats rows as independent units although several come from one cluster, or
    real trials as units though they record no cluster (their text) to tell."""


def warn_if_real_trials_lack_clusters(frame: pd.DataFrame, what: str, *,
                                      stacklevel: int = 3) -> None:
    """Warn (:class:`TrialsAsUnitsWarning`) when real trials of ``frame`` record no text.

    A real trial without a ``cluster`` (no column, or NaN: cells written before clusters
    were recorded) cannot be averaged with the other trials of its text, so a table over
    such trials treats each as an independent unit; if some share a text, its intervals
    are too narrow and its p-values too small (docs/statistics.md, "Clustered trials").
    No table can recover the texts: the warning says to run the sweep again. A table
    that goes on with the trials (the report does, and says so in its header) is then
    labelled by the warning, as tables of trials that share a cluster are
    (:func:`warn_if_trials_share_clusters`, which calls this). Cluster means
    (``n_trials_in_cluster``) and synthetic trials pass silently.

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> f = pd.DataFrame({"distribution": ["real", "real", "gaussian"], "params": "-",
    ...                   "dim": 64, "n_keys": 32, "budget": 4.0, "scheme": "KQV"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_real_trials_lack_clusters(f, "theory_table")
    >>> str(caught[0].message)[:73]
    'theory_table treats each real trial as an independent unit, but 2 of them'
    >>> warn_if_real_trials_lack_clusters(f.assign(cluster=[0, 1, None]), "x")  # texts known: silent
    """
    if N_IN_CLUSTER in frame.columns:
        return
    real = (frame["distribution"] == REAL).to_numpy()
    textless = real & (frame["cluster"].isna().to_numpy() if "cluster" in frame.columns else True)
    if textless.any():
        warnings.warn(f"{what} treats each real trial as an independent unit, but "
                      f"{int(textless.sum())} of them record no 'cluster' (their text: cells "
                      "written before clusters were recorded), so trials of one text, if any, "
                      "count as independent (intervals too narrow and p-values too small where "
                      "they are positively correlated); run the sweep again in a new directory "
                      "to record each trial's text", TrialsAsUnitsWarning, stacklevel=stacklevel)


def warn_if_trials_share_clusters(frame: pd.DataFrame, what: str, *, stacklevel: int = 3) -> None:
    """Warn (:class:`TrialsAsUnitsWarning`) when ``frame``'s rows are trials that share
    clusters, or real trials that cannot say which text they come from
    (:func:`warn_if_real_trials_lack_clusters`).

    The trials of one text of a real capture are correlated (its layers and heads read the
    same tokens), so a table that treats each row as an independent unit gives intervals
    too narrow and p-values too small (docs/statistics.md, "Clustered trials"). Cluster
    means (:func:`aggregate_clusters`) are the unit to test. Synthetic trials (no
    ``cluster``) and cluster means pass silently. The report's table of trial-level tests,
    computed on purpose and labelled, filters this warning by its class.

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> f = pd.DataFrame({"distribution": "real", "params": "-", "dim": 64, "n_keys": 32,
    ...                   "budget": 4.0, "scheme": "KQV", "cluster": [0, 0, 1, 1]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_trials_share_clusters(f, "summary_table")
    >>> str(caught[0].message)[:59]
    'summary_table treats each row as an independent unit, but 4'
    >>> warn_if_trials_share_clusters(f.assign(n_trials_in_cluster=2), "x")   # cluster means: silent
    """
    warn_if_real_trials_lack_clusters(frame, what, stacklevel=stacklevel + 1)
    if "cluster" not in frame.columns or N_IN_CLUSTER in frame.columns:
        return
    rows = frame.loc[frame["cluster"].notna(), [*CLUSTER_KEYS]]
    if rows.empty:
        return
    sizes = rows.groupby(list(CLUSTER_KEYS), sort=False, dropna=False).size()
    if (sizes > 1).any():
        warnings.warn(f"{what} treats each row as an independent unit, but {len(rows)} rows come "
                      f"from {len(sizes)} (cell, cluster) groups: trials of one cluster (a text of "
                      "a real capture) are correlated, so its intervals are too narrow and its "
                      "p-values too small; pass kvstats.analysis.aggregate_clusters(frame) for "
                      "intervals and tests over clusters", TrialsAsUnitsWarning, stacklevel=stacklevel)


def _clusters(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``frame`` with an int ``cluster`` column; a synthetic trial without one is its own cluster.

    The column is missing from sweeps written before it existed and missing for the cells
    of such a sweep that a newer run resumed (NaN after the concatenation).
    """
    given = frame["cluster"] if "cluster" in frame.columns else pd.Series(np.nan, index=frame.index)
    missing = given.isna().to_numpy()
    ids = pd.to_numeric(given[~missing], errors="coerce").to_numpy(np.float64)
    odd = ~(np.isfinite(ids) & (ids == np.round(ids)))
    if odd.any():
        # a cast to int would fail on text ('invalid literal for int()') and truncate 1.5 to 1,
        # merging two clusters into one unit without a word
        raise ValueError(f"{name}['cluster'] must hold integer cluster ids (a trial's text; NaN for "
                         f"a synthetic trial); received {int(odd.sum())} other value(s), the first "
                         f"{given[~missing].to_numpy(object)[int(np.argmax(odd))]!r}")
    if not missing.any():
        return frame.assign(cluster=given.astype(np.int64))
    real = (frame["distribution"] == REAL).to_numpy()
    if (missing & real).any():
        # a real case's trials cluster by text; a sweep from before the column cannot say which
        raise ValueError(f"{name} has {int((missing & real).sum())} real-cache trial(s) without a "
                         "'cluster' (cells written before clusters were recorded); run the sweep "
                         "again in a new directory to record each trial's text, or take the trial "
                         "as the unit (a report: unit = \"trial\" in the config's [report] table, "
                         "or hypothesis_report(..., unit=\"trial\"); labelled not independent)")
    return frame.assign(cluster=given.fillna(frame["trial"]).astype(np.int64))


def aggregate_clusters(frame: pd.DataFrame, name: str = "frame") -> pd.DataFrame:
    """One row per (cell, cluster): each metric the mean of the cluster's trials.

    The output is a per-trial frame whose unit is the cluster (the text, for real
    caches): pass it to :func:`kvstats.analysis.compare_schemes` or
    :func:`kvstats.analysis.summary_table` and their tests and intervals treat clusters,
    not trials, as the independent observations.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (:data:`~kvstats.analysis.frame.REQUIRED_COLUMNS`
        plus ``cluster``). Where ``cluster`` is missing (sweeps written before it
        existed) a synthetic trial is its own cluster and a real trial is an error.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    DataFrame
        One row per (case, budget, scheme, cluster), in order of first appearance. Every
        metric column of :data:`kvstats.metrics.table.METRIC_TABLE` (and descriptor of ``DESCRIPTORS``) in ``frame``
        is the cluster's mean, computed as ``Σ (x / n)`` over its values in sorted order
        and clipped to their [min, max] (it cannot overflow where the values do not, a
        cluster of one trial, or of equal values, keeps its value bit for bit: nine trials of
        1.0 give 1.0, not the sum's 1.0000000000000002, and the frame's row order changes no
        bit). The other columns keep the
        row of the cluster's smallest ``trial`` (the cell columns are constant within a
        cell). ``n_trials_in_cluster`` is added.

    Notes
    -----
    Non-finite values, as the summaries treat them: a +inf (an SNR of an exact
    reconstruction) makes its cluster's mean +inf, as it makes the mean of
    :func:`~kvstats.analysis.summary_table` +inf (a -inf likewise -inf). A cluster
    holding both +inf and -inf in one metric has no mean: ValueError, as
    :func:`kvstats.summarize_profile`. NaN in a metric is a ValueError (a trial's metric
    is never NaN; the reported ones are checked by
    :func:`~kvstats.analysis.frame.check_frame`), except in a pooled SNR column, which
    cells computed before it existed lack: a cluster with a trial lacking it lacks it
    (NaN), and the tables leave the column out with a UserWarning
    (:func:`~kvstats.analysis.frame.reported_pooled_snrs`).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS, aggregate_clusters
    >>> f = pd.DataFrame({m: np.arange(6.0) for m in METRICS}).assign(distribution="real",
    ...     params="layer=0", dim=64, n_keys=256, budget=4.0, scheme="KQV", bits_nominal=4.0,
    ...     bits_total=4.25, trial=np.arange(6), cluster=[0, 0, 0, 1, 1, 2])
    >>> g = aggregate_clusters(f)
    >>> g["kl"].tolist(), g["trial"].tolist(), g["n_trials_in_cluster"].tolist()
    ([1.0, 3.5, 5.0], [0, 3, 5], [3, 2, 1])
    """
    frame = check_frame(frame, name)
    if N_IN_CLUSTER in frame.columns:
        raise ValueError(f"{name} already has one row per cluster (it has {N_IN_CLUSTER!r}); "
                         "aggregate the per-trial frame once")
    frame = _clusters(frame, name)
    codes = frame.groupby(list(CLUSTER_KEYS), sort=False, dropna=False).ngroup().to_numpy()
    sizes = np.bincount(codes)
    # each cluster's row of its smallest trial (codes number the clusters in order of first
    # appearance, so the rows come in that order): not its first row, which the row order picks
    by_trial = np.lexsort((frame["trial"].to_numpy(), codes))
    first = by_trial[np.unique(codes[by_trial], return_index=True)[1]]
    out = frame.iloc[first].reset_index(drop=True)
    weight = 1.0 / sizes[codes]
    # the metrics and the trials' descriptors (attention entropy): each a mean over its trials
    for col in (m for m in (*METRIC_TABLE, *DESCRIPTORS) if m in frame.columns):
        x = frame[col].to_numpy(np.float64)
        lacking = np.isnan(x)
        if lacking.any() and col not in (*POOLED_SNRS, *DESCRIPTORS):
            raise ValueError(f"{name} has NaN in metric column {col!r} ({int(lacking.sum())} "
                             "value(s)); a cluster's mean would be undefined")
        # a pooled SNR some trials lack (cells from before the column) is lacking in their
        # clusters, and the tables leave the column out (frame.reported_pooled_snrs)
        lacking = np.bincount(codes, weights=lacking, minlength=len(sizes)) > 0
        # Σ x/n rather than Σ x / n: no overflow for values near the float range; each cluster's
        # values summed in sorted order, so the row order does not set the mean's last bits
        o = np.lexsort((x, codes))
        mean = np.bincount(codes[o], weights=(np.where(np.isnan(x), 0.0, x) * weight)[o],
                           minlength=len(sizes))
        # within the cluster's [min, max] (its sorted run's ends), which rounding can leave:
        # nine trials of recall 1.0 sum to 1.0000000000000002, out of a fraction's [0, 1]
        end = np.cumsum(sizes)
        with np.errstate(invalid="ignore"):   # NaN ends: a lacking cluster, NaN below anyway
            mean = np.clip(mean, x[o][end - sizes], x[o][end - 1])
        mean[lacking] = np.nan
        bad = np.isnan(mean) & ~lacking
        if bad.any():
            where = out.loc[bad, list(CLUSTER_KEYS)].iloc[0].to_dict()
            raise ValueError(f"{name}[{col!r}] holds both +inf and -inf in one cluster ({where}); "
                             "its mean is undefined")
        out[col] = mean
    out[N_IN_CLUSTER] = sizes.astype(np.int64)
    return out
