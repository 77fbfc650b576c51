"""Per-scheme summaries of a sweep: mean with bootstrap CI, tails and worst cases per metric."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kvstats._checks import check_int, check_real
from kvstats.analysis.frame import (CASE_COLUMNS, METRICS, POOLED_SNRS, _in_trial_order,
                                    check_frame, reported_pooled_snrs)
from kvstats.analysis.clustered import N_IN_CLUSTER, warn_if_trials_share_clusters
from kvstats.analysis.intervals import _in_unit_interval, few_nonzero, mean_ci, tail_alpha
from kvstats.metrics.table import METRIC_TABLE

__all__ = ["summary_table", "POOLED_SNRS"]


def summary_table(frame: pd.DataFrame, *, confidence: float = 0.95, n_resamples: int = 999,
                  seed: int = 0, trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean and bootstrap CI of every metric per case, budget and scheme, plus worst cases.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`. Its rows are the intervals'
        independent units: for a real capture pass its cluster means
        (:func:`~kvstats.analysis.aggregate_clusters`, as the report does), since the
        trials of one text are not independent: intervals over them miss their level
        (too narrow where a text's trials are positively correlated).
    confidence : float
        Confidence level of the bootstrap intervals (BCa, :func:`kvstats.stats.bootstrap_ci`).
    n_resamples : int
        Bootstrap resamples per interval.
    seed : int
        Seed of the bootstrap; each row's resamples are drawn from it and the row's values
        (:func:`kvstats.analysis.intervals.mean_ci`), so equal values get equal intervals,
        here and in :func:`~kvstats.analysis.theory_table`.
    trials : DataFrame, optional
        With ``frame`` the cluster means (:func:`~kvstats.analysis.aggregate_clusters`), the
        per-trial frame they are the means of: then ``p99``, ``max`` and ``tail_index`` are
        of the trials (a cluster mean averages a catastrophic trial away: the worst trial of
        a text reads 2–3× smaller in its text's mean), ``n_trials`` counts the trials and
        ``n_clusters`` the clusters (the units of the mean, its interval and ``median``),
        and ``ci_reliable`` is also False where the trials' tail bound is below 2 (a mean of
        a fixed number of trials keeps their tail index, so the means' bootstrap is as
        unreliable, and the trials have enough values for the screen where a few texts do
        not). A cell of one but not the other, or whose cluster sizes do not add up to its
        trials, is a ValueError.

    Returns
    -------
    DataFrame
        One row per (case, budget, scheme, metric), the metrics being the reported ones
        and the pooled SNRs (:data:`POOLED_SNRS`) that every row of the frame has (one
        with NaN in some rows is left out with a UserWarning, as
        :func:`~kvstats.analysis.compare_schemes` leaves it out:
        :func:`~kvstats.analysis.frame.reported_pooled_snrs`): ``mean``, ``ci_low``, ``ci_high``,
        ``median``, ``p99``, ``max``, ``n_trials``, ``n_nonfinite`` and the scheme's
        ``bits_nominal``/``bits_total``, then ``tail_index`` and ``ci_reliable``. A metric
        with non-finite values (SNR = +inf for exact reconstructions) has its mean as both
        CI ends and counts them in ``n_nonfinite``; so has a cell of fewer than 3 trials
        (or texts), where a bootstrap interval would be [min, max], a 50% interval at 2,
        and a constant sample (constant up to rounding, relative 1e-12: cluster means of
        ones read 1.0 and 1.0000000000000002). Except: a fraction metric (unit "fraction" in
        the metric table: ``recall_at_5``, ``argmax_shift``, values in [0, 1] up to rounding,
        the mean clipped to [0, 1]) whose n values are all
        0 gets the exact interval [0, 1 − ((1 − c)/2)^(1/n)], all 1 its mirror
        (:func:`kvstats.analysis.intervals.unit_interval_bound`: 0 of 100 trials bound
        the mean below 0.0362 at c = 0.95); an all-zero KL or ip_var gets none, as no
        bound exists for an unbounded metric. ``median`` and ``p99`` interpolate linearly
        (the median is :func:`numpy.median`'s, as :func:`~kvstats.analysis.compare_schemes`'
        ``median_a``), also past +inf values ([1, 2, 3, inf] has median 2.5); only where
        interpolation is undefined (between +inf and +inf, or -inf and +inf) the next value
        up is taken.

        ``tail_index`` is the one-sided 95% upper confidence bound of Hill's tail index α
        of the metric's per-trial values (:func:`kvstats.analysis.intervals.tail_alpha`:
        :func:`kvstats.stats.tail_index`, default k, exact Gamma(k) pivot). For ``kl`` (from
        its positive values) and every other metric whose values are all ≥ 0 it is the right
        tail's, measured from 0, when at least 10 values are positive; for a metric in dB
        (the SNRs) and any with a negative value, the smaller of both tails' 97.5% bounds,
        each from its excesses over the median (at least 10 on a side; Bonferroni: 95% for
        the pair). It is NaN, meaning *not computed*, where a value is non-finite or no tail
        has enough values. ``ci_reliable`` is False when that bound is < 2: a Pareto tail of
        index below 2 fits at 95% confidence (for an unbounded metric such as KL an infinite
        variance; a bounded one such as φ has a finite variance but a tail too heavy at this
        n), and the bootstrap CI of the mean is not reliable (Athreya 1987); read ``median``,
        ``p99``, ``max`` and the rank tests instead. It is also False where the mean is
        carried by too few nonzero values (:func:`kvstats.analysis.intervals.few_nonzero`:
        a nonnegative sample with zeros and 1–9 positive values, unless two or more, all
        equal: a proportion in any unit; for a fraction, the same of 1 − x, e.g. recall@5
        of 1 on all but a few trials), which the tail screen, needing 10 positive values,
        cannot see: the bootstrap undercovers there (docs/statistics.md, "Sparse means"). It is True otherwise, including where
        ``tail_index`` is not computed and the sample is not sparse. Using the bound, not the
        point estimate α̂, keeps light-tailed metrics from being flagged at small n
        (docs/statistics.md).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS, summary_table
    >>> rng = np.random.default_rng(0)
    >>> f = pd.DataFrame({m: rng.random(50) for m in METRICS}).assign(distribution="gaussian",
    ...     params="-", dim=64, n_keys=128, budget=4.0, scheme="KQV", bits_nominal=4.0,
    ...     bits_total=4.25, trial=np.arange(50))
    >>> int(summary_table(f, n_resamples=199).set_index("metric").loc["kl", "n_trials"])
    50

    Over cluster means, with the trials' tails (10 clusters of 5 trials):

    >>> from kvstats.analysis import aggregate_clusters
    >>> t = f.assign(distribution="real", cluster=np.arange(50) // 5)
    >>> s = summary_table(aggregate_clusters(t), n_resamples=199, trials=t).set_index("metric")
    >>> s.loc["kl", ["n_trials", "n_clusters"]].tolist(), bool(s.loc["kl", "max"] == t["kl"].max())
    ([50, 10], True)
    """
    # each cell's values in trial order: the means' last bits do not follow the row order
    frame = _in_trial_order(check_frame(frame))
    warn_if_trials_share_clusters(frame, "summary_table")
    confidence = check_real(confidence, "confidence", low=0, high=1, low_open=True, high_open=True)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    seed = check_int(seed, "seed", low=0)
    rows = []
    metrics = METRICS + reported_pooled_snrs(frame)
    keys = list(CASE_COLUMNS) + ["budget", "scheme"]
    cells = _trial_cells(frame, trials, keys)
    for key, grp in frame.groupby(keys, sort=False):
        base = dict(zip(keys, key))
        tails = grp if cells is None else cells[key]   # the tails' values: the trials
        base["bits_nominal"] = float(grp["bits_nominal"].iloc[0])
        base["bits_total"] = float(grp["bits_total"].iloc[0])
        for metric in metrics:
            x = grp[metric].to_numpy(dtype=np.float64)
            finite = np.isfinite(x)
            # the exact all-0/all-1 bound holds for values in [0, 1] only, up to rounding (a
            # text mean of ones reads 1.0000000000000002; a hand-made frame may hold
            # anything in these columns: then no bound)
            unit = METRIC_TABLE[metric].unit == "fraction" and _in_unit_interval(x)
            mean, low, high = mean_ci(x, confidence, n_resamples, seed,
                                      unit_interval=unit)
            xt = tails[metric].to_numpy(dtype=np.float64)
            alpha = tail_alpha(xt, metric)
            # over cluster means, their own tail too (the means are what is resampled)
            heavy = alpha < 2 or (cells is not None and tail_alpha(x, metric) < 2)
            rows.append({**base, "metric": metric, "mean": mean, "ci_low": low, "ci_high": high,
                         "median": _quantile(x, 0.5), "p99": _quantile(xt, 0.99),
                         "max": float(np.max(xt)), "n_trials": int(len(xt)),
                         **({} if cells is None else {"n_clusters": int(len(x))}),
                         "n_nonfinite": int((~finite).sum()), "tail_index": alpha,
                         # a heavy tail, or a mean carried by a few nonzero values (the
                         # screen needs 10 positive values; intervals.few_nonzero, a
                         # fraction's 1 − x too)
                         "ci_reliable": not heavy and not few_nonzero(x, metric)})
    return pd.DataFrame(rows)


