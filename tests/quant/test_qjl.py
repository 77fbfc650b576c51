"""Tests of the QJL modules (sketch, qjl, prod, qjl_keys): sketches, estimator, Prod, QJL keys.

Statistical checks compare R independent replicates (independent sketches; keys within
one sketch are never treated as independent) with a closed form and accept
|z| < Z_MAX = 4.5, i.e. a two-sided p-value above ~7e-6 per check. Each check has a
companion power check (a deliberately wrong reference must give |z| far above Z_MAX) so
that none of them can pass vacuously. Seeds are fixed, so the outcome is deterministic.

Reference values: E|u1| for d = 1, 2, 3 (1, 2/pi, 1/2: u1 = ±1, |cos| of a uniform
angle, Archimedes' uniform u1 on [-1, 1]) and its large-d expansion
sqrt(2/(pi d))·(1 + 1/(4d) + O(d^-2)) (Gamma-ratio asymptotics); the Gaussian
estimator variance ((pi/2)|q|^2|k|^2 - <q,k>^2)/m (derived in docs/qjl.md; the
estimator's unbiasedness is QJL Lemma 3.2, Zandieh, Daliri, Han 2024); the orthogonal-sketch variance and the 1 - 2/pi factor derived in
docs/qjl.md; the pi/2 residual inflation (Zandieh et al. 2025, TurboQuant, Thm. 2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvstats._checks import replicate_scale
from kvstats.quant.qjl import QJLCodes, qjl_encode, qjl_reconstruct, qjl_scores
from kvstats.quant.qjl_keys import QJLKeyQuantizer
from kvstats.quant.sketch import SKETCHES, Sketch, make_sketch
from kvstats.theory import qjl_variance, sphere_abs_moment

Z_MAX = 4.5
R = {"ci": 6000, "full": 60000}[replicate_scale()]
# Sketch kinds whose estimate is unbiased for every fixed pair, with exact per-pair
# closed forms; "srht" is unbiased only on average over the pair's orientation and is
# tested as such in tests/quant/test_sketch.py.
EXACT = ("gaussian", "orthogonal")


def mean_z(est: np.ndarray, truth) -> np.ndarray:
    """z of the replicate mean (axis 0) against ``truth``."""
    n = est.shape[0]
    return (est.mean(0) - truth) / (est.std(0, ddof=1) / math.sqrt(n))


def var_z(est: np.ndarray, theory) -> np.ndarray:
    """z of the replicate variance (axis 0) against ``theory`` (SE from the 4th moment)."""
    n = est.shape[0]
    c = est - est.mean(0)
    s2, m4 = (c ** 2).mean(0), (c ** 4).mean(0)
    return (s2 - theory) / np.sqrt((m4 - s2 ** 2) / n)


def diag_pairs(est: np.ndarray) -> np.ndarray:
    """Scores (..., n, n) of n paired queries/keys -> (..., n) of the pairs (q_i, k_i)."""
    return np.diagonal(est, axis1=-2, axis2=-1)


def probe_pairs(d: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Query/key pairs at several angles: parallel, orthogonal, partly aligned, random."""
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((4, d))
    q = rng.standard_normal((4, d))
    q[0] = 0.7 * k[0]                                    # parallel
    q[1] -= (q[1] @ k[1]) / (k[1] @ k[1]) * k[1]         # orthogonal
    q[2] = 0.5 * k[2] + 0.3 * rng.standard_normal(d)     # partly aligned
    return q, k


# --------------------------------------------------------------------------- constants
def test_sphere_abs_moment_closed_forms():
    assert sphere_abs_moment(1) == pytest.approx(1.0, rel=1e-12)
    assert sphere_abs_moment(2) == pytest.approx(2 / math.pi, rel=1e-12)
    assert sphere_abs_moment(3) == pytest.approx(0.5, rel=1e-12)
    d = 1000
    assert sphere_abs_moment(d) == pytest.approx(math.sqrt(2 / (math.pi * d)) * (1 + 1 / (4 * d)),
                                                 rel=1e-6)


def test_gaussian_variance_is_the_derived_closed_form():
    """The Gaussian-sketch variance, derived here: with rows s_i ~ N(0, I_d) i.i.d. the
    estimate is the mean of m i.i.d. terms Z_i = sqrt(pi/2) ||k|| (s_i.q) sign(s_i.k).
    Write s.q = a g1 + b g2 with g1 = s.k/||k||, g2 independent N(0, 1), a = <q, k>/||k||,
    a^2 + b^2 = ||q||^2: E[(s.q) sign(s.k)] = a E|g1| = a sqrt(2/pi), so E Z = <q, k>; and
    Z^2 = (pi/2) ||k||^2 (s.q)^2, so E Z^2 = (pi/2) ||k||^2 ||q||^2. Hence
    Var = ((pi/2) ||q||^2 ||k||^2 - <q, k>^2) / m, held against kvstats.theory (which the
    statistical tests below compare the estimator with)."""
    rng = np.random.default_rng(21)
    q, k = rng.standard_normal((2, 5, 24))
    for m in (1, 24, 100):
        derived = (math.pi / 2 * (q * q).sum(-1) * (k * k).sum(-1) - (q * k).sum(-1) ** 2) / m
        np.testing.assert_allclose(qjl_variance("gaussian", m, q, k), derived, rtol=1e-12)


@pytest.mark.parametrize("m,d", [(16, 16), (40, 16), (7, 64)])
def test_sketch_constants(m, d):
    assert make_sketch("gaussian", m, d).scale == pytest.approx(math.sqrt(math.pi / 2) / m, rel=1e-15)
    expected = 1 / (m * math.sqrt(d) * sphere_abs_moment(d))
    assert make_sketch("orthogonal", m, d).scale == pytest.approx(expected, rel=1e-15)


