"""The report's words on crossovers: the section "Crossovers of the winner across budgets"
and the Summary's crossover bullet (both placed by :func:`kvstats.report.sections.build_document`).

Both count the (case, pair, metric)s whose absence of a crossover is a limit of the design
(a budget whose test could not have rejected because too few units differ) apart from those
whose only "not resolvable" budgets are ones where no unit tells the two schemes apart: equal
on every unit, a finding that hides no win (:func:`kvstats.analysis.crossover.agreed_rows`).
The Methods' count of tests that "could not have rejected" holds both kinds.
"""

from __future__ import annotations

import pandas as pd

from kvstats.analysis import CASE_COLUMNS
from kvstats.analysis.compare import NOT_RESOLVABLE
from kvstats.analysis.crossover import (_crossover_counts, _winners_by_budget, _winners_text,
                                       agreed_rows, crossover_sentences)
from kvstats.report.document import Document
from kvstats.report.notation import _case_title

__all__ = ["crossover_summary_line", "equal_only_count"]


def equal_only_count(comp: pd.DataFrame, cross: pd.DataFrame) -> int:
    """How many (case, pair, metric)s without a crossover have "not resolvable" budgets,
    all of them budgets where no unit tells the two schemes apart (``agreed_rows``).

    :func:`kvstats.analysis.crossover._crossover_counts` leaves these out of its count of
    budgets that could have hidden a win (equal on every unit hides none); the report
    names them apart, so that its counts add up to the Methods' count of tests that could
    not have rejected.

    Parameters
    ----------
    comp : DataFrame
        :func:`kvstats.analysis.compare_schemes`'s rows (``test``, ``budget``, ``budget_b``,
        ``winner``, ``n_informative``, the case columns, ``scheme_a``, ``scheme_b``, ``metric``).
    cross : DataFrame
        :func:`kvstats.analysis.crossover_table`'s rows (``crossover`` and the same keys).

    Returns
    -------
    int

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats.analysis import CASE_COLUMNS
    >>> from kvstats.report.crossover_text import equal_only_count
    >>> case = {c: 0 for c in CASE_COLUMNS}
    >>> nr = "not resolvable at n = 9 pairs (…): none of the 9 pairs differs"
    >>> comp = pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B", "metric": "kl",
    ...     "test": "sign", "budget": b, "budget_b": b, "winner": nr, "verdict": nr,
    ...     "n_informative": 0} for b in (2.0, 3.0)])
    >>> cross = pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B", "metric": "kl",
    ...     "crossover": False}])
    >>> equal_only_count(comp, cross)
    1
    """
    need = {"crossover", "scheme_a", "scheme_b", "metric"} - set(cross.columns)
    if need:
        raise ValueError(f"cross must have the columns crossover, scheme_a, scheme_b, metric; "
                         f"received one without {sorted(need)}")
    keys = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric"]
    winners = _winners_by_budget(comp)
    equal = _winners_by_budget(comp[agreed_rows(comp)])
    count = 0
    for k in cross.loc[~cross["crossover"].astype(bool), keys].itertuples(index=False):
        unresolved = [bw for bw in winners.get(tuple(k), []) if bw[1].startswith(NOT_RESOLVABLE)]
        count += bool(unresolved) and all(bw in equal.get(tuple(k), []) for bw in unresolved)
    return count


def _equal_only_text(n: int, n_rest: int, some: int) -> str:
    """The sentence naming the (case, pair, metric)s of :func:`equal_only_count` apart."""
    if not n:
        return ""
    lead = "Besides these, at" if some else f"Of the {n_rest} (case, pair, metric)s without a crossover, at"
    return (f" {lead} {n} every \"not resolvable\" budget is one where no unit tells the two "
            "schemes apart: their values were equal on every unit, "
            "a finding that hides no win, counted among the Methods' tests that could not have "
            "rejected.")


