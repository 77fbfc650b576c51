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


def _p(x: float) -> str:
    if x < 1e-300:
        return "<1e-300"
    return f"{x:.2e}" if x < 1e-3 else f"{x:.3f}"


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
