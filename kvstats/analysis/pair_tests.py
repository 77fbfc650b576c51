"""The tests :func:`~kvstats.analysis.compare_schemes` runs on one pair, each as a table row.

Per metric: Mann–Whitney (two independent samples) or the sign test (pairs matched on the
unit), the two-sample KS test (unpaired only), the equivalence test (TOST) where a margin
is declared; on the standardised 6D profile the energy permutation test (exact where its
relabelling group is small, else sequential). Each row says what the test could resolve
(``min_attainable_p``, the permutations it drew or enumerated), read by
:mod:`~kvstats.analysis.verdicts` once the family is known.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from jaxtyping import Float

from kvstats.analysis._tied_floor import MAX_COUNT_VECTORS, tied_energy_floor
from kvstats.analysis.resolution import (_rank_tost_witness, extreme_pvalue, permutation_floor,
                                         rounding_canonical, rounding_ties, sign_extreme_pvalue,
                                         tied_permutation_floor)

__all__: list[str] = []   # the rows are compare_schemes' parts, not an interface

#: One row of the comparison table (before the family's adjustment).
Row = dict[str, float | int | str]

_NO_RESOLUTION = {"n_permutations": 0, "max_permutations": 0, "margin_low": math.nan,
                  "margin_high": math.nan}
# ``n_informative``: the units that carry the test's information, where that is a count
# other than n_a and n_b (the sign test's nonzero differences, the paired energy test's pairs
# whose profiles differ, 0 for two samples of one pooled value or profile); NaN otherwise
_NOT_COUNTED = {"n_informative": math.nan}


def _pooled_count(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"]) -> dict[str, float]:
    """A two-sample row's ``n_informative``: 0 where the pooled values are all one (after
    rounding_canonical: no value tells the samples apart, p = 1; the two schemes' values
    were equal on every unit, as a sign row's "none of the n pairs differs"), else NaN."""
    pooled = np.concatenate([x, y])
    return {"n_informative": 0.0 if pooled.size and (pooled == pooled[0]).all() else math.nan}


def _mw_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"]) -> Row:
    from kvstats.stats import mann_whitney

    res = mann_whitney(x, y)
    return {"test": "mann_whitney", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.rank_biserial), "effect_low": float(res.rank_biserial_low),
            "effect_high": float(res.rank_biserial_high), "note": "", **_NO_RESOLUTION,
            **_pooled_count(x, y), "min_attainable_p": extreme_pvalue("mann_whitney", x, y)}


def _sign_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"]) -> Row:
    from kvstats.stats import sign_test

    # a pair equal up to rounding (a text's mean summed in another order) is a zero difference,
    # not a win that rounding decided (resolution.rounding_ties)
    tie = rounding_ties(x, y)
    rounded = int(np.count_nonzero(tie & (x != y)))
    res = sign_test(x, np.where(tie, x, y))     # a metric may be +inf (SNR of an exact reconstruction)
    # no pair differs: the dominance is 0/0, undefined (the report's "—"), so NaN, not
    # sign_test's 0 with the placeholder [-1, 1], which a pooled or averaged CSV reads as measured
    effect = ((res.dominance, res.dominance_low, res.dominance_high) if res.n_nonzero
              else (math.nan,) * 3)
    return {"test": "sign", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            **dict(zip(("effect", "effect_low", "effect_high"), map(float, effect))),
            "note": (f"sign test, {res.n_nonzero} nonzero of {res.n_pairs} paired differences "
                     f"({res.n_positive} a > b, {res.n_negative} a < b"
                     + (f"; {rounded} equal up to rounding, counted as zero" if rounded else "")
                     + ")"),
            # the test's own count of nonzero differences: its resolution, and the report's
            # "only k of the n pairs differ", read from this column, not from the note
            "n_informative": float(res.n_nonzero), **_NO_RESOLUTION,
            "min_attainable_p": sign_extreme_pvalue(res.n_nonzero)}


