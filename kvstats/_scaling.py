"""Exact power-of-two rescaling, so that sums of squares neither overflow nor underflow.

Multiplying a float by 2**k only changes its exponent: it is exact unless the result
leaves the normal range. Squared norms, distances and inner products are homogeneous, so
a computation redone on ``x * 2**-k`` and rescaled by the right power of two gives
exactly the bits of the direct computation whenever the direct one did not over- or
underflow. Callers take this path only for data outside :data:`SAFE_EXPONENT` (or after
seeing a non-finite or underflowed intermediate), so results on data of ordinary
magnitude are those of the plain formulas, bit for bit.

Used by :mod:`kvstats.metrics.geometry`, :mod:`kvstats.metrics.attention`,
:mod:`kvstats.metrics.profile`, :mod:`kvstats.stats.energy` and :mod:`kvstats.qjl_theory`
(below the metrics in the layers, hence here beside :mod:`kvstats._checks`).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Int

__all__ = ["SAFE_EXPONENT", "max_exponent", "needs_scaling", "scale_rows"]

#: Data whose largest magnitude lies in [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT) (about
#: 3.9e-121 to 2.6e120) is computed as is: squares of such values and of their
#: differences, summed over up to 2**200 terms, stay within float64's normal range.
SAFE_EXPONENT = 400


def max_exponent(a: Float[np.ndarray, "*shape"], axis: int | tuple[int, ...] | None = None,
                 ) -> Int[np.ndarray, "*reduced"]:
    """Binary exponent e of max|a| (max|a| in [2**(e-1), 2**e)); 0 where max|a| = 0.

    Examples
    --------
    >>> import numpy as np
    >>> max_exponent(np.array([[3.0, -8.0], [0.0, 0.0]]), axis=-1).tolist()
    [4, 0]
    """
    return np.frexp(np.max(np.abs(a), axis=axis))[1]


def needs_scaling(a: Float[np.ndarray, "*shape"]) -> bool:
    """True when max|a| is outside [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT) (and a != 0).

    Examples
    --------
    >>> import numpy as np
    >>> needs_scaling(np.array([1.0, 1e200])), needs_scaling(np.array([1.0, 1e100]))
    (True, False)
    """
    if a.size == 0:
        return False
    m = float(np.max(np.abs(a)))
    return m != 0.0 and not (2.0**-SAFE_EXPONENT <= m < 2.0**SAFE_EXPONENT)


def scale_rows(a: Float[np.ndarray, "*batch d"],
               exponent: Int[np.ndarray, "*batch"]) -> Float[np.ndarray, "*batch d"]:
    """``a * 2**-exponent`` row by row (exact unless entries fall below the normal range).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[2.0**600, 3 * 2.0**600], [1.0, 2.0]])
    >>> scale_rows(a, max_exponent(a, axis=-1)).tolist()
    [[0.25, 0.75], [0.25, 0.5]]
    """
    return np.ldexp(a, -np.asarray(exponent)[..., None])
