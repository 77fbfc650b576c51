"""The report's document: its sections, assembled by :func:`build_document`.

:func:`kvstats.report.render.hypothesis_report` computes the tables and writes the
files; this module places them in the :class:`~kvstats.report.document.Document` a reader
sees: the summary (what the report found, counted from its own tables), the methods (the
header's bullets: :mod:`kvstats.report.header`), the metrics and units, the
equivalence section, the crossovers, the figures, the per-case tables, the rate–distortion
and theory tables and the trial-level tests. The sentences about the tests come from
:mod:`kvstats.report.wording` (their home), the tables from :mod:`kvstats.report.tables`,
the number formats from :mod:`kvstats.report.notation`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from kvstats.analysis import CASE_COLUMNS
from kvstats.analysis.compare import LOCATION_TESTS, NOT_RESOLVABLE
from kvstats.analysis.verdicts import DIFFERENT
from kvstats.analysis.crossover import agreed_rows
from kvstats.analysis.frame import label_digits
from kvstats.analysis.pairing import _not_compared
from kvstats.analysis.theory import BOUND_QUANTITIES, ratio_pairs
from kvstats.report.crossover_text import _crossover_section, crossover_summary_line
from kvstats.report.document import Document
from kvstats.report.header import _error_rate_condition, _set_after_sweep, header_lines
from kvstats.report.notation import (_case_key, _case_title, _cluster_spans, _dependent_cases, _num, _p, _pct,
                                     _unit_counts)
from kvstats.report.notation import figure_names as _figure_names
from kvstats.report.tables import (NO_GUARANTEE, NOT_INDEPENDENT_MARK, RATIO_NEAR_ALPHA_MARK, RATIO_NEAR_ALPHA_NOTE, _bound_fmt,
                                   _comparison_table, _floor_line, _heavy_keys, _interval_and_region,
                                   _mean_heavy, _ratio_near_alpha, _scheme_table, _theory_fmt,
                                   metrics_table, _no_difference_clause)
from kvstats.report.wording import (BOUND_NOTE, EQUIVALENCE_HEAVY_NOTE, EQUIVALENCE_NOT_SHOWN,
                                    EQUIVALENCE_REGIONS, HEAVY_MARK, IDENTICAL_PAIRS_NOTE,
                                    INCONCLUSIVE, _apart_text, _budget_text, _exact, _heavy_summary, _location_name,
                                    _no_pair_text, _no_theory_text, equivalence_verdict_text,
                                    _DRAWN_WORDS, _TEST_NAMES, _VERDICT_WORDS, _verdict_counts,
                                    heavy_note, tost_not_shown_resolvable)
from kvstats.results import DEFAULT_COMPARISONS, REAL, SweepResult
from kvstats.sweep.specs import _theory_aliases

__all__ = ["build_document"]


def _pairs_text(pairs: Sequence[tuple[str, str]], template: str) -> str:
    """The (mse, prod) scheme pairs of the variance ratios, each through ``template``."""
    if not pairs:
        return template.format(p="a scheme with a 1-bit QJL key residual", m="its MSE-only peer")
    return ", ".join(template.format(m=m, p=p) for m, p in pairs)


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
          f"equivalence (where the {_location_name(opts)} test could not have rejected, the rest of "
          "the family as observed, the row says so: there the data could not have shown a "
          "difference). A ratio TOST can always conclude equivalence from two units a side; an "
          f"inconclusive rank TOST row is marked \"{EQUIVALENCE_NOT_SHOWN}\" when no data of its size are "
          "known to reach α after the adjustment (`resolvable` False: not shown, "
          "docs/statistics.md, \"Resolution of a TOST row\"), where \"inconclusive\" is a limit "
          "of the design (a narrow margin at few units) more than of the data. Intervals are the "
          f"unadjusted {_pct(1 - 2 * opts['alpha'])} intervals of the "
          "estimate; the verdict uses the adjusted p-values.")
    counts = eq["verdict"].str.split(" \\(").str[0].value_counts()
    doc.p("Verdicts: " + ", ".join(f"{v}: {c}" for v, c in counts.items()) + ".")
    marked = [opts["equivalence_test"] == "ratio" and not math.isnan(r.pvalue) and _mean_heavy(r, heavy)
              for r in eq.itertuples(index=False)]
    near_alpha = [opts["equivalence_test"] == "ratio" and _ratio_near_alpha(
        r, opts["alpha"], opts.get("pairing", "none") == "trial") for r in eq.itertuples(index=False)]
    # an inconclusive row beside a location test that could not have rejected: its "neither a
    # difference" is the design's, not the data's
    key = ["scheme_a", "scheme_b", "budget", "budget_b", *CASE_COLUMNS, "metric"]
    loc = comp[comp["test"] == LOCATION_TESTS[opts.get("pairing", "none")]]
    blind = set(loc.loc[~loc["resolvable"] & ~loc["significant"], key].itertuples(index=False, name=None))
    no_difference = _no_difference_clause(_location_name(opts))
    doc.ul([f"{_case_title(r._asdict(), digits)}, n = {r.budget:g}"
            + (f" vs {r.budget_b:g}" if r.budget_b != r.budget else "")
            + f", {r.scheme_a} vs {r.scheme_b}, {r.metric}: "
            + f"**{equivalence_verdict_text(r.verdict, bool(r.identical_pairs), int(r.n_a))}**"
            + (f" {HEAVY_MARK}" if mark else "")
            + (f" {RATIO_NEAR_ALPHA_MARK}" if near else "")
            + (f" ({EQUIVALENCE_NOT_SHOWN})" if tost_not_shown_resolvable(r) else "")
            + (no_difference if r.verdict == INCONCLUSIVE
               and tuple(getattr(r, k) for k in key) in blind else "")
            + ("" if math.isnan(r.pvalue) else
               f" (estimate {_num(r.effect)}, {_pct(1 - 2 * opts['alpha'])} CI [{ends[0]}, "
               f"{ends[1]}], region [{ends[2]}, {ends[3]}], adjusted TOST p "
               f"{_p(r.pvalue_adjusted, opts['alpha'])})")
            for r, mark, near, ends in zip(eq.itertuples(index=False), marked, near_alpha,
                                           (_interval_and_region(e) for _, e in eq.iterrows()))])
    if any(marked):
        doc.p(EQUIVALENCE_HEAVY_NOTE)
    if any(near_alpha):
        doc.p(RATIO_NEAR_ALPHA_NOTE)
    if eq["identical_pairs"].any():
        doc.p(IDENTICAL_PAIRS_NOTE)


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
          "have adjusted p ≤ α, adjusted within this table's own family of "
          f"{int(comp_trials.attrs.get('n_tests', len(comp_trials)))} p-values, not with the "
          "report's. Full table: "
          "tables/comparisons_trial_level.csv.")


#: How far (dB) a mean of per-vector dB may sit from the pooled SNR before the report names
#: it: a code with alike per-vector errors stays within 0.19 dB on Gaussian and low-rank
#: keys (klt on low-rank 0.86), kivi's float16 window lifts it 7.6 dB at d = 128, N = 256
#: (docs/measurement.md).
SNR_GAP_DB = 1.0


def _snr_gap_text(summary: pd.DataFrame, digits: int | None = None, limit: int = 8) -> str:
    """The schemes whose mean of per-vector dB (snr_k, snr_v) is more than
    :data:`SNR_GAP_DB` from their pooled SNR, with both values ("" when none, or when the
    summary has no pooled SNR).

    Examples
    --------
    >>> import pandas as pd
    >>> rows = [("snr_k", 16.30), ("snr_k_pooled", 8.70), ("snr_v", 9.41), ("snr_v_pooled", 9.37)]
    >>> s = pd.DataFrame([{"distribution": "gaussian", "params": "-", "dim": 128, "n_keys": 256,
    ...                    "budget": 2.0, "scheme": "kivi", "metric": m, "mean": v} for m, v in rows])
    >>> _snr_gap_text(s)[:102]
    'The mean of per-vector dB is more than 1 dB from the pooled SNR for 1 of 2 (case, n, scheme, place)s: '
    >>> _snr_gap_text(s)[102:174]
    'kivi, n = 2, K: 16.30 vs pooled 8.70 dB (gaussian, d = 128, N = 256). Th'
    """
    if "metric" not in summary or not summary["metric"].isin(["snr_k_pooled", "snr_v_pooled"]).any():
        return ""
    keys = [*CASE_COLUMNS, "budget", "scheme"]
    wide = summary.pivot_table(index=keys, columns="metric", values="mean", sort=False, dropna=False)
    found, n = [], 0
    for place in ("k", "v"):
        col = f"snr_{place}"
        if f"{col}_pooled" not in wide or col not in wide:
            continue
        both = wide[[col, f"{col}_pooled"]].dropna()
        both = both[np.isfinite(both).all(axis=1)]
        n += len(both)
        for key, r in both[(both[col] - both[f"{col}_pooled"]).abs() > SNR_GAP_DB].iterrows():
            case = dict(zip(keys, key))
            found.append(f"{case['scheme']}, n = {case['budget']:g}, {place.upper()}: {r[col]:.2f} vs "
                         f"pooled {r[col + '_pooled']:.2f} dB ({_case_title(case, digits)})")
    if not found:
        return ""
    shown = "; ".join(found[:limit]) + (f"; and {len(found) - limit} more (tables/summary.csv)"
                                        if len(found) > limit else "")
    return (f"The mean of per-vector dB is more than {SNR_GAP_DB:g} dB from the pooled SNR for "
            f"{len(found)} of {n} (case, n, scheme, place)s: {shown}. Their per-vector SNR is "
            "spread, and the two weigh it differently: the mean of per-vector dB weighs every "
            "vector alike (vectors kept nearly exact, such as a full-precision window, lift it), "
            "the pooled SNR by energy (under heavy tails a few large vectors set it). Neither need "
            "be the SNR of a typical coded vector, and a winner on one is not one on the other: "
            "read both rows of their tests (snr_k with snr_k_pooled, snr_v with snr_v_pooled), "
            "the pooled one being what the rate–distortion limit bounds and the Shannon–φ planes "
            "of keys and values plot, and the attention metrics.")


#: exp(mean H) up to this: "concentrated on few keys" (recall@5's 5); from N/2 up: "near uniform".
FEW_KEYS = 5


def _sharpness_texts(frame: pd.DataFrame) -> dict[tuple, str]:
    """Case → a line on its trials' exact attention entropy (``attn_entropy``; {} without).

    >>> f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 128, "n_keys": 256,
    ...                   "trial": [0, 1, 0, 1], "attn_entropy": [5.0, 5.1, 5.0, 5.1]})
    >>> _sharpness_texts(f)[("gaussian", "-", 128, 256)][:73]
    'Exact attention: entropy H mean 5.05 nats (range 5 to 5.1 over 2 trials; '
    """
    if "attn_entropy" not in frame.columns:
        return {}
    # one value per trial (every scheme's, equal to rounding): the smallest, in trial order
    per_trial, out = frame.groupby([*CASE_COLUMNS, "trial"])["attn_entropy"].min().dropna(), {}
    for key, g in per_trial.groupby(level=list(CASE_COLUMNS), sort=False):
        h, n = g.to_numpy(np.float64), int(key[CASE_COLUMNS.index("n_keys")])
        m = h.mean()
        reading = ("concentrated on few keys" if m <= math.log(FEW_KEYS) else "near uniform"
                   if m >= math.log(n / 2) else "between the two")   # (N <= 10: both may hold)
        out[key] = (f"Exact attention: entropy H mean {_num(m)} nats (range {_num(h.min())} to "
                    f"{_num(h.max())} over {len(h)} trial{'' if len(h) == 1 else 's'}; ln N = {_num(math.log(n))} for uniform"
                    f" attention); exp(mean H) = {math.exp(m):.3g} of the {n} keys effectively attended: "
                    f"{reading} (rule: concentrated on few keys when exp(mean H) ≤ {FEW_KEYS}, else near "
                    f"uniform when ≥ N/2). A description of the trials, the same for every scheme: not tested.")
    return out


def _not_resolvable_count(count: int, agreed: int, paired: bool = True, test: str = "sign") -> str:
    """The summary's count of "not resolvable" rows, those where no unit tells the schemes
    apart (``agreed``, :func:`kvstats.analysis.crossover.agreed_rows`: no pair differs, or
    two samples' values all one) apart: there the two schemes' values were equal on every
    unit, which is a finding, not a limit of the design.

    Examples
    --------
    >>> print(_not_resolvable_count(22, 13))  # doctest: +ELLIPSIS
    22 not resolvable (could not have rejected): 9 because too few pairs differ (...), 13 because no pair differs at all (...)
    >>> print(_not_resolvable_count(19, 3, paired=False))  # doctest: +ELLIPSIS
    19 not resolvable (could not have rejected): 16 because the samples' sizes and ties could not reach α (...), 3 because no value differs at all (...)
    """
    if not agreed:
        return f"{count} {_VERDICT_WORDS[NOT_RESOLVABLE]}"
    why = ("its units or permutations could not reach α" if test == "energy" else
           "too few pairs differ" if paired else "the samples' sizes and ties could not reach α")
    limited = (f"{count - agreed} because {why} (a limit of the design, not a finding about the "
               "schemes), " if count > agreed else "")
    return (f"{count} {NOT_RESOLVABLE} (could not have rejected): {limited}{agreed} because no "
            f"{'pair' if paired else 'value'} differs at all (the two schemes' values were equal on "
            "every unit: a finding, with no direction to test)")


def _trials_per_cluster(trials: pd.DataFrame) -> list[int]:
    """Fewest and most trials in one (cell, cluster); no cluster: its own (aggregate_clusters)."""
    n = trials.assign(cluster=trials["cluster"].fillna(trials["trial"])).groupby(
        [*CASE_COLUMNS, "budget", "scheme", "cluster"], sort=False, dropna=False).size()
    return sorted({int(n.min()), int(n.max())})


def _summary_section(doc: Document, summary: pd.DataFrame, theory: pd.DataFrame,
                     comp: pd.DataFrame, cross: pd.DataFrame, opts: dict[str, Any], unit: str,
                     clustered: bool, heavy: bool, after: dict[str, Any] | None = None,
                     per_cluster: str | None = None, dependent: bool = False, partial: bool = False,
                     apart: Sequence[tuple] = (), asked: bool = True) -> None:
    """What the report found, counted from its own tables (comparisons.csv's verdicts,
    crossovers.csv, the summary's ‡ marks): no test and no number of its own (``after``:
    header._set_after_sweep's options, named in the family's line; ``per_cluster``: :func:`_cluster_spans`; ``dependent``: trials of shared clusters tested as
    units, by request: no error rate claimed; ``partial``: in some cases only; ``apart``:
    the pairs not compared, :func:`~kvstats.analysis.pairing._not_compared`, ``asked``
    for or the default pairs)."""
    doc.h(2, "Summary")
    one = {"trials": "trial", "clusters": "cluster", "texts": "text"}[unit]
    lines = []
    n = int(comp.attrs.get("n_tests", 0))
    paired = opts.get("pairing", "none") == "trial"
    design = ("paired (pairing = \"trial\": each scheme's value on a "
              f"{one} matched with the other's on the same {one})" if paired else
              "two independent samples per pair (pairing = \"none\")")
    sizes = sorted(set(_unit_counts(summary).astype(int)))
    # a mean's count is of units (texts when clustered: not trials); each unit's trials said apart
    span = lambda s, u: f"{s[0]}{'' if len(s) == 1 else f'–{s[-1]}'} {u if s[-1] > 1 else u[:-1]}"
    # each kind of case's texts (or clusters) and trials apart (per_cluster: _cluster_spans)
    of_unit = (f"the {one}" + (f", its trials averaged first ({per_cluster})" if clustered and per_cluster
                               else f" ({span(sizes, unit)} per mean)" if sizes else ""))
    if n:
        # the bound's condition on the tests' dependence, worded once (the Methods' error-rate line)
        rate, dep = _error_rate_condition(opts["correction"])
        whose = "the clustered cases' " if partial else ""   # only those marked (mixed with synthetic)
        bound = (NO_GUARANTEE + f"; {whose}verdicts marked \"{NOT_INDEPENDENT_MARK}\"" if dependent else
                 f"{rate} ≤ {opts['alpha']:g}, {dep}")
        how = ("option energy = false, set after the sweep" if "energy" in (after or {})
               else "[report] option energy = false")
        left_out = "" if opts.get("energy", True) else f", no 6D energy test (left out by the {how})"
        late = f"; set after the sweep, not declared in its config: {', '.join(after)} (see Methods)" if after else ""
        lines.append(f"Family: {n} p-value{'' if n == 1 else 's'} adjusted together by {opts['correction']} at "
                     f"α = {opts['alpha']:g} ({bound}){left_out}{late}; design: {design}; "
                     f"unit: {of_unit}"
                     + ("; the trial-level tests (not independent) are a family of their own, "
                        "not counted here." if clustered else "."))
    else:
        lines.append(f"No test: no comparison pair was compared (\"Crossovers of the winner across "
                     f"budgets\" says why); unit: {of_unit}.")
    if len(apart):   # a pair asked for and dropped is named here, not left out without a word
        lines.append(f"**Not compared** ({'asked for' if asked else 'default pairs'}): {_apart_text(apart)}; "
                     "see docs/usage.md, \"Equal n is not equal storage\".")
    tests = list(_TEST_NAMES)
    for test, rows in sorted(comp.groupby("test", sort=False),
                             key=lambda g: tests.index(g[0]) if g[0] in tests else len(tests)):
        name, each = _TEST_NAMES.get(test, (f"{test} tests", "row"))
        counts = _verdict_counts(rows)
        winner = (" (a winner)" if test in LOCATION_TESTS.values() else
                  " (the distributions differ)" if test == "ks" else "")
        untested = rows[rows["pvalue"].isna()] if test == "equivalence" else rows[:0]
        rows = rows.drop(untested.index)   # a TOST that could not run is no test of the family
        text = f"{len(rows)} {name if len(rows) != 1 else name.replace('tests', 'test', 1)}, one per {each}: "
        # after the TOSTs' line, or alone where no TOST ran
        apart = [f"{len(untested)} equivalence row{'' if len(untested) == 1 else 's'} without a TOST, "
                 "so not in the family (each row says why: e.g. a mean of 0, to which no ratio is "
                 "defined): " + ", ".join(f"{c} {v}" for v, c in _verdict_counts(untested).items())
                 + "."] if len(untested) else []
        if len(untested):
            counts = _verdict_counts(rows)
            if rows.empty:
                lines += apart
                continue
        if test == "equivalence":   # a TOST concludes "equivalent" or nothing: "different" is the location test's
            eq = counts.pop("equivalent within δ", 0)
            hidden = int(sum(tost_not_shown_resolvable(r) for r in rows.itertuples(index=False)))
            rest = [f"{c} with a significant {_location_name(opts)} test (\"different\")" if v == DIFFERENT else
                    f"{c} {v}" + (f" ({hidden} of them {EQUIVALENCE_NOT_SHOWN})" if v == INCONCLUSIVE and hidden else "")
                    for v, c in counts.items()]
            text += f"{eq} equivalent within δ, {len(rows) - eq} not" + (": " + ", ".join(rest) if rest else "")
        else:
            drawn = test == "energy" and not rows["note"].map(_exact).all()
            words = {**_VERDICT_WORDS, **_DRAWN_WORDS} if drawn else _VERDICT_WORDS
            agreed = int(agreed_rows(rows).sum())
            text += ", ".join(_not_resolvable_count(c, agreed, paired, test) if v == NOT_RESOLVABLE else
                              f"{c} {words.get(v, v)}" + (winner if v == DIFFERENT else "")
                              for v, c in counts.items())
        floor = _floor_line(rows, opts, comp.attrs.get("n_tests")) if test == "energy" else ""
        lines += [text + "." + (f" {floor}" if floor else ""), *apart]
    if not comp.empty:
        lines.append(crossover_summary_line(comp, cross))
    # no mark at all where no mean is marked (the report has no ‡ then, and no footnote)
    lines.append(f"Heavy tails and few nonzero values ({HEAVY_MARK}: the mean's bootstrap interval "
                 f"is not reliable): {_heavy_summary(summary, theory)}" if heavy else
                 "Heavy tails and few nonzero values: no mean of the report's tables is marked.")
    if not comp.empty:
        kl = not cross.empty and bool(((cross["metric"] == "kl") & ~cross["crossover"]).any())
        lines.append("Winners per budget: the winner column of each pair table under "
                     "\"…: n = … bits per coordinate\"" + (" (a pair across budgets: \"…: A at n = … vs B at "
                                                          "n = …\")" if (comp["budget"] != comp["budget_b"]).any() else "")
                     + (", and for the attention KL the list under \"Crossovers of the winner "
                        "across budgets\"" if kl else "")
                     + "; every test's row is in tables/comparisons.csv.")
    doc.ul(lines)


def build_document(result: SweepResult, summary: pd.DataFrame, comp: pd.DataFrame, cross: pd.DataFrame,
              theory: pd.DataFrame, figs: dict[str, Path], opts: dict[str, Any], unit_text: str,
              comp_trials: pd.DataFrame | None, *, comparisons: Sequence[tuple[str, str]] | None = None,
              figure_names: dict[tuple, str] | None = None,
              unplotted: Mapping[tuple, Sequence[str]] | None = None,
              dependent: Any = False) -> Document:
    """The report's document: summary, methods, equivalence, crossovers, figures, per-case
    tables, theory.

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
    figure_names : dict, optional
        Each case's and pair's figure name, as the figures were saved
        (:func:`~kvstats.report.notation.figure_names`; None: that function's names of the
        summary's cases and ``comparisons``).
    unplotted : mapping, optional
        Case key (:func:`~kvstats.report.notation._case_key`) → the Shannon–φ planes of the
        case with nothing to place (every mean φ 0), said in the case's section.
    dependent : bool or collection of tuple
        Whether the tests took as units trials that share clusters (unit = "trial" by
        request on clustered data): then no error rate is claimed and every verdict of a
        test is marked :data:`~kvstats.report.tables.NOT_INDEPENDENT_MARK`. A collection: the
        keys (:func:`~kvstats.report.notation._case_key`) of the cases where they did, the
        only ones whose verdicts are marked (render passes the clustered cases).

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
    >>> [line for line in md.splitlines() if line.startswith("## ")][:3]
    ['## Summary', '## Methods', '## Metrics and units']
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
    if comparisons is None:      # as hypothesis_report chooses them
        comparisons = opts.get("comparisons") or result.config.comparisons
    names = figure_names if figure_names is not None else _figure_names(
        summary[list(CASE_COLUMNS)].drop_duplicates().to_dict("records"), comparisons)
    after = _set_after_sweep(result, opts, comparisons)   # options not declared by the config
    dep_cases, every = _dependent_cases(dependent, summary)   # whose verdicts get the mark
    doc.h(1, "kvstats hypothesis report")
    # what the report found first, from the tables below; then how (the header's bullets)
    apart = _not_compared(summary, comparisons)   # pairs the rule leaves uncompared
    _summary_section(doc, summary, theory, comp, cross, opts, unit, clustered, heavy, after,
                     _cluster_spans(result.frame) if clustered else None, bool(dep_cases), not every,
                     apart, tuple(map(tuple, comparisons)) != DEFAULT_COMPARISONS)
    doc.h(2, "Methods")
    doc.ul(header_lines(result, summary, theory, comp, opts, unit_text, unit=unit, heavy=heavy,
                        after=after, dependent=dependent))
    doc.h(2, "Metrics and units")
    doc.table(metrics_table())
    doc.p(_budget_text(summary, unit))
    gaps = _snr_gap_text(summary, digits)
    if gaps:
        doc.p(gaps)
    _equivalence_section(doc, comp, opts, digits, heavy_keys)

    _crossover_section(doc, comp, cross, summary, _no_pair_text(comparisons, summary), digits)

    if any(name in figs for name in ("kl_vs_bits", "recall_vs_bits", "lowrank_vs_heavytail")) or \
            any(name.startswith("crossover_") for name in figs):
        doc.h(2, "Figures across cases")
    # the figures mark heavy-tailed means hollow (plots._bits_plot): their error bars are not valid;
    # few_nonzero screens a fraction (recall) by its values below 1 as well as its nonzero ones
    hollow = (" Hollow markers, where drawn: a heavy right tail (Hill α < 2 at 95%) or a mean "
              "carried by fewer than 10 {} (the tables' ‡), where no "
              "interval of the mean, error bar included, is valid.")
    # the bars are the tables' intervals (plots._bits_plot: summary_table's arguments)
    bars = (f"error bars: the tables' {_pct(opts['confidence'])} bootstrap (BCa) intervals of the "
            f"mean over {unit}")
    for fname, caption in (("kl_vs_bits", "Mean attention KL vs bits per coordinate with overhead "
                            "(log axis: a mean of 0, an exact scheme's, is left off and named in its "
                            f"panel; {bars}; one reaching 0 is cut at the axis, ▼, and named in its "
                            "panel)." + hollow.format("nonzero values")),
                           ("recall_vs_bits", "Mean top-5 recall vs bits per coordinate with "
                            f"overhead ({bars}; an exact scheme, KL 0 on every trial, is a dotted line "
                            "at its mean, named in its panel, not a point at its bits)."
                            + hollow.format("values below 1 (or above 0)")),
                           ("lowrank_vs_heavytail", "Per-trial KL (box plots; log axis, values "
                            "below 1e-6 nats drawn at 1e-6) on low-rank and heavy-tailed keys"
                            + (", and Gaussian ones," if "distribution" in summary
                               and (summary["distribution"] == "gaussian").any() else "")
                            + " per scheme, budget and d (one box per case; under a box, the share "
                            "of its trials below 1e-6, where any).")):
        if fname in figs:
            doc.fig(figs[fname], caption)
    # each pair's own figure, by the name render saved it under (the caption: the labels)
    for (kind, *pair), name in names.items():
        if kind == "crossover" and name in figs:
            from kvstats.report.plots import CROSSOVER_METRICS   # figures only: matplotlib's module
            doc.fig(figs[name], f"{'Paired dominance' if paired else 'Rank-biserial r'} across budgets "
                    f"({pair[0]} vs {pair[1]}) for "
                    f"{', '.join(m for m in CROSSOVER_METRICS if m in set(comp['metric']))} (the "
                    f"crossover section above covers every tested metric); {'dominance' if paired else 'r'} > 0: the first scheme's values "
                    "are larger (better for SNR and recall@5, "
                    "worse for φ and KL: each panel says which); filled = significant after "
                    "adjustment; bars: the unadjusted 95% interval of the effect "
                    f"({'Clopper–Pearson' if paired else 'Newcombe'}), which can exclude 0 where the "
                    "adjusted test does not reject"
                    + ("; no point where no pair differs (the dominance is 0/0, \"—\" in the "
                       "tables)." if paired else "."))

    if any(name.startswith("shannon_phi_") for name in figs):
        from kvstats.report.plots import SHANNON_PHI_NOTE
        doc.h(2, "Reading the Shannon–φ planes")
        doc.p(SHANNON_PHI_NOTE)
        if clustered:
            doc.p(f"Here the unit is the cluster: every mean, cross and faint dot of these figures "
                  f"is over {unit} (each dot one of the {unit}, the mean of its trials), not over "
                  "trials.")
    sharpness = _sharpness_texts(result.frame)
    for case_key, case_sum in summary.groupby(list(CASE_COLUMNS), sort=False):
        case = dict(zip(CASE_COLUMNS, case_key))
        title = _case_title(case, digits)
        doc.h(2, title)
        if case_key in sharpness:
            doc.p(sharpness[case_key])
        for place in ("k", "v", "t"):
            name = names.get(("shannon_phi", place, _case_key(case)))   # the case's own figure
            if name in figs:
                pooled = place != "t" and f"snr_{place}_pooled" in set(case_sum["metric"])
                doc.fig(figs[name], f"Shannon–φ plane ({place.upper()}), {title}: mean "
                        f"{'pooled SNR' if pooled else 'SNR'} (up is "
                        "better) against mean direction error φ (log scale, left is better), each "
                        "scheme's budgets n joined in order; "
                        # the second scheme's trajectory is dashed too: name the limit's look
                        + ("grey dashed horizontal lines labelled \"limit, n = …\" (where one "
                           "exists): the rate–distortion limit at the bits per coordinate of the "
                           "point's side (the budget's n; a K{a}V{b} scheme's keys at a, values at b, "
                           "labelled so; norms and scales add to what is stored: a point may lie "
                           "above it). "
                           if place != "t" else "no limit line (T is not coded). ")
                        + "See \"Reading the Shannon–φ planes\".")
        places = (unplotted or {}).get(_case_key(case))
        if places:   # render._figures found nothing to place: say so where the planes would be
            doc.p(f"No Shannon–φ plane of the {' and the '.join(places)}: every scheme's mean φ is 0 "
                  "at every budget (exact on every trial), and 0 has no place on the plane's log axis.")
        case_comp = comp
        for col in CASE_COLUMNS:
            case_comp = case_comp[case_comp[col] == case[col]]
        for budget, bsum in case_sum.groupby("budget", sort=True):
            doc.h(3, f"{title}: n = {budget:g} bits per coordinate")
            doc.table(_scheme_table(bsum, unit))
            bcomp = case_comp[case_comp["budget"] == budget]
            same = bcomp["budget_b"] == budget
            # a pair across budgets (K4V2 at 3 vs K4V4 at 4) under a heading naming both n
            tables = [(None, bcomp[same])] + list(bcomp[~same].groupby(["scheme_a", "scheme_b", "budget_b"],
                                                                      sort=False))
            for pair, pcomp in tables:
                if pair is not None:
                    doc.h(3, f"{title}: {pair[0]} at n = {budget:g} vs {pair[1]} at n = {pair[2]:g}")
                if not pcomp.empty:
                    doc.table(_comparison_table(pcomp, heavy_keys, ratio, opts["alpha"],
                                                _case_key(case) in dep_cases))
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
    named = _theory_aliases(result.config.schemes)   # TQ3: turboquant_mse's default settings
    if theory.empty:
        doc.p(_no_theory_text(summary.assign(scheme=summary["scheme"].map(lambda s: named.get(s, s)))))
    else:
        present = {named.get(s, s) for s in summary["scheme"]}
        pairs = [(m, p) for m, p in ratio_pairs() if m in present and p in present]
        doc.p("`k_snr_db`: predicted per-key SNR of the keys from the Lloyd–Max distortion D_n of "
              "the sphere-coordinate density (relative MSE d_pad·D_n; with a 1-bit Gaussian QJL "
              "residual d_pad·D_{n−1}·(π/2 − 1/d_pad)), as −10·log10 of it; the relative MSE is "
              "exact for isotropic Gaussian keys (distribution 'gaussian'; the unrotated KV has a "
              "row there only), a yardstick otherwise. Its measured value is the mean of per-key "
              "dB (`snr_k`), which by Jensen's inequality lies above the dB of the mean error: on "
              "those keys the last column (measured − predicted, dB, with the measured interval "
              "shifted by the exact prediction) is a small positive offset (its interval need not "
              "contain 0), not by itself a failure of the closed form (the "
              "energy-pooled SNR of \"Distance to the rate–distortion limit\" is the measured "
              "quantity closest to it). "
              f"`ip_var_ratio_same_budget`: variance of the q·k error of "
              f"{_pairs_text(pairs, '{p} over {m}')} at equal n, predicted "
              f"(π/2 − 1/d_pad)·D_{{n−1}}/D_n (→ 2π). `ip_var_ratio_residual`: "
              f"{_pairs_text(pairs, '{p} at n over {m} at n−1')}, predicted π/2 − 1/d_pad (→ π/2; "
              "(π/2 − 1/d)·d/d_pad where d is padded to d_pad, the residual living in R^d; the "
              "equal-n ratio has no closed form there and is left out); their last column is "
              "measured / predicted, with the measured interval divided by the prediction. "
              "See kvstats.analysis.theory_table. Measured: the mean (for the ratios, the ratio "
              f"of the two means) with a 95% BCa bootstrap CI ({opts['bootstrap_resamples']} "
              "resamples; a ratio resamples as pairs the units it divides (trials; texts on a "
              "clustered capture), both "
              "schemes having coded the same ones; a row with paired = False in theory.csv, "
              "whose two cells hold different trials, resamples them apart)."
              + (f" Here every measured mean and interval is over {unit} (each one's trials "
                 "averaged first), as the rate–distortion gaps above." if clustered else ""))
        doc.table(_theory_fmt(theory, digits))

    if comp_trials is not None:
        _trial_level_section(doc, comp_trials, opts)
    doc.p("Full-precision numbers: tables/*.csv and report.json.")
    if heavy:
        doc.p(heavy_note(opts))
    return doc
