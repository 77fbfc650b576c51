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


def test_distortion_table_reads_each_iterable_once():
    """dims is used for every bit width: a one-shot iterator gave beta rows for the first
    bit width only. Empty bits give the documented columns; a bad dim is refused before
    any row is computed."""
    t = distortion_table(bits=iter([1, 2]), dims=(d for d in (64, 128)))
    assert list(t.groupby("bits").size()) == [3, 3]
    assert t.equals(distortion_table(bits=[1, 2], dims=[64, 128]))
    assert list(distortion_table(bits=[]).columns) == list(t.columns)
    with pytest.raises(ValueError, match=r"dims must be an integer in \[2, inf\]; received 1"):
        distortion_table(bits=[1], dims=[64, 1])


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
    from kvstats.theory import qjl_reconstruction_mse

    assert residual_inflation(d, m, "orthogonal") == pytest.approx(
        qjl_reconstruction_mse("orthogonal", m, d), rel=1e-12)


@pytest.mark.parametrize("d,m", [(6, 4), (6, 6), (6, 9), (3, 7)])
def test_qjl_reconstruction_mse_matches_inline_sketches(d, m):
    """x̃ = c‖x‖Sᵀsign(Sx) with inline sketches at d not a power of two: Gaussian rows
    (c = √(π/2)/m) and √d times Haar rows in blocks of d (c = 1/(m√d·E|u₁|), E|u₁| from
    scipy): the mean of ‖x̃ − x‖²/‖x‖² over independent sketches within 4 SE of
    qjl_reconstruction_mse (the law does not depend on x's direction: both sketch laws
    are rotation invariant); the other kind's value is rejected (power)."""
    from kvstats.theory import qjl_reconstruction_mse

    n = 20_000
    rng = np.random.default_rng((d, m, 3))
    x = rng.standard_normal(d) * 2.5
    gauss = rng.standard_normal((n, m, d))
    blocks = [_haar(n, d, rng)[:, :rows] for rows in [d] * (m // d) + ([m % d] if m % d else [])]
    orth = math.sqrt(d) * np.concatenate(blocks, axis=1)
    scales = {"gaussian": math.sqrt(math.pi / 2) / m, "orthogonal": 1 / (m * math.sqrt(d) * _sphere_abs_mean(d))}
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
    from kvstats.theory import qjl_reconstruction_mse, qjl_variance, sphere_abs_moment

    assert sphere_abs_moment(1) == pytest.approx(1.0, rel=1e-15)
    assert qjl_reconstruction_mse("orthogonal", 3, 1) == pytest.approx(0.0, abs=1e-15)
    assert float(qjl_variance("orthogonal", 3, np.array([0.7]), np.array([-2.0]))) == pytest.approx(0.0, abs=1e-15)
    assert qjl_reconstruction_mse("gaussian", 3, 1) == pytest.approx((math.pi / 2 - 1) / 3, rel=1e-15)


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
    # d = 3: the coordinate law is uniform, its Lloyd–Max code the uniform one, and
    # d·D_b = 3·(2/2^b)²/12 = 4^-b exactly: the scalar code sits on the "lower bound"
    for b in range(1, 9):
        assert unit_vector_mse(b, 3) == pytest.approx(turboquant_mse_bounds(b)[0], rel=1e-9)


def test_a_vector_code_beats_the_mse_lower_bound_at_d_3():
    """8 codewords on S² (3 bits per vector, b = 1), trained by Lloyd's algorithm on a
    uniform sample from random codewords and evaluated on an independent sample: MSE
    ≈ 0.2416 (the cube of the scalar code: 1/4), more than 4 SE below Theorem 3's 4^-1."""
    rng = np.random.default_rng(5)
    train, test = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in rng.standard_normal((2, 50_000, 3)))
    c = train[rng.choice(len(train), 8, replace=False)]
    for _ in range(100):
        lab = ((train[:, None] - c[None]) ** 2).sum(-1).argmin(1)
        c = np.array([train[lab == j].mean(0) for j in range(8)])
    err = ((test[:, None] - c[None]) ** 2).sum(-1).min(1)
    assert err.mean() + 4 * err.std(ddof=1) / math.sqrt(err.size) < turboquant_mse_bounds(1)[0]


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


# --- independent references: quadrature, closed forms at 1 bit, inline constructions -------

def _sphere_abs_mean(d):
    """E|X| for the sphere coordinate, from scipy's Beta((d−1)/2, (d−1)/2): X = 2B − 1."""
    a = (d - 1) / 2
    return stats.beta(a, a).expect(lambda y: abs(2 * y - 1))


@pytest.mark.parametrize("d", [2, 3, 5, 16, 128, 1024])
def test_one_bit_sphere_distortion_closed_form(d):
    """1 bit: boundary 0, centroids ±E|X| (the conditional mean of each half), so
    D_1 = E X² − (E|X|)² = 1/d − (E|X|)² and d·D_1 = 1 − d·(E|X|)² (→ 1 − 2/π); E|X| by
    scipy's Beta expectation, not kvstats.theory.sphere_abs_moment."""
    assert unit_vector_mse(1, d) == pytest.approx(1 - d * _sphere_abs_mean(d) ** 2, rel=1e-7)


def _lloyd_by_quadrature(pdf, lo, hi, levels, iters=4000):
    """Plain Lloyd iteration with scipy.integrate.quad for every cell (reference only)."""
    c = np.linspace(lo, hi, levels + 2)[1:-1] if np.isfinite(lo) else np.linspace(-2, 2, levels)
    for _ in range(iters):
        t = np.r_[lo, (c[1:] + c[:-1]) / 2, hi]
        new = np.array([integrate.quad(lambda x: x * pdf(x), a, b)[0] / integrate.quad(pdf, a, b)[0]
                        for a, b in zip(t[:-1], t[1:])])
        done = np.max(np.abs(new - c)) < 1e-10    # D is stationary there: error O(1e-20)
        c = new
        if done:
            break
    t = np.r_[lo, (c[1:] + c[:-1]) / 2, hi]
    return sum(integrate.quad(lambda x: (x - ci) ** 2 * pdf(x), a, b)[0]
               for ci, a, b in zip(c, t[:-1], t[1:]))


@pytest.mark.parametrize("dist,dim,bits", [("beta", 8, 2), ("beta", 5, 3), ("gaussian", None, 3),
                                           ("beta", 128, 2), ("beta", 128, 3)])
def test_lloyd_max_distortion_matches_a_quadrature_lloyd_iteration(dist, dim, bits):
    """Reference: Lloyd's conditions iterated to a fixed point with adaptive quadrature on
    scipy's densities (N(0, 1); the sphere coordinate as 2·Beta − 1). At d = 128 this
    anchors the documented KQV predictions −10·log10(128·D_n) = 9.355 and 14.690 dB
    (n = 2, 3; agreement ~1e-12; n = 4, 20.308 dB, agrees to 5e-12 but takes ~15 s here)."""
    if dist == "gaussian":
        pdf, lo, hi = stats.norm.pdf, -np.inf, np.inf
    else:
        law = stats.beta((dim - 1) / 2, (dim - 1) / 2)
        pdf, lo, hi = (lambda x: law.pdf((x + 1) / 2) / 2), -1.0, 1.0
    ref = _lloyd_by_quadrature(pdf, lo, hi, 2 ** bits)
    assert lloyd_max_distortion(bits, dist, dim) == pytest.approx(ref, rel=1e-7)


@pytest.mark.parametrize("d", [2, 5, 16, 128, 1024])
def test_high_rate_distortion_is_the_panter_dite_integral(d):
    """(1/12)(∫f^{1/3})³ by quadrature: f^{1/3} = f(0)^{1/3}·(1 − x²)^k, k = (d−3)/6, and
    with x = sin θ the integral is ∫ cos^{d/3} θ dθ over [−π/2, π/2] (bounded, unlike the
    d = 2 integrand in x; scipy's algebraic-weight quad in x is off by 1e-8 at d = 1024);
    f(0) from scipy's Beta density. The Gaussian's is √3π/2."""
    a = (d - 1) / 2
    f0 = stats.beta(a, a).pdf(0.5) / 2
    half = integrate.quad(lambda t: math.cos(t) ** (d / 3), 0, math.pi / 2, epsabs=0, epsrel=1e-13)[0]
    integral = f0 ** (1 / 3) * 2 * half
    from kvstats.theory import high_rate_distortion

    assert high_rate_distortion(2, "beta", d) == pytest.approx(integral ** 3 / 12 / 16, rel=1e-9)
    gauss = integrate.quad(lambda x: stats.norm.pdf(x) ** (1 / 3), -np.inf, np.inf)[0] ** 3 / 12
    assert high_rate_distortion(0) == pytest.approx(gauss, rel=1e-9)
    assert gauss == pytest.approx(math.sqrt(3) * math.pi / 2, rel=1e-9)


def test_lloyd_max_tends_to_the_panter_dite_limit():
    """4^b·D_b / its high-rate limit rises to 1 (within 1% at b = 8) for each density; d = 3
    (uniform) is exact at every b: its Lloyd–Max quantizer is uniform, D_b = (2/2^b)²/12.
    So the Lloyd–Max gap to Shannon's bound at d = 128 tends to 10·log10(128·c) = 4.24 dB,
    below the Gaussian's 10·log10(√3π/2) = 4.35 dB."""
    from kvstats.theory import high_rate_distortion

    for dist, dim in (("gaussian", None), ("beta", 16), ("beta", 128), ("beta", 1024)):
        r = [lloyd_max_distortion(b, dist, dim) / high_rate_distortion(b, dist, dim) for b in range(1, 9)]
        assert np.all(np.diff(r) > 0) and 0.99 < r[-1] < 1, (dist, dim, r)
    for b in range(1, 9):
        assert lloyd_max_distortion(b, "beta", 3) == pytest.approx(high_rate_distortion(b, "beta", 3), rel=1e-9)
        assert high_rate_distortion(b, "beta", 3) == pytest.approx((2 / 2 ** b) ** 2 / 12, rel=1e-15)
    assert 10 * math.log10(128 * high_rate_distortion(0, "beta", 128)) == pytest.approx(4.245, abs=1e-3)
    with pytest.raises(ValueError, match="dim is required"):
        high_rate_distortion(2, "beta")
    with pytest.raises(ValueError, match="dim is only for distribution='beta'"):
        high_rate_distortion(2, "gaussian", 64)
    with pytest.raises(ValueError, match="distribution must be one of"):
        high_rate_distortion(2, "uniform")


def _haar(n, d, rng):
    """n Haar rotations (QR of Gaussian matrices with the sign fix, Mezzadri 2007)."""
    qm, r = np.linalg.qr(rng.standard_normal((n, d, d)))
    return qm * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]


