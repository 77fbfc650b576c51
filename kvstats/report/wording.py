"""The sentences the report prints about its tests and data, for both designs.

The heavy-tail mark and notes, the sign convention of the effect (r, or the paired
design's dominance) and its column headers, the header's statement of the design, the
tests, their resolution and their scope, the "Metrics and units" table and what "equal
budget" means, the equivalence section's tested regions, the words of an unresolvable
sign-test row, of a report with no pair and of one with no closed-form prediction, the
KS-ties and rate-distortion notes. Every such statement lives here, so that the unpaired
and the paired wording are written side by side and cannot drift apart; :mod:`kvstats.report.tables` and
:mod:`kvstats.report.sections` place them in the document.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from kvstats.analysis import CASE_COLUMNS, PROFILE_METRICS, TESTABLE_METRICS
from kvstats.analysis.compare import NOT_RESOLVABLE
from kvstats.analysis.pairing import _not_compared
from kvstats.analysis.theory import BOUND_QUANTITIES, theory_schemes
from kvstats.analysis.verdicts import DIFFERENT, DISTRIBUTIONS_DIFFER, NO_DIFFERENCE
from kvstats.analysis.resolution import ROUNDING_RTOL, _sign_pairs_needed
from kvstats.stats.equivalence import VERDICTS
from kvstats.report.notation import _pct
from kvstats.results import DEFAULT_COMPARISONS
from kvstats.sweep.specs import _PAIR_RULE

__all__ = ["BOUND_NOTE", "HEAVY_MARK", "HEAVY_NOTE", "R_HEADER", "R_CONVENTION", "R_CONVENTION_PAIRED",
           "DOMINANCE_HEADER", "heavy_note",
           "EQUIVALENCE_REGIONS", "EQUIVALENCE_HEAVY_NOTE", "IDENTICAL_PAIRS_NOTE",
           "equivalence_verdict_text", "PAIRED_DESIGN", "UNPAIRED_DESIGN", "TIES_NOTE"]

# ---------------------------------------------------------------------- heavy tails
#: Mark after a mean whose bootstrap CI is not reliable (a heavy tail, either one for a metric in dB,
#: or few nonzero values); † is the KS-ties mark.
HEAVY_MARK = "‡"
HEAVY_NOTE = (f"{HEAVY_MARK} heavy tail (the one-sided 95% upper confidence bound of Hill's "
              "tail index α of the values is below 2): under a Pareto-type tail the data reject a "
              "finite variance at the 5% level, and the bootstrap CI of the mean is not reliable. "
              "A bounded metric (φ ≤ π; recall@5 "
              "and argmax shift ≤ 1) has a finite variance: its mark says that at this n its "
              "largest values spread like such a tail, so the bootstrap CI of its mean may still "
              "undercover. The \"kl tail α\" column is that bound for KL; the other metrics' is the "
              "tail_index column of tables/summary.csv: for a nonnegative metric its right tail's, "
              "from 0; for an SNR in dB (or any metric with a negative value) the smaller of its "
              "two tails' bounds, each from the excesses over the median at 97.5% (95% for the "
              "pair), so a few trials of very low SNR mark its mean as a few very large KLs do "
              "(NaN, not screened, where a value is non-finite or a tail has fewer than 10 "
              "values). The mark also flags a mean of a "
              "nonnegative metric carried by fewer than 10 nonzero values, the rest 0 (a "
              "proportion in any unit, two or more equal nonzero values, excepted; a fraction's "
              "1 − x is screened too), too few for the tail screen. By kind (docs/statistics.md, "
              "\"Sparse means\", 95% BCa at n = 100): sparse continuous values (a few KLs, the "
              "rest 0) covered about 0.89 at nominal 0.95. A fraction's sample of 0s and 1s (an "
              "argmax shift with one query per trial) is a proportion: its interval is the exact "
              "Clopper–Pearson one of its count, never marked.")


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


#: After a ratio-of-means equivalence verdict whose means are marked ‡.
EQUIVALENCE_HEAVY_NOTE = (f"{HEAVY_MARK} after an equivalence verdict: a mean behind it is marked "
                          f"{HEAVY_MARK} (heavy tail), so the t-based TOST of the ratio of means is "
                          "not reliable there; a rank margin (equivalence_test = \"rank\") needs "
                          "no moments.")


def _budget_text(summary: pd.DataFrame, unit: str = "trials") -> str:
    """What the tables average over and what "equal budget" means, with the totals of one
    case and budget of this sweep (read from the summary, never assumed)."""
    each = "" if unit == "trials" else " (each the mean of its trials)"
    text = (f"Each metric is one value per trial (averaged over its vectors or queries); a "
            f"table's mean and interval are over the {unit}{each}. **Equal budget** means the "
            "same nominal n (code bits per coordinate), the \"bits nominal\" column: over the "
            "coordinates a rotation codes (d padded to a power of two for a Hadamard one), and "
            "moved off the budget by sketch rows m or an outlier sketch other than the defaults; "
            "the total stored bits per coordinate, with norms and scales (the \"bits total\" "
            "column), can differ between schemes")
    need = {"bits_nominal", "bits_total", "budget", "scheme", *CASE_COLUMNS}
    if summary.empty or not need <= set(summary.columns):
        return text + "."
    cells = summary.drop_duplicates([*CASE_COLUMNS, "budget", "scheme"])
    off = cells[cells["bits_nominal"] != cells["budget"]].drop_duplicates(["scheme", "budget"])
    # rows labelled with a budget whose codes hold another nominal n: not equal-budget there
    tail = "" if off.empty else (" Not at their budget n, so not equal-budget to the others there: " + ", ".join(
        f"{r.scheme} at n = {r.budget:g} (nominal {r.bits_nominal:.6g})" for r in off.itertuples()) + ".")
    cells = cells[cells["bits_nominal"] == cells["budget"]]     # the schemes at the budget n
    for key, g in cells.groupby([*CASE_COLUMNS, "budget"], sort=False):
        if g["scheme"].nunique() < 2:
            continue
        case = dict(zip([*CASE_COLUMNS, "budget"], key))
        totals = ", ".join(f"{r.scheme} {r.bits_total:.6g}" for r in g.itertuples(index=False))
        same = " (here equal)" if g["bits_total"].nunique() == 1 else ""
        return (text + f": e.g. n = {case['budget']:g} ({case['distribution']}, d = "
                f"{case['dim']}, N = {case['n_keys']}): {totals} bits per coordinate{same}." + tail)
    return text + "." + tail


# ---------------------------------------------------------------------- the effect's sign
#: Column header of the rank-biserial r: the report's one sign convention (tables and figures).
R_HEADER = "r [95% CI] (> 0: a larger)"
#: What r's sign means, said once in the report's header and the figures' captions.
R_CONVENTION = ("r is the rank-biserial correlation of scheme a (the pair's first) against b: "
                "**r > 0 when a's values tend to be larger**, in every table and figure (for φ, "
                "KL and argmax shift, where lower is better, r > 0 means a is worse). Its 95% CI is "
                "Newcombe's (2006, method 5) score interval for θ = P(a > b) + ½P(a = b), mapped "
                "to r = 2θ − 1, and is not adjusted for the family: an interval that excludes 0 "
                "need not be significant after the correction. The \"U of a\" column is a's "
                "Mann–Whitney statistic: over every (a value, b value) pair, the number where a's "
                "is larger plus half the number of ties, #(a > b) + ½#(a = b) (b's U is "
                "n_a·n_b − U; r = 2U/(n_a·n_b) − 1).")

#: Column header of the Mann–Whitney U (scheme a's), beside :data:`R_HEADER`.
U_HEADER = "U of a: #(a > b) + ½ ties"


#: The dominance cell of a pair whose units all have equal values (0/0: no dominance).
UNDEFINED_EFFECT = "—"
#: Column header of the paired design's effect (the sign test's dominance), in place of :data:`R_HEADER`.
DOMINANCE_HEADER = "dominance [95% CI, unadjusted] (> 0: a larger)"
#: What the effect is under the paired design (the sign-test rows), in place of :data:`R_CONVENTION`.
R_CONVENTION_PAIRED = (
    "The effect is the sign test's dominance of scheme a (the pair's first) over b on the same "
    "unit: P(a > b) − P(a < b) over the units where they differ, (n+ − n−)/(n+ + n−) with n± "
    "the units where a's value is larger / smaller, units with equal values left out as the "
    "sign test leaves them out; the paired analogue of Mann–Whitney's r. **Dominance > 0 when "
    "a's values tend to be larger**, in every table and figure (for φ, KL and argmax shift, "
    "where lower is better, > 0 means a is worse). Its 95% CI is the Clopper–Pearson (exact) interval of "
    "P(a > b | they differ), mapped by 2θ − 1, and is not adjusted for the family: an interval "
    "that excludes 0 need not be significant after the correction. Where no unit differs "
    f"(n+ = n− = 0) the dominance is 0/0, undefined: its cell reads \"{UNDEFINED_EFFECT}\", not 0 "
    "(no win either way, and a sign test that cannot reject). The sign test and not the "
    "Wilcoxon signed-rank test: the signed-rank test weights each unit by the rank of |a − b|, "
    "so a few units with very large differences (one scheme's rare catastrophes) can set its "
    "direction against the majority of units (docs/statistics.md, \"The paired design\").")


# ---------------------------------------------------------------------- the tests
#: The mark of an equivalence row that did not conclude and whose TOST is not known to be able
#: to at its sizes, margin and correction (``resolvable`` False: for a rank TOST "not shown",
#: not proven; docs/statistics.md, "Resolution of a TOST row").
EQUIVALENCE_NOT_SHOWN = "not known to be resolvable"
#: The equivalence verdict that concludes nothing (:data:`kvstats.stats.equivalence.VERDICTS`).
INCONCLUSIVE = VERDICTS[2]


def tost_not_shown_resolvable(row: Any) -> bool:
    """Whether an equivalence row gets :data:`EQUIVALENCE_NOT_SHOWN`: verdict "inconclusive",
    with a p-value (a row without one has a verdict saying why), and ``resolvable`` False.

    A "different" row is not marked: its verdict is the location test's rejection, which the
    TOST's resolution does not limit, and the mark beside it would read as a doubt on it.

    Parameters
    ----------
    row : pandas.Series or namedtuple
        An equivalence row of :func:`kvstats.analysis.compare_schemes` (its ``resolvable``,
        ``significant``, ``pvalue`` and ``verdict``).

    Returns
    -------
    bool

    Examples
    --------
    >>> import pandas as pd
    >>> row = pd.Series({"resolvable": False, "significant": False, "pvalue": 0.4,
    ...                  "verdict": "inconclusive"})
    >>> tost_not_shown_resolvable(row), tost_not_shown_resolvable(row.replace(0.4, float("nan")))
    (True, False)
    >>> tost_not_shown_resolvable(row.replace("inconclusive", "different"))
    False
    """
    return (not row.resolvable and not row.significant and not pd.isna(row.pvalue)
            and row.verdict == INCONCLUSIVE)


def _exact(note: Any) -> bool:
    """Whether a comparison row's note says its p-value is an exact permutation p (every
    relabelling enumerated: "exact (N relabellings)", :mod:`kvstats.analysis.pair_tests`)."""
    return ", exact (" in str(note)


def _resolution(comp: pd.DataFrame) -> dict[str, Any]:
    """The family's size and what its tests could resolve (the report header and JSON)."""
    from kvstats.stats.sequential import required_resolution

    n = int(comp.attrs.get("n_tests", 0))
    # a row with no test (an equivalence row whose ratio has no mean) is not a test that could
    # not reject: its verdict says why it has none
    unresolved = (~comp["resolvable"] & ~comp["significant"] & comp["pvalue"].notna()
                  if not comp.empty else pd.Series(dtype=bool))
    # an equivalence row's False is "not shown" for a rank TOST, not proven (docs/statistics.md,
    # "Resolution of a TOST row"): counted apart, in weaker words, and only where it left the
    # verdict inconclusive (a "different" row concluded: tost_not_shown_resolvable)
    tost = comp["test"] == "equivalence" if not comp.empty else pd.Series(dtype=bool)
    # (a hand-made table without verdicts: every such row, as before verdicts were read)
    inconclusive = (comp["verdict"] == INCONCLUSIVE if "verdict" in comp
                    else pd.Series(True, index=comp.index))
    out: dict[str, Any] = {"n_tests": n, "energy_max_permutations": comp.attrs.get("energy_max_permutations", 0),
                           "not_resolvable": int((unresolved & ~tost).sum()),
                           "equivalence_not_shown_resolvable": int((unresolved & tost & inconclusive).sum())}
    if n:
        need = required_resolution(n, comp.attrs["alpha"], comp.attrs["correction"])
        out.update(p_needed=need.p_needed, family_permutations=need.n_permutations,
                   sign_pairs_needed=_sign_pairs_needed(need.p_needed))
    return out


