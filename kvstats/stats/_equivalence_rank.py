"""The rank TOST, :func:`tost_rank` (import it from :mod:`kvstats.stats.equivalence`).

A module of its own because its machinery is the rank test's alone: the mid-rank
placements, Brunner–Munzel's variance and its paired form, the variance bound where every
placement is constant, and the score-type test on the null-restricted placements
(:class:`_RankScore`). The result type, the checks, the t-test core and the
empirical-likelihood reweighting it shares with the ratio test are in
:mod:`kvstats.stats.equivalence`, whose docstring gives the overview.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float
from scipy import stats

from kvstats._checks import _describe, check_real

from . import equivalence as _eq
from ._base import as_sample
from .equivalence import (EquivalenceResult, _check_common, _check_pair_sizes, _identical_pairs,
                          _root_beyond, _t_of, _t_tests, _tilt, _tilted_var, _TRef, _welch_df)

__all__ = ["tost_rank"]


def _placements(x: np.ndarray, y: np.ndarray):
    """Normalised mid-rank placements: F̂_y(x_i) and F̂_x(y_j), ties counted one half
    (each row of x against the same row of y)."""
    nx, ny = x.shape[-1], y.shape[-1]
    ranks = stats.rankdata(np.concatenate([x, y], axis=-1), axis=-1)
    px = (ranks[..., :nx] - stats.rankdata(x, axis=-1)) / ny
    py = (ranks[..., nx:] - stats.rankdata(y, axis=-1)) / nx
    return px, py


class _RankScore:
    """Score-type rank tests: the Brunner–Munzel variance under the null-restricted placements.

    For a hypothesised θ0, the placements F̂_y(x_i) and F̂_x(y_j)' = 1 − F̂_x(y_j) are
    reweighted (empirical likelihood, :func:`_tilt`) so that the linearised θ
    (Hájek projection: E_w[F̂_y(X)] + E_v[F̂_x(Y)'] − θ̂) equals θ0, and var(θ̂) is
    evaluated under those weights (paired: the weights act on the trials' summed
    placements). On a constant arm against a binary one this is the score (Wilson) test
    of the binomial proportion. Beyond the range the reweighting can reach, the largest
    possible variance is used (as for constant placements), and each one-sided p-value is
    the supremum over its composite null, so test and interval agree. Vectorised over
    leading axes of the placements, as :class:`_FiellerT`.
    """

    def __init__(self, px: np.ndarray, qy: np.ndarray, est, paired: bool):
        self.est, self.paired = est, paired
        self.nx, self.ny = px.shape[-1], qy.shape[-1]
        self.samples = [px + qy] if paired else [px, qy]
        reach = (sum(s.min(-1) for s in self.samples) - est,
                 sum(s.max(-1) for s in self.samples) - est)
        self.reach = reach             # θ0 strictly inside: the reweighting exists
        self.se_bound = float(np.sqrt(1.0 / self.nx if paired else 0.25 / min(self.nx, self.ny)))

    def t_df(self, theta0):
        w, ok = _tilt(self.samples, theta0 + self.est)
        if self.paired:
            var = _tilted_var(self.samples[0], w[0]) / self.nx
            df = np.full(np.shape(var), float(self.nx - 1))
        else:
            a = _tilted_var(self.samples[0], w[0]) / self.nx
            b = _tilted_var(self.samples[1], w[1]) / self.ny
            var, df = a + b, _welch_df(a, b, self.nx, self.ny)
        return (np.where(ok, _t_of(self.est - theta0, var), (self.est - theta0) / self.se_bound),
                np.where(ok, df, np.inf))

    def p_upper(self, m):
        """p-value of H0: θ >= m: the restricted test at m, or at the nearest θ0 >= m the
        reweighting cannot reach (the bound variance there), whichever is larger."""
        t, df = self.t_df(m)
        p = stats.t.cdf(t, df)
        bound = stats.norm.cdf((self.est - np.maximum(m, self.reach[1])) / self.se_bound)
        return np.where(self.reach[1] <= 1.0, np.maximum(p, bound), p)

    def p_lower(self, m):
        """p-value of H0: θ <= m (mirror of :meth:`p_upper`)."""
        t, df = self.t_df(m)
        p = stats.t.sf(t, df)
        bound = stats.norm.sf((self.est - np.minimum(m, self.reach[0])) / self.se_bound)
        return np.where(self.reach[0] >= 0.0, np.maximum(p, bound), p)

    def limit(self, alpha: float, upper: bool, start: float) -> float:
        """The interval end (one sample) beyond ``start``, the plug-in test's end: where the
        composite p-value falls to alpha (0 or 1 if never), or ``start`` if it has there
        already (the interval is the union of both tests' intervals)."""
        end = 1.0 if upper else 0.0
        if (start >= end) if upper else (start <= end):
            return start
        p = self.p_upper if upper else self.p_lower
        f = lambda m: float(p(m)) - alpha   # noqa: E731
        if f(start) <= 0:
            return start
        root = _root_beyond(f, start, 0.25 * (start - float(self.est)), end, dict(xtol=1e-12))
        return end if root is None else root

    def tests(self, lo: float, hi: float, alternative: str):
        """(statistic, p_lo, p_hi) of the score-type one-sided tests (NaN p where unused)."""
        shape = np.shape(self.est)
        p_lo = p_hi = np.full(shape, np.nan)
        t_lo, t_hi = np.full(shape, np.inf), np.full(shape, -np.inf)
        if alternative in ("equivalence", "greater"):
            t_lo, p_lo = self.t_df(lo)[0], self.p_lower(lo)
        if alternative in ("equivalence", "less"):
            t_hi, p_hi = self.t_df(hi)[0], self.p_upper(hi)
        return np.minimum(t_lo, -t_hi), p_lo, p_hi


def _rank_tests(x: np.ndarray, y: np.ndarray, lo: float, hi: float, alpha: float,
                alternative: str, paired: bool):
    """tost_rank's numbers but the score-type interval ends, vectorised over rows of x, y.

    Returns est, se, df, bound (the variance bound was used), the tuple of _t_tests with
    the score-type p-values merged in, and the _RankScore (None where not used).
    """
    px, py = _placements(x, y)
    n_x, n_y = x.shape[-1], y.shape[-1]
    est = px.mean(-1)
    if paired:
        var = np.var(px - py, axis=-1, ddof=1) / n_x
        df = np.full(np.shape(var), float(n_x - 1))
    else:
        a = np.var(px, axis=-1, ddof=1) / n_x
        b = np.var(py, axis=-1, ddof=1) / n_y
        var, df = a + b, _welch_df(a, b, n_x, n_y)
    # Every placement constant (all values tied, or complete separation): the rank
    # variance estimate is 0 and says nothing about θ̂'s spread. Use the largest
    # variance any θ̂ of these sizes can have instead, with a normal reference:
    # unpaired, Var(θ̂) <= θ(1 − θ)/min(n_x, n_y) <= 1/(4 min(n_x, n_y)) (Birnbaum &
    # Klose 1957; for any kernel in [0, 1], ties included); paired, F_y(X) − F_x(Y)
    # lies in [−1, 1], so Var(θ̂) <= 4θ(1 − θ)/n <= 1/n.
    bound = ~(var > 0)
    var = np.where(bound, 1.0 / n_x if paired else 0.25 / min(n_x, n_y), var)
    df = np.where(bound, np.inf, df)
    se = np.sqrt(var)
    statistic, pvalue, p_lo, p_hi, ci_lo, ci_hi, p_diff = _t_tests(
        est, se, _TRef(df), lo, hi, 0.5, alpha, alternative)
    score = None
    if _eq._NULL_RESTRICTED and not np.all(bound):
        # score-type: each margin tested with the variance it implies (p_diff stays the
        # Brunner–Munzel test of θ = ½, exactly scipy's), and the plug-in test: a margin
        # is rejected only where both reject (valid where either is), so the interval is
        # the union of theirs
        score = _RankScore(px, 1.0 - py, est, paired)
        s_stat, s_lo, s_hi = score.tests(lo, hi, alternative)
        p_lo = np.where(bound, p_lo, np.fmax(p_lo, s_lo))
        p_hi = np.where(bound, p_hi, np.fmax(p_hi, s_hi))
        pvalue = np.fmax(p_lo, p_hi)
        statistic = np.where(bound, statistic, np.minimum(statistic, s_stat))
    return est, se, df, bound, (statistic, pvalue, p_lo, p_hi, ci_lo, ci_hi, p_diff), score


def _tost_rank_pvalues(x: np.ndarray, y: np.ndarray, delta=0.1, alternative: str = "equivalence",
                       paired: bool = False) -> np.ndarray:
    """TOST (or one-sided) p-values of :func:`tost_rank` for many samples at once: row i of x
    (shape (B, n_x)) against row i of y. The code tost_rank runs, without its interval
    search and input checks; for calibration studies."""
    low, high = _rank_margin(delta)
    lo = low if alternative != "less" else -np.inf
    hi = high if alternative != "greater" else np.inf
    return _rank_tests(np.asarray(x, float), np.asarray(y, float), lo, hi, 0.05, alternative,
                       paired)[4][1]


def _rank_margin(delta) -> tuple[float, float]:
    if isinstance(delta, tuple | list | np.ndarray) and np.ndim(delta) > 0:
        if len(delta) != 2:
            raise ValueError(f"delta must be a float in (0, 0.5) or a pair (low, high) with "
                             f"0 <= low < 0.5 < high <= 1; received {_describe(delta)}")
        low = check_real(delta[0], "delta[0]", low=0.0, high=0.5, high_open=True)
        high = check_real(delta[1], "delta[1]", low=0.5, high=1.0, low_open=True)
        return low, high
    d = check_real(delta, "delta", low=0.0, high=0.5, low_open=True, high_open=True)
    return 0.5 - d, 0.5 + d


def tost_rank(x: Float[np.ndarray, "n_x"], y: Float[np.ndarray, "n_y"],
              delta: float | tuple[float, float] = 0.1, alpha: float = 0.05,
              alternative: str = "equivalence", paired: bool = False) -> EquivalenceResult:
    """Rank TOST: the probability of superiority θ = P(X > Y) + ½ P(X = Y) near one half.

    Tests H0: θ <= 0.5 − δ or θ >= 0.5 + δ against H1: |θ − 0.5| < δ, where
    θ̂ = U/(n_x n_y) is Mann–Whitney's common-language effect size (rank-biserial
    r = 2θ − 1, so the region is |r| < 2δ). Standard error and df are Brunner & Munzel's
    (2000): var(θ̂) = var(F̂_y(x_i))/n_x + var(F̂_x(y_j))/n_y from the mid-rank
    placements, df by Welch–Satterthwaite; valid with ties and unequal spreads (unlike
    variances derived under H0: F_x = F_y). With ``paired=True`` the placements of one
    trial are differenced, var(θ̂) = var(F̂_y(x_i) − F̂_x(y_i))/n, df n − 1 (Munzel 1999).

    Parameters
    ----------
    x, y : array_like, 1-D
        The samples (NaN rejected, ±inf allowed: only ranks are used).
    delta : float in (0, 0.5) or (float, float)
        Half-width of the region [0.5 − δ, 0.5 + δ], or its bounds (low, high) with
        0 <= low < 0.5 < high <= 1.
    alpha : float in (0, 0.5)
    alternative : {"equivalence", "less", "greater"}
        "less": H1: θ < high (x not stochastically larger by more than the margin);
        "greater": H1: θ > low.
    paired : bool
        x[i] and y[i] come from the same trial.

    Returns
    -------
    EquivalenceResult
        ``pvalue_difference`` is the Brunner–Munzel test of θ = 0.5
        (``scipy.stats.brunnermunzel`` for unpaired data).

    Notes
    -----
    If every placement is constant (complete separation, or all values equal) the
    Brunner–Munzel standard error is 0, which would make any n look decisive (two tied
    values each would be "equivalent"). The test then uses the largest standard error θ̂
    can have at these sample sizes, with a normal reference (method ``"…-bound"``, df
    inf): 1/(2√min(n_x, n_y)) unpaired (Birnbaum & Klose 1957: Var(θ̂) <= θ(1 − θ)/min(n_x,
    n_y)), 1/√n paired. Valid whatever the distributions, and conservative: all-tied
    samples of 2 are not equivalent within δ = 0.1 (p = 0.39), of 200 they are (p = 0.002).

    Score-type half: each margin θ0 is also tested with the Brunner–Munzel variance under
    the null-restricted placements (empirical-likelihood weights on the placements with
    linearised θ = θ0, Owen 2001; beyond the range they can reach, the largest variance
    above), and a p-value is the larger of the two; the interval is the union of both
    intervals (method ``"…-score"``). The plug-in variance alone is small exactly when few
    events were seen: x ≡ 0 against y ~ Bernoulli(0.2) (θ = 0.4, on the margin) rejected
    in 12.2% of samples at n = 30 and α = 0.05 (exact), 6.2% at n = 300; now 4.3% and
    4.6%, the binomial score test of the event rate (docs/statistics.md, "Equivalence
    and non-inferiority"). ``standard_error`` is the plug-in one; ``df`` the binding
    one-sided test's.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats.equivalence import tost_rank
    >>> rng = np.random.default_rng(0)
    >>> res = tost_rank(rng.normal(0, 1, 400), rng.normal(0, 1, 400), delta=0.1)
    >>> round(res.estimate, 3), round(res.low, 3), round(res.high, 3), res.within_margin
    (0.491, 0.457, 0.525, True)
    """
    x = as_sample(x, "x", allow_inf=True)
    y = as_sample(y, "y", allow_inf=True)
    alpha, paired = _check_common(alpha, alternative, paired)
    low, high = _rank_margin(delta)
    _check_pair_sizes(x, y, paired)
    identical = _identical_pairs(x, y, paired)
    lo = low if alternative != "less" else -np.inf
    hi = high if alternative != "greater" else np.inf
    est, se, df, bound, tests, score = _rank_tests(x, y, lo, hi, alpha, alternative, paired)
    statistic, pvalue, p_lo, p_hi, ci_lo, ci_hi, p_diff = (float(v) for v in tests)
    method = "brunner-munzel-paired" if paired else "brunner-munzel"
    if bound:
        method += "-bound"
    elif score is not None:
        if np.isfinite(lo):
            ci_lo = score.limit(alpha, upper=False, start=ci_lo)
        if np.isfinite(hi):
            ci_hi = score.limit(alpha, upper=True, start=ci_hi)
        method += "-score"
    return EquivalenceResult(
        test="tost_rank", statistic=statistic, pvalue=pvalue, estimate=float(est),
        low=float(max(ci_lo, 0.0)) if np.isfinite(ci_lo) else 0.0,
        high=float(min(ci_hi, 1.0)) if np.isfinite(ci_hi) else 1.0,
        margin_low=float(max(lo, 0.0)), margin_high=float(min(hi, 1.0)),
        pvalue_low=p_lo, pvalue_high=p_hi, pvalue_difference=p_diff,
        within_margin=bool(pvalue <= alpha), standard_error=float(se), df=float(df),
        alpha=alpha, alternative=alternative, method=method, n_x=int(x.size), n_y=int(y.size),
        identical_pairs=identical)
