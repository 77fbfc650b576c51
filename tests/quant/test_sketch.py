"""Tests of the randomized-Hadamard ("srht") QJL sketch and the QJL variance bound.

Statistical checks use R independent sketches (replicates), z-tests with |z| < Z_MAX =
4.5 (two-sided p ~7e-6 per check), each with a power check (a wrong reference must give
|z| > 3·Z_MAX). Seeds are fixed, so outcomes are deterministic.

Reference values (docs/qjl.md, "SRHT"): an SRHT row is a Rademacher vector, so the
estimate is unbiased, with the orthogonal constant 1/(m·√d·E|u₁|), on average over a
uniformly random orientation R of the pair (S·R is √d times rows of a Haar matrix), and
its variance over (R, sketch) is the orthogonal closed form for d a power of two and
m ≤ d. For the fixed key k = e₁ every row gives ⟨s, q⟩·sign(s₁) with mean q₁ exactly,
so the estimate's mean is q₁ / (√d·E|u₁|) (≈ √(π/2) q₁: +25% at d = 16).
The Gaussian bound (π/(2m))‖q‖²‖k‖² is the one TurboQuant states for m = d (Zandieh et al.
2025, Lemma 4); QJL's Lemma 3.2 (Zandieh, Daliri, Han 2024) is the estimator's unbiasedness.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _mc_checks import Z_MAX, haar, mean_z, var_z

from kvstats._checks import replicate_scale
from kvstats.quant.qjl import qjl_encode, qjl_scores
from kvstats.quant.rotation import hadamard
from kvstats.quant.sketch import SKETCHES, make_sketch
from kvstats.theory import qjl_variance, sphere_abs_moment

R = {"ci": 6000, "full": 60000}[replicate_scale()]


def estimates(sketch, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """QJL estimates ``(R, pairs)`` of ⟨q_i, k_i⟩ with exact (float64) norms."""
    est = qjl_scores(sketch, q, qjl_encode(sketch, k, norm_dtype=np.float64))
    return np.diagonal(est, axis1=-2, axis2=-1)


def pairs(d: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Query/key pairs: parallel, orthogonal, partly aligned, random."""
    rng = np.random.default_rng(seed)
    k, q = rng.standard_normal((4, d)), rng.standard_normal((4, d))
    q[0] = 0.7 * k[0]
    q[1] -= (q[1] @ k[1]) / (k[1] @ k[1]) * k[1]
    q[2] = 0.5 * k[2] + 0.3 * rng.standard_normal(d)
    return q, k


# --------------------------------------------------------------------------- structure
@pytest.mark.parametrize("m,d,draws", [(128, 128, ()), (256, 128, (3,)), (200, 96, (2, 3)),
                                       (50, 128, 4), (1, 5, ())])
def test_srht_fast_projection_equals_the_matrix(m, d, draws):
    s = make_sketch("srht", m, d, seed=0, draws=draws)
    x = np.random.default_rng(1).standard_normal(s.draws + (7, d))
    assert s.matrix.shape == s.draws + (m, d)
    np.testing.assert_allclose(s.project(x), x @ np.swapaxes(s.matrix, -1, -2), atol=1e-12)
    assert s.project(x.astype(np.float32)).dtype == np.float32
    # every kind projects the same way through its matrix
    g = make_sketch("gaussian", m, d, seed=0, draws=draws)
    np.testing.assert_allclose(g.project(x), x @ np.swapaxes(g.matrix, -1, -2), atol=1e-12)


