"""Bootstrap intervals of a mean or a ratio of means, and the heavy-tail screen beside them.

Shared by the summary and theory tables (and the figures' markers): a mean's interval is
only trusted when the sample's tails are light enough for a variance to exist
(the 95% upper bound of Hill's tail index α ≥ 2, :func:`tail_alpha`: the right tail of a
nonnegative sample, both tails of a signed one) and, for a nonnegative sample with zeros,
when at least :data:`MIN_NONZERO` values are positive (:func:`few_nonzero`; a fraction's
1 − x as well); otherwise the tables flag the row (``ci_reliable`` False) instead of warning
once per row. A sample whose values are equal up to rounding (:data:`ROUNDING_RTOL`: cluster
means of ones summed as Σ x/n) counts as constant here, as in the tests.

The resampling is seeded by the caller's seed and the sample itself (:func:`mean_ci`,
:func:`ratio_ci`), not by the row's place in a table: one mean shown in two tables of a
report (a scheme's ``snr_k`` in its scheme table and in "Theory beside measurement", its
pooled SNR in the scheme table and beside the rate–distortion limit) gets one interval,
and two schemes with identical values get identical intervals.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence

import numpy as np
from jaxtyping import Float

from kvstats._checks import check_int, check_real
from kvstats.analysis.resolution import ROUNDING_RTOL

__all__ = ["tail_alpha", "mean_ci", "ratio_ci", "ci_reliable", "few_nonzero", "MIN_NONZERO",
           "SIGNED_TAIL_CONFIDENCE", "unit_interval_bound"]

#: A nonnegative sample with zeros and fewer positive values than this is too sparse for a
#: bootstrap interval of its mean (:func:`few_nonzero`); the tail screen needs as many.
MIN_NONZERO = 10


#: Confidence of each tail's upper bound of α in the two-tailed screen (:func:`tail_alpha`):
#: 0.975 a tail, so that two tails at once flag a boundary sample at most 5% of the time
#: (Bonferroni), as the one-tailed screen does at 0.95.
SIGNED_TAIL_CONFIDENCE = 0.975


def _sample(x, name: str) -> np.ndarray:
    """``x`` as float64, refused (ValueError naming ``name``) when empty or holding a NaN.

    ±inf is kept: an exact reconstruction's SNR is +inf, and the helpers below give such a
    sample no interval. A NaN is no value at all; passed on, it gave a NaN mean and interval
    that :func:`ci_reliable` called reliable.
    """
    x = np.asarray(x, np.float64)
    if x.size == 0:
        raise ValueError(f"{name} must hold at least one value; received an empty sample")
    nan = int(np.count_nonzero(np.isnan(x)))
    if nan:
        raise ValueError(f"{name} must not contain NaN (finite values and ±inf are allowed); "
                         f"received {nan} NaN of {x.size} values")
    return x


def tail_alpha(x: Float[np.ndarray, "n"], metric: str) -> float:
    """The heavy-tail screen's statistic of a metric's per-trial values, or NaN where not computed.

    A mean's bootstrap interval is flagged where this is below 2 (Hill's α < 2 at 95%).

    - A metric in dB (the SNRs), and any sample with a negative value: both tails are
      screened, each from its excesses over the median (x − median above it, median − x
      below it), with the same k = ⌊√(excesses)⌋, and the smaller of the two upper bounds is
      returned. Hill's α is not shift-invariant and a dB value has no natural 0 (a heavy
      left tail of SNRs all above 0 dB is a tail all the same); from the median the screen
      does not depend on the dB level. Each bound is at :data:`SIGNED_TAIL_CONFIDENCE`
      (97.5%), so the pair is a 95% statement for Pareto tails (Bonferroni). A tail needs
      ≥ 10 excesses (n ≥ 20 without ties).
    - ``kl``, and any other metric whose values are all ≥ 0: the 95% upper bound of Hill's
      right-tail index (:func:`kvstats.stats.tail.heavy_tail_alpha`), the values measured
      from 0 (for ``kl`` its positive values: a KL is ≥ 0 up to rounding). Needs ≥ 10
      positive values.
    - NaN where a value is non-finite or no tail has enough values.

    False-flag rates and power: docs/statistics.md, "Heavy tails and the bootstrap".

    Parameters
    ----------
    x : ndarray, 1-D
        The metric's per-trial (or per-unit) values.
    metric : str
        Its name: ``"kl"`` and the metrics in dB (unit ``"dB"`` in
        :data:`kvstats.metrics.table.METRIC_TABLE`) are treated apart.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> x = 1000.0 - np.random.default_rng(0).pareto(1.0, 200)  # a heavy left tail, all > 0 dB
    >>> bool(tail_alpha(x, "snr_t") < 2), bool(tail_alpha(x, "phi_t") < 2)  # the right tail from 0
    (True, False)
    >>> round(tail_alpha(x, "snr_t"), 6) == round(tail_alpha(x - 990.0, "snr_t"), 6)  # any level
    True
    >>> bool(tail_alpha(np.random.default_rng(0).normal(20.0, 1.0, 200), "snr_t") < 2)
    False
    >>> tail_alpha(np.array([-1.0, 2.0]), "snr_k")            # too few values
    nan
    """
    x = np.asarray(x, np.float64)
    if metric == "kl":
        x = np.maximum(x, 0.0)
    alpha = _screen(x, two_tailed=_in_db(metric))
    return math.nan if alpha is None else alpha


def _in_db(metric: str) -> bool:
    from kvstats.metrics.table import METRIC_TABLE

    return metric in METRIC_TABLE and METRIC_TABLE[metric].unit == "dB"


def _screen(x: np.ndarray, two_tailed: bool) -> float | None:
    """:func:`tail_alpha` of a sample (``kl`` already clipped at 0); None where not computed."""
    from kvstats.stats.tail import MIN_TAIL_POSITIVE, heavy_tail_alpha, tail_index

    if not np.isfinite(x).all() or not (two_tailed or (x < 0).any()):
        return heavy_tail_alpha(x)          # nonnegative (the right tail from 0) or not screened
    excess = x - np.median(x)
    bounds = [tail_index(side, confidence=SIGNED_TAIL_CONFIDENCE).upper_bound
              for side in (excess, -excess)
              if np.count_nonzero(side > 0) >= MIN_TAIL_POSITIVE]
    return min(bounds, default=None)


def few_nonzero(x: Float[np.ndarray, "n"], metric: str | None = None) -> bool:
    """Whether a mean's bootstrap interval rests on too few nonzero values to be trusted.

    True for a finite nonnegative sample with zeros and 1 to :data:`MIN_NONZERO` − 1 positive
    values that are not all equal (up to rounding, :data:`ROUNDING_RTOL`): a rarely-nonzero
    metric (an argmax shift or KL that is 0 on most trials). Its mean is carried by those
    few values, and the bootstrap's coverage falls short: 95% BCa intervals (``mean_ci``,
    B = 999) of n = 100 values, Bernoulli(p) times Exp(1), covered the mean 0.903 (p = 0.01,
    given an interval), 0.889 (p = 0.05) and 0.893 (p = 0.1) where this flags them, 1,000
    samples each (2026-12-03; docs/statistics.md, "Sparse means"). The tail screen
    (:func:`tail_alpha`) is not computed below :data:`MIN_NONZERO` positive values, so it
    cannot flag these. Not flagged: samples without zeros, all-zero samples (:func:`mean_ci`
    gives none, or for a [0, 1] metric an exact one), and two-point samples {0, c} shown by
    two or more equal positive values (a proportion up to its unit: a 0/1 sample's bootstrap
    interval covered 0.992 and 0.987 at p = 0.01 and 0.03, n = 100, given an interval, and
    BCa is scale-equivariant, so 0/0.5 and 0/0.25 samples cover alike). A lone positive
    value is flagged whatever it is, 1.0 included: it cannot show that the positive values
    are all equal, and the Bernoulli(0.01) · Exp(1) samples with one nonzero value covered
    0.853 of 368 (a proportion's one success covers: the price of not telling them apart).
    A fraction's sample of 0s and 1s (``metric`` a fraction) is not flagged: it is a
    proportion, whose interval (:func:`mean_ci`) is the exact Clopper–Pearson one.

    ``metric``: the sample's metric name. ``"kl"`` is screened from its positive values (a
    KL is ≥ 0 up to rounding). A fraction (unit ``"fraction"`` in
    :data:`kvstats.metrics.table.METRIC_TABLE`: ``recall_at_5``, ``argmax_shift``) whose
    values lie in [0, 1] is screened as 1 − x as well (values within :data:`ROUNDING_RTOL` of
    1 as 1): recall@5 that is 1 on most trials and lower on a few is the mirror of a sparse
    sample, with the same interval in law (BCa respects x → 1 − x), and it undercovers alike.
    None: the sample alone.

    Examples
    --------
    >>> import numpy as np
    >>> few_nonzero(np.r_[np.zeros(97), 0.3, 1.2, 4.0])
    True
    >>> few_nonzero(np.r_[np.zeros(97), 1.0, 1.0, 1.0]), few_nonzero(np.zeros(100))
    (False, False)
    >>> few_nonzero(np.r_[np.zeros(97), 0.5, 0.5, 0.5])     # {0, c}: a proportion in any unit
    False
    >>> few_nonzero(np.r_[np.zeros(99), 2.5]), few_nonzero(np.r_[np.zeros(99), 1.0])  # one value
    (True, True)
    >>> recall = 1.0 - np.r_[np.zeros(97), 0.2, 0.4, 0.2]      # 1 on most trials
    >>> few_nonzero(recall), few_nonzero(recall, "recall_at_5")
    (False, True)
    >>> few_nonzero(np.r_[np.zeros(99), 1.0], "argmax_shift")    # a proportion: exact interval
    False
    """
    x = np.asarray(x, np.float64).ravel()
    if metric == "kl":
        x = np.maximum(x, 0.0)
    if _is_fraction(metric) and _zero_one(x) is not None:   # a proportion: its interval is exact
        return False
    if _sparse(x):
        return True
    if not (_is_fraction(metric) and _in_unit_interval(x)):
        return False
    mirror = 1.0 - np.clip(x, 0.0, 1.0)
    # a cluster mean of ones may read 1 − 1e-16: that is 1, not a value below it
    return _sparse(np.where(mirror <= ROUNDING_RTOL, 0.0, mirror))


def _sparse(x: np.ndarray) -> bool:
    """:func:`few_nonzero` of the sample itself."""
    if not (np.isfinite(x).all() and (x >= 0).all()):
        return False
    positive = x[x > 0]
    # below min(MIN_NONZERO, n) positive values the sample has zeros. {0, c} shown by two or
    # more equal positive values is a proportion in c's unit; one value cannot show that
    return (0 < positive.size < min(MIN_NONZERO, x.size)
            and (positive.size == 1 or not _constant(positive)))


def _constant(x: np.ndarray) -> bool:
    """Every value of a finite, nonempty sample equal up to rounding (:data:`ROUNDING_RTOL`).

    Nine trials of 1.0 averaged as Σ x/n give 1.0000000000000002, ten 0.9999999999999999;
    a bootstrap of such means is degenerate (BCa undefined) although they differ.
    """
    return bool(np.ptp(x) <= ROUNDING_RTOL * np.max(np.abs(x)))


def _zero_one(x: np.ndarray) -> np.ndarray | None:
    """Where a sample of 0s and 1s (up to rounding: a text mean of ones may read 1 ± 1e-16)
    is 1, or None for a sample holding another value."""
    ones = np.abs(x - 1.0) <= ROUNDING_RTOL
    return ones if (ones | (np.abs(x) <= ROUNDING_RTOL)).all() else None


def _in_unit_interval(x: np.ndarray) -> bool:
    """Every value in [0, 1] up to rounding (:data:`ROUNDING_RTOL`): a fraction's sample."""
    return bool(((x >= -ROUNDING_RTOL) & (x <= 1.0 + ROUNDING_RTOL)).all())


