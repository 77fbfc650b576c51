"""aggregate_clusters: the cluster (a real text) as the unit of the report's tests.

The calibration generator mimics real trials: 26 texts of 30 trials (layers x heads),
each text with a random effect shared by its trials (intra-cluster correlation > 0).
Under the null (the same scheme twice, texts split at random between the two arms)
Mann–Whitney on cluster means rejects at its level; on trials it rejects far more often.
"""

import numpy as np
import pandas as pd
import pytest

from kvstats._checks import replicate_scale
from kvstats.analysis import METRICS, aggregate_clusters, compare_schemes, summary_table
from kvstats.metrics.table import METRIC_TABLE
from kvstats.stats import mann_whitney
from scipy import stats

N_TEXTS, PER_TEXT = 26, 30


def _real_frame(rng, texts, scheme, text_effect, icc=0.1, case=("real", "layer=0", 64, 256)):
    """Trials of ``texts`` (PER_TEXT each, text-major) for one scheme; metrics share the text effect."""
    cluster = np.repeat(texts, PER_TEXT)
    n = cluster.size
    data = {}
    for m in METRIC_TABLE:
        z = np.sqrt(icc) * text_effect[m][cluster] + np.sqrt(1 - icc) * rng.standard_normal(n)
        data[m] = np.exp(z) if m == "kl" else z
    return pd.DataFrame(data).assign(
        distribution=case[0], params=case[1], dim=case[2], n_keys=case[3], budget=4.0, scheme=scheme,
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(n), cluster=cluster)


def _basic(cluster, kl, distribution="real"):
    n = len(cluster)
    f = pd.DataFrame({m: np.arange(n, dtype=float) for m in METRIC_TABLE})
    f["kl"] = np.asarray(kl, float)
    return f.assign(distribution=distribution, params="-", dim=8, n_keys=16, budget=3.0, scheme="KQV",
                    bits_nominal=3.0, bits_total=3.25, trial=np.arange(n), cluster=cluster)


# ------------------------------------------------------------- the aggregation
def test_one_row_per_cell_and_cluster_with_the_cluster_means():
    f = pd.concat([_basic([0, 0, 1, 1, 1, 2], [1, 3, 2, 4, 9, 7]),
                   _basic([0, 0, 1, 1, 1, 2], [0, 2, 1, 1, 1, 5]).assign(scheme="KV", cell_id="x")],
                  ignore_index=True)
    g = aggregate_clusters(f)
    assert g[["scheme", "cluster"]].values.tolist() == [["KQV", 0], ["KQV", 1], ["KQV", 2],
                                                        ["KV", 0], ["KV", 1], ["KV", 2]]
    assert g["kl"].tolist() == [2.0, 5.0, 7.0, 1.0, 1.0, 5.0]
    assert g["n_trials_in_cluster"].tolist() == [2, 3, 1] * 2
    assert g["trial"].tolist() == [0, 2, 5] * 2  # the cluster's first row is kept
    assert g["snr_k"].tolist() == [0.5, 3.0, 5.0] * 2
    assert list(g.columns) == list(f.columns) + ["n_trials_in_cluster"]
    assert g["cell_id"].isna().tolist() == [True] * 3 + [False] * 3  # other columns kept as they were


def test_a_cluster_is_one_cell_s_not_the_text_s_across_budgets():
    """The same texts at two budgets of one scheme are two cells: their means never mix."""
    f = pd.concat([_basic([0, 0, 1], [1, 3, 5]), _basic([0, 0, 1], [10, 30, 50]).assign(budget=4.0)],
                  ignore_index=True)
    g = aggregate_clusters(f)
    assert g[["budget", "cluster", "kl"]].values.tolist() == [[3.0, 0, 2.0], [3.0, 1, 5.0],
                                                              [4.0, 0, 20.0], [4.0, 1, 50.0]]


def test_synthetic_trials_are_their_own_clusters_bit_for_bit(frame_factory):
    f = frame_factory({("KQV", 3): 0.0, ("KV", 3): 0.5}, n=20)
    for given in (f, f.assign(cluster=f["trial"])):  # sweeps before the column, and after
        g = aggregate_clusters(given)
        assert (g["n_trials_in_cluster"] == 1).all() and len(g) == len(f)
        for m in METRICS:
            np.testing.assert_array_equal(g[m].to_numpy(), f[m].to_numpy())


