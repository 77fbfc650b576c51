"""Input validation shared by every module.

Every public function validates its arguments with these helpers so that bad input
gets one kind of message: a ``ValueError``/``TypeError`` naming the argument, what is
allowed, and what was received. Never an ``assert``, never a silent NaN.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

import numpy as np

SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, Integral) and not isinstance(value, bool) and abs(int(value)) >= 10**80:
        # Python refuses to print an int of more than 4,300 digits; its size is what matters
        sign = "a negative" if value < 0 else "an"
        return f"{sign} integer of about {int(int(value).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def as_float_array(x: Any, name: str, *, min_ndim: int = 0, allow_nonfinite: bool = False,
                   allow_empty: bool = False) -> np.ndarray:
    """Return ``x`` as a float32 or float64 array (other numeric dtypes become float64).

    The narrow floats of :mod:`ml_dtypes` (bfloat16, fp8, fp4: how caches are often held)
    count as numeric and become float64 like float16.

    Raises a ``TypeError`` for non-numeric input and a ``ValueError`` for too few
    dimensions, empty input or NaN/inf values, each naming ``name``.
    """
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists, torch's bfloat16 (numpy has no such dtype) and the like
        hint = (" (a torch tensor numpy cannot take: pass x.float())"
                if type(x).__module__.split(".")[0] == "torch" else "")
        raise TypeError(f"{name} must be a numeric array{hint}; received {_describe(x)}") from exc
    if arr.dtype.kind not in "biuf" and not _is_ml_dtypes_number(arr.dtype):
        raise TypeError(f"{name} must be a real numeric array; received {_describe(arr)}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s); received {_describe(arr)}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} must not be empty; received {_describe(arr)}")
    if not allow_nonfinite and not np.isfinite(arr).all():
        n_bad = int(arr.size - np.isfinite(arr).sum())
        raise ValueError(f"{name} must be finite; received {n_bad} NaN/inf value(s) in {_describe(arr)}")
    return arr


def as_data_array(x: Any, name: str, **kwargs: Any) -> np.ndarray:
    """:func:`as_float_array` for vector data (keys, values, queries, their reconstructions),
    refusing booleans: a mask passed by mistake reads as 0/1 and gives plausible numbers.

    Integers stay accepted (read as float64), as everywhere.

    Examples
    --------
    >>> import numpy as np
    >>> as_data_array([1, 2], "x").dtype
    dtype('float64')
    >>> as_data_array(np.ones(2, dtype=bool), "x")
    Traceback (most recent call last):
    ...
    TypeError: x must be a real numeric array (float, integer or an ml_dtypes float), not a boolean mask; received array of shape (2,) and dtype bool
    """
    try:
        kind = np.asarray(x).dtype.kind
    except Exception:          # ragged lists and the like: as_float_array names them
        kind = None
    if kind == "b":
        raise TypeError(f"{name} must be a real numeric array (float, integer or an ml_dtypes "
                        f"float), not a boolean mask; received {_describe(np.asarray(x))}")
    return as_float_array(x, name, **kwargs)


def _is_ml_dtypes_number(dtype: np.dtype) -> bool:
    # ml_dtypes' types are numpy "void"-kind extension dtypes; their module names them
    return dtype.kind == "V" and dtype.type.__module__.startswith("ml_dtypes")


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int`` within ``[low, high]`` (either bound optional).

    Both errors give the allowed range when there is one (a wrong type too: ``2.5`` for a
    budget is told the budgets it may be).

    Examples
    --------
    >>> check_int(3, "bits", low=1, high=8)
    3
    >>> check_int(2.5, "bits", low=1, high=8)
    Traceback (most recent call last):
    ...
    TypeError: bits must be an integer in [1, 8]; received 2.5
    """
    bounded = "" if low is None and high is None else (
        f" in [{'-inf' if low is None else low}, {'inf' if high is None else high}]")
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer{bounded}; received {_describe(value)}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{bounded}; received {_describe(value)}")
    return value


def check_real(value: Any, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite ``float`` within the given (open or closed) bounds.

    A value that is not a real number is a ``TypeError``; NaN, ±inf or one outside the
    bounds is a ``ValueError`` (the right type, a wrong value).

    Examples
    --------
    >>> check_real(0.5, "alpha", low=0, high=1, low_open=True, high_open=True)
    0.5
    >>> check_real(float("nan"), "alpha")
    Traceback (most recent call last):
    ...
    ValueError: alpha must be a finite real number; received nan
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a finite real number; received {_describe(value)}")
    try:
        as_float = float(value)   # np.isfinite refuses Python ints past int64
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise ValueError(f"{name} must be a finite real number; received {_describe(value)}")
    value = as_float
    bad_low = low is not None and (value <= low if low_open else value < low)
    bad_high = high is not None and (value >= high if high_open else value > high)
    if bad_low or bad_high:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        # an unbounded side is open: inf is refused above
        interval = (f"{'(' if low_open or low is None else '['}{lo}, "
                    f"{hi}{')' if high_open or high is None else ']'}")
        raise ValueError(f"{name} must be in {interval}; received {value}")
    return value


def did_you_mean(value: object, choices: Iterable[Any]) -> str:
    """``" (did you mean 'X'?)"`` for the choice closest to ``value``, or ``""``.

    The one suggestion of the project's name checks (:func:`check_choice`, scheme names,
    the sweep config's keys, distributions and labels, the report options): case is
    ignored first (``'kqv'`` is ``'KQV'``), then a choice of the same letters in another
    order (``'KVQ'`` is ``'KQV'`` swapped, not ``'KV'`` with a letter added), then
    :func:`difflib.get_close_matches` (ratio >= 0.6) picks a near miss among the string
    choices.

    Examples
    --------
    >>> names = ["KV", "KQV", "QKQV"]
    >>> did_you_mean("kqv", names), did_you_mean("QKVQ", names), did_you_mean("zzz", names)
    (" (did you mean 'KQV'?)", " (did you mean 'QKQV'?)", '')
    >>> did_you_mean("KVQ", names), did_you_mean("KQ", names)
    (" (did you mean 'KQV'?)", " (did you mean 'KQV'?)")
    """
    if not isinstance(value, str):
        return ""
    folded = {c.casefold(): c for c in choices if isinstance(c, str)}
    key = value.casefold()
    close = [c for c in folded if sorted(c) == sorted(key)]
    close = close or difflib.get_close_matches(key, list(folded), n=1, cutoff=0.6)
    return f" (did you mean {folded[close[0]]!r}?)" if close else ""


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise a ``ValueError`` listing them
    (with :func:`did_you_mean`'s near miss)."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}; received {_describe(value)}"
                         f"{did_you_mean(value, choices)}")
    return value


def as_generator(seed: SeedLike, name: str = "seed") -> np.random.Generator:
    """Turn a seed (int, SeedSequence, Generator, or None for fresh OS entropy) into a Generator.

    A Generator passed in is returned as is (shared state, as numpy does).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, Integral) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"{name} must be a non-negative integer; received {seed}")
        return np.random.default_rng(int(seed))
    raise TypeError(f"{name} must be an int, numpy SeedSequence, numpy Generator or None; "
                    f"received {_describe(seed)}")


def replicate_scale() -> str:
    """Size of the exhaustive statistical checks: "ci" (bounded, default) or "full".

    Read from the environment variable ``KVSTATS_TEST_SCALE``; tests use it to pick the
    number of replicates so that CI stays within its time budget.
    """
    import os

    scale = os.environ.get("KVSTATS_TEST_SCALE", "ci")
    return check_choice(scale, "KVSTATS_TEST_SCALE", ["ci", "full"])
