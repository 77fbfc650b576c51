"""The 6D error profile against an independent reference: every metric written out from its
definition in docs/measurement.md ("Metrics") as plain Python loops over float64 values
with ``math.fsum`` (correctly rounded sums), sharing no code with kvstats.metrics (the
reference in test_profile.py is built from kvstats' own public functions). Also: causal
masks, grouped-query heads, chunk sizes and key order, against the same kind of loops.
"""

import math

import numpy as np
import pytest

import kvstats
from kvstats.data import Trials, group_query_heads
from kvstats.metrics import attention_output, error_profile
from kvstats.metrics import profile as profile_mod


# --- the reference: definitions, float64, loops ---------------------------------------

def _dot(a, b):
    return math.fsum(float(x) * float(y) for x, y in zip(a, b))


def _snr(x, xh):                         # 10·log10(‖x‖²/‖x − x̂‖²)
    return 10 * math.log10(_dot(x, x) / math.fsum((float(b) - float(a)) ** 2 for a, b in zip(x, xh)))


def _angle(x, xh):                       # arccos of the cosine: ample accuracy away from 0 and π
    c = _dot(x, xh) / math.sqrt(_dot(x, x) * _dot(xh, xh))
    return math.acos(max(-1.0, min(1.0, c)))


def _ratio(x, xh):                       # ‖x̂‖/‖x‖
    return math.sqrt(_dot(xh, xh) / _dot(x, x))


def _log_softmax(logits):
    m = max(logits)
    lse = m + math.log(math.fsum(math.exp(v - m) for v in logits))
    return [v - lse for v in logits]


def _top(scores, k):                     # indices of the k largest (no ties in these data)
    return set(sorted(range(len(scores)), key=lambda j: -scores[j])[:k])


def _reference(q, K, V, Kh, Vh, k):
    """One trial's profile row from the definitions (q (n_q, d), K (N, d), V (N, d_v))."""
    n_q, N, d = len(q), len(K), len(K[0])
    row = {}
    for side, X, Xh in (("k", K, Kh), ("v", V, Vh)):
        row[f"snr_{side}"] = math.fsum(_snr(x, xh) for x, xh in zip(X, Xh)) / N
        row[f"phi_{side}"] = math.fsum(_angle(x, xh) for x, xh in zip(X, Xh)) / N
        row[f"norm_ratio_{side}"] = math.fsum(_ratio(x, xh) for x, xh in zip(X, Xh)) / N
        row[f"snr_{side}_pooled"] = 10 * math.log10(
            math.fsum(_dot(x, x) for x in X)
            / math.fsum((float(b) - float(a)) ** 2 for x, xh in zip(X, Xh) for a, b in zip(x, xh)))
    kl, hits, shifts, T, Th, ip, err = [], 0, 0, [], [], [], []
    for qi in q:
        lg = [_dot(qi, kj) / math.sqrt(d) for kj in K]
        lgh = [_dot(qi, kj) / math.sqrt(d) for kj in Kh]
        lp, lq = _log_softmax(lg), _log_softmax(lgh)
        kl.append(math.fsum(math.exp(a) * (a - b) for a, b in zip(lp, lq)))
        hits += len(_top(lg, k) & _top(lgh, k))
        shifts += lgh[max(range(N), key=lambda j: lg[j])] < max(lgh)
        T.append([math.fsum(math.exp(lp[j]) * float(V[j][c]) for j in range(N)) for c in range(len(V[0]))])
        Th.append([math.fsum(math.exp(lq[j]) * float(Vh[j][c]) for j in range(N)) for c in range(len(V[0]))])
        for kj, khj in zip(K, Kh):
            ip.append(_dot(qi, kj))
            err.append(_dot(qi, khj) - _dot(qi, kj))
    row["kl"] = math.fsum(kl) / n_q
    row["recall_at_5"] = hits / (k * n_q)
    row["argmax_shift"] = shifts / n_q
    row["snr_t"] = math.fsum(_snr(a, b) for a, b in zip(T, Th)) / n_q
    row["phi_t"] = math.fsum(_angle(a, b) for a, b in zip(T, Th)) / n_q
    row["norm_ratio_t"] = math.fsum(_ratio(a, b) for a, b in zip(T, Th)) / n_q
    mean = math.fsum(err) / len(err)
    row["ip_bias"] = mean
    row["ip_var"] = math.fsum((e - mean) ** 2 for e in err) / len(err)      # population
    row["ip_slope"] = math.fsum(a * (a + e) for a, e in zip(ip, err)) / math.fsum(a * a for a in ip)
    return row


def _draw(dist, T=6, N=40, d=16, n_q=3, dtype=np.float64, seed=0, **params):
    t = kvstats.sample(dist, T, N, d, seed=seed, n_queries=n_q, dtype=dtype, **params)
    rng = np.random.default_rng(seed + 1)
    Kh = (t.K + 0.4 * rng.standard_normal(t.K.shape)).astype(dtype)
    Vh = (1.1 * t.V + 0.3 * rng.standard_normal(t.V.shape)).astype(dtype)
    return t, Kh, Vh


