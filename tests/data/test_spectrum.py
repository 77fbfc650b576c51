"""Key spectra: the analytic eigenvalues of each synthetic case against large draws.

Tolerances come from the sampling error of the estimates, never from the answer:

- a mean (``E‖x‖²``, the variance along a direction) is within 5 standard errors, the
  standard error estimated from the same draws (probability of a false failure for a
  normal estimate < 1e-6; the seeds are fixed, so the tests are deterministic);
- sample eigenvalues of a group of k equal true eigenvalues λ among N draws spread to
  λ·[(1 − √(k/N))², (1 + √(k/N))²] (Marchenko–Pastur edges), and each moves by about
  λ·√(2/N) more (its own sampling error); the check allows the edges plus 5 such errors.
"""

import json

import numpy as np
import pytest

import kvstats
from kvstats.data.real import load_trials
from kvstats.data.spectrum import Spectrum, capture_spectra, measured_spectrum, synthetic_spectrum
from kvstats.rate_distortion import bound_snr_db


def _within_mp(sample_eig, true_eig, n):
    """Sorted sample eigenvalues within the Marchenko–Pastur band (+5 errors) of each true group."""
    s, t = np.sort(sample_eig)[::-1], np.sort(true_eig)[::-1]
    for value in np.unique(t):
        idx = np.flatnonzero(t == value)
        k = len(idx)
        lo = value * ((1 - np.sqrt(k / n)) ** 2 - 5 * np.sqrt(2 / n))
        hi = value * ((1 + np.sqrt(k / n)) ** 2 + 5 * np.sqrt(2 / n))
        assert np.all((s[idx] >= lo) & (s[idx] <= hi)), (value, s[idx], lo, hi)


def _mean_close(samples, expected):
    x = np.asarray(samples, np.float64)
    se = x.std(ddof=1) / np.sqrt(len(x))
    assert abs(x.mean() - expected) <= 5 * se, (x.mean(), expected, se)


@pytest.mark.parametrize("dist,params", [
    ("gaussian", {"scale": 1.5}),
    ("low_rank", {"rank": 3, "noise": 0.3, "scale": 2.0}),
    ("outlier_channels", {"n_channels": 2, "magnitude": 4.0, "offset": 0.5}),
    ("heavy_tailed", {"nu": 6.0}),
])
def test_synthetic_spectrum_matches_the_sample_covariance_of_one_trial(dist, params):
    # within one trial (its basis / channels fixed), N keys: d = 12, N = 40000
    d, n = 12, 40_000
    t = kvstats.sample(dist, 2, n, d, seed=3, **params)
    spec = synthetic_spectrum(dist, d, params)
    assert spec.exact and spec.eigenvalues.shape == (d,)
    assert np.all(np.diff(spec.eigenvalues) <= 0)
    for K in t.K:                                  # each trial on its own
        _within_mp(measured_spectrum(K).eigenvalues, spec.eigenvalues, n)
        _mean_close(np.einsum("nd,nd->n", K, K), float(spec.mean_square))


def test_heavy_tails_without_a_variance_have_no_spectrum():
    s = synthetic_spectrum("heavy_tailed", 8, nu=2.0)
    assert not s.defined and s.mean_square == np.inf and "infinite variance" in s.note
    with pytest.raises(ValueError, match="no Gaussian bound"):
        s.bound_snr_db(2.0)


def test_focused_spectrum_is_the_stated_approximation():
    # the variance of the keys along the query direction q̂, per trial, averaged over
    # trials; the approximation (‖q‖² = d) is within 1% of it here (see synthetic_spectrum)
    d, n, T = 32, 512, 400
    t = kvstats.sample("focused", T, n, d, seed=4, strength=0.5)
    spec = synthetic_spectrum("focused", d, {"strength": 0.5}, n_keys=n)
    qh = t.q[:, 0] / np.linalg.norm(t.q[:, 0], axis=-1, keepdims=True)
    along = np.einsum("tnd,td->tn", t.K, qh).var(axis=1, ddof=1)
    assert not spec.exact
    x = along
    se = x.std(ddof=1) / np.sqrt(T)
    assert abs(x.mean() - spec.eigenvalues[0]) <= 5 * se + 0.01 * spec.eigenvalues[0]
    _mean_close(np.einsum("tnd,tnd->t", t.K, t.K) / n, float(spec.mean_square))
    assert np.all(spec.eigenvalues[1:] == 1.0)


