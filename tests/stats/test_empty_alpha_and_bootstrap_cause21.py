"""R5 findings 2 and 3: add_adjusted_pvalues checks alpha on an empty frame as on any
other, and a bootstrap interval made non-finite by non-finite resamples says so, without
advising the method that just failed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from kvstats.stats import add_adjusted_pvalues, bootstrap_ci, bootstrap_ratio_ci


@pytest.mark.parametrize("alpha", [5.0, 0.0, 1.0, -0.1, float("nan")])
def test_add_adjusted_pvalues_checks_alpha_on_an_empty_frame(alpha):
    empty = pd.DataFrame({"pvalue": pd.Series([], dtype=float)})
    one = pd.DataFrame({"pvalue": [0.2]})
    with pytest.raises(ValueError, match="alpha") as on_one:
        add_adjusted_pvalues(one, alpha=alpha)
    with pytest.raises(ValueError, match=re.escape(str(on_one.value))):
        add_adjusted_pvalues(empty, alpha=alpha)
    out = add_adjusted_pvalues(empty, alpha=0.05)     # a valid alpha: the empty columns
    assert out.empty and list(out.columns) == ["pvalue", "pvalue_adjusted", "reject", "adjust_method"]


@pytest.mark.parametrize("method", ["percentile", "basic"])
def test_non_finite_ratio_interval_names_the_zero_mean_resamples(method):
    # y = (-1, 1, 0.5): resamples such as (-1, 0.5, 0.5) have mean 0, the ratio is ±inf there
    with pytest.raises(ValueError) as err:
        bootstrap_ratio_ci([1.0, 2.0, 3.0], [-1.0, 1.0, 0.5], method=method, n_resamples=999)
    msg = str(err.value)
    assert "is not finite" in msg and "of 999 resamples have a non-finite statistic" in msg
    assert "mean 0" in msg and "try method" not in msg


def test_non_finite_generic_statistic_and_bca_messages():
    def inverse_mean(a, axis=-1):
        return 1 / np.mean(a, axis=axis)

    with pytest.raises(ValueError, match="resamples have a non-finite statistic") as err:
        bootstrap_ci([-1.0, 1.0, 0.5], statistic=inverse_mean, method="percentile", n_resamples=999)
    assert "try method='percentile'" not in str(err.value)
    # BCa: scipy refuses; the message gives both causes, no longer "all values equal"
    with pytest.raises(ValueError, match="non-finite statistic on some resample") as err:
        bootstrap_ratio_ci([1.0, 2.0, 3.0], [-1.0, 1.0, 0.5], method="BCa", n_resamples=999)
    assert "all values equal" not in str(err.value) and "mean 0" in str(err.value)