#: The header's statement of the paired design and why it has no KS test.
PAIRED_DESIGN = ("Design: **paired** (pairing = \"trial\"): each scheme's rows are matched "
                 "one-to-one with the other scheme's on the unit (the same trial; the same text "
                 "where the unit is the cluster), and every test uses the matching. No KS test: "
                 "the two-sample KS test has no valid null for paired samples (its permutations "
                 "exchange values between pairs, which the design does not allow); the 6D energy "
                 "test with within-pair swaps tests the joint distribution of the six profile "
                 "metrics instead, and the others ("
                 + ", ".join(m for m in TESTABLE_METRICS if m not in PROFILE_METRICS)
                 + ", those of the family: [report] metrics) have only their sign test, no "
                 "test of the whole distribution. ")
#: The paired design's statement without the energy tests ([report] energy = false).
PAIRED_DESIGN_NO_ENERGY = PAIRED_DESIGN.split(" No KS test:")[0] + (
    " No KS test (no valid null for paired samples) and no 6D energy test (the option "
    "energy = false left them out of the family): each metric has only its sign "
    "test, no test of the whole distribution. ")
#: The header's statement of the unpaired design.
UNPAIRED_DESIGN = ("Design: two independent samples per pair (pairing = \"none\"; the paired "
                   "design is pairing = \"trial\"). ")