def _is_fraction(metric: str | None) -> bool:
    from kvstats.metrics.table import METRIC_TABLE

    return metric in METRIC_TABLE and METRIC_TABLE[metric].unit == "fraction"


def ci_reliable(*samples: Float[np.ndarray, "n"], metrics: Sequence[str] | None = None) -> bool:
    """False when a sample has Hill's α < 2 at 95% confidence (the heavy-tail screen of
    :func:`tail_alpha`) or has :func:`few_nonzero` values.

    ``metrics``: the samples' metric names, one per sample, screened as :func:`tail_alpha`
    and :func:`few_nonzero` screen that metric (a metric in dB on both tails, ``kl`` from its
    positive values, a fraction as x and as 1 − x).
    Without them a sample is screened on both tails when it has a negative value, else on
    its right tail from 0.
    A sample with a NaN, or with no value, is refused (``ValueError`` naming it, as
    ``samples[i]``); ±inf is allowed. So is a call with no sample at all (a ``ValueError``:
    nothing screened is no evidence of a reliable interval; it returned True before).

    Examples
    --------
    >>> import numpy as np
    >>> ci_reliable(np.random.default_rng(0).random(200))
    True
    >>> ci_reliable(np.r_[np.zeros(97), 0.3, 1.2, 4.0])
    False
    >>> snr = 1000.0 - np.random.default_rng(0).pareto(1.0, 200)  # a heavy left tail, in dB
    >>> ci_reliable(snr), ci_reliable(snr, metrics=["snr_t"])
    (True, False)
    """
    if not samples:
        raise ValueError("ci_reliable needs at least one sample to screen; received none")
    if metrics is None:
        metrics = [""] * len(samples)
    elif len(metrics) != len(samples):
        raise ValueError(f"metrics must name each of the {len(samples)} samples; received "
                         f"{len(metrics)} names")
    xs = [_sample(x, f"samples[{i}]") for i, x in enumerate(samples)]
    return not any(tail_alpha(x, m) < 2 or few_nonzero(x, m or None) for x, m in zip(xs, metrics))


