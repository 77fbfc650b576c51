"""The report's content: formatted tables and the document's sections and wording.

:func:`kvstats.report.render.hypothesis_report` computes the tables and writes the
files; this module turns the tables into the :class:`~kvstats.report.document.Document`
a reader sees: number formats, the scheme and comparison tables, the header's statement
of the tests, their resolution and the sign of r, the equivalence and trial-level
sections. The report's one sign convention for r (:data:`R_CONVENTION`) is stated here.
(Over 450 lines: every sentence the report prints about its tests lives here, for both
designs, so that the wording and the tables cannot drift apart.)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from kvstats.analysis import CASE_COLUMNS, METRICS
from kvstats.analysis.compare import LOCATION_TESTS, NO_DIFFERENCE, NOT_RESOLVABLE
from kvstats.analysis.frame import label_digits, short_params
from kvstats.analysis.theory import BOUND_QUANTITIES, ratio_pairs, theory_schemes
from kvstats.metrics.table import METRIC_TABLE
from kvstats.report.document import Document
from kvstats.results import REAL, SweepResult

__all__ = ["BOUND_NOTE", "HEAVY_MARK", "HEAVY_NOTE", "R_HEADER", "R_CONVENTION", "R_CONVENTION_PAIRED",
           "DOMINANCE_HEADER", "heavy_note", "COLUMN_DEFINITIONS",
           "metrics_table", "EQUIVALENCE_REGIONS",
           "PAIRED_DESIGN", "UNPAIRED_DESIGN", "build_document"]

# ---------------------------------------------------------------------- formatting
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


#: Mark after a mean whose bootstrap CI is not reliable (heavy right tail); † is the KS-ties mark.
HEAVY_MARK = "‡"
HEAVY_NOTE = (f"{HEAVY_MARK} heavy right tail (the one-sided 95% upper confidence bound of Hill's "
              "tail index α of the values is below 2): under a Pareto-type tail the data reject a "
              "finite variance at the 5% level, and the bootstrap CI of the mean is not reliable. "
              "A bounded metric (φ ≤ π; recall@5 "
              "and argmax shift ≤ 1) has a finite variance: its mark says that at this n its "
              "largest values spread like such a tail, so the bootstrap CI of its mean may still "
              "undercover. The \"kl tail α\" column is that bound for KL; every metric's is the "
              "tail_index column of tables/summary.csv.")


def heavy_note(opts: dict[str, Any] | None = None) -> str:
    """:data:`HEAVY_NOTE` and what to read instead of a marked mean: the median, p99, max and
    the report's own location test (``opts["pairing"]``: the sign test or Mann–Whitney).

    Examples
    --------
    >>> heavy_note({"pairing": "trial"}).split(". ")[-1]
    'Where a mean is marked, read the median, p99 and max (...) and the sign test, which ...'
    """
    name = _location_name(opts or {})
    how = "the signs of the paired differences" if name == "sign" else "ranks"
    return (f"{HEAVY_NOTE} Where a mean is marked, read the median, p99 and max "
            f"(tables/summary.csv) and the {name} test, which uses only {how}, no moments.")


def _flag(text: str, reliable: bool) -> str:
    """Append the heavy-tail mark to a formatted mean/CI when the CI is not reliable."""
    return text if bool(reliable) else f"{text} {HEAVY_MARK}"


def _case_title(case: dict[str, Any], digits: int | None = None) -> str:
    """The case as a title; ``digits``: its params' numbers to that many significant digits
    (:func:`kvstats.analysis.frame.short_params`; None: exact, as the slugs of file names use)."""
    text = case["params"] if digits is None else short_params(case["params"], digits)
    params = "" if case["params"] in ("-", "") else f" ({text})"
    return f"{case['distribution']}{params}, d = {case['dim']}, N = {case['n_keys']}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


# ---------------------------------------------------------------------- the report
def _scheme_table(summary: pd.DataFrame, unit: str = "trials") -> pd.DataFrame:
    """Wide, formatted table: one row per scheme at one case and budget; ``unit`` names the
    count column (what the means and intervals are over: "trials", or "texts" on cluster means)."""
    rows = []
    for scheme, grp in summary.groupby("scheme", sort=False):
        g = grp.set_index("metric")
        row = {"scheme": scheme, "bits nominal": _num(g["bits_nominal"].iloc[0]),
               "bits total": _num(g["bits_total"].iloc[0])}
        for m in METRICS:
            row[m] = _flag(_ci(g.loc[m, "mean"], g.loc[m, "ci_low"], g.loc[m, "ci_high"]),
                           g.loc[m, "ci_reliable"] if "ci_reliable" in g else True)
        row["kl p99"] = _num(g.loc["kl", "p99"])
        row["kl max"] = _num(g.loc["kl", "max"])
        row["kl tail α (95% upper)"] = _num(g.loc["kl", "tail_index"], 3) if "tail_index" in g else "–"
        row[unit] = int(g.loc["kl", "n_trials"])
        rows.append(row)
    return pd.DataFrame(rows)


def _heavy_summary(summary: pd.DataFrame, theory: pd.DataFrame) -> str:
    """One sentence counting the flagged (heavy-tailed) rows of each table the report prints:
    the summary means by metric, then the theory and the rate–distortion tables apart."""
    bad = summary[~summary["ci_reliable"].astype(bool)] if "ci_reliable" in summary else summary[:0]
    text = (f"no summary mean is marked {HEAVY_MARK}" if bad.empty else
            f"{len(bad)} of {len(summary)} summary means are marked {HEAVY_MARK} ("
            + ", ".join(f"{m}: {c}" for m, c in bad.groupby("metric", sort=False).size().items())
            + ")")
    is_bound = theory["quantity"].isin(list(BOUND_QUANTITIES.values())) if "quantity" in theory \
        else pd.Series(False, index=theory.index)
    tables = []
    for part, name in ((theory[~is_bound], "\"Theory beside measurement\""),
                       (theory[is_bound], "\"Distance to the rate–distortion limit\"")):
        if len(part):
            n = int((~part["ci_reliable"].astype(bool)).sum()) if "ci_reliable" in part else 0
            tables.append(f"{n} of {len(part)} rows of {name}")
    return text + ("; " + ", ".join(tables) if tables else "") + "."


# ---------------------------------------------------------------------- metrics and units
#: The scheme table's other columns, defined beside the metrics.
COLUMN_DEFINITIONS: dict[str, tuple[str, str]] = {
    "bits nominal": ("bits per coordinate", "n, the code bits per coordinate the scheme is "
                     "named for (the budget), mean of the key and value sides"),
    "bits total": ("bits per coordinate", "every stored bit per coordinate: the codes plus "
                   "norms, scales, zero-points, outlier indices and padding, mean of the key "
                   "and value sides"),
    "kl p99, kl max": ("nats", "99th percentile and maximum of the trials' KL"),
    # no ‡ here: the mark appears only where a mean carries it
    "kl tail α (95% upper)": ("", "one-sided 95% upper confidence bound of Hill's tail index "
                              "of the trials' KL (below 2: a heavy right tail, marked)"),
}


def metrics_table() -> pd.DataFrame:
    """The report's "Metrics and units" table: one row per reported metric (label, unit,
    direction and definition from the metric table), then
    the bits and KL-tail columns of the scheme tables (:data:`COLUMN_DEFINITIONS`).

    Examples
    --------
    >>> t = metrics_table().set_index("column")
    >>> t.loc["kl", ["label", "unit", "better"]].tolist(), t.loc["phi_k", "unit"]
    (['KL', 'nats', 'lower'], 'rad')
    """
    rows = []
    for name in METRICS:
        m = METRIC_TABLE[name]
        rows.append({"column": name, "label": m.label, "unit": m.unit,
                     "better": {True: "higher", False: "lower"}.get(m.higher_is_better, "–"),
                     "definition": m.definition})
    for name, (unit, text) in COLUMN_DEFINITIONS.items():
        rows.append({"column": name, "label": "", "unit": unit, "better": "–", "definition": text})
    return pd.DataFrame(rows)


def _budget_text(summary: pd.DataFrame, unit: str = "trials") -> str:
    """What the tables average over and what "equal budget" means, with the totals of one
    case and budget of this sweep (read from the summary, never assumed)."""
    each = "" if unit == "trials" else " (each the mean of its trials)"
    text = (f"Each metric is one value per trial (averaged over its vectors or queries); a "
            f"table's mean and interval are over the {unit}{each}. **Equal budget** means the "
            "same nominal n (code bits per coordinate); the total stored bits per coordinate, "
            "with norms and scales (the \"bits total\" column), can differ between schemes")
    need = {"bits_nominal", "bits_total", "budget", "scheme", *CASE_COLUMNS}
    if summary.empty or not need <= set(summary.columns):
        return text + "."
    cells = summary.drop_duplicates([*CASE_COLUMNS, "budget", "scheme"])
    cells = cells[cells["bits_nominal"] == cells["budget"]]     # the schemes at the budget n
    for key, g in cells.groupby([*CASE_COLUMNS, "budget"], sort=False):
        if g["scheme"].nunique() < 2:
            continue
        case = dict(zip([*CASE_COLUMNS, "budget"], key))
        totals = ", ".join(f"{r.scheme} {r.bits_total:.6g}" for r in g.itertuples(index=False))
        same = " (here equal)" if g["bits_total"].nunique() == 1 else ""
        return (text + f": e.g. n = {case['budget']:g} ({case['distribution']}, d = "
                f"{case['dim']}, N = {case['n_keys']}): {totals} bits per coordinate{same}.")
    return text + "."


#: Column header of the rank-biserial r: the report's one sign convention (tables and figures).
R_HEADER = "r [95% CI] (> 0: a larger)"
#: What r's sign means, said once in the report's header and the figures' captions.
R_CONVENTION = ("r is the rank-biserial correlation of scheme a (the pair's first) against b: "
                "**r > 0 when a's values tend to be larger**, in every table and figure (for φ, "
                "KL and argmax shift, where lower is better, r > 0 means a is worse). Its 95% CI is "
                "Newcombe's (2006, method 5) score interval for θ = P(a > b) + ½P(a = b), mapped "
                "to r = 2θ − 1, and is not adjusted for the family: an interval that excludes 0 "
                "need not be significant after the correction.")


#: Column header of the paired design's effect (the sign test's dominance), in place of :data:`R_HEADER`.
DOMINANCE_HEADER = "dominance [95% CI] (> 0: a larger)"
#: What the effect is under the paired design (the sign-test rows), in place of :data:`R_CONVENTION`.
R_CONVENTION_PAIRED = (
    "The effect is the sign test's dominance of scheme a (the pair's first) over b on the same "
    "unit: P(a > b) − P(a < b) over the units where they differ, (n+ − n−)/(n+ + n−) with n± "
    "the units where a's value is larger / smaller, units with equal values left out as the "
    "sign test leaves them out; the paired analogue of Mann–Whitney's r. **Dominance > 0 when "
    "a's values tend to be larger**, in every table and figure (for φ, KL and argmax shift, "
    "where lower is better, > 0 means a is worse). Its 95% CI is the Wilson score interval of "
    "P(a > b | they differ), mapped by 2θ − 1, and is not adjusted for the family: an interval "
    "that excludes 0 need not be significant after the correction. The sign test and not the "
    "Wilcoxon signed-rank test: the signed-rank test weights each unit by the rank of |a − b|, "
    "so a few units with very large differences (one scheme's rare catastrophes) can set its "
    "direction against the majority of units (docs/statistics.md, \"The paired design\").")


#: The count of nonzero paired differences in a sign-test row's note (analysis.compare._sign_row).
_NONZERO = re.compile(r"(\d+) nonzero of (\d+) paired differences")


def _pvalue_cell(row: Any) -> str:
    """Adjusted p-value, with the permutations drawn for a permutation test."""
    text = _p(row["pvalue_adjusted"]) if not math.isnan(row["pvalue_adjusted"]) else "–"
    if row["max_permutations"]:
        text += f" (B = {int(row['n_permutations'])}/{int(row['max_permutations'])})"
    return text


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


#: After a ratio-of-means equivalence verdict whose means are marked ‡.
EQUIVALENCE_HEAVY_NOTE = (f"{HEAVY_MARK} after an equivalence verdict: a mean behind it is marked "
                          f"{HEAVY_MARK} (heavy tail), so the t-based TOST of the ratio of means is "
                          "not reliable there; a rank margin (equivalence_test = \"rank\") needs "
                          "no moments.")


def _comparison_table(comp: pd.DataFrame, heavy: frozenset[tuple] = frozenset(),
                      ratio: bool = True) -> pd.DataFrame:
    """Formatted pair × metric table (Mann–Whitney beside KS and the equivalence test, or under the
    paired design the sign test beside the equivalence test) plus energy rows;
    ``heavy`` (:func:`_heavy_keys`) marks ratio-of-means (``ratio``) equivalence cells ‡."""
    rows = []
    key = ["scheme_a", "scheme_b", "metric"]
    paired = bool((comp["test"] == LOCATION_TESTS["trial"]).any())
    stat, p_col = ("n(a > b)", "p adj (sign)") if paired else ("U", "p adj (MW)")
    effect_col = DOMINANCE_HEADER if paired else R_HEADER
    mw = comp[comp["test"] == LOCATION_TESTS["trial" if paired else "none"]]
    ks = comp[comp["test"] == "ks"].set_index(key)
    eq = comp[comp["test"] == "equivalence"].set_index(key)
    for r in mw.itertuples(index=False):
        row = {"pair": _pair_label(r), "metric": r.metric,
               "mean a": _num(r.mean_a), "mean b": _num(r.mean_b),
               effect_col: f"{r.effect:+.3f} [{r.effect_low:+.3f}, {r.effect_high:+.3f}]",
               stat: f"{r.statistic:.7g}", p_col: _p(r.pvalue_adjusted)}
        k = (r.scheme_a, r.scheme_b, r.metric)
        if k in ks.index:
            row["KS D"] = _num(ks.loc[k, "statistic"], 3)
            row["p adj (KS)"] = _pvalue_cell(ks.loc[k]) + (" †" if ks.loc[k, "note"] else "")
            if not ks.loc[k, "resolvable"] and not ks.loc[k, "significant"]:
                row["p adj (KS)"] += " (not resolvable)"
        row["winner"] = r.winner
        if paired and str(r.winner).startswith(NOT_RESOLVABLE):
            # what limits a sign test is the pairs that differ, not the pairs: say how many
            m = _NONZERO.search(str(r.note))
            if m:
                row["winner"] += ": " + _differ_text(int(m[1]), int(m[2]))
        if (k in ks.index and not r.significant and bool(ks.loc[k, "significant"])
                and r.verdict == NO_DIFFERENCE):
            # no shift in location, but the distributions differ: say so, not "no difference"
            row["winner"] = "no significant shift (KS: distributions differ)"
        if not eq.empty:
            row["equivalence"] = ""
            if k in eq.index:
                row["equivalence"] = _equivalence_cell(eq.loc[k])
                if ratio and _mean_heavy(r, heavy) and not math.isnan(eq.loc[k, "pvalue"]):
                    row["equivalence"] += f" {HEAVY_MARK}"
        rows.append(row)
    for r in comp[comp["test"] == "energy"].itertuples(index=False):
        if paired:   # no KS columns: the energy test's E and p in the location test's
            rows.append({"pair": _pair_label(r), "metric": "6D energy (standardised, paired)",
                         "mean a": "", "mean b": "", effect_col: "", stat: f"E = {_num(r.statistic, 3)}",
                         p_col: "p adj = " + _pvalue_cell(r._asdict()), "winner": r.verdict,
                         **({"equivalence": ""} if not eq.empty else {})})
            continue
        rows.append({"pair": _pair_label(r), "metric": "6D energy (standardised)",
                     "mean a": "", "mean b": "", R_HEADER: "", "U": "",
                     "p adj (MW)": "", "KS D": f"E = {_num(r.statistic, 3)}",
                     "p adj (KS)": "p adj = " + _pvalue_cell(r._asdict()), "winner": r.verdict,
                     **({"equivalence": ""} if not eq.empty else {})})
    return pd.DataFrame(rows)


def _differ_text(k: int, n: int) -> str:
    """How many of an unresolvable sign-test row's ``n`` pairs differ (``k``), in words.

    Examples
    --------
    >>> [_differ_text(k, n) for k, n in ((3, 40), (1, 40), (0, 40), (5, 5), (1, 1))]
    ['only 3 of the 40 pairs differ', 'only 1 of the 40 pairs differs', 'none of the 40 pairs differs', 'all 5 pairs differ: the limit is the number of pairs, 5, itself', 'the 1 pair differs: the limit is the number of pairs, 1, itself']
    """
    if k >= n:
        return (f"{'the 1 pair differs' if n == 1 else f'all {n} pairs differ'}: the limit is "
                f"the number of pairs, {n}, itself")
    if k == 0:
        return f"none of the {n} pairs differs"
    return f"only {k} of the {n} pairs {'differs' if k == 1 else 'differ'}"


#: The equivalence section's tested region and test, by (equivalence_test, pairing)
#: (:func:`kvstats.stats.tost_ratio` / :func:`kvstats.stats.tost_rank`, ``paired``).
EQUIVALENCE_REGIONS: dict[tuple[str, str], str] = {
    ("ratio", "none"): "the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (Fieller-type TOST)",
    ("ratio", "trial"): ("the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (paired "
                         "Fieller-type TOST: t-tests of aᵢ − r·bᵢ over the pairs at each margin r)"),
    ("rank", "none"): "θ = P(a > b) + ½P(a = b) within 0.5 ± δ (Brunner–Munzel TOST)",
    ("rank", "trial"): ("θ = P(a > b) + ½P(a = b) within 0.5 ± δ, θ over all values of a and "
                        "b, not within pairs (paired rank TOST: the variance of the pairs' "
                        "differenced placements, df n − 1, Munzel 1999)"),
}


def _no_pair_text(comparisons: Sequence[tuple[str, str]] | None, summary: pd.DataFrame) -> str:
    """Why a report holds no test: no pair asked for, or none of the pairs present."""
    labels = ", ".join(dict.fromkeys(summary["scheme"])) if "scheme" in summary else "none"
    if comparisons is not None and len(comparisons) == 0:
        return (f"No comparison was asked for (comparisons = []), so no test and no "
                f"crossover; this sweep's scheme labels: {labels}.")
    asked = "" if comparisons is None else " (" + ", ".join(f"{a} vs {b}" for a, b in comparisons) + ")"
    return (f"No comparison pair was present: none of the pairs asked for{asked} names two "
            f"schemes of one case of this sweep, so no test and no crossover. The sweep's "
            f"scheme labels: {labels}; pass pairs of them (hypothesis_report(comparisons=...) "
            "or the config's comparisons).")


def _equivalence_cell(e: pd.Series) -> str:
    """Verdict, estimate and (1 − 2α) interval of an equivalence row."""
    if math.isnan(e["pvalue"]):
        return e["verdict"]
    return (f"{e['verdict']}: {_num(e['effect'])} [{_num(e['effect_low'])}, {_num(e['effect_high'])}]"
            f" in [{_num(e['margin_low'])}, {_num(e['margin_high'])}]? p adj {_p(e['pvalue_adjusted'])}")


def _bound_fmt(bounds: pd.DataFrame, digits: int | None = None) -> pd.DataFrame:
    """The bound rows of the theory table: one line per case, n, place and scheme."""
    rows = []
    for r in bounds.itertuples(index=False):
        rows.append({"case": _case_title(r._asdict(), digits), "n": f"{r.budget:g}",
                     "place": "K" if r.quantity == BOUND_QUANTITIES["k"] else "V", "scheme": r.scheme,
                     "bits/coord (total)": _num(r.rate), "limit SNR (dB)": f"{r.predicted:.2f}",
                     "pooled SNR (dB) [95% CI]": _flag(f"{r.measured:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]",
                                                      getattr(r, "ci_reliable", True)),
                     "gap (dB) [95% CI]": f"{r.gap_db:.2f} [{r.gap_low:.2f}, {r.gap_high:.2f}]"})
    return pd.DataFrame(rows)


#: What the bound table says, once, above it.
BOUND_NOTE = (
    "How far each scheme is from the best any code could do. *limit*: Shannon's "
    "distortion–rate bound on the energy-pooled SNR, 10·log10(Σ‖x‖²/Σ‖x − x̂‖²), at the "
    "scheme's total stored bits per coordinate of that side (codes, norms, scales: the "
    "\"bits/coord\" column), for a Gaussian source with the case's covariance: 6.02 dB "
    "per bit for white keys, reverse water-filling over the covariance eigenvalues "
    "otherwise (low-rank keys: far higher, and for noiseless rank-r keys finite but "
    "astronomical, 2·d·R/r·3.01 dB with all d·R bits on r axes, e.g. 3082.5 dB at rank 1, "
    "d = 128, R = 4: shown as computed, meaning no rate limit in practice; real caches: "
    "the covariance measured per "
    "(layer, KV head) on all captured texts, each trial held to its own). *gap*: limit − "
    "measured pooled SNR, mean over trials (over texts for real caches) with a 95% BCa "
    "bootstrap CI. A scalar quantizer after a rotation stays a few dB below the limit on "
    "Gaussian data (the Lloyd–Max gap: 2.7 dB at 2 bits, rising towards 10·log10(π√3/2) "
    "= 4.35 dB), plus 6.02 dB per bit of overhead; a gap far larger says the scheme "
    "leaves the source's structure (low rank, outlier channels) unused. On non-Gaussian "
    "data the limit is that of the Gaussian of equal covariance, the hardest such "
    "source: a negative gap is possible there. No row where the covariance does not "
    "exist (Student-t with ν ≤ 2) or the reconstruction is exact. See "
    "kvstats.analysis.theory_table and docs/theory.md.")


def _theory_fmt(theory: pd.DataFrame, digits: int | None = None) -> pd.DataFrame:
    rows = []
    for r in theory.itertuples(index=False):
        rows.append({"case": _case_title(r._asdict(), digits), "n": f"{r.budget:g}", "quantity": r.quantity,
                     "scheme": r.scheme, "predicted": _num(r.predicted),
                     "asymptotic": _num(r.predicted_asymptotic),
                     "measured [95% CI]": _flag(_ci(r.measured, r.ci_low, r.ci_high),
                                                getattr(r, "ci_reliable", True)),
                     "measured / predicted": _num(r.measured / r.predicted)
                     if r.quantity != "k_snr_db" else f"{r.measured - r.predicted:+.2f} dB"})
    return pd.DataFrame(rows)


def _pairs_text(pairs: Sequence[tuple[str, str]], template: str) -> str:
    """The (mse, prod) scheme pairs of the variance ratios, each through ``template``."""
    if not pairs:
        return template.format(p="a scheme with a 1-bit QJL key residual", m="its MSE-only peer")
    return ", ".join(template.format(m=m, p=p) for m, p in pairs)



def _resolution(comp: pd.DataFrame) -> dict[str, Any]:
    """The family's size and what its tests could resolve (the report header and JSON)."""
    from kvstats.stats.sequential import required_resolution

    n = int(comp.attrs.get("n_tests", 0))
    out: dict[str, Any] = {"n_tests": n, "energy_max_permutations": comp.attrs.get("energy_max_permutations", 0),
                           "not_resolvable": int((~comp["resolvable"] & ~comp["significant"]).sum())
                           if not comp.empty else 0}
    if n:
        need = required_resolution(n, comp.attrs["alpha"], comp.attrs["correction"])
        out.update(p_needed=need.p_needed, family_permutations=need.n_permutations)
    return out



