"""QJL variance closed forms at extreme magnitudes (referee pass 3).

The variances are of degree 2 in q and in k, so scaling q by 2**600 and k by 2**-600
(exact in float64) must leave them unchanged, bit for bit: before the fix ||q||^2
overflowed to inf and ||k||^2 underflowed to 0, and the result was NaN (or 0).
"""

import numpy as np
import pytest

from kvstats.theory import qjl_inner_product_variance, qjl_variance

UP, DOWN = 2.0**600, 2.0**-600


@pytest.mark.parametrize("kind", ["gaussian", "orthogonal", "srht"])
@pytest.mark.parametrize("m", [3, 16])
def test_qjl_variance_is_invariant_to_exact_opposite_scalings(kind, m):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 5, 8))
    plain = qjl_variance(kind, m, q, k)
    assert np.all(np.isfinite(plain)) and np.all(plain > 0)
    assert np.array_equal(qjl_variance(kind, m, q * UP, k * DOWN), plain)
    assert np.array_equal(qjl_variance(kind, m, q * DOWN, k * UP), plain)
    # a batch mixing ordinary and extreme rows: each row as alone
    qm = q.copy()
    qm[0] *= UP
    km = k.copy()
    km[0] *= DOWN
    assert np.array_equal(qjl_variance(kind, m, qm, km), plain)


def test_qjl_inner_product_variance_is_invariant_to_exact_opposite_scalings():
    plain = qjl_inner_product_variance([1.0, 3.0], [2.0, 0.5], [0.3, -0.9], 4)
    assert np.array_equal(qjl_inner_product_variance([UP, 3.0 * UP], [2.0 * DOWN, 0.5 * DOWN],
                                                     [0.3, -0.9], 4), plain)


def test_a_variance_beyond_float64_is_a_value_error_not_nan():
    with pytest.raises(ValueError, match="q and k.*exceeds the float64 range"):
        qjl_variance("orthogonal", 4, np.full(4, 1e170), np.array([1e170, 0, 0, 0]))
    with pytest.raises(ValueError, match="q_norm and k_norm.*exceeds the float64 range"):
        qjl_inner_product_variance(1e200, 1e200, 0.5, 1)
