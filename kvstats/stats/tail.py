"""The Hill estimator of a right-tail index, and the warning for heavy-tailed bootstrap input.

A distribution has right-tail index α when P(X > x) = x^(−α) L(x) with L slowly varying
(Pareto, Student-t with α = ν, the absolute Cauchy with α = 1). Moments of order ≥ α are
infinite: for α < 2 the variance is infinite, the central limit theorem for the mean
fails and the bootstrap of the mean is inconsistent (Athreya 1987; Knight 1989), so a
bootstrap confidence interval of a mean of such data has no valid coverage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvstats._checks import _describe, check_int

from ._base import _FrameMixin, as_sample

__all__ = ["HeavyTailWarning", "TailIndexResult", "tail_index", "MIN_TAIL_POSITIVE"]

#: Fewest positive values from which :func:`tail_index` estimates a tail index.
MIN_TAIL_POSITIVE = 10


class HeavyTailWarning(UserWarning):
    """A sample's right tail looks too heavy (Hill α̂ < 2) for the bootstrap of a mean.

    Raised by :func:`kvstats.stats.bootstrap_ci` and
    :func:`kvstats.stats.bootstrap_ratio_ci` when a nonnegative sample with at least
    ten positive values has a Hill tail index below 2: its variance looks infinite, and
    the bootstrap of a mean is then inconsistent (Athreya 1987), whatever the interval
    method. Read the median and upper quantiles, and use rank tests, instead.
    """


@dataclass(frozen=True)
class TailIndexResult(_FrameMixin):
    """Result of :func:`tail_index`.

    Attributes
    ----------
    estimate : float
        Hill estimate α̂ of the right-tail index (``inf`` when the k + 1 largest values
        are all equal: no tail to measure).
    k : int
        Number of upper order statistics used.
    n : int
        Size of the sample (all values, positive or not).
    n_positive : int
        Number of positive values (the Hill estimator uses only these).
    standard_error : float
        Asymptotic standard error α̂/√k (Hill 1975; exact in distribution only for a pure
        Pareto tail above the (k+1)-th largest value, where k/α̂ · α ~ Gamma(k, 1)).
    infinite_variance : bool
        ``estimate < 2``: the variance looks infinite.
    """

    estimate: float
    k: int
    n: int
    n_positive: int
    standard_error: float
    infinite_variance: bool
    _test_name = "hill_tail_index"


def _hill(top: np.ndarray) -> float:
    """Hill α̂ from the k + 1 largest values in decreasing order (all > 0)."""
    logs = np.log(top)
    gamma = float(np.mean(logs[:-1] - logs[-1]))
    # all k + 1 values tied: no measurable tail; 1/0 would be a ZeroDivisionError
    return math.inf if gamma == 0.0 else 1.0 / gamma


def tail_index(x, k: int | None = None) -> TailIndexResult:
    """Hill (1975) estimate of the right-tail index α of a sample.

    With x_(1) ≥ x_(2) ≥ … the positive values of ``x`` in decreasing order,

        α̂ = 1 / ( (1/k) Σ_{i=1..k} [log x_(i) − log x_(k+1)] ).

    If P(X > x) = x^(−α) L(x), moments of order ≥ α are infinite; α̂ < 2 suggests an
    infinite variance, where the bootstrap of a mean is not valid (Athreya 1987).

    Parameters
    ----------
    x : array_like, 1-D
        The sample (finite; NaN/inf rejected). Only its positive values enter the
        estimate; nonpositive values are ignored (the right tail is what is measured).
        At least 10 positive values are required.
    k : int, optional
        Number of upper order statistics, 1 ≤ k ≤ n_positive − 1. Default
        floor(√n_positive), a common compromise: Hill's estimator is sensitive to k
        (small k: high variance, SE α̂/√k; large k: bias from the part of the
        distribution that is not yet Pareto-like). For data known to be pure Pareto a
        larger k (e.g. n/10) is better; plot α̂ against k (a Hill plot) when it matters.

    Returns
    -------
    TailIndexResult

    Raises
    ------
    ValueError
        Fewer than 10 positive values in ``x``, or ``k`` out of range.

    Notes
    -----
    For a pure Pareto(α) sample k·α/α̂ ~ Gamma(k, 1) exactly (Rényi's representation of
    exponential spacings), so E[α̂] = α·k/(k − 1). For Student-t (α = ν) and other
    distributions that are Pareto-like only in the limit, α̂ is biased at finite k
    (de Haan & Ferreira 2006, ch. 3). Light tails (exponential, normal) have α = ∞;
    α̂ then grows slowly with n (like log(n/k) for the exponential).

    References: Hill, B. M. (1975). A simple general approach to inference about the
    tail of a distribution. *Ann. Statist.* 3, 1163–1174. de Haan, L. & Ferreira, A.
    (2006). *Extreme Value Theory: An Introduction*. Springer.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats import tail_index
    >>> x = np.random.default_rng(0).pareto(1.5, 4000) + 1   # Pareto(α = 1.5), x_min = 1
    >>> res = tail_index(x, k=400)
    >>> round(res.estimate, 2), round(res.standard_error, 3), res.infinite_variance
    (1.39, 0.069, True)
    """
    x = as_sample(x, "x")
    pos = x[x > 0]
    n_pos = int(pos.size)
    if n_pos < MIN_TAIL_POSITIVE:
        raise ValueError(f"x must have at least {MIN_TAIL_POSITIVE} positive finite values for a "
                         f"tail index; received {n_pos} among {_describe(x)}")
    if k is None:
        k = math.isqrt(n_pos)
    else:
        k = check_int(k, "k", low=1, high=n_pos - 1)
    # the k + 1 largest values, in decreasing order (partition: O(n), no full sort)
    top = -np.sort(-np.partition(pos, n_pos - k - 1)[n_pos - k - 1:])
    alpha = _hill(top)
    return TailIndexResult(estimate=alpha, k=k, n=int(x.size), n_positive=n_pos,
                           standard_error=alpha / math.sqrt(k), infinite_variance=alpha < 2)


def heavy_tail_alpha(x: np.ndarray) -> float | None:
    """Hill α̂ (default k) of a nonnegative sample with ≥ 10 positive values, else None.

    The screen used by the bootstrap: samples with negative values or too few positive
    ones are not screened (None).
    """
    if x.size < MIN_TAIL_POSITIVE or not np.isfinite(x).all() or (x < 0).any():
        return None
    if np.count_nonzero(x) < MIN_TAIL_POSITIVE:
        return None
    return tail_index(x).estimate
