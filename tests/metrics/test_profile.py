"""The per-trial error profile and its summary.

The fast, chunked profile is checked against a plain per-trial reference written with
the public single-purpose functions, on exact reconstructions (closed-form values), and
statistically on Gaussian perturbations, where q·e ~ N(0, σ²‖q‖²) in closed form.
"""

import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.data import Trials, group_query_heads
from kvstats.metrics import (PROFILE_COLUMNS, angle, argmax_shift, attention_logits,
                             error_profile, kl_divergence, log_softmax, norm_ratio, snr_db,
                             summarize_profile, topk_recall)
from kvstats.metrics import profile as profile_mod


def _reference_profile(t, K_hat, V_hat, k=5):
    rows = []
    for i in range(t.n_trials):                    # plain loop: the reference, not the fast path
        q, K, V, Kh, Vh = t.q[i], t.K[i], t.V[i], K_hat[i], V_hat[i]
        lg, lgh = attention_logits(q, K), attention_logits(q, Kh)
        lp, lq = log_softmax(lg), log_softmax(lgh)
        T, Th = np.exp(lp) @ V, np.exp(lq) @ Vh
        e = q @ (Kh - K).T
        rows.append(dict(trial=i, snr_k=snr_db(K, Kh).mean(), phi_k=angle(K, Kh).mean(),
                         norm_ratio_k=norm_ratio(K, Kh).mean(), snr_v=snr_db(V, Vh).mean(),
                         phi_v=angle(V, Vh).mean(), norm_ratio_v=norm_ratio(V, Vh).mean(),
                         snr_t=snr_db(T, Th).mean(), phi_t=angle(T, Th).mean(),
                         norm_ratio_t=norm_ratio(T, Th).mean(), kl=kl_divergence(lp, lq).mean(),
                         recall_at_5=topk_recall(lg, lgh, k).mean(),
                         argmax_shift=argmax_shift(lg, lgh).mean(), ip_bias=e.mean(),
                         ip_var=e.var(),
                         # least-squares slope through the origin of q·k̂ on q·k
                         ip_slope=np.sum((q @ K.T) * (q @ Kh.T)) / np.sum((q @ K.T) ** 2),
                         # energy-pooled SNR: the definition, in float64
                         snr_k_pooled=10 * np.log10(np.sum(K.astype(float) ** 2)
                                                    / np.sum((Kh.astype(float) - K) ** 2)),
                         snr_v_pooled=10 * np.log10(np.sum(V.astype(float) ** 2)
                                                    / np.sum((Vh.astype(float) - V) ** 2)),
                         attn_entropy=-(np.exp(lp) * lp).sum(-1).mean()))
    return pd.DataFrame(rows)


def _perturbed(T=12, N=64, d=32, n_q=3, sigma=0.3, seed=0, dtype=np.float64, dist="gaussian"):
    t = kvstats.sample(dist, T, N, d, seed=seed, n_queries=n_q, dtype=dtype)
    rng = np.random.default_rng(seed + 100)
    Kh = (t.K + sigma * rng.standard_normal(t.K.shape)).astype(dtype)
    Vh = (t.V * 0.9 + sigma * rng.standard_normal(t.V.shape)).astype(dtype)
    return t, Kh, Vh


def test_exact_reconstruction():
    t = kvstats.sample("focused", 6, 50, 16, seed=1, n_queries=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = error_profile(t, t.K, t.V, k=3)
    assert list(df.columns) == list(PROFILE_COLUMNS)
    assert df["trial"].tolist() == list(range(6))
    for c in ("snr_k", "snr_v", "snr_t"):
        assert np.isposinf(df[c]).all()
    for c in ("phi_k", "phi_v", "phi_t", "kl", "argmax_shift", "ip_bias", "ip_var"):
        assert (df[c] == 0).all(), c
    for c in ("norm_ratio_k", "norm_ratio_v", "norm_ratio_t", "recall_at_5", "ip_slope"):
        assert (df[c] == 1).all(), c
    assert df.attrs["k"] == 3
    assert df.attrs["exact_vectors"] == {"k": 300, "v": 300, "t": 24}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_plain_reference(dtype):
    t, Kh, Vh = _perturbed(dtype=dtype)
    df = error_profile(t, Kh, Vh)
    ref = _reference_profile(t, Kh, Vh)
    rtol = 1e-10 if dtype == np.float64 else 2e-4
    pd.testing.assert_frame_equal(df, ref, check_dtype=False, rtol=rtol, atol=1e-12)
    assert df.dtypes.drop("trial").eq(np.float64).all()


def test_chunking_does_not_change_results(monkeypatch):
    t, Kh, Vh = _perturbed(T=9)
    full = error_profile(t, Kh, Vh)
    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 1)        # one trial per chunk
    pd.testing.assert_frame_equal(error_profile(t, Kh, Vh), full, rtol=1e-13)


