"""Reports and figures of a sweep: Markdown/HTML rendering and seaborn plots.

The tables a report shows are computed in :mod:`kvstats.analysis`; this package only
renders them (:mod:`~kvstats.report.render`) and draws (:mod:`~kvstats.report.plots`).
The analysis names below are re-exported for compatibility; their home is
:mod:`kvstats.analysis`.

Importing this package sets no matplotlib state; :mod:`kvstats.report.plots` selects the
Agg backend only if no backend was chosen yet.
"""

from kvstats.analysis import (HIGHER_IS_BETTER, METRICS, PROFILE_METRICS, compare_schemes,
                              find_crossovers, summary_table, theory_table)
from kvstats.report.plots import (plot_crossover, plot_kl_vs_bits, plot_lowrank_vs_heavytail,
                                  plot_recall_vs_bits, plot_shannon_phi, save_figure,
                                  scheme_palette)
from kvstats.report.render import Report, hypothesis_report

__all__ = ["HIGHER_IS_BETTER", "METRICS", "PROFILE_METRICS", "Report", "compare_schemes",
           "find_crossovers", "hypothesis_report", "plot_crossover", "plot_kl_vs_bits",
           "plot_lowrank_vs_heavytail", "plot_recall_vs_bits", "plot_shannon_phi", "save_figure",
           "scheme_palette", "summary_table", "theory_table"]
