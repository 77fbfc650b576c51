"""The hypothesis-test report: Markdown, self-contained HTML, CSV tables, JSON, figures.

Computes the tables (:mod:`kvstats.analysis`; on cluster means when the trials come in
clusters) and writes the files; the document is :mod:`kvstats.report.sections` (its
sentences :mod:`~kvstats.report.wording`, its tables :mod:`~kvstats.report.tables`), the
options' schema :mod:`kvstats.report.options`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from kvstats.analysis import (CASE_COLUMNS, PROFILE_METRICS, aggregate_clusters, check_comparisons,
                              check_frame, compare_schemes, find_crossovers, summary_table,
                              theory_table)
from kvstats.analysis.clustered import N_IN_CLUSTER, TrialsAsUnitsWarning
from kvstats.analysis.compare import LOCATION_TESTS, MAX_FAMILY_PERMUTATIONS, default_metrics
from kvstats.analysis.frame import _in_trial_order
from kvstats.analysis.pairing import _check_design, _drop_not_compared, _matched, _pair_positions
from kvstats.analysis.tested_metrics import _check_metrics
from kvstats.analysis.theory import nominal_bounds, real_case_spectra
from kvstats.report.document import records, to_jsonable
from kvstats.plugins import relocate_plugins
from kvstats.report.folder import REPORT_RECORD, _commit, _release_staging, _staging_folder
from kvstats.report.header import _set_after_sweep
from kvstats.report.notation import _case_key, _cluster_spans, figure_names
from kvstats.report.options import validate_report_options
from kvstats.report.sections import _theory_aliases, build_document
from kvstats.report.tables import NOT_INDEPENDENT_MARK
from kvstats.report.wording import _resolution
from kvstats.results import DEFAULT_COMPARISONS, REAL, SweepResult, load_result

__all__ = ["Report", "hypothesis_report", "REPORT_RECORD"]

@dataclass(frozen=True)
class Report:
    """What :func:`hypothesis_report` wrote: its tables and the paths of every file.

    Examples
    --------
    >>> import kvstats, tempfile
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions":
    ...     ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 12}, executor="serial",
    ...     progress=False)
    >>> rep = kvstats.hypothesis_report(res, tempfile.mkdtemp(), figures=False,
    ...                                 energy_resamples=19, bootstrap_resamples=99)
    >>> rep.files["markdown"].name, rep.figures, sorted(set(rep.comparisons["test"]))
    ('report.md', {}, ['energy', 'sign'])
    """

    summary: pd.DataFrame
    comparisons: pd.DataFrame
    crossovers: pd.DataFrame
    theory: pd.DataFrame
    files: dict[str, Path] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)


def _options(result: SweepResult, overrides: dict[str, Any]) -> dict[str, Any]:
    """The config's ``[report]`` table with the keyword overrides, validated (one schema)."""
    merged = {**dict(result.config.report), **{k: v for k, v in overrides.items() if v is not None}}
    return validate_report_options(merged)