def test_float32_close_to_float64():
    t, Kh, Vh = _perturbed(T=8, N=256, d=64)
    a = error_profile(t, Kh, Vh)
    b = error_profile(t.astype(np.float32), Kh.astype(np.float32), Vh.astype(np.float32))
    # inputs rounded to float32 move every metric by ~1e-7 relative; KL (≈ 0.03) by ~1e-6
    pd.testing.assert_frame_equal(a.drop(columns=["recall_at_5", "argmax_shift"]),
                                  b.drop(columns=["recall_at_5", "argmax_shift"]), rtol=1e-4)


def test_queries_are_averaged_and_gqa_works():
    # n_q = 3 queries per trial equals the mean over three single-query profiles.
    t, Kh, Vh = _perturbed(T=5, n_q=3)
    df = error_profile(t, Kh, Vh)
    singles = [error_profile(Trials(t.K, t.V, t.q[:, j:j + 1]), Kh, Vh) for j in range(3)]
    for c in ("kl", "recall_at_5", "argmax_shift", "snr_t", "phi_t", "norm_ratio_t"):
        np.testing.assert_allclose(df[c], np.mean([s[c] for s in singles], axis=0), rtol=1e-12)
    np.testing.assert_allclose(df["snr_k"], singles[0]["snr_k"], rtol=1e-14)
    # grouped-query layout (SmolLM2: 9 query heads over 3 KV heads) through the helper
    rng = np.random.default_rng(0)
    K = rng.standard_normal((2, 3, 40, 16))
    q = rng.standard_normal((2, 9, 2, 16))
    g = group_query_heads(K, K, q)
    dfg = error_profile(g, g.K + 0.1, g.V)
    assert len(dfg) == 6 and dfg.attrs["n_queries"] == 6


def test_partially_exact_keys_leave_the_snr_mean():
    t, Kh, Vh = _perturbed(T=4)
    Kh = Kh.copy()
    Kh[0, :10] = t.K[0, :10]                       # 10 exact keys in trial 0
    df = error_profile(t, Kh, Vh)
    per_key = snr_db(t.K[0], Kh[0])
    assert np.isfinite(df.loc[0, "snr_k"])
    assert df.loc[0, "snr_k"] == pytest.approx(per_key[10:].mean(), rel=1e-12)
    assert df.attrs["exact_vectors"]["k"] == 10


def test_inner_product_error_statistics():
    # K̂ = K + σZ: given q, e_j = q·(σ z_j) ~ N(0, σ²‖q‖²) i.i.d. over keys, so
    # E[ip_bias] = 0 with SD σ‖q‖/√N, and E[ip_var] = σ²‖q‖²(N−1)/N (one query; n_q > 1:
    # the next test).
    T, N, d, sigma = 300, 128, 32, 0.2
    t = kvstats.sample("gaussian", T, N, d, seed=7)
    Kh = t.K + sigma * np.random.default_rng(8).standard_normal(t.K.shape)
    df = error_profile(t, Kh, t.V)
    qn2 = (t.q[:, 0] ** 2).sum(-1)
    z = df["ip_bias"] / np.sqrt(sigma ** 2 * qn2 / N)
    assert abs(z.mean()) < 5 / np.sqrt(T)                # standardised bias: N(0, 1/T)
    ratio = df["ip_var"] / (sigma ** 2 * qn2 * (N - 1) / N)
    # ratio ~ χ²_{N−1}/(N−1): SD sqrt(2/(N−1)) per trial; 5 SE over T trials
    assert abs(ratio.mean() - 1) < 5 * np.sqrt(2 / (N - 1) / T)


