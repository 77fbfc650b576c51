"""Synthetic distributions: shapes, reproducibility, and their documented scales.

Statistical checks use fixed seeds, state their tolerance in standard errors (SE)
computed from the closed-form variance of the estimate, and would fail for a wrong
scale (each tolerance is far below the effect of the parameter it checks).
"""

import warnings

import numpy as np
import pytest
from scipy import stats

import kvstats
from kvstats.data import DISTRIBUTIONS, default_params, sample
from kvstats.data import synthetic

DIST_PARAMS = {"gaussian": {}, "heavy_tailed": {"nu": 1.5}, "low_rank": {"rank": 4},
               "focused": {"strength": 0.7}, "outlier_channels": {"n_channels": 2}}


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_shapes_dtype_and_meta(dist):
    t = sample(dist, 3, 40, 16, seed=5, n_queries=2, **DIST_PARAMS[dist])
    assert t.K.shape == (3, 40, 16) and t.V.shape == (3, 40, 16) and t.q.shape == (3, 2, 16)
    assert t.dtype == np.float64
    assert t.meta["distribution"] == dist and t.meta["seed"] == 5
    assert set(t.meta["params"]) == set(default_params(dist))
    t32 = sample(dist, 3, 40, 16, seed=5, n_queries=2, dtype=np.float32, **DIST_PARAMS[dist])
    assert t32.dtype == np.float32
    # float32 is the float64 draw rounded
    np.testing.assert_array_equal(t32.K, t.K.astype(np.float32))
    np.testing.assert_array_equal(t32.q, t.q.astype(np.float32))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_reproducible_prefix_and_chunk_invariant(dist, monkeypatch):
    a = sample(dist, 7, 32, 8, seed=11, n_queries=2, **DIST_PARAMS[dist])
    b = sample(dist, 7, 32, 8, seed=11, n_queries=2, **DIST_PARAMS[dist])
    c = sample(dist, 7, 32, 8, seed=12, n_queries=2, **DIST_PARAMS[dist])
    np.testing.assert_array_equal(a.K, b.K)
    assert not np.array_equal(a.K, c.K)
    # trial t does not depend on n_trials (documented)
    p = sample(dist, 3, 32, 8, seed=11, n_queries=2, **DIST_PARAMS[dist])
    for name in "KVq":
        np.testing.assert_array_equal(getattr(p, name), getattr(a, name)[:3])
    # nor on the internal chunking (one trial per chunk here)
    monkeypatch.setattr(synthetic, "_CHUNK_ELEMENTS", 1)
    d = sample(dist, 7, 32, 8, seed=11, n_queries=2, **DIST_PARAMS[dist])
    for name in "KVq":
        np.testing.assert_array_equal(getattr(d, name), getattr(a, name))


def test_generator_seed_is_consumed():
    rng = np.random.default_rng(3)
    a, b = sample("gaussian", 2, 8, 4, seed=rng), sample("gaussian", 2, 8, 4, seed=rng)
    assert not np.array_equal(a.K, b.K)


def test_trials_and_components_independent():
    t = sample("gaussian", 200, 64, 16, seed=2)
    # Correlation between trials' key means, and between K and V: |r| < 5 SE (SE = 1/sqrt(n)).
    m = t.K.mean(axis=(1, 2))
    r = np.corrcoef(m[:-1], m[1:])[0, 1]
    assert abs(r) < 5 / np.sqrt(199)
    r_kv = np.corrcoef(t.K.ravel(), t.V.ravel())[0, 1]
    assert abs(r_kv) < 5 / np.sqrt(t.K.size)


def test_gaussian_scale_and_queries():
    t = sample("gaussian", 50, 256, 64, seed=0, n_queries=4, scale=2.0)
    # E‖k‖²/d = scale² = 4; Var(‖k‖²/d) = 2·scale⁴/d per key.
    r = (t.K ** 2).sum(-1) / 64
    se = np.sqrt(2 * 16 / 64 / r.size)
    assert abs(r.mean() - 4.0) < 5 * se
    # q ~ N(0, I): mean 0, variance 1 (SE of a sample variance of N(0,1): sqrt(2/n)).
    assert abs(t.q.mean()) < 5 / np.sqrt(t.q.size)
    assert abs(t.q.var() - 1) < 5 * np.sqrt(2 / t.q.size)


