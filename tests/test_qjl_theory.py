"""Tests for the QJL sketches' closed forms (kvstats.qjl_theory, re-exported by
kvstats.theory): the Gaussian and orthogonal variances, reconstruction MSEs and residual
inflations, against Monte Carlo over inline sketches and against each other.

The Gaussian sketch is written inline with numpy (and the orthogonal one from inline Haar
matrices) so that these tests check the formulas independently of kvstats.quant; one test
uses kvstats' own SRHT sketch, which has no one-line construction.
"""

import math

import numpy as np
import pytest

from _theory_refs import haar, sphere_abs_mean, within
from kvstats.theory import (qjl_inner_product_variance, qjl_reconstruction_mse, qjl_variance,
                            residual_inflation)


def qjl_estimates(q, k, m, n_sketches, rng):
    """The QJL estimator sqrt(pi/2)/m * ||k|| * <S q, sign(S k)> for n independent S."""
    s = rng.standard_normal((n_sketches, m, q.size))
    return math.sqrt(math.pi / 2) / m * np.linalg.norm(k) * np.einsum(
        "rm,rm->r", s @ q, np.sign(s @ k))


@pytest.mark.parametrize("cos,m", [(0.0, 16), (0.9, 32), (-0.5, 8)])
def test_qjl_variance_matches_monte_carlo(cos, m):
    """Unbiasedness and the exact variance ((pi/2)|q|^2|k|^2 - <q,k>^2)/m over R independent
    Gaussian sketches: mean within 4 SE of <q,k>; sample variance within 4 SE of the
    formula (SE of the variance from the spread of the squared deviations)."""
    d, n = 24, 6000
    rng = np.random.default_rng((round(100 * cos) + 1000, m))
    k = rng.standard_normal(d) * 1.7
    e = rng.standard_normal(d)
    e -= e @ k / (k @ k) * k
    q = 0.8 * (cos * k / np.linalg.norm(k) + math.sqrt(1 - cos ** 2) * e / np.linalg.norm(e))
    z = qjl_estimates(q, k, m, n, rng)
    assert within(z, q @ k)
    sq = (z - q @ k) ** 2  # deviations from the known mean: E[sq] = Var exactly
    var = float(qjl_inner_product_variance(np.linalg.norm(q), np.linalg.norm(k), cos, m))
    assert within(sq, var)
    if abs(cos) > 0.8:  # power: dropping the -<q,k>^2 term is rejected at this n
        assert not within(sq, math.pi / 2 * (q @ q) * (k @ k) / m)


def test_qjl_variance_broadcasts_and_validates():
    v = qjl_inner_product_variance(np.array([1.0, 2.0])[:, None], 1.0, np.array([0.0, 1.0]), 4)
    np.testing.assert_allclose(v, [[math.pi / 8, (math.pi / 2 - 1) / 4],
                                   [math.pi / 2, (math.pi / 2 - 1)]])
    with pytest.raises(ValueError, match=r"cos_qk must be in \[-1, 1\]"):
        qjl_inner_product_variance(1.0, 1.0, 1.5, 4)
    with pytest.raises(ValueError, match=r"cos_qk must be in \[-1, 1\]"):
        qjl_inner_product_variance(1.0, 1.0, -1 - 1e-9, 4)
    with pytest.raises(ValueError, match="q_norm and k_norm must be >= 0"):
        qjl_inner_product_variance(-1.0, 1.0, 0.0, 4)
    with pytest.raises(ValueError, match=r"m must be an integer in \[1, inf\]"):
        qjl_inner_product_variance(1.0, 1.0, 0.0, 0)
    with pytest.raises(ValueError, match="finite"):
        qjl_inner_product_variance(np.nan, 1.0, 0.0, 4)
    # shapes that do not broadcast are named, not left to numpy's operand message
    with pytest.raises(ValueError, match=r"q_norm, k_norm and cos_qk must broadcast together; "
                                         r"received shapes \(3,\), \(4,\) and \(\)"):
        qjl_inner_product_variance(np.ones(3), np.ones(4), 0.5, 8)
    # the vector form names its arguments too
    with pytest.raises(ValueError, match=r"q and k's batch shapes must broadcast; received \(3, 8\) and \(2, 8\)"):
        qjl_variance("orthogonal", 4, np.ones((3, 8)), np.ones((2, 8)))
    with pytest.raises(ValueError, match="q and k must have the same last dimension"):
        qjl_variance("gaussian", 4, np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="kind must be one of"):
        qjl_variance("hadamard", 4, np.ones(3), np.ones(3))


