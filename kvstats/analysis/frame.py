"""The per-trial frame every analysis table reads, and the check of its columns.

A sweep's per-trial frame (:attr:`kvstats.results.SweepResult.frame`) has one row per
(cell, trial): the metrics of :func:`kvstats.error_profile` plus the cell columns of
:mod:`kvstats.results`. The unit of observation is the trial. All schemes of one case
(distribution, params, d, N) see the *same* trials, each with an independent draw of the
scheme's randomness.
"""

from __future__ import annotations

import pandas as pd

from kvstats.metrics.table import HIGHER_IS_BETTER, PROFILE_6D, REPORT_METRICS
from kvstats.results import CASE_COLUMNS

__all__ = ["METRICS", "PROFILE_METRICS", "HIGHER_IS_BETTER", "CASE_COLUMNS", "REQUIRED_COLUMNS",
           "check_frame"]

#: Per-trial metrics summarised and tested (the reported metrics of the metric table).
METRICS = REPORT_METRICS
#: The 6D error profile (scale and direction for K, V, T) used by the energy test.
PROFILE_METRICS = PROFILE_6D
#: Columns a frame must have for the analysis tables.
REQUIRED_COLUMNS = CASE_COLUMNS + ("budget", "scheme", "bits_nominal", "bits_total", "trial") + METRICS


def check_frame(frame: pd.DataFrame, name: str = "frame") -> pd.DataFrame:
    """Check that ``frame`` is a sweep's per-trial frame; returns it.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (at least :data:`REQUIRED_COLUMNS`,
        one row, no NaN in a metric).
    name : str
        Name of the argument in error messages.

    Returns
    -------
    DataFrame
        ``frame`` itself.

    Examples
    --------
    >>> import pandas as pd
    >>> check_frame(pd.DataFrame({"kl": [0.1]}))
    Traceback (most recent call last):
    ...
    ValueError: frame lacks the sweep column(s) [...]; required: [...]
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame from kvstats.run_sweep; "
                        f"received {type(frame).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks the sweep column(s) {missing}; required: "
                         f"{list(REQUIRED_COLUMNS)}")
    if frame.empty:
        raise ValueError(f"{name} must have at least one row; received an empty frame")
    nan = [c for c in METRICS if frame[c].isna().any()]
    if nan:
        raise ValueError(f"{name} has NaN in metric column(s) {nan}")
    return frame
