"""The two designs of :func:`~kvstats.analysis.compare_schemes` and the rows each pair compares.

All schemes of a case see the same trials (synthetic: the same ``trial``; cluster means of
a real capture: the same ``cluster``), so two schemes' values are paired by design.
``pairing="trial"`` matches the rows one-to-one on that unit (:func:`_matched` refuses
a unit missing on one side or repeated, e.g. a clustered frame whose trials were not
aggregated per text); ``pairing="none"`` treats them as two independent samples (and
each row as an independent unit: on a real capture, valid for cluster means only). Which
rows of a frame are compared at all is :func:`scheme_pairs`' rule (each case, each budget
both schemes ran; fixed-budget schemes against each other).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from kvstats.analysis.clustered import _clusters
from kvstats.analysis.frame import CASE_COLUMNS
from kvstats.results import _user_stacklevel, check_comparisons
from kvstats.stats.catalog import PAIRINGS   # the designs of compare_schemes
from kvstats.sweep.specs import _compared_budgets, _not_compared_text

__all__ = ["PAIRINGS", "LOCATION_TESTS", "scheme_pairs"]

#: The ``test`` of the per-metric location rows (the rows with a ``winner``), by design.
LOCATION_TESTS = {"none": "mann_whitney", "trial": "sign"}


def scheme_pairs(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]] | None
                 ) -> Iterator[tuple[tuple, float, float, str, str, pd.DataFrame, pd.DataFrame]]:
    """Every comparable (case, budget) of each scheme pair, in frame and ``comparisons`` order.

    Yields ``(case key, budget_a, budget_b, a, b, rows_a, rows_b)``. Pairs absent from a
    case are skipped. Two schemes that each ran at a single, different budget (fixed-budget
    schemes such as ``K4V2`` vs ``K4V4``) are compared directly; otherwise the pair is
    compared at every budget both ran. Each side's rows keep the frame's order.

    ``frame`` needs the case columns, ``scheme`` and ``budget`` (else ValueError naming
    them); ``comparisons`` is checked when called, as
    :func:`~kvstats.results.check_comparisons` checks it without labels (a pair of two
    distinct strings each, given once; None: the default pairs).

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 8, "n_keys": 4,
    ...     "scheme": ["K4V2", "K4V4"], "budget": [3.0, 4.0]})
    >>> [(p[1], p[2], p[3], p[4]) for p in scheme_pairs(f, [("K4V2", "K4V4")])]
    [(3.0, 4.0, 'K4V2', 'K4V4')]
    >>> scheme_pairs(f, [("K4V2", "K4V4", "KV")])
    Traceback (most recent call last):
    ...
    TypeError: comparisons must be a list of (scheme_a, scheme_b) pairs, e.g. [('KQV', 'QKQV')] (in a TOML config: comparisons = [["KQV", "QKQV"]]); received the item ('K4V2', 'K4V4', 'KV') of [('K4V2', 'K4V4', 'KV')]
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a per-trial DataFrame; received {type(frame).__name__}")
    need = (*CASE_COLUMNS, "scheme", "budget")
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ValueError(f"frame must have the columns {list(need)} (a per-trial frame); it lacks "
                         f"{missing}; received columns {list(frame.columns)}")
    pairs = check_comparisons(comparisons)
    # checked above, at the call; the pairs are then yielded lazily
    return ((case, bud_a, bud_b, a, b, frame.iloc[ia], frame.iloc[ib])
            for case, bud_a, bud_b, a, b, ia, ib in _pair_positions(frame, pairs))


def _pair_positions(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]
                    ) -> Iterator[tuple[tuple, float, float, str, str, np.ndarray, np.ndarray]]:
    """:func:`scheme_pairs` with each side's rows as positions (ascending) in ``frame``.

    The frame is grouped once, by case; a side's rows are then picked from that case's
    positions with numpy, not by filtering (and copying) the whole frame per pair and budget.
    """
    schemes, budgets = frame["scheme"].to_numpy(), frame["budget"].to_numpy()
    comparisons = [tuple(p) for p in comparisons]
    for case, pos in frame.groupby(list(CASE_COLUMNS), sort=False).indices.items():
        in_case = schemes[pos]
        sides: dict[str, tuple[np.ndarray, np.ndarray, list]] = {}

        def side(name: str) -> tuple[np.ndarray, np.ndarray, list]:
            # the scheme's rows of this case, their budgets, and those in order of first appearance
            if name not in sides:
                rows = pos[in_case == name]
                buds = budgets[rows]
                sides[name] = rows, buds, pd.unique(buds).tolist()
            return sides[name]

        present = set(in_case)
        for a, b in comparisons:
            if a not in present or b not in present:
                continue
            (ra, ba, budgets_a), (rb, bb, budgets_b) = side(a), side(b)
            # each budget both ran; two single-budget schemes (K4V2 vs K4V4) across theirs
            for bud_a, bud_b in _compared_budgets(budgets_a, budgets_b):
                yield case, bud_a, bud_b, a, b, ra[ba == bud_a], rb[bb == bud_b]