@pytest.mark.parametrize("nu", [1.05, 1.5, 3.0])
def test_heavy_tailed_is_student_t(nu):
    t = sample("heavy_tailed", 10, 100, 20, seed=1, nu=nu)
    x = t.K.ravel()
    # KS against scipy's Student-t (fixed seed): a doubled ν is rejected at n = 20000.
    assert stats.kstest(x, stats.t(nu).cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.t(2 * nu).cdf).pvalue < 1e-6


def test_heavy_tailed_rejects_nu_below_the_minimum_with_one_message():
    # one range in one message whatever the value (was: "(1.0, inf]" for nu <= 1 and
    # ">= 1.05" just above 1)
    for nu in (1.0, 0.5, 0.0, 1.01, 1.0001):
        with pytest.raises(ValueError, match=r"nu must be a finite number >= 1.05 .*received"):
            sample("heavy_tailed", 1, 4, 4, nu=nu)


def test_low_rank_structure_and_scale():
    d, r, N = 32, 4, 200
    t0 = sample("low_rank", 5, N, d, seed=0, rank=r, noise=0.0)
    assert all(np.linalg.matrix_rank(k) == r for k in t0.K)
    sigma = 0.1
    t = sample("low_rank", 40, N, d, seed=1, rank=r, noise=sigma)
    # Signal energy matches gaussian: E‖k‖² = d (1 + σ²).
    e = (t.K ** 2).sum(-1) / d
    assert abs(e.mean() / (1 + sigma ** 2) - 1) < 0.03     # SE ≈ sqrt(2/r)/sqrt(8000) ≈ 0.008
    # Energy outside the top-r singular subspace ≈ σ² (d − r) per key (noise only).
    s = np.linalg.svd(t.K, compute_uv=False)
    resid = (s[:, r:] ** 2).sum(-1) / N
    assert abs(resid.mean() / (sigma ** 2 * (d - r)) - 1) < 0.1
    # Bases differ between trials.
    u0 = np.linalg.svd(t0.K[0], full_matrices=False)[2][:r]
    u1 = np.linalg.svd(t0.K[1], full_matrices=False)[2][:r]
    assert np.linalg.norm(u0 @ u1.T) < 0.99 * np.sqrt(r)


@pytest.mark.parametrize("strength,n_focus,scale", [(0.2, 1, 1.0), (0.5, 1, 1.0), (0.9, 1, 1.0),
                                                   (0.3, 2, 1.0), (0.2, 1, 0.5), (0.2, 1, 1.5)])
def test_focused_strength_is_expected_top_weight(strength, n_focus, scale):
    T, N, d = 120, 512, 64
    t = sample("focused", T, N, d, seed=4, n_queries=2, strength=strength, n_focus=n_focus,
               scale=scale)
    p = kvstats.metrics.attention_weights(t.q, t.K)                     # (T, 2, N)
    top = np.sort(p, axis=-1)[..., -n_focus:]
    per_key = top.mean(-1)            # weight of each focus key (the top n_focus keys)
    # Design accuracy: |E[weight] − strength| < 0.01 (Jensen term ~ p(1−p)·1.7/N plus SE ≈ 0.001).
    assert abs(per_key.mean() - strength) < 0.01
    if n_focus == 1:
        assert abs(p.max(-1).mean() - strength) < 0.01


def test_unfocused_top_weight_is_small():
    # The baseline the focus construction must beat: gaussian keys, N = 512, top weight ≈ 0.03.
    g = sample("gaussian", 100, 512, 64, seed=4, n_queries=2)
    assert kvstats.metrics.attention_weights(g.q, g.K).max(-1).mean() < 0.1


def test_focused_errors():
    with pytest.raises(ValueError, match=r"strength must be in \(0.0, 0.5\)"):
        sample("focused", 1, 16, 4, strength=0.6, n_focus=2)
    with pytest.raises(ValueError, match="n_focus \\* n_queries must be <= n_keys"):
        sample("focused", 1, 4, 4, n_queries=3, n_focus=2)


