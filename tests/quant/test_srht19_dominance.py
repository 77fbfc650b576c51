"""An srht estimate with one dominant key coordinate: exact, deterministic, biased.

docs/qjl.md, "SRHT": if |k_j| > Σ_{i≠j}|k_i| every sign is sign(H_rj ε_j k_j), and for m a
multiple of d_pad the columns of H are orthogonal over all rows, so every sketch
estimates c·m·‖k‖·sign(k_j)·q_j (no variance; with ⟨q, k⟩ = 0 a bias with no bound
relative to ⟨q, k⟩). Fixed seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kvstats.quant.qjl import qjl_encode, qjl_scores
from kvstats.quant.sketch import make_sketch

DOCS = Path(__file__).resolve().parents[2] / "docs"


def pair_estimates(sketch, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """QJL estimates ``(R, pairs)`` of ⟨q_i, k_i⟩ (exact float64 norms)."""
    est = qjl_scores(sketch, q, qjl_encode(sketch, k, norm_dtype=np.float64))
    return np.diagonal(est, axis1=-2, axis2=-1)


@pytest.mark.parametrize("d,m", [(64, 64), (64, 128), (48, 64), (48, 128)])
def test_srht_estimate_is_exact_and_deterministic_when_one_coordinate_dominates(d, m):
    """|k_j| > Σ_{i≠j}|k_i| and m a multiple of d_pad: every sketch estimates
    c·m·‖k‖·sign(k_j)·q_j; with ⟨q, k⟩ = 0 that is a bias with no bound relative to
    ⟨q, k⟩. The condition is sufficient, not necessary: a sketch gives that value when no
    row's other terms outweigh k_j, which at |k_j| = 4‖k_{−j}‖ (Gaussian others) is
    nearly every sketch; at |k_j| = ‖k_{−j}‖ the estimate varies."""
    rng = np.random.default_rng(d + m)
    j, draws = 3, 300
    k = 0.1 * rng.standard_normal(d)
    k[j] = -1.01 * np.abs(np.delete(k, j)).sum()            # dominant, negative
    q = rng.standard_normal(d)
    q -= (q @ k) / (k @ k) * k                               # ⟨q, k⟩ = 0
    s = make_sketch("srht", m, d, seed=rng, draws=draws)
    est = pair_estimates(s, q[None], k[None])[:, 0]
    want = s.scale * m * np.linalg.norm(k) * np.sign(k[j]) * q[j]
    assert abs(q @ k) < 1e-12 and abs(want) > 0.1
    np.testing.assert_allclose(est, want, rtol=1e-9)         # every draw, no variance
    rest = np.linalg.norm(np.delete(k, j))
    for ratio, low, high in ((4.0, 0.95, 1.0), (1.0, 0.0, 0.05)):   # share of such sketches
        k[j] = -ratio * rest
        q = rng.standard_normal(d)
        est = pair_estimates(s, q[None], k[None])[:, 0]
        same = np.isclose(est, s.scale * m * np.linalg.norm(k) * np.sign(k[j]) * q[j], rtol=1e-9)
        assert low <= same.mean() <= high


def test_qjl_md_states_the_dominance_condition_without_a_bias_limit():
    text = (DOCS / "qjl.md").read_text(encoding="utf-8")
    assert "|k_j| > Σ_{i≠j}|k_i|" in text
    assert "bias is up to" not in text