def test_low_rank_bound_is_the_water_filling_of_its_spectrum():
    # rank 8 of variance d/8 + noise² and 120 axes of noise² (hand-computed spectrum)
    s = synthetic_spectrum("low_rank", 128, noise=0.1)
    lam = np.r_[np.full(8, 16.01), np.full(120, 0.01)]
    np.testing.assert_allclose(s.eigenvalues, lam)
    assert s.bound_snr_db(2.0) == pytest.approx(bound_snr_db(lam, 2.0, 128 * 1.01))


def test_measured_spectrum_checks_its_input_and_batches():
    with pytest.raises(ValueError, match="at least 2 vectors"):
        measured_spectrum(np.ones((1, 4)))
    x = np.random.default_rng(0).standard_normal((3, 50, 4))
    batched = measured_spectrum(x)
    assert batched.eigenvalues.shape == (3, 4) and batched.mean_square.shape == (3,)
    np.testing.assert_allclose(batched.eigenvalues[1], measured_spectrum(x[1]).eigenvalues)
    np.testing.assert_allclose(batched.eigenvalues[2].sum(), np.trace(np.cov(x[2].T)))


def test_capture_spectra_follow_the_trials_of_load_trials(tmp_path):
    # each (layer, head) has its own per-channel scales; the spectrum of trial t is the
    # pooled sample covariance of its (layer, head), in load_trials' C order
    rng = np.random.default_rng(1)
    texts, layers, heads, n, d = 3, 4, 2, 64, 8
    scales = rng.uniform(0.5, 3.0, (layers, heads, d))
    K = (rng.standard_normal((texts, layers, heads, n, d)) * scales[None, :, :, None]).astype(np.float32)
    V = rng.standard_normal(K.shape).astype(np.float32)
    path = tmp_path / "c.npz"
    np.savez(path, K=K, V=V, q=np.repeat(K, 2, axis=2), meta=json.dumps({}))
    ks, vs = capture_spectra(path, layer=[1, 3], head=1)
    trials = load_trials(path, layer=[1, 3], head=1)
    assert ks.eigenvalues.shape == (trials.n_trials, d) and vs.mean_square.shape == (trials.n_trials,)
    for t, (ly, hd) in enumerate(zip(trials.meta["layer"], trials.meta["head"])):
        pooled = K[:, ly, hd].reshape(-1, d)
        np.testing.assert_allclose(ks.eigenvalues[t], measured_spectrum(pooled).eigenvalues, rtol=1e-10)
        assert ks.mean_square[t] == pytest.approx(float((pooled.astype(float) ** 2).sum(-1).mean()))


def test_spectrum_is_a_frozen_record():
    s = synthetic_spectrum("gaussian", 4)
    assert isinstance(s, Spectrum)
    with pytest.raises(AttributeError):
        s.exact = False
    with pytest.raises(ValueError, match="distribution"):
        synthetic_spectrum("uniform", 4)
    with pytest.raises(ValueError, match="rank"):
        synthetic_spectrum("low_rank", 4, rank=9)


def test_low_rank_per_direction_energy_spectrum():
    # energy="per_direction": variance 1 per direction (v = 1), hand-computed:
    # 4 x (1 + 0.25), 12 x 0.25, E‖k‖² = 4·1 + 16·0.25 = 8; and against one trial's sample
    params = {"rank": 4, "noise": 0.5, "energy": "per_direction"}
    s = synthetic_spectrum("low_rank", 16, params)
    np.testing.assert_allclose(s.eigenvalues, np.r_[np.full(4, 1.25), np.full(12, 0.25)], rtol=1e-15)
    assert float(s.mean_square) == pytest.approx(8.0, rel=1e-15)
    n = 40_000
    K = kvstats.sample("low_rank", 1, n, 16, seed=8, **params).K[0]
    _within_mp(measured_spectrum(K).eigenvalues, s.eigenvalues, n)
    _mean_close(np.einsum("nd,nd->n", K, K), 8.0)


