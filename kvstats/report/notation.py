"""How the report writes a number, a p-value, a level, an interval and a case's name.

The cell and label formats shared by :mod:`kvstats.report.wording` (the sentences),
:mod:`kvstats.report.tables` (the formatted tables), :mod:`kvstats.report.sections` (the
document) and :mod:`kvstats.report.render` (the figures' file names), so that one number
reads the same everywhere in a report.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from kvstats.analysis.frame import short_params


def _num(x: float | int | bool | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isinf(x):
        return "+inf" if x > 0 else "−inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def _p(x: float, alpha: float | None = None) -> str:
    """An (adjusted) p-value: 3 decimals, or 3 significant digits in e-notation below 1e-3.

    With ``alpha``, more digits where the rounded value would fall on the other side of α
    than the p-value itself, so that a row's printed p and its verdict never disagree
    (0.0504 is not "0.050" beside "no significant difference" at α = 0.05).

    Examples
    --------
    >>> _p(0.0504), _p(0.0504, alpha=0.05), _p(0.04996, alpha=0.05), _p(2.5e-7)
    ('0.050', '0.0504', '0.050', '2.50e-07')
    """
    if x < 1e-300:
        return "<1e-300"
    sci = x < 1e-3
    digits = 2 if sci else 3
    text = f"{x:.{digits}e}" if sci else f"{x:.{digits}f}"
    while alpha is not None and (float(text) <= alpha) != (x <= alpha) and digits < 17:
        digits += 1
        text = f"{x:.{digits}e}" if sci else f"{x:.{digits}f}"
    return text


def _apart(a: float, b: float, digits: int = 4) -> int:
    """The fewest significant digits (at least ``digits``) at which :func:`_num` writes two
    different numbers differently: an interval's end beside a margin it does not equal.

    Examples
    --------
    >>> _apart(0.98036, 0.98039), _num(0.98036, _apart(0.98036, 0.98039))
    (5, '0.98036')
    """
    while a != b and _num(a, digits) == _num(b, digits) and digits < 17:
        digits += 1
    return digits


def _pct(level: float) -> str:
    """A confidence level as a percentage, never truncated (0.975 → "97.5%", not "97%")."""
    return f"{100 * float(level):.10g}%"


def _ci(mean: float, low: float, high: float) -> str:
    if mean == low == high:
        return _num(mean)
    return f"{_num(mean)} [{_num(low)}, {_num(high)}]"


def _case_title(case: dict[str, Any], digits: int | None = None) -> str:
    """The case as a title; ``digits``: its params' numbers to that many significant digits
    (:func:`kvstats.analysis.frame.short_params`; None: exact, as the slugs of file names use)."""
    text = case["params"] if digits is None else short_params(case["params"], digits)
    params = "" if case["params"] in ("-", "") else f" ({text})"
    return f"{case['distribution']}{params}, d = {case['dim']}, N = {case['n_keys']}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
