"""The figures hollow exactly the means the tables mark ‡ (summary_table's ci_reliable)."""
import numpy as np
import pytest

from kvstats.analysis.intervals import few_nonzero
from kvstats.report.plots import _marked


@pytest.mark.parametrize("metric, x", [
    ("recall_at_5", 1.0 - np.r_[np.zeros(97), 0.2, 0.4, 0.2]),   # mirror-sparse: 1 on most trials
    ("argmax_shift", np.r_[np.zeros(97), 0.5, 0.25, 0.5]),
    ("kl", np.r_[np.zeros(96), -1e-17, 0.3, 1.2, 4.0]),           # a KL rounding below 0
    ("recall_at_5", np.r_[np.zeros(97), 1.0, 1.0, 1.0]),         # a proportion: not marked
])
def test_the_figures_mark_what_the_tables_mark(metric, x):
    assert _marked(x, metric) == few_nonzero(x, metric)
    assert _marked(x, metric) == (metric != "recall_at_5" or x.mean() > 0.5)