def test_focused_spectrum_along_the_query_at_small_n():
    # N = 4 keys, one of them focused (f = 1/4): the terms f·α² and (f·α)² of the variance
    # along q̂ and the n_q·f·(α² − s²) of E‖k‖² are large here (0.64, 0.16 and 0.39 of
    # 1.23 and 1.39), so a dropped term or log N for log(N − n_focus) in α is far outside
    # the tolerance: 5 SE plus 2% for the ‖q‖² = d approximation (0.5% measured, d = 64).
    d, N, T = 64, 4, 20_000
    t = kvstats.sample("focused", T, N, d, seed=1, strength=0.5)
    spec = synthetic_spectrum("focused", d, n_keys=N, strength=0.5)
    qh = t.q[:, 0] / np.linalg.norm(t.q[:, 0], axis=-1, keepdims=True)
    proj = np.einsum("tnd,td->tn", t.K, qh).ravel()          # key components along q̂
    dev2 = (proj - proj.mean()) ** 2
    tol = 5 * dev2.std() / np.sqrt(dev2.size) + 0.02 * spec.eigenvalues[0]
    assert abs(dev2.mean() - spec.eigenvalues[0]) <= tol
    # E‖k‖² = s²(d − 1) + E[(k·q̂)²]: the along-q̂ part, the rest being s² per axis
    sq = proj ** 2
    along_ms = float(spec.mean_square) - (d - 1)
    assert abs(sq.mean() - along_ms) <= 5 * sq.std() / np.sqrt(sq.size) + 0.02 * along_ms


def test_measured_spectrum_is_numpys_covariance_spectrum_descending_and_nonnegative():
    # reference: numpy's np.cov (ddof 1) eigenvalues, sorted descending; 3 vectors in d = 8
    # span 2 directions, and eigvalsh returns three of the six zeros as -1e-16 or so: a
    # covariance has none below 0, so they are reported as 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8))
    ref = np.sort(np.linalg.eigvalsh(np.cov(x.T)))[::-1]
    assert (ref < 0).sum() == 3
    s = measured_spectrum(x)
    np.testing.assert_allclose(s.eigenvalues, np.maximum(ref, 0.0), rtol=1e-12, atol=1e-15)
    assert np.all(s.eigenvalues >= 0) and np.all(np.diff(s.eigenvalues) <= 0)
    assert float(s.mean_square) == pytest.approx(np.mean(np.sum(x * x, -1)), rel=1e-15)


def test_focused_spectrum_raises_one_direction_per_query():
    # n_q queries: n_q directions at the single-query value, the rest at s², and n_q times
    # the single query's excess mean square (the queries' focus keys are disjoint); at
    # most d directions, which share the n_q queries' excess (d = 3 < n_q = 4 here)
    one = synthetic_spectrum("focused", 16, n_keys=64, strength=0.4)
    three = synthetic_spectrum("focused", 16, n_keys=64, strength=0.4, n_queries=3)
    np.testing.assert_array_equal(three.eigenvalues[:3], np.full(3, one.eigenvalues[0]))
    np.testing.assert_array_equal(three.eigenvalues[3:], np.ones(13))
    assert float(three.mean_square) - 16 == pytest.approx(3 * (float(one.mean_square) - 16), rel=1e-12)
    one3 = synthetic_spectrum("focused", 3, n_keys=64, strength=0.4)
    small = synthetic_spectrum("focused", 3, n_keys=64, strength=0.4, n_queries=4)
    np.testing.assert_allclose(small.eigenvalues - 1, np.full(3, 4 / 3 * (one3.eigenvalues[0] - 1)),
                               rtol=1e-12)
    assert float(small.mean_square) - 3 == pytest.approx(4 * (float(one3.mean_square) - 3), rel=1e-12)


@pytest.mark.parametrize("d", [1, 2])
def test_focused_spectrum_is_undefined_where_the_focus_keys_have_no_second_moment(d):
    # α² = L²·d/‖q‖² and E[1/χ²_d] is infinite for d <= 2: the keys' mean square over trials
    # is infinite, as for heavy tails with nu <= 2 (it was a finite plug-in value)
    s = synthetic_spectrum("focused", d, n_keys=64, strength=0.4)
    assert not s.defined and float(s.mean_square) == np.inf
    with pytest.raises(ValueError, match="no Gaussian bound"):
        s.bound_snr_db(2.0)


def test_measured_spectrum_of_float32_is_computed_in_float64():
    # documented promotion: float32 vectors give the float64 spectrum of the same values
    # (a float32 covariance would be off by ~1e-7 relative)
    x = np.random.default_rng(1).standard_normal((500, 6)).astype(np.float32) * 3 + 1
    s32, s64 = measured_spectrum(x), measured_spectrum(x.astype(np.float64))
    np.testing.assert_allclose(s32.eigenvalues, s64.eigenvalues, rtol=1e-13)
    assert s32.eigenvalues.dtype == np.float64
    assert float(s32.mean_square) == pytest.approx(float(s64.mean_square), rel=1e-14)


