"""Reports and figures of a sweep: Markdown/HTML rendering and seaborn plots.

The tables a report shows are computed in :mod:`kvstats.analysis`; this package only
renders them (:mod:`~kvstats.report.render`) and draws (:mod:`~kvstats.report.plots`).
Its options have one schema, :mod:`~kvstats.report.options`. The analysis names below
are re-exported for compatibility; their home is :mod:`kvstats.analysis`.

Exports are lazy: ``import kvstats.report.options`` (what the sweep config does) imports
neither matplotlib nor the analysis tables. :mod:`kvstats.report.plots` selects the Agg
backend only if no backend was chosen yet.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

_PLOTS = ("plot_crossover", "plot_kl_vs_bits", "plot_lowrank_vs_heavytail", "plot_recall_vs_bits",
          "plot_shannon_phi", "save_figure", "scheme_palette")
_ANALYSIS = ("HIGHER_IS_BETTER", "METRICS", "PROFILE_METRICS", "compare_schemes", "find_crossovers",
             "summary_table", "theory_table")
_EXPORTS = {
    **{name: "kvstats.analysis" for name in _ANALYSIS},
    **{name: "kvstats.report.plots" for name in _PLOTS},
    "Report": "kvstats.report.render",
    "hypothesis_report": "kvstats.report.render",
    "REPORT_OPTIONS": "kvstats.report.options",
    "ReportOption": "kvstats.report.options",
    "validate_report_options": "kvstats.report.options",
}
_SUBMODULES = {"options", "render", "document", "plots"}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