def hypothesis_report(result: SweepResult | str | os.PathLike, out_dir: str | os.PathLike, *,
                      alpha: float | None = None,
                      correction: str | None = None,
                      comparisons: Sequence[tuple[str, str]] | None = None,
                      energy_resamples: int | None = None, bootstrap_resamples: int | None = None,
                      seed: int | None = None, figures: bool | None = None,
                      energy_resolution: str | None = None,
                      equivalence: Mapping[str, float] | None = None,
                      equivalence_test: str | None = None, unit: str | None = None,
                      pairing: str | None = None, metrics: Sequence[str] | None = None,
                      energy: bool | None = None, progress: bool = False,
                      plugins: Sequence[str | os.PathLike] | None = None) -> Report:
    """Write the hypothesis-test report of a sweep to ``out_dir``.

    Files: ``report.md`` (figures linked), ``report.html`` (self-contained, figures as
    base64 PNG), ``report.json`` (every number, non-finite values as strings),
    ``tables/{summary,comparisons,crossovers,theory}.csv`` (a missing value written "NaN",
    as in the sweep's own tables: :func:`kvstats.results.read_table` and
    ``pandas.read_csv`` both read them with numeric columns), ``figures/*.{png,svg}`` and
    :data:`REPORT_RECORD` (the files written, with their hashes). A report written into a
    folder that holds an earlier one first removes the earlier report's files that are
    unchanged since it wrote them (its record says which), so no stale figure stays;
    every other file is left alone. The files are written into a hidden staging folder
    inside ``out_dir`` and then moved into place under a record marked in progress,
    ``report.json`` last (:mod:`kvstats.report.folder`): a report interrupted while writing
    (KeyboardInterrupt, a crash, a full disk) leaves the folder as it was, or with a
    record that the retry takes and whose files it replaces; a ``report.json`` is only
    ever beside the whole report it describes.

    Contents: per case and budget, every scheme's mean and bootstrap 95% CI of each
    metric with KL p99/max and bits per coordinate (nominal and with overhead); pairwise
    tests under the paired design (``pairing="trial"``, the default: each scheme's value
    matched with the other's on the same trial or text: the sign test with the paired
    dominance, > 0 when the first scheme's values are larger, standardised 6D energy
    tests with within-pair swaps, paired TOSTs, no KS) or, with ``pairing="none"``,
    Mann–Whitney (rank-biserial r with CI), KS (exact under ties) and free-relabelling
    energy tests; equivalence tests for the metrics given margins; with every p-value of
    the report adjusted together
    (Holm, or Benjamini–Hochberg with ``correction="fdr_bh"``, ...) and the winner per
    metric; each energy test may draw the permutations the family needs to reject
    (sequential, stopping early when clearly null), and a test that could not have
    rejected reads "not resolvable at …", never "no significant difference" (see
    :func:`kvstats.analysis.compare_schemes`). When the frame's trials come in clusters
    (real caches: the trials of one text; ``unit="auto"``) the tests and intervals use
    the cluster means (:func:`kvstats.analysis.aggregate_clusters`) and the trial-level
    tests appear only in ``tables/comparisons_trial_level.csv`` and a section labelled
    "trial-level (not independent)". Crossovers of the winner across
    budgets; closed-form predictions beside measurements; the figures. Means whose
    bootstrap CI is not reliable (``ci_reliable`` False in the summary or theory table:
    the 95% upper bound of Hill's tail index below 2, an infinite-variance right tail)
    carry a ‡ and a footnote;
    the bootstrap's :class:`~kvstats.stats.HeavyTailWarning` is not raised per row.

    Parameters
    ----------
    result : SweepResult or path
        A :func:`kvstats.run_sweep` result or a sweep output directory.
    out_dir : path
        Where to write: a new or empty folder, or one kvstats wrote (a sweep's folder, an
        earlier report's); a folder of someone else's files is a ValueError before
        anything is written (:func:`kvstats.sweep.store.check_out_folder`).
    alpha, correction, energy_resamples, bootstrap_resamples, seed, figures : optional
        Override the config's ``[report]`` options (defaults 0.05, "holm", 499, 999, 0,
        True). Every option, its allowed values and meaning:
        :data:`kvstats.report.options.REPORT_OPTIONS`.
    energy_resolution, equivalence, equivalence_test, unit, pairing : optional
        Override the config's options of the same names (defaults "family", no margins,
        "ratio", "auto", "trial").
    metrics : sequence of str, optional
        The metrics tested one by one, whose tests (with the 6D energy tests unless
        ``energy`` is False) form the family the correction adjusts together (default,
        or the config's ``metrics``: every report metric and the pooled SNRs the frame
        has). Choose them before looking at results: a smaller family lowers the p-value
        each test needs. The others keep their summary tables and figures, without test
        rows; the header names the family's metrics and size.
    energy : bool, optional
        Whether the family holds a 6D energy test per compared (case, budget, pair)
        (default, or the config's ``energy``: True). False runs none, so the family is
        the ``metrics``' tests only: with ``metrics=["kl"]``, a primary endpoint
        declared before looking (docs/statistics.md, "Declaring a primary endpoint").
    comparisons : sequence of (str, str), optional
        Scheme pairs (default: the config's ``comparisons``); each label must be a scheme
        label of the sweep (a ValueError names the labels it has); an item that is not
        a pair of two labels is a TypeError (:func:`kvstats.analysis.check_comparisons`).
    progress : bool
        A progress bar (stderr) over the energy tests, which dominate a large report's
        time (the ``kvstats`` command shows it on a terminal unless ``--no-progress``).
    plugins : sequence of path, optional
        With ``result`` a sweep directory: the sweep's plugin files where they are now,
        imported in place of the paths its manifest recorded
        (:func:`kvstats.plugins.relocate_plugins`: matched by SHA-256, else by file name;
        another version is a ``UserWarning``), as ``kvstats report --plugins``.

    Returns
    -------
    Report

    Raises
    ------
    ValueError, TypeError
        Bad input, before any compute and before any file is written: an option, a pair,
        the frame (a NaN metric, a real trial without its text, trials two schemes do not
        share under ``pairing="trial"``), a tested metric it lacks, a family whose energy
        tests would each need more than
        :data:`~kvstats.analysis.compare.MAX_FAMILY_PERMUTATIONS` permutations. One raised
        later carries the note ``[report: computing ...]``: a bug, whose traceback says
        where (``kvstats report`` prints it and exits 1).

    Examples
    --------
    >>> import kvstats, tempfile
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV", "QKQV"], "budgets": [3, 4],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 20},
    ...     executor="serial", progress=False)
    >>> rep = kvstats.hypothesis_report(res, tempfile.mkdtemp(), energy_resamples=99,
    ...                                 bootstrap_resamples=199, figures=False)
    >>> sorted(rep.files)
    ['comparisons', 'crossovers', 'html', 'json', 'markdown', 'summary', 'theory']

    A family of the KL tests only (with the energy tests: 3 pairs at 2 budgets, 2 tests each):

    >>> rep = kvstats.hypothesis_report(res, tempfile.mkdtemp(), metrics=["kl"], figures=False,
    ...                                 energy_resamples=99, bootstrap_resamples=199)
    >>> sorted(set(rep.comparisons["metric"])), rep.comparisons.attrs["n_tests"]
    (['kl', 'profile_6d'], 12)

    A primary endpoint, the KL sign tests alone (no energy tests: 3 pairs at 2 budgets):

    >>> rep = kvstats.hypothesis_report(res, tempfile.mkdtemp(), metrics=["kl"], energy=False,
    ...                                 figures=False, bootstrap_resamples=199)
    >>> sorted(set(rep.comparisons["test"])), rep.comparisons.attrs["n_tests"]
    (['sign'], 6)
    """
    if isinstance(result, (str, os.PathLike)):
        relocate_plugins(result, plugins or ())   # before the config imports them
        with warnings.catch_warnings():
            if comparisons is not None:   # the config's pairs are not this report's: not warned of
                warnings.filterwarnings("ignore", "no comparison", UserWarning)
            result = load_result(result)
    elif plugins:
        raise ValueError("plugins applies to a sweep directory (result=path): a SweepResult's "
                         "plugins are already imported")
    if not isinstance(result, SweepResult):
        raise TypeError(f"result must be a SweepResult or a sweep directory; received {type(result).__name__}")
    opts = _options(result, {"alpha": alpha, "correction": correction, "energy_resamples": energy_resamples,
                             "bootstrap_resamples": bootstrap_resamples, "seed": seed, "figures": figures,
                             "energy_resolution": energy_resolution, "equivalence": equivalence,
                             "equivalence_test": equivalence_test, "unit": unit,
                             "pairing": pairing, "metrics": metrics, "energy": energy})
    given = comparisons is not None   # else the config's pairs, which it checked and warned of
    if not given:
        comparisons = opts["comparisons"] or result.config.comparisons
    else:   # checked before the folder is touched (a typo would give a report of 0 tests)
        comparisons = check_comparisons(comparisons, result.frame["scheme"].unique(),
                                        {s.display(): s.name for s in result.config.schemes})
    # the pairs were checked (and a warning given) once, by the config or just above: of
    # the default pairs the tests get only those present, so compare_schemes does not warn
    # again for each frame it tests
    labels = set(result.frame["scheme"])
    present = ([(a, b) for a, b in comparisons if a in labels and b in labels]
               if tuple(map(tuple, comparisons)) == DEFAULT_COMPARISONS else comparisons)
    from kvstats.sweep.store import check_out_folder   # the store sits below; lazy: no cycle

    out = Path(out_dir)
    check_out_folder(out, "report", report_of=result)   # no one else's files, no other sweep
    out.mkdir(parents=True, exist_ok=True)   # early: an unusable path fails before the compute
    tic = time.perf_counter()
    check_frame(result.frame)   # a defect of the data (a NaN metric): one line, before any compute
    # the sweep's order (grid, then trial), whatever order the frame's rows come in: the
    # report is a function of the data (a mean's last bits follow its summation order)
    trials = _in_trial_order(result.frame, [c["id"] for c in result.manifest.get("cells") or ()])
    clustered = _clustered(trials)
    use_clusters = opts["unit"] == "cluster" or (opts["unit"] == "auto" and bool(clustered))
    frame = aggregate_clusters(trials) if use_clusters else trials
    # a pair that no budget compares: warned of (the config did for its pairs of schemes at
    # budgets it knows, not fixed ones), dropped, and named in the Summary
    fixed = None if given else {s.display() for s in result.config.schemes if s.fixed_budget}
    present = _drop_not_compared(trials, present, fixed, report=True)

    def compare(f: pd.DataFrame, **changed: Any) -> pd.DataFrame:
        kw = dict(alpha=opts["alpha"], correction=opts["correction"],
                  energy_resamples=opts["energy_resamples"],
                  energy_resolution=opts["energy_resolution"], energy_stop=opts["energy_stop"],
                  seed=opts["seed"], equivalence=opts["equivalence"],
                  equivalence_test=opts["equivalence_test"], pairing=opts["pairing"],
                  metrics=opts["metrics"], energy=opts["energy"], progress=progress)
        return compare_schemes(_as_tested(f, opts["pairing"]), present, **{**kw, **changed})

    # what compare_schemes would find wrong in its input only while it computes, found now
    for f in (frame, trials) if use_clusters and clustered else (frame,):
        _check_family(f, present, opts, compare)
    # the rate–distortion limit: analytic spectra for synthetic cases, the capture's
    # covariance per (layer, head) for real ones
    spectra = real_case_spectra(result.config)
    n_queries = result.config.n_queries
    # the input is checked: a ValueError or TypeError from here on is a bug (the note says so)
    with _Computing() as computing:
        with warnings.catch_warnings():
            # trials of one text as units only on purpose, and labelled: the trial-level tests
            # of clustered data, unit = "trial" by request, or real trials that record no text
            # (an old sweep); the header says what that costs (_unit_text)
            warnings.simplefilter("ignore", TrialsAsUnitsWarning)
            # p99, max and the tail screen of the trials, as labelled (not of cluster means)
            summary = summary_table(frame, confidence=opts["confidence"],
                                    n_resamples=opts["bootstrap_resamples"], seed=opts["seed"],
                                    trials=trials if use_clusters and clustered else None)
            comp = compare(frame)
            comp_trials = compare(trials) if use_clusters and clustered else None
            theory = theory_table(trials, n_resamples=opts["bootstrap_resamples"], seed=opts["seed"],
                                  spectra=spectra, n_queries=n_queries, aliases=_theory_aliases(result.config.schemes))
        cross = find_crossovers(comp)
        paired = opts["pairing"] == "trial"
        # the two-sample tests' measured pairing (of trials, or of the cluster means: their
        # "trial" is each cluster's first trial, the same in every cell of a case)
        unit_text = _unit_text(trials, use_clusters, clustered,
                               None if paired else _pairing_correlations(frame, comp), paired)

        # the folder is changed only now, after the compute, and in two steps, so that however
        # the writing ends (KeyboardInterrupt, a crash, a full disk) a retry is never refused by
        # check_out_folder and a part of a report never reads as a whole one: every file is
        # written into a hidden staging folder (which check_out_folder does not count), then
        # moved into place under a record marked in progress (_commit)
        stage = _staging_folder(out)
        try:
            (stage / "tables").mkdir()
            tables = [("summary", summary), ("comparisons", comp), ("crossovers", cross), ("theory", theory)]
            if comp_trials is not None:
                tables.append(("comparisons_trial_level", comp_trials))
            for name, df in tables:
                # "NaN" for a missing value, as the sweep's own tables: read_table (which keeps an
                # empty cell as text) and pandas.read_csv both read the float columns as floats
                df.to_csv(stage / "tables" / f"{name}.csv", index=False, na_rep="NaN")
            figs: dict[str, Path] = {}
            unplotted: dict[tuple, list[str]] = {}   # case → the planes with nothing to draw, and why
            computing.what = "the figures"
            # each case's and pair's figure name, chosen once here: the document links by it
            names = figure_names(frame[list(CASE_COLUMNS)].drop_duplicates().to_dict("records"),
                                 comparisons)
            if opts["figures"]:
                from kvstats.report.shannon_phi import _with_side_budgets   # matplotlib's module
                figs = _figures(frame, comp, comparisons, stage / "figures",   # limits at K4V2's 4 and 2 too
                                nominal_bounds(_with_side_budgets(trials), spectra=spectra,
                                               n_queries=n_queries), names,
                                progress, {"confidence": opts["confidence"], "seed": opts["seed"],
                                           "n_resamples": opts["bootstrap_resamples"]}, unplotted)
            computing.what = "the document"
            doc = build_document(result, summary, comp, cross, theory, figs, opts, unit_text, comp_trials,
                                 # unit = "trial" by request: the clustered cases' verdicts marked
                                 dependent=frozenset() if use_clusters else clustered,
                                 comparisons=comparisons, figure_names=names, unplotted=unplotted)
            (stage / "report.md").write_text(doc.markdown(stage))   # figure links: figures/…
            (stage / "report.html").write_text(doc.html("kvstats hypothesis report"))
            figs = {name: out / path.relative_to(stage) for name, path in figs.items()}   # in place
            # the options that differ from the config's [report] table: chosen after the sweep
            payload = {"options": opts, "options_set_after_sweep": _set_after_sweep(result, opts, comparisons),
                       "manifest": result.manifest, "unit": unit_text,
                       "resolution": _resolution(comp), "summary": records(summary),
                       "comparisons": records(comp), "crossovers": records(cross),
                       "theory": records(theory),
                       **({"comparisons_trial_level": records(comp_trials)} if comp_trials is not None else {}),
                       # relative to report.json's own folder, as report.md links them: the
                       # file reads the same wherever the folder is, and from any cwd
                       "figures": {k: v.relative_to(out).as_posix() for k, v in figs.items()}}
            (stage / "report.json").write_text(json.dumps(to_jsonable(payload), indent=1, allow_nan=False,
                                                          default=str))
            # the run time goes into the folder's record, not report.json: a rerun of the same
            # report writes a byte-identical report.json
            _commit(stage, out, seconds=round(time.perf_counter() - tic, 3))
        finally:
            _release_staging(stage)
        files = {name: out / "tables" / f"{name}.csv" for name, _ in tables}
        files.update(markdown=out / "report.md", html=out / "report.html", json=out / "report.json")
        return Report(summary, comp, cross, theory, files, figs)