def test_qjl_variance_of_a_vector_with_itself():
    """q = k with the cosine computed in floating point (above 1 by an ulp for about a
    quarter of such vectors, which were refused): the variance is ((π/2) − 1)‖k‖⁴/m,
    as the vector form gives."""
    k = np.random.default_rng(8).standard_normal((400, 64))
    kn = np.linalg.norm(k, axis=1)
    cos = (k * k).sum(1) / (kn * kn)
    assert np.any(cos > 1)
    np.testing.assert_allclose(qjl_inner_product_variance(kn, kn, cos, 16),
                               (math.pi / 2 - 1) * kn ** 4 / 16, rtol=1e-13)
    np.testing.assert_allclose(qjl_inner_product_variance(kn, kn, cos, 16),
                               qjl_variance("gaussian", 16, k, k), rtol=1e-13)
    # within the rounding slack a cosine is read as exactly +-1
    for c in (1.0, -1.0):
        assert qjl_inner_product_variance(2.0, 3.0, c * (1 + 1e-12), 4) == qjl_inner_product_variance(2.0, 3.0, c, 4)


def test_qjl_closed_forms_agree_where_they_overlap():
    """The norms-and-cosine and the vector forms of the Gaussian variance are one formula;
    residual_inflation(d, m) is the Gaussian reconstruction MSE; the kinds with a closed
    form are the sketch kinds."""
    from kvstats.quant.sketch import SKETCHES
    from kvstats.theory import _SKETCH_KINDS

    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 5, 12))
    qn, kn = np.linalg.norm(q, axis=-1), np.linalg.norm(k, axis=-1)
    cos = (q * k).sum(-1) / (qn * kn)
    np.testing.assert_allclose(qjl_inner_product_variance(qn, kn, cos, 7),
                               qjl_variance("gaussian", 7, q, k), rtol=1e-12)
    for d, m in ((32, 32), (96, 128), (5, 3)):
        assert residual_inflation(d, m) == pytest.approx(qjl_reconstruction_mse("gaussian", m, d),
                                                         rel=1e-12)
    assert _SKETCH_KINDS == SKETCHES


@pytest.mark.parametrize("d,m", [(32, 32), (32, 16), (24, 32)])
def test_residual_inflation_matches_monte_carlo(d, m):
    """E[(<q, r_hat> - <q, r>)^2] / E[<q, r>^2] = (pi/2 - 1/d) d/m for r of uniform direction
    (here a uniform unit vector, with a fresh Gaussian sketch per trial); each expectation
    is checked within 4 SE of its closed form. (24, 32) is the padded shape: a residual
    in R^d sketched with m = d_pad rows."""
    n = 20_000
    rng = np.random.default_rng(d + m)
    q = rng.standard_normal(d)
    r = rng.standard_normal((n, d))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    s = rng.standard_normal((n, m, d))
    est = math.sqrt(math.pi / 2) / m * np.einsum("nm,nm->n", s @ q, np.sign(np.einsum("nmd,nd->nm", s, r)))
    proj = r @ q
    assert within(proj ** 2, q @ q / d)
    assert within((est - proj) ** 2, residual_inflation(d, m) * (q @ q) / d)
    assert residual_inflation() == math.pi / 2
    assert residual_inflation(d) == pytest.approx(math.pi / 2 - 1 / d)


@pytest.mark.parametrize("kind", ["orthogonal", "srht"])
@pytest.mark.parametrize("m", [32, 64])
def test_residual_inflation_of_other_sketches_matches_monte_carlo(kind, m):
    """The orthogonal closed form with a² = ‖q‖²/d (docs/qjl.md): q ~ N(0, I) and r a
    uniform unit vector drawn afresh per trial with a fresh sketch (kvstats' own
    make_sketch here: the orthogonal/SRHT rows are not a one-liner), so the pair's
    orientation is uniform, which is what the SRHT value averages over. The Gaussian
    value is rejected (power)."""
    from kvstats.quant.sketch import make_sketch

    d, n = 32, 6000
    rng = np.random.default_rng(m + len(kind))
    q = rng.standard_normal((n, d))
    r = rng.standard_normal((n, d))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    s = make_sketch(kind, m, d, seed=rng, draws=n)
    sq, sr = s.project(q[:, None])[:, 0], s.project(r[:, None])[:, 0]
    est = s.scale * (sq * np.where(sr >= 0, 1.0, -1.0)).sum(-1)
    err2 = (est - (q * r).sum(-1)) ** 2
    assert within(err2, residual_inflation(d, m, kind))  # × E⟨q, r⟩² = E‖q‖²/d = 1
    assert not within(err2, residual_inflation(d, m), z=13.5)
    assert residual_inflation(d, m, "srht") == residual_inflation(d, m, "orthogonal")