def test_srht_rows_are_signed_hadamard_rows():
    d = 64
    s = make_sketch("srht", 2 * d + 24, d, seed=3)
    h = hadamard(d)
    assert set(np.unique(s.matrix)) == {-1.0, 1.0}
    for b in range(2):  # full blocks: every Hadamard row, times the block's signs
        block = s.matrix[b * d:(b + 1) * d]
        np.testing.assert_array_equal(block, h * s.signs[b])
        np.testing.assert_allclose(block @ block.T, d * np.eye(d))
    assert not np.array_equal(s.signs[0], s.signs[1])  # independent signs per block
    last = s.matrix[2 * d:]
    assert len(set(s.rows.tolist())) == 24  # sampled without replacement
    np.testing.assert_array_equal(last, h[s.rows] * s.signs[2])
    # non-power-of-two d: rows of H of order next_pow2(d), first d columns; norm sqrt(d)
    t = make_sketch("srht", 100, 96, seed=4)
    np.testing.assert_allclose((t.matrix ** 2).sum(-1), 96.0)


def test_srht_signs_are_fair_coins_and_rows_uniform():
    """The sign of every coordinate of every block is +1 or -1 with probability 1/2
    (exact two-sided binomial test, p > 1e-4 at a fixed seed; a coin of 0.6 gives
    p < 1e-100 on these 400,000 signs), and the partial block's rows are a uniform sample
    of the d_pad Hadamard rows (each row's count against Binomial(draws, m_last/d_pad))."""
    from scipy import stats

    d, m, draws = 64, 3 * 64 + 20, 1600
    s = make_sketch("srht", m, d, seed=11, draws=draws)
    negative = int(np.sum(s.signs < 0))
    assert stats.binomtest(negative, s.signs.size, 0.5).pvalue > 1e-4
    assert stats.binomtest(int(0.6 * s.signs.size), s.signs.size, 0.5).pvalue < 1e-100  # power
    counts = np.bincount(s.rows.ravel(), minlength=d)
    assert counts.sum() == draws * 20
    p_rows = stats.binom(draws, 20 / d)
    tail = np.minimum(p_rows.cdf(counts), p_rows.sf(counts - 1))
    assert 2 * tail.min() * d > 1e-4                               # Bonferroni over the 64 rows


def test_srht_constant_is_the_orthogonal_one():
    for m, d in [(16, 16), (40, 16), (7, 64), (100, 96)]:
        assert make_sketch("srht", m, d).scale == pytest.approx(
            1 / (m * math.sqrt(d) * sphere_abs_moment(d)), rel=1e-15)
        assert make_sketch("srht", m, d).scale == make_sketch("orthogonal", m, d).scale


def test_srht_bad_input():
    s = make_sketch("srht", 16, 16)
    with pytest.raises(ValueError, match="last dimension 16"):
        s.project(np.ones((2, 8)))
    with pytest.raises(ValueError, match="kind"):
        make_sketch("hadamard", 16, 16)


# --------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("m", [8, 16, 32])  # row sampling, m = d, two blocks
def test_srht_unbiased_over_orientation_with_orthogonal_variance(m):
    d = 16
    q, k = pairs(d)
    rot = haar(np.random.default_rng(7), R, d)                   # (R, d, d)
    s = make_sketch("srht", m, d, seed=8, draws=R)
    qr, kr = q @ np.swapaxes(rot, -1, -2), k @ np.swapaxes(rot, -1, -2)   # (R, 4, d)
    est = _pairwise(s, qr, kr)
    assert np.abs(mean_z(est, (q * k).sum(-1))).max() < Z_MAX
    if m <= d:  # exact closed form (S·R is √d times m rows of a Haar matrix)
        assert np.abs(var_z(est, qjl_variance("srht", m, q, k))).max() < Z_MAX
    # power: the Gaussian closed form is rejected (the orthogonal one is ~0.35× of it)
    assert np.abs(var_z(est, qjl_variance("gaussian", m, q, k))).min() > 3 * Z_MAX


def _pairwise(s, qr: np.ndarray, kr: np.ndarray) -> np.ndarray:
    """Estimates ``(R, 4)`` of the rotated pairs (one sketch per replicate, all pairs)."""
    sq, sk = s.project(qr), s.project(kr)                        # (R, 4, m)
    return s.scale * np.linalg.norm(kr, axis=-1) * (sq * np.where(sk >= 0, 1.0, -1.0)).sum(-1)


