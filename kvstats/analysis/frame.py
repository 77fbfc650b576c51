"""The per-trial frame every analysis table reads, and the check of its columns.

A sweep's per-trial frame (:attr:`kvstats.results.SweepResult.frame`) has one row per
(cell, trial): the metrics of :func:`kvstats.error_profile` plus the cell columns of
:mod:`kvstats.results`. The unit of observation is the trial. All schemes of one case
(distribution, params, d, N) see the *same* trials, each with an independent draw of the
scheme's randomness.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from kvstats._checks import check_int

from kvstats.metrics.table import HIGHER_IS_BETTER, METRIC_TABLE, PROFILE_6D, REPORT_METRICS
from kvstats.results import CASE_COLUMNS

__all__ = ["METRICS", "PROFILE_METRICS", "HIGHER_IS_BETTER", "CASE_COLUMNS", "REQUIRED_COLUMNS",
           "check_frame", "POOLED_SNRS", "reported_pooled_snrs", "LABEL_DIGITS", "short_params",
           "label_digits"]

#: Per-trial metrics summarised and tested (the reported metrics of the metric table; the
#: summaries and tests add the pooled SNRs where the frame has them: :data:`POOLED_SNRS`).
METRICS = REPORT_METRICS
#: The 6D error profile (scale and direction for K, V, T) used by the energy test.
PROFILE_METRICS = PROFILE_6D
#: The energy-pooled SNR columns (what the Shannon bound limits), summarised, tested and set
#: beside the bound where the frame has them (:func:`reported_pooled_snrs`): a scheme that
#: keeps some vectors nearly exact (kivi's float16 window) has a mean of per-vector dB far
#: above its coded vectors' SNR, and only these show it (docs/measurement.md).
POOLED_SNRS = ("snr_k_pooled", "snr_v_pooled")
#: Columns a frame must have for the analysis tables.
REQUIRED_COLUMNS = CASE_COLUMNS + ("budget", "scheme", "bits_nominal", "bits_total", "trial") + METRICS


def check_frame(frame: pd.DataFrame, name: str = "frame") -> pd.DataFrame:
    """Check that ``frame`` is a sweep's per-trial frame; returns it.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (at least :data:`REQUIRED_COLUMNS`,
        one row, numeric metric columns without NaN, numeric ``budget``, ``bits_nominal`` and
        ``bits_total``, no missing case, budget or scheme).
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
    keys = [*CASE_COLUMNS, "budget", "scheme"]
    blank = [c for c in keys if frame[c].isna().any()]
    if blank:
        # every table groups the trials by these columns, and pandas' groupby drops a row
        # whose key is missing: its tests and summaries would vanish without a word
        n = int(frame[blank].isna().any(axis=1).sum())
        raise ValueError(f"{name} has missing values (NaN or None) in the key column(s) {blank}, "
                         f"in {n} of {len(frame)} row(s); the tables group the trials by {keys} "
                         "and would leave those rows out: fill them (a case without parameters "
                         "has params '-') or drop the rows")
    text = [f"{c} ({frame[c].dtype})" for c in METRICS + tuple(c for c in POOLED_SNRS if c in frame.columns)
            if frame[c].dtype.kind not in "biuf"]
    if text:
        raise TypeError(f"{name} metric column(s) must be numeric; received {text}")
    # the tables read these as numbers (a budget is a float key, the bits are summed and shown):
    # text there ended in numpy's "could not convert string to float", naming no column
    text = [f"{c} ({frame[c].dtype})" for c in ("budget", "bits_nominal", "bits_total")
            if frame[c].dtype.kind not in "biuf"]
    if text:
        raise TypeError(f"{name} column(s) budget, bits_nominal and bits_total must be numeric "
                        f"(bits per coordinate); received {text}")
    nan = [c for c in METRICS if frame[c].isna().any()]
    if nan:
        # name the rows: a NaN is a defect of the code that computed that cell, not of the test
        bad = frame[frame[nan].isna().any(axis=1)]
        where = bad.iloc[0]
        first = ", ".join(f"{c} = {where[c]}" for c in (*CASE_COLUMNS, "budget", "scheme", "trial")
                          if c in bad.columns)
        raise ValueError(f"{name} has NaN in metric column(s) {nan}, in {len(bad)} row(s), the "
                         f"first at {first}; a per-trial metric is never NaN (a test on it "
                         "would be undefined): recompute that cell, or drop its rows")
    return frame


