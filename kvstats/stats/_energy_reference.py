"""Reference (slow, plain) evaluation of the paired energy test through pooled labels.

Not used by any computation of kvstats: it is the baseline that the fast path of
``energy_test(..., paired=True)`` is checked against (tests/stats/test_stats_energy_swapform.py)
and timed against (experiments/bench_energy.py --paired), kept in one place so the two
cannot drift (docs/design.md: every fast path has a plain reference beside it).

The fast path evaluates each within-pair swap as an m x m quadratic form s'Cs
(kvstats/stats/energy.py's module docstring). The reference writes the same swap as a
2m-long label row (pair i's X at pooled position i, its Y at m + i; x marked at i when the
pair keeps its order, at m + i when swapped) and evaluates it through the pooled 2m x 2m
core ``_permutation_statistics``, which is itself tested against brute force
(tests/stats/test_stats_energy.py). It is what ``energy_test(paired=True)`` computed before
the swap form: same data preparation (``_prepare``, ``_unit_scale``), same generator calls
(``_random_swaps`` draws the uniforms ``_random_keeps`` draws), same tie rule.

:func:`exact_pvalue_brute_force` is the plain reference of the exact test
(``energy_test(..., method="exact")``): every element of the relabelling group, all 2**m
swaps or all C(n_x + n_y, n_x) subsets (no symmetry used), each statistic from its own
distance means (``cdist``), the same tie rule (tests/stats/test_energy_exact19.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from kvstats.stats._energy_core import _permutation_statistics, _prepare, _unit_scale
from kvstats.stats._energy_swap import _random_swaps

__all__ = ["PooledPairs", "exact_pvalue_brute_force"]


@dataclass(frozen=True)
class PooledPairs:
    """The prepared pooled sample ``Z`` (2m x p) of m pairs, and its statistics per labelling.

    Built by :meth:`of` from the paired samples as ``energy_test`` prepares them
    (standardised or not, scaled by a power of two); ``kind`` is ``"V"`` or ``"U"``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=(20, 3))
    >>> x = y + 0.2 + 0.1 * rng.normal(size=(20, 3))
    >>> p, stats, tol = PooledPairs.of(x, y, kind="V", standardize=True).test(99, seed=0)
    >>> from kvstats.stats import energy_test
    >>> bool(p == energy_test(x, y, n_resamples=99, seed=0, standardize=True, paired=True,
    ...                       method="permutation").pvalue)
    True
    """

    Z: np.ndarray
    m: int
    kind: str

    @classmethod
    def of(cls, x: np.ndarray, y: np.ndarray, *, kind: str, standardize: bool) -> PooledPairs:
        """The pooled reference of pairs ``(x[i], y[i])`` (validated as ``energy_test`` does)."""
        X, Y, _ = _prepare(x, y, standardize, kind)
        Z, _ = _unit_scale(np.concatenate([X, Y]))
        return cls(Z, len(X), kind)

    def statistics(self, labels: np.ndarray) -> tuple[np.ndarray, float]:
        """(statistic per 2m-long label row, pooled total of distances) via the 2m x 2m core."""
        return _permutation_statistics(self.Z, labels, self.kind)

    def swaps(self, keep: np.ndarray) -> tuple[np.ndarray, float]:
        """:meth:`statistics` of the swaps ``keep`` ((k, m) bool, True: pair keeps its order)."""
        return self.statistics(np.concatenate([keep, ~keep], axis=1))

    def observed(self) -> tuple[float, float]:
        """(observed statistic, pooled total): the labelling with every pair in order."""
        t, total = self.swaps(np.ones((1, self.m), dtype=bool))
        return float(t[0]), total

    def tolerance(self, total: float) -> float:
        """The tie tolerance of ``energy_test``: 1e-10 of the mean pooled distance."""
        return 1e-10 * total / (2 * self.m * (2 * self.m - 1))

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """Statistics of ``k`` random swaps drawn from ``rng`` as the fast path draws them."""
        return self.statistics(_random_swaps(rng, k, self.m))[0]

    def test(self, n_resamples: int, seed: int) -> tuple[float, np.ndarray, float]:
        """(p-value, statistics with the observed one first, tie tolerance) of the paired
        test with ``n_resamples`` swaps from ``np.random.default_rng(seed)``: ties within
        the tolerance count as exceedances, p = (1 + #exceed)/(1 + B)."""
        labels = np.empty((n_resamples + 1, 2 * self.m), dtype=bool)
        labels[0, :self.m], labels[0, self.m:] = True, False
        _random_swaps(np.random.default_rng(seed), n_resamples, self.m, out=labels[1:])
        t, total = self.statistics(labels)
        tol = self.tolerance(total)
        p = float((1.0 + np.count_nonzero(t[1:] >= t[0] - tol)) / (1.0 + n_resamples))
        return p, t, tol


def exact_pvalue_brute_force(x: np.ndarray, y: np.ndarray, *, paired: bool, kind: str = "V",
                             standardize: bool = False) -> float:
    """The exact permutation p-value #{g: T_g >= T_obs}/|G| by brute force over the whole group.

    Paired: the 2**m swap vectors (pair i's rows exchanged or not); else every
    len(x)-subset of the pooled rows as the x sample. Each T_g is the plain energy distance
    (V: 2 mean|X - Y| - mean|X - X'| - mean|Y - Y'| over all ordered pairs; U: within
    means over distinct pairs) of the relabelled samples; ties within 1e-10 of the mean
    pooled distance count, as in ``energy_test``. For a few thousand relabellings at most.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(4.0)[:, None]
    >>> exact_pvalue_brute_force(x + 10.0, x, paired=True)      # 2 of the 16 swaps: the floor
    0.125
    """
    X, Y, _ = _prepare(x, y, standardize, kind)
    Z = np.concatenate([X, Y])
    n, n_x = len(Z), len(X)

    def statistic(ix: np.ndarray, iy: np.ndarray) -> float:
        a, b = Z[ix], Z[iy]
        within = (lambda k: k * k) if kind == "V" else (lambda k: k * (k - 1))
        return (2 * cdist(a, b).mean() - cdist(a, a).sum() / within(len(a))
                - cdist(b, b).sum() / within(len(b)))

    if paired:
        m = n_x
        group = [(np.where(sw, np.arange(m) + m, np.arange(m)),
                  np.where(sw, np.arange(m), np.arange(m) + m))
                 for sw in itertools.product([False, True], repeat=m)]
    else:
        group = [(np.array(c), np.setdiff1d(np.arange(n), c))
                 for c in itertools.combinations(range(n), n_x)]
    t = np.array([statistic(ix, iy) for ix, iy in group])
    t_obs = statistic(np.arange(n_x), np.arange(n_x, n))
    tol = 1e-10 * cdist(Z, Z).sum() / (n * (n - 1))
    return float(np.count_nonzero(t >= t_obs - tol) / len(t))
