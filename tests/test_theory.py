"""Tests for kvstats.theory: closed forms vs Monte-Carlo and against the papers' bounds.

The Gaussian QJL sketch is written inline with numpy here (not kvstats.quant.qjl) so that
these tests check the formulas independently of the implementation they predict.
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from kvstats._checks import replicate_scale
from kvstats.quant.mse import MSEQuantizer
from kvstats.theory import (bit_trade_inflation, distortion_table, lloyd_max_distortion,
                            qjl_inner_product_variance, residual_inflation, sphere_coordinate_pdf,
                            turboquant_mse_bounds, turboquant_prod_bounds,
                            turboquant_prod_distortion, unit_vector_mse)

# Max (1960), Table I: N(0,1) Lloyd-Max MSE for 1..4 bits.
MAX_1960 = {1: 0.3634, 2: 0.1175, 3: 0.03454, 4: 0.009497}


def within(estimate_samples, expected, z=4.0):
    """|mean - expected| < z standard errors of the mean."""
    x = np.asarray(estimate_samples, dtype=float)
    se = x.std(ddof=1) / np.sqrt(x.size)
    return abs(x.mean() - expected) < z * se


def qjl_estimates(q, k, m, n_sketches, rng):
    """The QJL estimator sqrt(pi/2)/m * ||k|| * <S q, sign(S k)> for n independent S."""
    s = rng.standard_normal((n_sketches, m, q.size))
    return math.sqrt(math.pi / 2) / m * np.linalg.norm(k) * np.einsum(
        "rm,rm->r", s @ q, np.sign(s @ k))


# --- densities and distortions ------------------------------------------------------------

@pytest.mark.parametrize("dim", [2, 3, 5, 64, 1024])
def test_sphere_coordinate_pdf(dim):
    x = np.linspace(-0.99, 0.99, 41)
    ref = stats.beta((dim - 1) / 2, (dim - 1) / 2).pdf((x + 1) / 2) / 2  # change of variables
    np.testing.assert_allclose(sphere_coordinate_pdf(x, dim), ref, rtol=1e-10)
    total = integrate.quad(lambda t: float(sphere_coordinate_pdf(t, dim)), -1, 1, limit=200)[0]
    assert total == pytest.approx(1.0, rel=1e-6)
    assert np.all(sphere_coordinate_pdf([-1.5, 2.0], dim) == 0)
    # at ±1: the arcsine law is infinite, the d = 3 law uniform (1/2), beyond them 0
    ends = sphere_coordinate_pdf([-1.0, 1.0], dim)
    np.testing.assert_allclose(ends, {2: np.inf, 3: 0.5}.get(dim, 0.0), rtol=1e-15, atol=0)


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_lloyd_max_distortion(bits):
    assert lloyd_max_distortion(bits) == pytest.approx(MAX_1960[bits], rel=1e-3)
    assert lloyd_max_distortion(0) == 1.0 and lloyd_max_distortion(0, "beta", 64) == 1 / 64
    assert unit_vector_mse(bits, 128) == pytest.approx(MAX_1960[bits], rel=0.02)


def test_distortion_table():
    t = distortion_table()
    assert len(t) == 8 * 4
    assert list(t.columns) == ["bits", "distribution", "dim", "mse", "dim_times_mse",
                               "ratio_to_gaussian", "tq_lower", "tq_upper"]
    beta = t[t.distribution == "beta"]
    # dim * MSE approaches the Gaussian value from below as dim grows, at every bit width
    for _, g in beta.groupby("bits"):
        assert np.all(np.diff(g.sort_values("dim").ratio_to_gaussian) > 0)
        assert g.ratio_to_gaussian.max() < 1


# --- QJL variance ---------------------------------------------------------------------------

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
    with pytest.raises(ValueError, match="q_norm and k_norm must be >= 0"):
        qjl_inner_product_variance(-1.0, 1.0, 0.0, 4)
    with pytest.raises(ValueError, match=r"m must be an integer in \[1, inf\]"):
        qjl_inner_product_variance(1.0, 1.0, 0.0, 0)
    with pytest.raises(ValueError, match="finite"):
        qjl_inner_product_variance(np.nan, 1.0, 0.0, 4)


def test_qjl_closed_forms_agree_where_they_overlap():
    """The norms-and-cosine and the vector forms of the Gaussian variance are one formula;
    residual_inflation(d, m) is the Gaussian reconstruction MSE; the kinds with a closed
    form are the sketch kinds."""
    from kvstats.quant.sketch import SKETCHES
    from kvstats.theory import _SKETCH_KINDS, qjl_reconstruction_mse, qjl_variance

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


@pytest.mark.parametrize("d,m", [(32, 32), (32, 16)])
def test_residual_inflation_matches_monte_carlo(d, m):
    """E[(<q, r_hat> - <q, r>)^2] / E[<q, r>^2] = (pi/2 - 1/d) d/m for r of uniform direction
    (here a uniform unit vector, with a fresh Gaussian sketch per trial); each expectation
    is checked within 4 SE of its closed form."""
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


def test_sketch_kinds_in_bit_trade_inflation():
    """m = 2d halves the Gaussian inflation exactly; the orthogonal one about halves (blocks
    are independent, and the a² term is O(1/d)); at d = 128, n = 4 the orthogonal value is
    2.06 (docs/qjl.md's table)."""
    for b in (2, 4, 6):
        assert bit_trade_inflation(b, 128, 256) == pytest.approx(bit_trade_inflation(b, 128) / 2)
        half = bit_trade_inflation(b, 128, 256, "orthogonal") / bit_trade_inflation(b, 128, 128, "orthogonal")
        assert half == pytest.approx(0.5, abs=0.01)
    assert bit_trade_inflation(4, 128, kind="orthogonal") == pytest.approx(2.059, abs=1e-3)
    with pytest.raises(ValueError, match="kind"):
        bit_trade_inflation(4, 128, kind="hadamard")
    with pytest.raises(ValueError, match="m needs dim"):
        residual_inflation(None, kind="orthogonal")


def test_bit_trade_inflation_values():
    """(pi/2) D_{b-1}/D_b from Max (1960)'s table for b = 2..4; increasing towards 2 pi."""
    for b in (2, 3, 4):
        ref = math.pi / 2 * MAX_1960[b - 1] / MAX_1960[b]
        assert bit_trade_inflation(b) == pytest.approx(ref, rel=2e-3)
    vals = [bit_trade_inflation(b) for b in range(2, 9)]
    assert np.all(np.diff(vals) > 0) and vals[-1] < 2 * math.pi
    assert vals[-1] == pytest.approx(2 * math.pi, rel=0.01)
    for b in range(2, 9):
        assert bit_trade_inflation(b, 128) == pytest.approx(bit_trade_inflation(b), rel=0.01)


# --- TurboQuant bounds ------------------------------------------------------------------------

@pytest.mark.parametrize("bits", range(1, 9))
def test_lloyd_max_within_turboquant_mse_bounds(bits):
    lo, hi = turboquant_mse_bounds(bits)
    assert hi == pytest.approx(math.sqrt(3) * math.pi / 2 * 4.0 ** -bits)
    assert lo < lloyd_max_distortion(bits) < hi
    for d in (16, 64, 128, 1024):
        assert lo < unit_vector_mse(bits, d) < hi


def test_mse_lower_bound_is_a_large_dimension_statement():
    """At d = 2 and 1 bit per coordinate the unit-vector MSE is 2 (1/2 - 4/pi^2) = 0.189
    (closed form: centroids +-2/pi of the arcsine law), below 4^-1: Theorem 3's bound
    comes from Shannon's lower bound and does not hold at such small d."""
    assert unit_vector_mse(1, 2) == pytest.approx(1 - 8 / math.pi ** 2, rel=1e-12)
    assert unit_vector_mse(1, 2) < turboquant_mse_bounds(1)[0]


def test_prod_prediction_and_bounds_worked_by_hand():
    """b = 1 (no scalar bits: a bare QJL of the unit x, D_0 = 1/d) at d = 2:
    (π/2 − 1/2)·‖y‖²/2 from Var = ((π/2)‖y‖²‖x‖² − E⟨y,x⟩²)/m with E⟨y,x⟩² = ‖y‖²/d, m = d;
    bounds ‖y‖²/d·4^-b and √3·π²·‖y‖²/d·4^-b (Zandieh et al. 2025, Theorems 2-3)."""
    assert turboquant_prod_distortion(1, 2) == pytest.approx((math.pi / 2 - 0.5) / 2, rel=1e-15)
    assert turboquant_prod_distortion(1, 2, y_norm=3.0) == pytest.approx(9 * (math.pi / 2 - 0.5) / 2, rel=1e-15)
    lo, hi = turboquant_prod_bounds(2, 8, y_norm=3.0)
    assert lo == pytest.approx(9 / 8 / 16, rel=1e-15)
    assert hi == pytest.approx(math.sqrt(3) * math.pi ** 2 * 9 / 8 / 16, rel=1e-15)
    lo, hi = turboquant_mse_bounds(3)
    assert (lo, hi) == (pytest.approx(1 / 64, rel=1e-15), pytest.approx(math.sqrt(3) * math.pi / 2 / 64, rel=1e-15))


@pytest.mark.parametrize("d", [16, 64, 128, 1024])
def test_prod_prediction_within_bounds_and_tight_upper(d):
    ratios = []
    for b in range(1, 9):
        lo, hi = turboquant_prod_bounds(b, d, y_norm=2.0)
        pred = turboquant_prod_distortion(b, d, y_norm=2.0)
        assert lo < pred < hi
        ratios.append(pred / hi)
    # the upper bound's constant is the high-resolution limit of (pi/2) D_{b-1} 4^b for the
    # Gaussian; the sphere law of small d has a smaller D_b (d * D_b < D_b of N(0,1))
    assert np.all(np.diff(ratios) > 0) and ratios[-1] > (0.9 if d >= 128 else 0.75)


@pytest.mark.slow
@pytest.mark.parametrize("bits", [1, 2, 3])
def test_prod_distortion_matches_monte_carlo(bits):
    """TurboQuant-prod built inline (MSEQuantizer with a Haar rotation per trial, float64
    norms, plus a Gaussian QJL of the residual with m = d): the mean of
    (<y,x> - <y,x_hat>)^2 over independent trials within 4 SE of the prediction, which is
    exact here (uniform x and Haar rotation make the residual direction uniform)."""
    d = 32
    n = 3000 if replicate_scale() == "ci" else 30_000
    rng = np.random.default_rng(bits)
    x = rng.standard_normal((n, 1, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    y = rng.standard_normal(d)
    if bits > 1:
        q = MSEQuantizer(d, bits - 1, rotation="haar", seed=rng, draws=n, norm_dtype=np.float64)
        base = q.decode(q.encode(x))
    else:
        base = np.zeros_like(x)
    r = (x - base)[:, 0]
    s = rng.standard_normal((n, d, d))
    r_hat = math.sqrt(math.pi / 2) / d * np.linalg.norm(r, axis=1, keepdims=True) * np.einsum(
        "nmd,nm->nd", s, np.sign(np.einsum("nmd,nd->nm", s, r)))
    err = ((x[:, 0] - base[:, 0] - r_hat) @ y) ** 2
    assert within(err, turboquant_prod_distortion(bits, d, float(np.linalg.norm(y))))


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"bits must be an integer in \[0, 8\]"):
        lloyd_max_distortion(9)
    with pytest.raises(ValueError, match="dim is required"):
        lloyd_max_distortion(0, "beta")
    with pytest.raises(ValueError, match="m needs dim"):
        residual_inflation(None, 8)
    with pytest.raises(ValueError, match=r"bits must be an integer in \[1, 8\]"):
        bit_trade_inflation(0)
    with pytest.raises(ValueError, match="y_norm must be in"):
        turboquant_prod_bounds(2, 64, y_norm=-1.0)
    with pytest.raises(ValueError, match=r"dim must be an integer in \[2, inf\]"):
        sphere_coordinate_pdf(0.0, 1)