def _ks_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"], seed: int) -> Row:
    from kvstats.stats import ks_2samp
    from kvstats.stats.ks_exact import ks_2samp_exact

    tied = np.unique(np.concatenate([x, y])).size < x.size + y.size
    resolution = dict(_NO_RESOLUTION)
    if tied:
        # the continuous Smirnov p-value is far too conservative on tied (quantized) values
        res = ks_2samp_exact(x, y, seed=seed)
        note = "ties: exact conditional test"
        if res.method == "permutation":
            note = f"ties: permutation p-value (B = {res.n_resamples})"
            resolution.update(n_permutations=res.n_resamples, max_permutations=res.n_resamples)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ks_2samp(x, y)
        note = ""
    min_p = extreme_pvalue("ks", x, y)
    if resolution["max_permutations"]:
        min_p = max(min_p, 1.0 / (1 + resolution["max_permutations"]))
    return {"test": "ks", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.statistic), "effect_low": math.nan, "effect_high": math.nan,
            "note": note, **resolution, **_pooled_count(x, y), "min_attainable_p": min_p}


def _energy_row(X: Float[np.ndarray, "n 6"], Y: Float[np.ndarray, "m 6"], max_permutations: int,
                stop: int, seed: int, paired: bool = False) -> Row:
    from kvstats.stats.sequential import energy_test_sequential, monte_carlo_resolution

    # values equal up to rounding are one value, as the sign and rank tests count them: the
    # test standardises each coordinate, which would blow a spread of one ulp (a constant
    # metric summed in another order) up to a unit spread and a "difference"
    X, Y = _rounding_merged(X, Y, paired)
    # method "auto": every relabelling where the group is small (up to 20 differing pairs;
    # every split of up to 21 units), else drawn; unpaired it is called as before the
    # paired design existed
    res = energy_test_sequential(X, Y, max_permutations=max_permutations, h=stop, seed=seed,
                                 standardize=True, **({"paired": True} if paired else {}))
    # what the test can resolve: the least p-value any relabelling of these data gets (the
    # share of relabellings that tie with the most extreme one: 2/C(8, 4) for 4 distinct units
    # against 4), which an exact test returns on such data and computes itself (the max below
    # keeps it); a drawn one returns 1/(1 + B_max) there only while (1 − floor)^B_max ≥ ½, so
    # its resolution is the p-value they get at least half the time (monte_carlo_resolution).
    # Untied: the group's floor, 2^(1−m) over the m pairs whose profiles differ (beyond
    # rounding, as the sign test counts them; none: p = 1, n_informative 0), 2/C(2n, n) or
    # 1/C(N, n_a) for two samples. Tied profiles (copies of one point, or of one pair): other
    # splits can tie the most extreme one, so tied_permutation_floor is only a lower bound
    # (925 times too low on 6, 12, 6 copies of three collinear points): the floor is
    # enumerated over count vectors (_tied_floor). Beyond 10^6 of them (many distinct
    # profiles: the coincidences that bound misses need few) the bound stays, exact for
    # distinct profiles in general position, the assumption of the untied floor too
    general = False
    if paired:
        m = int((~rounding_ties(X.ravel(), Y.ravel()).reshape(X.shape).all(axis=1)).sum())
        units, informative = (permutation_floor(m, m, True) if m else 1.0), float(m)
        # a pair of profiles as an unordered pair of distinct-point indices: two pairs tie when equal
        point = np.unique(np.concatenate([X, Y]), axis=0, return_inverse=True)[1].ravel()
        pair = np.sort(point.reshape(2, -1).T, axis=1)
        tied = bool(m) and np.unique(pair[pair[:, 0] != pair[:, 1]], axis=0).shape[0] < m
    else:
        counts = np.unique(np.concatenate([X, Y]), axis=0, return_counts=True)[1]
        units = tied_permutation_floor(counts, len(X))
        informative = 0.0 if counts.size == 1 else math.nan
        tied = counts.size > 1 and counts.max() > 1
    exact = res.method == "exact"
    if tied and not exact:
        enumerated = tied_energy_floor(X, Y, paired=paired)
        general = enumerated is None
        units = units if general else enumerated
    floor = max(float(res.min_attainable_p), units if exact else
                monte_carlo_resolution(units, int(res.max_permutations), int(res.h)))
    # an exact row's permutations are the relabelling classes it enumerated, all it could use
    # (so the verdict names the units, not a B, as what limits it)
    used = int(res.n_permutations)
    return {"test": "energy", "metric": "profile_6d", "statistic": float(res.statistic),
            "pvalue": float(res.pvalue), "effect": math.nan, "effect_low": math.nan,
            "effect_high": math.nan, "n_permutations": used,
            "max_permutations": used if exact else int(res.max_permutations),
            "min_attainable_p": floor, "margin_low": math.nan,
            "margin_high": math.nan, "n_informative": informative,
            "note": "standardised 6D profile" + (", within-pair swaps" if paired else "")
                    + (f", exact ({used} relabellings)" if exact
                       else ", stopped early" if res.stopped_early else "")
                    + ("; floor of tied profiles counting copies only (more than "
                       f"{MAX_COUNT_VECTORS} count vectors to enumerate)" if general else "")}


