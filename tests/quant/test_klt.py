"""The klt transform coder: allocation, cross-fitting, the bound, and low-rank keys."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kvstats
from kvstats.data.synthetic import sample
from kvstats.metrics import snr_db
from kvstats.quant.codebook import lloyd_max_codebook
from kvstats.quant.klt import KLTCoder, water_fill_bits
from kvstats.rate_distortion import bound_snr_db


def greedy(lam, total):
    """Reference: one bit at a time to the axis whose Lloyd–Max distortion drops most."""
    dist = [1.0] + [lloyd_max_codebook(b).mse for b in range(1, 9)]
    bits = np.zeros(lam.size, dtype=int)
    for _ in range(total):
        gain = np.array([lam[i] * (dist[b] - dist[b + 1]) if b < 8 else -1.0 for i, b in enumerate(bits)])
        bits[np.argmax(gain)] += 1                        # first of equal gains: axis order
    return bits


def test_allocation_is_the_greedy_water_filling():
    rng = np.random.default_rng(0)
    lam = rng.gamma(0.3, size=(5, 24))
    lam[1, 5:] = 0.0
    lam[2] = 1.0                                          # all ties
    for total in (0, 1, 7, 24, 60, 150, 192):
        got = water_fill_bits(lam, total)
        assert got.dtype == np.uint8 and np.all(got.sum(axis=-1) == total)
        for row, g in zip(lam, got):
            np.testing.assert_array_equal(g, greedy(row, total))
    with pytest.raises(ValueError, match=r"total must be an integer in \[0, 192\]"):
        water_fill_bits(lam, 193)


def gaussian(n, d, seed):
    """Zero-mean Gaussian keys with eigenvalues 4·0.8^i on random axes."""
    rng = np.random.default_rng(seed)
    lam = 4.0 * 0.8 ** np.arange(d)
    axes, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal((n, d)) * np.sqrt(lam)) @ axes.T, lam


def test_snr_within_a_stated_margin_of_the_water_filling_bound():
    # Known covariance, 4,096 tokens (halves of 2,048 calibrate each other), d = 32.
    # A fixed-rate Lloyd–Max quantizer of a Gaussian is at most 4.35 dB above the
    # distortion–rate bound at any rate (Panter–Dite: 10·log10(√3·π/2)); we allow 0.5 dB
    # more for integer bits per axis, the estimated axes and the float16 side information.
    # Measured (seed 0): gaps 2.0, 2.7, 3.5, 4.2 dB at 1..4 bits.
    x, lam = gaussian(4096, 32, seed=0)
    for bits in range(1, 5):
        x_hat = KLTCoder(bits, 32, group_size=4096).roundtrip(x)
        snr = 10 * np.log10(np.sum(x ** 2) / np.sum((x - x_hat) ** 2))
        gap = float(bound_snr_db(lam, bits)) - snr
        assert 0.0 < gap <= 4.35 + 0.5, (bits, gap)


def test_calibration_tokens_are_not_the_coded_ones():
    x, _ = gaussian(300, 16, seed=1)
    coder = KLTCoder(3, 16, group_size=100)               # 3 blocks, 6 halves of 50 tokens
    assert coder.halves(300) == (0, 50, 100, 150, 200, 250, 300)
    codes = coder.encode(x)
    y = x.copy()
    y[0:50] = gaussian(50, 16, seed=9)[0]                 # change half 0 only
    other = coder.encode(y)
    # half 0 is coded with half 1's statistics (unchanged); half 1 with half 0's (changed)
    for field in ("basis", "mean", "sigma", "alloc"):
        a, b = getattr(codes, field), getattr(other, field)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[2:], b[2:])
    assert not np.array_equal(codes.basis[1], other.basis[1])
    assert not np.array_equal(codes.sigma[1], other.sigma[1])
    np.testing.assert_array_equal(codes.packed[50:100], coder.encode(x).packed[50:100])


def test_beats_turboquant_mse_on_low_rank_keys_with_fewer_total_bits():
    # rank-8 keys (noise 0.1), d = 128, 1,024 tokens: klt with 16 axes at 1 bit per
    # coordinate costs 1.54 bits in total (0.54 for two halves' side information),
    # turboquant_mse at 2 bits costs 2.125; klt's key SNR is far higher (~20 vs ~9.4 dB;
    # the uncoded noise outside the 16 axes caps klt at ~20 dB).
    trials = sample("low_rank", 3, 1024, 128, seed=1)
    klt = kvstats.make_scheme("klt", 1, 128, rank=16)
    tq = kvstats.make_scheme("turboquant_mse", 2, 128, seed=0, draws=3)
    assert klt.bits_per_coord(1024).total < tq.bits_per_coord(1024).total
    snr_klt = snr_db(trials.K, klt.roundtrip(trials.K, trials.V)[0]).mean(axis=-1)
    snr_tq = snr_db(trials.K, tq.roundtrip(trials.K, trials.V)[0]).mean(axis=-1)
    assert np.all(snr_klt > snr_tq + 5.0), (snr_klt, snr_tq)


def test_bits_rank_cap_and_errors():
    coder = KLTCoder(4, 64, rank=8, group_size=256)       # 8 axes hold at most 64 bits
    assert coder.code_bits == 64 and coder.nominal_bits == 1.0
    side = 16 * (8 * 64 + 64 + 8) + 8 * 8
    assert coder.stored_bits(1000) == {"codes": 64000.0, "side": 2 * 3 * side}
    x, _ = gaussian(1000, 64, seed=2)
    codes = coder.encode(x)
    assert codes.nbytes * 8 == sum(coder.stored_bits(1000).values())
    np.testing.assert_array_equal(coder.decode(codes), coder.roundtrip(x))
    assert kvstats.scheme_def("klt").coded_dim(64, {"rank": 8}) == 8
    with pytest.raises(ValueError, match="at least 2 tokens"):
        coder.encode(x[:1])
    with pytest.raises(ValueError, match=r"rank must be an integer in \[1, 64\]"):
        KLTCoder(2, 64, rank=65)
    with pytest.raises(ValueError, match=r"group_size must be an integer in \[2, inf\]"):
        KLTCoder(2, 64, group_size=1)
    with pytest.raises(ValueError, match="float16 side information"):
        coder.encode(x + 1e5)
    with pytest.raises(TypeError, match="codes must be KLTCodes"):
        coder.decode(x)
    # codes of another rank: a ValueError naming both (was numpy's broadcast error)
    with pytest.raises(ValueError, match=r"codes must come from a KLTCoder with rank=8, dim=64"):
        coder.decode(KLTCoder(4, 64, rank=16, group_size=256).encode(x))


def test_the_scheme_names_the_side_it_refuses():
    # the scheme's coders say K or V (was "x", an argument the caller of roundtrip never had)
    scheme = kvstats.make_scheme("klt", 2, 4)
    one = gaussian(1, 4, seed=0)[0]
    with pytest.raises(ValueError, match=r"^K must hold at least 2 tokens"):
        scheme.roundtrip(one, one)
    big = gaussian(400, 4, seed=1)[0]
    with pytest.raises(ValueError, match=r"^V is beyond klt's float16 side information.*received such V$"):
        scheme.roundtrip(big, big + 1e5)


@pytest.mark.parametrize("offset,scale", [(0.0, 1e200), (1e200, 1.0), (0.0, 1e155), (1e5, 1.0)])
def test_inputs_beyond_the_float16_side_information_are_value_errors(offset, scale):
    # refused before any product can overflow: a mean beyond 65504, or a spread whose shrunk
    # largest scale must be (max|x - mean| / sqrt(m·d) bounds it below); was numpy's
    # LinAlgError ("Eigenvalues did not converge") at 1e200, with overflow warnings
    x = offset + scale * gaussian(400, 16, seed=3)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="x is beyond klt's float16 side information: a "
                                             "(mean|scale) of"):
            KLTCoder(2, 16, group_size=200).roundtrip(x)


def test_the_early_range_check_refuses_only_what_the_fit_would():
    # values up to 1.5e5 (largest scale 54,304 < 65504) are coded; 2e5 (scale 67,040) is
    # refused by the fit's own check, not the early one (a bound max|x - mean| > 65504
    # without the 1/sqrt(m·d) would refuse the first: checked by mutation)
    x = gaussian(400, 16, seed=3)[0]
    coder = KLTCoder(2, 16, group_size=200)
    codes = coder.encode(x / np.abs(x).max() * 1.5e5)
    assert 5e4 < codes.sigma.astype(np.float64).max() < 65504
    with pytest.raises(ValueError, match="a scale of 6.7"):
        coder.encode(x / np.abs(x).max() * 2e5)


@pytest.mark.parametrize("scale,warns", [(1e-9, True), (1e-3, False)])
def test_tiny_inputs_warn_that_float16_scales_lose_them(scale, warns):
    # every scale below float16's smallest normal: the axes lose their precision (1e-9:
    # the scales round to 0 and every token decodes to the mean) -- a warning, as
    # uniform_quantize's for such groups; ordinary values do not warn
    x = scale * gaussian(400, 16, seed=3)[0]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        r = KLTCoder(4, 16, group_size=200).roundtrip(x)
    tiny = [w for w in got if "float16's smallest normal" in str(w.message)]
    assert bool(tiny) == warns
    err = np.mean((r - x) ** 2) / np.mean((x - x.mean(0)) ** 2)
    assert (err > 0.9) if warns else (err < 0.1)
    # a constant block (no spread at all) decodes to its mean without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KLTCoder(4, 16, group_size=200).roundtrip(np.full((400, 16), 0.25))


def _eigh_fit(coder, y):
    """Reference for the axes: the covariance's eigendecomposition (the fit for m ≥ d)."""
    c = y - y.mean(axis=-2, keepdims=True)
    lam, vec = np.linalg.eigh(np.swapaxes(c, -1, -2) @ c / y.shape[-2])
    return lam[..., ::-1][..., :coder.rank], np.swapaxes(vec[..., ::-1][..., :coder.rank], -1, -2)