#: Below this many units a mean's bootstrap interval is said to undercover.
FEW_UNITS = 20


def few_units_text(n_units: int, unit: str) -> str | None:
    """The header's warning that some means rest on fewer than :data:`FEW_UNITS` units, or None.

    A bootstrap interval of a mean ignores the t quantile and the (n − 1)/n shrinkage of the
    plug-in variance, so over few units it covers less than its nominal level: 95% BCa
    intervals covered 0.84 (normal) and 0.79 (exponential) at 5 units, 0.90 / 0.88 at 12,
    0.92 / 0.91 at 20 (docs/statistics.md, "Few units"). The sign test (exact binomial) and
    the permutation tests (energy, KS) keep their level, Mann–Whitney where exact; the
    equivalence tests (a ratio's TOST a t-test, the rank TOST asymptotic) only
    approximately. ``n_units`` is the smallest count of a summary row; ``unit`` its
    name ("trials", "texts", "clusters").

    Examples
    --------
    >>> few_units_text(40, "trials") is None
    True
    >>> few_units_text(8, "texts")[:40]
    'Few units: some means rest on only 8 tex'
    """
    if n_units >= FEW_UNITS:
        return None
    return (f"Few units: some means rest on only {n_units} {unit} (fewer than {FEW_UNITS}), and a "
            "bootstrap interval over so few covers less than its nominal level (95% BCa "
            "intervals covered 0.84 at 5, 0.90 at 12 and 0.92 at 20 normal units; "
            "docs/statistics.md, \"Few units\"): read those intervals as too narrow. The sign "
            "test (exact binomial) and the permutation tests (energy, KS) keep their level, and "
            "so does Mann–Whitney where exact (its normal approximation, used beyond 8 untied "
            "units a side, is close); the equivalence tests do not rest on an exact null law (a "
            "ratio's TOST is a t-test, exact for normal data only; the rank TOST is asymptotic), "
            "so at so few units their level is approximate.")


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


