"""Crossovers: where the significant winner of a metric changes with the budget."""

from __future__ import annotations

import pandas as pd

from kvstats.analysis.compare import LOCATION_TESTS, NOT_RESOLVABLE
from kvstats.analysis.frame import CASE_COLUMNS, LABEL_DIGITS, label_digits, short_params

__all__ = ["find_crossovers", "crossover_sentences", "agreed_rows"]


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
        ``winners`` ("n = 2: QKQV; n = 3: no significant difference; n = 4: KQV" in
        budget order, as the report writes it; a budget whose test could not have
        rejected reads "not resolvable at n = 20 pairs (…): only 9 of the 20 pairs
        differ", a verdict that holds commas but no semicolon, so the budgets are
        split at "; "),
        ``crossover`` (True when each scheme wins significantly at some budget) and a
        ``description`` sentence (without a crossover it names the budgets whose test could
        not have rejected, which may hide a win: "no crossover can be seen" when none could).

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats import find_crossovers
    >>> t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
    ...     "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV", "scheme_b": "QKQV",
    ...     "metric": "phi_k", "test": "mann_whitney", "winner": ["QKQV", "KQV"]})
    >>> row = find_crossovers(t).iloc[0]
    >>> bool(row["crossover"]), row["winners"]
    (True, 'n = 2: QKQV; n = 3: KQV')
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
    # positions as the index: a table concatenated without ignore_index repeats labels, and
    # .loc of one case's labels would return other cases' rows too
    mw = comparisons[comparisons["test"].isin(list(LOCATION_TESTS.values()))
                     & (comparisons["budget"] == comparisons["budget_b"])].reset_index(drop=True)
    text = mw["winner"].map(lambda w: isinstance(w, str))
    if not text.all():
        raise TypeError("comparisons' winner column must hold compare_schemes' text (a scheme, "
                         "'no significant difference' or 'not resolvable ...') on its location-test "
                         f"rows; received {mw['winner'][~text].iloc[0]!r}")
    agreed = agreed_rows(mw)
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
        rec["winners"] = _winners_text(winners)
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
            # crossover" then says only what the resolvable budgets show. A budget where no
            # pair differs hides nothing: the two schemes' values were equal on every unit
            equal_here = agreed.loc[grp.index].to_numpy()
            same = [_fmt_budget(b) for (b, _), eq in zip(winners, equal_here) if eq]
            blind = [_fmt_budget(b) for (b, w), eq in zip(winners, equal_here)
                     if w.startswith(NOT_RESOLVABLE) and not eq]
            # paired, no pair differs; two samples, all their values are one: equal alike
            none = "no pair differs" if (grp["test"] == LOCATION_TESTS["trial"]).all() else "no value differs"
            equal = f"{none} at n = {', '.join(same)}" if same else ""
            if len(blind) == len(winners):
                rec["description"] = (f"no crossover can be seen in {rec['metric']} for {case}: "
                                      "no budget's test could have rejected.")
            elif len(same) == len(winners):
                rec["description"] = (f"no crossover in {rec['metric']} for {case}: {none} at any "
                                      "budget (the values were equal on every unit).")
            else:
                rec["description"] = (f"no crossover in {rec['metric']} for {case}: "
                                      + (f"only {next(iter(won))} wins significantly" if won
                                         else "no significant winner at any budget")
                                      + (f" (not resolvable at n = {', '.join(blind)}"
                                         + (f"; {equal}" if equal else "") + ")" if blind
                                         else f" ({equal})" if equal else "") + ".")
        rec["crossover"] = cross
        rows.append(rec)
    return pd.DataFrame(rows, columns=out_cols)


def agreed_rows(comparisons: pd.DataFrame) -> pd.Series:
    """Per row: a test that could not have rejected because no unit tells the two schemes
    apart (``n_informative`` 0): a sign test where none of the n pairs differs, a
    Mann–Whitney, KS or energy test whose pooled values (profiles) are all one, a paired
    energy test where no pair's profile differs. Its verdict reads "not resolvable", but no
    design is to blame: the two schemes' values were equal on every unit, a finding with no
    direction to test, which both designs state alike. False where the table has no
    ``n_informative`` column.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"test": ["sign", "sign", "mann_whitney", "mann_whitney"],
    ...                   "n_informative": [0, 3, float("nan"), 0],
    ...                   "winner": ["not resolvable at n = 9 pairs (…)"] * 2 + ["KV",
    ...                              "not resolvable at n = 3 vs 3 (…)"]})
    >>> agreed_rows(t).tolist()
    [True, False, False, True]
    """
    if "n_informative" not in comparisons:
        return pd.Series(False, index=comparisons.index)
    # a location row's winner is its verdict when not significant; the others have a verdict only
    said = comparisons["verdict"] if "verdict" in comparisons else comparisons["winner"]
    return ((comparisons["n_informative"] == 0)
            & said.map(lambda w: isinstance(w, str) and w.startswith(NOT_RESOLVABLE)).astype(bool))


