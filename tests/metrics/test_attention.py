"""Stable softmax, attention, KL, top-k recall and argmax shift.

References: scipy.special (softmax, log_softmax, rel_entr) and closed forms computed with
Python's math module in float64 (math.fsum / log1p), stated per test.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import special

from kvstats.metrics import (argmax_shift, attention_logits, attention_output, attention_weights,
                             kl_divergence, log_softmax, softmax, topk_recall)


def _ref_log_softmax(row):
    """float64 closed form: (x − max) − log1p(Σ_{i≠argmax} exp(x_i − max)).

    x − max is exact here (Sterbenz) and fsum/log1p are correctly rounded to ~1 ulp.
    """
    m = max(row)
    i = row.index(m)
    rest = math.fsum(math.exp(x - m) for j, x in enumerate(row) if j != i)
    return [(x - m) - math.log1p(rest) for x in row]


def test_matches_scipy_on_ordinary_logits():
    x = np.random.default_rng(0).standard_normal((7, 5, 33)) * 3
    np.testing.assert_allclose(softmax(x), special.softmax(x, axis=-1), rtol=1e-13)
    np.testing.assert_allclose(log_softmax(x), special.log_softmax(x, axis=-1), rtol=1e-13,
                               atol=1e-13)
    np.testing.assert_allclose(softmax(x, axis=1), special.softmax(x, axis=1), rtol=1e-13)


@pytest.mark.parametrize("row", [[1e4, 1e4 - 1.0, 0.0, -1e4], [-1e4, -1e4 + 2.5, -1e4 - 3.0],
                                 [1e4, -1e4], [3e5, 3e5, 3e5 - 1e-3]])
def test_extreme_logits_finite_and_exact(row):
    ref = np.array(_ref_log_softmax(row))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp = log_softmax(np.array(row))
        p = softmax(np.array(row))
    assert np.isfinite(lp).all() and np.isfinite(p).all()
    np.testing.assert_allclose(lp, ref, rtol=1e-15, atol=1e-12)
    np.testing.assert_allclose(p, np.exp(ref), rtol=1e-14, atol=1e-300)
    # float32 input of magnitude 1e4 stays finite and close to the float64 reference
    lp32 = log_softmax(np.array(row, dtype=np.float32))
    assert lp32.dtype == np.float32 and np.isfinite(lp32).all()
    np.testing.assert_allclose(lp32, ref, rtol=1e-6, atol=2e-3)


def test_masked_entries():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, 2.0, -np.inf]])
    p = softmax(x)
    np.testing.assert_allclose(p, [[1 / (1 + np.e), 0, np.e / (1 + np.e)], [0, 1, 0]], rtol=1e-15)
    assert np.isneginf(log_softmax(x)[0, 1])
    with pytest.raises(ValueError, match="at least one entry > -inf"):
        softmax([[-np.inf, -np.inf], [0.0, 1.0]])
    with pytest.raises(ValueError, match="NaN"):
        softmax([0.0, np.nan])
    with pytest.raises(ValueError, match=r"\+inf"):
        log_softmax([0.0, np.inf])
    with pytest.raises(ValueError, match="axis must be"):
        softmax(np.zeros((2, 3)), axis=2)


def test_attention_shapes_scale_and_gqa_broadcast():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((4, 3, 16))           # 3 queries (e.g. a GQA group) per trial
    K = rng.standard_normal((4, 10, 16))
    V = rng.standard_normal((4, 10, 8))
    logits = attention_logits(q, K)
    np.testing.assert_allclose(logits, np.einsum("tqd,tnd->tqn", q, K) / 4.0, rtol=1e-13)
    p = attention_weights(q, K)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-14)
    out = attention_output(q, K, V)
    np.testing.assert_allclose(out, np.einsum("tqn,tnd->tqd", special.softmax(logits, -1), V),
                               rtol=1e-12)
    # one key set broadcast to several batches of queries
    assert attention_weights(rng.standard_normal((2, 4, 3, 16)), K).shape == (2, 4, 3, 10)
    mask = np.ones((3, 10), bool)
    mask[:, 5:] = False
    pm = attention_weights(q, K, mask=mask)
    assert (pm[..., 5:] == 0).all()
    np.testing.assert_allclose(pm[..., :5], special.softmax(logits[..., :5], -1), rtol=1e-13)
    with pytest.raises(ValueError, match="share the feature axis"):
        attention_logits(q, K[..., :8])
    with pytest.raises(ValueError, match="must broadcast"):
        attention_logits(q, K[:3])
    with pytest.raises(ValueError, match="V must have one row per key"):
        attention_output(q, K, V[:, :9])
    with pytest.raises(TypeError, match="mask must be a boolean"):
        attention_weights(q, K, mask=np.ones((3, 10)))


def test_a_fully_masked_query_is_an_error_naming_mask():
    # attention_weights and attention_output take q, K, (V,) mask: the error names mask
    # and counts the queries left without a key (not softmax's own argument x)
    rng = np.random.default_rng(8)
    q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    for call in (lambda: attention_weights(q, K, mask=mask),
                 lambda: attention_output(q, K, V, mask=mask)):
        with pytest.raises(ValueError, match=r"^mask must leave at least one key unmasked .* 1 of the 3 queries"):
            call()
    mask[1, 2] = True                      # one key left: a distribution, all on that key
    np.testing.assert_array_equal(attention_weights(q, K, mask=mask)[1], np.eye(5)[2])


def _kl_reference(logits, logits_hat):
    """KL(p ‖ p̂) of two logit vectors without the first-order cancellation of Σ p (log p −
    log p̂): with δ = ℓ̂ − ℓ centred under p (δc = δ − Σ p δ; KL is shift-invariant),
    KL = log Σ p e^{δc} = log1p(Σ p (expm1(δc) − δc)), a sum of non-negative terms
    (math.fsum); absolute error ~eps·max|δc|, far below the 1e-16 it is compared at."""
    m = max(logits)
    w = [math.exp(v - m) for v in logits]
    z = math.fsum(w)
    p = [v / z for v in w]
    delta = [b - a for a, b in zip(logits, logits_hat)]
    mean = math.fsum(pi * di for pi, di in zip(p, delta))
    return math.log1p(math.fsum(pi * (math.expm1(di - mean) - (di - mean)) for pi, di in zip(p, delta)))


def test_kl_is_accurate_to_1e_16_nats_in_absolute_terms():
    # docs/measurement.md (KL): the rounding of log p and log p̂ bounds the error at ~1e-16
    # nats whatever the KL, so a KL of 5e-15 has few correct digits and one of 6e-19 comes
    # out 0 (the clip at 0); measured 0.6-1.9e-16 against a 60-digit reference, 2026-12-02.
    rng = np.random.default_rng(13)
    logits = rng.standard_normal(256) * 2
    for s in (1e-1, 1e-3, 1e-5, 1e-7):
        logits_hat = logits + s * rng.standard_normal(256)
        got = float(kl_divergence(log_softmax(logits), log_softmax(logits_hat)))
        ref = _kl_reference(logits.tolist(), logits_hat.tolist())
        assert abs(got - ref) < 1e-15, (s, got, ref)
        assert ref > 1e-15                                  # the reference sees the KL
    tiny = logits + 1e-9 * rng.standard_normal(256)         # KL ≈ 6e-19: below the floor
    assert 0 < _kl_reference(logits.tolist(), tiny.tolist()) < 1e-17
    assert float(kl_divergence(log_softmax(logits), log_softmax(tiny))) < 1e-15


def test_kl_equals_rel_entr_where_finite():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((50, 40)) * 2, rng.standard_normal((50, 40)) * 2
    lp, lq = log_softmax(a), log_softmax(b)
    ref = special.rel_entr(np.exp(lp), np.exp(lq)).sum(-1)
    np.testing.assert_allclose(kl_divergence(lp, lq), ref, rtol=1e-12)
    assert (kl_divergence(lp, lp) == 0).all()
    assert (kl_divergence(lp, lq) >= 0).all()


def test_kl_finite_under_underflow_and_extreme_logits():
    # p = softmax([1e4, 0]) = (1, e^-1e4) underflows in the second entry; q = softmax([0, 1e4]).
    # KL = 1·(0 − (−1e4)) + e^-1e4·(...) = 1e4 exactly in float64.
    lp, lq = log_softmax(np.array([1e4, 0.0])), log_softmax(np.array([0.0, 1e4]))
    lp2 = log_softmax(np.array([0.0, 0.0, -2000.0]))
    lq2 = np.array([math.log(0.25), math.log(0.75), -np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kl_divergence(lp, lq) == pytest.approx(1e4, rel=1e-15)
        # p = (1/2, 1/2, e^-2000 = 0 in float64): the underflowed entry contributes 0 although q = 0.
        ref = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
        assert kl_divergence(lp2, lq2) == pytest.approx(ref, rel=1e-14)
    # p > 0 where q = 0: +inf (documented)
    assert np.isposinf(kl_divergence(np.log([0.5, 0.5]), np.array([0.0, -np.inf])))
    # masked in both: 0 contribution
    both = np.array([np.log(1.0), -np.inf])
    assert kl_divergence(both, both) == 0.0


def test_kl_small_perturbation_matches_second_order():
    # KL(p ‖ softmax(l + δ)) = ½ Var_p(δ) + O(δ³): checks accuracy where terms cancel.
    rng = np.random.default_rng(3)
    lgt = rng.standard_normal((20, 256))
    delta = 1e-4 * rng.standard_normal((20, 256))
    lp, lq = log_softmax(lgt), log_softmax(lgt + delta)
    p = np.exp(lp)
    var = (p * delta ** 2).sum(-1) - (p * delta).sum(-1) ** 2
    np.testing.assert_allclose(kl_divergence(lp, lq), 0.5 * var, rtol=1e-3)


def test_kl_errors():
    with pytest.raises(ValueError, match="normalised log-probabilities"):
        kl_divergence(np.array([1.0, 2.0]), log_softmax(np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="shape of logp"):
        kl_divergence(np.log([0.5, 0.5]), np.log([0.2, 0.3, 0.5]))


def test_topk_recall_examples_and_ties():
    assert topk_recall([5, 4, 3, 2, 1.0], [5, 4, 3, 2, 1.0], k=3) == 1.0
    assert topk_recall([5, 4, 3, 2, 1.0], [1, 2, 3, 4, 5.0], k=2) == 0.0
    assert topk_recall([5, 4, 3, 2, 1.0], [5, 4, 1, 2, 3.0], k=3) == pytest.approx(2 / 3)
    # quantization collapsed keys 1..3 to one value: the boundary tie counts as retrieved
    assert topk_recall([5, 4, 3, 2, 1.0], [5, 2, 2, 2, 1.0], k=2) == 1.0
    # -inf masked keys never enter the top k of the reference
    assert topk_recall([5, -np.inf, 3, 2.0], [5, 9, 3, 2.0], k=2) == 0.5
    assert topk_recall(np.zeros((3, 7)), np.arange(21.0).reshape(3, 7), k=7).tolist() == [1] * 3
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 5\]; received 6"):
        topk_recall(np.zeros(5), np.zeros(5), k=6)
    with pytest.raises(ValueError, match="k must be an integer"):
        topk_recall(np.zeros(5), np.zeros(5), k=0)


def test_topk_recall_hypergeometric_mean():
    # Independent scores: |A ∩ B| ~ Hypergeometric(N, k, k), so E[recall] = k/N and
    # Var[recall] = (k/N)(1−k/N)(N−k)/(N−1)/k. Tolerance: 5 SE over 4000 rows.
    rng = np.random.default_rng(4)
    N, k, n = 40, 5, 4000
    r = topk_recall(rng.standard_normal((n, N)), rng.standard_normal((n, N)), k=k)
    var = (k / N) * (1 - k / N) * (N - k) / (N - 1) / k
    assert abs(r.mean() - k / N) < 5 * np.sqrt(var / n)
    assert set(np.unique(r * k)) <= set(range(k + 1))


def test_topk_recall_matches_sorting_reference():
    # Without ties the top-k sets are unique: compare with full sorting and set intersection.
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((300, 50)), rng.standard_normal((300, 50))
    b = a + 0.5 * b                                   # correlated, recall spread over 0..1
    for k in (1, 5, 17, 50):
        ref = [len(set(np.argsort(x)[-k:]) & set(np.argsort(y)[-k:])) / k for x, y in zip(a, b)]
        np.testing.assert_array_equal(topk_recall(a, b, k=k), ref)


def test_argmax_shift():
    assert argmax_shift([[3.0, 1.0], [3.0, 1.0]], [[2.0, 2.0], [1.0, 2.0]]).tolist() == [False, True]
    x = np.random.default_rng(5).standard_normal((100, 9))
    assert not argmax_shift(x, x).any()
    assert argmax_shift(x, -x).all()
    # axis other than the last
    assert argmax_shift(x.T, x.T, axis=0).shape == (100,)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_attention_logits_scaled_when_products_leave_the_range(dtype):
    rng = np.random.default_rng(30)
    q, K = rng.standard_normal((3, 8)), rng.standard_normal((5, 8))
    ref = attention_logits(q, K)
    big = 1e150 if dtype == np.float64 else 1e18      # q·k alone would overflow
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = attention_logits((q * big).astype(dtype), (K / big).astype(dtype))
        tiny = attention_logits((q * 1e-170).astype(np.float64), K * 1e170)
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(tiny, ref, rtol=1e-13)
    # ordinary magnitudes: the plain product, bit for bit
    np.testing.assert_array_equal(ref, (q @ K.T) / np.sqrt(8))
    with pytest.raises(ValueError, match=f"q and K: the logits q·k/√d exceed the {np.dtype(dtype)}"):
        attention_logits((q * big * 1e5).astype(dtype), (K * big * 1e5).astype(dtype))


def test_attention_output_batch_axes_of_v_must_broadcast():
    q, K = np.ones((2, 1, 4)), np.ones((2, 3, 4))
    with pytest.raises(ValueError, match=r"batch axes of V \(5,\) must broadcast .* \(2,\)"):
        attention_output(q, K, np.ones((5, 3, 2)))
    # V shared by the batch broadcasts: uniform weights over rows 0..2 give their mean
    V = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(attention_output(q, K, V), np.broadcast_to([[2.0, 3.0]], (2, 1, 2)))


def test_kl_refuses_rows_off_normalisation_by_more_than_the_tolerance():
    # log Σ exp = log 1.01 ≈ 0.01 > 1e-6 (float64): not a distribution, refused; a float32
    # log_softmax output (rounding ~1e-7) passes the float32 tolerance 1e-3
    lq = np.log([0.5, 0.5])
    with pytest.raises(ValueError, match=r"logp must be normalised .*within 1e-06"):
        kl_divergence(np.log([0.5, 0.51]), lq)
    with pytest.raises(ValueError, match=r"logq must be normalised .*within 0.001"):
        kl_divergence(np.log(np.float32([0.5, 0.5])), np.log(np.float32([0.5, 0.502])))
    lp32 = log_softmax(np.float32([3.0, 1.0, -2.0]))
    assert kl_divergence(lp32, lp32) == 0.0


def test_subnormal_logits_are_correctly_rounded():
    # q, K at 1e-160: q·k/√d ~ 1e-321, below the normal range. The plain product rounds
    # every term to the subnormal grid (off by an ulp here); the scaled product rounds
    # once. Reference: exact rational q·k over the float √8, correctly rounded by float().
    from fractions import Fraction
    rng = np.random.default_rng(30)
    q, K = 1e-160 * rng.standard_normal((3, 8)), 1e-160 * rng.standard_normal((5, 8))
    inv = Fraction(float(np.sqrt(8)))
    ref = np.array([[float(sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(qi, ki)) / inv)
                     for ki in K] for qi in q])
    assert 0 < np.abs(ref).min() and np.abs(ref).max() < 2.0**-1022
    np.testing.assert_array_equal(attention_logits(q, K), ref)


def test_softmax_subtracts_each_rows_own_maximum():
    # rows of very different magnitude: a shared maximum would underflow the second row
    # to 0/0; each row's distribution is scipy's
    x = np.array([[1000.0, 999.0, 990.0], [0.0, -1.0, -10.0]])
    np.testing.assert_allclose(softmax(x), special.softmax(x, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(softmax(x.T, axis=0), special.softmax(x.T, axis=0), rtol=1e-14)
    np.testing.assert_allclose(log_softmax(x), special.log_softmax(x, axis=-1), rtol=1e-14)


def test_kl_rounding_residues_are_clipped_to_zero():
    # logits perturbed by 1e-9: KL ≈ 1e-18, below rounding; the raw sums come out
    # negative (down to -3e-16) in about half the rows, and each of those is reported as
    # exactly 0 (KL ≥ 0 by Gibbs), never as a positive residue
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 16))
    lp, lq = log_softmax(x), log_softmax(x + 1e-9 * rng.standard_normal(x.shape))
    raw = np.sum(np.exp(lp) * (lp - lq), axis=-1)
    assert (raw < 0).sum() > 50
    kl = kl_divergence(lp, lq)
    assert np.all(kl[raw < 0] == 0.0) and np.array_equal(kl[raw >= 0], raw[raw >= 0])


def test_masked_logits_are_minus_infinity():
    # a masked key's logit is −inf (documented), not a large negative number: its
    # log-probability is then −inf too, and KL/recall treat it as absent
    rng = np.random.default_rng(2)
    q, K = rng.standard_normal((2, 4)), rng.standard_normal((6, 4))
    mask = np.array([True, False, True, True, False, True])
    lg = attention_logits(q, K, mask=mask)
    assert np.isneginf(lg[:, ~mask]).all()
    np.testing.assert_array_equal(lg[:, mask], attention_logits(q, K)[:, mask])
    assert np.isneginf(log_softmax(lg)[:, ~mask]).all()


def test_mixed_precision_logits_divide_by_sqrt_d_in_the_result_dtype():
    # float32 q with float64 K: float64 logits, divided by float64 √d (was √d rounded to
    # float32: 1.7e-8 relative error); bit for bit the all-float64 logits of the same values
    rng = np.random.default_rng(0)
    q, K = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((5, 8))
    got = attention_logits(q, K)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, attention_logits(q.astype(np.float64), K))
    np.testing.assert_array_equal(attention_logits(K, q), attention_logits(K, q.astype(np.float64)))


def test_axis_argument_is_honoured_everywhere():
    # the distribution along axis 0 of the transposed arrays is the one along axis -1 of
    # the originals (scipy as the reference for log_softmax)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((4, 9)), rng.standard_normal((4, 9))
    np.testing.assert_allclose(log_softmax(x.T, axis=0), special.log_softmax(x.T, axis=0), rtol=1e-13)
    lp, lq = log_softmax(x), log_softmax(y)
    np.testing.assert_array_equal(kl_divergence(lp.T, lq.T, axis=0), kl_divergence(lp, lq))
    np.testing.assert_array_equal(topk_recall(x.T, y.T, k=3, axis=0), topk_recall(x, y, k=3))
    np.testing.assert_array_equal(argmax_shift(x.T, y.T, axis=0), argmax_shift(x, y))
    assert kl_divergence(lp.T, lq.T, axis=0).shape == (4,)


def test_kl_refuses_rows_that_sum_to_less_than_one():
    # log Σ exp = log 0.99 < −1e-6: as unnormalised as a sum above 1
    with pytest.raises(ValueError, match=r"logq must be normalised"):
        kl_divergence(np.log([0.5, 0.5]), np.log([0.5, 0.49]))


def test_topk_recall_needs_k_unmasked_keys_in_every_row():
    # row 0 has 2 finite reference scores: with k = 3 a masked key would sit in the
    # reference's top 3 and count as retrieved (quantized k-th score -inf too)
    from kvstats.metrics import topk_recall

    ref = np.array([[3.0, 2.0, -np.inf, -np.inf], [4.0, 3.0, 2.0, 1.0]])
    quant = np.array([[2.0, 3.0, -np.inf, -np.inf], [1.0, 2.0, 3.0, 4.0]])
    with pytest.raises(ValueError, match="k must be at most the number of finite .* a row with 2"):
        topk_recall(ref, quant, k=3)
    assert topk_recall(ref, quant, k=2).tolist() == [1.0, 0.0]
    assert topk_recall(ref[1:], quant[1:], k=3).tolist() == [pytest.approx(2 / 3)]


def test_subnormal_logits_of_one_row_are_redone_beside_ordinary_rows():
    # one query at 1e-170 beside an ordinary one, keys at 1e-150: the tiny row's q·k/√d
    # ~ 1e-320 is subnormal. A redo decided from the whole array's maxima (1e-150, not
    # tiny) skipped it and kept terms rounded to the subnormal grid; each entry is judged
    # by its own rows now. Reference: the exact rational q·k over the float √8, rounded
    # once by float(); the ordinary row keeps the plain product's bits.
    from fractions import Fraction
    rng = np.random.default_rng(31)
    q, K = rng.standard_normal((2, 8)), 1e-150 * rng.standard_normal((5, 8))
    q[1] *= 1e-170
    inv = Fraction(float(np.sqrt(8)))
    ref = np.array([[float(sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(q[1], k)) / inv)
                     for k in K]])
    assert 0 < np.abs(ref).min() and np.abs(ref).max() < 2.0**-1022
    got = attention_logits(q, K)
    np.testing.assert_array_equal(got[1:], ref)
    np.testing.assert_array_equal(got[:1], ((q @ K.T) / np.sqrt(8))[:1])
    # float32: q, K at 2**-70 give logits in float32's subnormals; the float64 logits of
    # the same values rounded to float32 once (the plain float32 product: 2 of 15 off)
    q32, K32 = (np.ldexp(rng.standard_normal((3, 8)), -70).astype(np.float32),
                np.ldexp(rng.standard_normal((5, 8)), -70).astype(np.float32))
    np.testing.assert_array_equal(attention_logits(q32, K32),
                                  attention_logits(q32.astype(np.float64), K32).astype(np.float32))


def _brute_recall(ref, quant, k):
    # every reference top-k set consistent with its order (no key outside scores above a
    # key inside), the best intersection with the retrieved keys (quantized score ≥ its
    # k-th largest and not masked): the tie rule written out by enumeration
    import itertools
    n = len(ref)
    hit = (quant >= np.sort(quant)[n - k]) & (quant > -np.inf)
    best = 0
    for top in itertools.combinations(range(n), k):
        rest = [j for j in range(n) if j not in top]
        if not rest or min(ref[list(top)]) >= max(ref[rest]):
            best = max(best, int(hit[list(top)].sum()))
    return best / k


def test_reference_ties_are_resolved_in_favour_of_retrieved_keys_in_any_key_order():
    # Integer scores tie often. Before, numpy.argpartition's order chose which of the keys
    # tied at the reference's k-th place counted (topk_recall([3, 1, 1], [3, 2, 1], k=2)
    # was 0.5, and 1.0 with keys 1 and 2 swapped) and argmax took the first of those tied
    # for first place: recall@1 contradicted 1 − argmax_shift on 740 of these 2,000 rows.
    rng = np.random.default_rng(0)
    r = rng.integers(0, 3, (2000, 6)).astype(float)
    s = rng.integers(0, 3, (2000, 6)).astype(float)
    np.testing.assert_array_equal(topk_recall(r, s, k=1), 1.0 - argmax_shift(r, s))
    perm = rng.permutation(6)
    assert np.array_equal(argmax_shift(r[:, perm], s[:, perm]), argmax_shift(r, s))
    for k in (1, 2, 3, 5):
        got = topk_recall(r, s, k=k)
        np.testing.assert_array_equal(got[:300], [_brute_recall(a, b, k)
                                                  for a, b in zip(r[:300], s[:300])])
        np.testing.assert_array_equal(topk_recall(r[:, perm], s[:, perm], k=k), got)
    assert topk_recall([3.0, 1, 1], [3.0, 2, 1], k=2) == topk_recall([3.0, 1, 1], [3.0, 1, 2], k=2) == 1.0
    assert not argmax_shift([2.0, 2, 1], [1.0, 2, 0])


def test_masked_quantized_keys_are_never_retrieved():
    # With fewer than k unmasked quantized keys the k-th quantized score is -inf, and a
    # masked key "reached" it: recall was 1.0 here although both reference top keys were
    # masked in quant. Brute force as the reference.
    ninf = -np.inf
    assert topk_recall([3.0, 2, 1], [ninf, ninf, 1.0], k=2) == 0.0
    assert topk_recall([3.0, 2, 1], [ninf, 2.0, ninf], k=2) == 0.5
    rng = np.random.default_rng(1)
    r = rng.standard_normal((500, 6))
    s = np.where(rng.random((500, 6)) < 0.6, -np.inf, rng.integers(0, 3, (500, 6)).astype(float))
    s[:, 0] = 0.0                                      # one unmasked key per row
    for k in (1, 2, 4):
        np.testing.assert_array_equal(topk_recall(r, s, k=k), [_brute_recall(a, b, k) for a, b in zip(r, s)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logits_spanning_more_than_the_float_range_give_no_warning(dtype):
    # x − max(x) = −2·max float overflows to −inf: the weight is 0 (its exact value,
    # exp(−6.8e38), underflows anyway) and the log-probability −inf (below −max float).
    # Before: right values, and a RuntimeWarning "overflow encountered in subtract".
    big = np.finfo(dtype).max
    x = np.array([big, -big, 0.0], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert softmax(x).tolist() == [1.0, 0.0, 0.0]
        lp = log_softmax(x)
        assert lp.tolist() == [0.0, -np.inf, -float(big)]
        assert kl_divergence(lp, lp) == 0.0


def test_output_dtypes_are_the_documented_ones():
    """The Returns sections: float32 stays float32 (all operands float32), every other
    dtype, float16, bfloat16 and integers included, gives float64 (softmax read 'same
    float dtype as x', wrong for float16)."""
    import ml_dtypes

    f32 = np.ones((2, 4), np.float32)
    for other in (np.float16, ml_dtypes.bfloat16, np.int64, np.float64):
        x = np.ones((2, 4), other)
        assert softmax(x).dtype == log_softmax(x).dtype == np.float64
        assert attention_logits(f32, x).dtype == attention_weights(x, f32).dtype == np.float64
        assert attention_output(f32, f32, x).dtype == np.float64
    assert softmax(f32).dtype == log_softmax(f32).dtype == np.float32
    assert attention_weights(f32, f32).dtype == attention_output(f32, f32, f32).dtype == np.float32