class _Computing:
    """Notes on a ``ValueError`` or ``TypeError`` raised inside it that the report was
    computing ``what``, its input checked: a bug, whose traceback the command prints
    (:func:`kvstats._cli_output.computing_error`); the exception is otherwise unchanged."""

    what = "the tables"

    def __enter__(self) -> "_Computing":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if isinstance(exc, (ValueError, TypeError)):
            exc.add_note(f"[report: computing {self.what}, its input checked]")
        return False


def _as_tested(f: pd.DataFrame, pairing: str) -> pd.DataFrame:
    """``f`` as the report's tests take it."""
    if pairing == "trial" and N_IN_CLUSTER not in f.columns and "cluster" in f.columns:
        # trial-level tests pair the trials (those of one text share its cluster, not a pair)
        return f.drop(columns="cluster")
    return f


def _check_family(f: pd.DataFrame, comparisons: Sequence[tuple[str, str]], opts: Mapping[str, Any],
                  compare) -> tuple[int, int]:
    """Raise before any compute, in compare_schemes' words, the errors of its input that it
    finds only while it computes: a tested metric ``f`` lacks, two schemes' units that do not
    pair, a family whose energy tests need more permutations than a test may run.

    Returns the least and the most tests the family can hold (``compare(f).attrs["n_tests"]``;
    equal unless a TOST may be undefined, which is no test). ``compare(f, **changed)`` runs
    the report's compare_schemes; here only where the count of defined TOSTs decides, and to
    raise the family's error (its rows, but no energy test, computed).
    """
    from kvstats.stats.sequential import required_resolution

    with warnings.catch_warnings():   # a pooled SNR left out: compare_schemes says it
        warnings.simplefilter("ignore")
        metrics = default_metrics(f) if opts["metrics"] is None else _check_metrics(opts["metrics"], f)
    tested, unit, ks = _check_design(_as_tested(f, opts["pairing"]), opts["pairing"], None)
    tested = _in_trial_order(tested)
    finite = np.isfinite(tested[list(PROFILE_METRICS)].to_numpy(np.float64)).all(axis=1)
    units = None if unit is None else tested[unit].to_numpy()
    n_pairs = n_energy = 0
    for case, bud_a, bud_b, a, b, ia, ib in _pair_positions(tested, comparisons):
        if unit is not None:
            _matched(ia, ib, units, unit, case, bud_a, bud_b, a, b)
        n_pairs += 1
        # a 6D point that is not finite (an exact reconstruction): no energy test
        n_energy += bool(opts["energy"] and finite[ia].all() and finite[ib].all())
    low = n_pairs * len(metrics) * (1 + ks) + n_energy
    high = low + n_pairs * len(opts["equivalence"])

    def too_many(n: int) -> bool:
        b = required_resolution(n, opts["alpha"], opts["correction"]).n_permutations
        return max(opts["energy_resamples"], b) > MAX_FAMILY_PERMUTATIONS

    if opts["energy_resolution"] != "family" or not n_energy or not too_many(high):
        return low, high
    if not too_many(low):   # which TOSTs are defined decides: count them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tost = compare(f, metrics=list(opts["equivalence"]), energy=False, progress=False)
        low = high = low + int(((tost["test"] == "equivalence") & tost["pvalue"].notna()).sum())
    if too_many(low):
        # raises before its first energy test (energy_stop=1 only bounds a miscount's cost)
        compare(f, energy_stop=1, progress=False)
    return low, high


