"""The ``[report]`` options: one schema, one validator.

Every option of :func:`kvstats.hypothesis_report` (the ``[report]`` table of a sweep
config, or the function's keyword overrides) is one :class:`ReportOption` entry of
:data:`REPORT_OPTIONS`: its name, type, allowed values or range, default and meaning.
:func:`validate_report_options` is the only place that checks them; the sweep config
calls it when a config is loaded, the report when it runs. A bad option is one
``ValueError``/``TypeError`` line naming the key, what is allowed and what was received
(an unknown key also gets the closest known name).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real

from kvstats._checks import _describe, did_you_mean
from kvstats.metrics.table import METRIC_TABLE, REPORT_METRICS
from kvstats.results import check_comparisons
from kvstats.stats.catalog import CORRECTIONS, PAIRINGS   # the designs of the comparisons

__all__ = ["ReportOption", "REPORT_OPTIONS", "validate_report_options", "report_options_markdown",
           "EQUIVALENCE_TESTS", "UNITS", "ENERGY_RESOLUTIONS", "PAIRINGS", "FAMILY_METRICS"]

#: How an equivalence margin is read: a ratio of means or a probability of superiority.
EQUIVALENCE_TESTS = ("ratio", "rank")
#: Unit of the report's tests: the cluster when the frame has fewer clusters than trials.
UNITS = ("auto", "cluster", "trial")
#: Permutations of an energy test: the family's resolution, or exactly ``energy_resamples``.
ENERGY_RESOLUTIONS = ("family", "fixed")
#: The metrics whose tests the ``metrics`` option may put in the family: the report metrics,
#: then the energy-pooled SNRs (kvstats.analysis' TESTABLE_METRICS, which imports pandas;
#: tests/report/test_options.py checks the two agree).
FAMILY_METRICS = REPORT_METRICS + tuple(n for n in METRIC_TABLE if n.endswith("_pooled"))
# the false-discovery-rate procedures by their authors' initials or names
_CORRECTION_ALIASES = {"bh": "fdr_bh", "benjamini-hochberg": "fdr_bh",
                       "by": "fdr_by", "benjamini-yekutieli": "fdr_by"}


@dataclass(frozen=True)
class ReportOption:
    """One ``[report]`` option.

    Attributes
    ----------
    name : str
        The key in ``[report]`` (and the keyword of :func:`kvstats.hypothesis_report`).
    type : str
        "float", "int", "bool", "str", "table", "pairs" or "list" (for the docs).
    allowed : str
        The allowed values or range, as the error message states it.
    default : object
        Value when the key is absent.
    meaning : str
        One sentence for the docs.
    check : callable
        ``check(value) -> value`` (normalised) or raises with a message naming the key.
    shown_default : str, optional
        The docs' default column where the default is None ("(the sweep's)" otherwise).

    Examples
    --------
    >>> from kvstats.report.options import REPORT_OPTIONS
    >>> opt = next(o for o in REPORT_OPTIONS if o.name == "alpha")
    >>> opt.default, opt.allowed
    (0.05, 'a float in (0, 1)')
    """

    name: str
    type: str
    allowed: str
    default: object
    meaning: str
    check: Callable[[object], object]
    shown_default: str | None = None   # the docs' default column, where repr(default) says nothing


def _bad(name: str, allowed: str, value: object, kind: type[Exception] = ValueError) -> Exception:
    return kind(f"report option {name!r} must be {allowed}; received {_describe(value)}")


def _real(name: str, allowed: str, low: float, high: float | None, *, low_open: bool = True,
          high_open: bool = True) -> Callable[[object], object]:
    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, Real):
            raise _bad(name, allowed, value, TypeError)
        v = float(value)
        ok = (v > low if low_open else v >= low) and (
            high is None or (v < high if high_open else v <= high))
        if not ok or v != v:
            raise _bad(name, allowed, value)
        return v
    return check


def _int(name: str, allowed: str, low: int) -> Callable[[object], object]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise _bad(name, allowed, value, TypeError)
        if int(value) < low:
            raise _bad(name, allowed, value)
        return int(value)
    return check


def _choice(name: str, choices: tuple[str, ...],
            aliases: Mapping[str, str] | None = None) -> Callable[[object], object]:
    """The check of an option taking one of ``choices``; ``aliases`` maps a common name of
    a choice (case ignored) to it, for the hint where the name is too far from the spelling
    for a near-miss match ('bh' for 'fdr_bh')."""
    allowed = "one of " + ", ".join(repr(c) for c in choices)
    aliases = aliases or {}

    def check(value: object) -> str:
        if value not in choices:
            named = aliases.get(value.casefold(), value) if isinstance(value, str) else value
            hint = did_you_mean(named, choices)
            raise ValueError(f"report option {name!r} must be {allowed}; received "
                             f"{_describe(value)}{hint}")
        return str(value)
    return check


def _bool(name: str) -> Callable[[object], object]:
    def check(value: object) -> bool:
        if not isinstance(value, bool):
            raise _bad(name, "true or false", value, TypeError)
        return value
    return check


def _pairs(value: object) -> object:
    # the form only (the sweep's labels are checked by the config): the one pairs check
    return None if value is None else tuple(check_comparisons(value))  # type: ignore[arg-type]


def _margins(value: object) -> dict[str, float]:
    """Per-metric margins over :data:`FAMILY_METRICS` (a TOST is a test of the family, so
    its metric is one ``metrics`` may name, the pooled SNRs included: one value per trial,
    paired as the others); their range depends on ``equivalence_test`` (checked later)."""
    allowed = f"a table {{metric = margin > 0}} over {', '.join(FAMILY_METRICS)}"
    if not isinstance(value, Mapping):
        raise _bad("equivalence", allowed, value, TypeError)
    out: dict[str, float] = {}
    for metric, margin in value.items():
        if metric not in FAMILY_METRICS:
            hint = did_you_mean(metric, FAMILY_METRICS)
            raise ValueError(f"report option 'equivalence' has unknown metric {metric!r}{hint}; "
                             f"allowed: {', '.join(FAMILY_METRICS)}")
        # finite: the tests refuse an infinite margin, which would fail after the sweep ran
        if (isinstance(margin, bool) or not isinstance(margin, Real) or not float(margin) > 0
                or not math.isfinite(margin)):
            raise ValueError(f"report option 'equivalence.{metric}' must be a finite margin > 0; "
                             f"received {_describe(margin)}")
        out[str(metric)] = float(margin)
    return out


_METRICS_ALLOWED = "a non-empty list of distinct names from " + ", ".join(FAMILY_METRICS)


def _metrics(value: object) -> tuple[str, ...]:
    """The family's metrics: a non-empty list of :data:`FAMILY_METRICS`, each once (a repeat
    would count its tests twice in the family)."""
    if not isinstance(value, (list, tuple)):
        raise _bad("metrics", _METRICS_ALLOWED, value, TypeError)
    if not value:
        raise _bad("metrics", _METRICS_ALLOWED, value)
    for name in value:
        if name not in FAMILY_METRICS:
            raise ValueError(f"report option 'metrics' has unknown metric {name!r}"
                             f"{did_you_mean(name, FAMILY_METRICS) if isinstance(name, str) else ''}; "
                             f"allowed: {', '.join(FAMILY_METRICS)}")
    repeated = sorted({m for m in value if value.count(m) > 1})
    if repeated:
        raise ValueError(f"report option 'metrics' must name each metric once (its tests would "
                         f"count twice in the family); received {list(value)}, repeating {repeated}")
    return tuple(value)


#: The schema of the ``[report]`` table, in the order the docs list it.
REPORT_OPTIONS: tuple[ReportOption, ...] = (
    ReportOption("alpha", "float", "a float in (0, 1)", 0.05,
                 "Level of every test, after the correction.",
                 _real("alpha", "a float in (0, 1)", 0.0, 1.0)),
    ReportOption("correction", "str", "one of " + ", ".join(repr(c) for c in CORRECTIONS), "holm",
                 "Multiple-testing correction applied to every p-value of the report together "
                 "(family-wise for holm/hommel/bonferroni/sidak, false discovery rate for fdr_*).",
                 _choice("correction", CORRECTIONS, _CORRECTION_ALIASES)),
    ReportOption("energy_resolution", "str", "one of 'family', 'fixed'", "family",
                 "'family': each 6D energy test may draw up to the permutations the family "
                 "needs to reject (kvstats.stats.sequential.required_resolution), stopping "
                 "early (Besag–Clifford) when clearly null; a family needing more than 10^7 "
                 "is refused (alpha too small for its size); 'fixed': at most energy_resamples.",
                 _choice("energy_resolution", ENERGY_RESOLUTIONS)),
    ReportOption("energy_resamples", "int", "an int >= 1", 499,
                 "Least permutation cap of each energy test: the cap is max(this, what the "
                 "family needs to reject), or exactly this with energy_resolution = 'fixed'; "
                 "a test stops earlier at its energy_stop-th exceedance.",
                 _int("energy_resamples", "an int >= 1", 1)),
    ReportOption("energy_stop", "int", "an int >= 1", 10,
                 "Exceedances that stop an energy test early (Besag–Clifford h).",
                 _int("energy_stop", "an int >= 1", 1)),
    ReportOption("bootstrap_resamples", "int", "an int >= 40 (2/(1 − confidence) above 0.95)", 999,
                 "Bootstrap resamples of every confidence interval of a mean (one resample "
                 "beyond each limit of a 95% interval needs 40).",
                 _int("bootstrap_resamples", "an int >= 40 (2/(1 − confidence) above 0.95)", 40)),
    ReportOption("confidence", "float", "a float in (0, 1)", 0.95,
                 "Level of the bootstrap confidence intervals of the summary tables' means (the "
                 "theory and rate–distortion tables, r's intervals and the Shannon–φ planes' "
                 "crosses stay at 95%; the KL and recall figures' bars follow it).",
                 _real("confidence", "a float in (0, 1)", 0.0, 1.0)),
    ReportOption("seed", "int", "an int >= 0", 0,
                 "Seed of the permutations and bootstrap resamples.",
                 _int("seed", "an int >= 0", 0)),
    ReportOption("figures", "bool", "true or false", True,
                 "Draw the figures.", _bool("figures")),
    ReportOption("equivalence", "table", "a table {metric = margin > 0}", {},
                 "Equivalence margins per metric, e.g. {kl = 0.10, recall_at_5 = 0.02}: "
                 "each compared pair gets a TOST per listed metric and the verdict "
                 "'equivalent within δ', 'different' or 'inconclusive'. A metric is one "
                 "'metrics' may name, the pooled SNRs too (snr_k_pooled, for windowed "
                 "schemes such as kivi); one in dB needs equivalence_test = 'rank'.",
                 _margins),
    ReportOption("equivalence_test", "str", "one of 'ratio', 'rank'", "ratio",
                 "'ratio': a margin δ is the region [1/(1+δ), 1+δ] of mean(a)/mean(b) "
                 "(kvstats.stats.equivalence.tost_ratio; not for metrics in dB); "
                 "'rank': θ = P(a > b) within 0.5 ± δ, δ < 0.5 (tost_rank).",
                 _choice("equivalence_test", EQUIVALENCE_TESTS)),
    ReportOption("unit", "str", "one of 'auto', 'cluster', 'trial'", "auto",
                 "Unit of the tests: 'auto' is the cluster (per-cluster means, "
                 "kvstats.analysis.clustered.aggregate_clusters) when the frame has a cluster "
                 "column with fewer clusters than trials, else the trial.",
                 _choice("unit", UNITS)),
    ReportOption("pairing", "str", "one of 'none', 'trial'", "trial",
                 "Design of the comparisons: 'trial' (the default: every scheme of a sweep "
                 "case sees the same trials), each scheme's value matched with the other's on "
                 "the same unit (trial, or text on cluster means): sign test, energy with "
                 "within-pair swaps, paired TOST, no KS; 'none', two independent samples "
                 "(Mann–Whitney, KS, energy) (kvstats.analysis.compare_schemes).",
                 _choice("pairing", PAIRINGS)),
    ReportOption("comparisons", "pairs", "a list of [scheme_a, scheme_b] pairs", None,
                 "Scheme label pairs to compare (default: the sweep's comparisons).",
                 _pairs),
    ReportOption("metrics", "list", _METRICS_ALLOWED, None,
                 "The metrics tested one by one, i.e. whose tests (with the 6D energy tests "
                 "unless energy = false) form the family the correction adjusts together "
                 "(default: every report metric and the pooled SNRs the frame has); the rest "
                 "keep their summary tables and figures but get no test rows. Choose it before "
                 "looking at results: a smaller family lowers the p-value each test needs.",
                 _metrics, shown_default="(all)"),
    ReportOption("energy", "bool", "true or false", True,
                 "Put a 6D energy test per compared (case, budget, pair) in the family; false "
                 "runs none, so the family is the metrics' tests only (a primary endpoint: "
                 "metrics = [\"kl\"], energy = false, chosen before looking at results).",
                 _bool("energy")),
)

_BY_NAME: dict[str, ReportOption] = {o.name: o for o in REPORT_OPTIONS}


def validate_report_options(options: Mapping[str, object] | None = None) -> dict[str, object]:
    """Check ``[report]`` options and fill in the defaults.

    Parameters
    ----------
    options : mapping, optional
        Option name -> value (a config's ``[report]`` table, possibly with keyword
        overrides merged in; None values mean "not given").

    Returns
    -------
    dict
        Every option of :data:`REPORT_OPTIONS`, normalised (``comparisons`` as a tuple
        of pairs or None, ``equivalence`` as a dict of floats).

    Raises
    ------
    ValueError, TypeError
        One line naming the key, the allowed values and what was received; an unknown key
        with the closest known name.

    Examples
    --------
    >>> from kvstats.report.options import validate_report_options
    >>> validate_report_options({"alpha": 0.01, "equivalence": {"kl": 0.1}})["equivalence"]
    {'kl': 0.1}
    >>> validate_report_options({"metrics": ["kl", "snr_t"]})["metrics"]
    ('kl', 'snr_t')
    >>> validate_report_options({"metrics": ["kl", "snr_tt"]})
    Traceback (most recent call last):
    ...
    ValueError: report option 'metrics' has unknown metric 'snr_tt' (did you mean 'snr_t'?); allowed: ...
    >>> validate_report_options({"corection": "holm"})
    Traceback (most recent call last):
    ...
    ValueError: unknown report option 'corection' (did you mean 'correction'?); allowed: ...
    >>> validate_report_options({"alpha": 0.6, "equivalence": {"kl": 0.1}})
    Traceback (most recent call last):
    ...
    ValueError: report option 'alpha' must be in (0, 0.5) with equivalence margins (a TOST's interval is at 1 − 2α); received alpha 0.6 with equivalence {'kl': 0.1}: lower alpha or drop the margins
    >>> validate_report_options({"equivalence": {"snr_k": 0.1}})
    Traceback (most recent call last):
    ...
    ValueError: report option 'equivalence.snr_k': snr_k is in dB (can be negative), a ratio of means is meaningless; set equivalence_test = 'rank' or drop it
    >>> validate_report_options({"equivalence": {"snr_k_pooled": 0.1},
    ...                          "equivalence_test": "rank"})["equivalence"]
    {'snr_k_pooled': 0.1}
    """
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(f"report options must be a table/dict; received {_describe(options)}")
    for key in options:
        if key not in _BY_NAME:
            hint = did_you_mean(key, _BY_NAME)
            raise ValueError(f"unknown report option {key!r}{hint}; allowed: "
                             f"{', '.join(_BY_NAME)}")
    out: dict[str, object] = {}
    for opt in REPORT_OPTIONS:
        value = options.get(opt.name)
        out[opt.name] = opt.default if value is None else opt.check(value)
    out["equivalence"] = dict(out["equivalence"])   # never share the default
    outside = [m for m in out["equivalence"] if out["metrics"] is not None and m not in out["metrics"]]
    if outside:   # a TOST is a test of the family: its metric must be in it
        raise ValueError(f"report option 'equivalence' has margins for {outside}, which "
                         f"'metrics' leaves out of the family ({', '.join(out['metrics'])}); "
                         "add them to metrics or drop their margins")
    # the summary tables' and the KL/recall figures' intervals are at `confidence`, the theory tables' at 95%
    from kvstats.stats.bootstrap import min_resamples   # scipy: not at the command's start

    least = min_resamples(max(out["confidence"], 0.95))
    if out["bootstrap_resamples"] < least:
        raise ValueError(f"report option 'bootstrap_resamples' must be at least {least} with confidence "
                         f"{out['confidence']:g} (the report's intervals are at max(confidence, 0.95): "
                         f"2/(1 − that) puts one resample beyond each limit); received "
                         f"{out['bootstrap_resamples']}")
    if out["equivalence"] and not out["alpha"] < 0.5:
        # a TOST's interval is the (1 − 2α) one: none exists from α = 0.5 on, and each TOST
        # would read "inconclusive", a bad option shown as a verdict after the whole compute
        raise ValueError(f"report option 'alpha' must be in (0, 0.5) with equivalence margins (a "
                         f"TOST's interval is at 1 − 2α); received alpha {out['alpha']:g} with "
                         f"equivalence {out['equivalence']}: lower alpha or drop the margins")
    for metric, margin in out["equivalence"].items():
        if out["equivalence_test"] == "rank" and not margin < 0.5:
            raise ValueError(f"report option 'equivalence.{metric}' must be a margin in (0, 0.5) "
                             f"with equivalence_test = 'rank'; received {margin!r}")
        if out["equivalence_test"] == "ratio" and METRIC_TABLE[metric].unit == "dB":
            raise ValueError(f"report option 'equivalence.{metric}': {metric} is in dB (can be "
                             "negative), a ratio of means is meaningless; set equivalence_test = "
                             "'rank' or drop it")
    return out


def report_options_markdown() -> str:
    """The schema as a Markdown table (docs/usage.md and docs/statistics.md show it).

    Examples
    --------
    >>> from kvstats.report.options import report_options_markdown
    >>> report_options_markdown().splitlines()[0]
    '| option | type | allowed | default | meaning |'
    """
    lines = ["| option | type | allowed | default | meaning |", "|---|---|---|---|---|"]
    for o in REPORT_OPTIONS:
        default = ((o.shown_default or "(the sweep's)") if o.default is None
                   else str(o.default).lower() if isinstance(o.default, bool) else repr(o.default))
        lines.append(f"| `{o.name}` | {o.type} | {o.allowed} | {default} | {o.meaning} |")
    return "\n".join(lines)
