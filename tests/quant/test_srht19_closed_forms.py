"""The srht closed forms refuse a d that is not a power of two.

There the rows of a block, Hadamard rows cut to d columns, are correlated, and the
orthogonal variance (which qjl_variance("srht") returned) is off by ×0.76–2.3
(docs/qjl.md, "SRHT"). The Monte Carlo rotates the pair by a Haar matrix per sketch (the
orientation average the srht closed form describes): the orthogonal value holds at
d = 64 (|z| < Z_MAX = 4.5) and is rejected at d = 80 (|z| > 3·Z_MAX). Fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from _mc_checks import Z_MAX, haar, mean_z, var_z

from kvstats.quant.sketch import make_sketch
from kvstats.theory import (bit_trade_inflation, qjl_reconstruction_mse, qjl_variance,
                            residual_inflation)


@pytest.mark.parametrize("d,m", [(96, 96), (96, 128), (65, 65), (80, 160)])
def test_srht_closed_forms_refuse_d_not_a_power_of_two(d, m):
    q, k = np.random.default_rng(0).standard_normal((2, d))
    for call in (lambda: qjl_variance("srht", m, q, k), lambda: residual_inflation(d, m, "srht"),
                 lambda: qjl_reconstruction_mse("srht", m, d),
                 lambda: bit_trade_inflation(4, d, m, "srht")):
        with pytest.raises(ValueError, match=rf"kind='srht' has no closed form at d={d}.*'orthogonal'"):
            call()
    # the other kinds keep their values; srht at a power of two keeps the orthogonal one
    assert np.isfinite(qjl_variance("orthogonal", m, q, k)) and residual_inflation(d, m) > 0
    assert residual_inflation(128, m, "srht") == residual_inflation(128, m, "orthogonal")
    assert qjl_reconstruction_mse("srht", m, 64) == qjl_reconstruction_mse("orthogonal", m, 64)


@pytest.mark.parametrize("d,holds", [(64, True), (80, False)])
def test_orthogonal_variance_fits_srht_only_at_powers_of_two(d, holds):
    """Over a Haar rotation of the pair per sketch (the average qjl_variance("srht")
    describes), m = d: the orthogonal closed form holds at d = 64 and is rejected at
    d = 80, whose truncated Hadamard rows are correlated (measured ratio ≈ 1.7)."""
    rng = np.random.default_rng(d)
    draws = 3000
    q, k = rng.standard_normal((2, 3, d))
    rot = haar(rng, draws, d)
    qr, kr = q @ np.swapaxes(rot, -1, -2), k @ np.swapaxes(rot, -1, -2)   # (draws, 3, d)
    s = make_sketch("srht", d, d, seed=rng, draws=draws)
    sq, sk = s.project(qr), s.project(kr)
    est = s.scale * np.linalg.norm(kr, axis=-1) * (sq * np.where(sk >= 0, 1.0, -1.0)).sum(-1)
    assert np.abs(mean_z(est, (q * k).sum(-1))).max() < Z_MAX      # unbiased over orientations
    z = var_z(est, qjl_variance("orthogonal", d, q, k))
    if holds:
        assert np.abs(z).max() < Z_MAX
    else:
        assert np.abs(z).min() > 3 * Z_MAX
