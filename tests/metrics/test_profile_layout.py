"""error_profile's numbers do not depend on the memory layout of its inputs.

Before, a Fortran-ordered (or transposed-view) K̂ changed norm_ratio_k, and such a V̂
changed phi_v, snr_t, phi_t and norm_ratio_t, in the last bits (BLAS and numpy's dot
loops round by stride); the same for the trials' own arrays. Every scheme and data source
hands over C-ordered arrays, whose numbers are unchanged.
"""

import numpy as np
import pytest

import kvstats
from kvstats.data import Trials
from kvstats.metrics import error_profile


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