def _trial_cells(frame: pd.DataFrame, trials: pd.DataFrame | None,
                 keys: list[str]) -> dict[tuple, pd.DataFrame] | None:
    """Each cell's trials (``trials`` given), checked to be those ``frame``'s cluster means
    average: the same cells, and cluster sizes that add up to each cell's trials."""
    if trials is None:
        return None
    if N_IN_CLUSTER not in frame.columns:
        raise ValueError(f"trials is for a frame of cluster means (a column {N_IN_CLUSTER!r}, "
                         "kvstats.analysis.aggregate_clusters); received a frame without it")
    cells = dict(iter(_in_trial_order(check_frame(trials)).groupby(keys, sort=False)))
    sizes = frame.groupby(keys, sort=False)[N_IN_CLUSTER].sum()
    wrong = [k for k in set(cells) | set(sizes.index)
             if k not in cells or k not in sizes.index or int(sizes[k]) != len(cells[k])]
    if wrong:
        raise ValueError(f"trials must be the trials whose cluster means frame holds; "
                         f"{len(wrong)} cell(s) differ, e.g. {sorted(map(str, wrong))[0]}")
    return cells


def _quantile(x: np.ndarray, q: float) -> float:
    """The q-quantile, interpolated linearly (q = 0.5: :func:`numpy.median`, as
    :func:`~kvstats.analysis.compare_schemes`' medians), with non-finite values too.

    Interpolation is NaN only between +inf and +inf (or -inf and +inf); there, and only
    there, the next value up (``method="higher"``) is taken: [1, 2, 3, inf] has median 2.5
    and p99 inf, [1, inf, inf] p99 inf.

    Examples
    --------
    >>> import numpy as np
    >>> _quantile(np.array([1.0, 2.0, 3.0, np.inf]), 0.5), _quantile(np.array([1.0, np.inf, np.inf]), 0.99)
    (2.5, inf)
    """
    with np.errstate(invalid="ignore"):      # inf - inf: NaN, replaced below
        value = float(np.median(x) if q == 0.5 else np.quantile(x, q))
    return value if not np.isnan(value) else float(np.quantile(x, q, method="higher"))