# --- the profile equals the reference ------------------------------------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-11), (np.float32, 2e-5)])
@pytest.mark.parametrize("dist,params", [("gaussian", {}), ("heavy_tailed", {"nu": 3}),
                                         ("outlier_channels", {}), ("low_rank", {"rank": 4})])
@pytest.mark.parametrize("k", [1, 5])
def test_every_metric_equals_its_definition(dtype, rtol, dist, params, k):
    # float64: the profile's sums differ from fsum by rounding only (rtol 1e-11); float32
    # inputs: the dot products run in float32 (relative ~1e-7 per product, up to ~1e-5 for
    # the cancelling error sums). Rankings (recall, argmax) and their counts are exact.
    t, Kh, Vh = _draw(dist, dtype=dtype, **params)
    df = error_profile(t, Kh, Vh, k=k)
    for i in range(t.n_trials):
        ref = _reference(t.q[i].tolist(), t.K[i].tolist(), t.V[i].tolist(), Kh[i].tolist(),
                         Vh[i].tolist(), k)
        for c, v in ref.items():
            if c in ("recall_at_5", "argmax_shift"):
                assert df.loc[i, c] == v, (i, c)
            elif c in ("ip_bias",):              # a mean near 0: absolute, in the error's units
                assert df.loc[i, c] == pytest.approx(v, rel=rtol, abs=rtol * math.sqrt(ref["ip_var"])), (i, c)
            else:
                assert df.loc[i, c] == pytest.approx(v, rel=rtol), (i, c)


def test_the_reference_sees_a_change_in_every_metric():
    # The comparison above is not vacuous: a second reconstruction moves each column of
    # the reference by far more than the tolerance.
    t, Kh, Vh = _draw("gaussian", T=2)
    a = _reference(t.q[0].tolist(), t.K[0].tolist(), t.V[0].tolist(), Kh[0].tolist(), Vh[0].tolist(), 5)
    b = _reference(t.q[0].tolist(), t.K[0].tolist(), t.V[0].tolist(), (2 * Kh[0] - t.K[0]).tolist(),
                   (2 * Vh[0] - t.V[0]).tolist(), 5)
    moved = {c for c in a if abs(a[c] - b[c]) > 1e-3 * max(1.0, abs(a[c]))}
    assert moved >= set(a) - {"recall_at_5", "argmax_shift"}


# --- masks, heads, chunks, order ------------------------------------------------------

def test_causal_attention_output_equals_the_loop():
    # attention_output with a causal mask (query i sees keys 0..i) against the definition
    rng = np.random.default_rng(3)
    n, d = 7, 5
    q, K, V = (rng.standard_normal((n, d)) * 3 for _ in range(3))
    out = attention_output(q, K, V, mask=np.tril(np.ones((n, n), dtype=bool)))
    for i in range(n):
        lp = _log_softmax([_dot(q[i], K[j]) / math.sqrt(d) for j in range(i + 1)])
        for c in range(d):
            assert out[i, c] == pytest.approx(math.fsum(math.exp(lp[j]) * V[j, c] for j in range(i + 1)),
                                              rel=1e-12, abs=1e-14)


