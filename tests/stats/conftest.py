"""Helpers for the statistical tests of kvstats.stats (calibration bounds, replicate sizes)."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from kvstats._checks import replicate_scale


def replicates(ci: int, full: int) -> int:
    """Replicate count for the current KVSTATS_TEST_SCALE ("ci" bounded, "full" exhaustive)."""
    return ci if replicate_scale() == "ci" else full


def binom_interval(n: int, p: float, level: float = 0.99) -> tuple[float, float]:
    """Central binomial interval for the fraction of n Bernoulli(p) successes."""
    tail = (1 - level) / 2
    return stats.binom.ppf(tail, n, p) / n, stats.binom.isf(tail, n, p) / n


def check_rejection_rate(pvalues, alpha: float = 0.05, level: float = 0.99, upper_only=False,
                         slack_low: float = 0.0):
    """Assert the rejection rate P(p <= alpha) lies in its binomial interval under the null.

    ``upper_only`` for tests that are only guaranteed to be valid (conservative), e.g.
    discrete data: then only the upper limit is checked. ``slack_low`` widens the lower
    limit for tests known to be slightly conservative (stated at each use).
    """
    pvalues = np.asarray(pvalues)
    rate = float(np.mean(pvalues <= alpha))
    lo, hi = binom_interval(pvalues.size, alpha, level)
    assert rate <= hi, f"rejection rate {rate:.4f} at alpha={alpha} above {hi:.4f} (n={pvalues.size})"
    if not upper_only:
        assert rate >= lo - slack_low, f"rejection rate {rate:.4f} at alpha={alpha} below {lo:.4f} (n={pvalues.size})"
    return rate


def check_discrete_validity(pvalues, alphas=(0.01, 0.05, 0.1, 0.25, 0.5), level=0.999):
    """Uniformity check valid for discrete p-values: P(p <= a) <= a (within binomial noise)."""
    pvalues = np.asarray(pvalues)
    for a in alphas:
        rate = float(np.mean(pvalues <= a))
        hi = stats.binom.isf((1 - level), pvalues.size, a) / pvalues.size
        assert rate <= hi, f"P(p <= {a}) = {rate:.4f} exceeds {hi:.4f} (n={pvalues.size})"


@pytest.fixture
def calib():
    return SimpleNamespace(replicates=replicates, binom_interval=binom_interval,
                           rejection_rate=check_rejection_rate,
                           discrete_validity=check_discrete_validity)
