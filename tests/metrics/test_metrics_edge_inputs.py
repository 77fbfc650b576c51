"""Inputs an analysis script feeds the metrics beyond the usual: log-probabilities held as
a model holds them (float16, bfloat16).

Before, kl_divergence converted float16/bfloat16 log-probabilities to float64 and held them
to float64's normalisation tolerance (1e-6), so the log_softmax of a model's logits, kept
in float16, was refused as "not normalised" although it is as normalised as float16 can
hold it (a uniform row over 4,096 keys: log Σ exp = −2.5e-3 in float16, 5.3e-3 in bfloat16).
"""

import ml_dtypes
import numpy as np
import pytest

from kvstats.metrics import kl_divergence, log_softmax

NARROW = [np.float16, ml_dtypes.bfloat16]


def _kl_reference(lp, lq):
    """Σ p (log p − log q) in float64 on the values as held (every p > 0 here)."""
    lp, lq = np.asarray(lp, np.float64), np.asarray(lq, np.float64)
    return np.maximum(np.sum(np.exp(lp) * (lp - lq), axis=-1), 0.0)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("n", [6, 4096, 100_000])
def test_kl_of_narrow_float_log_probabilities(dtype, n):
    rng = np.random.default_rng(n)
    logits = 3.0 * rng.standard_normal((8, n))
    lp = log_softmax(logits).astype(dtype)
    lq = log_softmax(logits + 0.1 * rng.standard_normal((8, n))).astype(dtype)
    np.testing.assert_allclose(kl_divergence(lp, lq), _kl_reference(lp, lq), rtol=1e-9, atol=1e-15)
    # a uniform row: every log p rounded the same way, the worst case of the rounding
    uniform = np.full((1, n), -np.log(n)).astype(dtype)
    assert kl_divergence(uniform, uniform).tolist() == [0.0]


@pytest.mark.parametrize("dtype", NARROW)
def test_kl_still_refuses_unnormalised_narrow_rows(dtype):
    # log Σ exp = log 1.04 ≈ 0.039, beyond what rounding explains at two entries
    with pytest.raises(ValueError, match="logp must be normalised"):
        kl_divergence(np.log([0.5, 0.54]).astype(dtype), np.log([0.5, 0.5]).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int64, ml_dtypes.int4, bool])
def test_kl_of_integer_log_probabilities(dtype):
    # a one-hot distribution's log-probabilities, 0 and -inf, cannot be integers but 0 is:
    # integer input is exact and held to float64's tolerance (ml_dtypes' int4 raised
    # numpy's "not inexact" from the tolerance's finfo)
    lp = np.zeros((2, 1), dtype=dtype)
    assert kl_divergence(lp, lp).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"logp must be normalised .*within 1e-06"):
        kl_divergence(np.zeros((1, 2), dtype=dtype), np.zeros((1, 2), dtype=dtype))