def _not_compared(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]
                  ) -> list[tuple[str, str, list, list]]:
    """The pairs of ``comparisons`` whose two schemes ran in one case of ``frame`` (its case
    columns, ``scheme``, ``budget``) but are compared in none (:func:`scheme_pairs`' rule),
    each as ``(a, b, budgets of a, budgets of b)`` in the first case both ran.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 8, "n_keys": 4,
    ...     "scheme": ["TQ", "TQ", "kivi", "kivi"], "budget": [3.0, 4.0, 1.0, 2.0]})
    >>> _not_compared(f, [("TQ", "kivi")])
    [('TQ', 'kivi', [3.0, 4.0], [1.0, 2.0])]
    """
    compared = {(a, b) for _, _, _, a, b, _, _ in _pair_positions(frame, comparisons)}
    out = []
    for a, b in (tuple(p) for p in comparisons):
        for _, g in ([] if (a, b) in compared else frame.groupby(list(CASE_COLUMNS), sort=False)):
            runs = [sorted(set(g.loc[g["scheme"] == s, "budget"])) for s in (a, b)]
            if runs[0] and runs[1]:
                out.append((a, b, *runs))
                break
    return out


def _drop_not_compared(frame: pd.DataFrame, comparisons: Sequence[tuple[str, str]],
                       fixed: Collection[str] | None = None, report: bool = False) -> list[tuple[str, str]]:
    """``comparisons`` less the pairs :func:`_not_compared` finds, each said in one
    UserWarning (at the user's call) rather than left out of the tables without a word;
    ``fixed``: only those of these (fixed-budget) schemes, the pairs a config's check
    could not say (:func:`kvstats.sweep.specs._warn_not_compared`); ``report``: a report
    names them under Not compared (so the warning says so; compare_schemes makes none)."""
    apart = _not_compared(frame, comparisons)
    for a, b, runs_a, runs_b in apart:
        if fixed is None or a in fixed or b in fixed:
            warnings.warn(_not_compared_text(a, b, runs_a, runs_b, report=report), UserWarning,
                          stacklevel=_user_stacklevel())
    dropped = {(a, b) for a, b, _, _ in apart}
    return [tuple(p) for p in comparisons if tuple(p) not in dropped]


def _check_design(frame: pd.DataFrame, pairing: str, ks: bool | None
                  ) -> tuple[pd.DataFrame, str | None, bool]:
    """The frame, the unit its pairs match on (None: two independent samples) and ``ks``.

    Apart from the per-argument checks because these depend on the design: the KS test
    only without pairing, a clustered frame's clusters checked only with it.
    """
    paired = pairing == "trial"
    if ks is None:
        ks = not paired
    elif ks and paired:
        raise ValueError("ks=True needs pairing='none': the two-sample KS test has no valid null "
                         "for paired samples (its permutations exchange values between pairs); "
                         "received pairing='trial'")
    if not paired:
        return frame, None, ks
    # the unit the schemes share: the cluster (its NaN, for a synthetic trial, the trial)
    unit = "cluster" if "cluster" in frame.columns else "trial"
    if unit == "cluster":
        try:
            frame = _clusters(frame, "frame")
        except ValueError as exc:   # no unit to pair on; the two-sample design needs none
            raise ValueError(f"{exc}; or pass pairing='none' if the two schemes' rows are "
                             "independent samples") from None
    return frame, unit, ks


def _matched(ia: np.ndarray, ib: np.ndarray, units: np.ndarray, unit: str, case: tuple,
             bud_a: float, bud_b: float, a: str, b: str, sizes: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """The two schemes' row positions in the same unit order, or a ValueError saying what
    does not pair. ``sizes``: each row's trials in its cluster mean (``n_trials_in_cluster``
    of :func:`~kvstats.analysis.aggregate_clusters`), equal in a pair or it is no pair (a
    frame joined from two sweeps of other ``n_trials``)."""
    ua, ub = units[ia], units[ib]
    problems = []
    for name, u in ((a, ua), (b, ub)):
        values, counts = np.unique(u, return_counts=True)
        if (counts > 1).any():
            problems.append(f"{unit} {_some(values[counts > 1])} more than once in {name}'s rows")
    for name, u, other in ((a, ua, ub), (b, ub, ua)):
        alone = np.setdiff1d(u, other)
        if alone.size:
            problems.append(f"{unit} {_some(alone)} only in {name}'s rows")
    if not problems and sizes is not None:
        sa, sb = (sizes[i[np.argsort(units[i], kind="stable")]] for i in (ia, ib))
        off = np.flatnonzero(sa != sb)
        if off.size:
            problems.append(f"{unit} {_some(np.sort(ua)[off])} the mean of other trial counts "
                            f"({sa[off[0]]} trials in {a}'s rows, {sb[off[0]]} in {b}'s for the "
                            "first): its two means cover other trials")
    if problems:
        where = ", ".join(f"{c} = {v}" for c, v in zip(CASE_COLUMNS, case))
        budget = f"budget {bud_a:g}" + ("" if bud_b == bud_a else f" vs {bud_b:g}")
        hint = (" (aggregate the trials of each cluster first: kvstats.analysis.aggregate_clusters)"
                if unit == "cluster" and any("more than once" in p for p in problems) else "")
        raise ValueError(f"pairing='trial' (the default) matches the rows of {a} and {b} "
                         f"one-to-one on {unit!r}, but at {where}, {budget}: "
                         + "; ".join(problems) + hint + "; pass pairing='none' if the two "
                         "schemes' rows are independent samples")
    # stable sorts: ties cannot occur (checked above), so row i of each side is one unit
    return ia[np.argsort(ua, kind="stable")], ib[np.argsort(ub, kind="stable")]


def _some(values: np.ndarray, k: int = 5) -> str:
    """Up to ``k`` unit values, then how many more."""
    shown = ", ".join(str(v) for v in values[:k])
    return shown + (f" (and {values.size - k} more)" if values.size > k else "")