@pytest.mark.parametrize("d,m", [(2, 5), (5, 3), (8, 12), (24, 32), (16, 40), (128, 128), (96, 128)])
def test_orthogonal_residual_inflation_is_the_reconstruction_mse(d, m):
    """Two closed forms written apart must agree: for an isotropic q independent of the
    sketch, E⟨q, x̃ − x⟩² = ‖q‖²·E‖x̃ − x‖²/d, so the inner-product inflation (the a², b²
    variance averaged over orientations) equals the relative reconstruction MSE
    (1/(mμ²) + P/m² − 1, counted from pairs of rows), for every block layout. E S² cancels
    in that average (a² = 1/d, b² = 1 − 1/d), so this checks the block layout and the
    d − 1 of E T²; E S² itself is checked at fixed pairs by
    test_orthogonal_qjl_variance_matches_an_inline_haar_sketch."""
    assert residual_inflation(d, m, "orthogonal") == pytest.approx(
        qjl_reconstruction_mse("orthogonal", m, d), rel=1e-12)


@pytest.mark.parametrize("d,m", [(6, 4), (6, 6), (6, 9), (3, 7)])
def test_qjl_reconstruction_mse_matches_inline_sketches(d, m):
    """x̃ = c‖x‖Sᵀsign(Sx) with inline sketches at d not a power of two: Gaussian rows
    (c = √(π/2)/m) and √d times Haar rows in blocks of d (c = 1/(m√d·E|u₁|), E|u₁| from
    scipy): the mean of ‖x̃ − x‖²/‖x‖² over independent sketches within 4 SE of
    qjl_reconstruction_mse (the law does not depend on x's direction: both sketch laws
    are rotation invariant); the other kind's value is rejected (power)."""
    n = 20_000
    rng = np.random.default_rng((d, m, 3))
    x = rng.standard_normal(d) * 2.5
    gauss = rng.standard_normal((n, m, d))
    blocks = [haar(n, d, rng)[:, :rows] for rows in [d] * (m // d) + ([m % d] if m % d else [])]
    orth = math.sqrt(d) * np.concatenate(blocks, axis=1)
    scales = {"gaussian": math.sqrt(math.pi / 2) / m, "orthogonal": 1 / (m * math.sqrt(d) * sphere_abs_mean(d))}
    rel = {}
    for kind, s in (("gaussian", gauss), ("orthogonal", orth)):
        xt = scales[kind] * np.linalg.norm(x) * np.einsum("nmd,nm->nd", s, np.sign(s @ x))
        rel[kind] = ((xt - x) ** 2).sum(1) / (x @ x)
        assert within(rel[kind], qjl_reconstruction_mse(kind, m, d))
    assert not within(rel["orthogonal"], qjl_reconstruction_mse("gaussian", m, d))
    assert not within(rel["gaussian"], qjl_reconstruction_mse("orthogonal", m, d))


def test_one_dimensional_orthogonal_sketch_is_exact():
    """d = 1: rows ±1, sign(s·x)·s·|x| = x for every row, so the orthogonal estimate has no
    error (E|u₁| = 1); the Gaussian one keeps (π/2 − 1)/m."""
    from kvstats.theory import sphere_abs_moment

    assert sphere_abs_moment(1) == pytest.approx(1.0, rel=1e-15)
    assert qjl_reconstruction_mse("orthogonal", 3, 1) == pytest.approx(0.0, abs=1e-15)
    assert float(qjl_variance("orthogonal", 3, np.array([0.7]), np.array([-2.0]))) == pytest.approx(0.0, abs=1e-15)
    assert qjl_reconstruction_mse("gaussian", 3, 1) == pytest.approx((math.pi / 2 - 1) / 3, rel=1e-15)


@pytest.mark.parametrize("d,m,cos", [(8, 4, 0.0), (8, 8, 0.8), (8, 12, 0.3), (16, 16, 0.0)])
def test_orthogonal_qjl_variance_matches_an_inline_haar_sketch(d, m, cos):
    """A fixed pair (q, k); rows √d times Haar rows, in blocks of d orthogonal rows (the
    last block m mod d rows), estimate ‖k‖/(m√d·E|u₁|)·Σ⟨s_i, q⟩ sign⟨s_i, k⟩ with E|u₁| from
    scipy: unbiased, and its variance within 4 SE of qjl_variance("orthogonal") (a Haar
    sketch sees every pair alike, so the formula is the conditional variance); the
    Gaussian value is rejected (power)."""
    n = 20_000
    rng = np.random.default_rng((d, m, round(10 * cos)))
    k = np.zeros(d)
    k[0] = 1.3
    q = 0.7 * (cos * np.eye(d)[0] + math.sqrt(1 - cos ** 2) * np.eye(d)[1])
    blocks = [haar(n, d, rng)[:, :rows] for rows in [d] * (m // d) + ([m % d] if m % d else [])]
    s = math.sqrt(d) * np.concatenate(blocks, axis=1)                  # (n, m, d)
    z = np.linalg.norm(k) / (m * math.sqrt(d) * sphere_abs_mean(d)) * ((s @ q) * np.sign(s @ k)).sum(-1)
    assert within(z, q @ k)
    sq = (z - q @ k) ** 2
    assert within(sq, float(qjl_variance("orthogonal", m, q, k)))
    assert not within(sq, float(qjl_variance("gaussian", m, q, k)))