def test_orthogonal_sketch_structure():
    m, d = 40, 16
    s = make_sketch("orthogonal", m, d, seed=3, draws=2)
    assert s.matrix.shape == (2, m, d) and s.matrix.dtype == np.float64
    for lo, hi in ((0, 16), (16, 32), (32, 40)):  # two full blocks and a partial one
        block = s.matrix[:, lo:hi]
        gram = block @ np.swapaxes(block, -1, -2)
        np.testing.assert_allclose(gram, d * np.broadcast_to(np.eye(hi - lo), gram.shape), atol=1e-10)
    # rows of different blocks are independent, not orthogonal
    assert np.abs(s.matrix[:, :16] @ np.swapaxes(s.matrix[:, 16:32], -1, -2)).max() > 1.0


def test_orthogonal_sketch_rows_are_haar():
    """Each block of d rows is √d times a Haar orthogonal matrix: rows of norm √d, and for
    a fixed unit u, S u / √d uniform on the sphere; tr(block)/√d has mean 0 and variance 1.
    Without the QR sign fix block[0, 0] is always <= 0 (see the guard in test_rotation.py).
    One seed; for a fresh seed the false alarm rate is <= 3e-3 per block (|z| > 4.5: 7e-6;
    two KS tests at 1e-3 each)."""
    from scipy import stats

    n, d = 4000, 6
    s = make_sketch("orthogonal", 2 * d, d, seed=33, draws=n)  # two independent blocks
    np.testing.assert_allclose(np.linalg.norm(s.matrix, axis=-1), math.sqrt(d), rtol=1e-12)
    u = np.random.default_rng(34).standard_normal(d)
    u /= np.linalg.norm(u)
    law = stats.beta((d - 1) / 2, (d - 1) / 2, loc=-1, scale=2)  # a sphere coordinate
    for block in (s.matrix[:, :d] / math.sqrt(d), s.matrix[:, d:] / math.sqrt(d)):
        z = np.trace(block, axis1=-2, axis2=-1).mean() * math.sqrt(n)
        assert abs(z) < 4.5, f"mean trace {z:.1f} standard errors from 0"
        assert stats.kstest(block[:, 0, 0], law.cdf).pvalue > 1e-3
        assert stats.kstest((block @ u)[:, -1], law.cdf).pvalue > 1e-3


def test_sketch_seeds():
    for kind in SKETCHES:
        a = make_sketch(kind, 24, 16, seed=5, draws=3).matrix
        b = make_sketch(kind, 24, 16, seed=5, draws=3).matrix
        c = make_sketch(kind, 24, 16, seed=6, draws=3).matrix
        assert np.array_equal(a, b)
        assert not np.allclose(a, c)
        assert not np.allclose(a[0], a[1])  # draws are independent
        g = make_sketch(kind, 24, 16, seed=np.random.default_rng(5), draws=3).matrix
        assert np.array_equal(g, a)  # a Generator seeded alike gives the same bits


