"""QJLKeyQuantizer(sketch="srht") sketches its outlier part with the orthogonal kind.

The outlier part k_out is nonzero on n_outliers channels only. An srht row is a
Rademacher vector, so its orthogonal constant 1/(m·√d·E|u₁|) is exact only on average
over orientations (docs/qjl.md, "SRHT"); for k_out = k_j·e_j at m = d every srht sketch
decodes channel j as c·m·k_j = k_j/(√d·E|u₁|), 1.248·k_j at d = 64. The orthogonal
constant is exact for every vector. z-test over R draws, |z| < Z_MAX = 4.5; fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np

from kvstats.quant.qjl_keys import QJLKeyQuantizer
from kvstats.quant.schemes import make_scheme
from kvstats.quant.sketch import make_sketch
from kvstats.theory import sphere_abs_moment

Z_MAX = 4.5


def mean_z(est: np.ndarray, truth) -> np.ndarray:
    """z of the replicate mean (axis 0) against ``truth``."""
    return (est.mean(0) - truth) / (est.std(0, ddof=1) / math.sqrt(est.shape[0]))


def test_srht_keys_sketch_their_outlier_part_orthogonally():
    d = m = 64
    draws = 2000
    K = np.random.default_rng(0).standard_normal((32, d))
    K[:, 5] *= 20                                   # channel 5: the group's outlier
    qk = QJLKeyQuantizer(d, m, sketch="srht", n_outliers=1, seed=0, draws=draws,
                         norm_dtype=np.float64)
    assert (qk.sketch.kind, qk.outlier_sketch.kind) == ("srht", "orthogonal")
    assert qk.describe()["outlier_sketch"] == "orthogonal"
    assert QJLKeyQuantizer(d, m, sketch="srht").describe()["outlier_sketch"] is None
    # the outlier channel is decoded from the outlier sketch alone: unbiased for k_5
    rec = qk.roundtrip(K)[..., 5]                   # (draws, 32)
    assert np.abs(mean_z(rec, K[:, 5])).max() < Z_MAX
    # power: an srht outlier sketch (the former behaviour) sees k_out = k_5·e_5, and at
    # m = d every draw decodes c·m·k_5 = k_5/(√d E|u₁|) = 1.248·k_5 (no variance)
    srht = QJLKeyQuantizer(d, m, sketch="srht", n_outliers=1, seed=0, draws=draws,
                           norm_dtype=np.float64)
    srht.outlier_sketch = make_sketch("srht", m, d, seed=1, draws=draws)
    np.testing.assert_allclose(srht.roundtrip(K)[..., 5],
                               np.broadcast_to(K[:, 5] / (math.sqrt(d) * sphere_abs_moment(d)),
                                               (draws, 32)), rtol=1e-12)
    # same rows, same bits and bytes as any other kind
    gauss = QJLKeyQuantizer(d, m, n_outliers=1)
    assert QJLKeyQuantizer(d, m, sketch="srht", n_outliers=1).stored_bits(32) == gauss.stored_bits(32)
    assert QJLKeyQuantizer(d, m, sketch="srht", n_outliers=1).encode(K).nbytes == gauss.encode(K).nbytes


def test_qjl_scheme_with_srht_and_outliers_builds_an_orthogonal_outlier_sketch():
    s = make_scheme("qjl", 3, 64, seed=0, sketch="srht", n_outliers=2)
    assert s.key_coder.sketch.kind == "srht" and s.key_coder.outlier_sketch.kind == "orthogonal"