#: The header's statement of the paired design and why it has no KS test.
PAIRED_DESIGN = ("Design: **paired** (pairing = \"trial\"): each scheme's rows are matched "
                 "one-to-one with the other scheme's on the unit (the same trial; the same text "
                 "where the unit is the cluster), and every test uses the matching. No KS test: "
                 "the two-sample KS test has no valid null for paired samples (its permutations "
                 "exchange values between pairs, which the design does not allow); the 6D energy "
                 "test with within-pair swaps tests the whole distribution instead. ")
#: The header's statement of the unpaired design.
UNPAIRED_DESIGN = ("Design: two independent samples per pair (pairing = \"none\"; the paired "
                   "design is pairing = \"trial\"). ")


def _scope_text(synthetic: bool, real: bool) -> str:
    """The header's statement of the population the tests speak about (their limits)."""
    parts = []
    if synthetic:
        parts.append("a synthetic case's, to further trials of its generator at its parameters, "
                     "d and N (new data and new draws of the schemes' randomness)")
    if real:
        parts.append("a real case's, at most to texts drawn like its texts, in the one captured "
                     "model at the captured layers")
    return ("Scope: a test generalises only to the population its units sample: "
            + "; ".join(parts) + ". A winner, crossover or equivalence verdict here is not evidence "
            "about other distributions, dimensions, models or downstream accuracy.")


