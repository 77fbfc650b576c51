"""The two-sample Kolmogorov–Smirnov test, :func:`ks_2samp` (import it from
:mod:`kvstats.stats` or :mod:`kvstats.stats.rank`).

scipy's statistic and p-value, with the location and sign of the ECDF gap and a
:class:`TiesWarning` where the pooled sample has ties (the p-value is then conservative;
:mod:`kvstats.stats.ks_exact` gives the exact test under ties).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float
from scipy import stats

from kvstats._checks import check_choice

from ._base import ALTERNATIVES, TiesWarning, _FrameMixin, as_sample

__all__ = ["KSResult", "ks_2samp"]

KS_METHODS = ("auto", "exact", "asymp")


@dataclass(frozen=True)
class KSResult(_FrameMixin):
    """Result of :func:`ks_2samp`.

    Attributes
    ----------
    statistic : float
        D (two-sided), D+ = max(F_x - F_y) ("greater") or D- = max(F_y - F_x) ("less"),
        with F the empirical CDFs.
    pvalue : float
        p-value (scipy.stats.ks_2samp's distribution for ``method``).
    statistic_location : float
        The first pooled observation at which the statistic is attained on the side of
        ``statistic_sign`` (gaps compared as integer counts, as in
        :func:`kvstats.stats.ks_exact.ks_2samp_exact`; scipy's float gaps can pick a later
        one among equal gaps).
    statistic_sign : int
        +1 if F_x > F_y there (x tends to be *smaller*), -1 if F_x < F_y; 0 (two-sided
        only) when max(F_x - F_y) = max(F_y - F_x) exactly, compared as integer counts
        (scipy picks a side by float rounding there): the gap has no direction, and the
        location is the first pooled value where |F_x - F_y| = D.
    alternative, method : str
        The alternative and the requested method.
    n_x, n_y : int
        Sample sizes.
    has_ties : bool
        Whether the pooled sample contains tied values (the p-value is then conservative).
    """

    statistic: float
    pvalue: float
    statistic_location: float
    statistic_sign: int
    alternative: str
    method: str
    n_x: int
    n_y: int
    has_ties: bool
    _test_name = "ks_2samp"


def _ks_gap(xs: Float[np.ndarray, "n_x"], ys: Float[np.ndarray, "n_y"], location: float,
            sign: int) -> float:
    """D at ``statistic_location`` and ``statistic_sign``, from the ECDFs of sorted x, y.

    The float operations of scipy's ECDF difference at that pooled point, and of
    :func:`kvstats.stats.ks_exact.ks_2samp_exact` (so the two functions give the same D;
    scipy's own D can differ in the last bit where it rounds D to h / lcm(n_x, n_y) in its
    exact mode, or attains the same rational gap at another point).
    """
    gap = (np.searchsorted(xs, location, side="right") / xs.size
           - np.searchsorted(ys, location, side="right") / ys.size)
    if sign == 0:   # a balanced gap: D is |F_x - F_y| at the location, either side
        return float(abs(gap) + 0.0)
    # + 0.0: a zero gap read from the other side is 0, not −0 (−0.0 printed as such)
    return float(gap) if sign > 0 else float(np.clip(-gap, 0.0, 1.0) + 0.0)


def _gap_location(xs: Float[np.ndarray, "n_x"], ys: Float[np.ndarray, "n_y"],
                  pooled: Float[np.ndarray, "n"], alternative: str) -> tuple[float, int]:
    """``(location, sign)`` of the KS gap from the integer gaps i n_y - j n_x (i, j the
    counts <= t): the first pooled value where the chosen side reaches D. Two-sided, the
    side of the larger one-sided gap, sign 0 and the first |gap| = D when they are equal.

    scipy compares the float gaps, whose rounding can pick a side where there is none or a
    later point among equal gaps; the integers give :func:`kvstats.stats.ks_exact.ks_2samp_exact`'s
    choice exactly (the same rule there)."""
    gaps = (np.searchsorted(xs, pooled, side="right").astype(np.int64) * ys.size
            - np.searchsorted(ys, pooled, side="right").astype(np.int64) * xs.size)
    up_at, down_at = int(np.argmax(gaps)), int(np.argmin(gaps))
    up, down = max(int(gaps[up_at]), 0), max(-int(gaps[down_at]), 0)
    if alternative == "two-sided" and up == down:
        return float(pooled[min(up_at, down_at)]), 0
    if alternative == "less" or (alternative == "two-sided" and down > up):
        return float(pooled[down_at]), -1
    return float(pooled[up_at]), 1


def ks_2samp(x: Float[np.ndarray, "n_x"], y: Float[np.ndarray, "n_y"],
             alternative: str = "two-sided", method: str = "auto") -> KSResult:
    """Two-sample Kolmogorov–Smirnov test, with the location of the statistic.

    Parameters
    ----------
    x, y : array_like, 1-D
        The two independent samples (NaN rejected; +-inf allowed).
    alternative : {"two-sided", "less", "greater"}
        As in scipy: "less" tests against F_x < F_y somewhere (statistic
        max(F_y - F_x)), "greater" against F_x > F_y (statistic max(F_x - F_y)).
    method : {"auto", "exact", "asymp"}
        Passed to scipy.stats.ks_2samp, whose null distribution gives the p-value.

    Returns
    -------
    KSResult
        ``statistic``, ``pvalue``, ``statistic_location`` (first pooled value where the
        ECDF gap is attained) and ``statistic_sign`` (+1 if F_x > F_y there, -1 if F_x < F_y,
        0 if the two one-sided gaps are exactly equal).

    Warns
    -----
    TiesWarning
        When the pooled sample contains any tied values -- within x, within y, or
        between them. The Smirnov null distribution assumes continuous data; with ties
        the permutation distribution of D is stochastically smaller, so the p-value
        is conservative (never anti-conservative). Quantized metrics are often tied.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats import ks_2samp
    >>> rng = np.random.default_rng(0)
    >>> res = ks_2samp(rng.normal(0, 1, 200), rng.normal(0, 3, 200))
    >>> res.pvalue < 1e-6
    True
    """
    x = as_sample(x, "x", allow_inf=True)
    y = as_sample(y, "y", allow_inf=True)
    check_choice(alternative, "alternative", ALTERNATIVES)
    check_choice(method, "method", KS_METHODS)
    xs, ys = np.sort(x), np.sort(y)
    pooled = np.sort(np.concatenate([xs, ys]))
    has_ties = bool((pooled[1:] == pooled[:-1]).any())
    if has_ties:
        warnings.warn("ks_2samp: the pooled sample has tied values, so the KS p-value is "
                      "conservative (too large); consider mann_whitney or energy_test",
                      TiesWarning, stacklevel=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # exact -> asymp fallback notice
        res = stats.ks_2samp(x, y, alternative=alternative, method=method)
    loc, sign = _gap_location(xs, ys, pooled, alternative)
    return KSResult(statistic=_ks_gap(xs, ys, loc, sign), pvalue=float(res.pvalue),
                    statistic_location=loc, statistic_sign=sign, alternative=alternative,
                    method=method, n_x=int(x.size), n_y=int(y.size), has_ties=has_ties)