def test_srht_is_biased_for_a_spiky_fixed_key():
    # k = e1: the mean is q1/(√d E|u1|) exactly (module docstring); the unbiasedness test
    # must reject ⟨q, k⟩ = q1 there, and accept the exact biased mean. m = 8 < d samples
    # rows (at m = d the rows are orthogonal and the estimate is c·d·q1·‖k‖ for every
    # sketch: no variance at all).
    d, m = 16, 8
    q = np.random.default_rng(2).standard_normal((1, d)) + np.eye(d)[0]
    k = np.eye(d)[:1] * 3.0
    s = make_sketch("srht", m, d, seed=9, draws=R)
    est = estimates(s, q, k)[:, 0]
    truth = float(q[0] @ k[0])
    assert abs(mean_z(est, truth)) > 3 * Z_MAX
    assert abs(mean_z(est, truth / (math.sqrt(d) * sphere_abs_moment(d)))) < Z_MAX
    # the exact kinds are unbiased on the same pair
    for kind in ("gaussian", "orthogonal"):
        e = estimates(make_sketch(kind, m, d, seed=9, draws=R), q, k)[:, 0]
        assert abs(mean_z(e, truth)) < Z_MAX


@pytest.mark.parametrize("kind", SKETCHES)
@pytest.mark.parametrize("m", [16, 32])
def test_variance_within_the_qjl_gaussian_bound(kind, m):
    # Var ≤ (π/(2m))‖q‖²‖k‖² (TurboQuant Lemma 4's bound) for random Gaussian pairs, one-sided
    d = 16
    q, k = pairs(d, seed=3)
    s = make_sketch(kind, m, d, seed=10, draws=R)
    est = estimates(s, q, k)
    bound = math.pi / (2 * m) * (q * q).sum(-1) * (k * k).sum(-1)
    assert var_z(est, bound).max() < Z_MAX
    # power: a bound 3× smaller than the Gaussian one is violated by the Gaussian sketch
    if kind == "gaussian":
        assert var_z(est, bound / 3).max() > 3 * Z_MAX


# --------------------------------------------------------------------------- fast paths
@pytest.mark.parametrize("m,d,draws", [(128, 128, ()), (1024, 1024, (2,)), (200, 96, (2, 3)),
                                       (50, 128, 4), (300, 128, ())])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_srht_transpose_of_signs_is_exact(m, d, draws, dtype):
    """``Sᵀ y`` for ±1 ``y`` by the fast transform: integer partial sums, so it equals
    the product with the materialised matrix bit for bit."""
    s = make_sketch("srht", m, d, seed=2, draws=draws)
    y = np.where(np.random.default_rng(3).random(s.draws + (9, m)) < 0.5, -1.0, 1.0).astype(dtype)
    fast = s.project_t(y)
    assert fast.dtype == dtype and fast.shape == s.draws + (9, d)
    np.testing.assert_array_equal(fast, y @ s.matrix.astype(dtype))
    g = make_sketch("gaussian", m, d, seed=2, draws=draws)  # dense kinds: the product itself
    np.testing.assert_array_equal(g.project_t(y), y @ g.matrix.astype(dtype))
    with pytest.raises(ValueError, match="last dimension"):
        s.project_t(y[..., :-1])