def _all_zero_fraction_text(confidence: float, n_units: int | None = None) -> str:
    """The clause on summary_table's exact interval where a bootstrap of a constant sample has
    none, with its value at the report's own fewest units ``n_units`` and ``confidence``
    (None: no number). "n" is the report's bit budget: the count of values is m.

    Examples
    --------
    >>> _all_zero_fraction_text(0.95, 6)[-62:]
    'confidence c (here 0.459 at m = 6, c = 0.95), all 1 its mirror'
    """
    here = ("" if n_units is None else
            f" (here {1 - ((1 - confidence) / 2) ** (1 / n_units):.3g} at m = {n_units}, c = {confidence:g})")
    return ("; a fraction metric (recall@5, argmax shift) whose m values (one per trial, or per "
            "text on cluster means) are all 0 gets the exact [0, 1 − ((1 − c)/2)^(1/m)] at "
            f"confidence c{here}, all 1 its mirror")


def _tests_text(comp: pd.DataFrame, opts: dict[str, Any], n_units: int | None = None) -> str:
    """The Methods' "Tests" line; ``n_units``: the fewest units of a mean (the all-0
    interval's example is at it)."""
    zeros = _all_zero_fraction_text(opts["confidence"], n_units)
    res = _resolution(comp)
    n = res["n_tests"]
    if comp.empty:
        return ("Tests: none, since no comparison pair was present (\"Crossovers of the winner "
                f"across budgets\" says which labels the sweep has). Means with "
                f"{_pct(opts['confidence'])} bootstrap CIs (BCa, {opts['bootstrap_resamples']} "
                f"resamples{zeros}).")
    energy = comp[comp["test"] == "energy"]
    exact = energy["note"].map(_exact).astype(bool)
    drawn = energy[~exact]
    paired = opts.get("pairing", "none") == "trial"
    eq = (", a TOST per metric with an equivalence margin" + (" (paired)" if paired else "")
          if ((comp["test"] == "equivalence") & comp["pvalue"].notna()).any() else "")
    # the energy test's joint 6D profile; none with energy = false or no finite profile (no row)
    with_energy = opts.get("energy", True) and bool(len(energy))
    profile = ((", a 6D energy permutation test per pair on the units' joint profile "
                f"({', '.join(PROFILE_METRICS)}, each divided by its pooled standard deviation: "
                "\"standardised\")" + (" with labels swapped within pairs" if paired else ""))
               if with_energy else "")
    tests = ("the sign test per metric on the paired differences (exact binomial, equal "
             f"values (to rounding, relative {ROUNDING_RTOL:g}) dropped)" if paired else
             "Mann–Whitney and KS per metric") + profile
    design = (UNPAIRED_DESIGN if not paired else PAIRED_DESIGN if with_energy else PAIRED_DESIGN_NO_ENERGY
              if not opts.get("energy", True) else PAIRED_DESIGN_NO_ENERGY.replace(
                  "the option energy = false left them out of the family", "no pair's 6D profile is finite"))
    text = (f"Tests: {n} p-value{'' if n == 1 else 's'} ({tests}{eq}), adjusted together by **{opts['correction']}** "
            f"at α = {opts['alpha']}. " + design)
    if n:
        # three significant digits: _p's "0.003" would misstate a threshold of 0.00263
        # the sign test's need in its own units: what its "only k of the n pairs differ" lacks
        need = res["sign_pairs_needed"]
        # a need, not a count: said so where no pair here has that many units
        sizes = comp.loc[comp["test"] == "sign", "n_a"] if paired and "n_a" in comp else ()
        most = int(max(sizes)) if len(sizes) else need
        # an exact test's floor: a paired one's, 2^(1−m) on m differing pairs, is the sign test's
        pairs = (f"; a sign test{' or an exact energy test' if exact.any() else ''}: {need} pairs "
                 "that differ" + (f", more than the {most} units of any pair here" if most < need else "")
                 + ", its smallest p being 2·2⁻ᵏ on k of them" if paired else "")
        perms = ""   # none without energy tests: no permutation test in the family
        if with_energy and (len(drawn) or not exact.any()):
            perms = (f"; a{' drawn' if exact.any() else ''} permutation test: B ≥ "
                     f"{res['family_permutations']} permutations")
        if exact.any() and not paired:
            perms += ("; an exact permutation test: a floor 1/C(n_a + n_b, n_a) (2/C(2n, n) at "
                      "n vs n) ≤ that")
        text += (f"A test that can reach p ≤ {res['p_needed']:.3g} can be rejected whatever the "
                 f"rest of the family shows (the correction's first step{perms}{pairs}); one that "
                 "cannot may still be rejected when enough others are. ")
    if exact.any():
        group = ("the 2^(m−1) swap classes of the m pairs that differ, up to m = 20" if paired else
                 "the C(n_a + n_b, n_a) splits of the pooled units, halved at n vs n; every split of up to 21 units, of 22 all but 10 vs 12")
        text += (f"Energy tests: {int(exact.sum())} of {len(energy)} exact, every relabelling "
                 f"enumerated where that costs at most 2^28 multiply-adds ({group}), without Monte "
                 f"Carlo error{'; the others ' if len(drawn) else '. '}")
    if len(drawn):
        b_max, used = int(drawn["max_permutations"].max()), drawn["n_permutations"]
        early = int((used < drawn["max_permutations"]).sum())
        family = opts['energy_resolution'] == 'family'   # energy_resamples: the least cap
        raised = (f", energy_resamples = {opts['energy_resamples']} raised to it"
                  if family and b_max > opts['energy_resamples'] else "")
        text += (f"{'' if exact.any() else 'Energy tests: '}Besag–Clifford sequential p-values, "
                 f"at most B = {b_max} permutations ({'the family' if family else 'fixed'}"
                 f" resolution{raised}), each stopping after {opts['energy_stop']} exceedances: {early} of "
                 f"{len(drawn)} stopped early (median {int(used.median())} permutations); drawn "
                 "p-values carry Monte Carlo error (p = 1/(1 + B) has a 99% interval up to about "
                 "5.3/B), so a verdict near its threshold may change with the seed. ")
    text += (f"{res['not_resolvable']} test(s) could not have rejected even on the most extreme data"
             + (" (a drawn permutation test: not at least half the time)" if len(drawn) else "")
             + ", the rest of the family as observed (\"not resolvable\"). ")
    if eq:
        text += (f"{res['equivalence_not_shown_resolvable']} equivalence test(s) are not known to "
                 f"be able to conclude equivalence at their n and margin and are inconclusive (marked "
                 f"\"{EQUIVALENCE_NOT_SHOWN}\"; a \"different\" verdict, the location test's, is not). ")
    text += (f"Means with {_pct(opts['confidence'])} bootstrap CIs (BCa, "
             f"{opts['bootstrap_resamples']} resamples{zeros}).")
    return text


