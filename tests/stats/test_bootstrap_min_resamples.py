"""Too few bootstrap resamples for an interval's level are refused naming n_resamples (or
the report's bootstrap_resamples), not reported by scipy as a "degenerate distribution"
of the data (``kvstats report DIR --bootstrap-resamples 5`` said "x: ... degenerate")."""

import numpy as np
import pytest

from kvstats.report.options import validate_report_options
from kvstats.stats import bootstrap_ci, bootstrap_ratio_ci, cluster_bootstrap_ci, min_resamples


def test_min_resamples_is_one_resample_beyond_each_limit():
    # 2 / (1 − c) rounded up; the float 2/0.05 is 40.000000000000036, still 40
    assert [min_resamples(c) for c in (0.95, 0.99, 0.9, 0.5, 0.8)] == [40, 200, 20, 4, 10]
    for c in (0.95, 0.99, 0.9, 0.8):
        b = min_resamples(c)
        assert b * (1 - c) / 2 >= 1 - 1e-9 and (b - 1) * (1 - c) / 2 < 1
    with pytest.raises(ValueError, match="confidence"):
        min_resamples(1.0)


@pytest.mark.parametrize("call", [
    lambda x, b: bootstrap_ci(x, n_resamples=b),
    lambda x, b: bootstrap_ci(x, n_resamples=b, method="percentile"),
    lambda x, b: bootstrap_ratio_ci(x, x + 1.0, n_resamples=b),
    lambda x, b: cluster_bootstrap_ci(x, np.arange(x.size) // 2, n_resamples=b),
])
def test_below_the_floor_is_refused_naming_n_resamples_and_at_it_runs(call):
    x = np.random.default_rng(0).gamma(4.0, size=60)
    with pytest.raises(ValueError, match=r"n_resamples must be at least 40 for a 0.95 interval.*received 39"):
        call(x, 39)
    res = call(x, 40)
    assert res.low < res.estimate < res.high


def test_report_option_floor_follows_the_report_confidence():
    assert validate_report_options({"bootstrap_resamples": 40})["bootstrap_resamples"] == 40
    with pytest.raises(ValueError, match=r"'bootstrap_resamples' must be an int >= 40 .*received 5"):
        validate_report_options({"bootstrap_resamples": 5})
    # the summary tables at 99%: 200; below 95% the theory tables' 95% still asks 40
    with pytest.raises(ValueError, match=r"at least 200 with confidence 0.99"):
        validate_report_options({"bootstrap_resamples": 199, "confidence": 0.99})
    with pytest.raises(ValueError, match=r"must be an int >= 40"):
        validate_report_options({"bootstrap_resamples": 39, "confidence": 0.8})
    assert validate_report_options({"bootstrap_resamples": 40, "confidence": 0.8})["bootstrap_resamples"] == 40
