"""Which metrics :func:`~kvstats.analysis.compare_schemes` tests, and the checks of its
metric arguments (``metrics``, ``equivalence``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from kvstats._checks import check_choice, check_real
from kvstats.analysis.frame import METRICS, POOLED_SNRS, check_frame, reported_pooled_snrs
from kvstats.metrics.table import METRIC_TABLE

__all__ = ["TESTABLE_METRICS", "default_metrics"]

#: Every metric :func:`~kvstats.analysis.compare_schemes` can test: the reported ones
#: (:data:`METRICS`), then the trial's energy-pooled SNRs of keys and values
#: (:data:`~kvstats.analysis.frame.POOLED_SNRS`).
TESTABLE_METRICS = METRICS + POOLED_SNRS


def default_metrics(frame: pd.DataFrame) -> tuple[str, ...]:
    """The metrics :func:`~kvstats.analysis.compare_schemes` tests by default (the report's):
    :data:`METRICS`, then each energy-pooled SNR (``snr_k_pooled``, ``snr_v_pooled``) the
    frame has.

    Why the pooled SNRs as well as ``snr_k``/``snr_v``: the two answer different questions.
    ``snr_k`` is the mean over a trial's keys of per-vector dB (a geometric-mean SNR, the
    typical key); the pooled SNR 10·log10(Σ‖k‖²/Σ‖k − k̂‖²) is the trial's total error
    energy, what the Shannon distortion–rate bound limits and what the report's
    Shannon–φ planes plot. They rank schemes alike when every vector's error is alike,
    and apart when a scheme keeps some vectors nearly exact: kivi's float16 window of 32
    keys lifts its ``snr_k`` to 16.3 dB at n = 2 where its pooled SNR is 8.7 dB, below
    TurboQuant-mse's 9.4 (docs/measurement.md), so a test of ``snr_k`` alone would name
    kivi the winner on key SNR against the plotted numbers. The per-vector SNRs stay
    tested (they are dimensions of the 6D profile the energy test compares, and their
    rows are unchanged); each pooled SNR adds one test per pair, case and budget to the
    family. A pooled column with NaN (cells computed before the column existed, resumed
    into a newer sweep) is left out with a UserWarning: a test on it would be undefined
    (:func:`~kvstats.analysis.frame.reported_pooled_snrs`, the summary's rule as well).

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame (:func:`~kvstats.analysis.frame.check_frame`).

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS
    >>> from kvstats.analysis.compare import default_metrics
    >>> f = pd.DataFrame({m: [0.5] for m in METRICS}).assign(distribution="gaussian", params="-",
    ...     dim=8, n_keys=4, budget=2.0, scheme="KV", bits_nominal=2.0, bits_total=2.0, trial=0)
    >>> default_metrics(f) == METRICS, default_metrics(f.assign(snr_k_pooled=9.0))[-1]
    (True, 'snr_k_pooled')
    """
    # the summary's rule too (reported_pooled_snrs); the warning names compare_schemes' caller
    return METRICS + reported_pooled_snrs(check_frame(frame), stacklevel=3)


def _check_metrics(metrics: Sequence[str], frame: pd.DataFrame) -> tuple[str, ...]:
    """``metrics`` as a tuple: known, each once (a repeat would count twice in the family),
    and every pooled SNR among them a column of ``frame`` without NaN."""
    if isinstance(metrics, str):
        raise TypeError(f"metrics must be a list of metric names (e.g. [{metrics!r}]); received {metrics!r}")
    metrics = tuple(metrics)
    for m in metrics:
        check_choice(m, "metrics", TESTABLE_METRICS)
    repeated = sorted({m for m in metrics if metrics.count(m) > 1})
    if repeated:
        raise ValueError(f"metrics must name each metric once (its tests would count twice in "
                         f"the family); received {list(metrics)}, repeating {repeated}")
    for m in (m for m in metrics if m in POOLED_SNRS):
        if m not in frame.columns:
            raise ValueError(f"metrics has {m!r}, which the frame lacks (sweeps from before the "
                             f"pooled SNR columns); the frame's metric columns: "
                             f"{[c for c in TESTABLE_METRICS if c in frame.columns]}")
        missing = int(frame[m].isna().sum())
        if missing:
            raise ValueError(f"metrics has {m!r}, but {missing} of the frame's {len(frame)} rows "
                             "lack it (NaN: cells computed before the column existed); drop them "
                             "or leave it out")
    return metrics


def _check_margins(equivalence: Mapping[str, float] | None, metrics: Sequence[str],
                   test: str) -> dict[str, float]:
    if equivalence is None:
        return {}
    if not isinstance(equivalence, Mapping):
        raise TypeError(f"equivalence must map metric names to margins; received {equivalence!r}")
    out = {}
    for metric, margin in equivalence.items():
        check_choice(metric, "equivalence metric", list(metrics))
        if test == "ratio" and METRIC_TABLE[metric].unit == "dB":
            # the report's options refuse it too: a dB value can be 0 or negative, and its
            # ratio depends on the 0 dB reference, so "within 1 + δ" would say nothing
            raise ValueError(f"equivalence[{metric!r}]: {metric} is in dB (can be negative), a "
                             "ratio of means is meaningless; pass equivalence_test='rank' or "
                             "drop it")
        high = 0.5 if test == "rank" else None
        out[metric] = check_real(margin, f"equivalence[{metric!r}]", low=0, high=high,
                                 low_open=True, high_open=True)
    return out