@pytest.mark.parametrize("dist,params", [("gaussian", {}), ("low_rank", {"rank": 4, "noise": 0.1})])
def test_fewer_tokens_than_dims_fit_the_covariance_axes(dist, params):
    # m = 48 tokens per half < d = 96: the fit goes through the m × m Gram matrix; its axes
    # must be the covariance's up to sign (float16 storage), its allocation identical, and
    # the roundtrip equal to one decoded from the covariance's own axes
    x = sample(dist, 3, 96, 96, seed=5, **params).K
    coder = KLTCoder(3, 96, rank=12)
    y = x[..., :48, :]
    basis, mean, sigma, alloc = coder._fit(y)
    _, ref = _eigh_fit(coder, y)
    cos = np.abs(np.sum(basis.astype(np.float64) * ref, axis=-1))
    np.testing.assert_allclose(cos, 1.0, atol=2e-3)                    # float16 basis
    flipped = (np.sign(np.sum(basis.astype(np.float64) * ref, axis=-1))[..., None] * ref).astype(np.float16)
    np.testing.assert_array_equal(basis, flipped)
    assert alloc.sum(axis=-1).tolist() == [coder.code_bits] * 3


def test_zero_variance_axes_keep_the_eigendecomposition_choice():
    # noiseless rank-1 keys with rank = 6 kept axes: five axes of zero variance, arbitrary;
    # the fit must not swap the covariance's choice for another (results would move)
    x = sample("low_rank", 2, 80, 96, seed=2, rank=1, noise=0.0).K
    coder = KLTCoder(3, 96, rank=6)
    y = x[..., :40, :]
    _, ref = _eigh_fit(coder, y)
    np.testing.assert_array_equal(coder._fit(y)[0], ref.astype(np.float16))


