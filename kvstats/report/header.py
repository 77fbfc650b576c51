"""The report's header: what ran, and what its tests and verdicts are worth.

:func:`header_lines` writes the bullets of the report's "Methods" section, after its
"Summary" (both placed by :func:`kvstats.report.sections.build_document`): the sweep and
the host it ran on, with the manifest's caveats (cells computed by other code or on another
CPU or BLAS, user code and its files' hashes), the family of tests and its error rate, the
units and heavy tails the means rest on, the winner rule and the effect-size convention.
The sentences shared with the sections come from :mod:`kvstats.report.wording`.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from kvstats.report.notation import _dependent_cases, _unit_counts
from kvstats.report.tables import NO_GUARANTEE, NOT_INDEPENDENT_MARK
from kvstats.report.options import validate_report_options
from kvstats.report.wording import (FEW_UNITS, R_CONVENTION, R_CONVENTION_PAIRED, TIES_NOTE,
                                    _heavy_summary, _location_name, _resolution, _scope_text,
                                    _tests_text, few_units_text, heavy_note)
from kvstats.results import REAL, SweepResult

__all__ = ["header_lines"]


def header_lines(result: SweepResult, summary: pd.DataFrame, theory: pd.DataFrame,
                 comp: pd.DataFrame, opts: dict[str, Any], unit_text: str, *, unit: str,
                 heavy: bool, after: dict[str, dict[str, Any]] | None = None,
                 dependent: Any = False) -> list[str]:
    """The header's bullets, in the report's order.

    Parameters
    ----------
    result : SweepResult
        The sweep: its manifest (cells, seed, times, host, versions, user code) and config.
    summary, theory, comp : DataFrame
        :func:`~kvstats.analysis.summary_table`, :func:`~kvstats.analysis.theory_table` and
        :func:`~kvstats.analysis.compare_schemes` (its ``attrs``: the family's size, the
        pairs without an energy test).
    opts : dict
        The validated ``[report]`` options (:func:`kvstats.report.options.validate_report_options`).
    unit_text : str
        The sentence on the unit of observation.
    unit : str
        What a count is of: "trials", "clusters" or "texts".
    heavy : bool
        Whether some mean's bootstrap interval is flagged as not reliable (``ci_reliable``).
    after : dict, optional
        The options set after the sweep (:func:`_set_after_sweep`; None or {}: none).
    dependent : bool or collection of tuple
        Whether the tests took trials that share clusters as units (unit = "trial" by
        request on clustered data): the error-rate line then claims no bound. A collection:
        the keys (:func:`~kvstats.report.notation._case_key`) of the cases where they did,
        named as such when not every case of ``summary`` is one.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.analysis import compare_schemes, summary_table, theory_table
    >>> from kvstats.report.options import validate_report_options
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions":
    ...     ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 12}, executor="serial",
    ...     progress=False)
    >>> lines = header_lines(res, summary_table(res.frame, n_resamples=99),
    ...     theory_table(res.frame, n_resamples=99), compare_schemes(res.frame, [("KV", "KQV")],
    ...     energy=False), validate_report_options(), "Unit of observation: the trial.",
    ...     unit="trials", heavy=False)
    >>> lines[0][:36], lines[-2]          # the paired design (the default): no ties note
    ('Sweep: 2 cells, 12 trials per cell, ', 'Unit of observation: the trial.')
    """
    paired = opts.get("pairing", "none") == "trial"
    energy = opts.get("energy", True)   # False: the option left the energy tests out
    man = result.manifest
    cfg = result.config
    synthetic = [d for d in cfg.distributions if d.name != REAL]
    has_real = len(synthetic) < len(cfg.distributions)
    git = man.get("git") or {}
    host = man.get("host") or {}
    # the fewest units of a mean (the all-0 fraction's exact interval is shown at it)
    fewest = int(_unit_counts(summary).min()) if len(_unit_counts(summary)) else None
    # only a TOST row can back "equal within δ": without one the header must not imply it can
    has_tost = bool("test" in comp and ((comp["test"] == "equivalence") & comp["pvalue"].notna()).any())
    dep_cases, every = _dependent_cases(dependent, summary)
    has_eq = bool("test" in comp and (comp["test"] == "equivalence").any())   # rows, run or not
    return [
        f"Sweep: {man.get('n_cells')} cells, {cfg.n_trials} trials per cell"
        + (f", {cfg.n_queries} quer{'y' if cfg.n_queries == 1 else 'ies'} per synthetic trial"
           if synthetic else "")
        + (", a real trial's queries: its KV head's query heads at the last position"
           if has_real else "")
        # the sweep's seed, the report's (bootstrap, permutations), the config's fingerprint
        + f", root seed {cfg.seed}; report seed {opts.get('seed')} (bootstrap and permutations); "
        f"config fingerprint {str(man.get('config_fingerprint') or 'unknown')[:12]}; "
        f"ran {man.get('started')} → {man.get('finished')} ({man.get('seconds')} s, "
        f"{man.get('n_computed')} cells computed, executor {man.get('executor')}).",
        f"Host: {host.get('platform')}, {host.get('cpus')} CPUs"
        # the CPUs the process could run on, where an affinity or cgroup allowed fewer
        + (f" ({host['cpus_usable']} usable)" if host.get("cpus_usable") not in (None, host.get("cpus"))
           else "")
        + f"; git {git.get('revision', 'unknown')[:12]}{' (dirty)' if git.get('dirty') else ''}; "
        "versions " + ", ".join(f"{k} {v}" for k, v in (man.get("versions") or {}).items()) + "."
        + _other_code_text(man.get("n_other_code")) + _other_env_text(man.get("n_other_env")),
        *([_user_code_text(man["user_code"])] if man.get("user_code") else []),
        _tests_text(comp, opts, fewest),
        *([_after_text(after)] if after else []),
        *([_family_text(comp, opts.get("metrics"), energy, after=after)]   # (energy = false alone: when tests ran)
          if opts.get("metrics") or not (energy or comp.empty) else []),
        *([few] if (few := few_units_text(_fewest_units(summary), unit)) else []),
        *([f"Heavy tails and sparse means: {_heavy_summary(summary, theory)} " + heavy_note(opts)]
          if heavy else []),
        "Winner rule: higher SNR and recall@5 are better; lower φ, KL and argmax-shift rate are "
        f"better. A pair has a winner for a metric only when its two-sided {_location_name(opts)}"
        + (" test's" if paired else "") + " adjusted p ≤ α"
        + ("; the winner is then the scheme with the better value on more of the matched units "
           "(the sign of the dominance), not necessarily the one with the better mean" if paired else
           "; the winner is then the scheme whose values tend to be better (the sign of r: "
           "P(a > b) against P(a < b) for independent draws), not necessarily the one with "
           "the better mean")
        + "; otherwise \"no significant difference\" when the test could have rejected"
        + ("" if paired else " (\"no significant shift (KS: distributions differ)\" when the KS "
           "test rejects)")
        + ", or \"not resolvable at …\" when even the most extreme data could not have reached "
        "an adjusted p ≤ α, the other tests as observed (a statement about the design, not about "
        "the schemes; except where it adds " + ("\"none of the n pairs differs\"" if paired else
                                                 "\"all … pooled points are identical\"")
        + ": there the two schemes' values were equal on every unit observed"
        + "). Neither is a claim that two schemes are equal: "
        + ("that is what the equivalence tests (declared margins) are for." if has_tost else
           "no TOST could run at the declared margins (each equivalence row says why), so nothing "
           "in this report supports \"≈\"." if opts.get("equivalence") and has_eq else
           # margins declared, yet no equivalence row to say why: no pair, or none on their metrics
           ("no pairs were compared" if comp.empty else "no pair was tested on a metric with a "
            "declared margin") + ", so no TOST ran and nothing in this report supports \"≈\"."
           if opts.get("equivalence") else
           "no equivalence margins were declared, so nothing in this report supports \"≈\" "
           "(a TOST needs a margin per metric, declared before the results: [report] "
           "equivalence)."),
        *([_error_rate_text(opts["correction"], opts["alpha"], int(comp.attrs["n_tests"]),
                            equivalence=has_tost, dependent=bool(dep_cases), partial=not every)]
          if comp.attrs.get("n_tests") else []),
        *([_energy_skipped_text(comp)] if comp.attrs.get("energy_skipped") else []),
        R_CONVENTION_PAIRED if paired else R_CONVENTION,
        unit_text,
        _scope_text(bool(synthetic), has_real),
        *([] if paired else [TIES_NOTE]),
    ]


#: What each correction bounds over the report's family (kvstats.report.options' choices).
_FAMILY_WISE = ("holm", "bonferroni", "hommel", "sidak", "holm-sidak")
#: What the family-wise bound of each correction assumes of the tests' dependence: Holm
#: (1979) and Bonferroni rest on Boole's inequality, any dependence; Šidák's 1 − (1 − α)^(1/m)
#: on the product inequality P(no true null rejected) ≥ Π P(each not rejected), exact under
#: independence and holding under positive orthant dependence (Šidák 1967: two-sided tests
#: of jointly normal statistics, any correlation), liable to fail under negative dependence;
#: Holm–Šidák (Holland & Copenhaver 1987) on that inequality for the true nulls' tests;
#: Hommel (1988), the closure of Simes' test, on the Simes inequality for the true nulls'
#: tests, proved under independence (Simes 1986) and positive dependence (MTP2: Sarkar 1998;
#: PRDS: Benjamini & Yekutieli 2001, Sarkar 2008).
_FWER_CONDITIONS = {
    "sidak": "under independence or positive orthant dependence of the tests (Šidák's product "
             "inequality)",
    "holm-sidak": "under independence or positive orthant dependence of the tests (Šidák's "
                  "product inequality, for the tests of the true nulls)",
    "hommel": "when the Simes inequality holds for the tests of the true nulls: under "
              "independence or positive dependence (MTP2, PRDS)",
}


def _error_rate_condition(correction: str) -> tuple[str, str]:
    """The error rate a correction bounds over the report's family, and under which dependence
    of the tests it does: the one wording of the Methods' error-rate line and the Summary's
    family line (:data:`_FWER_CONDITIONS`; BH's PRDS).

    Parameters
    ----------
    correction : str
        A correction of :data:`kvstats.stats.catalog.CORRECTIONS`.

    Returns
    -------
    tuple of str
        ("family-wise error rate" or "false discovery rate", the condition).

    Examples
    --------
    >>> from kvstats.report.header import _error_rate_condition
    >>> _error_rate_condition("holm")
    ('family-wise error rate', 'under any dependence')
    >>> _error_rate_condition("fdr_bh")[1][:60]
    'under independence or positive regression dependence of the '
    """
    from kvstats.stats.catalog import CORRECTIONS

    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(map(repr, CORRECTIONS))}; "
                         f"received {correction!r}")
    if correction in _FAMILY_WISE:
        return "family-wise error rate", (
            f"{_FWER_CONDITIONS[correction]}, which is not known to hold for two-sided tests "
            "on shared trials (holm and bonferroni hold under any)"
            if correction in _FWER_CONDITIONS else "under any dependence")
    # BH needs positive regression dependence (PRDS), not known for two-sided tests on
    # shared trials; BY holds under any dependence
    return "false discovery rate", (
        "under independence or positive regression dependence of the tests, which is not "
        "known to hold for two-sided tests on shared trials (fdr_by holds under any)"
        if correction == "fdr_bh" else "under any dependence")


def _error_rate_text(correction: str, alpha: float, n_tests: int, *,
                     equivalence: bool = True, dependent: bool = False, partial: bool = False) -> str:
    """What a significant row is worth: the error rate the family's correction bounds, and
    under which dependence of the tests (:data:`_FWER_CONDITIONS`; BH's PRDS).
    ``equivalence``: whether the family holds TOST rows (False: "equivalent within δ" is
    left out of the significant rows, as no such row can occur). ``dependent``: the tests
    took trials that share clusters as units (unit = "trial" by request), whose p-values do
    not hold their level: no bound is claimed; ``partial``: only in some cases (those marked).

    Examples
    --------
    >>> _error_rate_text("holm", 0.05, 600)[:60]
    'Error rate: with holm over the family of 600 p-values, the p'
    >>> "equivalent within δ" in _error_rate_text("holm", 0.05, 600, equivalence=False)
    False
    >>> "false discovery rate" in _error_rate_text("fdr_bh", 0.05, 600)
    True
    >>> "positive orthant dependence" in _error_rate_text("sidak", 0.05, 600)
    True
    >>> _error_rate_text("holm", 0.05, 6, dependent=True)[53:76]
    'no error-rate guarantee'
    >>> "only those cases' verdicts" in _error_rate_text("holm", 0.05, 6, dependent=True, partial=True)
    True
    """
    head = f"Error rate: with {correction} over the family of {n_tests} p-values, "
    rate, dep = _error_rate_condition(correction)
    if dependent:   # the bound needs valid p-values, whatever their dependence
        return (head + f"{NO_GUARANTEE}. Its {rate} bound at {alpha:g} assumes p-values that "
                "hold their level, and " + ("those of the cases whose trials share a cluster (text), "
                "counted as independent, do not; only those cases' verdicts are marked "
                f"\"{NOT_INDEPENDENT_MARK}\" (the other cases' trials are independent, their p-values "
                "adjusted in the same family; " if partial else "these, of trials that share a cluster "
                "(text) counted as independent, do not; every verdict of a test is marked "
                f"\"{NOT_INDEPENDENT_MARK}\" (") + "unit = \"auto\" tests the cluster means).")
    if correction in _FAMILY_WISE:
        return (head + f"the probability that any significant row (a winner, \"different\", "
                "\"distributions differ\"" + (", \"equivalent within δ\"" if equivalence else "")
                + f") rejects a true null is at "
                f"most {alpha:g} ({rate}, {dep}; a winner's direction is read "
                "from the sign of its effect: that a wrong direction is bounded by it too is "
                "proved for bonferroni under any dependence, for holm with independent tests "
                "(Shaffer 1980), not in general for tests on shared trials); a crossover rests on "
                "two such rows.")
    return (head + f"the expected share of false rejections among the significant rows is at "
            f"most {alpha:g} ({rate}, {dep}); no single row, and no crossover "
            "(two significant rows), carries a family-wise guarantee.")


def _family_text(comp: pd.DataFrame, metrics: tuple[str, ...] | None, energy: bool = True, *,
                 after: dict[str, Any] | None = None) -> str:
    """The header's line on a family chosen with the ``[report]`` options ``metrics`` and
    ``energy``: which tests it holds, its size, and why the choice must come before the
    results. ``metrics`` None: every metric the table tested. ``after``: the options set
    after the sweep (:func:`_set_after_sweep`), which the line does not call [report] options.

    Examples
    --------
    >>> import pandas as pd
    >>> comp = pd.DataFrame({"test": ["sign", "energy"], "metric": ["kl", "6d"],
    ...     "resolvable": [True, True], "significant": [False, False], "pvalue": [0.5, 0.5]})
    >>> comp.attrs.update(n_tests=2, alpha=0.05, correction="holm")
    >>> print(_family_text(comp, ("kl",)))  # doctest: +NORMALIZE_WHITESPACE
    Family (the [report] option metrics): the tests of kl and the 6D energy tests, 2 p-values;
    the other metrics keep their summaries and figures, without tests. Choose this set before
    looking at any result: a smaller family lowers the p-value each test needs (here p ≤ 0.025
    at the correction's first step), so a set chosen after seeing which metrics differ voids
    the error rate below.

    A primary endpoint, the energy tests left out by the option (not skipped):

    >>> comp = comp[comp["test"] == "sign"]
    >>> comp.attrs.update(n_tests=1)
    >>> print(_family_text(comp, ("kl",), energy=False))  # doctest: +NORMALIZE_WHITESPACE
    Family (the [report] options metrics and energy = false): the tests of kl only, 1 p-value;
    the 6D energy tests were left out by the option energy = false (none ran; no test here
    compares the joint 6D profiles); the other metrics keep their summaries and figures,
    without tests. Choose this set before looking at any result: a smaller family lowers the
    p-value each test needs (here p ≤ 0.05 at the correction's first step), so a set chosen
    after seeing which metrics differ voids the error rate below.

    The same options given after the sweep (the command's --metrics kl --no-energy):

    >>> _family_text(comp, ("kl",), energy=False, after={"metrics": {}, "energy": {}})[:70]
    'Family (the options metrics and energy = false, set after the sweep): '
    """
    n = int(comp.attrs.get("n_tests", 0))
    count = f"{n} p-value{'' if n == 1 else 's'}"
    need = f" (here p ≤ {_resolution(comp)['p_needed']:.3g} at the correction's first step)" if n else ""
    chosen = metrics is not None
    if not chosen:   # energy = false alone: the metrics are those the table tested
        metrics = tuple(dict.fromkeys(comp.loc[comp["test"] != "energy", "metric"]))
    if energy:
        source = "option metrics"
        tests = (f"the tests of {', '.join(metrics)}"
                 + (" and the 6D energy tests" if (comp["test"] == "energy").any() else "")
                 + f", {count}")
    else:   # left out by choice, not for non-finite profiles (_energy_skipped_text)
        source = "options metrics and energy = false" if chosen else "option energy = false"
        tests = (f"the tests of {', '.join(metrics)} only, {count}; the 6D energy tests were "
                 "left out by the option energy = false (none ran; no test here compares the "
                 "joint 6D profiles)")
    others = "; the other metrics keep their summaries and figures, without tests" if chosen else ""
    # [report] only where the config declared them (_after_text names the others)
    late = {"metrics", "energy"} & set(after or ())
    source = f"{source}, set after the sweep" if late else f"[report] {source}"
    return (f"Family (the {source}): {tests}{others}. Choose this set before looking "
            "at any result: a smaller family lowers the p-value each test needs"
            f"{need}, so a set chosen after seeing which metrics differ voids the error rate "
            "below.")


#: Options whose value changes no claim of the report (drawing only): not compared.
_NOT_CLAIMS = ("figures",)


def _set_after_sweep(result: SweepResult, opts: dict[str, Any],
                     comparisons: Sequence[tuple[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    """The options a report used that differ from those its sweep's config declared.

    The declared ones are the ``[report]`` table the manifest recorded (``result.config``
    is read back from ``manifest["config"]``), with the defaults filled by the same
    validator as the options used (:func:`kvstats.report.options.validate_report_options`),
    and its comparisons; ``figures`` is not compared (it changes no claim). A key that
    differs was set after the sweep, on the command line or in the call.

    Parameters
    ----------
    result : SweepResult
        The sweep (its config's ``report`` table and ``comparisons``).
    opts : dict
        The validated options the report used.
    comparisons : sequence of (str, str), optional
        The pairs the report compared (None: the declared ones).

    Returns
    -------
    dict
        Key → {"declared": value, "used": value}, in the schema's order ({}: none differs).

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.report.options import validate_report_options
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions":
    ...     ["gaussian"], "dims": [32], "n_keys": [16], "n_trials": 4, "report": {"alpha": 0.01}},
    ...     executor="serial", progress=False)
    >>> _set_after_sweep(res, validate_report_options({"alpha": 0.01, "figures": False}))
    {}
    >>> _set_after_sweep(res, validate_report_options({"alpha": 0.05, "metrics": ["kl"]}))
    {'alpha': {'declared': 0.01, 'used': 0.05}, 'metrics': {'declared': None, 'used': ('kl',)}}
    """
    declared = validate_report_options(result.config.report)
    out = {key: {"declared": declared[key], "used": opts[key]} for key in declared
           if key not in (*_NOT_CLAIMS, "comparisons") and declared[key] != opts[key]}
    pairs = [tuple(p) for p in declared["comparisons"] or result.config.comparisons]
    used = pairs if comparisons is None else [tuple(p) for p in comparisons]
    if used != pairs:
        out["comparisons"] = {"declared": pairs, "used": used}
    return out


def _option_value(key: str, value: Any) -> str:
    """An option's value as the header writes it (TOML's words for booleans).

    Examples
    --------
    >>> _option_value("metrics", None), _option_value("metrics", ("kl", "snr_t"))
    ('all', '[kl, snr_t]')
    >>> _option_value("energy", False), _option_value("comparisons", [("KV", "KQV")])
    ('false', '[KV vs KQV]')
    """
    if value is None:
        return "all" if key == "metrics" else "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):   # the equivalence margins
        return "{" + ", ".join(f"{m} = {d:g}" for m, d in value.items()) + "}" if value else "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(" vs ".join(v) if isinstance(v, tuple) else str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _after_text(after: dict[str, dict[str, Any]]) -> str:
    """The Methods' line naming the options set after the sweep, each with both values.

    Examples
    --------
    >>> print(_after_text({"correction": {"declared": "holm", "used": "fdr_bh"},
    ...                    "energy": {"declared": True, "used": False}}))
    ... # doctest: +NORMALIZE_WHITESPACE
    Set after the sweep, on the command line or in the call, not as its config's [report]
    table declared them: correction = fdr_bh (declared holm); energy = false (declared true).
    Not a pre-declared family: its error rate holds only if these were fixed before any
    result was seen (docs/statistics.md, "Declaring a primary endpoint").
    """
    keys = "; ".join(f"{k} = {_option_value(k, v['used'])} (declared {_option_value(k, v['declared'])})"
                     for k, v in after.items())
    return ("Set after the sweep, on the command line or in the call, not as its config's "
            f"[report] table declared them: {keys}. Not a pre-declared family: its error rate "
            "holds only if these were fixed before any result was seen (docs/statistics.md, "
            "\"Declaring a primary endpoint\").")


def _energy_skipped_text(comp: pd.DataFrame) -> str:
    """The header's line on the compared pairs that have no 6D energy test."""
    k = int(comp.attrs["energy_skipped"])
    n = k + int((comp["test"] == "energy").sum())
    return (f"No 6D energy test for {k} of the {n} compared (case, budget, pair)s: a value of "
            "their 6D profile is not finite (the SNR of an exact reconstruction is +inf), so "
            "they have no point in the profile's space; they are compared metric by metric only, "
            "and are not in the family.")


def _fewest_units(summary: pd.DataFrame) -> int:
    """The smallest count of units (trials, or clusters on cluster means) a summary mean rests on."""
    counts = _unit_counts(summary)
    return int(counts.min()) if len(counts) else FEW_UNITS


def _manifest_count(n: Any) -> int:
    """A count of the manifest (absent, None, or not a count in an older or hand-made one: 0)."""
    return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else 0


def _other_env_text(n_other: Any) -> str:
    """The versions line's caveat when some cells were computed in another numerical
    environment (the manifest's ``n_other_env``: another CPU, SIMD set or BLAS,
    kvstats.sweep.numeric_env; absent from manifests before it existed: no caveat).

    Examples
    --------
    >>> _other_env_text(0), _other_env_text(None)
    ('', '')
    >>> _other_env_text(1)
    ' 1 cell was computed on another CPU or BLAS (`n_other_env`): its last bits may differ.'
    """
    n = _manifest_count(n_other)
    if not n:
        return ""
    return (f" {n} cell{'s were' if n != 1 else ' was'} computed on another CPU or BLAS "
            f"(`n_other_env`): {'their' if n != 1 else 'its'} last bits may differ.")


def _other_code_text(n_other: Any) -> str:
    """The versions line's caveat when workers running other code computed some cells
    (the manifest's ``n_other_code``; absent from manifests before it existed: no caveat).

    Examples
    --------
    >>> _other_code_text(0), _other_code_text(None)
    ('', '')
    >>> _other_code_text(2)[:75]
    ' 2 cells were computed by workers running other code: the versions above ar'
    """
    n = _manifest_count(n_other)
    if not n:
        return ""
    return (f" {n} cell{'s were' if n != 1 else ' was'} computed by "
            f"{'workers' if n != 1 else 'a worker'} running other code: the versions above are "
            "this process's, not "
            f"{'theirs' if n != 1 else 'its'} (each such cell's code is in its entry of "
            "manifest.json's \"cells\", under \"code\").")


def _user_code_text(code: dict[str, Any]) -> str:
    """The header line saying the sweep ran user code: which schemes and distributions, and
    from which plugin file (with its SHA-256 prefix) or from the script itself."""
    from kvstats.plugins import relocated

    files = {r.get("plugin"): r for r in code.get("plugins") or []}

    def origin(plugin: str | None) -> str:
        if plugin is None:
            return "registered by the script"
        rec = files.get(plugin) or {}
        sha = rec.get("sha256")
        text = f"plugin {rec.get('file') or plugin}" + (f" (SHA-256 {sha[:12]})" if sha else "")
        imports = [i for i in rec.get("imports") or [] if isinstance(i, dict)]
        copy = relocated(plugin) if isinstance(plugin, str) else None
        now = (copy or {}).get("imports") or {}   # its helpers edited since the sweep
        if imports:   # the user modules it imports, hashed into the cell ids too
            text += ", importing " + ", ".join(
                f"{i.get('file')} (SHA-256 {str(i.get('sha256'))[:12]}"
                + (f"; this report read another version, SHA-256 {now[i.get('file')][:12]}"
                   if i.get("file") in now else "") + ")" for i in imports)
        if copy is not None:   # kvstats report --plugins: the names came from a copy
            text += (f"; this report read it from {copy['file']}"
                     + ("" if copy["sha256"] == sha else
                        f", another version (SHA-256 {copy['sha256'][:12]}), whose names and "
                        "registry facts it shows beside the numbers the recorded file computed"))
        return text

    parts = [f"scheme {n}: {origin(o)}" for n, o in (code.get("schemes") or {}).items()]
    parts += [f"distribution {n}: {origin(o)}" for n, o in (code.get("distributions") or {}).items()]
    if not parts:
        parts = [origin(p) for p in files]
    # the files the script's own registrations run (one list for all of them: the manifest
    # does not say which registration runs which file); hashed into their cells' ids too
    script = [r for r in code.get("script") or [] if isinstance(r, dict)]
    if script:
        parts.append("the script's registrations run " + ", ".join(
            f"{r.get('file') or r.get('module')}" + (f" (SHA-256 {str(r['sha256'])[:12]})" if r.get("sha256") else "")
            for r in script))
    return ("User code (not part of kvstats; its numbers are only as right as that code): "
            + "; ".join(parts) + ".")