def crossover_sentences(crossovers: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """The crossovers' sentences, each with the bits its two schemes store per coordinate.

    "Equal budget" is the nominal n: a scheme with a window or per-group scales can store
    twice the bits of the other at the same n (kivi at n = 2: 4.6 bits per coordinate
    against TurboQuant-mse's 2.1), and a sentence saying it wins at n = 3 must say so.
    ``summary``: the table of :func:`~kvstats.analysis.summary_table` (its ``bits_total``
    per case, budget and scheme); a scheme it lacks leaves the bits out. The report's
    crossover bullets and ``kvstats report``'s terminal lines. A frame lacking a column
    it reads is a ValueError naming the argument (``crossovers``: the case columns,
    ``scheme_a``, ``scheme_b``, ``crossover``, ``description``; ``summary``: the case
    columns, ``scheme``, ``bits_total``); an empty ``crossovers`` gives no sentence.

    Examples
    --------
    >>> case = {"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128}
    >>> cross = pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B", "crossover": True,
    ...                        "description": "CROSSOVER in kl for gaussian: A wins at n = 2; B wins at n = 3."}])
    >>> summary = pd.DataFrame([{**case, "budget": b, "scheme": s, "bits_total": t}
    ...                         for s, b, t in [("A", 2, 2.125), ("A", 3, 3.125),
    ...                                         ("B", 2, 4.625), ("B", 3, 5.5)]])
    >>> crossover_sentences(cross, summary)
    ['CROSSOVER in kl for gaussian: A wins at n = 2; B wins at n = 3. Bits stored per coordinate: A 2.125–3.125, B 4.625–5.5.']
    >>> crossover_sentences(cross, pd.DataFrame({"x": [1]}))
    Traceback (most recent call last):
    ...
    ValueError: summary must be the table of summary_table (columns ['distribution', 'params', 'dim', 'n_keys', 'scheme', 'bits_total']); it lacks ['distribution', 'params', 'dim', 'n_keys', 'scheme', 'bits_total']; received columns ['x']
    """
    for arg, frame, need in (("crossovers", crossovers, (*CASE_COLUMNS, "scheme_a", "scheme_b",
                                                         "crossover", "description")),
                             ("summary", summary, (*CASE_COLUMNS, "scheme", "bits_total"))):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{arg} must be a DataFrame; received {type(frame).__name__}")
        missing = [c for c in need if c not in frame.columns]
        # an empty crossover table (no pair at two budgets) may come without columns
        if missing and not (arg == "crossovers" and frame.empty):
            source = "find_crossovers" if arg == "crossovers" else "summary_table"
            raise ValueError(f"{arg} must be the table of {source} (columns {list(need)}); it lacks "
                             f"{missing}; received columns {list(frame.columns)}")
    if crossovers.empty:
        return []
    bits = summary.groupby([*CASE_COLUMNS, "scheme"], sort=False)["bits_total"].agg(["min", "max"])
    lines = []
    for row in crossovers[crossovers["crossover"]].itertuples(index=False):
        case = tuple(getattr(row, c) for c in CASE_COLUMNS)
        ranges = []
        for scheme in (row.scheme_a, row.scheme_b):
            if (*case, scheme) in bits.index:
                low, high = (f"{v:.4g}" for v in bits.loc[(*case, scheme)])
                ranges.append(f"{scheme} {low}" + ("" if low == high else f"–{high}"))
        tail = f" Bits stored per coordinate: {', '.join(ranges)}." if len(ranges) == 2 else ""
        lines.append(row.description + tail)
    return lines


def _winners_by_budget(rows: pd.DataFrame) -> dict[tuple, list[tuple[float, str]]]:
    """(case..., scheme_a, scheme_b, metric) → [(budget, winner), ...] in budget order: the
    location-test rows of pairs compared at one budget (those a crossover is read from)."""
    loc = rows[rows["test"].isin(list(LOCATION_TESTS.values())) & (rows["budget"] == rows["budget_b"])]
    keys = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric"]
    return {k: list(zip(g["budget"], g["winner"]))
            for k, g in loc.sort_values("budget").groupby(keys, sort=False)}


def _crossover_counts(comp: pd.DataFrame, cross: pd.DataFrame) -> tuple[pd.DataFrame, list, int, int]:
    """The crossovers found; the winners by budget of each (case, pair, metric) without one;
    how many of those have a budget whose test could not have rejected, and at how many no
    budget's test could (the crossover section and the summary read the same counts)."""
    keys = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric"]
    winners = _winners_by_budget(comp)
    rest = [winners.get(tuple(k), []) for k in cross.loc[~cross["crossover"], keys].itertuples(index=False)]
    # a budget where no unit tells them apart hides no win (equal on every unit): not blind
    equal = _winners_by_budget(comp[agreed_rows(comp)])
    blind = [sum(w.startswith(NOT_RESOLVABLE) and (b, w) not in equal.get(tuple(k), []) for b, w in r)
             for k, r in zip(cross.loc[~cross["crossover"], keys].itertuples(index=False), rest)]
    some, every = sum(b > 0 for b in blind), sum(b > 0 and b == len(r) for b, r in zip(blind, rest))
    return cross[cross["crossover"]], rest, some, every


def _winners_text(winners: list[tuple[float, str]]) -> str:
    """A pair's winners by budget: "n = 2: KQV; n = 3: not resolvable at …".

    The budgets are joined by a semicolon, which no verdict holds: a "not resolvable at n =
    20 pairs (…): only 9 of the 20 pairs differ" verdict holds commas, and "2:…, 4:…"
    could not be split. The crossover table's ``winners`` column and the report's KL
    winners by budget.

    Examples
    --------
    >>> _winners_text([(2.0, "KV"), (4.0, "not resolvable at n = 4 pairs (smallest "
    ...                         "attainable adjusted p 1): only 2 of the 4 pairs differ")])
    'n = 2: KV; n = 4: not resolvable at n = 4 pairs (smallest attainable adjusted p 1): only 2 of the 4 pairs differ'
    """
    return "; ".join(f"n = {_fmt_budget(b)}: {w}" for b, w in winners)


def _fmt_budget(b: float) -> str:
    return f"{b:g}"