def _location_name(opts: dict[str, Any]) -> str:
    """The location test of the report's design, as the text names it."""
    return "sign" if opts.get("pairing", "none") == "trial" else "Mann–Whitney"


def _tests_text(comp: pd.DataFrame, opts: dict[str, Any]) -> str:
    res = _resolution(comp)
    n = res["n_tests"]
    if comp.empty:
        return ("Tests: none, since no comparison pair was present (\"Crossovers of the winner "
                f"across budgets\" says which labels the sweep has). Means with "
                f"{_pct(opts['confidence'])} bootstrap CIs (BCa, {opts['bootstrap_resamples']} "
                "resamples).")
    energy = comp[comp["test"] == "energy"]
    paired = opts.get("pairing", "none") == "trial"
    eq = (", a TOST per metric with an equivalence margin" + (" (paired)" if paired else "")
          if (comp["test"] == "equivalence").any() else "")
    tests = ("the sign test per metric on the paired differences (exact binomial, equal "
             "values dropped), a standardised 6D energy permutation test per pair with labels "
             "swapped within pairs" if paired else
             "Mann–Whitney and KS per metric, a standardised 6D energy permutation test per pair")
    text = (f"Tests: {n} p-values ({tests}{eq}), adjusted together by **{opts['correction']}** "
            f"at α = {opts['alpha']}. " + (PAIRED_DESIGN if paired else UNPAIRED_DESIGN))
    if n:
        # three significant digits: _p's "0.003" would misstate a threshold of 0.00263
        text += (f"A test that can reach p ≤ {res['p_needed']:.3g} can be rejected whatever the "
                 "rest of the family shows (the correction's first step; a permutation test: B ≥ "
                 f"{res['family_permutations']} permutations); one that cannot may still be "
                 "rejected when enough others are. ")
    if not energy.empty:
        b_max = int(energy["max_permutations"].max())
        used = energy["n_permutations"]
        early = int((used < energy["max_permutations"]).sum())
        text += (f"Energy tests: Besag–Clifford sequential p-values, at most B = {b_max} "
                 f"permutations ({'the family' if opts['energy_resolution'] == 'family' else 'fixed'}"
                 f" resolution), each stopping after {opts['energy_stop']} exceedances: {early} of "
                 f"{len(energy)} stopped early (median {int(used.median())} permutations). ")
    text += (f"{res['not_resolvable']} test(s) could not have rejected even on the most extreme "
             "data, the rest of the family as observed (\"not resolvable\"). "
             f"Means with {_pct(opts['confidence'])} bootstrap CIs (BCa, "
             f"{opts['bootstrap_resamples']} resamples).")
    return text