def test_outlier_channels():
    T, N, d, m, nc = 30, 256, 32, 8.0, 3
    t = sample("outlier_channels", T, N, d, seed=2, n_channels=nc, magnitude=m, offset=0.5)
    ms = (t.K ** 2).mean(axis=1)                                     # (T, d) per-channel power
    order = np.sort(ms, axis=1)
    # nc channels at magnitude² (1 + offset²) = 80, the rest at 1 (SE of a mean square ~ 0.1·level).
    np.testing.assert_allclose(order[:, -nc:].mean(), m ** 2 * 1.25, rtol=0.05)
    np.testing.assert_allclose(order[:, :-nc].mean(), 1.0, rtol=0.05)
    assert order[:, -nc].min() > 10 * order[:, -nc - 1].max()       # clean separation
    # Channels are fixed within a trial and vary across trials.
    chans = [frozenset(np.argsort(r)[-nc:]) for r in ms]
    assert len(set(chans)) > 1
    mean = t.K.mean(axis=1)
    top = np.take_along_axis(np.abs(mean), np.argsort(ms, 1)[:, -nc:], 1)
    np.testing.assert_allclose(top.mean(), m * 0.5, rtol=0.05)     # channel bias = magnitude·offset


def test_value_distribution():
    t = sample("gaussian", 10, 100, 20, seed=3, value_distribution="heavy_tailed",
               value_params={"nu": 2.0})
    assert t.meta["value_distribution"] == "heavy_tailed" and t.meta["value_params"]["nu"] == 2.0
    assert stats.kstest(t.V.ravel(), stats.t(2.0).cdf).pvalue > 1e-3
    assert stats.kstest(t.K.ravel(), stats.norm.cdf).pvalue > 1e-3


@pytest.mark.parametrize("value_distribution, value_params, key_kw, named", [
    ("gaussian", {"scale": -1.0}, {"scale": 2.0}, r"value_params\['scale'\] must be in \(0.0, inf\)"),
    ("heavy_tailed", {"nu": 1.0}, {}, r"value_params\['nu'\] must be a finite number >= 1.05"),
    ("low_rank", {"rank": 9}, {}, r"value_params\['rank'\] must be an integer in \[1, 8\]"),
    ("low_rank", {"energy": "x"}, {}, r"value_params\['energy'\] must be one of"),
    ("outlier_channels", {"n_channels": 0}, {}, r"value_params\['n_channels'\] must be an integer"),
])
def test_a_bad_value_parameter_is_named_as_one(value_distribution, value_params, key_kw, named):
    """'scale must be > 0' could be the keys' or the values' (both take one): a value
    parameter's error names value_params[...]; the keys' keep their bare names."""
    with pytest.raises(ValueError, match=named):
        sample("gaussian", 1, 4, 8, value_distribution=value_distribution,
               value_params=value_params, **key_kw)
    with pytest.raises(ValueError, match=r"^scale must be in \(0.0, inf\)"):
        sample("gaussian", 1, 4, 8, scale=-1.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="distribution must be one of"):
        sample("cauchy", 1, 4, 4)
    with pytest.raises(ValueError, match=r"\['nu', 'scale'\]"):
        sample("heavy_tailed", 1, 4, 4, df=3)
    with pytest.raises(ValueError, match="value_params"):
        sample("gaussian", 1, 4, 4, value_params={"rank": 2})
    with pytest.raises(ValueError, match="value_distribution must be one of"):
        sample("gaussian", 1, 4, 4, value_distribution="focused")
    with pytest.raises(ValueError, match="dtype must be one of"):
        sample("gaussian", 1, 4, 4, dtype=np.float16)
    with pytest.raises(ValueError, match="rank must be an integer in"):
        sample("low_rank", 1, 4, 4, rank=5)
    with pytest.raises(ValueError, match="n_trials must be an integer"):
        sample("gaussian", 0, 4, 4)
    with pytest.raises(TypeError, match="n_keys must be an integer"):
        sample("gaussian", 1, 4.0, 4)
    with pytest.raises(ValueError, match="n_channels must be an integer in"):
        sample("outlier_channels", 1, 4, 4, n_channels=5)
    with pytest.raises(ValueError, match="scale must be in"):
        sample("gaussian", 1, 4, 4, scale=0.0)