TIES_NOTE = ("† marks a KS p-value on tied values: exact, conditional on the ties (the "
             "permutation distribution of D given the pooled values, as R's ks.test(exact = "
             "TRUE); a Monte Carlo permutation p-value when the exact count is too costly, with "
             "its B).")


#: The equivalence section's tested region and test, by (equivalence_test, pairing)
#: (:func:`kvstats.stats.tost_ratio` / :func:`kvstats.stats.tost_rank`, ``paired``).
EQUIVALENCE_REGIONS: dict[tuple[str, str], str] = {
    ("ratio", "none"): ("the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (Fieller-type "
                        "TOST; each margin also with the variance at the margin, score-type, "
                        "and rejected only where both reject)"),
    ("ratio", "trial"): ("the ratio of means mean(a)/mean(b) within [1/(1+δ), 1+δ] (paired "
                         "Fieller-type TOST: t-tests of aᵢ − r·bᵢ over the pairs at each margin r, "
                         "each also with the variance at the margin, score-type, and rejected only "
                         "where both reject)"),
    ("rank", "none"): ("θ = P(a > b) + ½P(a = b) within 0.5 ± δ (Brunner–Munzel TOST; each "
                       "margin also with the variance at the margin, score-type, and rejected "
                       "only where both reject)"),
    ("rank", "trial"): ("θ = P(a > b) + ½P(a = b) within 0.5 ± δ, θ over all values of a and "
                        "b, not within pairs (paired rank TOST: the variance of the pairs' "
                        "differenced placements, df n − 1, Munzel 1999; each margin also with "
                        "the variance at the margin, score-type, and rejected only where both "
                        "reject)"),
}