def test_nonfinite_values_as_the_summaries_treat_them():
    inf = np.inf
    g = aggregate_clusters(_basic([0, 0, 1, 1], [1.0, inf, 2.0, 4.0]))
    assert g["kl"].tolist() == [inf, 3.0]  # +inf makes its cluster's mean +inf, like summary_table's mean
    with pytest.raises(ValueError, match=r"holds both \+inf and -inf in one cluster .*'cluster': 0"):
        aggregate_clusters(_basic([0, 0, 1, 1], [-inf, inf, 2.0, 4.0]))
    bad = _basic([0, 0, 1, 1], [1, 2, 3, 4])
    bad["ip_bias"] = [0.0, np.nan, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"NaN in metric column 'ip_bias'"):
        aggregate_clusters(bad)
    # values near the float range: Σ x/n never overflows where Σ x would
    big = aggregate_clusters(_basic([0, 0, 1, 1], [1.5e308, 1.5e308, 1.0, 1.0]))
    assert big["kl"].tolist() == [1.5e308, 1.0]


def test_missing_clusters_and_bad_input():
    real = _basic([0, 0, 1, 1], [1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"2 real-cache trial\(s\) without a 'cluster'"):
        aggregate_clusters(real.assign(cluster=[0, 0, np.nan, np.nan]))
    with pytest.raises(ValueError, match=r"4 real-cache trial"):
        aggregate_clusters(real.drop(columns="cluster"))
    # a resumed pre-cluster synthetic cell has NaN clusters: its trials are their own clusters
    synth = _basic([np.nan] * 4, [1, 2, 3, 4], distribution="gaussian")
    assert aggregate_clusters(synth)["cluster"].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"already has one row per cluster"):
        aggregate_clusters(aggregate_clusters(real))
    with pytest.raises(TypeError, match=r"frame must be a pandas DataFrame"):
        aggregate_clusters(real.to_numpy())


def test_the_reports_tables_read_the_aggregated_frame():
    rng = np.random.default_rng(1)
    effect = {m: rng.standard_normal(N_TEXTS) for m in METRIC_TABLE}
    f = pd.concat([_real_frame(rng, np.arange(N_TEXTS), s, effect) for s in ("KQV", "QKQV")],
                  ignore_index=True)
    g = aggregate_clusters(f)
    t = compare_schemes(g, [("KQV", "QKQV")], energy_resamples=99, pairing="none")
    assert set(t["n_a"]) == set(t["n_b"]) == {N_TEXTS}  # clusters, not trials, are the units
    s = summary_table(g, n_resamples=99)
    assert set(s["n_trials"]) == {N_TEXTS}


# ------------------------------------------------------------- calibration (synthetic clusters)
def test_cluster_means_hold_the_level_where_trials_inflate_it():
    rng = np.random.default_rng(20261201)
    n_rep = 300 if replicate_scale() == "ci" else 3000
    p_trial, p_cluster = [], []
    for _ in range(n_rep):
        effect = {m: rng.standard_normal(N_TEXTS) for m in METRIC_TABLE}
        texts = rng.permutation(N_TEXTS)
        a = _real_frame(rng, np.sort(texts[:13]), "KQV", effect)   # same scheme, own draws:
        b = _real_frame(rng, np.sort(texts[13:]), "KQV'", effect)  # the null holds
        f = pd.concat([a, b], ignore_index=True)
        g = aggregate_clusters(f)
        p_trial.append(mann_whitney(a["kl"].to_numpy(), b["kl"].to_numpy()).pvalue)
        ga, gb = g[g["scheme"] == "KQV"], g[g["scheme"] == "KQV'"]
        p_cluster.append(mann_whitney(ga["kl"].to_numpy(), gb["kl"].to_numpy()).pvalue)
    rate_trial, rate_cluster = np.mean(np.array(p_trial) <= 0.05), np.mean(np.array(p_cluster) <= 0.05)
    lo, hi = stats.binom.ppf(0.005, n_rep, 0.05) / n_rep, stats.binom.isf(0.005, n_rep, 0.05) / n_rep
    # 13 vs 13 text means (asymptotic Mann–Whitney): 0.0505 over 2,000 replicates
    assert lo <= rate_cluster <= hi, rate_cluster
    # ICC 0.1 in clusters of 30: design effect 1 + 29 * 0.1 = 3.9, trial-level rate ~0.3
    assert rate_trial > 3 * hi, rate_trial