def _in_trial_order(frame: pd.DataFrame, cells: Sequence[str] = ()) -> pd.DataFrame:
    """``frame``'s rows cell by cell, each cell's in trial order: the order the tables read.

    A sweep writes its frame so (cells in grid order, each cell's trials in order), and
    for it this returns the frame itself, the same object; any other order of the same
    rows gives the same frame. A mean's last bits follow the order its values are summed
    in, so the tables read the rows so, and are functions of the data, not of the row order.

    ``cells``: cell ids (``cell_id``) in the order their cells are to come (a sweep
    manifest's ``"cells"``: the grid's order); the cells not named, or all of them when the
    frame has no ``cell_id``, follow in their order of first appearance. Rows of one cell
    with one trial number (not a sweep's frame) are ordered by their metric values.
    """
    keys = [*CASE_COLUMNS, "budget", "scheme"]
    rank = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    if len(cells) and "cell_id" in frame.columns:
        named = frame["cell_id"].map({c: i for i, c in enumerate(cells)}).to_numpy(np.float64)
        rank = np.where(np.isnan(named), len(cells) + rank, named)
    # np.lexsort: the last key is the primary one
    ties = [frame[m].to_numpy() for m in reversed(METRIC_TABLE) if m in frame.columns]
    order = np.lexsort([*ties, frame["trial"].to_numpy(), rank])
    if (order == np.arange(len(order))).all():
        return frame
    return frame.iloc[order]


def reported_pooled_snrs(frame: pd.DataFrame, *, stacklevel: int = 2) -> tuple[str, ...]:
    """The pooled SNR columns the analysis tables report: those of :data:`POOLED_SNRS` that
    the frame has on every row.

    One rule for the summary, the comparisons and the rate–distortion rows. A sweep that
    resumed cells computed before the pooled SNR columns existed has them as NaN in those
    cells' rows. Such a column is left out of every table, with a UserWarning saying how
    many rows lack it: a test on it would be undefined, and a summary or bound row for the
    cells that have it would show part of the sweep as if it were the whole (a scheme's
    pooled SNR beside another's missing one, its family without those tests). A frame
    without the columns (sweeps from before them) has none, silently.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame (:func:`check_frame`), or its cluster means.
    stacklevel : int
        Passed to :func:`warnings.warn`: 2 names the caller of this function.

    Returns
    -------
    tuple of str
        In :data:`POOLED_SNRS` order.

    Examples
    --------
    >>> import numpy as np, pandas as pd, warnings
    >>> f = pd.DataFrame({"snr_k_pooled": [8.0, 9.0], "snr_v_pooled": [7.0, np.nan]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     kept = reported_pooled_snrs(f)
    >>> kept, str(caught[0].message).split(" (")[0]
    (('snr_k_pooled',), "snr_v_pooled is left out of the tables: 1 of the frame's 2 rows lack it")
    """
    kept = []
    for column in (c for c in POOLED_SNRS if c in frame.columns):
        missing = int(frame[column].isna().sum())
        if missing:
            warnings.warn(f"{column} is left out of the tables: {missing} of the frame's "
                          f"{len(frame)} rows lack it (cells computed before the pooled SNR "
                          "columns existed), so it is neither summarised, tested nor set beside "
                          "the rate–distortion bound; rerun those cells in a new sweep directory "
                          "to report it", UserWarning, stacklevel=stacklevel + 1)
            continue
        kept.append(column)
    return tuple(kept)


#: Significant digits of the numbers in a case's label (its ``params`` shortened).
LABEL_DIGITS = 4
# a number in a ``k=v,...`` params label (outside quoted strings): after = , ( [ or a space
_NUMBER = re.compile(r"(?<=[=,(\[ ])(-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+))(?=[,)\] ]|$)")


def short_params(params: str, digits: int = LABEL_DIGITS) -> str:
    """A ``params`` label with each number of more than ``digits`` significant digits rounded.

    For display only (titles, table rows, figure labels): the case key, the ``params``
    column and every table keep the exact text. Quoted strings are left alone.

    Parameters
    ----------
    params : str
        The ``params`` column of a case (``"k=v,..."`` or ``"-"``).
    digits : int
        Significant digits kept (≥ 1).

    Returns
    -------
    str

    Examples
    --------
    >>> short_params("noise=0.0,path='m-1.2345678.npz',rank=1,scale=0.9174935806310884")
    "noise=0.0,path='m-1.2345678.npz',rank=1,scale=0.9175"
    """
    if not isinstance(params, str):
        raise TypeError(f"params must be a str (the params column); received {type(params).__name__}")
    digits = check_int(digits, "digits", low=1)

    def _round(m: re.Match[str]) -> str:
        x = float(m.group(1))
        short = f"{x:.{digits}g}"
        return m.group(1) if float(short) == x else short
    # even pieces lie outside quotes ('…' as repr writes strings)
    pieces = params.split("'")
    return "'".join(_NUMBER.sub(_round, p) if i % 2 == 0 else p for i, p in enumerate(pieces))


def label_digits(params: Iterable[str], digits: int = LABEL_DIGITS) -> int:
    """The fewest significant digits (≥ ``digits``) that keep distinct ``params`` labels distinct.

    Examples
    --------
    >>> label_digits(["scale=0.91749", "scale=0.91701"]), label_digits(["scale=0.917494", "scale=0.917491"])
    (4, 6)
    """
    labels = sorted(set(params))
    digits = check_int(digits, "digits", low=1)
    for k in range(digits, 18):              # 17 significant digits print every float64 exactly
        if len({short_params(p, k) for p in labels}) == len(labels):
            return k
    return 17
