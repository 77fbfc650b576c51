"""The report's formatted tables: the scheme table, the comparison table and the theory tables.

Each turns rows of :mod:`kvstats.analysis` (summary, comparisons, theory) into the table a
reader sees, with the heavy-tail mark where a mean's interval is not reliable and the
columns named by :mod:`kvstats.report.wording` (the effect's header under either design).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kvstats.analysis import CASE_COLUMNS, METRICS, TESTABLE_METRICS
from kvstats.analysis.compare import LOCATION_TESTS, NO_DIFFERENCE, NOT_RESOLVABLE
from kvstats.analysis.theory import BOUND_QUANTITIES
from kvstats.metrics.table import METRIC_TABLE
from kvstats.report.notation import _apart, _case_title, _ci, _num, _p
from kvstats.report.wording import (DOMINANCE_HEADER, EQUIVALENCE_NOT_SHOWN, HEAVY_MARK, INCONCLUSIVE, R_HEADER,
                                    U_HEADER, UNDEFINED_EFFECT, _exact, equivalence_verdict_text,
                                    tost_not_shown_resolvable)


#: Where the tests took trials that share clusters (texts) as units, by request (unit =
#: "trial"): what the family's error rate is then, and the mark after each verdict of a test.
NO_GUARANTEE = ("no error-rate guarantee: trial-level tests of clustered data, unit = \"trial\" "
                "by request")
NOT_INDEPENDENT_MARK = "(trials not independent)"


def _no_difference_clause(test: str) -> str:
    """After an "inconclusive" equivalence verdict whose location test (``test``: "sign" or
    "Mann–Whitney") could not have rejected: its "neither a difference" is the design's.

    Examples
    --------
    >>> _no_difference_clause("sign")
    ' (sign test not resolvable: no difference could have been shown)'
    """
    return f" ({test} test not resolvable: no difference could have been shown)"


def _flag(text: str, reliable: bool) -> str:
    """Append the heavy-tail mark to a formatted mean/CI when the CI is not reliable."""
    return text if bool(reliable) else f"{text} {HEAVY_MARK}"


def _scheme_table(summary: pd.DataFrame, unit: str = "trials") -> pd.DataFrame:
    """Wide, formatted table: one row per scheme at one case and budget; ``unit`` names the
    count column (what the means and intervals are over: "trials", or "texts" on cluster means,
    then beside a "trials" column: what the KL p99, max and tail α are over)."""
    rows = []
    for scheme, grp in summary.groupby("scheme", sort=False):
        g = grp.set_index("metric")
        row = {"scheme": scheme, "bits nominal": _num(g["bits_nominal"].iloc[0]),
               "bits total": _num(g["bits_total"].iloc[0])}
        # each pooled SNR beside its mean of per-vector dB (summaries that have it)
        for m in (c for name in METRICS for c in (name, f"{name}_pooled") if c in g.index):
            row[m.replace("_pooled", " pooled")] = _flag(
                _ci(g.loc[m, "mean"], g.loc[m, "ci_low"], g.loc[m, "ci_high"]),
                g.loc[m, "ci_reliable"] if "ci_reliable" in g else True)
        row["kl p99"] = _num(g.loc["kl", "p99"])
        row["kl max"] = _num(g.loc["kl", "max"])
        row["kl tail α (95% upper)"] = _tail(g.loc["kl", "tail_index"]) if "tail_index" in g else "–"
        if "n_clusters" in g:   # cluster means: the tails' trials beside the means' units
            row["trials"] = int(g.loc["kl", "n_trials"])
            row[unit] = int(g.loc["kl", "n_clusters"])
        else:
            row[unit] = int(g.loc["kl", "n_trials"])
        rows.append(row)
    return pd.DataFrame(rows)


#: The tail index below which a mean's interval is not reliable (summary_table's ci_reliable).
_TAIL_LIMIT = 2.0


def _tail(alpha: float) -> str:
    """The KL tail index's 95% upper bound, 3 significant digits or more: as many as keep the
    printed value on its side of :data:`_TAIL_LIMIT` (below it the mean is marked ‡), and
    apart from it unless equal (1.996 is not "2" beside a ‡, 2.004 not "2" beside none).

    Examples
    --------
    >>> _tail(3.14159), _tail(1.996), _tail(2.004), _tail(2.0), _tail(float("nan"))
    ('3.14', '1.996', '2.004', '2', '–')
    """
    digits, text = 3, _num(alpha, 3)
    if alpha is None or not math.isfinite(alpha):
        return text

    def astray(t: str) -> bool:
        shown = float(t)
        return (shown < _TAIL_LIMIT) != (alpha < _TAIL_LIMIT) or (shown == _TAIL_LIMIT != alpha)

    while astray(text) and digits < 17:
        digits += 1
        text = _num(alpha, digits)
    return text


def _p_of_row(row: Any, alpha: float | None = None) -> str:
    """A row's adjusted p (:func:`~kvstats.report.notation._p`), except where its verdict
    ("not resolvable at … (smallest attainable adjusted p …)") prints the same number: then
    as the verdict does, 3 significant digits (more where fewer would read ≤ α), so one
    number reads one way on a row (0.0625, not 0.062 beside it).

    Examples
    --------
    >>> v = "not resolvable at n = 8 pairs (smallest attainable adjusted p 0.0625)"
    >>> row = {"pvalue_adjusted": 0.0625, "min_attainable_p_adjusted": 0.0625, "verdict": v}
    >>> _p_of_row(row, 0.05), _p_of_row({**row, "pvalue_adjusted": 0.5}, 0.05)
    ('0.0625', '0.500')
    """
    x = row["pvalue_adjusted"]
    if not (str(row.get("verdict", "")).startswith(NOT_RESOLVABLE)
            and x == row.get("min_attainable_p_adjusted")):
        return _p(x, alpha)
    digits, text = 3, f"{x:.3g}"   # kvstats.analysis.resolution.not_resolvable_text's digits
    while alpha is not None and float(text) <= alpha < x and digits < 17:
        digits += 1
        text = f"{x:.{digits}g}"
    return text


def _pvalue_cell(row: Any, alpha: float | None = None) -> str:
    """Adjusted p-value (on α's side of it, :func:`_p_of_row`), with the
    permutations a permutation test drew (of its cap), or enumerated where it is exact."""
    text = _p_of_row(row, alpha) if not math.isnan(row["pvalue_adjusted"]) else "–"
    if _exact(row["note"]):
        text += f" (exact, {int(row['n_permutations'])} relabellings)"
    elif row["max_permutations"]:
        text += (f" (B = {int(row['n_permutations'])}/{int(row['max_permutations'])}"
                 + (", at the floor" if _at_floor(row) else "") + ")")
    return text


def _at_floor(row: Any) -> bool:
    """Whether a drawn permutation test's p is 1/(1 + B), its least: no permutation of
    its B (all it may draw) reached the observed statistic."""
    n = row["n_permutations"]
    return (not _exact(row["note"]) and bool(row["max_permutations"]) and n == row["max_permutations"]
            and math.isclose(row["pvalue"] * (n + 1), 1.0, rel_tol=1e-9))


def _floor_line(comp: pd.DataFrame, opts: dict[str, Any], n_tests: int | None = None) -> str:
    """The Summary's line on the drawn permutation tests whose p is at the floor their B
    sets (:func:`_at_floor`): p = 1/(1 + B), the smallest p the test can give. Such a row is
    said to have resolved only where it is ``resolvable`` (its adjusted p, the least the
    family's ``n_tests`` p-values and the correction give at this B, is at most alpha);
    else it is at the floor and not resolvable. Only a larger B lowers the floor.

    Examples
    --------
    >>> row = {"test": "energy", "note": "", "n_permutations": 99, "max_permutations": 99,
    ...        "pvalue": 0.01, "pvalue_adjusted": 0.03, "resolvable": True}
    >>> opts = {"correction": "holm", "alpha": 0.05, "energy_resolution": "fixed", "energy_resamples": 99}
    >>> _floor_line(pd.DataFrame([row, {**row, "pvalue": 0.5}]), opts, 3)[:54]
    '1 of 2 drawn permutation tests at the floor of their p'
    """
    drawn = comp[comp["max_permutations"].fillna(0).astype(bool) & ~comp["note"].map(_exact)] if len(comp) else comp
    floor = drawn[[_at_floor(r) for _, r in drawn.iterrows()]] if len(drawn) else drawn
    if floor.empty:
        return ""
    b = sorted({int(v) for v in floor["n_permutations"]})
    bs, adj = ", ".join(map(str, b)), floor["pvalue_adjusted"]
    ok = floor["resolvable"].eq(True) if "resolvable" in floor else pd.Series(False, index=floor.index)
    family = f" over the family of {n_tests} p-values" if n_tests else ""
    alpha, fixed = opts.get("alpha", 0.05), opts.get("energy_resolution") == "fixed"
    text = (f"{len(floor)} of {len(drawn)} drawn permutation tests at the floor of their p (marked \"at "
            f"the floor\"): no permutation of the B = {bs} drawn reached the observed statistic, so "
            f"p = 1/(1 + B), the smallest p the test can give, and after {opts['correction']}{family} "
            f"p adj = {_p(adj.min())}{'' if adj.min() == adj.max() else f'–{_p(adj.max())}'}")
    parts = []
    if ok.any():
        parts.append(f"{int(ok.sum())} resolved (p adj ≤ α = {alpha:g}): their p-values say the test "
                     "rejected at this B, not how strong the evidence is")
    if not ok.all():
        parts.append(f"{int((~ok).sum())} at the floor and not resolvable: B = {bs} cannot reach "
                     f"α = {alpha:g} in this family, so they could not have rejected; raise "
                     "energy_resamples" + (" or use energy_resolution = \"family\"" if fixed else ""))
    # what sets the floor: B alone; the adjusted floor: B, the family's size and the correction
    how = ("under energy_resolution = \"fixed\", B is energy_resamples" if fixed else
           "under energy_resolution = \"family\", B is the larger of energy_resamples and the B "
           "this family needs to reject")
    return (text + "; " + "; ".join(parts) + f". The floor 1/(1 + B) depends on B alone ({how}): "
            f"only energy_resamples above {b[-1]} lowers it; the adjusted p depends on B, the "
            f"family's size and {opts['correction']}, and a smaller family (fewer metrics or pairs) "
            "lowers it at a given B" + ("" if fixed else ", though its B may then fall and its floor p rise") + ".")


def _pair_label(r: Any) -> str:
    """"a vs b", naming b's budget when it differs from a's (the table's heading is a's)."""
    label = f"{r.scheme_a} vs {r.scheme_b}"
    return label if r.budget_b == r.budget else f"{label} ({r.scheme_b} at n = {r.budget_b:g})"


def _heavy_keys(summary: pd.DataFrame) -> frozenset[tuple]:
    """(case..., budget, scheme, metric) of every summary mean marked heavy-tailed."""
    if "ci_reliable" not in summary or summary.empty:
        return frozenset()
    bad = summary[~summary["ci_reliable"].astype(bool)]
    cols = [*CASE_COLUMNS, "budget", "scheme", "metric"]
    return frozenset(tuple(k) for k in bad[cols].itertuples(index=False))


def _mean_heavy(r: Any, heavy: frozenset[tuple]) -> bool:
    """Whether a mean behind a (ratio-of-means) equivalence row is marked heavy-tailed."""
    case = tuple(getattr(r, c) for c in CASE_COLUMNS)
    return ((*case, r.budget, r.scheme_a, r.metric) in heavy
            or (*case, r.budget_b, r.scheme_b, r.metric) in heavy)


#: Where a paired ratio TOST's "equivalent within δ" rests on its t approximation's tail. A
#: TOST errs at most as often as its binding one-sided test, and that test's error on
#: right-skewed pairs (aᵢ − r·bᵢ of log-normal trials) was measured at up to 2.7 × α [95% CI
#: 2.0, 3.5] at α = 1e-4, n = 100; the TOST's own at up to 1.5 × (n = 1000; docs/statistics.md,
#: "Calibration at small α"). A verdict whose adjusted p exceeds α/4 need not survive that error.
RATIO_NEAR_ALPHA_MARK = "§"
RATIO_NEAR_ALPHA_FACTOR = 4
RATIO_NEAR_ALPHA_NOTE = (
    f"{RATIO_NEAR_ALPHA_MARK} after \"equivalent within δ\" (paired ratio TOST): its adjusted p lies "
    f"between α/{RATIO_NEAR_ALPHA_FACTOR} and α. On right-skewed pairs the t approximation errs "
    "at a family's small α: a one-sided test of the margin rejected up to 2.7 × α (95% CI up to "
    "3.5 ×; n = 100 log-normal pairs), the TOST up to 1.5 × α (n = 1000; docs/statistics.md, "
    "\"Calibration at small α\"), so such a verdict may not hold its nominal error rate; a rank "
    "margin (equivalence_test = \"rank\"), conservative in those measurements, does not rest on it.")


def _ratio_near_alpha(r: Any, alpha: float, paired: bool) -> bool:
    """Whether a paired ratio TOST's "equivalent within δ" has an adjusted p within
    :data:`RATIO_NEAR_ALPHA_FACTOR` of α (:data:`RATIO_NEAR_ALPHA_NOTE`)."""
    return (paired and str(r.verdict).startswith("equivalent")
            and r.pvalue_adjusted * RATIO_NEAR_ALPHA_FACTOR > alpha)


def _comparison_table(comp: pd.DataFrame, heavy: frozenset[tuple] = frozenset(),
                      ratio: bool = True, alpha: float | None = None,
                      dependent: bool = False) -> pd.DataFrame:
    """Formatted pair × metric table (Mann–Whitney beside KS and the equivalence test, or under the
    paired design the sign test beside the equivalence test) plus energy rows;
    ``heavy`` (:func:`_heavy_keys`) marks ratio-of-means (``ratio``) equivalence cells ‡;
    ``alpha`` (default: ``comp.attrs["alpha"]``) keeps each printed p on its side of α;
    ``dependent`` (trials of shared clusters tested as units) marks each verdict of a test
    :data:`NOT_INDEPENDENT_MARK` (not a "not resolvable" one: the design's, not the p-value's)."""
    mark = (lambda v: v if not dependent or str(v).startswith(NOT_RESOLVABLE) else
            f"{v} {NOT_INDEPENDENT_MARK}")
    if alpha is None:
        alpha = comp.attrs.get("alpha")
    rows = []
    key = ["scheme_a", "scheme_b", "metric"]
    paired = bool((comp["test"] == LOCATION_TESTS["trial"]).any())
    stat, p_col = (SIGN_N_HEADER, "p adj (sign)") if paired else (U_HEADER, "p adj (MW)")
    effect_col = DOMINANCE_HEADER if paired else R_HEADER
    mw = comp[comp["test"] == LOCATION_TESTS["trial" if paired else "none"]]
    ks = comp[comp["test"] == "ks"].set_index(key)
    eq = comp[comp["test"] == "equivalence"].set_index(key)
    for r in mw.itertuples(index=False):
        row = {"pair": _pair_label(r), "metric": r.metric,
               "mean a": _num(r.mean_a), "mean b": _num(r.mean_b),
               effect_col: _effect_cell(r),
               stat: _sign_n_cell(r) if paired else f"{r.statistic:.7g}",
               p_col: _p_of_row(r._asdict(), alpha)}
        k = (r.scheme_a, r.scheme_b, r.metric)
        if k in ks.index:
            row["KS D"] = _num(ks.loc[k, "statistic"], 3)
            row["p adj (KS)"] = _pvalue_cell(ks.loc[k], alpha) + (" †" if ks.loc[k, "note"] else "")
            if not ks.loc[k, "resolvable"] and not ks.loc[k, "significant"]:
                row["p adj (KS)"] += " (not resolvable)"
        row["winner"] = r.winner
        if (k in ks.index and not r.significant and bool(ks.loc[k, "significant"])
                and r.verdict == NO_DIFFERENCE):
            # no shift in location, but the distributions differ: say so, not "no difference"
            row["winner"] = "no significant shift (KS: distributions differ)"
        row["winner"] = mark(row["winner"])
        if not eq.empty:
            row["equivalence"] = ""
            if k in eq.index:
                row["equivalence"] = _equivalence_cell(eq.loc[k], alpha)
                if not math.isnan(eq.loc[k, "pvalue"]):
                    row["equivalence"] = mark(row["equivalence"])
                if tost_not_shown_resolvable(eq.loc[k]):
                    row["equivalence"] += f" ({EQUIVALENCE_NOT_SHOWN})"
                if eq.loc[k, "verdict"] == INCONCLUSIVE and not r.resolvable and not r.significant:
                    row["equivalence"] += _no_difference_clause("sign" if paired else "Mann–Whitney")
                if ratio and _mean_heavy(r, heavy) and not math.isnan(eq.loc[k, "pvalue"]):
                    row["equivalence"] += f" {HEAVY_MARK}"
                if ratio and alpha is not None and _ratio_near_alpha(eq.loc[k], alpha, paired):
                    row["equivalence"] += f" {RATIO_NEAR_ALPHA_MARK}"
        rows.append(row)
    for r in comp[comp["test"] == "energy"].itertuples(index=False):
        if paired:   # no KS columns: the energy test's E and p in the location test's
            rows.append({"pair": _pair_label(r), "metric": "6D energy (standardised, paired)",
                         "mean a": "", "mean b": "", effect_col: "", stat: f"E = {_num(r.statistic, 3)}",
                         p_col: "p adj = " + _pvalue_cell(r._asdict(), alpha), "winner": mark(r.verdict),
                         **({"equivalence": ""} if not eq.empty else {})})
            continue
        rows.append({"pair": _pair_label(r), "metric": "6D energy (standardised)",
                     "mean a": "", "mean b": "", R_HEADER: "", U_HEADER: "",
                     "p adj (MW)": "", "KS D": f"E = {_num(r.statistic, 3)}",
                     "p adj (KS)": "p adj = " + _pvalue_cell(r._asdict(), alpha), "winner": mark(r.verdict),
                     **({"equivalence": ""} if not eq.empty else {})})
    return pd.DataFrame(rows)


#: Column header of the sign test's statistic: n(a > b) of the k pairs that differ, the n the
#: test has (a pair with equal values tells neither way), beside the unadjusted dominance.
SIGN_N_HEADER = "n(a > b) of k (pairs that differ)"


def _sign_n_cell(r: Any) -> str:
    """A sign row's n(a > b) "of" its informative pairs, k = n(a > b) + n(a < b).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> _sign_n_cell(SimpleNamespace(statistic=1.0, n_informative=15))
    '1 of 15'
    """
    k = getattr(r, "n_informative", math.nan)
    return f"{r.statistic:.7g}" + ("" if k is None or math.isnan(k) else f" of {k:.7g}")


def _effect_cell(r: Any) -> str:
    """The effect and its interval; a sign row without a differing unit has none (0/0)."""
    if r.test == LOCATION_TESTS["trial"] and getattr(r, "n_informative", math.nan) == 0:
        return UNDEFINED_EFFECT
    return f"{r.effect:+.3f} [{r.effect_low:+.3f}, {r.effect_high:+.3f}]"


def _equivalence_cell(e: pd.Series, alpha: float | None = None) -> str:
    """Verdict, estimate and (1 − 2α) interval of an equivalence row."""
    if math.isnan(e["pvalue"]):
        return e["verdict"]
    low, high, m_low, m_high = _interval_and_region(e)
    verdict = equivalence_verdict_text(e["verdict"], bool(e.get("identical_pairs", False)), int(e["n_a"]))
    return (f"{verdict}: {_num(e['effect'])} [{low}, {high}] in [{m_low}, {m_high}]? p adj "
            f"{_p(e['pvalue_adjusted'], alpha)}")


def _interval_and_region(e: Any) -> tuple[str, str, str, str]:
    """An equivalence row's interval ends and margins, written with the digits that keep an
    end apart from a margin it does not equal (an end printed equal to its margin would hide
    on which side of it the interval lies)."""
    low, high, m_low, m_high = (float(e[c]) for c in ("effect_low", "effect_high",
                                                      "margin_low", "margin_high"))
    d = max(_apart(low, m_low), _apart(high, m_high))
    return _num(low, d), _num(high, d), _num(m_low, d), _num(m_high, d)


def _bound_fmt(bounds: pd.DataFrame, digits: int | None = None) -> pd.DataFrame:
    """The bound rows of the theory table: one line per case, n, place and scheme."""
    rows = []
    for r in bounds.itertuples(index=False):
        rows.append({"case": _case_title(r._asdict(), digits), "n": f"{r.budget:g}",
                     "place": "K" if r.quantity == BOUND_QUANTITIES["k"] else "V", "scheme": r.scheme,
                     "bits/coord (total)": _num(r.rate), "limit SNR (dB)": f"{r.predicted:.2f}",
                     "pooled SNR (dB) [95% CI]": _flag(_db(r.measured, r.ci_low, r.ci_high),
                                                      getattr(r, "ci_reliable", True)),
                     # the gap's interval resamples the same means: as unreliable as theirs
                     "gap (dB) [95% CI]": _flag(_db(r.gap_db, r.gap_low, r.gap_high),
                                                getattr(r, "ci_reliable", True))})
    return pd.DataFrame(rows)


def _db(x: float, low: float, high: float) -> str:
    """A value in dB with its interval; an interval of one point (every trial alike) is left
    out, as :func:`kvstats.report.notation._ci` does."""
    return f"{x:.2f}" if x == low == high else f"{x:.2f} [{low:.2f}, {high:.2f}]"


def _theory_fmt(theory: pd.DataFrame, digits: int | None = None) -> pd.DataFrame:
    rows = []
    for r in theory.itertuples(index=False):
        rows.append({"case": _case_title(r._asdict(), digits), "n": f"{r.budget:g}", "quantity": r.quantity,
                     "scheme": r.scheme, "predicted": _num(r.predicted),
                     "asymptotic": _num(r.predicted_asymptotic),
                     "measured [95% CI]": _flag(_ci(r.measured, r.ci_low, r.ci_high),
                                                getattr(r, "ci_reliable", True)),
                     "measured vs predicted [95% CI]": _flag(_versus(r), getattr(r, "ci_reliable", True))})
    return pd.DataFrame(rows)


def _versus(r: Any) -> str:
    """Measured against predicted with the measured interval carried over (the prediction is
    exact): a difference in dB for ``k_snr_db``, a ratio otherwise.

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> _versus(R(quantity="k_snr_db", measured=9.395, ci_low=9.388, ci_high=9.403, predicted=9.355))
    '+0.040 [+0.033, +0.048] dB'
    >>> _versus(R(quantity="ip_var_ratio_residual", measured=1.58, ci_low=1.5, ci_high=1.66,
    ...           predicted=1.563))
    '1.011 [0.9597, 1.062]'
    """
    if r.quantity == "k_snr_db":
        m, lo, hi = (v - r.predicted for v in (r.measured, r.ci_low, r.ci_high))
        return (f"{m:+.3f} dB" if r.measured == r.ci_low == r.ci_high
                else f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}] dB")
    return _ci(r.measured / r.predicted, r.ci_low / r.predicted, r.ci_high / r.predicted)


#: After a pooled SNR's definition: why it is tested beside the mean of per-vector dB.
POOLED_REMARK = ("; tested beside the mean of per-vector dB (snr_k, snr_v), shown in the scheme "
                 "tables as \"snr_k pooled\", \"snr_v pooled\": a scheme that keeps some vectors nearly exact (a "
                 "full-precision window) lifts the mean of per-vector dB far above it; results "
                 "without the pooled columns have none")

#: The scheme table's other columns, defined beside the metrics.
COLUMN_DEFINITIONS: dict[str, tuple[str, str]] = {
    "bits nominal": ("bits per coordinate", "n, the code bits per coded coordinate the scheme "
                     "stores (a Hadamard rotation codes d rounded up to a power of two), mean of "
                     "the key and value sides: the budget at default settings; non-default "
                     "sketch rows m or an outlier sketch move it"),
    "bits total": ("bits per coordinate", "every stored bit per coordinate: the codes plus "
                   "norms, scales, zero-points, outlier indices and padding, mean of the key "
                   "and value sides"),
    "kl p99, kl max": ("nats", "99th percentile and maximum of the trials' KL (of every "
                       "trial, also where the means are over clusters: the \"trials\" column)"),
    # no ‡ here: the mark appears only where a mean carries it
    "kl tail α (95% upper)": ("", "one-sided 95% upper confidence bound of Hill's tail index "
                              "of the trials' KL (of every trial, also where the means are over "
                              "clusters; below 2: a heavy right tail, marked)"),
}


def metrics_table() -> pd.DataFrame:
    """The report's "Metrics and units" table: one row per tested metric (the reported ones,
    then the pooled SNRs; label, unit, direction and definition from the metric table), then
    the bits and KL-tail columns of the scheme tables (:data:`COLUMN_DEFINITIONS`).

    Examples
    --------
    >>> t = metrics_table().set_index("column")
    >>> t.loc["kl", ["label", "unit", "better"]].tolist(), t.loc["phi_k", "unit"]
    (['KL', 'nats', 'lower'], 'rad')
    """
    rows = []
    for name in TESTABLE_METRICS:
        m = METRIC_TABLE[name]
        rows.append({"column": name, "label": m.label, "unit": m.unit,
                     "better": {True: "higher", False: "lower"}.get(m.higher_is_better, "–"),
                     "definition": m.definition + POOLED_REMARK * (name not in METRICS)})
    for name, (unit, text) in COLUMN_DEFINITIONS.items():
        rows.append({"column": name, "label": "", "unit": unit, "better": "–", "definition": text})
    return pd.DataFrame(rows)