def unit_interval_bound(n: int, confidence: float) -> float:
    """The exact bound u = ((1 − c)/2)^(1/n) of an all-0 (or all-1) sample of a [0, 1] metric.

    n values all 0 of a metric X ∈ [0, 1] bound its mean μ by 1 − u: X ≤ 1{X > 0} gives
    μ ≤ P(X > 0), so P(all n are 0) = P(X = 0)^n ≤ (1 − μ)^n, which is below (1 − c)/2
    wherever μ > 1 − u. The interval [0, 1 − u] thus misses μ with probability at most
    (1 − c)/2, as the upper end of the two-sided Clopper–Pearson interval at 0 successes
    (exact for a 0/1 metric, conservative for any other [0, 1] one); n values all 1
    give [u, 1] (the same for 1 − X). No such bound exists for an unbounded metric: an
    all-zero KL is compatible with any mean.

    ``n``: an integer >= 1; ``confidence``: a real number in (0, 1) (else ``TypeError`` /
    ``ValueError`` naming it; NaN was returned as a bound before).

    Examples
    --------
    >>> round(1 - unit_interval_bound(100, 0.95), 4)     # 0 of 100: the mean is below 0.0362
    0.0362
    """
    n = check_int(n, "n", low=1)
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                            high_open=True)
    return ((1.0 - confidence) / 2.0) ** (1.0 / n)


