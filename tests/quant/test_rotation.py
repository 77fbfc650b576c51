"""Tests for kvstats.quant.rotation and kvstats.quant.walsh_hadamard: exactness,
orthogonality, draws, and the sphere law."""

import numpy as np
import pytest
from scipy import stats

from kvstats.quant.rotation import (ROTATIONS, Rotation, fwht, hadamard, make_rotation,
                                    next_pow2, normalize_draws)


def sphere_coordinate(d):
    """One coordinate of a uniform point on S^{d-1}: (X+1)/2 ~ Beta((d-1)/2, (d-1)/2)."""
    return stats.beta((d - 1) / 2, (d - 1) / 2, loc=-1, scale=2)


# --- Hadamard and the fast transform ---------------------------------------------------

def test_the_transform_s_names_read_from_rotation_are_its_own():
    """kvstats.quant.walsh_hadamard is the transform's home; sketch, qjl, mse, prod and
    mse_kernels read its names from kvstats.quant.rotation, where they must be the same."""
    from kvstats.quant import rotation, walsh_hadamard

    names = ["fwht", "hadamard", "next_pow2", "_fwht", "_fwht_rows", "_fwht_piece",
             "_hadamard_cached", "_butterfly_rows", "_FWHT_BLOCK", "_BLAS_ROWS", "_FWHT_PIECE",
             "_BUTTERFLY_CONTIGUOUS"]
    assert all(getattr(rotation, n) is getattr(walsh_hadamard, n) for n in names)
    assert set(walsh_hadamard.__all__) <= set(rotation.__all__)


