"""Permutation p-values with the resolution a multiple-testing family needs.

A Monte Carlo permutation test with B relabellings cannot return a p-value below
1/(1 + B). Inside a family of m tests corrected by Holm (or Bonferroni, Hommel, BH), the
smallest p-value must reach alpha/m to be rejected, so B = 499 can never reject in a
family of 1,140 tests (1/500 x 1,140 = 2.28). :func:`required_resolution` (its own module,
:mod:`kvstats.stats.family_resolution`) gives the B a family needs;
:func:`sequential_permutation_test` reaches it without paying B
permutations for every test, by the sequential Monte Carlo p-value of Besag & Clifford
(1991): draw relabellings in order and stop at the h-th exceedance (p = h/L after L
draws), or after B_max draws with fewer than h (p = (1 + #exceed)/(1 + B_max)).
Clearly null pairs stop after about h(1 + ln(B_max/h)) draws; clearly different pairs
get all B_max. :func:`energy_test_sequential` is the energy test of
:mod:`kvstats.stats.energy` driven this way (same permutation core); where the
relabelling group is small it enumerates the group instead and returns the exact p-value
at once (``method="exact"``), because a Monte Carlo test on data at a small group's
extreme ties the observed statistic on a share ``floor`` of its draws and rejects at
1/(1 + B_max) only with probability (1 - floor)^B_max
(:func:`~kvstats.stats.family_resolution.monte_carlo_resolution`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int

from kvstats._checks import _describe, as_generator, check_int, check_real

from ._base import _FrameMixin, monte_carlo_pvalue_interval
from .catalog import CORRECTIONS  # noqa: F401  (exported: the corrections B is sized for)
# the B a family needs has its own module; its names are exported here too
from .family_resolution import (Resolution, _permutations_for,  # noqa: F401
                                monte_carlo_resolution, required_resolution)

__all__ = ["CORRECTIONS", "Resolution", "SequentialPermutationResult",
           "EnergySequentialResult", "required_resolution", "monte_carlo_resolution",
           "expected_null_permutations", "sequential_permutation_test",
           "energy_test_sequential"]

_FIRST_BATCH = 64           # first batch of relabellings; later batches double ...
_MAX_BATCH = 8192           # ... up to this many
_BATCH_BYTES = 64 * 2**20   # cap on the (k, n) int64 permutation indices of one batch


@dataclass(frozen=True)
class SequentialPermutationResult(_FrameMixin):
    """Result of :func:`sequential_permutation_test`.

    Attributes
    ----------
    statistic : float
        Observed statistic (larger = more evidence against the null).
    pvalue : float
        h/L when the h-th exceedance came at draw L (``stopped_early``), else
        (1 + ``n_exceed``)/(1 + ``max_permutations``). Valid: P(p <= u) <= u under the null.
    n_permutations : int
        Relabellings used (L, or ``max_permutations``).
    n_exceed : int
        Relabellings with a statistic >= the observed one (within the tie tolerance).
    stopped_early : bool
        Whether the test stopped at the h-th exceedance.
    min_attainable_p : float
        1/(1 + ``max_permutations``): the design's resolution, whatever the data, for the
        generic test; the energy tests' results say what theirs holds (the relabelling
        group's floor when exact, :func:`~kvstats.stats.family_resolution.monte_carlo_resolution`
        of it when drawn).
    max_permutations : int
        B_max.
    h : int
        Exceedances that stop the test.
    """

    statistic: float
    pvalue: float
    n_permutations: int
    n_exceed: int
    stopped_early: bool
    min_attainable_p: float
    max_permutations: int
    h: int
    _test_name = "sequential_permutation"

    def resolvable(self, alpha_needed: float) -> bool:
        """Whether this design could have returned p <= ``alpha_needed`` (e.g. alpha/m).

        A property of B_max only: a test that could not have rejected must be reported as
        "not resolvable at B = ...", never as "no significant difference".

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.stats.sequential import sequential_permutation_test
        >>> z = np.random.default_rng(0).normal(size=30)
        >>> diff = lambda perm: np.abs(z[perm[:, :15]].mean(1) - z[perm[:, 15:]].mean(1))
        >>> res = sequential_permutation_test(diff, 30, max_permutations=499, seed=1)
        >>> res.resolvable(0.05), res.resolvable(0.05 / 1140)   # 1/500 > 0.05/1140
        (True, False)
        """
        alpha_needed = check_real(alpha_needed, "alpha_needed", low=0.0, high=1.0, low_open=True)
        return self.min_attainable_p <= alpha_needed

    def pvalue_interval(self, confidence: float = 0.99) -> tuple[float, float]:
        """Monte Carlo error: an exact interval for the permutation p-value the draws estimate.

        u = P(T_perm >= T_obs) over uniformly random relabellings (the p-value with
        infinitely many draws). Not stopped: Clopper–Pearson for ``n_exceed`` of
        ``n_permutations``; stopped at the h-th exceedance: the inverse-binomial limits
        (:func:`kvstats.stats._base.monte_carlo_pvalue_interval`). Each limit holds with
        probability >= (1 + confidence)/2. A stopped test's p = h/L is uncertain by about
        1/sqrt(h) relative (32% at h = 10); read a verdict near a corrected level against
        this interval, not against the p-value alone.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.stats.sequential import sequential_permutation_test
        >>> z = np.random.default_rng(0).normal(size=30)
        >>> diff = lambda perm: np.abs(z[perm[:, :15]].mean(1) - z[perm[:, 15:]].mean(1))
        >>> res = sequential_permutation_test(diff, 30, max_permutations=999, seed=1)
        >>> res.stopped_early, res.n_permutations, round(res.pvalue, 3)
        (True, 18, 0.556)
        >>> [round(v, 3) for v in res.pvalue_interval()]     # 99%: h = 10 is coarse
        [0.247, 0.824]
        """
        confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                                high_open=True)
        return monte_carlo_pvalue_interval(self.n_exceed, self.n_permutations,
                                           self.stopped_early, confidence)


@dataclass(frozen=True)
class EnergySequentialResult(SequentialPermutationResult):
    """Result of :func:`energy_test_sequential`: the fields of
    :class:`SequentialPermutationResult` plus those of the energy test.

    ``min_attainable_p`` is the test's resolution (:func:`energy_test_sequential`,
    Returns). With ``method`` "exact" the p-value is (1 + ``n_exceed``)/``n_permutations``
    over every relabelling class (the observed one included in ``n_permutations``), with
    no Monte Carlo error; ``stopped_early`` is False.

    Attributes
    ----------
    test_statistic : float
        n_x n_y/(n_x + n_y) times ``statistic`` (Székely & Rizzo; dcor).
    kind, standardize, n_x, n_y, dim, paired, method :
        As in :func:`kvstats.stats.energy_test`.
    """

    test_statistic: float = math.nan
    kind: str = "V"
    standardize: bool = False
    n_x: int = 0
    n_y: int = 0
    dim: int = 0
    paired: bool = False
    method: str = "permutation"
    _test_name = "energy_test_sequential"

    def pvalue_interval(self, confidence: float = 0.99) -> tuple[float, float]:
        """As :meth:`SequentialPermutationResult.pvalue_interval`; (p, p) for an exact p-value.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.stats.sequential import energy_test_sequential
        >>> Z = np.random.default_rng(0).normal(size=(10, 3))   # 10 pairs: 512 swap classes
        >>> res = energy_test_sequential(Z + 1.0, Z, max_permutations=999, paired=True)
        >>> res.method, res.pvalue, res.pvalue_interval()
        ('exact', 0.001953125, (0.001953125, 0.001953125))
        """
        if self.method == "exact":
            check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                       high_open=True)
            return self.pvalue, self.pvalue
        return super().pvalue_interval(confidence)


def expected_null_permutations(h: int, max_permutations: int) -> float:
    """Mean number of relabellings a sequential test uses under a continuous null.

    With U = P(T_perm >= T_obs) uniform under the null, P(N > l) = P(Bin(l, U) <= h - 1)
    = min(1, h/(l + 1)), so E[N] = h (1 + H_B - H_h) ~ h (1 + ln(B/h)) (H = harmonic
    numbers, B = ``max_permutations``). Ties make the test stop earlier.

    Examples
    --------
    >>> from kvstats.stats.sequential import expected_null_permutations
    >>> round(expected_null_permutations(10, 22799), 1)
    86.8
    """
    from scipy.special import digamma

    h = check_int(h, "h", low=1)
    b = check_int(max_permutations, "max_permutations", low=1)
    if h >= b:
        return float(b)
    return float(h * (1.0 + digamma(b + 1) - digamma(h + 1)))


def _max_permutations(max_permutations, alpha_needed) -> int:
    if (max_permutations is None) == (alpha_needed is None):
        # no default: the cap is the caller's choice, and what the test can resolve depends on it
        raise ValueError("give exactly one of max_permutations and alpha_needed; received "
                         f"max_permutations={max_permutations!r}, alpha_needed={alpha_needed!r} "
                         "(e.g. max_permutations=999, energy_test's n_resamples, or, for a test "
                         "in a corrected family of m, alpha_needed=required_resolution(m).p_needed)")
    if max_permutations is not None:
        return check_int(max_permutations, "max_permutations", low=1)
    alpha_needed = check_real(alpha_needed, "alpha_needed", low=0.0, high=1.0, low_open=True)
    return _permutations_for(alpha_needed)


def _run(draw: Callable[[np.random.Generator, int], np.ndarray], observed: float, *,
         max_permutations: int, h: int, rng: np.random.Generator, tol: float, batch: int,
         max_batch: int):
    """The Besag–Clifford loop; returns (pvalue, used, n_exceed, stopped_early).

    Batches only group the computation: the stopping rule is applied draw by draw (the
    draws after the h-th exceedance in its batch are discarded), so the p-value is the
    one of the one-at-a-time procedure.
    """
    exceed, used, size = 0, 0, batch
    while used < max_permutations:
        k = min(size, max_permutations - used)
        t = np.asarray(draw(rng, k), dtype=np.float64)
        if t.shape != (k,):
            raise ValueError(f"stat must return one statistic per relabelling, shape ({k},); "
                             f"received {_describe(t)}")
        if not np.isfinite(t).all():
            # +-inf too: an overflowed statistic would count as an exceedance (+inf) or not
            # (-inf) whatever its true value
            bad = int(np.count_nonzero(~np.isfinite(t)))
            raise ValueError(f"stat returned NaN or inf for {bad} of {k} relabellings; a "
                             "non-finite statistic has no p-value (overflow? rescale the data)")
        cum = exceed + np.cumsum(t >= observed - tol)
        if cum[-1] >= h:
            at = int(np.argmax(cum >= h)) + 1      # draw of the h-th exceedance in this batch
            used += at
            return h / used, used, h, True
        exceed, used, size = int(cum[-1]), used + k, min(2 * size, max_batch)
    return (1.0 + exceed) / (1.0 + max_permutations), used, exceed, False


def _check_common(h, batch):
    return check_int(h, "h", low=1), check_int(batch, "batch", low=1)


def sequential_permutation_test(
        stat: Callable[[Int[np.ndarray, "k n"]], Float[np.ndarray, "k"]], n: int, *,
        alpha_needed: float | None = None, max_permutations: int | None = None, h: int = 10,
        seed=0, rtol: float = 1e-10, atol: float = 0.0,
        batch: int = _FIRST_BATCH) -> SequentialPermutationResult:
    """Besag–Clifford sequential Monte Carlo permutation test of any statistic.

    Parameters
    ----------
    stat : callable
        ``stat(perm)`` with ``perm`` an int array of shape (k, n) whose rows are
        permutations of ``range(n)`` (a relabelling of the pooled data: row ``perm[j]``
        reorders it) returns the k statistics, shape (k,); larger = more extreme. It is
        called once with the identity, shape (1, n), for the observed statistic.
    n : int >= 1
        Number of pooled observations.
    alpha_needed : float in (0, 1], optional
        Smallest p the test must be able to reach (e.g. ``required_resolution(m).p_needed``);
        sets B_max to the smallest B with 1/(1 + B) <= alpha_needed.
    max_permutations : int >= 1, optional
        B_max directly. Give exactly one of the two.
    h : int >= 1
        Exceedances that stop the test (Besag & Clifford suggest 10-20). h > B_max gives
        the fixed-B test: p = (1 + #exceed)/(1 + B_max).
    seed : int, SeedSequence, Generator or None
        Randomness of the relabellings.
    rtol, atol : float >= 0
        A permuted statistic t counts as an exceedance when
        t >= observed - (rtol |observed| + atol): values equal to the observed one up to
        floating-point rounding count as ties (>=), so rounding can only raise p.
    batch : int >= 1
        First batch of relabellings; batches double up to 8192 (and ~64 MB of indices).
        Batching changes the work, never the p-value's definition.

    Returns
    -------
    SequentialPermutationResult

    Notes
    -----
    Validity (Besag & Clifford 1991): given the pooled data, U = P(T_perm >= T_obs) is
    uniform (continuous) or stochastically larger (ties) under the null, and
    P(p <= h/l) = P(Bin(l - 1, U) <= h - 1) = h/l, P(p <= (g + 1)/(B + 1)) = (g + 1)/(B + 1),
    so the p-value is exact on its support for continuous statistics and conservative
    with ties. A NaN or infinite statistic (observed or permuted) raises ``ValueError``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats.sequential import sequential_permutation_test
    >>> rng = np.random.default_rng(0)
    >>> z = np.concatenate([rng.normal(size=20), rng.normal(2, 1, size=25)])
    >>> diff = lambda perm: np.abs(z[perm[:, :20]].mean(1) - z[perm[:, 20:]].mean(1))
    >>> res = sequential_permutation_test(diff, 45, alpha_needed=0.05 / 1140, seed=1)
    >>> res.pvalue == res.min_attainable_p, res.n_permutations, res.resolvable(0.05 / 1140)
    (True, 22799, True)
    >>> z = rng.normal(size=45)                       # a null pair stops early
    >>> sequential_permutation_test(diff, 45, alpha_needed=0.05 / 1140, seed=1).stopped_early
    True
    """
    if not callable(stat):
        raise TypeError(f"stat must be callable; received {_describe(stat)}")
    n = check_int(n, "n", low=1)
    b_max = _max_permutations(max_permutations, alpha_needed)
    h, batch = _check_common(h, batch)
    rtol = check_real(rtol, "rtol", low=0.0)
    atol = check_real(atol, "atol", low=0.0)
    rng = as_generator(seed)
    obs = np.asarray(stat(np.arange(n)[None, :]), dtype=np.float64)
    if obs.shape != (1,):
        raise ValueError(f"stat must return shape (1,) for one relabelling; received {_describe(obs)}")
    observed = float(obs[0])
    if not np.isfinite(observed):
        raise ValueError(f"the observed statistic is {observed}; a non-finite statistic has no "
                         "p-value (overflow? rescale the data)")
    max_batch = max(1, min(_MAX_BATCH, _BATCH_BYTES // (8 * n)))

    def draw(gen, k):
        return stat(gen.permuted(np.tile(np.arange(n), (k, 1)), axis=1))

    p, used, exceed, early = _run(draw, observed, max_permutations=b_max, h=h, rng=rng,
                                  tol=rtol * abs(observed) + atol, batch=min(batch, max_batch),
                                  max_batch=max_batch)
    return SequentialPermutationResult(statistic=observed, pvalue=float(p), n_permutations=used,
                                       n_exceed=exceed, stopped_early=early,
                                       min_attainable_p=1.0 / (1 + b_max),
                                       max_permutations=b_max, h=h)


def energy_test_sequential(X: Float[np.ndarray, "n_x *dim"], Y: Float[np.ndarray, "n_y *dim"], *,
                           alpha_needed: float | None = None,
                           max_permutations: int | None = None, h: int = 10, seed=0,
                           standardize: bool = False, kind: str = "V",
                           batch: int = _FIRST_BATCH,
                           paired: bool = False, method: str = "auto") -> EnergySequentialResult:
    """Energy permutation test with a Besag–Clifford sequential p-value, or exact.

    Same statistic, relabellings and tie rule as :func:`kvstats.stats.energy_test` (the
    blocked permutation core of :mod:`kvstats.stats.energy`), drawn in doubling batches
    and stopped at the h-th exceedance; or, where the relabelling group is small, every
    relabelling enumerated (``method``).

    Parameters
    ----------
    X, Y : array_like of shape (n, dim) or (n,)
        The two samples (NaN/inf rejected).
    alpha_needed, max_permutations, h, seed, batch :
        As in :func:`sequential_permutation_test` (exactly one of the first two).
    standardize, kind :
        As in :func:`kvstats.stats.energy_distance`.
    paired : bool
        As in :func:`kvstats.stats.energy_test`: True pairs row i of X with row i of Y
        (same lengths) and draws within-pair swaps instead of random subsets.
    method : {"auto", "exact", "permutation"}
        As in :func:`kvstats.stats.energy_test`: "auto" (default) enumerates the group
        when that costs at most 2**28 multiply-adds (up to 20 differing pairs; two samples:
        every split of up to 21 points, of 22 all but 10 vs 12, uneven larger ones such as
        4 vs 40) and then returns its exact p-value at once (``seed``, ``h`` and B_max do not
        change it); otherwise the sequential Monte Carlo test.

    Returns
    -------
    EnergySequentialResult
        ``min_attainable_p`` is the test's resolution, from the relabelling group's own
        floor, below which no exact p-value lies: paired, 2**(1 - m) for the m pairs
        whose rows differ (of the 2**m swaps the observed one and the full swap give the
        same statistic; an equal pair swaps into itself; no differing pair: 1); unpaired,
        1/C(n_x + n_y, n_x), or 2/C(2n, n) when n_x = n_y = n (the exchanged samples give
        the same statistic; repeated rows can only raise it). Exact: the smallest p-value
        any relabelling of these data gets, the share of classes whose statistic ties the
        largest (the floor when nothing ties, more with tied points or pairs). Monte
        Carlo: each draw on data at the floor ties T_obs with probability floor, so the
        p-value those data get at least half the time,
        :func:`~kvstats.stats.family_resolution.monte_carlo_resolution` (floor, B_max, h):
        1/(1 + B_max) when (1 - floor)^B_max >= 1/2, more otherwise; with tied rows the
        floor, and so this, is only a lower bound (tied relabellings are not enumerated).
        ``resolvable(alpha)`` is True when such data reject at alpha (exact), or do so
        with probability at least 1/2 (Monte Carlo).

    Notes
    -----
    Ties: permuted statistics within 1e-10 x the mean pooled distance of the observed
    one count as exceedances, as in ``energy_test``. With h > B_max nothing stops early
    and the result equals ``energy_test(X, Y, n_resamples=B_max, seed=seed)`` (the same
    relabellings are drawn, in the same order; both are exact where the group is
    small). A non-finite observed statistic (e.g.
    overflow at magnitudes near 1e160) raises ``ValueError`` instead of becoming a p-value.
    The same holds with ``paired=True`` against ``energy_test(..., paired=True)``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats.sequential import energy_test_sequential, required_resolution
    >>> rng = np.random.default_rng(0)
    >>> need = required_resolution(1140).p_needed
    >>> res = energy_test_sequential(rng.normal(size=(60, 6)), rng.normal(2, 1, size=(60, 6)),
    ...                              alpha_needed=need, seed=1)
    >>> res.pvalue, res.n_permutations
    (4.3859649122807014e-05, 22799)
    >>> rng = np.random.default_rng(2)                  # a null pair stops early
    >>> res = energy_test_sequential(rng.normal(size=(60, 6)), rng.normal(size=(60, 6)),
    ...                              alpha_needed=need, seed=1)
    >>> res.stopped_early, res.n_permutations, round(res.pvalue, 3)
    (True, 12, 0.833)
    >>> Z = rng.normal(size=(8, 6))                     # 8 pairs: resolution 2**-7
    >>> res = energy_test_sequential(Z + 3.0, Z, max_permutations=999, seed=1, paired=True)
    >>> res.min_attainable_p, res.resolvable(0.05 / 10)
    (0.0078125, False)
    """
    from ._energy_core import (_exact_floor, _exact_pvalue, _permutation_statistics,
                               _prepare, _random_subsets, _tie_tolerance, _unscale)
    from ._energy_swap import _random_keeps, _swap_statistics, _SwapForms
    from .energy import _exact_statistics, _scaled_group

    X, Y, standardize = _prepare(X, Y, standardize, kind)
    b_max = _max_permutations(max_permutations, alpha_needed)
    h, batch = _check_common(h, batch)
    rng = as_generator(seed)
    n_x, n_y, dim = len(X), len(Y), X.shape[1]
    # as energy_test: the data scaled by 2**-e, the relabelling group's floor on them
    paired, Z, e, classes, floor = _scaled_group(method, X, Y, paired)
    n = n_x + n_y
    fields = dict(max_permutations=b_max, h=h, kind=kind, standardize=standardize, n_x=n_x,
                  n_y=n_y, dim=dim, paired=paired)
    if classes is not None:
        # a small group: every relabelling, the exact p-value, at once (nothing is drawn)
        with np.errstate(over="ignore", invalid="ignore"):   # refused in _exact_pvalue
            stats_all, total = _exact_statistics(Z, n_x, kind, paired)
        p, exceed = _exact_pvalue(stats_all, total, n)
        floor = _exact_floor(stats_all, total, n, floor)
        statistic = float(_unscale(stats_all[0], e, "energy statistic"))
        return EnergySequentialResult(statistic=statistic, pvalue=p,
                                      n_permutations=len(stats_all),
                                      n_exceed=exceed, stopped_early=False,
                                      min_attainable_p=floor,
                                      test_statistic=n_x * n_y / n * statistic,
                                      method="exact", **fields)
    # paired: each swap is one m x m quadratic form s'Cs (energy's module docstring); the
    # blocks of C are built once here and kept across batches when they fit in ~64 MB
    forms = _SwapForms(Z[:n_x], Z[n_x:]) if paired else None
    with np.errstate(over="ignore", invalid="ignore"):   # overflow is reported just below
        if paired:
            q = forms.forms(np.ones((1, n_x), dtype=bool))
            total = forms.total
            obs = _swap_statistics(q, total, n_x, kind)
        else:
            observed_labels = np.zeros((1, n), dtype=bool)
            observed_labels[0, :n_x] = True
            obs, total = _permutation_statistics(Z, observed_labels, kind)
    t_obs = float(obs[0])
    if not (np.isfinite(t_obs) and np.isfinite(total)):
        raise ValueError(f"the energy statistic is {t_obs} (pooled distance sum {total}); a "
                         "non-finite statistic has no p-value (overflow? rescale the data)")

    def draw(gen, k):
        # the same generator calls as energy_test's one (B, ...) draw, split into batches
        if paired:
            return _swap_statistics(forms.forms(_random_keeps(gen, k, n_x)), total, n_x, kind)
        return _permutation_statistics(Z, _random_subsets(gen, k, n, n_x), kind)[0]

    p, used, exceed, early = _run(draw, t_obs, max_permutations=b_max, h=h, rng=rng,
                                  tol=_tie_tolerance(total, n), batch=batch,
                                  max_batch=_MAX_BATCH)
    # the resolution: the p-value data at the group's extreme get at least half the time
    # (each draw ties T_obs with probability floor on them)
    min_p = monte_carlo_resolution(floor, b_max, h)
    statistic = float(_unscale(t_obs, e, "energy statistic"))
    return EnergySequentialResult(statistic=statistic, pvalue=float(p), n_permutations=used,
                                  n_exceed=exceed, stopped_early=early, min_attainable_p=min_p,
                                  test_statistic=n_x * n_y / n * statistic, **fields)

