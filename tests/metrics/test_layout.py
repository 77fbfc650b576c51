"""The metrics' numbers do not depend on the memory layout of their inputs.

Before, a Fortran-ordered (or transposed-view) K̂ changed error_profile's norm_ratio_k,
and such a V̂ changed phi_v, snr_t, phi_t and norm_ratio_t, in the last bits (BLAS and
numpy's dot and sum loops round by stride); the same for the trials' own arrays, and for
every public function of kvstats.metrics (attention_logits/_weights/_output, softmax,
log_softmax, kl_divergence, snr_db, angle, norm_ratio) at d = 96, 128, 1000; softmax,
log_softmax and kl_divergence along axis 0 also differed from the same distributions along
axis -1. Every scheme and data source hands over C-ordered arrays, whose numbers are
unchanged (the distributions along the last axis).
"""

import numpy as np
import pytest

import kvstats
from kvstats.data import Trials
from kvstats.metrics import (angle, argmax_shift, attention_logits, attention_output,
                             attention_weights, error_profile, kl_divergence, log_softmax,
                             norm_ratio, pooled_snr_db, snr_db, softmax, topk_recall)


def _fortran_view(x):
    """The same values, laid out last axis slowest (a transpose of a copy, not a copy)."""
    return np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_profile_is_the_same_for_any_memory_layout(dtype):
    t = kvstats.sample("gaussian", 3, 96, 33, seed=3, n_queries=7).astype(dtype)
    rng = np.random.default_rng(0)
    Kh = (t.K + 0.1 * rng.standard_normal(t.K.shape)).astype(dtype)
    Vh = (t.V + 0.1 * rng.standard_normal(t.V.shape)).astype(dtype)
    ref = error_profile(t, Kh, Vh)
    cases = {
        "K_hat Fortran": (t, np.asfortranarray(Kh), Vh),
        "V_hat Fortran": (t, Kh, np.asfortranarray(Vh)),
        "both transposed views": (t, _fortran_view(Kh), _fortran_view(Vh)),
        "trials transposed views": (Trials(_fortran_view(t.K), _fortran_view(t.V),
                                           _fortran_view(t.q), dict(t.meta)), Kh, Vh),
    }
    for label, (trials, k_hat, v_hat) in cases.items():
        got = error_profile(trials, k_hat, v_hat)
        for column in ref.columns:
            np.testing.assert_array_equal(got[column].to_numpy(), ref[column].to_numpy(),
                                          err_msg=f"{column}, {label}")


LAYOUTS = {"Fortran": np.asfortranarray, "transposed view": _fortran_view,
           "strided view": lambda x: np.repeat(x, 2, axis=-1)[..., ::2]}


@pytest.mark.parametrize("d", [96, 1000])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_public_metrics_are_the_same_for_any_memory_layout(d, dtype):
    rng = np.random.default_rng(d)
    q, K, V = (rng.standard_normal((3, n, d)).astype(dtype) for n in (7, 33, 33))
    x = rng.standard_normal((50, d)).astype(dtype)
    x_hat = (x + 0.1 * rng.standard_normal(x.shape)).astype(dtype)
    lg = (3 * rng.standard_normal((5, d))).astype(dtype)
    lg2 = (lg + 0.1 * rng.standard_normal(lg.shape)).astype(dtype)
    calls = {
        "attention_logits": lambda f: attention_logits(f(q), f(K)),
        "attention_weights": lambda f: attention_weights(f(q), f(K)),
        "attention_output": lambda f: attention_output(f(q), f(K), f(V)),
        "softmax": lambda f: softmax(f(lg)),
        "softmax axis 0": lambda f: softmax(f(lg), axis=0),
        "log_softmax": lambda f: log_softmax(f(lg)),
        "kl_divergence": lambda f: kl_divergence(f(log_softmax(lg)), f(log_softmax(lg2))),
        "topk_recall": lambda f: topk_recall(f(lg), f(lg2), k=3),
        "argmax_shift": lambda f: argmax_shift(f(lg), f(lg2)),
        "snr_db": lambda f: snr_db(f(x), f(x_hat)),
        "angle": lambda f: angle(f(x), f(x_hat)),
        "norm_ratio": lambda f: norm_ratio(f(x), f(x_hat)),
        "pooled_snr_db": lambda f: pooled_snr_db(f(x), f(x_hat)),
    }
    for name, call in calls.items():
        ref = call(lambda a: a)
        for label, layout in LAYOUTS.items():
            np.testing.assert_array_equal(call(layout), ref, err_msg=f"{name}, {label}")
    # nor on which axis holds the distribution: along axis 0 of a C-ordered transpose it
    # is the one along axis -1 of the original, bit for bit
    lg_t, lp, lq = np.ascontiguousarray(lg.T), log_softmax(lg), log_softmax(lg2)
    np.testing.assert_array_equal(softmax(lg_t, axis=0), softmax(lg).T)
    np.testing.assert_array_equal(log_softmax(lg_t, axis=0), lp.T)
    np.testing.assert_array_equal(kl_divergence(np.ascontiguousarray(lp.T), np.ascontiguousarray(lq.T),
                                                axis=0), kl_divergence(lp, lq))