#: After an equivalence verdict on pairs identical in every unit (the TOST's ``identical_pairs``).
IDENTICAL_PAIRS_NOTE = (
    "\"identical in all n pairs\": the two schemes gave the same value on every unit, so the "
    "data hold no spread of their paired differences, and the TOST's p-value is a bound on "
    "what was not seen (the ratio test: the score-type test with one unseen discordant unit "
    "added, which depends on the values' own spread: identical values uniform on [0, 1] at "
    "±10%, n = 100: p 0.010–0.017 over 20 draws, on [1, 2]: 2–5·10⁻⁵; the rank test: the "
    "largest variance θ̂ can have), not a margin tested on a measured spread. Values that "
    "differ on some unit, however little, are tested on their spread (relatively 10⁻⁹ "
    "apart, the same draws: p below 10⁻²⁶), so such a verdict says the schemes agreed "
    "exactly on these units; its p-value is not comparable with those of rows whose values "
    "differ (docs/statistics.md, "
    "\"Identical paired trials\").")


def equivalence_verdict_text(verdict: str, identical_pairs: bool = False, n_pairs: int = 0) -> str:
    """An equivalence row's verdict as the report prints it: with "identical in all n pairs"
    where the two schemes gave the same value on every one of the ``n_pairs`` units
    (:attr:`kvstats.stats.EquivalenceResult.identical_pairs`), since its p-value is then a
    bound, not a margin tested on a measured spread (:data:`IDENTICAL_PAIRS_NOTE`). The
    label is in parentheses after the verdict, so the verdict counts stay by verdict.

    Examples
    --------
    >>> equivalence_verdict_text("equivalent within δ", True, 100)
    'equivalent within δ (identical in all 100 pairs)'
    >>> equivalence_verdict_text("inconclusive", False, 100)
    'inconclusive'
    >>> equivalence_verdict_text("different")
    'different (the difference test rejects; not a test that the margin is exceeded)'
    """
    if verdict == "different":
        # the TOST did not conclude and a difference test rejected (in a report the pair's
        # location test: a winner on more units, which a ratio of means near 1 can have too)
        verdict = f"{verdict} (the difference test rejects; not a test that the margin is exceeded)"
    if not identical_pairs:
        return verdict
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int | np.integer) or n_pairs < 1:
        raise ValueError("n_pairs must be the number of pairs, an int >= 1, where identical_pairs "
                         f"is True; received {n_pairs!r}")
    return f"{verdict} (identical in all {n_pairs} pairs)"