def _clustered(frame: pd.DataFrame) -> frozenset[tuple]:
    """The keys (:func:`_case_key`) of the cases some of whose cells' trials come in fewer
    clusters than trials (real caches: texts); empty (false) where none."""
    if "cluster" not in frame.columns or frame["cluster"].isna().all():
        return frozenset()
    cells = frame.groupby([*CASE_COLUMNS, "budget", "scheme"], sort=False)
    shared = (cells["cluster"].nunique() < cells.size()).reset_index(name="shared")
    return frozenset(map(_case_key, shared[shared["shared"]].to_dict("records")))


def _pairing_correlations(frame: pd.DataFrame, comp: pd.DataFrame) -> pd.Series:
    """Spearman ρ between the paired trials (same trial index) of each Mann–Whitney row.

    The sweep gives every scheme and budget of a case the same trials, which the two-sample
    tests ignore; the sign of this correlation says whether that makes a test conservative
    (ρ > 0) or anti-conservative (ρ < 0). Rows without a full pairing or with a constant
    side are left out; ``attrs["n_rows"]`` counts all Mann–Whitney rows.
    """
    from scipy.stats import spearmanr

    if "trial" not in frame or comp.empty:
        return pd.Series(dtype=float)
    keys = [*CASE_COLUMNS, "budget", "scheme"]
    cells = {k: g.set_index("trial").sort_index() for k, g in frame.groupby(keys, sort=False)}
    out = []
    mw = comp[comp["test"] == "mann_whitney"]
    for r in mw.itertuples(index=False):
        case = tuple(getattr(r, c) for c in CASE_COLUMNS)
        a, b = cells.get((*case, r.budget, r.scheme_a)), cells.get((*case, r.budget_b, r.scheme_b))
        if a is None or b is None or len(a) < 3 or not a.index.equals(b.index):
            continue
        x, y = a[r.metric].to_numpy(np.float64), b[r.metric].to_numpy(np.float64)
        if np.isfinite(x).all() and np.isfinite(y).all() and np.ptp(x) > 0 and np.ptp(y) > 0:
            out.append(float(spearmanr(x, y).statistic))
    rho = pd.Series(out, dtype=float)
    rho.attrs["n_rows"] = len(mw)
    return rho


