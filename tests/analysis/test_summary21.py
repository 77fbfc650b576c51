"""Referee R6, findings 1, 3, 4 and 5: the summary table's intervals, flag and quantiles.

1. Cluster means of ones of unequal sizes read 1.0 and 1.0000000000000002 (Σ x/n); the
   summary dropped the exact all-1 interval (a value > 1) and called BCa on a spread of
   2e-16, which raised. Now: aggregate_clusters clips each mean to its cluster's
   [min, max], and mean_ci / ratio_ci / the [0, 1] check treat values equal up to
   ROUNDING_RTOL as equal (either alone fixes the report; both are tested).
3. few_nonzero exempted a sparse 0/1 sample but flagged the same sample times 0.5; it
   did not screen a fraction's 1 − x (recall@5 of 1 on most trials).
4. summary_table's docstring said ci_reliable comes from the tail index alone.
5. One +inf switched the median to method="higher" (3.0 for [1, 2, 3, inf], not 2.5).
"""

import inspect
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from kvstats.analysis import METRICS, aggregate_clusters, compare_schemes, summary_table
from kvstats.analysis.intervals import (ci_reliable, few_nonzero, mean_ci, ratio_ci,
                                        unit_interval_bound)

ONE_UP = 1.0000000000000002          # sum(1/9 for 9 trials): one ulp above 1
STATISTICS_MD = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"


def _frame(n, **columns):
    rng = np.random.default_rng(0)
    f = pd.DataFrame({m: rng.random(n) for m in METRICS}).assign(
        distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0, scheme="KQV",
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(n))
    return f.assign(**columns)


# ---- finding 1 --------------------------------------------------------------------------

def test_cluster_means_of_ones_of_unequal_sizes_get_the_exact_all_one_interval():
    """The referee's reproducer (agg1.py): texts of 9, 9, 1, 1, 2 trials, recall@5 = 1 on
    every trial. Before: means [1+2e-16, 1+2e-16, 1, 1, 1] and a ValueError from BCa."""
    sizes = [9, 9, 1, 1, 2]
    cl = np.repeat(np.arange(len(sizes)), sizes)
    f = _frame(cl.size, distribution="real", params="layer=0", cluster=cl, recall_at_5=1.0)
    g = aggregate_clusters(f)
    assert g["recall_at_5"].tolist() == [1.0] * 5
    row = summary_table(g, n_resamples=199).set_index("metric").loc["recall_at_5"]
    assert row[["mean", "ci_low", "ci_high"]].tolist() == [1.0, unit_interval_bound(5, 0.95), 1.0]


def test_values_equal_up_to_rounding_are_constant_in_the_intervals_themselves():
    """Without aggregate_clusters' clip (a frame of cluster means made elsewhere): the
    tolerance of mean_ci, ratio_ci and the summary's [0, 1] check. Before, each raised
    'the bootstrap distribution is degenerate' (or lost the exact bound)."""
    x = np.r_[ONE_UP, ONE_UP, 1.0, 1.0, 1.0]
    t = summary_table(_frame(5, recall_at_5=x), n_resamples=199).set_index("metric")
    assert t.loc["recall_at_5", ["mean", "ci_low", "ci_high"]].tolist() == [
        1.0, unit_interval_bound(5, 0.95), 1.0]
    # an unbounded metric constant up to rounding: no interval (the mean alone), no error
    kl = np.r_[0.3, 0.30000000000000004, 0.3, 0.29999999999999993]
    assert len(set(mean_ci(kl, 0.95, 199, 0))) == 1
    # a ratio of two such samples, resampled apart: exact (the referee's ratio_ci case)
    r = ratio_ci(np.r_[1.0, ONE_UP, 1.0], np.r_[2.0, 2 * ONE_UP, 2.0], 199, 0)
    assert r["ci_low"] == r["measured"] == r["ci_high"] == pytest.approx(0.5, rel=1e-15)
    # a fraction out of [0, 1] by more than rounding is still refused
    with pytest.raises(ValueError, match=r"x must lie in \[0, 1\] with unit_interval=True"):
        mean_ci(np.r_[1.0, 1.001, 1.0], 0.95, 99, 0, unit_interval=True)