def test_grouped_query_heads_read_their_kv_head():
    # 6 query heads over 2 KV heads at 2 positions: query head h reads KV head h // 3
    # (transformers' repeat_kv); each trial's KL is the mean over its 3 heads x 2 positions.
    rng = np.random.default_rng(4)
    B, Hkv, Hq, P, N, d = 2, 2, 6, 2, 24, 8
    K, V = rng.standard_normal((B, Hkv, N, d)), rng.standard_normal((B, Hkv, N, d))
    q = rng.standard_normal((B, Hq, P, d)) * 2
    Kh = K + 0.3 * rng.standard_normal(K.shape)
    g = group_query_heads(K, V, q)
    df = error_profile(g, Kh.reshape(g.K.shape), g.V)
    for b in range(B):
        for h in range(Hkv):
            kls = []
            for hq in range(h * 3, h * 3 + 3):
                for p in range(P):
                    lp = _log_softmax([_dot(q[b, hq, p], K[b, h, j]) / math.sqrt(d) for j in range(N)])
                    lq = _log_softmax([_dot(q[b, hq, p], Kh[b, h, j]) / math.sqrt(d) for j in range(N)])
                    kls.append(math.fsum(math.exp(x) * (x - y) for x, y in zip(lp, lq)))
            assert df.loc[b * Hkv + h, "kl"] == pytest.approx(math.fsum(kls) / len(kls), rel=1e-11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chunk_size_changes_no_bit(monkeypatch, dtype):
    # chunks of 1, 2, 5 and 7 trials (uneven last chunk) against one chunk of all 23
    t, Kh, Vh = _draw("heavy_tailed", T=23, N=32, d=16, dtype=dtype, nu=3)
    full = error_profile(t, Kh, Vh)
    for per in (1, 2, 5, 7):
        monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", per * 32 * 16)
        df = error_profile(t, Kh, Vh)
        for c in full.columns:
            np.testing.assert_array_equal(df[c], full[c], err_msg=f"{c}, {per} trials per chunk")


def test_key_order_and_trial_order_do_not_matter():
    # The same permutation of the keys (and their values and reconstructions) in every
    # trial leaves each row unchanged up to summation order; permuting trials permutes rows.
    t, Kh, Vh = _draw("gaussian", T=8, N=48)
    base = error_profile(t, Kh, Vh)
    perm = np.random.default_rng(5).permutation(48)
    df = error_profile(Trials(t.K[:, perm], t.V[:, perm], t.q), Kh[:, perm], Vh[:, perm])
    for c in base.columns:
        np.testing.assert_allclose(df[c], base[c], rtol=1e-12, atol=1e-15, err_msg=c)
    order = np.random.default_rng(6).permutation(8)
    df = error_profile(Trials(t.K[order], t.V[order], t.q[order]), Kh[order], Vh[order])
    for c in base.columns.drop("trial"):
        np.testing.assert_array_equal(df[c], base[c].to_numpy()[order], err_msg=c)


def test_joint_scalings_leave_what_they_should():
    # K, K̂ ×2⁵ with q ×2⁻⁵ and V, V̂ ×2⁻³: q·k, q·k̂ and every ratio of norms are the
    # same numbers (powers of two are exact), so every column is unchanged to the bit. A
    # scale c = 3 on V, V̂ alone (not exact): every column unchanged up to rounding.
    t, Kh, Vh = _draw("gaussian", T=5)
    base = error_profile(t, Kh, Vh)
    s = Trials(t.K * 32, t.V / 8, t.q / 32)
    df = error_profile(s, Kh * 32, Vh / 8)
    for c in base.columns:
        np.testing.assert_array_equal(df[c], base[c], err_msg=c)
    df = error_profile(Trials(t.K, 3 * t.V, t.q), Kh, 3 * Vh)
    for c in base.columns:
        np.testing.assert_allclose(df[c], base[c], rtol=1e-12, atol=1e-15, err_msg=c)


# --- the inner-product estimators' laws, exactly --------------------------------------

def _ip_uniforms(seed, T=400, N=4, d=8, sigma=0.3, ddof_var=0):
    """Per-trial probability transforms of ip_bias, ip_var and ip_slope under K̂ = K + σZ
    (one query): given q and K, e_j = σ q·z_j ~ N(0, σ²‖q‖²) i.i.d. over the N keys, so
    ip_bias ~ N(0, σ²‖q‖²/N), N·ip_var/(σ²‖q‖²) ~ χ²_{N−1} (population variance), and
    ip_slope − 1 = Σ(q·k)e/Σ(q·k)² ~ N(0, σ²‖q‖²/Σ(q·k)²): each transform is U(0, 1)."""
    from scipy import stats

    t = kvstats.sample("gaussian", T, N, d, seed=seed)
    Kh = t.K + sigma * np.random.default_rng(seed + 10_000).standard_normal(t.K.shape)
    df = error_profile(t, Kh, t.V, k=1)
    s2 = sigma ** 2 * (t.q[:, 0] ** 2).sum(-1)
    ip2 = (np.einsum("td,tnd->tn", t.q[:, 0], t.K) ** 2).sum(-1)
    var = df["ip_var"].to_numpy() * (N / (N - 1) if ddof_var else 1)
    return (stats.norm.cdf(df["ip_bias"] / np.sqrt(s2 / N)),
            stats.chi2(N - 1).cdf(N * var / s2),
            stats.norm.cdf((df["ip_slope"] - 1) * np.sqrt(ip2 / s2)))


def test_inner_product_estimators_have_their_exact_laws():
    # KS of each transform against U(0, 1) on 20 independent draws of 400 trials: the 20
    # p-values of each estimator are themselves U(0, 1) (second-level KS, p > 1e-3); and
    # one draw of 20,000 trials (KS p > 1e-3), which resolves small departures (the
    # median for the mean in ip_bias: 1.19 times its variance at N = 4). Power: the sample
    # variance with N − 1 (ip_var is defined as the population variance) is rejected.
    from scipy import stats

    pvals = np.array([[stats.kstest(u, "uniform").pvalue for u in _ip_uniforms(seed)]
                      for seed in range(20)])                          # (20, 3)
    big = [stats.kstest(u, "uniform").pvalue for u in _ip_uniforms(99, T=20_000)]
    for j, name in enumerate(("ip_bias", "ip_var", "ip_slope")):
        assert stats.kstest(pvals[:, j], "uniform").pvalue > 1e-3, (name, pvals[:, j])
        assert big[j] > 1e-3, (name, big[j])
    assert stats.kstest(_ip_uniforms(99, T=20_000, ddof_var=1)[1], "uniform").pvalue < 1e-6