# --------------------------------------------------------------------------- codes
def test_encode_bit_order_and_norms():
    rng = np.random.default_rng(0)
    s = make_sketch("gaussian", 21, 8, seed=0)
    x = rng.standard_normal((5, 8))
    codes = qjl_encode(s, x)
    assert codes.signs.shape == (5, 3) and codes.signs.dtype == np.uint8
    proj = x @ s.matrix.T
    i = np.arange(21)
    bit = (codes.signs[:, i // 8] >> (i % 8)) & 1  # bit j of byte b is row 8b + j
    np.testing.assert_array_equal(bit, (proj >= 0).astype(np.uint8))
    assert codes.norms.dtype == np.float16
    np.testing.assert_array_equal(codes.norms, np.linalg.norm(x, axis=-1).astype(np.float16))
    assert qjl_encode(s, x, norm_dtype=np.float64).norms.dtype == np.float64


def test_sign_of_zero_is_plus_one_and_zero_vectors_give_zero():
    s = Sketch("gaussian", 2, 2, (), np.array([[1.0, -1.0], [1.0, 1.0]]), math.sqrt(math.pi / 2) / 2)
    codes = qjl_encode(s, np.array([[1.0, 1.0]]))  # first projection is exactly 0
    assert codes.signs.tolist() == [[0b11]]
    z = make_sketch("orthogonal", 12, 6, seed=0)
    zc = qjl_encode(z, np.zeros((3, 6)))
    assert zc.signs.tolist() == [[255, 15]] * 3  # all 12 rows +1, padding bits 0
    assert np.array_equal(qjl_scores(z, np.ones((2, 6)), zc), np.zeros((2, 3)))
    assert np.array_equal(qjl_reconstruct(z, zc), np.zeros((3, 6)))


@pytest.mark.parametrize("kind", SKETCHES)
def test_scores_match_reference_and_reconstruction(kind):
    rng = np.random.default_rng(1)
    s = make_sketch(kind, 20, 12, seed=2, draws=3)
    k = rng.standard_normal((3, 7, 12))
    q = rng.standard_normal((5, 12))  # one query set broadcast over the 3 draws
    codes = qjl_encode(s, k)
    est = qjl_scores(s, q, codes)
    assert est.shape == (3, 5, 7) and est.dtype == np.float64
    # plain reference: c ||k|| <S q, sign(S k)> with sign(0) = +1
    sk = np.where(k @ np.swapaxes(s.matrix, -1, -2) >= 0, 1.0, -1.0)
    sq = q @ np.swapaxes(s.matrix, -1, -2)
    ref = s.scale * (sq @ np.swapaxes(sk, -1, -2)) * codes.norms.astype(float)[:, None, :]
    np.testing.assert_allclose(est, ref, rtol=1e-12, atol=1e-12)
    rec = qjl_reconstruct(s, codes)
    np.testing.assert_allclose(q @ np.swapaxes(rec, -1, -2), est, rtol=1e-10, atol=1e-10)
    est32 = qjl_scores(s, q.astype(np.float32), codes)
    assert est32.dtype == np.float32
    np.testing.assert_allclose(est32, est, rtol=1e-4, atol=1e-4)
    # with float64 norms the scores use the exact norm (no float16 rounding, 5e-4 relative)
    codes64 = qjl_encode(s, k, norm_dtype=np.float64)
    np.testing.assert_array_equal(codes64.norms, np.linalg.norm(k, axis=-1))
    ref64 = s.scale * (sq @ np.swapaxes(sk, -1, -2)) * np.linalg.norm(k, axis=-1)[:, None, :]
    np.testing.assert_allclose(qjl_scores(s, q, codes64), ref64, rtol=1e-12, atol=1e-12)


def test_draws_batching_equals_loop():
    rng = np.random.default_rng(4)
    s = make_sketch("orthogonal", 24, 16, seed=7, draws=(2, 3))
    k = rng.standard_normal((2, 3, 5, 16))
    q = rng.standard_normal((2, 3, 4, 16))
    codes = qjl_encode(s, k)
    est = qjl_scores(s, q, codes)
    for i in range(2):
        for j in range(3):
            one = Sketch(s.kind, s.m, s.dim, (), s.matrix[i, j], s.scale)
            c1 = qjl_encode(one, k[i, j])
            assert np.array_equal(c1.signs, codes.signs[i, j])
            np.testing.assert_allclose(qjl_scores(one, q[i, j], c1), est[i, j], rtol=1e-12)


def test_errors_name_the_argument():
    s = make_sketch("gaussian", 8, 4, draws=3)
    with pytest.raises(ValueError, match="kind"):
        make_sketch("rademacher", 8, 4)
    with pytest.raises(ValueError, match="m must"):
        make_sketch("gaussian", 0, 4)
    with pytest.raises(TypeError, match="draws"):
        make_sketch("gaussian", 8, 4, draws=2.5)
    with pytest.raises(ValueError, match="last dimension 4"):
        qjl_encode(s, np.ones((2, 5)))
    with pytest.raises(ValueError, match="broadcast"):
        qjl_encode(s, np.ones((2, 2, 4)))
    with pytest.raises(ValueError, match="finite"):
        qjl_encode(s, np.array([[np.nan, 0, 0, 0]]))
    with pytest.raises(ValueError, match="norm_dtype"):
        qjl_encode(s, np.full((1, 4), 1e5))  # norm 2e5 overflows float16
    with pytest.raises(ValueError, match="norm_dtype"):
        qjl_encode(s, np.ones((1, 4)), norm_dtype=np.int8)
    codes = qjl_encode(make_sketch("gaussian", 16, 4), np.ones((1, 4)))
    with pytest.raises(ValueError, match="m=16"):
        qjl_scores(s, np.ones((1, 4)), codes)
    with pytest.raises(TypeError, match="QJLCodes"):
        qjl_scores(s, np.ones((1, 4)), np.ones(3))
    with pytest.raises(TypeError, match="Sketch"):
        qjl_encode("gaussian", np.ones((1, 4)))


# --------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("kind", EXACT)
@pytest.mark.parametrize("m", [16, 24])  # m = d and a partial second orthogonal block
def test_estimator_unbiased(kind, m):
    d = 16
    q, k = probe_pairs(d)
    s = make_sketch(kind, m, d, seed=11, draws=R)
    est = diag_pairs(qjl_scores(s, q, qjl_encode(s, k, norm_dtype=np.float64)))
    z = mean_z(est, (q * k).sum(-1))
    assert np.abs(z).max() < Z_MAX, z


def test_unbiasedness_test_has_power_against_the_gaussian_constant_on_orthogonal_rows():
    # At d = 16 the Gaussian constant is off by ~1.6% for orthogonal rows (the ratio of
    # the two constants, sqrt(pi/2) sqrt(d) E|u1| - 1); the test above must detect it.
    d = 16
    q, k = probe_pairs(d)
    s = make_sketch("orthogonal", d, d, seed=11, draws=R)
    est = diag_pairs(qjl_scores(s, q, qjl_encode(s, k, norm_dtype=np.float64)))
    wrong = est * (math.sqrt(math.pi / 2) / d) / s.scale
    assert abs(mean_z(wrong, (q * k).sum(-1))[0]) > 3 * Z_MAX  # the parallel pair
    assert np.abs(mean_z(est, (q * k).sum(-1))).max() < Z_MAX


@pytest.mark.parametrize("kind", EXACT)
@pytest.mark.parametrize("m", [16, 24, 40])
def test_estimator_variance_matches_closed_form(kind, m):
    d = 16
    q, k = probe_pairs(d)
    s = make_sketch(kind, m, d, seed=12, draws=R)
    est = diag_pairs(qjl_scores(s, q, qjl_encode(s, k, norm_dtype=np.float64)))
    z = var_z(est, qjl_variance(kind, m, q, k))
    assert np.abs(z).max() < Z_MAX, z


def test_variance_test_has_power_orthogonal_is_not_gaussian():
    d = m = 16
    q, k = probe_pairs(d)
    s = make_sketch("orthogonal", m, d, seed=12, draws=R)
    est = diag_pairs(qjl_scores(s, q, qjl_encode(s, k, norm_dtype=np.float64)))
    assert np.abs(var_z(est, qjl_variance("gaussian", m, q, k))).min() > 3 * Z_MAX
    # measured ratio to the Gaussian variance, as documented in docs/qjl.md
    ratio = est.var(0) / qjl_variance("gaussian", m, q, k)
    assert ratio.max() < 0.5


def test_orthogonal_variance_factor_for_orthogonal_query():
    # q ⊥ k, m = d: Var_orth / Var_gauss = (1 - 2/pi) / (d mu^2 pi/2) -> 1 - 2/pi.
    for d in (16, 64, 1024):
        q, k = np.zeros(d), np.zeros(d)
        q[0], k[1] = 1.0, 1.0
        mu = sphere_abs_moment(d)
        ratio = qjl_variance("orthogonal", d, q, k) / qjl_variance("gaussian", d, q, k)
        assert ratio == pytest.approx((1 - 2 / math.pi) / (d * mu ** 2 * math.pi / 2), rel=1e-12)
    assert ratio == pytest.approx(1 - 2 / math.pi, rel=1e-3)


@pytest.mark.parametrize("kind", EXACT)
def test_reconstruction_unbiased(kind):
    d = 16
    x = np.random.default_rng(3).standard_normal((1, d))
    s = make_sketch(kind, d, d, seed=13, draws=R)
    rec = qjl_reconstruct(s, qjl_encode(s, x, norm_dtype=np.float64))[:, 0, :]
    z = mean_z(rec, x[0])
    assert np.abs(z).max() < Z_MAX, z
    # along x: unbiased, and (power) a 5% shrinkage of the reconstruction is detected
    u = x[0] / np.linalg.norm(x[0])
    assert abs(mean_z(rec @ u, np.linalg.norm(x[0]))) < Z_MAX
    assert abs(mean_z(0.95 * rec @ u, np.linalg.norm(x[0]))) > Z_MAX


# --------------------------------------------------------------------------- QJL keys
def planted_keys(n_tokens: int, d: int, group_size: int, n_out: int, seed: int = 0):
    """Keys whose groups each have ``n_out`` distinct channels of magnitude ~40."""
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((n_tokens, d))
    n_groups = -(-n_tokens // group_size)
    planted = np.sort(np.stack([rng.choice(d, n_out, replace=False) for _ in range(n_groups)]), -1)
    for g in range(n_groups):
        K[g * group_size:(g + 1) * group_size, planted[g]] *= 40.0
    return K, planted


def test_outlier_index_bookkeeping():
    K, planted = planted_keys(70, 32, 16, 3)  # 5 groups, the last holds 6 tokens
    qk = QJLKeyQuantizer(32, 64, n_outliers=3, group_size=16, seed=0)
    codes = qk.encode(K)
    assert codes.outlier_idx.dtype == np.uint8 and codes.outlier_idx.shape == (5, 3)
    np.testing.assert_array_equal(codes.outlier_idx, planted)
    assert qk.n_groups(70) == 5
    # outliers by L2 energy over the group: a spike (10, 0, 0, 0) beats a plateau
    # (4, 4, 4, 4) (energies 100 vs 64), though the plateau's L1 norm is larger (16 vs 10)
    Kl = np.full((4, 8), 0.1)
    Kl[0, 2], Kl[:, 5] = 10.0, 4.0
    assert QJLKeyQuantizer(8, 16, n_outliers=1, group_size=4).encode(Kl).outlier_idx.tolist() == [[2]]
    big = QJLKeyQuantizer(300, 16, n_outliers=2, group_size=8)
    assert big.encode(np.ones((9, 300))).outlier_idx.dtype == np.uint16
    # batched keys: one index set per batch element and group
    Kb = np.stack([planted_keys(40, 32, 16, 3, seed=s)[0] for s in (1, 2)])
    idx = qk.encode(Kb).outlier_idx
    assert idx.shape == (2, 3, 3)
    np.testing.assert_array_equal(idx[1], planted_keys(40, 32, 16, 3, seed=2)[1])


@pytest.mark.parametrize("kind", SKETCHES)
def test_qjl_keys_scores_equal_decoded_inner_products(kind):
    K, _ = planted_keys(37, 16, 8, 2)
    q = np.random.default_rng(5).standard_normal((3, 16))
    qk = QJLKeyQuantizer(16, 24, sketch=kind, n_outliers=2, outlier_m=16, group_size=8, seed=1,
                         draws=4)
    codes = qk.encode(K)
    est = qk.scores(q, codes)
    dec = qk.decode(codes)
    assert est.shape == (4, 3, 37) and dec.shape == (4, 37, 16) and dec.dtype == np.float64
    assert qk.decode(qk.encode(K.astype(np.float32))).dtype == np.float32
    np.testing.assert_allclose(est, q @ np.swapaxes(dec, -1, -2), rtol=1e-10, atol=1e-9)
    plain = QJLKeyQuantizer(16, 24, sketch=kind, seed=1)
    pc = plain.encode(K)
    assert pc.outlier is None
    np.testing.assert_allclose(plain.scores(q, pc), qjl_scores(plain.sketch, q, pc.inlier))


def test_qjl_keys_draws_batching_equals_loop():
    K, _ = planted_keys(20, 16, 8, 2)
    q = np.random.default_rng(6).standard_normal((2, 16))
    qk = QJLKeyQuantizer(16, 16, n_outliers=2, group_size=8, seed=3, draws=3)
    est = qk.scores(q, qk.encode(K))
    one = QJLKeyQuantizer(16, 16, n_outliers=2, group_size=8, seed=3)
    for i in range(3):
        one.sketch = Sketch("gaussian", 16, 16, (), qk.sketch.matrix[i], qk.sketch.scale)
        one.outlier_sketch = Sketch("gaussian", 16, 16, (), qk.outlier_sketch.matrix[i],
                                    qk.outlier_sketch.scale)
        np.testing.assert_allclose(one.scores(q, one.encode(K)), est[i], rtol=1e-12)


def split_variance(kind, m, outlier_m, q, k, idx):
    """Closed-form variance of the split estimator: inlier and outlier parts add."""
    mask = np.zeros(k.shape[-1], bool)
    mask[idx] = True
    return (qjl_variance(kind, m, np.where(mask, 0, q), np.where(mask, 0, k))
            + qjl_variance(kind, outlier_m, np.where(mask, q, 0), np.where(mask, k, 0)))


@pytest.mark.parametrize("kind", EXACT)
def test_qjl_keys_unbiased_and_variance_with_outliers(kind):
    d, m = 16, 16
    K, planted = planted_keys(4, d, 4, 2, seed=8)  # one group, channels planted[0]
    q = np.random.default_rng(9).standard_normal((4, d))
    qk = QJLKeyQuantizer(d, m, sketch=kind, n_outliers=2, group_size=4, seed=21, draws=R,
                         norm_dtype=np.float64)
    codes = qk.encode(K)
    np.testing.assert_array_equal(codes.outlier_idx[0], planted[0])
    est = diag_pairs(qk.scores(q, codes))
    assert np.abs(mean_z(est, (q * K).sum(-1))).max() < Z_MAX
    theory = split_variance(kind, m, m, q, K, planted[0])
    assert np.abs(var_z(est, theory)).max() < Z_MAX
    # power: splitting lowers the variance on such keys far below plain QJL's
    plain = QJLKeyQuantizer(d, m, sketch=kind, seed=21, draws=R, norm_dtype=np.float64)
    est0 = diag_pairs(plain.scores(q, plain.encode(K)))
    assert np.abs(mean_z(est0, (q * K).sum(-1))).max() < Z_MAX
    assert np.abs(var_z(est0, theory)).min() > 3 * Z_MAX
    assert (est.var(0) / est0.var(0)).max() < 0.5


def test_qjl_keys_bit_accounting():
    qk = QJLKeyQuantizer(128, 256, n_outliers=8, group_size=32)
    assert qk.stored_bits(100) == {"signs": 25600, "norm": 1600, "outlier_signs": 25600,
                                   "outlier_norm": 1600, "outlier_indices": 4 * 8 * 7}
    assert qk.stored_bits(100)["outlier_indices"] / 100 == pytest.approx(2.24)  # per key
    codes = qk.encode(np.random.default_rng(0).standard_normal((100, 128)))
    parts = qk.stored_bits(100)
    assert codes.inlier.signs.nbytes * 8 == parts["signs"]
    assert codes.outlier.signs.nbytes * 8 == parts["outlier_signs"]
    assert codes.inlier.norms.nbytes * 8 == parts["norm"]
    assert codes.outlier_idx.size * 7 == parts["outlier_indices"]
    plain = QJLKeyQuantizer(100, 50, outlier_m=999)
    assert plain.stored_bits(10) == {"signs": 500, "norm": 160}
    assert plain.describe()["outlier_m"] == 0
    odd = QJLKeyQuantizer(65, 10, n_outliers=3, group_size=7, norm_dtype=np.float32)
    assert odd.stored_bits(15) == {"signs": 150, "norm": 480, "outlier_signs": 150,
                                   "outlier_norm": 480, "outlier_indices": 3 * 3 * 7}


def test_qjl_keys_errors_and_describe():
    with pytest.raises(ValueError, match="n_outliers"):
        QJLKeyQuantizer(16, 8, n_outliers=17)
    with pytest.raises(ValueError, match="sketch"):
        QJLKeyQuantizer(16, 8, sketch="sparse")
    qk = QJLKeyQuantizer(16, 8, n_outliers=2, group_size=4)
    with pytest.raises(ValueError, match="dim=16"):
        qk.encode(np.ones((4, 8)))
    other = QJLKeyQuantizer(16, 8, n_outliers=2, group_size=8)
    with pytest.raises(ValueError, match="group_size"):
        qk.scores(np.ones((1, 16)), other.encode(np.ones((8, 16))))
    d = qk.describe()
    assert next(iter(d)) == "coder" and d["coder"] == "qjl" and qk.nominal_bits == 1.0  # 8 + 8 outlier signs over 16
    assert d["sketch"] == "gaussian" and d["n_outliers"] == 2 and d["outlier_m"] == 8
    assert d["group_size"] == 4 and d["m"] == 8
    a = QJLKeyQuantizer(16, 8, n_outliers=2, seed=3).encode(np.eye(16))
    b = QJLKeyQuantizer(16, 8, n_outliers=2, seed=3).encode(np.eye(16))
    c = QJLKeyQuantizer(16, 8, n_outliers=2, seed=4).encode(np.eye(16))
    assert np.array_equal(a.inlier.signs, b.inlier.signs)
    assert not np.array_equal(a.inlier.signs, c.inlier.signs)
    assert isinstance(a.inlier, QJLCodes)


@pytest.mark.parametrize("kind", SKETCHES)
@pytest.mark.parametrize("n_outliers, group_size, draws", [(0, 32, ()), (3, 7, (2,)), (4, 16, ())])
def test_qjl_keys_roundtrip_equals_decode_encode(kind, n_outliers, group_size, draws):
    qk = QJLKeyQuantizer(40, 56, sketch=kind, n_outliers=n_outliers, group_size=group_size,
                         seed=5, draws=draws)
    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        K = rng.standard_normal((*draws, 45, 40)).astype(dtype)  # 45: a partial last group
        K[..., 7] *= 30
        K[..., 3, :] = 0  # a zero key reconstructs to zero on both paths
        got, ref = qk.roundtrip(K), qk.decode(qk.encode(K))
        assert got.dtype == ref.dtype == dtype and np.array_equal(got, ref)
    with pytest.raises(ValueError, match="dim=40"):
        qk.roundtrip(np.ones((4, 8)))
    with pytest.raises(ValueError, match="norm"):  # float16 norm overflow, as encode
        qk.roundtrip(np.full((2, 40), 2e4))


# --------------------------------------------------------------------------- TurboQuant-prod
R_PROD = {"ci": 3000, "full": 30000}[replicate_scale()]


def test_prod_decode_scores_and_accounting():
    from kvstats.quant.prod import ProdQuantizer

    rng = np.random.default_rng(0)
    pq = ProdQuantizer(48, 3, seed=0)  # d = 48 pads to 64 for the Hadamard rotation
    x = rng.standard_normal((10, 48))
    q = rng.standard_normal((3, 48))
    codes = pq.encode(x)
    dec = pq.decode(codes)
    assert dec.shape == x.shape and dec.dtype == x.dtype
    expected = pq.mse.decode(codes.mse) + qjl_reconstruct(pq.sketch, codes.residual)
    np.testing.assert_allclose(dec, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pq.scores(q, codes), q @ dec.T, rtol=1e-10, atol=1e-10)
    assert pq.m == 64 and pq.sketch.matrix.shape == (64, 48)
    bits = pq.stored_bits(10)
    assert bits["residual_signs"] == 640 and bits["residual_norm"] == 160
    assert bits["mse_codes"] == 10 * 2 * 64 and bits["mse_norm"] == 160
    assert codes.residual.signs.nbytes * 8 == bits["residual_signs"]
    assert codes.nbytes * 8 == sum(bits.values())  # every stored part is accounted
    assert pq.nominal_bits == 3
    desc = pq.describe()
    assert next(iter(desc)) == "coder" and desc["coder"] == "prod"
    assert desc["sketch"] == "gaussian" and desc["m"] == 64 and desc["mse_bits"] == 2
    assert ProdQuantizer(48, 3, m=100, sketch="orthogonal").describe()["m"] == 100
    # float32 in, float32 out; zero vectors decode to zero
    assert pq.decode(pq.encode(x.astype(np.float32))).dtype == np.float32
    zero = pq.decode(pq.encode(np.zeros((2, 48))))
    assert np.isfinite(zero).all() and np.abs(zero).max() == 0


def test_prod_and_qjl_keys_are_coders():
    from kvstats.quant.coder import Coder, ExportableCoder
    from kvstats.quant.prod import ProdQuantizer

    assert isinstance(ProdQuantizer(32, 3), ExportableCoder)
    assert isinstance(QJLKeyQuantizer(32, 64), Coder)
    assert not isinstance(QJLKeyQuantizer(32, 64), ExportableCoder)  # no GPU path


@pytest.mark.parametrize("rotation", ["hadamard", "identity"])
def test_prod_export_is_the_coders_arrays(rotation):
    from kvstats.quant.prod import ProdQuantizer

    pq = ProdQuantizer(48, 4, rotation=rotation, sketch="orthogonal", m=80, seed=3)
    ex = pq.export()
    assert (ex.coder, ex.bits, ex.dim, ex.dim_padded, ex.m) == ("prod", 3, 48, pq.mse.n_coords, 80)
    assert np.array_equal(ex.centroids, pq.mse.codebook.centroids)
    assert np.array_equal(ex.boundaries, pq.mse.codebook.boundaries)
    assert np.array_equal(ex.sketch, pq.sketch.matrix) and ex.sketch_scale == pq.sketch.scale
    assert ex.norm_dtype == np.float16
    if rotation == "hadamard":
        assert np.array_equal(ex.signs, pq.mse.rotation.signs)
    else:
        assert ex.signs is None
    with pytest.raises(ValueError, match="draws"):
        ProdQuantizer(48, 4, draws=2).export()
    with pytest.raises(ValueError, match="haar"):
        ProdQuantizer(48, 4, rotation="haar").export()


def test_prod_rejects_one_bit_and_bad_input():
    from kvstats.quant.prod import ProdQuantizer

    with pytest.raises(ValueError, match="QJLKeyQuantizer"):
        ProdQuantizer(32, 1)
    with pytest.raises(ValueError, match="bits"):
        ProdQuantizer(32, 10)
    with pytest.raises(ValueError, match="sketch"):
        ProdQuantizer(32, 3, sketch="sparse")
    with pytest.raises(ValueError, match="dim=32"):
        ProdQuantizer(32, 3).encode(np.ones((2, 16)))
    pq = ProdQuantizer(32, 3)                                   # queries of another dimension:
    with pytest.raises(ValueError, match=r"q must have last dimension dim=32; received shape \(2, 16\)"):
        pq.scores(np.ones((2, 16)), pq.encode(np.ones((2, 32))))   # was numpy's matmul error


def test_prod_seeds_and_draws():
    from kvstats.quant.prod import ProdQuantizer

    x = np.random.default_rng(1).standard_normal((5, 32))
    a = ProdQuantizer(32, 3, seed=2).decode(ProdQuantizer(32, 3, seed=2).encode(x))
    b = ProdQuantizer(32, 3, seed=2).decode(ProdQuantizer(32, 3, seed=2).encode(x))
    c = ProdQuantizer(32, 3, seed=3).decode(ProdQuantizer(32, 3, seed=3).encode(x))
    assert np.array_equal(a, b) and not np.allclose(a, c)
    pq = ProdQuantizer(32, 3, seed=2, draws=3)
    dec = pq.decode(pq.encode(x))  # one x broadcast over 3 independent draws
    assert dec.shape == (3, 5, 32)
    assert not np.allclose(dec[0], dec[1])
    # the residual sketch of each draw equals a loop over the draws' sketches
    codes = pq.encode(x)
    r = x - pq.mse.decode(codes.mse)
    for i in range(3):
        one = Sketch(pq.sketch.kind, pq.m, 32, (), pq.sketch.matrix[i], pq.sketch.scale)
        c1 = qjl_encode(one, r[i])
        assert np.array_equal(c1.signs, codes.residual.signs[i])
        np.testing.assert_allclose(qjl_reconstruct(one, c1), dec[i] - pq.mse.decode(codes.mse)[i],
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", EXACT)
@pytest.mark.parametrize("bits", [2, 3])
def test_prod_inner_products_unbiased(kind, bits):
    from kvstats.quant.prod import ProdQuantizer

    d = 32
    q, x = probe_pairs(d, seed=4)
    pq = ProdQuantizer(d, bits, sketch=kind, seed=31, draws=R_PROD, norm_dtype=np.float64)
    codes = pq.encode(x)
    est = diag_pairs(pq.scores(q, codes))
    assert np.abs(mean_z(est, (q * x).sum(-1))).max() < Z_MAX
    if bits == 2:
        # power: the 1-bit MSE part alone is biased (shrinks inner products, ~2/pi)
        mse_only = diag_pairs(q @ np.swapaxes(pq.mse.decode(codes.mse), -1, -2))
        assert np.abs(mean_z(mse_only, (q * x).sum(-1))).max() > 3 * Z_MAX


@pytest.mark.slow
def test_prod_residual_variance_is_pi_over_2_times_the_projection():
    # Var<q, r̂ - r> / (|q|^2 |r|^2 / d) = pi/2 - cos^2(q, r) for a Gaussian sketch
    # with m = d (TurboQuant, Thm. 2 and Lemma 4); the mean over random q, r is
    # pi/2 - E cos^2 ≈ pi/2 - 1/d.
    from kvstats.quant.prod import ProdQuantizer

    d = 32
    rng = np.random.default_rng(7)
    x, q = rng.standard_normal((8, d)), rng.standard_normal((8, d))
    pq = ProdQuantizer(d, 3, sketch="gaussian", seed=41, draws=R_PROD, norm_dtype=np.float64)
    codes = pq.encode(x)
    r = x - pq.mse.decode(codes.mse)                          # (R, 8, d)
    e = diag_pairs(qjl_scores(pq.sketch, q, codes.residual)) - (q * r).sum(-1)
    rr, qq = (r * r).sum(-1), (q * q).sum(-1)
    normed = e ** 2 / (qq * rr / d)                           # (R, 8)
    cos2 = (q * r).sum(-1) ** 2 / (qq * rr)
    per_draw = (normed - (math.pi / 2 - cos2)).mean(-1)      # independent across draws
    assert abs(mean_z(per_draw, 0.0)) < Z_MAX
    ratio = normed.mean()
    # stated tolerance: 5% of pi/2 (the 1/d term is 2%, the sampling SE < 1%)
    assert ratio == pytest.approx(math.pi / 2, rel=0.05)
    # power: the scalar residual projection's ratio (1) is rejected
    assert abs(mean_z(normed.mean(-1), 1.0)) > 3 * Z_MAX


@pytest.mark.slow
def test_trading_a_scalar_bit_for_the_residual_inflates_inner_product_error():
    # b-bit prod vs b-bit MSE: E<q, x̂ - x>^2 ratio ≈ (pi/2) D_{b-1} / D_b (docs/qjl.md §2,
    # D_b = d·MSE of the Lloyd–Max codebook for the sphere coordinate of dimension d);
    # the approximation treats the MSE error as isotropic, so the stated tolerance is 10%.
    from kvstats.quant.codebook import lloyd_max_codebook
    from kvstats.quant.mse import MSEQuantizer
    from kvstats.quant.prod import ProdQuantizer

    d, bits = 128, 3
    n_draws = {"ci": 300, "full": 3000}[replicate_scale()]
    rng = np.random.default_rng(0)
    x, q = rng.standard_normal((16, d)), rng.standard_normal((16, d))
    ip = (q * x).sum(-1)
    pq = ProdQuantizer(d, bits, seed=1, draws=n_draws, norm_dtype=np.float64)
    mq = MSEQuantizer(d, bits, seed=2, draws=n_draws, norm_dtype=np.float64)
    e_prod = diag_pairs(pq.scores(q, pq.encode(x))) - ip
    e_mse = (q * mq.decode(mq.encode(x))).sum(-1) - ip
    ratio = (e_prod ** 2).mean() / (e_mse ** 2).mean()
    d_lo, d_hi = (lloyd_max_codebook(b, "beta", dim=d).mse for b in (bits - 1, bits))
    assert ratio == pytest.approx(math.pi / 2 * d_lo / d_hi, rel=0.10)
    assert ratio > 4.0  # power: far from "no inflation" (1) and from pi/2 alone


@pytest.mark.parametrize("kind", EXACT)
@pytest.mark.parametrize("m", [16, 24, 40])
def test_reconstruction_mse_matches_closed_form(kind, m):
    from kvstats.theory import qjl_reconstruction_mse

    d = 16
    x = np.random.default_rng(5).standard_normal((4, d))
    s = make_sketch(kind, m, d, seed=17, draws=R)
    rec = qjl_reconstruct(s, qjl_encode(s, x, norm_dtype=np.float64))
    rel = ((rec - x) ** 2).sum(-1) / (x ** 2).sum(-1)         # (R, 4)
    assert np.abs(mean_z(rel, qjl_reconstruction_mse(kind, m, d))).max() < Z_MAX
    # power: the other sketch kind's closed form is rejected
    other = EXACT[1 - EXACT.index(kind)]
    assert np.abs(mean_z(rel, qjl_reconstruction_mse(other, m, d))).min() > 3 * Z_MAX


@pytest.mark.parametrize("draws", [(), (3,), (2, 3)])
def test_qjl_keys_batch_broadcasting(draws):
    rng = np.random.default_rng(10)
    K = rng.standard_normal((2, 3, 20, 16))
    qk = QJLKeyQuantizer(16, 24, n_outliers=3, group_size=8, seed=2, draws=draws)
    codes = qk.encode(K)
    dec = qk.decode(codes)
    for q in (rng.standard_normal((5, 16)), rng.standard_normal((2, 1, 5, 16))):
        est = qk.scores(q, codes)
        assert est.shape == (2, 3, 5, 20)
        np.testing.assert_allclose(est, q @ np.swapaxes(dec, -1, -2), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="broadcast"):
        qk.scores(rng.standard_normal((3, 1, 5, 16)), codes)


@pytest.mark.parametrize("draws", [(), 5])
def test_prod_chunked_paths_equal_one_pass(monkeypatch, draws):
    """ProdQuantizer works in cache-sized chunks: encode, decode and roundtrip must equal,
    bit for bit, the one-pass arithmetic: the MSE part's roundtrip followed by the sketch
    products over the whole array (the reference below). With one sketch the products
    run on groups of 96k rows (BLAS rounds a row by its place in the call: groups of
    the MSE part's 32-row chunks fail; checked by mutating the group size)."""
    import kvstats.quant.mse as mse
    from kvstats.quant.prod import ProdQuantizer
    from kvstats.quant.qjl import _pm_from_bits, _reconstruct, _sign_bits, _store_norms

    monkeypatch.setattr(mse, "_CHUNK_VALUES", 1 << 12)  # 32 rows of d_pad = 128 per chunk
    rng = np.random.default_rng(3)
    shape = (1000, 96) if draws == () else (5, 288, 96)
    x = (rng.standard_normal(shape) * rng.gamma(1.0, size=shape[:-1] + (1,))).astype(np.float32)
    pq = ProdQuantizer(96, 3, seed=4, draws=draws, norm_dtype=np.float32)
    assert len(pq._groups(x.shape[:-1])[1]) > 2
    base = pq.mse.roundtrip(x)
    residual = x - base
    norms = _store_norms(residual, pq.norm_dtype, "x")
    want = base + _reconstruct(pq.sketch, _pm_from_bits(_sign_bits(pq.sketch, residual), x.dtype),
                               norms, x.dtype)
    codes = pq.encode(x)
    np.testing.assert_array_equal(codes.mse.codes, pq.mse.encode(x).codes)
    np.testing.assert_array_equal(codes.residual.norms, norms)
    np.testing.assert_array_equal(codes.residual.signs,
                                  qjl_encode(pq.sketch, residual, pq.norm_dtype).signs)
    np.testing.assert_array_equal(pq.roundtrip(x), want)
    np.testing.assert_array_equal(pq.decode(codes), want)


@pytest.mark.parametrize("sketch", ["gaussian", "orthogonal", "srht"])
def test_sketches_held_in_float32_code_float32_keys_bit_for_bit(sketch):
    # hold_sketches_as(float32) (the quantized cache's coder): every product casts the
    # sketch to the keys' dtype, so float32 keys get the same codes, decode, roundtrip and
    # scores as with float64 sketches; an srht sketch keeps only its signs
    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 40, 48)).astype(np.float32)
    K[..., 5] *= 30
    q = rng.standard_normal((3, 2, 48)).astype(np.float32)
    kw = dict(n_outliers=3, group_size=8, seed=4, draws=3, sketch=sketch)
    ref, held = QJLKeyQuantizer(48, 96, **kw), QJLKeyQuantizer(48, 96, **kw)
    held.hold_sketches_as(np.float32)
    for s in (held.sketch, held.outlier_sketch):
        if s.kind == "srht":  # its +-1 signs in int8: exact
            assert s.dense is None and s.signs.dtype == np.int8
        else:  # dense (sketch="srht" sketches its outliers with "orthogonal", docs/qjl.md §3)
            assert s.dense.dtype == np.float32
    for dtype in (np.float32,):  # float64 keys would meet the float32-rounded dense matrices
        Kd, qd = K.astype(dtype), q.astype(dtype)
        a, b = ref.encode(Kd), held.encode(Kd)
        for x, y in ((a.inlier.signs, b.inlier.signs), (a.inlier.norms, b.inlier.norms),
                     (a.outlier.signs, b.outlier.signs), (a.outlier_idx, b.outlier_idx)):
            assert np.array_equal(x, y)
        assert np.array_equal(ref.decode(a), held.decode(b))
        assert np.array_equal(ref.roundtrip(Kd), held.roundtrip(Kd))
        assert np.array_equal(ref.scores(qd, a), held.scores(qd, b))
    with pytest.raises(ValueError, match="dtype must be one of"):
        held.hold_sketches_as(np.float16)