def test_inner_product_error_variance_with_several_queries():
    # n_q queries share each z_j: with Q (n_q × d) and Z (N × d), ip_var/σ² = w'Aw for
    # w = vec(Z) ~ N(0, I), A = (I_N ⊗ QᵀQ)/M − uuᵀ/M², u = 1_N ⊗ Qᵀ1, M = n_q·N (the mean
    # of squares minus the squared mean ip_bias = σ q̄·z̄). So E[ip_var | Q] = σ² tr A =
    # σ²(mean_i‖q_i‖² − ‖q̄‖²/N) and Var[ip_var | Q] = 2σ⁴ tr A², in closed form:
    # tr A² = N tr(G²)/M² − 2N s'Gs/M³ + N²‖s‖⁴/M⁴, G = QᵀQ, s = Qᵀ1.
    T, N, d, n_q, sigma = 4000, 16, 8, 4, 0.3
    t = kvstats.sample("gaussian", T, N, d, seed=21, n_queries=n_q)
    Kh = t.K + sigma * np.random.default_rng(22).standard_normal(t.K.shape)
    ip_var = error_profile(t, Kh, t.V)["ip_var"].to_numpy()
    Q = t.q                                                     # (T, n_q, d)
    M, G, s = n_q * N, np.einsum("tid,tie->tde", Q, Q), Q.sum(1)
    mean = sigma ** 2 * ((Q ** 2).sum(-1).mean(-1) - (Q.mean(1) ** 2).sum(-1) / N)
    sGs = np.einsum("td,tde,te->t", s, G, s)
    trA2 = (N * (G ** 2).sum((1, 2)) / M ** 2 - 2 * N * sGs / M ** 3
            + N ** 2 * (s ** 2).sum(-1) ** 2 / M ** 4)
    # the closed forms against the explicit matrix A of trial 0
    u = np.kron(np.ones(N), s[0])
    A = np.kron(np.eye(N), G[0]) / M - np.outer(u, u) / M ** 2
    assert sigma ** 2 * np.trace(A) == pytest.approx(mean[0], rel=1e-12)
    assert np.trace(A @ A) == pytest.approx(trA2[0], rel=1e-12)
    # unbiased: the standardised sum over T independent trials is ~N(0, 1) (CLT); 5 SE
    se = np.sqrt(np.sum(2 * sigma ** 4 * trA2))
    assert abs(np.sum(ip_var - mean) / se) < 5
    # power: the one-query form σ² mean_i‖q_i‖²(N−1)/N is rejected here (~5% low)
    one_query = sigma ** 2 * (Q ** 2).sum(-1).mean(-1) * (N - 1) / N
    assert np.sum(ip_var - one_query) / se > 10
    assert 0.93 < one_query.sum() / mean.sum() < 0.97


def test_kl_matches_second_order_theory_for_small_key_noise():
    # Logit error δ_j = q·σz_j/√d; KL ≈ ½ Var_p(δ) whose expectation is
    # ½ σ²‖q‖²/d · (1 − Σ p²) (closed form, to O(σ³)).
    T, N, d, sigma = 100, 256, 64, 1e-3
    t = kvstats.sample("gaussian", T, N, d, seed=9)
    Kh = t.K + sigma * np.random.default_rng(10).standard_normal(t.K.shape)
    df = error_profile(t, Kh, t.V)
    p = kvstats.metrics.attention_weights(t.q, t.K)[:, 0]
    qn2 = (t.q[:, 0] ** 2).sum(-1)
    pred = 0.5 * sigma ** 2 * qn2 / d * (1 - (p ** 2).sum(-1))
    r = df["kl"] / pred        # per trial ~ weighted χ² / its mean: mean 1, SD ≲ 0.2
    assert abs(r.mean() - 1) < 0.05


def test_bad_input():
    t, Kh, Vh = _perturbed(T=3, N=8)
    with pytest.raises(ValueError, match=r"K_hat must have the shape of trials.K \(3, 8, 32\)"):
        error_profile(t, Kh[:2], Vh)
    with pytest.raises(ValueError, match="V_hat must have the shape of trials.V"):
        error_profile(t, Kh, Vh[..., :16])
    bad = Kh.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="K_hat must be finite"):
        error_profile(t, bad, Vh)
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 8\]; received 9"):
        error_profile(t, Kh, Vh, k=9)
    with pytest.raises(TypeError, match="trials must be a kvstats.Trials"):
        error_profile((t.K, t.V, t.q), Kh, Vh)


def test_summarize_profile():
    t, Kh, Vh = _perturbed(T=40)
    df = error_profile(t, Kh, Vh)
    s = summarize_profile(df)
    assert list(s.columns) == ["metric", "n", "mean", "median", "p01", "p99", "min", "max", "worst"]
    assert list(s["metric"]) == list(kvstats.metrics.METRIC_TABLE)
    row = s.set_index("metric")
    for c in ("kl", "snr_k", "ip_bias"):
        assert row.loc[c, "mean"] == pytest.approx(df[c].mean())
        assert row.loc[c, "p99"] == pytest.approx(np.percentile(df[c], 99))
        assert row.loc[c, "p01"] == pytest.approx(np.percentile(df[c], 1))
    assert row.loc["kl", "worst"] == df["kl"].max()
    assert row.loc["snr_k", "worst"] == df["snr_k"].min()
    assert row.loc["recall_at_5", "worst"] == df["recall_at_5"].min()
    assert row.loc["ip_bias", "worst"] == df["ip_bias"].iloc[df["ip_bias"].abs().argmax()]
    # grouping
    both = pd.concat([df.assign(scheme="a"), df.assign(scheme="b", kl=df["kl"] * 2)])
    g = summarize_profile(both, by="scheme", metrics=["kl"])
    assert g["scheme"].tolist() == ["a", "b"]
    assert g["mean"].iloc[1] == pytest.approx(2 * g["mean"].iloc[0])