def _equivalence_section(doc: Document, comp: pd.DataFrame, opts: dict[str, Any],
                         digits: int | None = None, heavy: frozenset[tuple] = frozenset()) -> None:
    eq = comp[comp["test"] == "equivalence"]
    if eq.empty:
        return
    doc.h(2, "Equivalence within declared margins")
    how = EQUIVALENCE_REGIONS[opts["equivalence_test"], opts.get("pairing", "none")]
    margins = ", ".join(f"{m}: δ = {d:g}" for m, d in opts["equivalence"].items())
    doc.p(f"Margins ({margins}); the tested region is {how}. \"equivalent within δ\": the TOST "
          f"rejects after the family's adjustment; \"different\": it does not but the {_location_name(opts)} "
          "test does; \"inconclusive\": neither — the data show neither a difference nor "
          f"equivalence. Intervals are the unadjusted {_pct(1 - 2 * opts['alpha'])} intervals of the "
          "estimate; the verdict uses the adjusted p-values.")
    counts = eq["verdict"].str.split(" \\(").str[0].value_counts()
    doc.p("Verdicts: " + ", ".join(f"{v}: {c}" for v, c in counts.items()) + ".")
    marked = [opts["equivalence_test"] == "ratio" and not math.isnan(r.pvalue) and _mean_heavy(r, heavy)
              for r in eq.itertuples(index=False)]
    doc.ul([f"{_case_title(r._asdict(), digits)}, n = {r.budget:g}"
            + (f" vs {r.budget_b:g}" if r.budget_b != r.budget else "")
            + f", {r.scheme_a} vs {r.scheme_b}, {r.metric}: **{r.verdict}**"
            + (f" {HEAVY_MARK}" if mark else "")
            + ("" if math.isnan(r.pvalue) else
               f" (estimate {_num(r.effect)}, {_pct(1 - 2 * opts['alpha'])} CI [{_num(r.effect_low)}, "
               f"{_num(r.effect_high)}], region [{_num(r.margin_low)}, {_num(r.margin_high)}], "
               f"adjusted TOST p {_p(r.pvalue_adjusted)})")
            for r, mark in zip(eq.itertuples(index=False), marked)])
    if any(marked):
        doc.p(EQUIVALENCE_HEAVY_NOTE)