def _resampling_seed(seed: int, *samples: np.ndarray) -> np.random.SeedSequence:
    """The bootstrap's seed of these (already ordered) samples: ``seed`` and their values.

    The values enter rounded to float32, so that one sample computed two ways (a text's
    mean by two summation orders) still draws the same resamples; the lengths enter too,
    so that two samples split at another place do not collide.
    """
    digest = hashlib.blake2b(digest_size=16)
    for x in samples:
        digest.update(np.int64(x.size).tobytes())
        digest.update(np.ascontiguousarray(x, np.float32).tobytes())
    words = np.frombuffer(digest.digest(), np.uint32)
    return np.random.SeedSequence([seed, *map(int, words)])


def mean_ci(x: Float[np.ndarray, "n"], confidence: float, n_resamples: int,
            seed: int, *, unit_interval: bool = False) -> tuple[float, float, float]:
    """Mean and bootstrap CI; constant, infinite or too small samples get none.

    "None" is the degenerate interval (mean, mean, mean), which the report prints as the
    mean alone. Below 3 values a bootstrap interval would be [min, max] (two values give
    three distinct resampled means), a "95% CI" that covers a symmetric population's mean
    with probability 1/2 at n = 2. The bootstrap's HeavyTailWarning is silenced: the
    tables flag those rows instead (``ci_reliable``), and a sweep report would otherwise
    warn once per row.

    "Constant" is up to rounding (:data:`ROUNDING_RTOL` of the largest |value|): cluster
    means of ones summed as Σ x/n read 1.0 for some sizes and 1.0000000000000002 for others,
    and a bootstrap of them is degenerate, not an interval.

    ``unit_interval``: the metric lies in [0, 1] by definition (a fraction: recall@5, an
    argmax shift), up to rounding (else ValueError), and its mean is clipped to [0, 1].
    Its samples of all 0s or all 1s (whatever n, up to rounding) then get the exact
    interval [0, 1 − u] or [u, 1] of :func:`unit_interval_bound` instead of none: at
    p = 0.01, n = 100, 37% of Bernoulli samples are all 0 and their mean alone never
    covered p. Other constant samples still get none (no valid bound exists for them).
    A sample of 0s and 1s (an argmax shift with one query per trial) is a proportion: it
    gets the exact Clopper–Pearson interval of its count (its bootstrap interval had
    read [0, 0.05] for one shift in 100 trials, a lower end the data rule out), which
    :func:`few_nonzero` then does not flag.

    ``seed``: the resamples are drawn from ``seed`` and the sample's values, taken sorted,
    so that the same values, in any order, give the same interval whichever table asks
    for it (the scheme table and the theory table show one interval of one mean).

    ``x`` must hold at least one value and no NaN (``ValueError`` naming ``x``); ±inf is
    allowed (an exact reconstruction's SNR) and gets no interval.

    Examples
    --------
    >>> import numpy as np
    >>> mean_ci(np.array([1.0, 1.0, 1.0]), 0.95, 99, 0)
    (1.0, 1.0, 1.0)
    >>> mean_ci(np.array([1.0, 2.0]), 0.95, 99, 0)        # two values: no interval
    (1.5, 1.5, 1.5)
    >>> [round(v, 4) for v in mean_ci(np.zeros(100), 0.95, 99, 0, unit_interval=True)]
    [0.0, 0.0, 0.0362]
    >>> ones = np.r_[1.0, 1.0, 1.0000000000000002]          # text means of ones, rounded
    >>> [round(v, 4) for v in mean_ci(ones, 0.95, 99, 0, unit_interval=True)]
    [1.0, 0.2924, 1.0]
    >>> [round(v, 5) for v in mean_ci(np.r_[np.zeros(99), 1.0], 0.95, 99, 0, unit_interval=True)]
    [0.01, 0.00025, 0.05446]
    >>> x = np.random.default_rng(0).normal(size=30)
    >>> mean_ci(x, 0.95, 99, 0)[1:] == mean_ci(x[::-1], 0.95, 99, 0)[1:]   # the order is not data
    True
    """
    from kvstats.stats import HeavyTailWarning, bootstrap_ci

    x = _sample(x, "x")
    mean = float(np.mean(x))
    if not np.isfinite(x).all():
        # e.g. SNR = +inf for an exact reconstruction: the mean is inf, no interval exists.
        return mean, mean, mean
    if unit_interval:
        if not _in_unit_interval(x):
            raise ValueError(f"x must lie in [0, 1] with unit_interval=True (up to rounding, "
                             f"relative {ROUNDING_RTOL:g}); received values in "
                             f"[{float(x.min())!r}, {float(x.max())!r}]")
        # a mean of values in [0, 1] is in [0, 1]: 1.0000000000000002 is a text mean of ones
        mean = min(max(mean, 0.0), 1.0)
        # all 0 or all 1 up to rounding (a text mean of ones may read 1 ± 1e-16): exact for
        # any [0, 1] metric; a sample of 0s and 1s is a proportion: Clopper-Pearson's
        if (np.abs(x) <= ROUNDING_RTOL).all():
            return mean, 0.0, 1.0 - unit_interval_bound(x.size, confidence)
        if (np.abs(x - 1.0) <= ROUNDING_RTOL).all():
            return mean, unit_interval_bound(x.size, confidence), 1.0
        ones = _zero_one(x)
        if ones is not None:
            from kvstats.stats.proportion import clopper_pearson_interval

            low, high = clopper_pearson_interval(int(ones.sum()), x.size, confidence)
            return mean, float(low), float(high)
    # constant up to rounding: every resample gives the mean (BCa is undefined there)
    if len(x) < 3 or _constant(x):
        return mean, mean, mean
    x = np.sort(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeavyTailWarning)
        res = bootstrap_ci(x, confidence=confidence, n_resamples=n_resamples,
                           seed=_resampling_seed(seed, x))
    return mean, float(res.low), float(res.high)