#: The unit paragraph's sentence under the paired design (it replaces the ρ diagnostic).
PAIRED_TEXT = ("All schemes of a case see the same trials, and the tests use that pairing "
               "(pairing = \"trial\"): each scheme's value on a trial is matched with the other "
               "scheme's value on the same trial, so a correlation between the two, of either "
               "sign, does not bias the p-values.")


def _pairing_text(rho: pd.Series | None, paired: bool = False) -> str:
    """What ignoring the trials' pairing does to the two-sample tests, with the measured ρ
    (``paired``: the sentence that the tests use the pairing instead)."""
    if paired:
        return PAIRED_TEXT
    text = ("All schemes of a case see the same trials; the two-sample tests ignore that pairing, "
            "which makes a test conservative where the paired values are positively correlated "
            "and anti-conservative where they are negatively correlated")
    return text + _rho_text(rho, "trial")


def _rho_text(rho: pd.Series | None, unit: str) -> str:
    """The measured Spearman ρ of the ``unit``-paired values of the Mann–Whitney rows."""
    if rho is None or rho.empty:
        return "."
    neg = int((rho < -0.1).sum())
    n_rows = int(rho.attrs.get("n_rows", len(rho)))
    left = "" if n_rows == len(rho) else " (the others: a constant side)"
    return (f": here the {unit}-paired Spearman ρ of {len(rho)} of the {n_rows} Mann–Whitney "
            f"rows{left} has median {rho.median():+.2f}, range [{rho.min():+.2f}, "
            f"{rho.max():+.2f}], {neg} below −0.1; where ρ < 0 a p-value may be too small.")


