"""Monte Carlo z-scores and Haar draws shared by the sketch tests (test_sketch.py,
test_srht19_closed_forms.py)."""

from __future__ import annotations

import math

import numpy as np

Z_MAX = 4.5


def mean_z(est: np.ndarray, truth) -> np.ndarray:
    """z of the replicate mean (axis 0) against ``truth``."""
    return (est.mean(0) - truth) / (est.std(0, ddof=1) / math.sqrt(est.shape[0]))


def var_z(est: np.ndarray, theory) -> np.ndarray:
    """z of the replicate variance (axis 0) against ``theory`` (SE from the 4th moment)."""
    c = est - est.mean(0)
    s2, m4 = (c ** 2).mean(0), (c ** 4).mean(0)
    return (s2 - theory) / np.sqrt((m4 - s2 ** 2) / est.shape[0])


def haar(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` Haar-random d × d orthogonal matrices (QR with the sign fix, Mezzadri 2007)."""
    q, r = np.linalg.qr(rng.standard_normal((n, d, d)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