def _trial_level_section(doc: Document, comp_trials: pd.DataFrame,
                         opts: dict[str, Any] | None = None) -> None:
    doc.h(2, "Trial-level tests (not independent)")
    opts = opts or {}
    mw = comp_trials[comp_trials["test"] == LOCATION_TESTS[opts.get("pairing", "none")]]
    doc.p("The same tests with the trial as the unit, for comparison only: the trials of one "
          "cluster (text) are correlated, so these p-values do not hold their nominal level (too "
          "small where a text's trials are positively correlated, too large where negatively: "
          "docs/statistics.md, \"Clustered trials\") and support no "
          f"conclusion. {int(mw['significant'].sum())} of {len(mw)} trial-level (not independent) "
          f"{_location_name(opts)}{'-test' if opts.get('pairing', 'none') == 'trial' else ''} rows "
          "have adjusted p ≤ α. Full table: "
          "tables/comparisons_trial_level.csv.")


TIES_NOTE = ("† marks a KS p-value on tied values: exact, conditional on the ties (the "
             "permutation distribution of D given the pooled values, as R's ks.test(exact = "
             "TRUE); a Monte Carlo permutation p-value when the exact count is too costly, with "
             "its B).")


def build_document(result: SweepResult, summary: pd.DataFrame, comp: pd.DataFrame, cross: pd.DataFrame,
              theory: pd.DataFrame, figs: dict[str, Path], opts: dict[str, Any], unit_text: str,
              comp_trials: pd.DataFrame | None, *,
              comparisons: Sequence[tuple[str, str]] | None = None) -> Document:
    """The report's document: header, equivalence, crossovers, figures, per-case tables, theory.

    Every verdict it prints is one the tests support: a winner only at a location-test
    (Mann–Whitney, or the sign test under the paired design) adjusted p ≤ α, "not resolvable"
    where the test could not have rejected, equality
    never (only the equivalence section's TOST, with declared margins, says "equivalent").

    Parameters
    ----------
    result : SweepResult
        The sweep (manifest and config for the header).
    summary, comp, cross, theory : DataFrame
        :func:`~kvstats.analysis.summary_table`, :func:`~kvstats.analysis.compare_schemes`,
        :func:`~kvstats.analysis.find_crossovers`, :func:`~kvstats.analysis.theory_table`
        (on cluster means where the unit is the cluster, the theory table too).
    figs : dict of str to Path
        Figure name → PNG path (empty: no figures).
    opts : dict
        The validated ``[report]`` options (:func:`kvstats.report.options.validate_report_options`).
    unit_text : str
        The header's sentence on the unit of observation.
    comp_trials : DataFrame or None
        The trial-level tests of clustered data (None: the unit is the trial); its
        presence makes every count, mean and figure read as over clusters (texts).
    comparisons : sequence of (str, str), optional
        The scheme pairs asked for (None: the options' or else the config's), named when
        none of them was present.

    Returns
    -------
    Document

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table
    >>> from kvstats.report.options import validate_report_options
    >>> from kvstats.report.sections import build_document
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions":
    ...     ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 12}, executor="serial",
    ...     progress=False)
    >>> comp = compare_schemes(res.frame, [("KV", "KQV")], energy_resamples=19)
    >>> doc = build_document(res, summary_table(res.frame, n_resamples=99), comp,
    ...     find_crossovers(comp), theory_table(res.frame, n_resamples=99), {},
    ...     validate_report_options(), "Unit of observation: the trial.", None)
    >>> md = doc.markdown(".")
    >>> md.splitlines()[0], "| KV vs KQV | kl |" in md
    ('# kvstats hypothesis report', True)
    """
    doc = Document()
    # case labels: params' numbers to the fewest significant digits (≥ 4) that keep the cases apart
    digits = label_digits(summary["params"]) if "params" in summary else None
    # any mean (summary or theory table) whose bootstrap CI is flagged as not reliable
    heavy = any(not bool(v) for t in (summary, theory) if "ci_reliable" in t
                for v in t["ci_reliable"])
    heavy_keys = _heavy_keys(summary)
    ratio = opts["equivalence_test"] == "ratio"
    paired = opts.get("pairing", "none") == "trial"
    # on cluster means (real captures: the texts) every count, mean and interval is over clusters
    clustered = comp_trials is not None
    real_only = "distribution" in summary and bool((summary["distribution"] == REAL).all())
    unit = ("texts" if real_only else "clusters") if clustered else "trials"
    man = result.manifest
    cfg = result.config
    if comparisons is None:      # as hypothesis_report chooses them
        comparisons = opts.get("comparisons") or cfg.comparisons
    synthetic = [d for d in cfg.distributions if d.name != REAL]
    has_real = len(synthetic) < len(cfg.distributions)
    doc.h(1, "kvstats hypothesis report")
    git = man.get("git") or {}
    doc.ul([
        f"Sweep: {man.get('n_cells')} cells, {cfg.n_trials} trials per cell"
        + (f", {cfg.n_queries} quer{'y' if cfg.n_queries == 1 else 'ies'} per synthetic trial"
           if synthetic else "")
        + (", a real trial's queries: its KV head's query heads at the last position"
           if has_real else "")
        + f", root seed {man.get('seed')}; "
        f"ran {man.get('started')} → {man.get('finished')} ({man.get('seconds')} s, "
        f"{man.get('n_computed')} cells computed, executor {man.get('executor')}).",
        f"Host: {man.get('host', {}).get('platform')}, {man.get('host', {}).get('cpus')} CPUs; "
        f"git {git.get('revision', 'unknown')[:12]}{' (dirty)' if git.get('dirty') else ''}; "
        "versions " + ", ".join(f"{k} {v}" for k, v in (man.get("versions") or {}).items()) + ".",
        _tests_text(comp, opts),
        *([f"Heavy tails: {_heavy_summary(summary, theory)} " + heavy_note(opts)] if heavy else []),
        "Winner rule: higher SNR and recall@5 are better; lower φ, KL and argmax-shift rate are "
        f"better. A pair has a winner for a metric only when its {_location_name(opts)}"
        + (" test's" if paired else "") + " adjusted p ≤ α"
        + ("; the winner is then the scheme with the better value on more of the matched units "
           "(the sign of the dominance), not the one with the better mean" if paired else "")
        + "; otherwise \"no significant difference\" when the test could have rejected"
        + ("" if paired else " (\"no significant shift (KS: distributions differ)\" when the KS "
           "test rejects)")
        + ", or \"not resolvable at …\" when even the most extreme data could not have reached "
        "an adjusted p ≤ α, the other tests as observed (a statement about the design, not about "
        "the schemes). Neither is a claim that two schemes are equal: that is what the "
        "equivalence tests (declared margins) are for.",
        R_CONVENTION_PAIRED if paired else R_CONVENTION,
        unit_text,
        _scope_text(bool(synthetic), has_real),
        *([] if paired else [TIES_NOTE]),
    ])
    doc.h(2, "Metrics and units")
    doc.table(metrics_table())
    doc.p(_budget_text(summary, unit))
    _equivalence_section(doc, comp, opts, digits, heavy_keys)

    doc.h(2, "Crossovers of the winner across budgets")
    if comp.empty:
        doc.p(_no_pair_text(comparisons, summary))
    elif cross.empty:
        doc.p("No metric was tested at two or more budgets.")
    else:
        found = cross[cross["crossover"]]
        if found.empty:
            doc.p("**No crossover**: for every case, pair and metric, no two budgets have opposite "
                  "significant winners.")
        else:
            doc.p(f"**{len(found)} crossover(s)** (the winner of a metric changes with the budget):")
            doc.ul(found["description"].tolist())
        kl = cross[(cross["metric"] == "kl") & ~cross["crossover"]]
        if not kl.empty:
            doc.p("Attention KL, winners by budget (no crossover):")
            doc.ul([f"{_case_title(r._asdict(), digits)}, {r.scheme_a} vs {r.scheme_b}: {r.winners}"
                    for r in kl.itertuples(index=False)])

    if any(name in figs for name in ("kl_vs_bits", "recall_vs_bits", "lowrank_vs_heavytail")) or \
            any(name.startswith("crossover_") for name in figs):
        doc.h(2, "Figures across cases")
    # the figures mark heavy-tailed means hollow (plots._bits_plot): their error bars are not valid
    hollow = (" Hollow markers, where drawn: a heavy right tail (Hill α < 2 at 95%), where no "
              "interval of the mean, error bar included, is valid.")
    for fname, caption in (("kl_vs_bits", "Mean attention KL vs bits per coordinate with overhead "
                            "(normal-approximation 95% error bars; the tables carry bootstrap "
                            "intervals)." + hollow),
                           ("recall_vs_bits", "Mean top-5 recall vs bits per coordinate with "
                            "overhead (normal-approximation 95% error bars)." + hollow),
                           ("lowrank_vs_heavytail", "Per-trial KL on low-rank, heavy-tailed and "
                            "Gaussian keys.")):
        if fname in figs:
            doc.fig(figs[fname], caption)
    # the pairs by their figure's name (render's file name is the slug; the caption the labels)
    pair_of = {f"crossover_{_slug(a)}_vs_{_slug(b)}": f"{a} vs {b}"
               for a, b in comp[["scheme_a", "scheme_b"]].drop_duplicates().itertuples(index=False)}
    for name, path in figs.items():
        if name.startswith("crossover_"):
            doc.fig(path, f"{'Paired dominance' if paired else 'Rank-biserial r'} across budgets "
                    f"({pair_of.get(name, name[10:].replace('_vs_', ' vs '))}); "
                    f"{'dominance' if paired else 'r'} > 0: the first scheme's values are larger "
                    "(better for SNR and recall@5, "
                    "worse for φ and KL: each panel says which); filled = significant after "
                    "adjustment.")

    if any(name.startswith("shannon_phi_") for name in figs):
        from kvstats.report.plots import SHANNON_PHI_NOTE
        doc.h(2, "Reading the Shannon–φ planes")
        doc.p(SHANNON_PHI_NOTE)
        if clustered:
            doc.p(f"Here the unit is the cluster: every mean, cross and faint dot of these figures "
                  f"is over {unit} (each dot one of the {unit}, the mean of its trials), not over "
                  "trials.")
    for case_key, case_sum in summary.groupby(list(CASE_COLUMNS), sort=False):
        case = dict(zip(CASE_COLUMNS, case_key))
        title = _case_title(case, digits)
        doc.h(2, title)
        slug = _slug(_case_title(case))          # exact: figure file names stay unique
        for place in ("k", "v", "t"):
            name = f"shannon_phi_{place}_{slug}"
            if name in figs:
                doc.fig(figs[name], f"Shannon–φ plane ({place.upper()}), {title}: mean SNR (up is "
                        "better) against mean direction error φ (log scale, left is better), each "
                        "scheme's budgets n joined in order; "
                        + ("dashed (where one exists): the rate–distortion limit at n bits per coordinate. "
                           if place != "t" else "no limit line (T is not coded). ")
                        + "See \"Reading the Shannon–φ planes\".")
        case_comp = comp
        for col in CASE_COLUMNS:
            case_comp = case_comp[case_comp[col] == case[col]]
        for budget, bsum in case_sum.groupby("budget", sort=True):
            doc.h(3, f"{title}: n = {budget:g} bits per coordinate")
            doc.table(_scheme_table(bsum, unit))
            bcomp = case_comp[case_comp["budget"] == budget]
            if not bcomp.empty:
                doc.table(_comparison_table(bcomp, heavy_keys, ratio))
    is_bound = theory["quantity"].isin(list(BOUND_QUANTITIES.values()))
    bounds, theory = theory[is_bound], theory[~is_bound]
    doc.h(2, "Distance to the rate–distortion limit")
    if bounds.empty:
        doc.p("No scheme has a limit here: the covariance of every case is unknown (a real "
              "capture not at hand) or does not exist (heavy tails with ν ≤ 2), or the results "
              "predate the pooled SNR columns (rerun the sweep).")
    else:
        doc.p(BOUND_NOTE)
        doc.table(_bound_fmt(bounds, digits))
    doc.h(2, "Theory beside measurement")
    if theory.empty:
        doc.p(f"No closed-form prediction here: none of the schemes that have one "
              f"({', '.join(theory_schemes())}) was run at an integer budget.")
    else:
        present = set(summary["scheme"])
        pairs = [(m, p) for m, p in ratio_pairs() if m in present and p in present]
        doc.p("`k_snr_db`: predicted per-key SNR of the keys from the Lloyd–Max distortion D_n of "
              "the sphere-coordinate density (relative MSE d_pad·D_n; with a 1-bit Gaussian QJL "
              "residual d_pad·D_{n−1}·(π/2 − 1/d_pad)), as −10·log10 of it; the relative MSE is "
              "exact for Gaussian keys, a yardstick otherwise. Its measured value is the mean of "
              "per-key dB (`snr_k`), which by Jensen's inequality lies above the dB of the mean "
              "error: on Gaussian keys the last column (measured − predicted, dB) is a small "
              "positive offset (the measured interval need not contain the prediction), not by "
              "itself a failure of the closed form (the "
              "energy-pooled SNR of \"Distance to the rate–distortion limit\" is the measured "
              "quantity closest to it). "
              f"`ip_var_ratio_same_budget`: variance of the q·k error of "
              f"{_pairs_text(pairs, '{p} over {m}')} at equal n, predicted "
              f"(π/2 − 1/d_pad)·D_{{n−1}}/D_n (→ 2π). `ip_var_ratio_residual`: "
              f"{_pairs_text(pairs, '{p} at n over {m} at n−1')}, predicted π/2 − 1/d_pad (→ π/2). "
              "See kvstats.analysis.theory_table. Measured: the mean (for the ratios, the ratio "
              f"of the two means) with a 95% BCa bootstrap CI ({opts['bootstrap_resamples']} "
              "resamples; a ratio resamples its two samples apart, ignoring that they share "
              "trials: too wide where the two schemes' values on a trial are positively "
              "correlated, too narrow where negatively)."
              + (f" Here every measured mean and interval is over {unit} (each one's trials "
                 "averaged first), as the rate–distortion gaps above." if clustered else ""))
        doc.table(_theory_fmt(theory, digits))

    if comp_trials is not None:
        _trial_level_section(doc, comp_trials, opts)
    doc.p("Full-precision numbers: tables/*.csv and report.json.")
    if heavy:
        doc.p(heavy_note(opts))
    return doc