def _unit_text(trials: pd.DataFrame, use_clusters: bool, clustered: Any,
               rho: pd.Series | None = None, paired: bool = False) -> str:
    """The unit paragraph; ``clustered``: :func:`_clustered`'s case keys (or a bool: all/none)."""
    if use_clusters and clustered:
        matched = (" The tests pair the two schemes' means of each cluster (pairing = \"trial\"); "
                   "the trial-level ones pair their trials." if paired else
                   " All schemes see the same clusters, so two schemes' cluster means are pairs; "
                   "the two-sample tests (pairing = \"none\") ignore that pairing, which makes a "
                   "test conservative where the paired means are positively correlated and "
                   "anti-conservative where they are negatively correlated (pairing = \"trial\" "
                   "uses it)" + _rho_text(rho, "cluster"))
        return (f"Unit of observation: **the cluster** (the text of a real capture; a trial "
                f"without one is its own): {_cluster_spans(trials)}; the trials of one text "
                "(cluster) are not independent; every test, interval, count and figure uses the cluster "
                "means (kvstats.analysis.aggregate_clusters), except the KL p99, max and tail α, "
                "of every trial. The trial-level tests are in "
                "tables/comparisons_trial_level.csv and the section \"Trial-level tests (not "
                "independent)\", labelled as such." + matched)
    if clustered:   # per kind of case where only some cases' trials share clusters
        every = isinstance(clustered, bool) or len(clustered) == len(trials.groupby(list(CASE_COLUMNS)))
        return ("Unit of observation: **the trial**, by request (unit = \"trial\"), although the "
                + ("trials come in fewer clusters (texts) than trials: trial-level" if every else
                   "trials of some cases come in fewer clusters (texts) than trials "
                   f"({_cluster_spans(trials, trial_means=True)}): there trial-level") + " (not independent) "
                "p-values, which do not hold their nominal level (optimistic, i.e. too small, where "
                "a text's trials are positively correlated; too large where negatively)"
                + ("." if every else f", verdicts marked \"{NOT_INDEPENDENT_MARK}\"; the other cases' "
                   "trials are independent.") + (" " + PAIRED_TEXT if paired else ""))
    pairing = _pairing_text(rho, paired)
    real = "distribution" in trials and bool((trials["distribution"] == REAL).any())
    if real and ("cluster" not in trials or trials["cluster"].isna().all()):
        return ("Unit of observation: the trial. The frame records no text (cluster) per real "
                "trial, so trials that share a text, if any, are treated as independent: "
                "optimistic p-values (too small) where such trials are positively correlated, "
                "conservative ones where negatively. " + pairing)
    if real:
        only = bool((trials["distribution"] == REAL).all())
        return (("Unit of observation: the text (of a real capture): each real trial here comes "
                 "from its own text, so trials and texts coincide"
                 + ("" if only else "; in synthetic cases, the trial (an independent K, V, q and "
                    "an independent draw of the scheme's randomness)") + ". ") + pairing)
    return ("Unit of observation: the trial (an independent K, V, q and an independent draw of the "
            "scheme's randomness). " + pairing)


