"""The default routing-set size k = 5 on fewer than 5 keys: the error says it is the default.

``error_profile(trials with N = 4)`` and ``topk_recall`` of 3 scores used to answer
"k must be an integer in [1, 4]; received 5" to a caller who never passed k.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.metrics import (angle, argmax_shift, error_profile, kl_divergence, log_softmax,
                             norm_ratio, pooled_snr_db, snr_db, summarize_profile, topk_recall)


@pytest.mark.parametrize("n_keys", [1, 4])
def test_error_profile_default_k_on_few_keys_says_default(n_keys):
    t = kvstats.sample("gaussian", 2, n_keys, 3, seed=0)
    with pytest.raises(ValueError, match=rf"^k must be an integer in \[1, {n_keys}\] \(the trials "
                                         rf"have N = {n_keys} key\(s\)\): the default k=5 is too "
                                         rf"large; pass k <= {n_keys}$"):
        error_profile(t, t.K, t.V)
    # a k the caller chose is reported as received
    with pytest.raises(ValueError, match=rf"^k must be an integer in \[1, {n_keys}\]; received 6$"):
        error_profile(t, t.K, t.V, k=6)
    assert error_profile(t, t.K, t.V, k=n_keys).attrs["k"] == n_keys


def test_topk_recall_default_k_on_few_keys_says_default():
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 3\] \(ref has 3 key\(s\) "
                                         r"along axis -1\): the default k=5 is too large; pass k <= 3$"):
        topk_recall(np.arange(3.0), np.arange(3.0))
    with pytest.raises(ValueError, match=r"\(ref has 2 key\(s\) along axis 0\): the default k=5"):
        topk_recall(np.zeros((2, 7)), np.zeros((2, 7)), axis=0)
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 3\]; received 4$"):
        topk_recall(np.arange(3.0), np.arange(3.0), k=4)
    with pytest.raises(TypeError, match=r"^k must be an integer in \[1, 3\]; received 5.0$"):
        topk_recall(np.arange(3.0), np.arange(3.0), k=5.0)
    assert float(topk_recall(np.arange(6.0), np.arange(6.0))) == 1.0     # 5 of 6: the default fits


def test_small_shapes_give_values_or_value_errors():
    # every public metric at N (or n) = 1..4 and d = 1..3 relying on defaults: finite or
    # ±inf values (never NaN), or a ValueError; no warning, no other exception
    rng = np.random.default_rng(0)
    for T, N, d, n_q in itertools.product([1, 2], [1, 2, 3, 4], [1, 2, 3], [1, 2]):
        t = kvstats.sample("gaussian", T, N, d, n_queries=n_q, seed=1)
        noisy = (t.K + 0.1 * rng.standard_normal(t.K.shape), 1.1 * t.V)
        for K_hat, V_hat in ((t.K, t.V), noisy, (0 * t.K, 0 * t.V)):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                df = error_profile(t, K_hat, V_hat, k=1)
                s = summarize_profile(df)
            assert not df.isna().any().any() and not s.isna().any().any()
        x, y = rng.standard_normal((N, d)), rng.standard_normal((N, d))
        for fn in (snr_db, angle, norm_ratio, pooled_snr_db):
            for a, b in ((x, y), (0 * x, y), (0 * x, 0 * y), (x, x)):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    assert not np.isnan(fn(a, b)).any(), (fn.__name__, a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lp, lq = log_softmax(x[:, 0]), log_softmax(y[:, 0])
            assert np.isfinite(kl_divergence(lp, lq))
            assert argmax_shift(x[:, 0], y[:, 0]).dtype == bool
    assert isinstance(summarize_profile(pd.DataFrame({"kl": [0.5]})), pd.DataFrame)
