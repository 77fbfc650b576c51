"""Reference helpers shared by tests/test_theory.py and tests/test_qjl_theory.py, written
from scipy and numpy alone (never from kvstats) so that the closed forms are checked
against independent constructions."""

import numpy as np
from scipy import stats


def within(estimate_samples, expected, z=4.0):
    """|mean - expected| < z standard errors of the mean."""
    x = np.asarray(estimate_samples, dtype=float)
    se = x.std(ddof=1) / np.sqrt(x.size)
    return abs(x.mean() - expected) < z * se


def sphere_abs_mean(d):
    """E|X| for the sphere coordinate, from scipy's Beta((d−1)/2, (d−1)/2): X = 2B − 1."""
    a = (d - 1) / 2
    return stats.beta(a, a).expect(lambda y: abs(2 * y - 1))


def haar(n, d, rng):
    """n Haar rotations (QR of Gaussian matrices with the sign fix, Mezzadri 2007)."""
    qm, r = np.linalg.qr(rng.standard_normal((n, d, d)))
    return qm * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]