def test_summarize_handles_inf_without_nan():
    t, Kh, Vh = _perturbed(T=10)
    df = pd.concat([error_profile(t, Kh, Vh), error_profile(t, t.K, t.V)], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize_profile(df).set_index("metric")
    assert not s.drop(columns="n").isna().any().any()
    assert np.isposinf(s.loc["snr_k", "mean"]) and np.isposinf(s.loc["snr_k", "max"])
    assert np.isfinite(s.loc["snr_k", "p01"]) and np.isposinf(s.loc["snr_k", "p99"])
    assert s.loc["snr_k", "worst"] == df["snr_k"].min()
    # only-inf column: every statistic is inf, none NaN
    s2 = summarize_profile(error_profile(t, t.K, t.V), metrics=["snr_k"])
    assert np.isposinf(s2[["mean", "median", "p01", "p99", "min", "max"]].to_numpy()).all()


def test_summarize_errors():
    df = pd.DataFrame({"kl": [0.1, np.nan]})
    with pytest.raises(ValueError, match="must not contain NaN"):
        summarize_profile(df)
    with pytest.raises(ValueError, match="by must name columns"):
        summarize_profile(pd.DataFrame({"kl": [0.1]}), by="scheme")
    with pytest.raises(ValueError, match="none of the profile metrics"):
        summarize_profile(pd.DataFrame({"x": [0.1]}))
    with pytest.raises(TypeError, match="df must be a pandas DataFrame"):
        summarize_profile({"kl": [0.1]})


# --- magnitudes across the float range (issue #12, point 5) -------------------------------

@pytest.mark.parametrize("k_scale,v_scale", [(2.0**600, 2.0**-700), (2.0**-600, 2.0**900),
                                             (2.0**-3, 1e200)])
def test_profile_is_invariant_under_reciprocal_scaling_of_keys_and_queries(k_scale, v_scale):
    # K·s with q/s leaves every logit, q·e and hence every column unchanged; V·c leaves the
    # scale-free value and output metrics unchanged. Before: NaN SNR, angle 0.
    t, Kh, Vh = _perturbed(T=4, N=32, d=16, n_q=2, seed=3)
    ref = error_profile(t, Kh, Vh)
    ts = Trials(t.K * k_scale, t.V * v_scale, t.q / k_scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = error_profile(ts, Kh * k_scale, Vh * v_scale)
    pd.testing.assert_frame_equal(got, ref, check_exact=False, rtol=1e-10)


@pytest.mark.parametrize("exponent", [-75, -80, 64])
def test_tiny_and_huge_float32_queries_and_keys_give_the_float64_profile(exponent):
    # q, K, K̂ all scaled by 2**exponent: q·k ~ 4**exponent. At 2**-75 in float32 (q, k ~
    # 3e-23) every term q_c·k_c (~1e-45) falls into float32's subnormals, and the
    # profile's float32 q·k used to keep them: recall, argmax shift, ip_bias, ip_var and
    # ip_slope were wrong (ip_var 1.04 for 2.15 at the reference scale). They must equal
    # the profile of the same values in float64 (recall and argmax exactly, the rest within
    # 1e-5 relative: float32 rounds K̂ − K), and the scale-free columns that of the unscaled
    # data (ip_bias and ip_var scaled back by 4**-e, 16**-e). At 2**64, q·k overflows float32.
    t = kvstats.sample("gaussian", 6, 64, 32, seed=11, n_queries=3, dtype=np.float32)
    rng = np.random.default_rng(1)
    Kh = (t.K + 0.3 * rng.standard_normal(t.K.shape)).astype(np.float32)
    Vh = (t.V * 0.9 + 0.3 * rng.standard_normal(t.V.shape)).astype(np.float32)

    def profile(dt, e):
        c = lambda a: np.ldexp(a.astype(dt), e)         # exact: only the exponent changes
        return error_profile(Trials(c(t.K), t.V.astype(dt), c(t.q)), c(Kh), Vh.astype(dt))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, ref = profile(np.float32, exponent), profile(np.float64, exponent)
    exact = ["recall_at_5", "argmax_shift"]
    pd.testing.assert_frame_equal(got[exact], ref[exact], check_exact=True)
    pd.testing.assert_frame_equal(got, ref, check_exact=False, rtol=1e-5)
    unscaled = profile(np.float64, 0)
    scaled_back = got.assign(ip_bias=np.ldexp(got.ip_bias, -2 * exponent),
                             ip_var=np.ldexp(got.ip_var, -4 * exponent))
    cols = exact + ["ip_bias", "ip_var", "ip_slope", "snr_k", "phi_k", "snr_v", "phi_v"]
    pd.testing.assert_frame_equal(scaled_back[cols], unscaled[cols], check_exact=False, rtol=1e-5)


def test_profile_at_the_issue_magnitude_is_an_error_not_nan():
    # K and q at 1e160: q·k ~ 1e320·d is beyond float64 (before: NaN KL and SNR)
    t, Kh, Vh = _perturbed(T=2, N=16, d=8, n_q=2, seed=4)
    ts = Trials(t.K * 1e160, t.V, t.q * 1e160)
    with pytest.raises(ValueError, match="q and K: the inner products q·k exceed the float64"):
        error_profile(ts, Kh * 1e160, Vh)
    # keys at 1e160 with ordinary queries: logits fine, but ip_var ~ 1e320 is not
    ts = Trials(t.K * 1e160, t.V, t.q)
    with pytest.raises(ValueError, match=r"inner-product error variance \(ip_var\) exceeds"):
        error_profile(ts, Kh * 1e160, Vh)


def test_profile_of_keys_near_the_float_limit():
    # k̂ − k overflows (1.7e308 − (−1.7e308)); with tiny queries every logit is ordinary
    t, Kh, Vh = _perturbed(T=2, N=16, d=8, n_q=2, seed=5)
    K = t.K.copy()
    K[0, 0, 0], Kh = 1.7e308, Kh.copy()
    Kh[0, 0, 0] = -1.7e308
    ts = Trials(K, t.V, t.q * 1e-300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = error_profile(ts, Kh, Vh)
    assert np.isfinite(df.drop(columns="trial").to_numpy()).all()
    # that vector's SNR: ‖x‖² / ‖x̂ − x‖² = 1/4 up to the other 7 ordinary coordinates
    assert snr_db(K[0, :1], Kh[0, :1])[0] == pytest.approx(10 * np.log10(0.25), rel=1e-12)


def test_summarize_rejects_non_numeric_metric_columns():
    # was numpy's "could not convert string to float", naming no column
    df = pd.DataFrame({"kl": ["a", "b"], "snr_k": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"metrics must name numeric columns of df; .*'kl'"):
        summarize_profile(df)
    assert summarize_profile(df, metrics=["snr_k"])["mean"].tolist() == [1.5]


# --- ties in the quantized logits ------------------------------------------------------

def test_keys_coded_alike_tie_in_the_rankings():
    # Every key of a trial reconstructed to one vector: all quantized logits tie, so by
    # the tie rules of topk_recall/argmax_shift recall is 1 and no argmax shifts (closed
    # form). Before, q·k + q·(k̂ − k) broke the ties by rounding noise of the unquantized
    # keys: recall down to 0 and argmax shift up to 1 on this draw.
    t = kvstats.sample("gaussian", 50, 64, 8, seed=3, n_queries=3)
    Kh = np.broadcast_to(t.K.mean(axis=1, keepdims=True), t.K.shape).copy()
    df = error_profile(t, Kh, t.V)
    assert (df["recall_at_5"] == 1.0).all() and (df["argmax_shift"] == 0.0).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [1, 5])
def test_rankings_under_ties_match_the_public_functions(dtype, k):
    # 1-bit sign codes in d = 4: 16 possible k̂ for 64 keys, many exact ties in q·k̂.
    # Reference: topk_recall / argmax_shift (ref first) on attention_logits, per trial.
    t = kvstats.sample("gaussian", 40, 64, 4, seed=1, n_queries=3, dtype=dtype)
    Kh = np.sign(t.K)
    df = error_profile(t, Kh, t.V, k=k)
    lg = attention_logits(t.q.astype(np.float64), t.K.astype(np.float64))
    lgh = attention_logits(t.q.astype(np.float64), Kh.astype(np.float64))
    # the per-trial values are the exact fractions hits/(k·n_q), correctly rounded once
    hits = np.rint(topk_recall(lg, lgh, k) * k).astype(int).sum(-1)
    shifts = argmax_shift(lg, lgh).sum(-1)
    np.testing.assert_array_equal(df["recall_at_5"], [float(Fraction(int(h), k * 3)) for h in hits])
    np.testing.assert_array_equal(df["argmax_shift"], [float(Fraction(int(h), 3)) for h in shifts])


def test_recall_and_argmax_shift_are_exact_fractions_whatever_the_query_order():
    # Per trial the recall is (hits summed over queries)/(k·n_q) and the argmax shift
    # (shifts)/n_q, each one correctly rounded division: equal counts give equal bits
    # whatever query holds them. Before, the mean over queries of hits/k summed rounded
    # fifths (0.2 + 0.2 + 0.2 = 0.6000000000000001), so a trial's recall moved in the last
    # bit with the query order (each of the 7 permutation draws here changed some trial's bits).
    t = kvstats.sample("gaussian", 60, 32, 4, seed=5, n_queries=7)
    Kh = np.sign(t.K)                                       # coarse: varied hit counts
    base = error_profile(t, Kh, t.V)
    lg = attention_logits(t.q, t.K)
    hits = np.rint(topk_recall(lg, attention_logits(t.q, Kh), 5) * 5).astype(int).sum(-1)
    np.testing.assert_array_equal(base["recall_at_5"], [float(Fraction(int(h), 35)) for h in hits])
    rng = np.random.default_rng(0)
    for _ in range(7):
        perm = rng.permutation(7)
        df = error_profile(Trials(t.K, t.V, t.q[:, perm]), Kh, t.V)
        np.testing.assert_array_equal(df["recall_at_5"], base["recall_at_5"])
        np.testing.assert_array_equal(df["argmax_shift"], base["argmax_shift"])


def test_an_extreme_trial_leaves_the_others_of_its_chunk_bit_for_bit():
    # Trial 0 holds k = 1.7e308, k̂ = −1.7e308 (k̂ − k overflows; tiny queries keep its
    # logits finite). The scaled redo used one exponent for the whole chunk, pushing the
    # ordinary trial 1 into the subnormals (its KL moved by 2e-4 relative, ip_bias by
    # 2e-10, pooled SNR by an ulp). Each row now carries its own exponent.
    t = kvstats.sample("gaussian", 2, 16, 8, seed=5, n_queries=2)
    Kh = t.K + 1e-6 * np.random.default_rng(0).standard_normal(t.K.shape)
    K = t.K.copy()
    K[0, 0, 0], Kh[0, 0, 0] = 1.7e308, -1.7e308
    K[0, 1] *= 1e-300                       # a key coded 600 decades off its magnitude
    Kh[0, 1] = 1e300 * Kh[0, 1]
    q = t.q.copy()
    q[0] *= 1e-300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = error_profile(Trials(K, t.V, q), Kh, t.V)
    alone = error_profile(Trials(K[1:], t.V[1:], q[1:]), Kh[1:], t.V[1:])
    pd.testing.assert_frame_equal(both.iloc[1:].reset_index(drop=True).drop(columns="trial"),
                                  alone.drop(columns="trial"), check_exact=True)
    # trial 0's inner-product error q·(k̂ − k), from halves (exact; no overflow): its sign
    # and size, mean and population variance over the (query, key) pairs
    ref = q[0] @ (Kh[0] / 2 - K[0] / 2).T * 2
    assert both.loc[0, "ip_bias"] == pytest.approx(ref.mean(), rel=1e-12)
    assert both.loc[0, "ip_var"] == pytest.approx(ref.var(), rel=1e-12)



def test_an_overflowing_float32_trial_leaves_the_others_of_its_chunk_bit_for_bit():
    # float32 twin of the test above. Trial 1's keys (and their codes) ×1e19: their
    # squared norms overflow float32 (~3.4e38), so its rows are summed in float64. Before,
    # every row of the chunk was then summed in float64: trial 0's snr_k, phi_k,
    # norm_ratio_k and snr_k_pooled moved by ~1e-9 relative with the trials that shared
    # its chunk. Only the overflowing rows are redone now.
    t = kvstats.sample("gaussian", 2, 64, 128, seed=3).astype(np.float32)
    Kh = (t.K + 0.1 * np.random.default_rng(4).standard_normal(t.K.shape)).astype(np.float32)
    K = t.K.copy()
    K[1] *= np.float32(1e19)
    Kh[1] *= np.float32(1e19)
    q = t.q.copy()
    q[1] *= np.float32(1e-19)                       # trial 1's logits stay ordinary
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = error_profile(Trials(K, t.V, q), Kh, t.V)
    alone = error_profile(Trials(K[:1], t.V[:1], q[:1]), Kh[:1], t.V[:1])
    pd.testing.assert_frame_equal(both.iloc[:1], alone, check_exact=True)
    # and trial 1 is right: the SNR, angle and ratio of its keys are scale-free
    ref = error_profile(Trials(t.K[1:], t.V[1:], t.q[1:]), Kh[1:] / np.float32(1e19), t.V[1:])
    for col in ("snr_k", "phi_k", "norm_ratio_k", "snr_k_pooled"):
        assert both.loc[1, col] == pytest.approx(ref.loc[0, col], rel=1e-5), col

def test_inner_products_whose_terms_overflow_but_sum_does_not():
    # q·k = 1e160·1e150·(1 − 0.99): terms of 1e310 overflow, the sum 1e308 does not.
    # Reference: the exact rational dot product of the stored floats, rounded once.
    from fractions import Fraction
    q = np.array([[[1e160, 1e160]]])
    K = np.array([[[1e150, -0.99e150], [1e150, -0.995e150], [1.0, 2.0]]])
    ref = [[[float(sum(Fraction(a) * Fraction(b) for a, b in zip(q[0, 0], k))) for k in K[0]]]]
    np.testing.assert_allclose(profile_mod._inner(q, K, "q and K"), ref, rtol=1e-14)
    assert profile_mod._inner(q, K, "q and K")[0, 0, 2] == 3e160     # ordinary row: exact


def test_worst_norm_ratio_is_farthest_from_one_in_log_scale():
    # |log 0.5| = 0.693 > |log 1.8| = 0.588: halving is the worse scale error, though
    # 1.8 is farther from 1 on a linear scale; ip_bias: farthest from 0 in either sign
    df = pd.DataFrame({"norm_ratio_k": [0.5, 1.8, 1.0], "ip_bias": [-3.0, 2.0, 0.5]})
    s = summarize_profile(df).set_index("metric")["worst"]
    assert s["norm_ratio_k"] == 0.5 and s["ip_bias"] == -3.0
    df = pd.DataFrame({"norm_ratio_k": [0.6, 1.8], "ip_bias": [3.0, -2.0]})
    s = summarize_profile(df).set_index("metric")["worst"]
    assert s["norm_ratio_k"] == 1.8 and s["ip_bias"] == 3.0


def test_summary_quantiles_next_to_minus_infinity():
    # an SNR of −inf dB (a zero reference vector reconstructed as nonzero) beside finite
    # values: p01 interpolates between −inf and 1 (h = 0.03) and is −inf, as numpy's
    # linear rule gives in the limit; the median interpolates between finite values
    df = pd.DataFrame({"snr_k": [-np.inf, 1.0, 2.0, 4.0]})
    row = summarize_profile(df).iloc[0]
    assert np.isneginf(row["p01"]) and np.isneginf(row["min"]) and np.isneginf(row["mean"])
    # p99: h = 3·0.99 = 2.97, between 2 and 4: 2 + 0.97·2 (numpy's linear rule)
    assert row["median"] == 1.5 and row["p99"] == pytest.approx(3.94, rel=1e-14)


def test_a_zero_key_coded_nonzero_makes_the_trial_snr_minus_infinity():
    # SNR of x = 0, x̂ ≠ 0 is −inf dB (module table): it stays in the trial's mean (only
    # exact, +inf vectors are left out), so the trial's snr_k is −inf, not the mean of
    # the others
    t, Kh, Vh = _perturbed(T=3, N=16, d=8, n_q=2, seed=6)
    K = t.K.copy()
    K[1, 4] = 0.0
    df = error_profile(Trials(K, t.V, t.q), Kh, Vh)
    assert np.isneginf(df.loc[1, "snr_k"]) and np.isfinite(df.loc[[0, 2], "snr_k"]).all()
    assert df.attrs["exact_vectors"]["k"] == 0


@pytest.mark.parametrize("flip", [False, True])
def test_exact_float32_reconstruction_ranks_exactly_as_the_reference(flip):
    # q·k₁ = 1 + 2⁻³⁰ rounds to q·k₂ = 1 in float32: the reference logits tie. The
    # quantized ranking must be formed the same way (a float64 q·k̂ told the two apart and
    # gave recall 0 or an argmax shift for K̂ = K, depending on the key order)
    q = np.float32([[[1.0, 1.0]]])
    K = np.float32([[[2.0**-30, 1.0], [1.0, 0.0], [-1.0, -1.0]]])
    if flip:
        K = K[:, ::-1].copy()
    df = error_profile(Trials(K, K, q), K, K, k=1)
    assert df.loc[0, "recall_at_5"] == 1.0 and df.loc[0, "argmax_shift"] == 0.0


def test_exact_vector_counts_add_up_over_chunks(monkeypatch):
    # exact reconstruction: every key, value and output vector of every trial is exact,
    # T·N, T·N and T·n_q, however the trials are chunked (here one trial per chunk)
    t = kvstats.sample("gaussian", 5, 12, 8, seed=2, n_queries=3)
    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 1)
    df = error_profile(t, t.K, t.V)
    assert df.attrs["exact_vectors"] == {"k": 60, "v": 60, "t": 15}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_finite_equals_the_elementwise_test(dtype):
    # the one-pass test (a sum of squares) must say what np.isfinite(a).all() says: for
    # finite arrays, every kind of non-finite value, squares that overflow although
    # every value is finite (the elementwise fallback), views that are not contiguous
    big = np.finfo(dtype).max / 4
    cases = [np.ones((3, 5)), np.zeros(0), np.full((4, 4), big)]
    for bad in (np.inf, -np.inf, np.nan):
        a = np.ones((3, 5))
        a[1, 2] = bad
        cases.append(a)
    both = np.ones(6)
    both[[1, 4]] = [np.inf, -np.inf]  # inf - inf: a NaN sum, not a finite one
    cases += [both, np.arange(12.0).reshape(3, 4)[:, ::2]]
    strided = np.ones((3, 4))
    strided[0, 1] = np.nan
    cases.append(strided[:, ::2])  # the NaN is not in the view
    for a in cases:
        a = np.asarray(a, dtype=dtype)
        assert profile_mod._all_finite(a) == bool(np.isfinite(a).all())


def test_bad_reconstructions_still_refused_after_the_one_pass_test():
    t, Kh, Vh = _perturbed(T=3, N=8)
    for value in (np.inf, -np.inf, np.nan):
        bad = Vh.copy()
        bad[2, 1, 0] = value
        with pytest.raises(ValueError, match=r"V_hat must be finite; received 1 NaN/inf value\(s\)"):
            error_profile(t, Kh, bad)
    # finite values whose squares overflow pass (the elementwise test decides)
    t32 = Trials(t.K.astype(np.float32), t.V.astype(np.float32), t.q.astype(np.float32))
    huge = np.full(t32.K.shape, 1e30, np.float32)
    df = error_profile(t32, huge, Vh.astype(np.float32))
    assert np.isfinite(df["phi_k"]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_reference_gives_the_numbers_of_separate_calls(monkeypatch, dtype):
    # the runner computes the trials-only quantities (q·k, log p, p V) once per chunk for
    # every cell of a case; each cell's frame must equal a separate call bit for bit,
    # also when the cells' reconstructions differ in dtype (another cache key) and over
    # several profile chunks
    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 2 * 16 * 32)
    t = kvstats.sample("heavy_tailed", 5, 16, 32, seed=4, n_queries=2, nu=1.5, dtype=dtype)
    rng = np.random.default_rng(5)
    reference: dict = {}
    for scale in (0.01, 0.3, 0.0):
        for dt in (dtype, np.float64):
            Kh = (t.K + scale * rng.standard_normal(t.K.shape)).astype(dt)
            Vh = (t.V + scale * rng.standard_normal(t.V.shape)).astype(dt)
            shared = profile_mod._profile(t, Kh, Vh, reference=reference)
            pd.testing.assert_frame_equal(shared, error_profile(t, Kh, Vh), check_exact=True)
    assert len(reference) == 3 * (1 if dtype == np.float64 else 2)  # 3 chunks x dtypes


def test_profile_columns_equal_assign():
    # the runner sets its cell columns while the frame is built; the frame (values,
    # dtypes, column order, 'trial' replaced in place) and attrs equal error_profile's
    # followed by DataFrame.assign
    t, Kh, Vh = _perturbed(T=4, N=8)
    cols = dict(trial=np.arange(10, 14), distribution="gaussian", dim=32, budget=2.0,
                scheme="KQV", cluster=np.arange(10, 14, dtype=np.int64))
    got = profile_mod._profile(t, Kh, Vh, columns=cols)
    want = error_profile(t, Kh, Vh).assign(**cols)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.columns) == list(want.columns) and got.attrs == want.attrs


def test_working_set_does_not_grow_with_the_number_of_trials(monkeypatch):
    # docs/measurement.md (Memory): chunks of trials bound the working set for any T. The
    # per-chunk reference (q·k, its log-softmax, p V) used to be kept for every chunk until
    # the call returned, 3·8·n_q·N bytes per trial (2 GB at T = 10,000, n_q = 8,
    # N = 1,024); it is now dropped after its chunk unless the caller passes a dict to
    # keep it in. Peak traced allocation (numpy reports to tracemalloc) with 4 trials per
    # chunk: 16 trials against 256.
    import tracemalloc

    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 4 * 128 * 16)

    def peak(T):
        t, Kh, Vh = _perturbed(T=T, N=128, d=16, n_q=16)
        tracemalloc.start()
        try:
            error_profile(t, Kh, Vh)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(16), peak(256)
    assert large < 1.5 * small, (small, large)


