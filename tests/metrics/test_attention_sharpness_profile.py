"""The trial descriptor ``attn_entropy``: the exact attention's entropy, recorded beside the
profile's metrics and never tested.

References: :func:`kvstats.data.synthetic.attention_entropy` (its own logits and stable
log-sum-exp, not the profile's arrays), and the closed forms of the entropy: ln N for
uniform attention (every logit equal), → 0 when one logit dominates by a margin g
(H ≤ (N − 1)·(1 + g)·e^−g).
"""

import math

import numpy as np
import pytest

import kvstats
from kvstats.analysis import compare_schemes, summary_table
from kvstats.analysis.tested_metrics import TESTABLE_METRICS
from kvstats.data.synthetic import attention_entropy
from kvstats.metrics.profile import PROFILE_COLUMNS, _profile
from kvstats.metrics.table import DESCRIPTORS, METRIC_DIRECTIONS, METRIC_TABLE, REPORT_METRICS
from kvstats.report.options import FAMILY_METRICS


@pytest.mark.parametrize("dist", ["gaussian", "heavy_tailed", "low_rank", "focused"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_column_is_the_entropy_of_the_trials_exact_attention(dist, dtype):
    t = kvstats.sample(dist, 7, 40, 16, seed=3, n_queries=3, dtype=dtype)
    rng = np.random.default_rng(0)
    K_hat = (t.K + 0.3 * rng.standard_normal(t.K.shape)).astype(dtype)
    df = kvstats.error_profile(t, K_hat, t.V)
    want = attention_entropy(t.q, t.K).mean(-1)             # per trial: mean over its queries
    # the profile forms q·k in the trials' dtype (as for its KL), attention_entropy in float64
    rtol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(df["attn_entropy"], want, rtol=rtol, atol=1e-14)
    # a property of the trials: the reconstruction does not enter it, bit for bit
    assert df["attn_entropy"].equals(kvstats.error_profile(t, t.K, t.V)["attn_entropy"])
    assert ((df["attn_entropy"] >= 0) & (df["attn_entropy"] <= math.log(40) + 1e-12)).all()


def test_uniform_attention_has_entropy_log_n():
    # constant keys: every logit of a query equal, p = 1/N, H = ln N whatever the queries
    rng = np.random.default_rng(1)
    N, d = 50, 8
    K = np.broadcast_to(rng.standard_normal(d), (4, N, d)).copy()
    t = kvstats.Trials(K, rng.standard_normal((4, N, d)), rng.standard_normal((4, 3, d)))
    df = kvstats.error_profile(t, t.K, t.V)
    np.testing.assert_allclose(df["attn_entropy"], math.log(N), rtol=1e-14)


def test_one_dominant_key_has_entropy_near_zero():
    # key 0 along the query with logit margin g = 60 over the others (all 0): the closed
    # form H = ln(1 + (N−1)e^−g) + (N−1)·g·e^−g/(1 + (N−1)e^−g) is below 1e-20
    N, d, g = 64, 16, 60.0
    q = np.zeros((2, 1, d))
    q[..., 0] = 1.0
    K = np.zeros((2, N, d))
    K[:, 0, 0] = g * math.sqrt(d)
    t = kvstats.Trials(K, np.ones((2, N, d)), q)
    h = kvstats.error_profile(t, t.K, t.V)["attn_entropy"]
    closed = math.log1p((N - 1) * math.exp(-g)) + (N - 1) * g * math.exp(-g) / (1 + (N - 1) * math.exp(-g))
    assert closed < 1e-20
    # to 2%: its first term, ln(1 + 63e^−60) ≈ 5.5e-25, is lost where 1 + 63e^−60 rounds to 1
    np.testing.assert_allclose(h, closed, rtol=0.02)
    # one key: exactly 0 (not −0.0)
    one = kvstats.Trials(K[:, :1], np.ones((2, 1, d)), q)
    h1 = kvstats.error_profile(one, one.K, one.V, k=1)["attn_entropy"].to_numpy()
    assert (h1 == 0).all() and not np.signbit(h1).any()


def test_every_chunk_and_a_kept_reference_give_the_same_numbers(monkeypatch):
    # the sweep's path: a reference dict shared by several reconstructions of the trials,
    # and several chunks of trials
    from kvstats.metrics import profile as profile_mod

    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 2 * 30 * 16)
    t = kvstats.sample("gaussian", 9, 30, 16, seed=5, n_queries=2)
    want = attention_entropy(t.q, t.K).mean(-1)
    reference: dict = {}
    for scale in (1.0, 0.9):
        df = _profile(t, t.K * scale, t.V, reference=reference)
        np.testing.assert_allclose(df["attn_entropy"], want, rtol=1e-12)
    assert len(reference) > 1                      # several chunks were kept, and reused


def test_a_sweep_records_it_identical_for_every_scheme_of_a_case():
    res = kvstats.run_sweep({"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 4],
                             "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
                             "dims": [32], "n_keys": [64], "n_trials": 12, "n_queries": 2},
                            executor="serial", progress=False)
    f = res.frame
    by_trial = f.groupby(["distribution", "trial"])["attn_entropy"]
    assert (by_trial.nunique() == 1).all() and (by_trial.size() == 6).all()   # 3 schemes × 2 budgets
    # and it is the entropy of the trials the sweep drew (its replay redraws them)
    from kvstats.sweep.replay import replay_trials

    for cid in f.drop_duplicates("distribution")["cell_id"]:
        data = replay_trials(res, trials=range(12), cell_id=cid).data
        got = f[f.cell_id == cid].sort_values("trial")["attn_entropy"]
        np.testing.assert_allclose(got, attention_entropy(data.q, data.K).mean(-1), rtol=1e-12)
    # the two extremes the synthetic cases sit at: near uniform and near one-hot
    mean = f.groupby("distribution")["attn_entropy"].mean()
    assert mean["gaussian"] > math.log(64) - 1 and mean["heavy_tailed"] < 1.5


def test_it_is_a_descriptor_not_a_metric_nor_in_the_family():
    assert "attn_entropy" in DESCRIPTORS and PROFILE_COLUMNS[-1] == "attn_entropy"
    for names in (METRIC_TABLE, METRIC_DIRECTIONS, REPORT_METRICS, TESTABLE_METRICS, FAMILY_METRICS):
        assert "attn_entropy" not in names
    res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"],
                             "dims": [32], "n_keys": [64], "n_trials": 12},
                            executor="serial", progress=False)
    assert "attn_entropy" in res.frame.columns
    comp = compare_schemes(res.frame, [("KV", "KQV")], energy_resamples=19)
    assert "attn_entropy" not in set(comp["metric"])
    assert "attn_entropy" not in set(summary_table(res.frame, n_resamples=99)["metric"])
    assert "attn_entropy" not in set(kvstats.summarize_profile(res.frame)["metric"])
    with pytest.raises(ValueError, match="metrics"):
        compare_schemes(res.frame, [("KV", "KQV")], metrics=["attn_entropy"])
