"""Shared pieces of kvstats.stats: the result mix-in, the warning class, sample checks."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array

if TYPE_CHECKING:
    import pandas as pd

#: The alternatives every test of the package takes (one definition; also ``rank.ALTERNATIVES``).
ALTERNATIVES = ("two-sided", "less", "greater")


class TiesWarning(UserWarning):
    """Tied values make a test's reference distribution (which assumes continuity) inexact.

    Raised by :func:`kvstats.stats.ks_2samp` when the pooled sample contains tied values:
    its p-value is then conservative (too large).
    """


class _FrameMixin:
    """``to_frame()`` for frozen result dataclasses: one tidy row of the scalar fields.

    Array-valued fields (e.g. a null distribution) are left out of the row; the column
    set is fixed by the class, never by the arguments of the call.
    """

    _test_name: str = ""

    def to_frame(self) -> pd.DataFrame:
        """Return the result as a one-row :class:`pandas.DataFrame` (snake_case columns)."""
        import pandas as pd

        row: dict[str, object] = {"test": self._test_name} if self._test_name else {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):
                continue
            if isinstance(value, np.generic):
                value = value.item()
            row[field.name] = value
        return pd.DataFrame([row])


def as_sample(x: npt.ArrayLike, name: str, *, allow_inf: bool = False) -> Float[np.ndarray, "n"]:
    """Return a 1-D float64 sample, rejecting empty input and NaN (and inf unless allowed)."""
    arr = as_float_array(x, name, min_ndim=1, allow_nonfinite=True)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sample; received {_describe(arr)}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN; received {int(np.isnan(arr).sum())} "
                         f"NaN value(s) in {_describe(arr)}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} must be finite; received {int(np.isinf(arr).sum())} "
                         f"inf value(s) in {_describe(arr)}")
    return arr.astype(np.float64, copy=False)


#: Samples whose largest magnitude lies in [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT] (about
#: 2.9e-39 to 3.4e38) are computed as they are: the cubes of a BCa acceleration and the
#: squared variances of a Welch df stay within float64's normal range there. Beyond,
#: they over- or underflowed (a BCa interval of data near 1e150 was refused as
#: "degenerate", Fieller's search failed inside scipy from about 1e80).
SAFE_EXPONENT = 128


def _scale_exponent(*samples: np.ndarray) -> int:
    """The binary exponent e of the samples' largest magnitude (max in [2**(e-1), 2**e))
    when it lies outside the safe range, else 0.

    ``np.ldexp(sample, -e)`` is then exact and of magnitude below 1: a statistic
    homogeneous in the data (a mean, a ratio of means, a t statistic) computed on the
    scaled samples and scaled back is the one on the samples, without the over- or
    underflow of their higher powers; data of ordinary magnitude (e = 0) keeps its bits.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats._base import _scale_exponent
    >>> _scale_exponent(np.array([3.0, 1e30])), _scale_exponent(np.array([1e200]), np.array([1.0]))
    (0, 665)
    """
    from kvstats._scaling import max_exponent

    e = max(int(max_exponent(s)) for s in samples)
    return e if abs(e) > SAFE_EXPONENT else 0


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` if it is a bool (or numpy bool), else raise a ``TypeError``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; received {_describe(value)}")
    return bool(value)


def monte_carlo_pvalue_interval(n_exceed: int, n_draws: int, stopped_early: bool,
                                confidence: float) -> tuple[float, float]:
    """Exact (Clopper–Pearson type) interval for the permutation p-value u = P(T* >= T_obs)
    that a Monte Carlo test estimated from ``n_exceed`` exceedances in ``n_draws`` draws.

    Fixed number of draws (``stopped_early`` False): n_exceed ~ Bin(n_draws, u), the
    Clopper–Pearson limits Beta(a/2; g, B - g + 1) and Beta(1 - a/2; g + 1, B - g).
    Stopped at the h-th exceedance on draw L (Besag–Clifford): inverse binomial sampling,
    P(L <= l) = P(Bin(l, u) >= h), so the limits are Beta(a/2; h, L - h + 1) and
    Beta(1 - a/2; h, L - h). Both come from ordering the outcomes of the sequential test by
    its p-value, whose law is monotone in u, so each limit holds with probability >= 1 - a/2
    whichever way the test ended (a = 1 - confidence).

    Examples
    --------
    >>> from kvstats.stats._base import monte_carlo_pvalue_interval
    >>> [round(v, 4) for v in monte_carlo_pvalue_interval(0, 999, False, 0.99)]  # ~[0, 5.3/B]
    [0.0, 0.0053]
    """
    from scipy import special

    tail = (1.0 - confidence) / 2.0
    g, b = n_exceed, n_draws
    if stopped_early:
        low = float(special.betaincinv(g, b - g + 1, tail))
        high = 1.0 if g >= b else float(special.betaincinv(g, b - g, 1.0 - tail))
    else:
        low = 0.0 if g == 0 else float(special.betaincinv(g, b - g + 1, tail))
        high = 1.0 if g >= b else float(special.betaincinv(g + 1, b - g, 1.0 - tail))
    return low, high