def _crossover_section(doc: Document, comp: pd.DataFrame, cross: pd.DataFrame, summary: pd.DataFrame,
                       no_pair: str, digits: int | None = None) -> None:
    """The crossovers (each with the bits its two schemes store), what the budgets whose
    test could not have rejected leave unseen, and the KL winners by budget ("n = 2: KQV;
    n = 3: not resolvable at …": a semicolon between budgets, since a "not resolvable"
    verdict holds commas)."""
    doc.h(2, "Crossovers of the winner across budgets")
    if comp.empty:
        doc.p(no_pair)
        return
    if cross.empty:
        doc.p("No metric was tested at two or more budgets.")
        return
    keys = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric"]
    winners = _winners_by_budget(comp)
    found, rest, some, every = _crossover_counts(comp, cross)
    if found.empty and every == len(rest):
        doc.p("**No crossover can be seen**: for no case, pair and metric could a budget's test "
              "have rejected (every one \"not resolvable\"), so a crossover, had there been one, "
              "could not have been seen.")
    elif found.empty:
        doc.p("**No crossover**: for every case, pair and metric, no two budgets have opposite "
              "significant winners.")
    else:
        doc.p(f"**{len(found)} crossover(s)** (the winner of a metric changes with the budget):")
        doc.ul(crossover_sentences(found, summary))
    aside = _equal_only_text(equal_only_count(comp, cross), len(rest), some)
    if some and not (found.empty and every == len(rest)):
        doc.p(f"Of the {len(rest)} (case, pair, metric)s without a crossover, {some} have a budget "
              "whose test could not have rejected (\"not resolvable\"), where a win, and so a crossover, could not have been seen"
              + (f"; at {every} of them no budget's test could" if every else "")
              + ": the absence of a crossover there is a limit of the design, not a finding "
              "(tables/crossovers.csv names the budgets)." + aside)
    elif aside:
        doc.p(aside.strip())
    kl = cross[(cross["metric"] == "kl") & ~cross["crossover"]]
    if not kl.empty:
        lists = [winners.get(tuple(getattr(r, k) for k in keys), []) for r in kl.itertuples(index=False)]
        # as tables/crossovers.csv: "can be seen" only where some budget's test could reject
        # or no unit tells the two schemes apart (agreed_rows: equal, a finding)
        equal = _winners_by_budget(comp[agreed_rows(comp)])
        blind = all(w.startswith(NOT_RESOLVABLE) and (b, w) not in equal.get(tuple(getattr(r, k) for k in keys), [])
                    for r, won in zip(kl.itertuples(index=False), lists) for b, w in won)
        doc.p(f"Attention KL, winners by budget ({'none could be seen' if blind else 'no crossover seen'}):")
        doc.ul([f"{_case_title(r._asdict(), digits)}, {r.scheme_a} vs {r.scheme_b}: " + _winners_text(won)
                for r, won in zip(kl.itertuples(index=False), lists)])


def crossover_summary_line(comp: pd.DataFrame, cross: pd.DataFrame) -> str:
    """The Summary's crossover bullet: how many crossovers, and the (case, pair, metric)s
    whose absence of one is a limit of the design, with those equal on every unit apart.

    Parameters
    ----------
    comp, cross : DataFrame
        As :func:`equal_only_count`; ``comp`` not empty.

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats.analysis import CASE_COLUMNS
    >>> from kvstats.report.crossover_text import crossover_summary_line
    >>> case = {c: 0 for c in CASE_COLUMNS}
    >>> comp = pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B", "metric": "kl",
    ...     "test": "sign", "budget": b, "budget_b": b, "winner": "A", "verdict": "A",
    ...     "n_informative": 30} for b in (2.0, 3.0)])
    >>> crossover_summary_line(comp, pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B",
    ...     "metric": "kl", "crossover": False}]))[:40]
    'Crossovers: none in the 1 (case, pair, m'
    """
    if cross.empty:
        # tested at several budgets, but by different pairs (TQ3 vs kivi1, TQ4 vs kivi2): said
        several = "budget" in comp and comp["budget"].nunique() > 1
        return ("Crossovers: none can be read, no pair having a metric tested at two or more budgets"
                + (" (operating points given as separate labels are separate pairs)" if several else "") + ".")
    found, rest, some, every = _crossover_counts(comp, cross)
    n_equal = equal_only_count(comp, cross)
    blind = (f"; {some} of {'them' if found.empty else f'the {len(rest)} without one'} "
             f"{'has' if some == 1 else 'have'} a budget whose test could not have rejected "
             "(\"not resolvable\"), where a crossover could not have been seen: there its absence is a limit of the design, not a finding" if some else "")
    if n_equal:
        blind += (f"; at {n_equal} {'more' if some else 'of them'} every \"not resolvable\" budget "
                  "is one where no unit tells the two schemes apart (equal on every unit: a "
                  "finding, no limit of the design)")
    if found.empty and every == len(rest):
        return ("Crossovers: none can be seen, since no budget's test could have rejected (every "
                "one \"not resolvable\").")
    if found.empty:
        return (f"Crossovers: none in the {len(rest)} (case, pair, metric)s tested at two or more "
                f"budgets (no two budgets with opposite significant winners){blind}.")
    return (f"Crossovers: {len(found)} of the {len(cross)} (case, pair, metric)s tested at two or "
            "more budgets (the winner changes with the budget), listed with their bits under "
            f"\"Crossovers of the winner across budgets\"{blind}.")