@pytest.mark.parametrize("dist,params", [("gaussian", {"scale": 1e200}),
                                         ("focused", {"scale": 1e200}),
                                         ("outlier_channels", {"magnitude": 1e160, "scale": 1e160})])
def test_a_covariance_beyond_float64_is_refused_by_name(dist, params):
    # Before: OverflowError from scale**2 (gaussian, focused) or inf eigenvalues (outlier
    # channels: s²m² = 1e640), which water_fill then refused without naming the parameter.
    with pytest.raises(ValueError, match=rf"parameter\(s\) of '{dist}' must give a covariance "
                                         r"within the float64 range; received .*'scale'"):
        synthetic_spectrum(dist, 8, params)


def test_a_parameter_given_twice_is_refused():
    """params and keyword arguments are merged; a key in both was silently the keyword's
    (here a variance of 4 for a caller who may have meant 1)."""
    with pytest.raises(ValueError, match=r"each parameter must be given once.*received "
                                         r"scale=1 in params and scale=2"):
        synthetic_spectrum("gaussian", 8, {"scale": 1}, scale=2)
    merged = synthetic_spectrum("low_rank", 8, {"rank": 2}, noise=0.5)
    keywords = synthetic_spectrum("low_rank", 8, rank=2, noise=0.5)
    assert merged.eigenvalues.tolist() == keywords.eigenvalues.tolist()


@pytest.mark.parametrize("N,d,n_q,n_focus,strength,scale", [
    (512, 16, 4, 16, 0.05, 1.0), (256, 8, 2, 4, 0.1, 1.5), (1024, 32, 8, 2, 0.3, 0.7),
    (128, 6, 1, 2, 0.2, 1.0), (256, 64, 1, 1, 0.5, 1.0)])
def test_focused_spectrum_matches_the_mean_within_trial_covariance(N, d, n_q, n_focus, strength, scale):
    # What the focused spectrum claims exactly, checked by simulation: E‖k‖² and the mean
    # over trials of the within-trial covariance's trace on the query span (k = min(n_q, d)
    # directions, each at eigenvalues[0]). Per trial, S = centred key covariance (/N) has
    # E[S | q] = C − Ḡ/N, Ḡ the mean covariance of the keys' Gaussian parts, whose trace
    # on the span is s²(k − n_q·f): added back, the estimate is unbiased. Trials are
    # independent: each mean within 5 standard errors (d ≥ 6: α⁴ ∝ 1/χ²_d² has a mean).
    # At d = 16, n_q = 4 the earlier plug-in ‖q‖² = d gave 1.826 (measured 1.927 ± 0.009),
    # the variance along each q̂ (2.106) overstates it: the q̂ are not orthogonal.
    T = 400
    t = kvstats.sample("focused", T, N, d, seed=7, n_queries=n_q, n_focus=n_focus,
                       strength=strength, scale=scale)
    spec = synthetic_spectrum("focused", d, n_keys=N, n_queries=n_q, n_focus=n_focus,
                              strength=strength, scale=scale)
    k, s2, f = min(n_q, d), scale ** 2, n_focus / N
    Kc = t.K - t.K.mean(axis=1, keepdims=True)
    basis = np.linalg.qr(np.swapaxes(t.q, 1, 2))[0]                    # (T, d, k) spans q
    proj = Kc @ basis                                                  # (T, N, k)
    span = (np.einsum("tnk,tnk->t", proj, proj) / N + s2 * (k - n_q * f) / N) / k
    _mean_close(span, float(spec.eigenvalues[0]))
    _mean_close(np.einsum("tnd,tnd->t", t.K, t.K) / N, float(spec.mean_square))
    np.testing.assert_array_equal(spec.eigenvalues[k:], np.full(d - k, s2))


def test_outlier_channels_spectrum_is_descending_when_the_channels_are_quieter():
    # magnitude < 1: the c channels are the smallest eigenvalues and came first
    # ([0.25, 0.25, 1, 1, 1, 1]) although documented descending (critic_data19 finding 6);
    # eigenvalues[:k] must be the k largest
    s = synthetic_spectrum("outlier_channels", 6, n_channels=2, magnitude=0.5)
    assert s.eigenvalues.tolist() == [1.0, 1.0, 1.0, 1.0, 0.25, 0.25]
    assert float(s.mean_square) == pytest.approx(4 + 2 * 0.25)