def test_srht_float32_projection_and_signs_agree_with_the_matrix():
    """float32 ``S x`` by the fast transform differs from the dense product only by
    rounding (another order of the same sums): within a few ulps of ‖x‖·√d, and a stored
    sign differs only where the dense value is that close to 0."""
    from kvstats.quant.qjl import _sign_bits

    d = 1024
    s = make_sketch("srht", d, d, seed=5, draws=2)
    x = np.random.default_rng(6).standard_normal((2, 512, d)).astype(np.float32)
    dense = x @ np.swapaxes(s.matrix, -1, -2).astype(np.float32)
    fast = s.project(x)
    tol = 64 * np.finfo(np.float32).eps * np.linalg.norm(x, axis=-1, keepdims=True) * math.sqrt(d)
    assert np.all(np.abs(fast - dense) <= tol)
    flipped = _sign_bits(s, x) != (dense >= 0)
    assert np.all(np.abs(dense[flipped]) <= tol.repeat(d, -1)[flipped])
    assert flipped.mean() < 1e-4


def test_srht_matrix_is_built_on_demand():
    s = make_sketch("srht", 64, 48, seed=1, draws=3)
    assert s.dense is None and "matrix" not in vars(s)   # coding never needs it
    assert s.matrix.shape == (3, 64, 48) and not s.matrix.flags.writeable
    assert s.matrix is s.matrix                          # built once