def ratio_ci(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"], n_resamples: int,
             seed: int, *, paired: bool = False) -> dict[str, float | int | bool]:
    """Ratio of means ``mean(x)/mean(y)`` with its bootstrap 95% CI and reliability flag.

    Returns the theory-table fields ``measured``, ``ci_low``, ``ci_high``, ``n_trials``
    (the smaller sample), ``ci_reliable`` (:func:`ci_reliable` of both samples) and
    ``paired``. ``paired``: ``x[i]`` and ``y[i]`` were measured on the same unit (two
    schemes on one trial or text) and the bootstrap resamples the pairs whole
    (:func:`kvstats.stats.bootstrap_ratio_ci` with ``paired=True``); otherwise the two
    samples are resampled apart, which is valid only for independent samples. As
    :func:`mean_ci`, no interval (the ratio as both ends) where a sample has fewer than 3
    values (a real capture of one or two texts: the bootstrap would fail at one and give
    [min, max]-like ends at two), a non-finite value, or where the ratio is exact: both
    samples constant, or (paired) every pair in the same ratio, each up to rounding
    (:data:`ROUNDING_RTOL`: text means of ones read 1.0 and 1.0000000000000002). ``seed`` as in
    :func:`mean_ci`: with the values (the pairs sorted, or each sample sorted). ``x`` and
    ``y`` must each hold a value and no NaN (``ValueError`` naming it); ±inf gives no interval.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> r = ratio_ci(2 + rng.random(50), 1 + rng.random(50), 199, 0)
    >>> r["ci_low"] < r["measured"] < r["ci_high"], r["n_trials"]
    (True, 50)
    >>> ratio_ci(np.array([1.0, 2.0]), np.array([1.0, 3.0]), 199, 0)["ci_low"]   # two units
    0.75
    >>> ratio_ci(np.array([2.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0]), 199, 0, paired=True)["ci_high"]
    2.0
    """
    from kvstats.stats import HeavyTailWarning, bootstrap_ratio_ci

    x, y = _sample(x, "x"), _sample(y, "y")
    if paired and x.shape != y.shape:
        raise ValueError(f"paired=True needs x and y of equal length (one pair per unit); "
                         f"received {x.size} and {y.size}")
    measured = float(np.mean(x) / np.mean(y))
    out = {"measured": measured, "ci_low": measured, "ci_high": measured,
           "n_trials": int(min(len(x), len(y))), "ci_reliable": ci_reliable(x, y),
           "paired": bool(paired)}
    if min(x.size, y.size) < 3 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return out
    # an exact ratio: every resample gives it (BCa is undefined there)
    if (_constant(x) and _constant(y)) or (paired and np.allclose(x, measured * y, rtol=ROUNDING_RTOL,
                                                                    atol=0.0)):
        return out
    if paired:
        order = np.lexsort((y, x))
        x, y = x[order], y[order]
    else:
        x, y = np.sort(x), np.sort(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeavyTailWarning)  # flagged in ci_reliable instead
        res = bootstrap_ratio_ci(x, y, n_resamples=n_resamples, paired=paired,
                                 seed=_resampling_seed(seed, x, y, np.array([paired], np.float32)))
    return {**out, "ci_low": float(res.low), "ci_high": float(res.high)}