def _no_pair_text(comparisons: Sequence[tuple[str, str]] | None, summary: pd.DataFrame) -> str:
    """Why a report holds no test: no pair asked for, or none of the pairs present."""
    labels = ", ".join(dict.fromkeys(summary["scheme"])) if "scheme" in summary else "none"
    if comparisons is not None and len(comparisons) == 0:
        return (f"No comparison was asked for (comparisons = []), so no test and no "
                f"crossover; this sweep's scheme labels: {labels}.")
    pairs = [tuple(p) for p in (DEFAULT_COMPARISONS if comparisons is None else comparisons)]
    # the default pairs were not asked for (the config named none): said as the warning says it
    asked = (f"{'the default pairs' if tuple(pairs) == DEFAULT_COMPARISONS else 'the pairs asked for'} ("
             + ", ".join(f"{a} vs {b}" for a, b in pairs) + ")")
    # a pair whose schemes share a case but no budget it is compared at: scheme_pairs' rule
    apart = (_not_compared(summary, pairs) if {"scheme", "budget", *CASE_COLUMNS} <= set(summary.columns)
             else [])
    if apart:
        return (f"No comparison pair was compared: of {asked}, {_apart_text(apart)}, so no test "
                "and no crossover. Add a pair of schemes that share a budget, or run a "
                "fixed-budget scheme against another single-budget one.")
    return (f"No comparison pair was present: none of {asked} names two "
            f"schemes of one case of this sweep, so no test and no crossover. The sweep's "
            f"scheme labels: {labels}; pass pairs of them (hypothesis_report(comparisons=...) "
            "or the config's comparisons).")


def _apart_text(apart: Sequence[tuple[str, str, Sequence[float], Sequence[float]]]) -> str:
    """The pairs of :func:`kvstats.analysis.pairing._not_compared` ("TQ vs kivi (TQ at n = 3, 4;
    kivi at n = 1, 2)"), and why."""
    ns = lambda values: ", ".join(f"{v:g}" for v in values)   # noqa: E731
    return ("; ".join(f"{a} vs {b} ({a} at n = {ns(na)}; {b} at n = {ns(nb)})" for a, b, na, nb in apart)
            + f": no budget in common, and {_PAIR_RULE}")


