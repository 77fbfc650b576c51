"""Pairwise tests between schemes at each case and budget, adjusted over the whole table.

Per pair, case and budget: a Mann–Whitney U test and a two-sample KS test per metric, and
an energy permutation test on the standardised 6D profile. The two schemes' trials are
treated as two samples; all schemes of a case see the same trials, which makes their
metrics positively correlated and, under the null, these two-sample tests conservative
(valid, with some power lost).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
from jaxtyping import Float

from kvstats._checks import check_choice, check_int, check_real
from kvstats.analysis.frame import CASE_COLUMNS, HIGHER_IS_BETTER, METRICS, PROFILE_METRICS, check_frame
from kvstats.results import DEFAULT_COMPARISONS

__all__ = ["compare_schemes", "scheme_pairs", "NO_DIFFERENCE"]

#: The ``winner`` of a Mann–Whitney row whose adjusted p-value is not below alpha.
NO_DIFFERENCE = "no significant difference"

_COLUMNS = list(CASE_COLUMNS) + ["budget", "budget_b", "scheme_a", "scheme_b", "metric", "test",
                                 "statistic", "pvalue", "effect", "effect_low", "effect_high",
                                 "mean_a", "mean_b", "median_a", "median_b", "n_a", "n_b", "note"]

Row = dict[str, float | int | str]


def _mw_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"]) -> Row:
    from kvstats.stats import mann_whitney

    res = mann_whitney(x, y)
    return {"test": "mann_whitney", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.rank_biserial), "effect_low": float(res.rank_biserial_low),
            "effect_high": float(res.rank_biserial_high), "note": ""}


def _ks_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"]) -> Row:
    from kvstats.stats import ks_2samp

    with warnings.catch_warnings():
        # quantized metrics are often tied; the report flags it per row instead of warning
        warnings.simplefilter("ignore")
        res = ks_2samp(x, y)
    return {"test": "ks", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.statistic), "effect_low": math.nan, "effect_high": math.nan,
            "note": "ties: conservative" if res.has_ties else ""}


def _energy_row(X: Float[np.ndarray, "n 6"], Y: Float[np.ndarray, "m 6"], n_resamples: int,
                seed: int) -> Row | None:
    from kvstats.stats import energy_test

    if not (np.isfinite(X).all() and np.isfinite(Y).all()):
        return None  # an exact reconstruction (SNR = inf) has no finite 6D point
    res = energy_test(X, Y, n_resamples=n_resamples, seed=seed, standardize=True)
    return {"test": "energy", "metric": "profile_6d", "statistic": float(res.statistic),
            "pvalue": float(res.pvalue), "effect": math.nan, "effect_low": math.nan,
            "effect_high": math.nan, "note": "standardised 6D profile"}


def scheme_pairs(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]
                 ) -> Iterator[tuple[tuple, float, float, str, str, pd.DataFrame, pd.DataFrame]]:
    """Every comparable (case, budget) of each scheme pair, in frame and ``comparisons`` order.

    Yields ``(case key, budget_a, budget_b, a, b, rows_a, rows_b)``. Pairs absent from a
    case are skipped. Two schemes that each ran at a single, different budget (fixed-budget
    schemes such as ``K4V2`` vs ``K4V4``) are compared directly; otherwise the pair is
    compared at every budget both ran.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 8, "n_keys": 4,
    ...     "scheme": ["K4V2", "K4V4"], "budget": [3.0, 4.0]})
    >>> [(p[1], p[2], p[3], p[4]) for p in scheme_pairs(f, [("K4V2", "K4V4")])]
    [(3.0, 4.0, 'K4V2', 'K4V4')]
    """
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        present = set(grp["scheme"])
        for a, b in comparisons:
            if a not in present or b not in present:
                continue
            ga, gb = grp[grp["scheme"] == a], grp[grp["scheme"] == b]
            budgets_a, budgets_b = list(dict.fromkeys(ga["budget"])), list(dict.fromkeys(gb["budget"]))
            if len(budgets_a) == 1 and len(budgets_b) == 1 and budgets_a != budgets_b:
                # fixed-budget schemes (e.g. K4V2 vs K4V4): compare them directly
                yield case, budgets_a[0], budgets_b[0], a, b, ga, gb
                continue
            for bud in budgets_a:
                if bud in budgets_b:
                    yield case, bud, bud, a, b, ga[ga["budget"] == bud], gb[gb["budget"] == bud]


def compare_schemes(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]] | None = None, *,
                    metrics: Sequence[str] = METRICS, alpha: float = 0.05,
                    correction: str = "holm", energy_resamples: int = 499, seed: int = 0,
                    ks: bool = True, energy: bool = True) -> pd.DataFrame:
    """Pairwise tests between schemes at each case and budget, adjusted across the whole table.

    For each pair (a, b), case and budget: per metric a Mann–Whitney U test (``effect``
    = rank-biserial r, positive when a's values tend to be larger, with its CI) and a
    two-sample KS test (``effect`` = D); on the standardised 6D profile an energy
    permutation test. Every p-value in the table is adjusted together (Holm by default,
    ``"fdr_bh"`` for Benjamini–Hochberg). ``winner`` (Mann–Whitney rows) applies
    :data:`~kvstats.metrics.table.HIGHER_IS_BETTER`: the scheme whose values are better in
    the direction of r when the adjusted p-value is below ``alpha``, else
    ``"no significant difference"``.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`.
    comparisons : sequence of (str, str), optional
        Scheme label pairs (default :data:`kvstats.results.DEFAULT_COMPARISONS`). Pairs
        absent from a case are skipped. Fixed-budget schemes (``K4V2``) with different
        budgets are compared directly (``budget`` ≠ ``budget_b``).
    metrics : sequence of str
        Metrics tested one by one (subset of :data:`~kvstats.analysis.METRICS`).
    alpha : float
        Family-wise (Holm) or false-discovery (BH) level.
    correction : {"holm", "fdr_bh"}
        Multiple-testing correction over every p-value in the table.
    energy_resamples : int
        Permutations of each energy test.
    seed : int
        Seed of the energy permutations.
    ks, energy : bool
        Include the KS and energy tests.

    Returns
    -------
    DataFrame
        One row per test with the case columns, ``budget``, ``budget_b``, ``scheme_a``,
        ``scheme_b``, ``metric``, ``test``, ``statistic``, ``pvalue``, ``effect``,
        ``effect_low``, ``effect_high``, ``mean_a``, ``mean_b``, ``median_a``,
        ``median_b``, ``n_a``, ``n_b``, ``note``, ``pvalue_adjusted``, ``significant``,
        ``winner``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS, compare_schemes
    >>> rng = np.random.default_rng(0)
    >>> def cell(scheme, shift):
    ...     return pd.DataFrame({m: rng.random(40) + shift for m in METRICS}).assign(
    ...         distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0,
    ...         scheme=scheme, bits_nominal=4.0, bits_total=4.25, trial=np.arange(40))
    >>> f = pd.concat([cell("KQV", 0.0), cell("QKQV", 1.0)])
    >>> t = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False)
    >>> t.set_index("metric").loc["kl", "winner"]
    'KQV'
    """
    frame = check_frame(frame)
    from kvstats.stats import adjust_pvalues

    comparisons = [tuple(p) for p in (DEFAULT_COMPARISONS if comparisons is None else comparisons)]
    for pair in comparisons:
        if len(pair) != 2 or not all(isinstance(s, str) for s in pair):
            raise TypeError(f"comparisons must be pairs of scheme labels; received {pair!r}")
    for m in metrics:
        check_choice(m, "metrics", METRICS)
    alpha = check_real(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    correction = check_choice(correction, "correction", ["holm", "fdr_bh"])
    energy_resamples = check_int(energy_resamples, "energy_resamples", low=1)
    seed = check_int(seed, "seed", low=0)

    rows = []
    for i, (case, bud_a, bud_b, a, b, ga, gb) in enumerate(scheme_pairs(frame, comparisons)):
        base = {**dict(zip(CASE_COLUMNS, case)), "budget": float(bud_a), "budget_b": float(bud_b),
                "scheme_a": a, "scheme_b": b, "n_a": len(ga), "n_b": len(gb)}
        for metric in metrics:
            x, y = ga[metric].to_numpy(np.float64), gb[metric].to_numpy(np.float64)
            extra = {"metric": metric, "mean_a": float(np.mean(x)), "mean_b": float(np.mean(y)),
                     "median_a": float(np.median(x)), "median_b": float(np.median(y))}
            rows.append({**base, **extra, **_mw_row(x, y)})
            if ks:
                rows.append({**base, **extra, **_ks_row(x, y)})
        if energy:
            X = ga[list(PROFILE_METRICS)].to_numpy(np.float64)
            Y = gb[list(PROFILE_METRICS)].to_numpy(np.float64)
            row = _energy_row(X, Y, energy_resamples, seed + i)
            if row is not None:
                rows.append({**base, "mean_a": math.nan, "mean_b": math.nan, "median_a": math.nan,
                             "median_b": math.nan, **row})
    table = pd.DataFrame(rows, columns=_COLUMNS)
    if table.empty:
        for col, value in (("pvalue_adjusted", 1.0), ("significant", False), ("winner", "")):
            table[col] = pd.Series(dtype=type(value))
        return table
    adj = adjust_pvalues(table["pvalue"].to_numpy(), method=correction, alpha=alpha)
    table["pvalue_adjusted"] = np.asarray(adj.pvalues_adjusted, dtype=np.float64)
    table["significant"] = table["pvalue_adjusted"] < alpha
    table["winner"] = [_winner(t, p, r, m, a, b, alpha) for t, p, r, m, a, b in zip(
        table["test"], table["pvalue_adjusted"], table["effect"], table["metric"],
        table["scheme_a"], table["scheme_b"])]
    table.attrs.update(alpha=alpha, correction=correction, energy_resamples=energy_resamples)
    return table


def _winner(test: str, pvalue_adjusted: float, effect: float, metric: str, a: str, b: str,
            alpha: float) -> str:
    """The better scheme of a significant Mann–Whitney row (the metric table's direction)."""
    if test != "mann_whitney":
        return ""
    if not pvalue_adjusted < alpha or effect == 0:
        return NO_DIFFERENCE
    a_larger = effect > 0
    return a if a_larger == HIGHER_IS_BETTER[metric] else b
