"""Family-wise error and false-discovery corrections (statsmodels' multipletests; Holm and
Bonferroni computed here, equal to it bit for bit). A hypothesis is rejected exactly when
its adjusted p-value is <= alpha, the rule the report decides with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvstats._checks import _describe, as_float_array, check_choice, check_real

__all__ = ["MultipleTestResult", "adjust_pvalues", "add_adjusted_pvalues", "ADJUST_METHODS"]

# statsmodels.stats.multitest.multipletests method names
ADJUST_METHODS = ("holm", "fdr_bh", "bonferroni", "sidak", "holm-sidak", "simes-hochberg",
                  "hommel", "fdr_by", "fdr_tsbh", "fdr_tsbky")


@dataclass(frozen=True, eq=False)   # holds arrays: identity equality and hash
class MultipleTestResult:
    """Result of :func:`adjust_pvalues`.

    Attributes
    ----------
    pvalues : ndarray
        The raw p-values (float64, input shape).
    pvalues_adjusted : ndarray
        Adjusted p-values (same shape), to be compared with ``alpha``.
    reject : ndarray of bool
        ``pvalues_adjusted <= alpha``: whether each null hypothesis is rejected at level
        ``alpha`` after adjustment. One rule, so the two fields never disagree; statsmodels'
        own ``reject`` compares the raw p with a level computed in another float path and
        can differ from it by one ulp at the boundary (e.g. Holm, m = 11, p = 0.05/11:
        adjusted 0.05000000000000001, which statsmodels rejects and this does not).
    method : str
        Correction used.
    alpha : float
        Family-wise error rate (or false-discovery rate for "fdr_*").
    """

    pvalues: np.ndarray
    pvalues_adjusted: np.ndarray
    reject: np.ndarray
    method: str
    alpha: float

    def to_frame(self):
        """One row per hypothesis: ``pvalue, pvalue_adjusted, reject, adjust_method, alpha``.

        Examples
        --------
        >>> from kvstats.stats import adjust_pvalues
        >>> adjust_pvalues([0.01, 0.2], method="bonferroni").to_frame()["pvalue_adjusted"].tolist()
        [0.02, 0.4]
        """
        import pandas as pd

        return pd.DataFrame({"pvalue": self.pvalues.ravel(),
                             "pvalue_adjusted": self.pvalues_adjusted.ravel(),
                             "reject": self.reject.ravel(), "adjust_method": self.method,
                             "alpha": self.alpha})


def adjust_pvalues(pvalues, method: str = "holm", alpha: float = 0.05) -> MultipleTestResult:
    """Adjust a family of p-values for multiple testing.

    Parameters
    ----------
    pvalues : array_like
        p-values in [0, 1], any shape (the family is all of them). NaN is rejected.
    method : str
        "holm" (Holm 1979, family-wise error; default), "fdr_bh" (Benjamini & Hochberg
        1995, false-discovery rate) or any other name of
        ``statsmodels.stats.multitest.multipletests``: see ``ADJUST_METHODS``.
    alpha : float in (0, 1)
        Level at which ``reject`` is decided.

    Returns
    -------
    MultipleTestResult
        ``pvalues_adjusted`` and ``reject`` (= ``pvalues_adjusted <= alpha``) in the
        input's shape.

    Examples
    --------
    >>> from kvstats.stats import adjust_pvalues
    >>> res = adjust_pvalues([0.01, 0.02, 0.03, 0.5])
    >>> res.pvalues_adjusted.round(3).tolist(), res.reject.tolist()
    ([0.04, 0.06, 0.06, 0.5], [True, False, False, False])
    """
    p = as_float_array(pvalues, "pvalues", min_ndim=0).astype(np.float64)
    if ((p < 0) | (p > 1)).any():
        raise ValueError(f"pvalues must lie in [0, 1]; received values from {p.min()} to {p.max()}")
    check_choice(method, "method", ADJUST_METHODS)
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    if method in ("holm", "bonferroni"):
        adjusted = _holm_bonferroni(p.ravel(), method)
    else:
        from statsmodels.stats.multitest import multipletests

        # Šidák's 1 − (1 − p)^m goes through log1p(−p): p = 1 gives log 0 = −inf and the
        # right answer 1, with a divide-by-zero warning that says nothing about the data
        with np.errstate(divide="ignore"):
            adjusted = multipletests(p.ravel(), alpha=alpha, method=method)[1]
    adjusted = adjusted.reshape(p.shape)
    # statsmodels' reject compares raw p with a level in another float path: at the
    # boundary it can disagree with adjusted <= alpha, the rule the report applies
    return MultipleTestResult(pvalues=p, pvalues_adjusted=adjusted,
                              reject=np.asarray(adjusted <= alpha), method=method, alpha=alpha)


def _holm_bonferroni(p: np.ndarray, method: str) -> np.ndarray:
    """Holm's and Bonferroni's adjusted p-values, as ``multipletests`` computes them (the
    same operations in the same order: equal bit for bit), without its ``gc.collect()``
    per Holm call (~50 ms in a large process, paid by every report)."""
    m = p.size
    if method == "bonferroni":
        return np.minimum(p * float(m), 1.0)
    order = np.argsort(p)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * np.arange(m, 0, -1)), 1.0)
    return adjusted


def add_adjusted_pvalues(frame, method: str = "holm", alpha: float = 0.05,
                         pvalue_column: str = "pvalue", by=None):
    """Return a copy of a tidy table of tests with adjusted p-values added.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per test, with a p-value column.
    method, alpha :
        As in :func:`adjust_pvalues`.
    pvalue_column : str
        Name of the column holding the raw p-values.
    by : str or list of str, optional
        Columns defining separate families (each adjusted on its own); default: the
        whole table is one family, as for "every test in a report". Rows whose key is
        missing (NaN) form one family of their own. Families are formed by row position,
        so a repeated index (e.g. from ``pd.concat``) is fine.

    Returns
    -------
    pandas.DataFrame
        ``frame`` plus the columns ``pvalue_adjusted``, ``reject`` and ``adjust_method``
        (fixed names whatever the arguments).

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats.stats import add_adjusted_pvalues
    >>> df = pd.DataFrame({"budget": [2, 3, 4], "pvalue": [0.001, 0.04, 0.3]})
    >>> add_adjusted_pvalues(df, method="fdr_bh")["reject"].tolist()
    [True, False, False]
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame; received {_describe(frame)}")
    if pvalue_column not in frame.columns:
        raise ValueError(f"pvalue_column must name a column of frame {list(frame.columns)}; "
                         f"received {pvalue_column!r}")
    column = frame[pvalue_column]
    if len(column) and not (pd.api.types.is_numeric_dtype(column)
                            and not pd.api.types.is_bool_dtype(column)):
        raise TypeError(f"pvalue_column {pvalue_column!r} must hold numeric p-values; received "
                        f"a column of dtype {column.dtype}")
    if by is not None:
        # column names only (a groupby key may also be a function or a Grouper)
        keys = [by] if isinstance(by, str) else list(by) if isinstance(by, list | tuple) else []
        missing = [k for k in keys if k not in frame.columns]
        if missing:
            raise ValueError(f"by must name columns of frame {list(frame.columns)}; received "
                             f"{by!r} ({missing} not found)")
    out = frame.copy()
    if len(out) == 0:
        # the checks adjust_pvalues makes on a family: an empty frame is no excuse for bad input
        check_choice(method, "method", ADJUST_METHODS)
        check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
        return out.assign(pvalue_adjusted=np.nan, reject=False, adjust_method=method)
    # Families by position, never by index label: a frame from pd.concat repeats labels,
    # and .loc on a repeated label would put every row of that label into each family.
    # A missing key (NaN) is a family of its own (dropna=False), not a row left out.
    codes = (np.zeros(len(out), dtype=np.int64) if by is None
             else out.groupby(by, sort=False, dropna=False).ngroup().to_numpy())
    p = out[pvalue_column].to_numpy(dtype=np.float64)
    bad = ~((p >= 0) & (p <= 1))                      # NaN too
    if bad.any():
        # checked here, not per family, so that the message names the column
        raise ValueError(f"pvalue_column {pvalue_column!r} must hold p-values in [0, 1] (no NaN); "
                         f"received {int(bad.sum())} other value(s), the first "
                         f"{float(p[bad][0])!r} at row {int(np.flatnonzero(bad)[0])}")
    adjusted, reject = np.empty(len(out)), np.empty(len(out), dtype=bool)
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        res = adjust_pvalues(p[rows], method=method, alpha=alpha)
        adjusted[rows], reject[rows] = res.pvalues_adjusted, res.reject
    return out.assign(pvalue_adjusted=adjusted, reject=reject, adjust_method=method)