def test_logit_arrays_are_chunked_too_when_queries_outnumber_dimensions(monkeypatch):
    # (chunk, n_q, N) arrays are bounded like (chunk, N, d) ones: with n_q = 64 queries
    # in d = 8 the chunk holds _CHUNK_ELEMENTS/(N·n_q) trials, not _CHUNK_ELEMENTS/(N·d)
    # (8 times more logits per chunk); the numbers are those of one trial per chunk.
    t, Kh, Vh = _perturbed(T=16, N=32, d=8, n_q=64)
    one = error_profile(t, Kh, Vh)
    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 2 * 32 * 64)   # 2 trials of logits
    shapes = []
    real = profile_mod._log_softmax
    monkeypatch.setattr(profile_mod, "_log_softmax", lambda x: shapes.append(x.shape) or real(x))
    df = error_profile(t, Kh, Vh)
    assert {s[0] for s in shapes} == {2}
    pd.testing.assert_frame_equal(df, one, check_exact=True)


def test_narrow_float_reconstructions_are_read_as_float64():
    """As the Parameters say: a float16 or bfloat16 K̂/V̂ (how caches are often held) is
    its float64 value, the profile equal to that of the float64 copy."""
    import ml_dtypes

    t = kvstats.sample("gaussian", 4, 16, 8, seed=3)
    for narrow in (np.float16, ml_dtypes.bfloat16):
        K_hat, V_hat = t.K.astype(narrow), t.V.astype(narrow)
        got = kvstats.error_profile(t, K_hat, V_hat)
        want = kvstats.error_profile(t, K_hat.astype(np.float64), V_hat.astype(np.float64))
        pd.testing.assert_frame_equal(got, want)
