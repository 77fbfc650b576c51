"""Analysis of a sweep: pure per-trial frame → tidy table functions.

Every function takes the per-trial frame of :func:`kvstats.run_sweep` (columns of
:func:`kvstats.error_profile` plus the cell columns of :mod:`kvstats.results`) or a
table made from it, and returns a tidy :class:`pandas.DataFrame` whose column names never
depend on the arguments. Nothing here writes files or draws: :mod:`kvstats.report`
renders these tables.

- :mod:`~kvstats.analysis.frame`: the frame's required columns and check;
- :mod:`~kvstats.analysis.clustered`: one row per (cell, cluster) (:func:`aggregate_clusters`);
- :mod:`~kvstats.analysis.intervals`: bootstrap intervals and the heavy-tail screen;
- :mod:`~kvstats.analysis.summary`: per-scheme means, CIs, tails (:func:`summary_table`);
- :mod:`~kvstats.analysis.compare`: pairwise tests, adjusted together (:func:`compare_schemes`;
  the pairs checked by :func:`check_comparisons`), made of :mod:`~kvstats.analysis.pairing`
  (the designs, the rows compared), :mod:`~kvstats.analysis.pair_tests` (one row per test),
  :mod:`~kvstats.analysis.verdicts` (adjustment, resolution, verdicts) and
  :mod:`~kvstats.analysis.tested_metrics` (the metrics tested: :func:`default_metrics`);
- :mod:`~kvstats.analysis.resolution`: what each test could have concluded;
- :mod:`~kvstats.analysis.crossover`: winners changing with the budget (:func:`find_crossovers`);
- :mod:`~kvstats.analysis.theory`: closed forms beside measurements (:func:`theory_table`).
"""

from kvstats.analysis.clustered import aggregate_clusters
from kvstats.analysis.compare import (TESTABLE_METRICS, check_comparisons, compare_schemes,
                                      default_metrics)
from kvstats.analysis.crossover import find_crossovers
from kvstats.analysis.frame import (CASE_COLUMNS, HIGHER_IS_BETTER, METRICS, PROFILE_METRICS,
                                    check_frame)
from kvstats.analysis.summary import summary_table
from kvstats.analysis.theory import theory_table

__all__ = ["aggregate_clusters", "CASE_COLUMNS", "HIGHER_IS_BETTER", "METRICS", "PROFILE_METRICS", "check_frame",
           "check_comparisons", "compare_schemes", "default_metrics", "TESTABLE_METRICS",
           "find_crossovers", "summary_table", "theory_table"]
