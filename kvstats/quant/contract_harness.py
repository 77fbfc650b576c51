"""The harness every clause of :mod:`kvstats.quant.contract` runs over: the awkward test
data, the budgets a clause builds, how a scheme is built and a failure worded.

Examples
--------
>>> from kvstats.quant.contract_harness import budgets
>>> budgets("kivi")
[1, 3, 8]
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["SchemeContractError", "awkward_kv", "budgets"]

_REL = 1e-12   # accounted vs expected bits: equal up to float rounding


class SchemeContractError(ValueError):
    """A scheme breaks the contract; the message says which clause, where and how."""


def _quiet(check: Callable[..., None]) -> Callable[..., None]:
    """Run a clause with the warnings of the awkward rows silenced: their norms (~1e-10)
    are below float16's range on purpose, and the coders say so (tested elsewhere)."""
    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*below float16", category=UserWarning)
            check(*args, **kwargs)
    return run


def _fail(name: str, where: str, what: str) -> None:
    raise SchemeContractError(f"scheme {name!r} {where}: {what}")


def awkward_kv(shape: tuple[int, ...], dtype: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian K, V with the rows every coder must survive: exact zeros (K row 7, V row 11)
    and norms that round to 0 in float16 (K row 8, V row 3). ``shape[-2] >= 12``.

    Examples
    --------
    >>> K, V = awkward_kv((16, 4), np.float32, seed=0)
    >>> bool((K[7] == 0).all()), K.dtype
    (True, dtype('float32'))
    """
    rng = np.random.default_rng(seed)
    K, V = (rng.standard_normal(shape) for _ in range(2))
    K[..., 7, :] = 0.0
    V[..., 11, :] = 0.0
    K[..., 8, :] *= 1e-10
    V[..., 3, :] *= 1e-10
    return K.astype(dtype), V.astype(dtype)


def _parse(name: str, params: Mapping[str, Any] | None):
    from kvstats.quant.registry import parse_scheme_name

    return parse_scheme_name(name, dict(params or {}))


def budgets(name: str) -> list[int | None]:
    """The budgets a check builds: ``[None]`` when fixed, else the range's ends and 3 (clipped).

    Examples
    --------
    >>> budgets("KQV"), budgets("K4V2")
    ([2, 3, 8], [None])
    """
    from kvstats.quant.registry import scheme_def

    d = scheme_def(name)
    if d.fixed_budget:
        return [None]
    return sorted({d.min_bits, min(max(3, d.min_bits), d.max_bits), d.max_bits})


def _build(name: str, bits: int | None, dim: int, params: Mapping[str, Any], seed: int = 7,
           draws: int | tuple[int, ...] = ()):
    from kvstats.quant.schemes import make_scheme

    return make_scheme(name, bits, dim, seed=seed, draws=draws, **params)


def _where(bits: int | None, dim: int, params: Mapping[str, Any], **more: Any) -> str:
    extra = "".join(f", {k}={v}" for k, v in more.items())
    return f"(bits={bits}, d={dim}{extra}, params {dict(params)})"