def test_aggregate_clusters_keeps_a_cluster_of_equal_values_bit_for_bit():
    """n copies of c average to c (Σ c/n drifts: 9 ones give 1.0000000000000002, 10 give
    0.9999999999999999), and every mean lies in its cluster's [min, max]; otherwise the
    mean is the Σ x/n of before, within rounding of math.fsum's exact mean."""
    sizes = np.arange(1, 41)
    for c in (1.0, 0.1, 0.7, 1 / 3, 123.456):
        cl = np.repeat(np.arange(sizes.size), sizes)
        g = aggregate_clusters(_frame(cl.size, cluster=cl, kl=c))
        assert (g["kl"] == c).all(), c
    rng = np.random.default_rng(5)
    cl = np.repeat(np.arange(60), rng.integers(1, 30, 60))
    f = _frame(cl.size, cluster=cl)
    g = aggregate_clusters(f)
    for k, grp in f.groupby("cluster"):
        v = grp["phi_k"].to_numpy()
        assert v.min() <= g.loc[k, "phi_k"] <= v.max()
        assert g.loc[k, "phi_k"] == pytest.approx(math.fsum(v) / v.size, rel=1e-14)


# ---- finding 3 --------------------------------------------------------------------------

def test_few_nonzero_does_not_depend_on_the_unit():
    """Scale-equivariant BCa: c·x has the interval of x in law, so the flag must agree.
    Before: 97 zeros and three 1.0 were exempt, three 0.5 or 0.25 flagged."""
    rng = np.random.default_rng(2)
    samples = [np.r_[np.zeros(97), 1.0, 1.0, 1.0], np.r_[np.zeros(99), 1.0]]
    samples += [(rng.random(100) < p) * rng.exponential(size=100) for p in (0.02, 0.05, 0.1)]
    samples += [(rng.random(100) < p).astype(float) for p in (0.02, 0.05)]
    for x in samples:
        for c in (0.5, 0.25, 2.5, 1 / 3, 7.0):
            assert few_nonzero(c * x) == few_nonzero(x), (c, np.unique(x))
    assert not few_nonzero(np.r_[np.zeros(97), 0.5, 0.5, 0.5])          # {0, c}: a proportion


def test_two_point_samples_in_any_unit_cover_and_are_not_flagged():
    """0.5 · Bernoulli(0.03), n = 100 (an argmax shift at n_queries = 2): given ≥ 2 nonzero
    values, mean_ci covers at least as a 95% interval does (above the binomial 99% band's
    lower end; 0.985 of 791 in docs/statistics.md) and none is flagged. Before: every one
    was flagged."""
    rng = np.random.default_rng(31)
    shown = covered = flagged = 0
    for r in range(300):
        x = 0.5 * (rng.random(100) < 0.03)
        if np.count_nonzero(x) < 2:
            continue
        _, low, high = mean_ci(x, 0.95, 999, r, unit_interval=True)
        shown += 1
        covered += low <= 0.015 <= high
        flagged += not ci_reliable(x, metrics=["argmax_shift"])
    assert shown > 150 and flagged == 0
    assert covered / shown >= stats.binom.ppf(0.005, shown, 0.95) / shown


def test_a_lone_nonzero_value_is_flagged_whatever_it_is():
    """One positive value cannot show that the positive values are all equal: drawn from a
    spread of values (Bernoulli(0.01) · Exp(1), n = 100, 99 zeros and one Exp(1) value),
    the interval c·[l, h] covers the mean 0.01 only for some c: 0.853 of 368 lone values
    (docs/statistics.md, "Sparse means"), below the binomial band of 0.95 here too. So it
    is flagged whatever its value, 1.0 included (which was exempt before: a proportion's
    lone success covers, but the sample cannot tell the two apart)."""
    rng = np.random.default_rng(17)
    covered = 0
    n = 300
    for r in range(n):
        x = np.r_[np.zeros(99), rng.exponential()]
        _, low, high = mean_ci(x, 0.95, 999, r)
        covered += low <= 0.01 <= high
        assert few_nonzero(x)
    assert covered / n < stats.binom.ppf(0.005, n, 0.95) / n
    for c in (1.0, 0.25, 2.5):
        assert few_nonzero(np.r_[np.zeros(99), c]) and not ci_reliable(np.r_[np.zeros(99), c])


def test_a_fractions_mirror_image_of_a_sparse_sample_is_flagged():
    """recall@5 of 1 on most trials, lower on a few: 1 − Bernoulli(0.02) · U³, n = 100. Its
    BCa interval is the mirror of the sparse sample's (BCa respects x → 1 − x) and covers
    0.72 of 350 (seed 21); here below the binomial band, and every such sample is flagged
    for a fraction metric (before: none was), not for a metric without a [0, 1] range."""
    rng = np.random.default_rng(21)
    mu = 1 - 0.02 / 4
    shown = covered = flagged = 0
    for r in range(300):
        x = 1 - (rng.random(100) < 0.02) * rng.random(100) ** 3
        if (x == 1).all():
            continue
        _, low, high = mean_ci(x, 0.95, 999, r, unit_interval=True)
        shown += 1
        covered += low <= mu <= high
        flagged += not ci_reliable(x, metrics=["recall_at_5"])
        assert few_nonzero(x, "recall_at_5") and not few_nonzero(x, "phi_k")
    assert flagged == shown > 200
    assert covered / shown < stats.binom.ppf(0.005, shown, 0.95) / shown