@pytest.mark.parametrize("d", [1, 2, 4, 8, 64, 128, 256, 1024])
def test_hadamard_is_sylvester_and_orthogonal(d):
    h = hadamard(d)
    assert set(np.unique(h)) <= {-1.0, 1.0}
    np.testing.assert_array_equal(h @ h.T, d * np.eye(d))
    np.testing.assert_array_equal(h, h.T)
    if d >= 2:  # Sylvester recursion H_d = [[H, H], [H, -H]]
        g = hadamard(d // 2)
        np.testing.assert_array_equal(h, np.block([[g, g], [g, -g]]))


@pytest.mark.parametrize("d", [1, 2, 8, 64, 128, 512, 1024])
@pytest.mark.parametrize("block", [1, 2, 32, 128])
def test_fwht_equals_dense_product_float64(d, block):
    x = np.random.default_rng(d).standard_normal((3, 5, d))
    np.testing.assert_allclose(fwht(x, block=block), x @ hadamard(d), rtol=0, atol=1e-12)


def test_fwht_keeps_float32_and_does_not_modify_input():
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    x0 = x.copy()
    y = fwht(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_allclose(y, x.astype(np.float64) @ hadamard(64), rtol=0, atol=1e-4)
    assert fwht(np.arange(4)).dtype == np.float64  # integers become float64


def test_fwht_bad_input():
    with pytest.raises(ValueError, match="power of two"):
        fwht(np.ones(6))
    with pytest.raises(ValueError, match="finite"):
        fwht(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="block"):
        fwht(np.ones(8), block=3)
    with pytest.raises(TypeError, match="x must be a real numeric"):
        fwht(np.array(["a", "b"]))


# --- rotations ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ROTATIONS)
@pytest.mark.parametrize("d", [5, 64, 96, 128])
def test_rotation_is_an_isometry_and_matches_its_matrix(kind, d):
    r = make_rotation(kind, d, seed=3, draws=4)
    m = r.matrix()
    assert m.shape == (4, r.out_dim, d)
    # columns orthonormal: R^T R = I_d (for padded Hadamard the map is an isometry
    # R^d -> R^{d_pad}); for square maps also R R^T = I
    np.testing.assert_allclose(np.swapaxes(m, -1, -2) @ m, np.broadcast_to(np.eye(d), (4, d, d)),
                               rtol=0, atol=1e-13)
    if r.out_dim == d:
        np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(d), (4, d, d)),
                                   rtol=0, atol=1e-13)
    x = np.random.default_rng(1).standard_normal((4, 7, d))
    y = r.apply(x)
    np.testing.assert_allclose(y, np.einsum("tij,tnj->tni", m, x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-13)
    np.testing.assert_allclose(r.inverse(y), x, rtol=0, atol=1e-12)


def test_padding_rule():
    assert [next_pow2(d) for d in (1, 2, 3, 64, 65, 96, 128)] == [1, 2, 4, 64, 128, 128, 128]
    assert make_rotation("hadamard", 96).out_dim == 128
    assert make_rotation("haar", 96).out_dim == 96
    assert make_rotation("identity", 96).out_dim == 96


@pytest.mark.parametrize("kind", ROTATIONS)
def test_float32_in_float32_out(kind):
    r = make_rotation(kind, 96, seed=0)
    x = np.random.default_rng(0).standard_normal((10, 96)).astype(np.float32)
    y = r.apply(x)
    assert y.dtype == np.float32 and r.inverse(y).dtype == np.float32
    np.testing.assert_allclose(r.inverse(y), x, atol=1e-5)


@pytest.mark.parametrize("kind", ROTATIONS)
def test_draws_batch_equals_loop_over_draws(kind):
    """Reference (one rotation per draw, plain loop) vs the batched fast path."""
    d = 24
    r = make_rotation(kind, d, seed=11, draws=(2, 3))
    x = np.random.default_rng(2).standard_normal((2, 3, 5, d))
    y = r.apply(x)
    assert y.shape == (2, 3, 5, r.out_dim)
    for i in range(2):
        for j in range(3):
            one = r.draw((i, j))
            np.testing.assert_allclose(one.apply(x[i, j]), y[i, j], rtol=0, atol=1e-13)
            np.testing.assert_allclose(one.inverse(y[i, j]), x[i, j], rtol=0, atol=1e-12)
    assert np.array_equal(r.draw(4).matrix(), r.draw((1, 1)).matrix())  # flat index


def test_batch_broadcasts_against_draws():
    r = make_rotation("hadamard", 16, seed=0, draws=6)
    x = np.random.default_rng(0).standard_normal((9, 16))  # batch = (): shared by all draws
    y = r.apply(x)
    assert y.shape == (6, 9, 16)
    np.testing.assert_allclose(y[4], r.draw(4).apply(x), atol=1e-14)
    with pytest.raises(ValueError, match=r"\(\*batch, n, 16\)"):
        r.apply(np.ones(16))  # no token axis with draws != ()


def test_seeds():
    a = make_rotation("hadamard", 128, seed=5, draws=3)
    b = make_rotation("hadamard", 128, seed=5, draws=3)
    c = make_rotation("hadamard", 128, seed=6, draws=3)
    assert np.array_equal(a.signs, b.signs)
    assert not np.array_equal(a.signs, c.signs)
    # independent draws differ from each other; signs are fair coins
    assert not np.array_equal(a.signs[0], a.signs[1])
    # different seeds: sign agreement between the two streams is Binomial(n, 1/2)
    u = make_rotation("hadamard", 128, seed=5, draws=512).signs
    v = make_rotation("hadamard", 128, seed=6, draws=512).signs
    assert stats.binomtest(int((u == v).sum()), u.size, 0.5).pvalue > 1e-4
    h1 = make_rotation("haar", 8, seed=1).matrix()
    assert np.array_equal(h1, make_rotation("haar", 8, seed=1).matrix())
    assert not np.allclose(h1, make_rotation("haar", 8, seed=2).matrix())


def test_signs_are_fair_and_independent():
    """Binomial test on 2**17 signs: P(+1) = 1/2 (two-sided exact test, alpha = 1e-4)."""
    s = make_rotation("hadamard", 128, seed=0, draws=1024).signs
    k = int((s > 0).sum())
    assert stats.binomtest(k, s.size, 0.5).pvalue > 1e-4
    # lag-1 agreement within a draw is also Binomial(n, 1/2) under independence
    agree = int((s[:, 1:] == s[:, :-1]).sum())
    assert stats.binomtest(agree, s[:, 1:].size, 0.5).pvalue > 1e-4


def test_draws_are_independent_of_each_other():
    """Across draws (same coordinate, consecutive draws) the Hadamard signs agree as fair
    independent coins, Binomial(n, 1/2) (alpha = 1e-4); the Haar matrices' entries at the
    same place are uncorrelated: E[Q_i Q_j] = 0 for independent Haar Q (each entry has mean 0,
    variance 1/d), a z-test |z| < 4.5. A rotation whose draws repeat one draw (or copy a
    neighbour) fails both (checked by mutation)."""
    s = make_rotation("hadamard", 64, seed=1, draws=(32, 64)).signs.reshape(-1, 64)
    agree = int((s[1:] == s[:-1]).sum())
    assert stats.binomtest(agree, s[1:].size, 0.5).pvalue > 1e-4
    q = make_rotation("haar", 8, seed=1, draws=4000).orthogonal.reshape(4000, -1) * np.sqrt(8)
    prod = q[1:] * q[:-1]                       # (3999, 64): each entry mean 0, variance ~1
    z = prod.mean(axis=0) / (prod.std(axis=0, ddof=1) / np.sqrt(prod.shape[0]))
    assert np.max(np.abs(z)) < 4.5


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        make_rotation("dct", 8)
    with pytest.raises(ValueError, match="dim must be an integer in"):
        make_rotation("haar", 0)
    with pytest.raises(TypeError, match="draws"):
        make_rotation("haar", 4, draws="3")
    with pytest.raises(ValueError, match=r"draws\[0\]"):
        make_rotation("haar", 4, draws=(0,))
    r = make_rotation("hadamard", 6)
    with pytest.raises(ValueError, match="last axis of length 6"):
        r.apply(np.ones(8))
    with pytest.raises(ValueError, match="last axis of length 8"):
        r.inverse(np.ones(6))
    with pytest.raises(ValueError, match="finite"):
        r.apply(np.full(6, np.inf))
    with pytest.raises(ValueError, match="draws != ()"):
        r.draw(0)
    assert normalize_draws([2, 3]) == (2, 3)
    assert isinstance(r, Rotation)


# --- the sphere law after rotation (statistical) -------------------------------------------
# One coordinate per independent draw (rotation and input both fresh), so the KS sample is
# i.i.d. Reference: the exact law of a coordinate of a uniform point on S^{d-1}.

D = 64
N_KS = 20_000  # KS at alpha = 1e-3; power shown below by rejecting a wrong dimension


def _rotated_coordinate(kind, x, seed):
    """Coordinate 0 and 5 of the rotated unit vectors x / ||x||, each input its own draw."""
    r = make_rotation(kind, x.shape[-1], seed=seed, draws=x.shape[0])
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return r.apply(u[:, None, :])[:, 0, [0, 5]]


def test_gaussian_inputs_after_hadamard_follow_sphere_law():
    x = np.random.default_rng(10).standard_normal((N_KS, D))
    y = _rotated_coordinate("hadamard", x, seed=20)
    for j in range(2):
        assert stats.kstest(y[:, j], sphere_coordinate(D).cdf).pvalue > 1e-3
    # power at this sample size: the law of a neighbouring dimension is rejected
    assert stats.kstest(y[:, 0], sphere_coordinate(D // 2).cdf).pvalue < 1e-6


def test_padded_dimension_coordinate_law():
    """d = 48 padded to 64: a row of the padded map restricted to the first 48 columns has
    norm sqrt(48/64), so a coordinate of R u is EXACTLY sqrt(48/64) times a sphere
    coordinate of dimension 48 (variance 1/64). The sphere law of dimension 64 (same
    variance, which the codebook uses) is close: not rejected at this n either."""
    x = np.random.default_rng(12).standard_normal((N_KS, 48))
    y = _rotated_coordinate("hadamard", x, seed=21)[:, 0]
    exact = sphere_coordinate(48)
    assert stats.kstest(y / np.sqrt(48 / 64), exact.cdf).pvalue > 1e-3
    assert stats.kstest(y, sphere_coordinate(64).cdf).pvalue > 1e-3
    assert stats.kstest(y, exact.cdf).pvalue < 1e-6  # the unscaled law has variance 1/48


def _moments_match(y, d):
    """Mean 0 and variance 1/d hold for ANY unit input under a random-sign Hadamard round
    (E[y_i] = 0 and E[y_i^2] = sum_j u_j^2 / d exactly); checked within 4 standard errors."""
    n = y.size
    assert abs(y.mean()) <= 4 * y.std() / np.sqrt(n)
    sq = y * y
    # (+ rounding slack: for one-hot inputs y^2 = 1/d exactly and the standard error is 0)
    assert abs(sq.mean() - 1 / d) <= 4 * sq.std() / np.sqrt(n) + 1e-15


def test_one_hot_inputs_single_hadamard_round_is_not_the_sphere_law():
    """Known limitation: H D e_k / sqrt(d) has every coordinate exactly +-1/sqrt(d)."""
    x = np.zeros((N_KS, D))
    x[np.arange(N_KS), np.random.default_rng(0).integers(0, D, N_KS)] = 1.0
    y = _rotated_coordinate("hadamard", x, seed=22)
    np.testing.assert_allclose(np.abs(y), 1 / np.sqrt(D), rtol=1e-14)
    _moments_match(y[:, 0], D)
    assert stats.kstest(y[:, 0], sphere_coordinate(D).cdf).pvalue < 1e-6
    # a Haar rotation maps any fixed unit vector to a uniform point: the law is exact
    n_haar = 3000
    z = _rotated_coordinate("haar", x[:n_haar], seed=23)
    for j in range(2):
        assert stats.kstest(z[:, j], sphere_coordinate(D).cdf).pvalue > 1e-3


def test_heavy_tailed_inputs_single_hadamard_round():
    """Student-t (nu = 1.5) inputs: u = x/||x|| is dominated by a few coordinates, so one
    randomized Hadamard round gives a Rademacher sum with few large weights: correct mean
    and variance but lighter tails than the sphere law, rejected by KS at this n. With
    nu = 5 the inputs are spread enough that KS does not reject. A Haar rotation is exact."""
    rng = np.random.default_rng(13)
    x = rng.standard_t(1.5, (N_KS, D))
    y = _rotated_coordinate("hadamard", x, seed=24)[:, 0]
    _moments_match(y, D)
    assert stats.kstest(y, sphere_coordinate(D).cdf).pvalue < 1e-6
    assert stats.kurtosis(y) < stats.kurtosis(sphere_coordinate(D).rvs(N_KS, random_state=1))
    x5 = rng.standard_t(5.0, (N_KS, D))
    y5 = _rotated_coordinate("hadamard", x5, seed=25)[:, 0]
    assert stats.kstest(y5, sphere_coordinate(D).cdf).pvalue > 1e-3
    z = _rotated_coordinate("haar", x[:3000], seed=26)[:, 0]
    assert stats.kstest(z, sphere_coordinate(D).cdf).pvalue > 1e-3


@pytest.mark.parametrize("kind", ROTATIONS)
@pytest.mark.parametrize("d", [12, 16])
def test_inverse_broadcasts_shared_input_against_draws(kind, d):
    r = make_rotation(kind, d, seed=0, draws=3)
    y = np.random.default_rng(0).standard_normal((5, r.out_dim))  # shared by all draws
    x = r.inverse(y)
    assert x.shape == (3, 5, d)
    for i in range(3):
        np.testing.assert_allclose(x[i], r.draw(i).inverse(y), rtol=0, atol=1e-13)


# --- the Haar rotation is Haar (statistical guards of the QR sign fix) ---------------------
# QR of a Gaussian matrix is Haar only after each column of Q is multiplied by the sign of
# R's diagonal (Mezzadri 2007); without it LAPACK's Q has Q[0, 0] <= 0 always, which the
# sphere-law tests above cannot see (their inputs are random, so a fixed column is rare).
# Under Haar: tr(Q) has mean 0 and variance exactly 1 (d >= 2), and Q u, for a FIXED unit
# u, is uniform on the sphere. One seed, n independent draws; for a fresh seed the false
# alarm rate of each test is <= 2e-3 (|z| > 4.5: 7e-6; two KS tests at 1e-3 each).
N_HAAR = 4000


def assert_haar(q, seed):
    """``q``: ``(n, d, d)`` independent draws of a matrix claimed to be Haar on O(d)."""
    n, d = q.shape[0], q.shape[-1]
    z = np.trace(q, axis1=-2, axis2=-1).mean() * np.sqrt(n)  # Var tr(Q) = 1
    assert abs(z) < 4.5, f"mean of tr(Q) is {z:.1f} standard errors from 0"
    u = np.random.default_rng(seed).standard_normal(d)
    u /= np.linalg.norm(u)
    law = sphere_coordinate(d)
    assert stats.kstest(q[:, 0, 0], law.cdf).pvalue > 1e-3  # Q e_0, coordinate 0
    assert stats.kstest((q @ u)[:, -1], law.cdf).pvalue > 1e-3  # Q u, last coordinate


def test_sphere_coordinate_reference_is_the_theory_density():
    from kvstats.theory import sphere_coordinate_pdf

    x = np.linspace(-0.95, 0.95, 9)
    for d in (3, 6, 64):
        np.testing.assert_allclose(sphere_coordinate(d).pdf(x), sphere_coordinate_pdf(x, d),
                                   rtol=1e-10)


@pytest.mark.parametrize("d", [2, 6])
def test_haar_rotation_is_haar_distributed(d):
    r = make_rotation("haar", d, seed=31, draws=N_HAAR)
    assert_haar(r.orthogonal, seed=d)
    # apply() is the same matrix: a fixed unit vector rotated by every draw
    e0 = np.eye(d)[:1]
    np.testing.assert_allclose(r.apply(e0)[:, 0, :], r.orthogonal[:, :, 0], rtol=0, atol=1e-15)


def test_haar_guard_has_power_without_the_sign_fix():
    """The guard rejects LAPACK's QR without the sign fix, the bug it is there to catch."""
    q, _ = np.linalg.qr(np.random.default_rng(32).standard_normal((N_HAAR, 6, 6)))
    with pytest.raises(AssertionError):
        assert_haar(q, seed=6)


@pytest.mark.parametrize("kind", ROTATIONS)
def test_flat_and_take_select_the_draws_of_a_batch(kind):
    """_flat(batch) broadcasts the draws to a batch and flattens it in C order;
    _take(rows) slices it: row i of the flattened batch is draw(unravel(i)) of the
    original (for a broadcast axis, the one draw every batch entry shares)."""
    r = make_rotation(kind, 6, seed=2, draws=(3, 1))
    flat = r._flat((3, 4))
    assert flat.draws == (12,)
    part = flat._take(slice(5, 9))
    assert part.draws == (4,)
    x = np.random.default_rng(0).standard_normal((4, 2, 6))
    y = part._apply(x)
    for j, i in enumerate(range(5, 9)):
        one = r.draw((i // 4, 0))
        np.testing.assert_allclose(y[j], one.apply(x[j]), rtol=0, atol=1e-12)


def _fwht_unblocked(x, b=128):
    """The fwht as one BLAS product over every row, then the butterflies (the reference
    the blocked `_fwht` must equal bit for bit at one BLAS thread)."""
    from kvstats.quant.walsh_hadamard import _hadamard_cached

    d = x.shape[-1]
    b = min(b, d)
    y = (x.reshape(-1, b) @ _hadamard_cached(b, x.dtype.name)).reshape(-1, d)
    h = b
    while h < d:
        v = y.reshape(y.shape[0], d // (2 * h), 2, h)
        lo, hi = v[:, :, 0, :], v[:, :, 1, :]
        diff = lo - hi
        lo += hi
        hi[...] = diff
        h *= 2
    return y.reshape(x.shape)


@pytest.mark.parametrize("d", [256, 1024, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_fwht_equals_one_product(d, dtype):
    """`_fwht` runs both stages on cache-sized pieces cut at multiples of `_BLAS_ROWS`
    product rows; the numbers equal one product over every row (odd row counts too)."""
    from threadpoolctl import threadpool_limits

    from kvstats.quant.walsh_hadamard import _FWHT_PIECE, _fwht

    rng = np.random.default_rng(d)
    with threadpool_limits(limits=1, user_api="blas"):
        for rows in (1, 13, 2 * _FWHT_PIECE // d + 7, 3 * 1024 + 5):
            x = (rng.standard_normal((rows, d)) * 3).astype(dtype)
            assert x.size <= _FWHT_PIECE or rows > _FWHT_PIECE // d  # the blocked path runs
            want = _fwht_unblocked(x)
            np.testing.assert_array_equal(_fwht(x), want)
            np.testing.assert_array_equal(_fwht(x[None]), want[None])


@pytest.mark.parametrize("d, b", [(512, 128), (1024, 128), (1024, 64), (2048, 16), (256, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_run_major_butterflies_equal_in_place(d, b, dtype):
    """`_fwht_piece` runs the butterflies on run-major copies (`_butterflies_by_block`)
    for pieces of >= 4 runs and enough rows; the numbers equal the in-place stages of
    the reference bit for bit (a wrong pairing or a swapped sum and difference would
    not), for every block width the rotation and the srht sketch use."""
    from threadpoolctl import threadpool_limits

    from kvstats.quant.walsh_hadamard import _BUTTERFLY_CONTIGUOUS, _fwht_piece

    rng = np.random.default_rng(d + b)
    with threadpool_limits(limits=1, user_api="blas"):
        for rows in (1, 3, _BUTTERFLY_CONTIGUOUS // b, 61):
            x = (rng.standard_normal((rows, d)) * 3).astype(dtype)
            np.testing.assert_array_equal(_fwht_piece(x, b), _fwht_unblocked(x, b))
            out = np.empty_like(x)
            _fwht_piece(x, b, out=out)
            np.testing.assert_array_equal(out, _fwht_unblocked(x, b))


# --- held_as: a Haar matrix held in float32 for float32-only callers (the quantized cache),
# Hadamard signs in int8 ---

@pytest.mark.parametrize("draws,batch", [((), (40,)), ((3,), (1, 3, 40)), ((3,), (2, 3, 1)), ((3,), (2, 1, 7))])
def test_haar_held_in_float32_rotates_float32_bit_for_bit(draws, batch):
    # apply/inverse cast the matrix to the input's dtype: held in float32 it is the same
    # values in the same layout, so the products are the same bits (a matrix rounded any
    # further, e.g. through float16, changes them: checked by mutation)
    r = make_rotation("haar", 64, seed=4, draws=draws)
    r32 = r.held_as(np.float32)
    assert r32.orthogonal.dtype == np.float32 and r.orthogonal.dtype == np.float64  # r unchanged
    assert r32.orthogonal.nbytes * 2 == r.orthogonal.nbytes
    x = np.random.default_rng(0).standard_normal(batch + (64,)).astype(np.float32)
    np.testing.assert_array_equal(r32.apply(x), r.apply(x))
    np.testing.assert_array_equal(r32.inverse(x), r.inverse(x))
    if draws:  # the views MSEQuantizer's chunks rotate by (_flat, then _take) and draw()
        shape = np.broadcast_shapes(batch[:-1], draws)
        xf = np.broadcast_to(x, shape + x.shape[-2:]).reshape((-1,) + x.shape[-2:])
        take, take32 = r._flat(shape)._take(slice(1, 3)), r32._flat(shape)._take(slice(1, 3))
        np.testing.assert_array_equal(take32._apply(xf[1:3]), take._apply(xf[1:3]))
        np.testing.assert_array_equal(take32._inverse(xf[1:3]), take._inverse(xf[1:3]))
        np.testing.assert_array_equal(r32.draw(2).apply(x[0, 0]), r.draw(2).apply(x[0, 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d,draws,batch", [(96, (), (40,)), (128, (3,), (2, 3, 7)), (5, (2, 3), (2, 1, 9))])
def test_hadamard_signs_held_in_int8_rotate_bit_for_bit(dtype, d, draws, batch):
    # +-1 is exact in int8 and every use divides by the float64 sqrt(d_pad) first, so the
    # folded signs are the float64 ones: same bits for float32 and float64 inputs
    # (checked by mutation: signs held as 0/1, or folded in float32, fail here)
    r = make_rotation("hadamard", d, seed=4, draws=draws)
    r8 = r.held_as(dtype)
    assert r8.signs.dtype == np.int8 and r.signs.dtype == np.float64  # r unchanged
    assert r8.signs.nbytes * 8 == r.signs.nbytes and r8.held_as(np.float64) is r8
    rng = np.random.default_rng(0)
    x = rng.standard_normal(batch + (d,)).astype(dtype)
    y = rng.standard_normal(batch + (r.out_dim,)).astype(dtype)
    np.testing.assert_array_equal(r8.apply(x), r.apply(x))
    np.testing.assert_array_equal(r8.inverse(y), r.inverse(y))
    np.testing.assert_array_equal(r8.matrix(), r.matrix())
    if draws:
        shape = np.broadcast_shapes(batch[:-1], draws)
        xf = np.broadcast_to(x, shape + x.shape[-2:]).reshape((-1,) + x.shape[-2:])
        take, take8 = r._flat(shape)._take(slice(1, 3)), r8._flat(shape)._take(slice(1, 3))
        np.testing.assert_array_equal(take8._apply(xf[1:3]), take._apply(xf[1:3]))
        np.testing.assert_array_equal(r8.draw(1).apply(x[0, 0]), r.draw(1).apply(x[0, 0]))


def test_held_as_keeps_what_holds_nothing_and_checks_dtype():
    r = make_rotation("identity", 6, seed=0)
    assert r.held_as(np.float32) is r
    r = make_rotation("haar", 6, seed=0)
    assert r.held_as("float64") is r
    np.testing.assert_array_equal(r.held_as(np.float32).held_as(np.float64).orthogonal,
                                  r.orthogonal.astype(np.float32))
    with pytest.raises(ValueError, match="dtype must be one of .*float16"):
        r.held_as(np.float16)