@pytest.mark.parametrize("d,m,cos", [(8, 4, 0.0), (8, 8, 0.8), (8, 12, 0.3), (16, 16, 0.0)])
def test_orthogonal_qjl_variance_matches_an_inline_haar_sketch(d, m, cos):
    """A fixed pair (q, k); rows √d times Haar rows, in blocks of d orthogonal rows (the
    last block m mod d rows), estimate ‖k‖/(m√d·E|u₁|)·Σ⟨s_i, q⟩ sign⟨s_i, k⟩ with E|u₁| from
    scipy: unbiased, and its variance within 4 SE of qjl_variance("orthogonal") (a Haar
    sketch sees every pair alike, so the formula is the conditional variance); the
    Gaussian value is rejected (power)."""
    from kvstats.theory import qjl_variance

    n = 20_000
    rng = np.random.default_rng((d, m, round(10 * cos)))
    k = np.zeros(d)
    k[0] = 1.3
    q = 0.7 * (cos * np.eye(d)[0] + math.sqrt(1 - cos ** 2) * np.eye(d)[1])
    blocks = [_haar(n, d, rng)[:, :rows] for rows in [d] * (m // d) + ([m % d] if m % d else [])]
    s = math.sqrt(d) * np.concatenate(blocks, axis=1)                  # (n, m, d)
    z = np.linalg.norm(k) / (m * math.sqrt(d) * _sphere_abs_mean(d)) * ((s @ q) * np.sign(s @ k)).sum(-1)
    assert within(z, q @ k)
    sq = (z - q @ k) ** 2
    assert within(sq, float(qjl_variance("orthogonal", m, q, k)))
    assert not within(sq, float(qjl_variance("gaussian", m, q, k)))


def _lloyd_max_code(u, bits):
    """Inline TurboQuant-mse of unit rows u (n, d): Haar rotation, the Lloyd–Max codebook of
    the sphere coordinate (only its centroids and boundaries are used), rotate back."""
    from kvstats.quant.codebook import lloyd_max_codebook

    n, d = u.shape
    cb = lloyd_max_codebook(bits, "beta", d)
    rot = _haar(n, d, np.random.default_rng(bits * 1000 + d))
    y = np.einsum("nij,nj->ni", rot, u)
    yq = np.asarray(cb.centroids)[np.searchsorted(np.asarray(cb.boundaries), y)]
    return np.einsum("nji,nj->ni", rot, yq)


@pytest.mark.parametrize("d,bits", [(8, 2), (32, 2), (32, 3), (24, 3)])
def test_mse_inner_product_bias_and_the_bit_trade_by_monte_carlo(d, bits):
    """Inline constructions, x and q independent uniform unit vectors, one Haar rotation
    per trial:

    - bias: E[x̂ | x] = (1 − d·D_b)·x (invariance under rotations fixing x; its factor is
      E⟨x, x̂⟩ = E‖x̂‖² = 1 − d·D_b by the centroid condition), checked on ⟨x, x̂⟩;
    - variance: E⟨q, x̂ − x⟩² = ‖q‖²·D_b for an isotropic q;
    - prod: (b−1)-bit code plus a Gaussian QJL of the residual (m = d) has mean square
      (π/2 − 1/d)·D_{b−1} (turboquant_prod_distortion), and the ratio of the two, with an
      SE by the delta method over independent samples, matches bit_trade_inflation(b, d)
      within 4 SE.

    d = 24 (not a power of two) holds them for a Haar rotation of any d."""
    n = 20_000
    rng = np.random.default_rng((d, bits, 7))
    x, q, x2, q2 = (v / np.linalg.norm(v, axis=1, keepdims=True)
                    for v in rng.standard_normal((4, n, d)))
    xh = _lloyd_max_code(x, bits)
    assert within((x * xh).sum(1), 1 - unit_vector_mse(bits, d))
    e_mse = ((xh - x) * q).sum(1) ** 2
    assert within(e_mse, lloyd_max_distortion(bits, "beta", d))
    r = x2 - _lloyd_max_code(x2, bits - 1)
    s = rng.standard_normal((n, d, d))
    rh = math.sqrt(math.pi / 2) / d * np.linalg.norm(r, axis=1, keepdims=True) * np.einsum(
        "nmd,nm->nd", s, np.sign(np.einsum("nmd,nd->nm", s, r)))
    e_prod = ((rh - r) * q2).sum(1) ** 2
    assert within(e_prod, turboquant_prod_distortion(bits, d))
    ratio = e_prod.mean() / e_mse.mean()
    se = ratio * math.hypot(e_prod.std(ddof=1) / e_prod.mean(), e_mse.std(ddof=1) / e_mse.mean()) / math.sqrt(n)
    assert abs(ratio - bit_trade_inflation(bits, d)) < 4 * se
    assert abs(ratio - 2 * math.pi) > 4 * se          # power: the asymptote is rejected


def test_direction_error_exact_geometry():
    """Exact references by construction: x̂ = x + e with e ⟂ x gives tan φ = ‖e‖/‖x‖;
    x = x̂ − e with e ⟂ x̂ gives sin φ = ‖e‖/‖x‖ (plane geometry, angles from arccos)."""
    from kvstats.theory import direction_error

    rng = np.random.default_rng(11)
    x = rng.standard_normal((50, 16))
    e = rng.standard_normal((50, 16)) * rng.uniform(0.05, 0.9, (50, 1))
    e -= (e * x).sum(1, keepdims=True) / (x * x).sum(1, keepdims=True) * x      # e ⟂ x

    def cosang(a, b):
        return np.arccos((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))

    xh = x + e
    snr = 10 * np.log10((x * x).sum(1) / (e * e).sum(1))
    np.testing.assert_allclose(direction_error(snr, "orthogonal_to_signal"), cosang(x, xh), rtol=1e-9)
    xh, x2 = x, x - e                                                           # e ⟂ x̂ = x
    snr = 10 * np.log10((x2 * x2).sum(1) / (e * e).sum(1))
    np.testing.assert_allclose(direction_error(snr), cosang(x2, xh), rtol=1e-9)
    with pytest.raises(ValueError, match="snr_db must be >= 0 for error='orthogonal_to_reconstruction'"):
        direction_error([3.0, -1.0])
    with pytest.raises(ValueError, match="snr_db must be >= 0"):
        direction_error(-1e-9)
    # 0 dB is the 0-bit code (x̂ = 0, ‖e‖ = ‖x‖): allowed, a right angle
    assert float(direction_error(0.0)) == math.pi / 2
    with pytest.raises(ValueError, match="error must be one of"):
        direction_error(3.0, "unbiased")


def test_direction_error_of_lloyd_max_and_qjl_codes():
    """Which φ an SNR implies depends on the code: per vector at d = 64 (inline
    constructions), a Lloyd–Max code's φ follows the error-⟂-reconstruction form (median
    deviation < 0.5% at b = 1, 2; at d = 128 0.03%, 0.15%) and not 1/√(1 + 1/SNR) (off by
    19% and 5.5% at d = 128); a Gaussian QJL reconstruction (unbiased, SNR ≈ −1.9 dB) follows
    cos φ = 1/√(1 + 1/SNR): mean φ within 4 SE of the mean prediction (per vector the
    spread of ⟨x, e⟩ moves it by a few %)."""
    from kvstats.theory import direction_error

    rng = np.random.default_rng(12)
    d, n = 64, 3000          # (n, d, d) Haar rotations and sketches: ~100 MB each
    x = rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)

    def snr_phi(xh):
        snr = 10 * np.log10(1 / ((xh - x) ** 2).sum(1))
        return snr, np.arccos((x * xh).sum(1) / np.linalg.norm(xh, axis=1))

    for b in (1, 2):
        snr, phi = snr_phi(_lloyd_max_code(x, b))
        assert np.median(np.abs(phi / direction_error(snr) - 1)) < 0.005
        assert np.median(np.abs(phi / direction_error(snr, "orthogonal_to_signal") - 1)) > 0.04
    s = rng.standard_normal((n, d, d))
    xh = math.sqrt(math.pi / 2) / d * np.einsum("nmd,nm->nd", s, np.sign(np.einsum("nmd,nd->nm", s, x)))
    snr, phi = snr_phi(xh)
    assert within(phi, direction_error(snr, "orthogonal_to_signal").mean())