def test_summary_flags_sparse_fractions_in_any_unit_and_mirror():
    """The referee's sum2.py: argmax_shift = 97 zeros and three 0.5 is a proportion (not
    flagged, before: flagged); recall@5 = 1 but on three trials is the mirror of a sparse
    mean (flagged, before: not); a recall of exactly 1 ± rounding on those trials is not
    a value below 1. kl = 97 zeros + 0.3, 1.2, 4.0: tail index not computed, flagged."""
    f = _frame(100, kl=np.r_[np.zeros(97), 0.3, 1.2, 4.0],
               argmax_shift=np.r_[np.zeros(97), 0.5, 0.5, 0.5],
               recall_at_5=1 - np.r_[np.zeros(97), 0.2, 0.4, 0.2])
    t = summary_table(f, n_resamples=199).set_index("metric")
    assert t.loc["argmax_shift", "ci_reliable"]
    assert not t.loc["recall_at_5", "ci_reliable"]
    assert np.isnan(t.loc["kl", "tail_index"]) and not t.loc["kl", "ci_reliable"]
    # two values 0.8 below 1: a proportion in units of 0.2; the ±1e-16 of the ones are not
    # values below 1 (else three unequal "nonzero" values, flagged)
    x = np.r_[np.ones(96), 0.9999999999999999, ONE_UP, 0.8, 0.8]
    assert not few_nonzero(x, "recall_at_5") and few_nonzero(np.r_[x[:-1], 0.6], "recall_at_5")


# ---- finding 4 --------------------------------------------------------------------------

def test_the_texts_say_that_ci_reliable_also_marks_sparse_means():
    """summary_table's docstring said "True otherwise, including where tail_index is not
    computed", and docs/statistics.md that the summary computes its flag from the tail
    index; the kl row of the test above is NaN and False."""
    doc = " ".join(inspect.getdoc(summary_table).split())
    assert "few_nonzero" in doc and "including where ``tail_index`` is not computed and the sample is not sparse" in doc
    text = " ".join(STATISTICS_MD.read_text(encoding="utf-8").split())
    assert "computes its own flag from the tail index." not in text
    assert "`ci_reliable` is False when it is below 2 or" in text


# ---- finding 5 --------------------------------------------------------------------------

def test_median_with_an_infinite_value_is_numpy_median_as_in_compare_schemes():
    """The referee's med1.py: snr_k = [1, 2, 3, inf] had median 3.0 (method "higher")
    where compare_schemes' median_a and np.median give 2.5. p99 stays +inf; interpolation
    between +inf and +inf (NaN) takes the next value up."""
    meta = dict(distribution="gaussian", params="-", dim=64, n_keys=128, budget=2.0,
                bits_nominal=2.0, bits_total=2.0)
    a = pd.DataFrame({m: [1.0, 2.0, 3.0, 4.0] for m in METRICS}).assign(scheme="A",
                                                                       trial=np.arange(4), **meta)
    a.loc[3, "snr_k"] = np.inf
    f = pd.concat([a, a.assign(scheme="B", snr_k=[1.0, 2.0, 3.0, 4.0])], ignore_index=True)
    s = summary_table(f, n_resamples=99).set_index(["scheme", "metric"])
    t = compare_schemes(f, [("A", "B")], metrics=["snr_k"], energy=False)
    assert s.loc[("A", "snr_k"), "median"] == t["median_a"].iloc[0] == np.median(a["snr_k"]) == 2.5
    assert s.loc[("A", "snr_k"), "p99"] == np.inf and s.loc[("B", "snr_k"), "median"] == 2.5
    f.loc[(f.scheme == "A") & (f.trial >= 2), "snr_k"] = np.inf       # [1, 2, inf, inf]
    s = summary_table(f, n_resamples=99).set_index(["scheme", "metric"])
    assert s.loc[("A", "snr_k"), ["median", "p99"]].tolist() == [np.inf, np.inf]
    # finite: numpy's median bit for bit, the linear p99
    x = np.random.default_rng(4).random(37)
    s = summary_table(_frame(37, phi_k=x), n_resamples=99).set_index("metric")
    assert s.loc["phi_k", "median"] == np.median(x) and s.loc["phi_k", "p99"] == np.quantile(x, 0.99)