@pytest.mark.parametrize("kind", ["srht", "gaussian"])
def test_add_reconstruction_equals_the_whole_array_steps(kind):
    """`_add_reconstruction` (cache-sized pieces for srht) equals signs, then ±1, then
    `_reconstruct`, on a batch of draws and on a shared sketch."""
    from kvstats.quant.qjl import _add_reconstruction, _pm_from_bits, _reconstruct, _sign_bits

    d = 256
    rng = np.random.default_rng(8)
    # draws broadcast against a longer batch (2, 3): entry (i, j) uses draw j
    for draws, shape in (((3,), (3, 700, d)), ((), (2, 300, d)), ((3,), (2, 3, 50, d))):
        s = make_sketch(kind, d, d, seed=4, draws=draws)
        x = rng.standard_normal(shape).astype(np.float32)
        norms = np.linalg.norm(x, axis=-1).astype(np.float16)
        base = rng.standard_normal(shape).astype(np.float32)
        want = base + _reconstruct(s, _pm_from_bits(_sign_bits(s, x), np.float32), norms, np.float32)
        got = base.copy()
        _add_reconstruction(s, x, norms, got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("m, d", [(256, 256), (1024, 1024), (600, 256), (100, 96), (128, 96)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_residual_reconstruction_equals_residual_norms_then_reconstruction(m, d, dtype):
    """`_add_residual_reconstruction` (residual, stored norms and both srht transforms
    piece by piece; one block of m = d_pad = d rows directly) equals ``r = x - out``,
    `_store_norms` and `_add_reconstruction` bit for bit: one block, several, a partial
    last block, a padded d, shared and batched draws."""
    from kvstats.quant.qjl import _add_reconstruction, _add_residual_reconstruction, _store_norms

    rng = np.random.default_rng(m + d)
    for draws, shape in (((3,), (3, 300, d)), ((), (130, d)), ((2, 2), (2, 2, 70, d))):
        s = make_sketch("srht", m, d, seed=5, draws=draws)
        x = rng.standard_normal(shape).astype(dtype)
        base = (x + 0.1 * rng.standard_normal(shape)).astype(dtype)
        x[..., 3, :] = base[..., 3, :]  # a zero residual: norm 0, nothing added
        want = base.copy()
        r = x - want
        _add_reconstruction(s, r, _store_norms(r, np.dtype(np.float16), "V"), want)
        got = base.copy()
        _add_residual_reconstruction(s, x, got, np.dtype(np.float16), "V")
        np.testing.assert_array_equal(got, want)


def test_residual_reconstruction_norm_errors_and_warnings_as_store_norms():
    """The norms are range-checked as `_store_norms` checks them: an overflow of the
    stored dtype raises the same error, norms lost to underflow warn the same way."""
    from kvstats.quant.qjl import _add_residual_reconstruction, _store_norms

    s = make_sketch("srht", 64, 64, seed=1)
    x = np.zeros((200, 64))
    x[7, 0], x[150, 3] = 1e6, 1e-9  # one norm above float16's range, one below its subnormals
    with pytest.raises(ValueError) as want:
        _store_norms(x, np.dtype(np.float16), "V (residual)")
    with pytest.raises(ValueError) as got:
        _add_residual_reconstruction(s, x, np.zeros_like(x), np.dtype(np.float16), "V (residual)")
    assert str(got.value) == str(want.value) and "above the largest float16" in str(got.value)
    x[7, 0] = 1.0
    with pytest.warns(UserWarning) as want_w:
        _store_norms(x, np.dtype(np.float16), "V (residual)")
    with pytest.warns(UserWarning) as got_w:
        _add_residual_reconstruction(s, x, np.zeros_like(x), np.dtype(np.float16), "V (residual)")
    assert [str(w.message) for w in got_w] == [str(w.message) for w in want_w]


def test_sketch_matrix_keyword_replaces_the_matrix():
    """``dataclasses.replace(sketch, matrix=S)`` (the field's earlier name) sets the dense
    matrix, and the coders then multiply by it, for srht too."""
    import dataclasses

    from kvstats.quant.qjl import _sign_bits

    S = np.random.default_rng(0).integers(-2, 3, size=(16, 8)).astype(np.float64)
    x = np.random.default_rng(1).standard_normal((5, 8))
    for kind in ("gaussian", "srht"):
        sk = dataclasses.replace(make_sketch(kind, 16, 8, seed=0), matrix=S)
        assert sk.matrix is S and sk.dense is S
        np.testing.assert_array_equal(sk.project(x), x @ S.T)
        np.testing.assert_array_equal(_sign_bits(sk, x), x @ S.T >= 0)
    with pytest.raises(TypeError, match="scale"):
        type(sk)("gaussian", 16, 8, (), S)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,d,draws", [(64, 64, ()), (200, 96, (3,)), (40, 48, (2, 2)), (300, 200, ())])
def test_srht_signs_held_in_int8_project_bit_for_bit(dtype, m, d, draws):
    # +-1 is exact in int8 and every use casts the signs to the input's dtype (or
    # multiplies them into float64 Hadamard rows): the same numbers for either dtype
    # (checked by mutation: signs held as 0/1 or uint8 fail here)
    s = make_sketch("srht", m, d, seed=3, draws=draws)
    s8 = s.held_as(dtype)
    assert s8.signs.dtype == np.int8 and s.signs.dtype == np.float64 and s8.held_as(np.float64) is s8
    assert s8.signs.nbytes * 8 == s.signs.nbytes and not s8.signs.flags.writeable
    if s.rows is not None:  # a partial last block: its sampled rows as uint8 (d_pad <= 256)
        assert s8.rows.dtype == np.uint8 and np.array_equal(s8.rows, s.rows)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(draws + (7, d)).astype(dtype)
    y = np.sign(rng.standard_normal(draws + (7, m))).astype(dtype)
    np.testing.assert_array_equal(s8.project(x), s.project(x))
    np.testing.assert_array_equal(s8.project_t(y), s.project_t(y))
    np.testing.assert_array_equal(s8.project_t(x @ np.swapaxes(s.matrix, -1, -2)),
                                  s.project_t(x @ np.swapaxes(s.matrix, -1, -2)))
    np.testing.assert_array_equal(s8.matrix, s.matrix)
    assert s8.matrix.dtype == np.float64


def test_dense_sketch_held_in_float32_and_checks_dtype():
    s = make_sketch("gaussian", 32, 16, seed=0)
    s32 = s.held_as(np.float32)
    assert s32.dense.dtype == np.float32 and s.dense.dtype == np.float64 and s32.signs is None
    assert not s32.dense.flags.writeable and s.held_as("float64") is s
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_array_equal(s32.project(x), s.project(x))
    with pytest.raises(ValueError, match="dtype must be one of .*float16"):
        s.held_as(np.float16)