@pytest.mark.parametrize("dist,params,dtype,what", [
    ("gaussian", {"scale": 1e300}, np.float32, "parameter"),     # finite float64, not float32
    ("outlier_channels", {"n_channels": 1, "magnitude": 1e200, "offset": 1e200}, np.float64,
     "parameter"),
    ("low_rank", {"scale": 1e300, "noise": 1e10}, np.float64, "parameter"),
    ("focused", {"scale": 1e200}, np.float64, "parameter"),      # scale**2: an OverflowError
    ("gaussian", {}, np.float32, "value_params"),
])
def test_parameters_beyond_the_float_range_are_refused_by_name(dist, params, dtype, what):
    # Before: a RuntimeWarning and "K must be finite" (focused: an OverflowError), which
    # did not say which parameter took the draws out of the float range.
    kw = dict(value_params={"scale": 1e300}) if what == "value_params" else params
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"{what}\(?s?\)? of '{dist}' must give finite "
                                             rf"{np.dtype(dtype).name} draws; received parameters .*scale"):
            sample(dist, 2, 8, 4, seed=0, dtype=dtype, **kw)


def test_generator_1_is_the_stored_default():
    """Stored results were drawn by generator 1: its numbers must not move. Reference
    values printed by the code before generator versions existed (commit 71f5953)."""
    t = sample("gaussian", 2, 4, 8, seed=7, dtype=np.float32)
    assert t.meta["generator"] == 1
    np.testing.assert_array_equal(t.K[1, 2, :3], np.float32([1.4167869, 0.32692647, 1.2359111]))
    np.testing.assert_array_equal(t.V[0, 0, :2], np.float32([0.49050736, -0.60287267]))
    lr = sample("low_rank", 2, 4, 8, seed=7, dtype=np.float32, rank=4, generator=1)
    np.testing.assert_array_equal(lr.K[1, 2, :3], np.float32([-0.39889333, -0.7443426, -0.03914431]))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_generator_2_draws_float32_natively(dist, monkeypatch):
    """Version 2 draws the Gaussian components in float32: other numbers than version
    1 (except the float64 Student-t, drawn as in version 1), the same in float64 output,
    and the same reproducibility (prefix and chunk invariance)."""
    kw = dict(seed=11, n_queries=2, **DIST_PARAMS[dist])
    a = sample(dist, 6, 64, 16, dtype=np.float32, generator=2, **kw)
    assert a.dtype == np.float32 and a.meta["generator"] == 2
    one = sample(dist, 6, 64, 16, dtype=np.float32, **kw)
    assert np.array_equal(a.K, one.K) == (dist == "heavy_tailed")
    assert not np.array_equal(a.V, one.V)  # Gaussian values
    np.testing.assert_array_equal(a.q, one.q)  # queries as in version 1
    f64 = sample(dist, 6, 64, 16, generator=2, **kw)  # float64: the version-1 draws
    np.testing.assert_array_equal(f64.K, sample(dist, 6, 64, 16, **kw).K)
    p = sample(dist, 2, 64, 16, dtype=np.float32, generator=2, **kw)
    np.testing.assert_array_equal(p.K, a.K[:2])
    monkeypatch.setattr(synthetic, "_CHUNK_ELEMENTS", 1)
    np.testing.assert_array_equal(sample(dist, 6, 64, 16, dtype=np.float32, generator=2, **kw).V, a.V)


