"""Crossovers: where the significant winner of a metric changes with the budget."""

from __future__ import annotations

import pandas as pd

from kvstats.analysis.compare import LOCATION_TESTS, NOT_RESOLVABLE
from kvstats.analysis.frame import CASE_COLUMNS, LABEL_DIGITS, label_digits, short_params

__all__ = ["find_crossovers"]


def find_crossovers(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Where the winner of a metric changes with the budget, per case and scheme pair.

    Parameters
    ----------
    comparisons : DataFrame
        The table of :func:`~kvstats.analysis.compare_schemes`.

    Returns
    -------
    DataFrame
        One row per (case, pair, metric) tested at two or more budgets:
        ``winners`` ("2:QKQV, 3:no significant difference, 4:KQV" in budget order; a
        budget whose test could not have rejected reads "not resolvable at n = …"),
        ``crossover`` (True when each scheme wins significantly at some budget) and a
        ``description`` sentence (without a crossover it names the budgets whose test could
        not have rejected, which may hide a win: "no crossover can be seen" when none could).

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
    ...     "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV", "scheme_b": "QKQV",
    ...     "metric": "phi_k", "test": "mann_whitney", "winner": ["QKQV", "KQV"]})
    >>> bool(find_crossovers(t)["crossover"].iloc[0])
    True
    """
    if not isinstance(comparisons, pd.DataFrame):
        raise TypeError(f"comparisons must be the DataFrame of compare_schemes; received "
                        f"{type(comparisons).__name__}")
    cols = list(CASE_COLUMNS) + ["scheme_a", "scheme_b", "metric"]
    out_cols = cols + ["winners", "crossover", "description"]
    missing = [c for c in cols + ["budget", "budget_b", "test", "winner"] if c not in comparisons.columns]
    if missing:
        raise ValueError(f"comparisons lacks the column(s) {missing} of compare_schemes' table; "
                         f"received columns {list(comparisons.columns)}")
    # the location test's rows (Mann–Whitney, or the sign test under pairing): the only ones with a winner
    mw = comparisons[comparisons["test"].isin(list(LOCATION_TESTS.values()))
                     & (comparisons["budget"] == comparisons["budget_b"])]
    rows = []
    # the sentence shows the params' numbers short (the case columns keep them exact)
    digits = label_digits(mw["params"]) if "params" in mw else LABEL_DIGITS
    for key, grp in mw.groupby(cols, sort=False):
        grp = grp.sort_values("budget")
        if len(grp) < 2:
            continue
        winners = list(zip(grp["budget"], grp["winner"]))
        # only a scheme's name is a win ("no significant difference", "not resolvable ..." are not)
        won = {w for _, w in winners if w in (key[-3], key[-2])}
        cross = len(won) == 2
        rec = dict(zip(cols, key))
        rec["winners"] = ", ".join(f"{_fmt_budget(b)}:{w}" for b, w in winners)
        # written as the report's case titles are ("gaussian, d = 64, N = 128")
        params = ("" if rec["params"] in ("-", "")
                  else f" ({short_params(rec['params'], digits)})")
        case = f"{rec['distribution']}{params}, d = {rec['dim']}, N = {rec['n_keys']}"
        if cross:
            a, b = rec["scheme_a"], rec["scheme_b"]
            wa = [_fmt_budget(bud) for bud, w in winners if w == a]
            wb = [_fmt_budget(bud) for bud, w in winners if w == b]
            rec["description"] = (f"CROSSOVER in {rec['metric']} for {case}: {a} wins at n = "
                                  f"{', '.join(wa)}; {b} wins at n = {', '.join(wb)}.")
        else:
            # a budget whose test could not have rejected hides a win, so it is named: "no
            # crossover" then says only what the resolvable budgets show
            blind = [_fmt_budget(b) for b, w in winners if w.startswith(NOT_RESOLVABLE)]
            if len(blind) == len(winners):
                rec["description"] = (f"no crossover can be seen in {rec['metric']} for {case}: "
                                      "no budget's test could have rejected.")
            else:
                rec["description"] = (f"no crossover in {rec['metric']} for {case}: "
                                      + (f"only {next(iter(won))} wins significantly" if won
                                         else "no significant winner at any budget")
                                      + (f" (not resolvable at n = {', '.join(blind)})"
                                         if blind else "") + ".")
        rec["crossover"] = cross
        rows.append(rec)
    return pd.DataFrame(rows, columns=out_cols)


def _fmt_budget(b: float) -> str:
    return f"{b:g}"
