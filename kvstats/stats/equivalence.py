"""Equivalence and non-inferiority tests: "≈" claims need a test of their own.

A non-significant difference test is absence of evidence, not equivalence. Here the
equivalence region is stated up front and tested by two one-sided tests (TOST; Schuirmann
1987): equivalence is established at level α iff both one-sided nulls are rejected,
iff the (1 − 2α) confidence interval lies inside the region. Both tests here are t-type
(estimate, standard error, degrees of freedom), so the test and the interval are built
from the same three numbers and agree exactly.

* :func:`tost_ratio` — ratio of means mean(x)/mean(y) of nonnegative data (per-trial KL,
  MSE, ...). Default: Fieller-type tests of H0: mean(x) = r mean(y) as Welch t-tests of
  x̄ − r ȳ (paired: a t-test of x_i − r y_i) at each margin r, with Fieller's interval;
  alternatives: the delta method on log(x̄/ȳ) with Welch–Satterthwaite df (paired: the
  linearisation x_i/x̄ − y_i/ȳ, df n − 1), and its bootstrap-t.
* :func:`tost_rank` — the probability of superiority θ = P(X > Y) + ½ P(X = Y) within
  [0.5 − δ, 0.5 + δ], with the Brunner–Munzel (2000) rank variance and df (valid with
  ties and unequal spreads), or its paired form (Munzel 1999).
* Fieller and rank tests reject a margin only where a score-type test rejects too: the
  same statistic with its variance evaluated under the null-restricted distributions
  (the empirical-likelihood reweighting of the data nearest to them that satisfies the
  null; Owen 2001), which on binary data is the binomial score (Wilson) test. The
  plug-in variance alone is small exactly when few misses were seen and was liberal on
  sparse binary data (size 0.17 at n = 30 on the margin). Beyond the range the
  reweighting can reach, the rank test uses the largest variance θ̂ can have, the ratio
  test the plug-in test alone (paired trials identical up to one ratio: one more trial
  from the observed ranges).
* ``alternative="less"`` / ``"greater"`` give the one-sided non-inferiority tests.
* :func:`equivalence_verdict` turns a TOST and a difference test into
  "equivalent within δ", "different" or "inconclusive".

Where the code lives: the two tests share their result type, their input checks, one
test-and-interval core (which keeps test and interval in agreement by construction), the
empirical-likelihood reweighting of their score-type halves and the verdict; those are
here. Each test's own machinery is a module of its own, imported on first use of its
names from here (``kvstats.stats.equivalence.tost_ratio`` stays the import path):
:mod:`._equivalence_ratio` (Fieller's t as a function of the hypothesised ratio, its
composite nulls and edge bound, the delta method and the bootstrap-t) and
:mod:`._equivalence_rank` (the placements and the rank score test). Everything is
vectorised over many samples: the p-value cores ``_tost_ratio_pvalues`` /
``_tost_rank_pvalues`` that calibration studies call on thousands of samples at once are
the code the public functions run. ``_NULL_RESTRICTED`` (below) is read from this module
at call time, so setting it here switches both tests.

See docs/statistics.md, "Equivalence and non-inferiority".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from kvstats._checks import _describe, check_choice, check_real

from ._base import _FrameMixin, check_bool

__all__ = ["EquivalenceResult", "tost_ratio", "tost_rank", "equivalence_verdict",
           "EQUIVALENCE_ALTERNATIVES", "RATIO_METHODS", "VERDICTS", "SkewedPairsWarning",
           "SKEWED_PAIRS_LOG_SD"]

EQUIVALENCE_ALTERNATIVES = ("equivalence", "less", "greater")
VERDICTS = ("equivalent within δ", "different", "inconclusive")

# Score-type (null-restricted) variances in the Fieller and rank tests; False restores the
# plug-in (Wald-type) variances, for calibration comparisons only
# (tests/stats/calibrate_sparse_and_few_clusters.py). Read at call time by both tests.
_NULL_RESTRICTED = True

# Each test's names, defined in its own module and imported on first access (PEP 562):
# the test modules import this one, so an eager import here would be circular.
_MOVED = {
    "_equivalence_ratio": ("tost_ratio", "RATIO_METHODS", "_FiellerT", "_tost_ratio_pvalues",
                           "SkewedPairsWarning", "SKEWED_PAIRS_LOG_SD"),
    "_equivalence_rank": ("tost_rank", "_tost_rank_pvalues"),
}
_HOME = {name: module for module, names in _MOVED.items() for name in names}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


@dataclass(frozen=True)
class EquivalenceResult(_FrameMixin):
    """Result of :func:`tost_ratio` / :func:`tost_rank`.

    Attributes
    ----------
    test : str
        "tost_ratio" or "tost_rank".
    statistic : float
        The binding one-sided t statistic, oriented so that large means "inside the
        region": min(t_low, -t_high) for equivalence, t_low ("greater") or -t_high
        ("less"); for the Fieller method t_low = t(margin_low), t_high = t(margin_high).
    pvalue : float
        TOST p-value max(pvalue_low, pvalue_high) for "equivalence"; the one-sided
        p-value for "less"/"greater".
    estimate : float
        mean(x)/mean(y) (ratio) or θ̂ = P̂(X > Y) + ½ P̂(X = Y) (rank).
    low, high : float
        The (1 − 2α) confidence interval for the estimate ("equivalence"), or the
        one-sided (1 − α) bound with the open end at 0 / inf (ratio) or 0 / 1 (rank).
    margin_low, margin_high : float
        The region tested, on the estimate's scale (the unused side of a one-sided test
        is 0 / inf or 0 / 1).
    pvalue_low, pvalue_high : float
        One-sided p-values for H0: parameter <= margin_low and H0: parameter >=
        margin_high (NaN for the side a one-sided test does not use).
    pvalue_difference : float
        Two-sided p-value of the point null (ratio = 1, θ = 0.5): exactly the
        Brunner–Munzel test for θ; for the Fieller ratio test twice the smaller one-sided
        p-value at ratio 1, each the larger of Welch's (paired: the paired t-test's) and
        the score-type one, so never below scipy's t-test and <= 2α iff 1 lies outside
        [low, high] (:func:`tost_ratio`, Notes); "delta" / "bootstrap-t": the test of
        log ratio = 0 with their standard error and reference.
    within_margin : bool
        pvalue <= alpha, equivalently the interval lies inside the region
        (non-inferiority shown, for a one-sided alternative).
    standard_error : float
        Standard error of log(ratio) by the delta method (ratio test, every method) or
        of θ̂ (rank test).
    df : float
        Degrees of freedom of the t reference distribution (Fieller: at the binding
        margin; NaN for the bootstrap-t).
    alpha : float
    alternative : str
        "equivalence", "less" (H1: parameter < margin_high) or "greater"
        (H1: parameter > margin_low).
    method : str
        "fieller-welch", "fieller-paired", "delta-welch", "delta-paired", "bootstrap-t",
        "bootstrap-t-paired", "brunner-munzel-score" or "brunner-munzel-paired-score"
        (with the score-type half; without the suffix when it is switched off); on degenerate
        data (zero spread; Fieller: both samples constant) "degenerate" for the ratio test
        (p-values 1, interval [0, inf]: nothing bounds the variance) and "brunner-munzel-bound" / "brunner-munzel-paired-bound"
        for the rank test (the largest variance θ̂ can have, see :func:`tost_rank`).
    n_x, n_y : int
    identical_pairs : bool
        Paired samples equal in every pair (x[i] == y[i] for all i; False for unpaired
        samples). The data then hold no spread of the paired differences, and what the
        test says rests on a bound, not on a measured spread: Fieller's test takes the
        score-type bound of one unseen discordant trial (identical uniform values,
        margin ±10%: p = 0.011 at n = 100), the rank test its variance bound
        ("…-paired-bound"), "delta" and "bootstrap-t" report "degenerate" (p = 1).
        Values that differ in any pair, however little (x against x(1 + 1e-9)), are
        tested by the t model and can give p = 3e-33: that jump is a property of the
        estimators, not of the data, so a verdict on such data should say "identical in
        all n pairs" beside it.
    """

    test: str
    statistic: float
    pvalue: float
    estimate: float
    low: float
    high: float
    margin_low: float
    margin_high: float
    pvalue_low: float
    pvalue_high: float
    pvalue_difference: float
    within_margin: bool
    standard_error: float
    df: float
    alpha: float
    alternative: str
    method: str
    n_x: int
    n_y: int
    identical_pairs: bool = False


class _TRef:
    """Student t reference distribution with ``df`` degrees of freedom (scalar or per sample)."""

    def __init__(self, df):
        self.df = df

    def sf(self, t):
        return stats.t.sf(t, self.df)

    def cdf(self, t):
        return stats.t.cdf(t, self.df)

    def quantiles(self, alpha: float):
        q = stats.t.ppf(1 - alpha, self.df)
        return -q, q


def _t_tests(est, se, ref, lo: float, hi: float, null: float, alpha: float, alternative: str):
    """One-sided tests of est against lo and hi, the (1 - 2 alpha) interval, point-null p.

    ``ref`` is the reference distribution of (estimate - parameter)/se (_TRef or
    _BootRef). ``lo``/``hi`` may be -inf/inf (the side a one-sided test does not use).
    ``se`` > 0: the callers handle data without spread first. Vectorised over samples
    (est, se and a _TRef's df of one shape); returns arrays of that shape.
    """
    use_lo = alternative in ("equivalence", "greater")
    use_hi = alternative in ("equivalence", "less")
    t_lo, t_hi = (est - lo) / se, (est - hi) / se
    p_lo, p_hi = ref.sf(t_lo), ref.cdf(t_hi)
    q_lo, q_hi = ref.quantiles(alpha)
    ci_lo, ci_hi = est - q_hi * se, est - q_lo * se
    t0 = (est - null) / se
    p_diff = np.minimum(1.0, 2 * np.minimum(ref.sf(t0), ref.cdf(t0)))
    shape = np.shape(t_lo)
    if not use_lo:
        p_lo, t_lo, ci_lo = np.full(shape, np.nan), np.full(shape, np.inf), np.full(shape, -np.inf)
    if not use_hi:
        p_hi, t_hi, ci_hi = np.full(shape, np.nan), np.full(shape, -np.inf), np.full(shape, np.inf)
    return np.minimum(t_lo, -t_hi), np.fmax(p_lo, p_hi), p_lo, p_hi, ci_lo, ci_hi, p_diff


def _check_common(alpha, alternative, paired):
    alpha = check_real(alpha, "alpha", low=0.0, high=0.5, low_open=True, high_open=True)
    check_choice(alternative, "alternative", EQUIVALENCE_ALTERNATIVES)
    paired = check_bool(paired, "paired")
    return alpha, paired


def _check_pair_sizes(x, y, paired):
    if paired and x.size != y.size:
        raise ValueError(f"paired=True needs x and y of the same length (one value per "
                         f"trial); received {x.size} and {y.size}")
    for arr, name in ((x, "x"), (y, "y")):
        if arr.size < 2:
            raise ValueError(f"{name} needs at least 2 observations (its variance is "
                             f"estimated); received {arr.size}")


def _identical_pairs(x: np.ndarray, y: np.ndarray, paired: bool) -> bool:
    """Paired samples equal in every pair (EquivalenceResult.identical_pairs)."""
    return bool(paired and np.array_equal(x, y))


def _tilt(samples: list[np.ndarray], c, tol: float = 1e-10, max_iter: int = 50):
    """Empirical-likelihood weights under a linear null: the null-restricted distributions.

    Maximises sum_k sum_i log w_ki subject to sum_i w_ki = 1 and sum_k E_wk[s_k] = c (Owen
    2001, ch. 3): the distributions closest to the samples (in Kullback–Leibler) that satisfy
    the null. Solved by damped Newton on the convex dual (w_ki = 1/(a_k + eta s_ki)),
    vectorised over leading axes: ``samples[k]`` has shape (..., n_k) and ``c`` broadcasts
    to (...), so many replicate samples are solved at once (each row its own Newton path).
    Returns (weights, ok): the weight arrays, and where ``ok`` is False (c not strictly
    inside the range the samples can reach: no reweighting of the observed values
    satisfies the null) the uniform weights instead. A constant sample has its mean
    fixed; its centred values are 0, so its weights stay uniform and the others tilt.
    On binary data this is the constrained maximum-likelihood fit, so a variance evaluated
    under these weights is the score (Wilson-type) variance.
    """
    shape = np.broadcast_shapes(*(s.shape[:-1] for s in samples), np.shape(c))
    S = [np.broadcast_to(s, shape + s.shape[-1:]).reshape(-1, s.shape[-1]) for s in samples]
    c = np.broadcast_to(np.asarray(c, float), shape).reshape(-1)
    sizes = [s.shape[-1] for s in S]
    seg = np.repeat(np.arange(len(S)), sizes)              # sample of each column
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lo, hi = sum(s.min(-1) for s in S), sum(s.max(-1) for s in S)
    ok = (lo < c) & (c < hi)
    means = np.stack([s.mean(-1) for s in S], -1)
    scale = np.where(ok, hi - lo, 1.0)
    # all samples side by side, centred and scaled (a stable Newton)
    z = (np.concatenate(S, -1) - means[:, seg]) / scale[:, None]
    cz = np.where(ok, (c - means.sum(-1)) / scale, 0.0)
    n_all = float(seg.size)

    def dual(a, eta, zs, cz):
        den = a[:, seg] + eta[:, None] * zs
        with np.errstate(invalid="ignore", divide="ignore"):
            g = a.sum(-1) - n_all + eta * cz - np.log(den).sum(-1)
        return np.where(den.min(-1) > 0, g, np.inf), den

    a, eta = np.tile(np.array(sizes, float), (ok.size, 1)), np.zeros(ok.size)
    den = a[:, seg].copy()                                  # a + eta z at eta = 0
    idx = np.flatnonzero(ok)             # rows still iterating (each row its own Newton path)
    zs, ds, cz_act = z[idx], den[idx], cz[idx]
    g = dual(a[idx], eta[idx], zs, cz_act)[0]
    for _ in range(max_iter):
        w = 1.0 / ds
        w2 = w * w
        grad_a = 1.0 - np.add.reduceat(w, starts, axis=-1)
        grad_e = cz_act - (w * zs).sum(-1)
        # Newton step from the Hessian [[diag(h_a), v], [v', h_e]] by its Schur complement
        # h_e - sum v²/h_a = sum_k (w_k²-weighted variance of z_k) >= 0, computed as such
        h_a = np.add.reduceat(w2, starts, axis=-1)
        v = np.add.reduceat(w2 * zs, starts, axis=-1)
        schur = (w2 * (zs - (v / h_a)[:, seg]) ** 2).sum(-1)
        rhs = grad_e - (v * grad_a / h_a).sum(-1)
        step_e = np.where(schur > 0, rhs / np.where(schur > 0, schur, 1.0), 0.0)
        step_a = (grad_a - v * step_e[:, None]) / h_a
        dec = (grad_a * step_a).sum(-1) + grad_e * step_e
        # converged: gradient below tol, or Newton decrement at rounding level
        keep = (np.maximum(np.abs(grad_a).max(-1), np.abs(grad_e)) >= tol) & (dec >= tol * tol)
        if not keep.all():
            idx, zs, ds, g, cz_act = idx[keep], zs[keep], ds[keep], g[keep], cz_act[keep]
            step_a, step_e, dec = step_a[keep], step_e[keep], dec[keep]
            if idx.size == 0:
                break
        # the longest step that keeps every a_k + eta z_ki > 0, then backtracking
        slope = -(step_a[:, seg] + step_e[:, None] * zs)
        neg = slope < 0
        reach = np.where(neg, -ds / np.where(neg, slope, -1.0), np.inf).min(-1)
        t = np.where(np.isfinite(reach), np.minimum(1.0, 0.99 * reach), 1.0)
        a0, e0 = a[idx], eta[idx]
        a_new, e_new, g_new, d_new = a0.copy(), e0.copy(), g.copy(), ds.copy()
        pending = np.ones(idx.size, bool)
        while pending.any():            # backtracking: decrease the dual, row by row
            p = np.flatnonzero(pending)
            a_try, e_try = a0[p] - t[p, None] * step_a[p], e0[p] - t[p] * step_e[p]
            g_try, d_try = dual(a_try, e_try, zs[p], cz_act[p])
            # (the rounding allowance ends the search once the dual is flat to machine precision)
            acc = (g_try <= g[p] - 1e-4 * t[p] * dec[p] + 1e-13 * (1 + np.abs(g[p]))) | (t[p] < 1e-12)
            r = p[acc]
            a_new[r], e_new[r], g_new[r], d_new[r] = a_try[acc], e_try[acc], g_try[acc], d_try[acc]
            pending[r] = False
            t[p[~acc]] *= 0.5
        a[idx], eta[idx], den[idx] = a_new, e_new, d_new
        g, ds = g_new, d_new
    w = 1.0 / den
    w /= np.add.reduceat(w, starts, axis=-1)[:, seg]
    weights = [wi.reshape(shape + (wi.shape[-1],)) for wi in np.split(w, starts[1:], axis=-1)]
    return weights, ok.reshape(shape)


def _welch_df(a, b, nx: int, ny: int):
    """Welch–Satterthwaite df of a variance a + b (a, b the two means' variances)."""
    denom = a**2 / (nx - 1) + b**2 / (ny - 1)
    return np.where(denom > 0, (a + b) ** 2 / np.where(denom > 0, denom, 1.0), float(nx + ny - 2))


def _t_of(num, var):
    """num/√var, or ±inf (0 at num = 0) where the variance is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = num / np.sqrt(var)
    return np.where(var > 0, t, np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0)))


def _tilted_var(s: np.ndarray, w: np.ndarray):
    """Variance of s under weights w (last axis), scaled by n/(n − 1) (var(s, ddof=1) at w = 1/n)."""
    m = (w * s).sum(-1, keepdims=True)
    return (w * (s - m) ** 2).sum(-1) * s.shape[-1] / (s.shape[-1] - 1)


def _root_beyond(f, x: float, step: float, end: float, kw: dict) -> float | None:
    """The root of f beyond x towards end, where f(x) > 0: probes x + step, x + 2 step,
    x + 4 step, ... (at most end) until f <= 0, then Brent's method on the last bracket.
    None if f(end) > 0 still."""
    a = x
    step = step if step != 0 else 1e-6 * (end - x)     # a limit at the estimate itself
    for _ in range(64):
        b = x + step
        if (b - end) * (x - end) <= 0:      # at or past the end
            b = end
        if f(b) <= 0:
            return float(optimize.brentq(f, min(a, b), max(a, b), **kw))
        if b == end:
            return None
        a, step = b, 2 * step
    return None



def _pvalue_of(value, name: str) -> float:
    p = value.pvalue if hasattr(value, "pvalue") else value
    return check_real(p, name, low=0.0, high=1.0)


def equivalence_verdict(equivalence, difference=None, alpha: float = 0.05) -> str:
    """Three-way verdict from an equivalence (TOST) test and a difference test.

    Parameters
    ----------
    equivalence : EquivalenceResult or float
        The TOST result (``alternative="equivalence"``) or its p-value (adjusted, if the
        report corrects the family: a TOST p-value is adjusted like any other). A
        one-sided (non-inferiority) result is refused: its rejection bounds one side
        only (x at half of y is "non-inferior" within 1.1), so "equivalent within δ"
        would be a wrong claim; read its ``within_margin``.
    difference : result with ``pvalue``, float, or None
        The test of no difference (e.g. :func:`kvstats.stats.mann_whitney`, possibly
        adjusted). None: ``equivalence.pvalue_difference`` of an EquivalenceResult.
    alpha : float in (0, 1)

    Returns
    -------
    str
        One of :data:`VERDICTS`: "equivalent within δ" if the TOST rejects (whatever the
        difference test says: a significant difference smaller than δ is still within
        the margin), else "different" if the difference test rejects, else
        "inconclusive" (neither equivalence nor a difference is shown).

    Examples
    --------
    >>> from kvstats.stats.equivalence import equivalence_verdict
    >>> equivalence_verdict(0.01, 0.60), equivalence_verdict(0.40, 0.001), equivalence_verdict(0.4, 0.3)
    ('equivalent within δ', 'different', 'inconclusive')
    """
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    if isinstance(equivalence, EquivalenceResult) and equivalence.alternative != "equivalence":
        raise ValueError("equivalence must be a two-sided TOST (alternative='equivalence') for an "
                         f"equivalence verdict; received alternative={equivalence.alternative!r}, "
                         "a non-inferiority test: its within_margin says whether that is shown")
    p_eq = _pvalue_of(equivalence, "equivalence")
    if difference is None:
        if not isinstance(equivalence, EquivalenceResult):
            raise TypeError("difference may be omitted only when equivalence is an "
                            f"EquivalenceResult; received {_describe(equivalence)}")
        p_diff = equivalence.pvalue_difference
    else:
        p_diff = _pvalue_of(difference, "difference")
    if p_eq <= alpha:
        return VERDICTS[0]
    if p_diff <= alpha:
        return VERDICTS[1]
    return VERDICTS[2]