def _rounding_merged(X: Float[np.ndarray, "n d"], Y: Float[np.ndarray, "m d"], paired: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``X``, ``Y`` with coordinates equal up to rounding made equal: per pair and coordinate
    (:func:`rounding_ties`, b takes a's value: a swap leaves the rule unchanged) or, two
    samples, per coordinate over the pooled values (:func:`rounding_canonical`, a function of
    the pooled values: the permutation null is kept). Unchanged arrays are returned as given
    (their memory layout sets the order of the statistic's sums, hence its last bits)."""
    if paired:
        merge = rounding_ties(X.ravel(), Y.ravel()).reshape(X.shape) & (X != Y)
        if merge.any():
            Y = Y.copy(order="K")
            Y[merge] = X[merge]
        return X, Y
    merged = [rounding_canonical(X[:, j], Y[:, j]) for j in range(X.shape[1])]  # 6 coordinates
    changed = [j for j, (x, y) in enumerate(merged) if (x != X[:, j]).any() or (y != Y[:, j]).any()]
    if changed:
        X, Y = X.copy(order="K"), Y.copy(order="K")
        for j in changed:
            X[:, j], Y[:, j] = merged[j]
    return X, Y


def _no_tost_reason(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"], test: str,
                    labels: tuple[str, str]) -> str | None:
    """Why no TOST can be run on these samples, said of the scheme (``labels``: a's and b's)
    for a reader of the report, or None. (The tests' own errors name their arguments, x
    and y, which a report has no use for.)"""
    for v, name in zip((x, y), labels):
        if v.size < 2:
            return f"{name} has {v.size} value(s); a TOST estimates a spread and needs 2 or more"
    if test != "ratio":      # ranks: an infinite value ranks like any other
        return None
    for v, name in zip((x, y), labels):
        bad = ~np.isfinite(v)
        if bad.any():
            kinds = ", ".join(f"{k} {s}" for k, s in ((np.isposinf(v).sum(), "+inf"),
                                                      (np.isneginf(v).sum(), "−inf"),
                                                      (np.isnan(v).sum(), "NaN")) if k)
            return (f"{name} has {int(bad.sum())} non-finite value(s) of {v.size} ({kinds}), "
                    "so its mean is not finite and no ratio of means exists")
        if (v < 0).any():
            return (f"{name} has {int((v < 0).sum())} negative value(s) of {v.size}; a ratio "
                    "of means is tested on values ≥ 0")
    zero = [f"{name}'s {v.size}" for v, name in zip((x, y), labels) if not v.any()]
    if len(zero) == 2:   # every all-zero side named: both, 0/0
        return f"{zero[0]} values and {zero[1]} values are all 0; a ratio of means 0/0 is undefined"
    if zero:
        return f"{zero[0]} values are all 0; a ratio to a mean of 0 is undefined"
    return None


def _equivalence_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"], margin: float,
                     test: str, alpha: float, paired: bool = False,
                     labels: tuple[str, str] = ("a", "b")) -> Row:
    from kvstats.stats.equivalence import SkewedPairsWarning, tost_rank, tost_ratio

    if not 0 < alpha < 0.5:
        # an option's error, raised, not turned into an "inconclusive" row below: no TOST has
        # a (1 − 2α) interval from α = 0.5 on, whatever the data
        raise ValueError(f"alpha must be in (0, 0.5) with equivalence margins (a TOST's interval "
                         f"is at 1 − 2α); received {alpha!r}")
    base = {"test": "equivalence", "n_permutations": 0, "max_permutations": 0, **_NOT_COUNTED}
    if test == "rank":
        # θ counts ties as ½: values equal up to rounding are ties, as the sign test and
        # Mann–Whitney count them (else rounding's direction moves θ by ½·P(tie), up to the margin)
        x, y = rounding_canonical(x, y)
    elif paired:
        # a pair equal up to rounding is one value, as the sign test counts it: else the last
        # bits give identical pairs a spread, an interval as narrow as that, and "equivalent
        # within δ" where the identical values give a bound (EquivalenceResult.identical_pairs)
        y = np.where(rounding_ties(x, y), x, y)
    reason = _no_tost_reason(x, y, test, labels)
    if reason is None:
        try:
            with warnings.catch_warnings():
                # about tost_ratio's pvalue_difference, which a row never reads (its difference
                # test is the row's own location test: analysis/verdicts.py)
                warnings.simplefilter("ignore", SkewedPairsWarning)
                res = (tost_ratio(x, y, margin=margin, alpha=alpha, paired=paired) if test == "ratio"
                       else tost_rank(x, y, delta=margin, alpha=alpha, paired=paired))
        except ValueError as exc:  # a case the reasons above do not foresee: its own words
            reason = str(exc)
    if reason is not None:     # no test, said so
        lo, hi = ((1 / (1 + margin), 1 + margin) if test == "ratio" else (0.5 - margin, 0.5 + margin))
        return {**base, "min_attainable_p": math.nan, "statistic": math.nan, "pvalue": math.nan,
                "effect": math.nan,
                "effect_low": math.nan, "effect_high": math.nan, "margin_low": lo,
                "margin_high": hi, "note": f"no equivalence test: {reason}"}
    what = "mean(a)/mean(b)" if test == "ratio" else "θ = P(a > b) + ½P(a = b)"
    # Could it have concluded equivalence at these sizes? The ratio TOST's p goes to 0 on two
    # arms of equal means and vanishing spread (n >= 2 each, which it needs): 0 is its
    # infimum. The rank TOST's smallest p has no closed form: the least over the observed
    # data and a family of data of these sizes, an upper bound (resolution._rank_tost_witness)
    floor = 0.0 if test == "ratio" else min(float(res.pvalue), _rank_tost_witness(
        len(x), len(y), margin, alpha, paired))
    return {**base, "min_attainable_p": floor, "statistic": float(res.statistic),
            "pvalue": float(res.pvalue),
            "effect": float(res.estimate), "effect_low": float(res.low),
            "effect_high": float(res.high), "margin_low": float(res.margin_low),
            "margin_high": float(res.margin_high), "identical_pairs": bool(res.identical_pairs),
            "note": (f"TOST, {what} in [{res.margin_low:.4g}, {res.margin_high:.4g}], "
                     f"{res.method}; interval {100 * (1 - 2 * alpha):.10g}% unadjusted")}
