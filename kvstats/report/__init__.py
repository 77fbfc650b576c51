"""Reports and figures of a sweep: tidy tables, hypothesis tests, Markdown/HTML, seaborn plots.

Importing this package sets no matplotlib state; :mod:`kvstats.report.plots` selects the
Agg backend only if no backend was chosen yet.
"""

from kvstats.report.plots import (plot_crossover, plot_kl_vs_bits, plot_lowrank_vs_heavytail,
                                  plot_recall_vs_bits, plot_shannon_phi, save_figure,
                                  scheme_palette)
from kvstats.report.render import Report, hypothesis_report
from kvstats.report.tables import (HIGHER_IS_BETTER, METRICS, PROFILE_METRICS, compare_schemes,
                                   find_crossovers, summary_table, theory_table)

__all__ = ["HIGHER_IS_BETTER", "METRICS", "PROFILE_METRICS", "Report", "compare_schemes",
           "find_crossovers", "hypothesis_report", "plot_crossover", "plot_kl_vs_bits",
           "plot_lowrank_vs_heavytail", "plot_recall_vs_bits", "plot_shannon_phi", "save_figure",
           "scheme_palette", "summary_table", "theory_table"]