def _no_theory_text(summary: pd.DataFrame) -> str:
    """Why "Theory beside measurement" is empty, read from the sweep (never assumed).

    Examples
    --------
    >>> import pandas as pd
    >>> _no_theory_text(pd.DataFrame({"scheme": ["K4V2"], "budget": [3.0], "dim": [128]}))[:88]
    'No closed-form prediction here: none of the schemes that have one (KV, KQV, turboquant_m'
    >>> _no_theory_text(pd.DataFrame({"scheme": ["KQV"], "budget": [3.0], "dim": [96]}))[-60:]
    'power of two (its rotation pads the vector; no closed form).'
    """
    have = ", ".join(theory_schemes())
    ran = summary[summary["scheme"].isin(theory_schemes())] if "scheme" in summary else summary[:0]
    if ran.empty:
        return f"No closed-form prediction here: none of the schemes that have one ({have}) was run."
    head = (f"No closed-form prediction here: of the schemes that have one ({have}), "
            + ", ".join(dict.fromkeys(ran["scheme"])) + " ran only ")
    if (ran["budget"] != ran["budget"].round()).all():
        return head + "at budgets that are not whole bits."
    return head + ("where none applies: at n = 1 for a QJL-residual key side (no (n−1)-bit "
                   "part), or at a d that is not a power of two (its rotation pads the vector; "
                   "no closed form).")


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
    "Gaussian data (the Lloyd–Max gap: 2.7 dB at 2 bits, rising with n towards its high-rate "
    "limit, 4.24 dB at d = 128 and 10·log10(π√3/2) = 4.35 dB as d grows), plus 6.02 dB per bit of overhead. A gap far larger says the scheme "
    "spends its bits on something other than a small error (a 1-bit QJL residual buys "
    "unbiased inner products at a larger error: QKQV's keys, the QJL side's values) or "
    "leaves the source's structure (low rank, outlier channels) unused. On non-Gaussian "
    "data the limit is that of the Gaussian of equal covariance, the hardest such "
    "source: a negative gap is possible there. No row where the covariance does not "
    "exist (Student-t with ν ≤ 2) or the reconstruction is exact. See "
    "kvstats.analysis.theory_table and docs/theory.md.")


# ---------------------------------------------------------------------- the summary's counts
#: The summary's name of each test of the comparison table, and what one row of it tests.
_TEST_NAMES = {"sign": ("sign tests", "(case, n, pair, metric)"),
               "mann_whitney": ("Mann–Whitney tests", "(case, n, pair, metric)"),
               "ks": ("KS tests", "(case, n, pair, metric)"),
               "energy": ("energy tests (6D profile)", "(case, n, pair)"),
               "equivalence": ("equivalence tests (TOST at the margins δ)", "(case, n, pair, metric)")}
#: The verdicts in the summary's order, each with what it says (the words of the Methods).
_VERDICT_WORDS = {DIFFERENT: "different", DISTRIBUTIONS_DIFFER: f"significant (\"{DISTRIBUTIONS_DIFFER}\")",
                  NO_DIFFERENCE: f"{NO_DIFFERENCE} (each could have rejected on the most extreme "
                                 "data: its resolution, not its power)",
                  INCONCLUSIVE: INCONCLUSIVE,
                  NOT_RESOLVABLE: f"{NOT_RESOLVABLE} (could not have rejected: a limit of the "
                                  "design, not a finding about the schemes)"}


#: "no significant difference" said of energy tests some of which drew their relabellings
#: (a drawn test is resolvable where the most extreme data reject at least half the time)
_DRAWN_WORDS = {NO_DIFFERENCE: _VERDICT_WORDS[NO_DIFFERENCE].replace(
    "data:", "data, a drawn permutation test at least half the time:")}


def _verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Rows per verdict, in :data:`_VERDICT_WORDS`' order: a "not resolvable at …" verdict
    counted as "not resolvable", an equivalence verdict without its parenthesis."""
    kinds = rows["verdict"].map(lambda v: NOT_RESOLVABLE if v.startswith(NOT_RESOLVABLE)
                                else v.split(" (")[0])
    counts = kinds.value_counts()
    order = [v for v in _VERDICT_WORDS if v in counts] + [v for v in counts.index if v not in _VERDICT_WORDS]
    return {v: int(counts[v]) for v in order}