def test_generator_2_has_the_documented_laws():
    """Gaussian keys and values of version 2 are N(0, scale²): KS against the normal on
    40,000 coordinates (fixed seed; a scale off by 10% gives p < 1e-6 here), and the
    Gaussian-based distributions keep their documented E‖k‖²/d within 5 SE."""
    t = sample("gaussian", 10, 500, 8, seed=1, dtype=np.float32, generator=2, scale=2.0)
    assert stats.kstest(t.K.ravel() / 2.0, "norm").pvalue > 1e-3
    assert stats.kstest(t.V.ravel(), "norm").pvalue > 1e-3
    assert stats.kstest(t.K.ravel() / 2.2, "norm").pvalue < 1e-6
    lr = sample("low_rank", 400, 64, 16, seed=2, dtype=np.float32, generator=2, rank=4, noise=0.5)
    e = np.sum(lr.K.astype(np.float64) ** 2, -1).mean(1) / 16  # per-trial mean of ‖k‖²/d
    assert abs(e.mean() - 1.25) < 5 * e.std(ddof=1) / np.sqrt(e.size)


def test_generator_must_be_a_version():
    for bad in (0, 3):
        with pytest.raises(ValueError, match=r"generator must be one of \[1, 2\]; received 3|received 0"):
            sample("gaussian", 2, 4, 8, generator=bad)
    for bad in (True, "2", 2.0):
        with pytest.raises(TypeError, match="generator must be an integer"):
            sample("gaussian", 2, 4, 8, generator=bad)


def test_focused_needs_keys_besides_the_focus():
    # n_focus = n_keys leaves no background to set the focus logit against: was NaN keys
    # refused as "K must be finite" (sample) and "math domain error" (synthetic_spectrum)
    from kvstats.data.spectrum import synthetic_spectrum
    with pytest.raises(ValueError, match=r"^n_keys must be >= 2 for 'focused' with its default "
                       r"n_focus=1 .*; received n_keys=1$"):
        sample("focused", 1, 1, 4)
    with pytest.raises(ValueError, match="n_focus must be < n_keys .*n_focus=2, n_keys=2"):
        synthetic_spectrum("focused", 4, n_keys=2, n_focus=2)
    assert sample("focused", 1, 2, 4).K.shape == (1, 2, 4)   # one background key suffices


def test_outlier_channel_bias_signs_are_fair_coins():
    # the bias ±magnitude·offset takes a random sign per (trial, channel): over 60 x 3
    # channels the count of + is Binomial(180, 1/2) (two-sided binomial test, scipy);
    # a fixed sign would give p = 2**-179
    T, N, d, m, nc = 60, 256, 16, 8.0, 3
    t = sample("outlier_channels", T, N, d, seed=6, n_channels=nc, magnitude=m, offset=2.0)
    ms = (t.K ** 2).mean(axis=1)
    ch = np.argsort(ms, axis=1)[:, -nc:]
    mean = np.take_along_axis(t.K.mean(axis=1), ch, 1)              # ≈ ±m·offset = ±16
    assert np.all(np.abs(np.abs(mean) - 16.0) < 5 * m / np.sqrt(N))    # SE of a mean: m/√N
    n_pos = int((mean > 0).sum())
    assert stats.binomtest(n_pos, mean.size, 0.5).pvalue > 1e-3


def test_meta_seed_draws_the_same_trials_again():
    # Before: seed=None recorded 'None' (the OS entropy was lost), a Generator its repr
    # 'Generator(PCG64) at 0x…', and a SeedSequence its state after the call (its children
    # 9..17 when the trials came from 0..8): none of them redrew the trials.
    ns = {"SeedSequence": np.random.SeedSequence}
    t = sample("low_rank", 2, 8, 4, seed=None)
    assert isinstance(t.meta["seed"], int)
    np.testing.assert_array_equal(sample("low_rank", 2, 8, 4, seed=t.meta["seed"]).K, t.K)
    ss = np.random.SeedSequence(5)
    ss.spawn(3)                                  # a sequence with children already
    g = np.random.default_rng(7)
    g.standard_normal(10)                        # the bits' state does not matter, the sequence does
    sample("gaussian", 1, 2, 2, seed=g)          # ...which this call advances
    for seed in (ss, g):
        t = sample("heavy_tailed", 2, 8, 4, seed=seed)
        again = sample("heavy_tailed", 2, 8, 4, seed=eval(t.meta["seed"], ns))
        for name in "KVq":
            np.testing.assert_array_equal(getattr(again, name), getattr(t, name))