def test_few_clusters_of_unequal_size_hold_the_exact_level():
    """4 against 6 texts of 1-59 trials each (ICC 0.3): exact Mann–Whitney on the text means.

    Under the null the texts are split at random between two arms of the same scheme, so
    the 10 cluster means are exchangeable whatever their sizes and the rejection rate is
    the exact test's attainable size: P(p <= alpha) over the C(10, 4) = 210 equally
    likely rank splits, enumerated with scipy.stats.mannwhitneyu(method="exact"): 8/210
    at alpha = 0.05, 14/210 at 0.1. On the trials themselves the rate is several times
    higher.
    """
    import itertools

    ref = {a: np.mean([stats.mannwhitneyu(np.array(s, float), np.setdiff1d(np.arange(10), s).astype(float),
                                          method="exact").pvalue <= a
                       for s in itertools.combinations(range(10), 4)]) for a in (0.05, 0.1)}
    rng = np.random.default_rng(20261202)
    n_rep = 300 if replicate_scale() == "ci" else 3000
    p_cluster, p_trial = [], []
    for _ in range(n_rep):
        sizes = rng.integers(1, 60, 10)
        cluster = np.repeat(np.arange(10), sizes)
        kl = np.exp(np.sqrt(0.3) * rng.standard_normal(10)[cluster]
                    + np.sqrt(0.7) * rng.standard_normal(cluster.size))
        arm = np.isin(cluster, rng.permutation(10)[:4])
        f = pd.concat([_basic(cluster[arm], kl[arm]), _basic(cluster[~arm], kl[~arm]).assign(scheme="KV")],
                      ignore_index=True)
        g = aggregate_clusters(f)
        a, b = g.loc[g["scheme"] == "KQV", "kl"].to_numpy(), g.loc[g["scheme"] == "KV", "kl"].to_numpy()
        assert a.size == 4 and b.size == 6
        res = mann_whitney(a, b)
        assert res.method == "exact"
        p_cluster.append(res.pvalue)
        p_trial.append(mann_whitney(kl[arm], kl[~arm]).pvalue)
    for a in (0.05, 0.1):
        lo, hi = stats.binom.ppf(0.0005, n_rep, ref[a]) / n_rep, stats.binom.isf(0.0005, n_rep, ref[a]) / n_rep
        assert lo <= np.mean(np.array(p_cluster) <= a) <= hi, (a, ref[a], np.mean(np.array(p_cluster) <= a))
    assert np.mean(np.array(p_trial) <= 0.05) > 3 * ref[0.05]


def test_tables_warn_when_rows_are_trials_that_share_clusters():
    """summary_table and the two-sample compare_schemes treat rows as independent units: on
    the trials of a real capture (texts repeated within a cell) they say so, naming the fix;
    on cluster means and on synthetic trials (each its own cluster) they stay silent."""
    import warnings

    from kvstats.analysis.clustered import TrialsAsUnitsWarning

    rng = np.random.default_rng(3)
    effect = {m: rng.standard_normal(8) for m in METRIC_TABLE}
    trials = pd.concat([_real_frame(rng, np.arange(8), s, effect) for s in ("KQV", "QKQV")],
                       ignore_index=True)

    def caught(fn):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            fn()
        return [w for w in got if issubclass(w.category, TrialsAsUnitsWarning)]

    for fn in (lambda f: summary_table(f, n_resamples=99),
               lambda f: compare_schemes(f, [("KQV", "QKQV")], pairing="none", energy=False)):
        (w,) = caught(lambda: fn(trials))
        assert "aggregate_clusters" in str(w.message) and f"{len(trials)} rows" in str(w.message)
        assert not caught(lambda: fn(aggregate_clusters(trials)))
        synthetic = trials.assign(distribution="gaussian", cluster=trials["trial"])
        assert not caught(lambda: fn(synthetic))


def test_a_descriptor_is_its_clusters_mean():
    # attn_entropy (kvstats.metrics.table.DESCRIPTORS) describes the trials: a cluster's value
    # is their mean, as for a metric, not its smallest trial's
    f = _basic([0, 0, 1, 1, 1, 2], [1, 3, 2, 4, 9, 7]).assign(attn_entropy=[1.0, 2.0, 0.5, 1.0, 3.0, 4.0])
    assert aggregate_clusters(f)["attn_entropy"].tolist() == [1.5, 1.5, 4.0]