def _figures(frame: pd.DataFrame, comp: pd.DataFrame, comparisons: Sequence[tuple[str, str]],
             fig_dir: Path, bounds: pd.DataFrame, names: dict[tuple, str],
             progress: bool = False, intervals: dict[str, Any] | None = None,
             unplotted: dict[tuple, list[str]] | None = None) -> dict[str, Path]:
    """Draw and save the figures; ``names``: :func:`~kvstats.report.notation.figure_names`'
    map, each case's and pair's file name; ``intervals``: the summary table's bootstrap
    arguments, so the bits figures' bars are its intervals; ``unplotted`` gets each case's
    planes with nothing to draw."""
    from tqdm.auto import tqdm

    from kvstats.report.plots import (CROSSOVER_METRICS, plot_crossover, plot_kl_vs_bits,
                                      plot_lowrank_vs_heavytail, plot_recall_vs_bits,
                                      plot_shannon_phi, save_figure, scheme_palette)
    from kvstats.report.shannon_phi import _PLACES, _NothingToPlace

    palette = scheme_palette(frame["scheme"])
    cases = frame[list(CASE_COLUMNS)].drop_duplicates()
    # drawing takes as long as the tests of a small sweep: a bar over the figures tried
    both_tails = {"low_rank", "heavy_tailed"} <= set(frame["distribution"])
    bar = tqdm(total=3 * len(cases) + 2 + len(comparisons) + both_tails, desc="figures", unit="figure",
               file=sys.stderr, disable=not progress, leave=False)
    figs: dict[str, Path] = {}

    def save(name: str, fig) -> None:
        figs[name] = save_figure(fig, fig_dir / name)["png"]
        bar.update()

    with bar:
        for _, case in cases.iterrows():
            key = _case_key(case)
            sel = dict(distribution=case["distribution"], params=case["params"], dim=int(case["dim"]),
                       n_keys=int(case["n_keys"]))
            at = bounds
            for col in CASE_COLUMNS:
                at = at[at[col] == case[col]]
            for place in ("k", "v", "t"):
                here = at[at["place"] == place]
                finite = here[here["bound_snr_db"].notna()]
                note = None if here.empty or not finite.empty else str(here["note"].iloc[0])
                try:
                    fig = plot_shannon_phi(frame, place, palette=palette, max_points=300, **sel,
                                           bounds=dict(zip(finite["budget"], finite["bound_snr_db"])),
                                           bound_note=note)
                except _NothingToPlace:   # only exact reconstructions: said in the case's section
                    if unplotted is not None:
                        unplotted.setdefault(key, []).append(_PLACES[place])
                    bar.update()
                    continue
                save(names["shannon_phi", place, key], fig)
        save("kl_vs_bits", plot_kl_vs_bits(frame, palette=palette, **(intervals or {})))
        save("recall_vs_bits", plot_recall_vs_bits(frame, palette=palette, **(intervals or {})))
        # panels only for metrics of the family ([report] metrics): no test rows, no panel
        tested = [m for m in CROSSOVER_METRICS if m in set(comp["metric"])]
        for a, b in comparisons:
            rows = comp[(comp["scheme_a"] == a) & (comp["scheme_b"] == b)
                        & comp["test"].isin(list(LOCATION_TESTS.values()))
                        & (comp["budget"] == comp["budget_b"])]
            if rows["budget"].nunique() >= 2 and tested:
                save(names["crossover", a, b], plot_crossover(comp, tested, pair=(a, b)))
            else:
                bar.update()
        if both_tails:
            save("lowrank_vs_heavytail", plot_lowrank_vs_heavytail(frame, palette=palette))
    return figs


