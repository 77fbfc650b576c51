"""The family's adjustment of the comparison table, and each row's ``winner`` and ``verdict``.

Run once every test of :func:`~kvstats.analysis.compare_schemes` has its p-value: each
adjusted p-value depends on the whole family, each row's resolution on the family's
correction (:func:`~kvstats.analysis.resolution.attainable_adjusted`), and an equivalence
row's verdict on its pair's location-test row.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kvstats.analysis.frame import CASE_COLUMNS
from kvstats.analysis.pairing import LOCATION_TESTS
from kvstats.analysis.resolution import attainable_adjusted, not_resolvable_text
from kvstats.metrics.table import METRIC_TABLE

__all__ = ["NO_DIFFERENCE", "DIFFERENT", "DISTRIBUTIONS_DIFFER", "NOT_RESOLVABLE"]

#: The ``winner``/``verdict`` of a resolvable test whose adjusted p-value exceeds alpha.
NO_DIFFERENCE = "no significant difference"
#: The ``verdict`` of a significant Mann–Whitney, sign or KS row.
DIFFERENT = "different"
#: The ``verdict`` of a significant energy row.
DISTRIBUTIONS_DIFFER = "distributions differ"
#: Start of the ``winner``/``verdict`` of a test that could not have rejected.
NOT_RESOLVABLE = "not resolvable"


def _adjust_and_judge(table: pd.DataFrame, alpha: float, correction: str) -> pd.DataFrame:
    """``table`` with the family's adjusted p-values, ``resolvable``, ``winner`` and ``verdict``.

    After every test has run, because each adjusted p-value depends on the whole family and
    an equivalence row's verdict on its pair's location-test row.
    """
    from kvstats.stats import adjust_pvalues

    if table.empty:
        for col, value in (("pvalue_adjusted", 1.0), ("min_attainable_p_adjusted", 1.0),
                           ("resolvable", False), ("significant", False), ("winner", ""),
                           ("verdict", "")):
            table[col] = pd.Series(dtype=type(value))
        return table
    p = table["pvalue"].to_numpy(np.float64)
    tested = ~np.isnan(p)
    adjusted = np.full(p.shape, np.nan)
    attainable = np.full(p.shape, np.nan)
    if tested.any():
        adjusted[tested] = adjust_pvalues(p[tested], method=correction, alpha=alpha).pvalues_adjusted
        attainable[tested] = attainable_adjusted(
            p[tested], table["min_attainable_p"].to_numpy(np.float64)[tested], correction, alpha)
    table["pvalue_adjusted"] = adjusted
    table["min_attainable_p_adjusted"] = attainable
    table["resolvable"] = attainable <= alpha
    table["significant"] = adjusted <= alpha
    table["winner"] = [_winner(t, s, r, m, a, b) for t, s, r, m, a, b in zip(
        table["test"], table["significant"], table["effect"], table["metric"],
        table["scheme_a"], table["scheme_b"])]
    table["verdict"] = _verdicts(table, alpha)
    mw = table["test"].isin(list(LOCATION_TESTS.values()))
    table.loc[mw, "winner"] = np.where(table.loc[mw, "significant"], table.loc[mw, "winner"],
                                       table.loc[mw, "verdict"])
    return table


def _winner(test: str, significant: bool, effect: float, metric: str, a: str, b: str) -> str:
    """The better scheme of a significant location-test row (the metric table's direction)."""
    if test not in LOCATION_TESTS.values():
        return ""
    if not significant or effect == 0:
        return NO_DIFFERENCE
    a_larger = effect > 0
    return a if a_larger == METRIC_TABLE[metric].higher_is_better else b


def _verdicts(table: pd.DataFrame, alpha: float) -> list[str]:
    from kvstats.stats.equivalence import equivalence_verdict

    key = ["scheme_a", "scheme_b", "budget", "budget_b", *CASE_COLUMNS, "metric"]
    paired = table.attrs.get("pairing") == "trial"
    # an equivalence row's difference test: the pair's location test (one per design)
    mw = table[table["test"].isin(list(LOCATION_TESTS.values()))].set_index(key)["pvalue_adjusted"]
    out = []
    for r in table.itertuples(index=False):
        if r.test == "equivalence":
            if math.isnan(r.pvalue):
                out.append(f"inconclusive ({r.note})")
                continue
            p_diff = mw.get(tuple(getattr(r, k) for k in key), 1.0)
            out.append(equivalence_verdict(r.pvalue_adjusted, p_diff, alpha))
        elif r.significant:
            out.append(DISTRIBUTIONS_DIFFER if r.test == "energy" else DIFFERENT)
        elif r.resolvable:
            out.append(NO_DIFFERENCE)
        else:
            # a permutation test whose units, not its B, set the floor says so, and what in its
            # units limits it: the pairs that differ (sign test; paired energy test where its
            # units bind), or two samples' pooled points all one (n_informative 0)
            units_bind = bool(r.max_permutations) and r.min_attainable_p > 1 / (1 + r.max_permutations)
            counted = not math.isnan(r.n_informative)
            differing = (int(r.n_informative) if counted and (r.test == "sign" or (paired and units_bind))
                         else None)
            out.append(not_resolvable_text(r.test, int(r.max_permutations), int(r.n_a), int(r.n_b),
                                           float(r.min_attainable_p_adjusted), paired=paired,
                                           units_bind=units_bind, alpha=alpha, differing=differing,
                                           identical=counted and not paired and r.n_informative == 0))
    return out