def _ledoit_wolf_reference(y, rank):
    """Shrunk leading eigenvalues by Ledoit & Wolf (J. Multivariate Anal. 88, 2004), written
    out term by term from Lemmas 3.2-3.4 (norm ‖A‖² = tr(AAᵀ)/d): m = mean of c_k c_kᵀ's
    trace/d, d² = ‖S − m I‖², b̄² = (1/n²) Σ_k ‖c_k c_kᵀ − S‖², b² = min(b̄², d²), and
    S* = (b²/d²) m I + (1 − b²/d²) S, one sample at a time (no vectorised identity)."""
    n, d = y.shape
    c = y - y.mean(axis=0)
    S = c.T @ c / n
    norm2 = lambda a: np.trace(a @ a.T) / d                        # noqa: E731
    mu = np.trace(S) / d
    delta = norm2(S - mu * np.eye(d))
    beta_bar = sum(norm2(np.outer(ck, ck) - S) for ck in c) / n ** 2
    rho = min(beta_bar, delta) / delta
    lam = np.linalg.eigvalsh(S)[::-1][:rank]
    return (1 - rho) * lam + rho * mu


@pytest.mark.parametrize("n,d,rank", [(200, 16, 16), (40, 96, 12)])
def test_scales_are_the_ledoit_wolf_shrunk_eigenvalues(n, d, rank):
    """The stored σᵢ are √ of Ledoit–Wolf's shrunk eigenvalues, through the covariance
    (n ≥ d) and through the Gram matrix (rank < n < d); float16 storage: 2^-10 relative."""
    x, _ = gaussian(n, d, seed=4)
    sigma = KLTCoder(2, d, rank=rank)._fit(x)[2]
    ref = np.sqrt(_ledoit_wolf_reference(x, rank))
    np.testing.assert_allclose(sigma.astype(np.float64), ref, rtol=2 ** -10)
    # power: the unshrunk spectrum is far from it at these n (the spread LW corrects)
    unshrunk = np.sqrt(np.linalg.eigvalsh(np.cov(x.T, bias=True))[::-1][:rank])
    assert np.max(np.abs(unshrunk / ref - 1)) > 0.05


def test_halves_of_odd_blocks():
    # the first half of a block holds ⌊m/2⌋ tokens; the last block absorbs the remainder
    assert KLTCoder(2, 8, group_size=10).halves(25) == (0, 5, 10, 17, 25)
    assert KLTCoder(2, 8, group_size=7).halves(7) == (0, 3, 7)
    assert KLTCoder(2, 8, group_size=10).halves(9) == (0, 4, 9)     # fewer than a block: one
