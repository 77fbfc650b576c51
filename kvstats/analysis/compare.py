"""Pairwise tests between schemes at each case and budget, adjusted over the whole table.

Per pair, case and budget: a location test and (unpaired design) a two-sample KS test per
metric (by default the reported metrics and the trial's energy-pooled SNRs of keys and
values where the frame has them: :func:`default_metrics` says why both; KS exact
conditional on the ties when the values are tied), an energy permutation
test on the standardised 6D profile with the resolution the family needs (Besag–Clifford
sequential p-values up to :func:`kvstats.stats.sequential.required_resolution`'s B), and
per metric with a declared margin an equivalence test (TOST). Every row states what it
could have concluded (:mod:`kvstats.analysis.resolution`) and its ``verdict``.

Two designs (``pairing``). All schemes of a case see the same trials (synthetic: the same
``trial``; cluster means of a real capture: the same ``cluster``), so the two schemes'
values are paired. ``pairing="none"`` treats them as two independent samples
(Mann–Whitney, KS, energy with free relabelling): that is valid only when the paired
values are independent, conservative where they are positively correlated and
anti-conservative (p-values too small) where they are negatively correlated, which
occurs (the report measures the trial-paired Spearman ρ). ``pairing="trial"`` (the
default, as the report's) matches the rows one-to-one on the unit and uses the paired
tests: the sign test, the energy test with within-pair swaps, the paired TOST; no KS (the
two-sample KS test has no valid null for paired samples).

The pairs to compare are checked once, by :func:`check_comparisons` (defined in
:mod:`kvstats.results`, also used by the sweep config and :func:`kvstats.hypothesis_report`):
a given label the frame lacks is a typo, not a pair to skip.

The paired location test is the sign test, not the Wilcoxon signed-rank test, because a
``winner`` means "better on more of the matched units": the sign test's dominance
P(a > b) − P(a < b) is the paired analogue of Mann–Whitney's r. The signed-rank test
weights each pair by the rank of |a − b|, so a few pairs with very large differences
(rare catastrophes of one scheme) can set its direction against the majority of pairs
(docs/statistics.md, "The paired design").

The module is long (~730 lines, a third of them docstrings) because its parts make one
table: the rows of both designs (:func:`_pair_rows`, then the energy tests at the family's
resolution, :func:`_energy_rows`), their family adjustment, resolution and verdicts
(:func:`_adjust_and_judge`).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from jaxtyping import Float

from kvstats._checks import check_choice, check_int, check_real
from kvstats.analysis.clustered import _clusters
from kvstats.analysis.frame import CASE_COLUMNS, METRICS, PROFILE_METRICS, check_frame
from kvstats.analysis.resolution import (attainable_adjusted, extreme_pvalue, not_resolvable_text,
                                         permutation_floor, rounding_canonical, rounding_ties,
                                         sign_extreme_pvalue)
from kvstats.analysis.summary import POOLED_SNRS
from kvstats.metrics.table import METRIC_TABLE
from kvstats.results import check_comparisons  # the one check of the pairs (also the config's)

__all__ = ["compare_schemes", "check_comparisons", "scheme_pairs", "default_metrics", "TESTABLE_METRICS",
           "NO_DIFFERENCE", "DIFFERENT", "DISTRIBUTIONS_DIFFER", "NOT_RESOLVABLE", "PAIRINGS",
           "LOCATION_TESTS"]

#: The designs of :func:`compare_schemes`: two independent samples, or pairs matched on the unit.
PAIRINGS = ("none", "trial")
#: The ``test`` of the per-metric location rows (the rows with a ``winner``), by design.
LOCATION_TESTS = {"none": "mann_whitney", "trial": "sign"}
#: Every metric :func:`compare_schemes` can test: the reported ones (:data:`METRICS`), then
#: the trial's energy-pooled SNRs of keys and values (:data:`~kvstats.analysis.summary.POOLED_SNRS`).
TESTABLE_METRICS = METRICS + POOLED_SNRS

#: The ``winner``/``verdict`` of a resolvable test whose adjusted p-value exceeds alpha.
NO_DIFFERENCE = "no significant difference"
#: The ``verdict`` of a significant Mann–Whitney, sign or KS row.
DIFFERENT = "different"
#: The ``verdict`` of a significant energy row.
DISTRIBUTIONS_DIFFER = "distributions differ"
#: Start of the ``winner``/``verdict`` of a test that could not have rejected.
NOT_RESOLVABLE = "not resolvable"

_COLUMNS = list(CASE_COLUMNS) + ["budget", "budget_b", "scheme_a", "scheme_b", "metric", "test",
                                 "statistic", "pvalue", "effect", "effect_low", "effect_high",
                                 "mean_a", "mean_b", "median_a", "median_b", "n_a", "n_b",
                                 "n_informative", "n_permutations", "max_permutations", "min_attainable_p",
                                 "margin_low", "margin_high", "note", "identical_pairs"]
_NO_RESOLUTION = {"n_permutations": 0, "max_permutations": 0, "margin_low": math.nan,
                  "margin_high": math.nan}
# ``n_informative``: the units that carry the test's information, where that is a count
# other than n_a and n_b (the sign test's nonzero differences); NaN for the other tests
_NOT_COUNTED = {"n_informative": math.nan}
_CORRECTIONS = ("holm", "fdr_bh", "bonferroni", "hommel", "fdr_by", "sidak", "holm-sidak")

Row = dict[str, float | int | str]


def _mw_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"]) -> Row:
    from kvstats.stats import mann_whitney

    res = mann_whitney(x, y)
    return {"test": "mann_whitney", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.rank_biserial), "effect_low": float(res.rank_biserial_low),
            "effect_high": float(res.rank_biserial_high), "note": "", **_NO_RESOLUTION,
            **_NOT_COUNTED, "min_attainable_p": extreme_pvalue("mann_whitney", x, y)}


def _sign_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"]) -> Row:
    from kvstats.stats import sign_test

    # a pair equal up to rounding (a text's mean summed in another order) is a zero difference,
    # not a win that rounding decided (resolution.rounding_ties)
    tie = rounding_ties(x, y)
    rounded = int(np.count_nonzero(tie & (x != y)))
    res = sign_test(x, np.where(tie, x, y))     # a metric may be +inf (SNR of an exact reconstruction)
    return {"test": "sign", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.dominance), "effect_low": float(res.dominance_low),
            "effect_high": float(res.dominance_high),
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
            "note": note, **resolution, **_NOT_COUNTED, "min_attainable_p": min_p}


def _energy_row(X: Float[np.ndarray, "n 6"], Y: Float[np.ndarray, "m 6"], max_permutations: int,
                stop: int, seed: int, paired: bool = False) -> Row:
    from kvstats.stats.sequential import energy_test_sequential

    # unpaired: called exactly as before the paired design existed (same draws, same numbers)
    res = energy_test_sequential(X, Y, max_permutations=max_permutations, h=stop, seed=seed,
                                 standardize=True, **({"paired": True} if paired else {}))
    # what the test can resolve: 1/(1 + B_max), and no less than the share of relabellings
    # that tie with the observed one (2/C(8, 4) for 4 units against 4: more permutations
    # would not help). Paired: 2^(1−m) over the m pairs whose profiles differ (beyond
    # rounding, as the sign test counts them): a pair of equal profiles swaps into itself,
    # so with none differing every relabelling is the observed one and p = 1 is all there is
    if paired:
        m = int((~rounding_ties(X.ravel(), Y.ravel()).reshape(X.shape).all(axis=1)).sum())
        units = permutation_floor(m, m, True) if m else 1.0
    else:
        units = permutation_floor(len(X), len(Y), False)
    floor = max(float(res.min_attainable_p), units)
    return {"test": "energy", "metric": "profile_6d", "statistic": float(res.statistic),
            "pvalue": float(res.pvalue), "effect": math.nan, "effect_low": math.nan,
            "effect_high": math.nan, "n_permutations": int(res.n_permutations),
            "max_permutations": int(res.max_permutations),
            "min_attainable_p": floor, "margin_low": math.nan,
            "margin_high": math.nan, **_NOT_COUNTED,
            "note": "standardised 6D profile" + (", within-pair swaps" if paired else "")
                    + (", stopped early" if res.stopped_early else "")}


def _equivalence_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "m"], margin: float,
                     test: str, alpha: float, paired: bool = False) -> Row:
    from kvstats.stats.equivalence import tost_rank, tost_ratio

    base = {"test": "equivalence", "n_permutations": 0, "max_permutations": 0,
            "min_attainable_p": 0.0, **_NOT_COUNTED}
    if test == "rank":
        # θ counts ties as ½: values equal up to rounding are ties, as the sign test and
        # Mann–Whitney count them (else rounding's direction moves θ by ½·P(tie), up to the margin)
        x, y = rounding_canonical(x, y)
    try:
        res = (tost_ratio(x, y, margin=margin, alpha=alpha, paired=paired) if test == "ratio"
               else tost_rank(x, y, delta=margin, alpha=alpha, paired=paired))
    except ValueError as exc:  # e.g. a ratio of means with a zero mean: no test, said so
        lo, hi = ((1 / (1 + margin), 1 + margin) if test == "ratio" else (0.5 - margin, 0.5 + margin))
        return {**base, "statistic": math.nan, "pvalue": math.nan, "effect": math.nan,
                "effect_low": math.nan, "effect_high": math.nan, "margin_low": lo,
                "margin_high": hi, "note": f"no equivalence test: {exc}"}
    what = "mean(a)/mean(b)" if test == "ratio" else "θ = P(a > b) + ½P(a = b)"
    return {**base, "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.estimate), "effect_low": float(res.low),
            "effect_high": float(res.high), "margin_low": float(res.margin_low),
            "margin_high": float(res.margin_high), "identical_pairs": bool(res.identical_pairs),
            "note": (f"TOST, {what} in [{res.margin_low:.4g}, {res.margin_high:.4g}], "
                     f"{res.method}; interval {100 * (1 - 2 * alpha):.10g}% unadjusted")}


def scheme_pairs(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]
                 ) -> Iterator[tuple[tuple, float, float, str, str, pd.DataFrame, pd.DataFrame]]:
    """Every comparable (case, budget) of each scheme pair, in frame and ``comparisons`` order.

    Yields ``(case key, budget_a, budget_b, a, b, rows_a, rows_b)``. Pairs absent from a
    case are skipped. Two schemes that each ran at a single, different budget (fixed-budget
    schemes such as ``K4V2`` vs ``K4V4``) are compared directly; otherwise the pair is
    compared at every budget both ran. Each side's rows keep the frame's order.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 8, "n_keys": 4,
    ...     "scheme": ["K4V2", "K4V4"], "budget": [3.0, 4.0]})
    >>> [(p[1], p[2], p[3], p[4]) for p in scheme_pairs(f, [("K4V2", "K4V4")])]
    [(3.0, 4.0, 'K4V2', 'K4V4')]
    """
    for case, bud_a, bud_b, a, b, ia, ib in _pair_positions(frame, comparisons):
        yield case, bud_a, bud_b, a, b, frame.iloc[ia], frame.iloc[ib]


def _pair_positions(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]
                    ) -> Iterator[tuple[tuple, float, float, str, str, np.ndarray, np.ndarray]]:
    """:func:`scheme_pairs` with each side's rows as positions (ascending) in ``frame``.

    The frame is grouped once, by case; a side's rows are then picked from that case's
    positions with numpy, not by filtering (and copying) the whole frame per pair and budget.
    """
    schemes, budgets = frame["scheme"].to_numpy(), frame["budget"].to_numpy()
    comparisons = [tuple(p) for p in comparisons]
    for case, pos in frame.groupby(list(CASE_COLUMNS), sort=False).indices.items():
        in_case = schemes[pos]
        sides: dict[str, tuple[np.ndarray, np.ndarray, list]] = {}

        def side(name: str) -> tuple[np.ndarray, np.ndarray, list]:
            # the scheme's rows of this case, their budgets, and those in order of first appearance
            if name not in sides:
                rows = pos[in_case == name]
                buds = budgets[rows]
                sides[name] = rows, buds, pd.unique(buds).tolist()
            return sides[name]

        present = set(in_case)
        for a, b in comparisons:
            if a not in present or b not in present:
                continue
            (ra, ba, budgets_a), (rb, bb, budgets_b) = side(a), side(b)
            if len(budgets_a) == 1 and len(budgets_b) == 1 and budgets_a != budgets_b:
                # fixed-budget schemes (e.g. K4V2 vs K4V4): compare them directly
                yield case, budgets_a[0], budgets_b[0], a, b, ra, rb
                continue
            for bud in budgets_a:
                if bud in budgets_b:
                    yield case, bud, bud, a, b, ra[ba == bud], rb[bb == bud]


def compare_schemes(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]] | None = None, *,
                    metrics: Sequence[str] | None = None, alpha: float = 0.05,
                    correction: str = "holm", energy_resamples: int = 499,
                    energy_resolution: str = "family", energy_stop: int = 10, seed: int = 0,
                    ks: bool | None = None, energy: bool = True,
                    equivalence: Mapping[str, float] | None = None,
                    equivalence_test: str = "ratio", pairing: str = "trial",
                    progress: bool = False) -> pd.DataFrame:
    """Pairwise tests between schemes at each case and budget, adjusted across the whole table.

    With ``pairing="trial"`` (the default, as the report's ``[report] pairing``) the rows
    of a and b are matched one-to-one on the unit (``cluster`` when the frame has that
    column, else ``trial``: every scheme of a sweep case sees the same trials) and the
    tests are the paired ones: per metric the sign test (``test`` = "sign",
    ``statistic`` = the pairs with a > b, ``effect`` = the dominance P(a > b) − P(a < b)
    over the pairs that differ, **positive when a's values tend to be larger**, with its
    Wilson-based CI; :func:`kvstats.stats.sign_test`), on the standardised 6D profile an
    energy permutation test with labels swapped within pairs, per metric listed in
    ``equivalence`` a TOST with ``paired=True`` (``test`` = "equivalence"), and no KS
    test (the two-sample KS test has no valid null for paired samples: its permutations
    exchange values between pairs). With ``pairing="none"`` (two independent samples,
    e.g. frames whose rows do not share trials): per metric a Mann–Whitney U test
    (``effect`` = rank-biserial r, positive when a's values tend to be larger, with its
    CI) and a two-sample KS test (``effect`` = D; with tied values the p-value is exact
    conditional on the ties, :func:`kvstats.stats.ks_exact.ks_2samp_exact`), an energy
    test with labels permuted freely, and the unpaired TOST (the whole table's numbers
    as before 2026-12-01, when "none" was the default). Every p-value in the table is
    adjusted together (Holm by default). The energy tests are sequential (Besag–Clifford, stopping at the
    ``energy_stop``-th exceedance) with up to B_max permutations: with
    ``energy_resolution="family"`` B_max is the larger of ``energy_resamples`` and the B
    the family needs to reject (:func:`kvstats.stats.sequential.required_resolution` for
    the table's size, ``alpha`` and ``correction``); with "fixed", ``energy_resamples``.

    ``winner`` (Mann–Whitney or sign-test rows: :data:`LOCATION_TESTS`) applies
    the metric table's direction (:attr:`kvstats.metrics.table.Metric.higher_is_better`;
    larger is better for every SNR, pooled or not): the scheme whose values are better in
    the direction of the effect when the adjusted p-value is <= ``alpha`` (paired: the
    scheme better on more of the matched units; not the signed-rank test, whose rank
    weighting lets a few large differences decide the direction). ``verdict`` (every
    row): "different" / "distributions differ" (energy) when significant; for an
    equivalence row "equivalent within δ", "different" or "inconclusive"
    (:func:`kvstats.stats.equivalence.equivalence_verdict` on the adjusted TOST and
    location-test p-values); otherwise "no significant difference" only when the test
    could have rejected (``resolvable``), else "not resolvable at B = …" (or "at n = … vs
    …" for a two-sample rank test, "at n = … pairs" for the sign test), see
    :mod:`kvstats.analysis.resolution`.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (or one row per cluster, see
        :mod:`kvstats.analysis.clustered`).
    comparisons : sequence of (str, str), optional
        Scheme label pairs, e.g. ``[("KQV", "QKQV")]`` (default
        :data:`kvstats.results.DEFAULT_COMPARISONS`; checked by
        :func:`check_comparisons`). A given label that no row of the frame has is a
        ValueError listing the frame's labels, an item that is not a pair of two strings
        a TypeError; the default pairs skip the schemes the frame lacks (a UserWarning
        when none of them names two schemes of a frame of two or more). Pairs absent
        from one case (but present in others) are skipped there; a scheme paired with
        itself, or a pair given twice (either way round: its tests would count twice in
        the family), is a ValueError. Fixed-budget schemes (``K4V2``) with different
        budgets are compared directly (``budget`` ≠ ``budget_b``).
    metrics : sequence of str, optional
        Metrics tested one by one, each once (a subset of :data:`TESTABLE_METRICS`; a
        pooled SNR the frame lacks, or with NaN, is a ValueError). Default
        :func:`default_metrics` of the frame (the report's): the reported metrics and the
        energy-pooled SNRs ``snr_k_pooled``, ``snr_v_pooled`` where the frame has them.
    alpha : float
        Family-wise (Holm, ...) or false-discovery (fdr_*) level.
    correction : {"holm", "fdr_bh", "bonferroni", "hommel", "fdr_by", "sidak", "holm-sidak"}
        Multiple-testing correction over every p-value in the table.
    energy_resamples : int >= 1
        Least permutation cap of each energy test: the cap is max(energy_resamples, the
        permutations the family needs to reject) under "family", energy_resamples under
        "fixed"; a test stops earlier at its ``energy_stop``-th exceedance.
    energy_resolution : {"family", "fixed"}
    energy_stop : int >= 1
        Exceedances that stop an energy test early (Besag–Clifford h).
    seed : int
        Seed of the energy permutations (pair i uses ``seed + i``).
    ks : bool, optional
        Include the KS tests (default: with ``pairing="none"``; ``ks=True`` with
        ``pairing="trial"``, the default, is a ValueError).
    energy : bool
        Include the energy tests.
    progress : bool
        A tqdm progress bar (stderr) over the energy tests, the slow part: each may draw
        the family's resolution in permutations (tens of thousands for a large family).
    equivalence : mapping metric -> margin, optional
        Equivalence margins: ``equivalence_test="ratio"``: mean(a)/mean(b) within
        [1/(1+δ), 1+δ] (:func:`kvstats.stats.equivalence.tost_ratio`, b the reference; not
        for a metric in dB, a ValueError);
        "rank": θ = P(a > b) + ½P(a = b) within 0.5 ± δ (``tost_rank``).
    equivalence_test : {"ratio", "rank"}
    pairing : {"trial", "none"}
        The design (:data:`PAIRINGS`): "trial" (the default since 2026-12-01, as the
        report's), pairs matched on the unit; "none", two independent samples (the
        default before). A pair of schemes whose units do not match one-to-one at some
        case and budget (a unit missing on one side or repeated, e.g. a clustered real
        frame not aggregated by :func:`~kvstats.analysis.aggregate_clusters`, or frames
        of different trials) is a ValueError naming the case, the schemes and the units,
        and saying to pass ``pairing="none"`` if the rows are independent samples.

    Returns
    -------
    DataFrame
        One row per test with the case columns, ``budget``, ``budget_b``, ``scheme_a``,
        ``scheme_b``, ``metric``, ``test``, ``statistic``, ``pvalue``, ``effect``,
        ``effect_low``, ``effect_high``, ``mean_a``, ``mean_b``, ``median_a``,
        ``median_b``, ``n_a``, ``n_b``, ``n_informative`` (the units that carry the test's
        information where that count is not ``n_a``/``n_b``: for a sign-test row the pairs
        whose values differ, its ``n_nonzero``, which set its resolution min(1, 2·2⁻ᵏ);
        NaN for the other tests, whose limits are ``n_a``, ``n_b``, the ties and B),
        ``n_permutations`` (drawn; 0: not a permutation test), ``max_permutations`` (B_max), ``min_attainable_p``, ``margin_low``,
        ``margin_high`` (equivalence rows), ``note``, ``pvalue_adjusted``,
        ``min_attainable_p_adjusted``, ``resolvable``, ``significant``, ``winner``,
        ``verdict``. Under ``pairing="trial"`` ``n_a`` = ``n_b`` = the number of pairs.
        ``attrs`` holds ``alpha``, ``correction``, ``n_tests``, ``pairing``, the energy
        tests' ``energy_max_permutations`` and ``energy_skipped``: the compared (case,
        budget, pair)s without an energy test, because a 6D profile value is not finite
        (the SNR of an exact reconstruction), with ``energy=True``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS, compare_schemes
    >>> rng = np.random.default_rng(0)
    >>> def cell(scheme, shift):
    ...     return pd.DataFrame({m: rng.random(40) + shift for m in METRICS}).assign(
    ...         distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0,
    ...         scheme=scheme, bits_nominal=4.0, bits_total=4.25, trial=np.arange(40))
    >>> f = pd.concat([cell("KQV", 0.0), cell("QKQV", 1.0)])
    >>> t = compare_schemes(f, [("KQV", "QKQV")], energy=False)     # paired on ``trial``
    >>> sorted(set(t["test"])), t.attrs["pairing"], t.set_index("metric").loc["kl", "winner"]
    (['sign'], 'trial', 'KQV')
    >>> t = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False, pairing="none")
    >>> t.set_index("metric").loc["kl", ["test", "winner"]].tolist()
    ['mann_whitney', 'KQV']
    >>> t = compare_schemes(f.head(3).assign(scheme="KQV").pipe(lambda g: pd.concat(
    ...     [g, g.assign(scheme="QKQV", kl=g["kl"] + 1)])), [("KQV", "QKQV")], energy=False,
    ...     pairing="none")
    >>> t.set_index(["metric", "test"]).loc[("kl", "mann_whitney"), "verdict"]
    'not resolvable at n = 3 vs 3 (smallest attainable adjusted p 1)'
    >>> compare_schemes(f, [("KQV", "TurboQuant")])
    Traceback (most recent call last):
    ...
    ValueError: comparisons label must be one of ['KQV', 'QKQV']; received 'TurboQuant' (...)
    """
    frame = check_frame(frame)
    comparisons = check_comparisons(comparisons, frame["scheme"].unique())
    metrics = default_metrics(frame) if metrics is None else _check_metrics(metrics, frame)
    alpha = check_real(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    correction = check_choice(correction, "correction", _CORRECTIONS)
    energy_resamples = check_int(energy_resamples, "energy_resamples", low=1)
    energy_resolution = check_choice(energy_resolution, "energy_resolution", ["family", "fixed"])
    energy_stop = check_int(energy_stop, "energy_stop", low=1)
    seed = check_int(seed, "seed", low=0)
    equivalence_test = check_choice(equivalence_test, "equivalence_test", ["ratio", "rank"])
    margins = _check_margins(equivalence, metrics, equivalence_test)
    pairing = check_choice(pairing, "pairing", PAIRINGS)
    frame, unit, ks = _check_design(frame, pairing, ks)

    rows, energy_jobs, energy_skipped = _pair_rows(frame, comparisons, metrics, margins,
                                                   equivalence_test, alpha, seed, ks, energy, unit)
    # the family: every p-value adjusted together (an undefined equivalence test is none)
    n_tests = sum(1 for r in rows if not math.isnan(r["pvalue"])) + len(energy_jobs)
    b_max = energy_resamples
    if energy_resolution == "family" and n_tests:
        from kvstats.stats.sequential import required_resolution

        b_max = max(b_max, required_resolution(n_tests, alpha, correction).n_permutations)
    rows += _energy_rows(energy_jobs, b_max, energy_stop, unit is not None, progress)

    table = pd.DataFrame(rows, columns=_COLUMNS)
    # only a TOST says whether its pairs were identical in every unit (tost_ratio/tost_rank)
    table["identical_pairs"] = table["identical_pairs"].eq(True)
    table.attrs.update(alpha=alpha, correction=correction, n_tests=n_tests,
                       energy_max_permutations=b_max if energy_jobs else 0,
                       energy_resolution=energy_resolution, pairing=pairing,
                       energy_skipped=energy_skipped)
    return _adjust_and_judge(table, alpha, correction)


def _check_design(frame: pd.DataFrame, pairing: str, ks: bool | None
                  ) -> tuple[pd.DataFrame, str | None, bool]:
    """The frame, the unit its pairs match on (None: two independent samples) and ``ks``.

    Apart from the per-argument checks because these depend on the design: the KS test
    only without pairing, a clustered frame's clusters checked only with it.
    """
    paired = pairing == "trial"
    if ks is None:
        ks = not paired
    elif ks and paired:
        raise ValueError("ks=True needs pairing='none': the two-sample KS test has no valid null "
                         "for paired samples (its permutations exchange values between pairs); "
                         "received pairing='trial'")
    if not paired:
        return frame, None, ks
    # the unit the schemes share: the cluster (its NaN, for a synthetic trial, the trial)
    unit = "cluster" if "cluster" in frame.columns else "trial"
    if unit == "cluster":
        try:
            frame = _clusters(frame, "frame")
        except ValueError as exc:   # no unit to pair on; the two-sample design needs none
            raise ValueError(f"{exc}; or pass pairing='none' if the two schemes' rows are "
                             "independent samples") from None
    return frame, unit, ks


_EnergyJob = tuple[Row, np.ndarray, np.ndarray, int]


def _pair_rows(frame: pd.DataFrame, comparisons: list, metrics: Sequence[str],
               margins: Mapping[str, float], equivalence_test: str, alpha: float, seed: int,
               ks: bool, energy: bool, unit: str | None) -> tuple[list[Row], list[_EnergyJob], int]:
    """Each (case, budget, pair)'s per-metric rows, its energy test's inputs, and the skipped.

    The energy tests are only collected here (``(row base, X, Y, seed)``), not run: their
    resolution B_max depends on the family's size, known once every other row exists. The
    count is of the pairs without an energy test, for a 6D profile value that is not finite.
    """
    paired = unit is not None
    # each metric (and the 6D profile, transposed) as float64 once: a pair's values are then
    # taken by position, not by filtering the frame per (case, budget, pair). X and Y keep
    # the layout DataFrame.to_numpy gave them (F order), so the energy statistics' sums run
    # in the same order and give the same bits
    values = {m: frame[m].to_numpy(np.float64) for m in metrics}
    profile_t = frame[list(PROFILE_METRICS)].to_numpy(np.float64).T.copy() if energy else None
    units = frame[unit].to_numpy() if paired else None
    rows, energy_jobs, energy_skipped = [], [], 0
    for i, (case, bud_a, bud_b, a, b, ia, ib) in enumerate(_pair_positions(frame, comparisons)):
        if paired:
            ia, ib = _matched(ia, ib, units, unit, case, bud_a, bud_b, a, b)
        base = {**dict(zip(CASE_COLUMNS, case)), "budget": float(bud_a), "budget_b": float(bud_b),
                "scheme_a": a, "scheme_b": b, "n_a": len(ia), "n_b": len(ib)}
        for metric in metrics:
            x, y = values[metric][ia], values[metric][ib]
            extra = {"metric": metric, "mean_a": float(np.mean(x)), "mean_b": float(np.mean(y)),
                     "median_a": float(np.median(x)), "median_b": float(np.median(y))}
            # the rank tests see values equal up to rounding as ties (the sign test per pair)
            xr, yr = (x, y) if paired else rounding_canonical(x, y)
            rows.append({**base, **extra, **(_sign_row(x, y) if paired else _mw_row(xr, yr))})
            if ks:
                rows.append({**base, **extra, **_ks_row(xr, yr, seed + i)})
            if metric in margins:
                rows.append({**base, **extra, **_equivalence_row(
                    x, y, margins[metric], equivalence_test, alpha, paired)})
        if energy:
            X, Y = profile_t.take(ia, axis=1).T, profile_t.take(ib, axis=1).T
            if np.isfinite(X).all() and np.isfinite(Y).all():
                energy_jobs.append((base, X, Y, seed + i))
            else:   # an exact reconstruction (SNR = inf) has no finite 6D point: counted, said
                energy_skipped += 1
    return rows, energy_jobs, energy_skipped


def _energy_rows(jobs: list[_EnergyJob], b_max: int, stop: int, paired: bool,
                 progress: bool) -> list[Row]:
    """The energy tests of :func:`_pair_rows`'s jobs, at the family's B_max: the slow part,
    so the one with a progress bar."""
    from tqdm.auto import tqdm

    return [{**base, "mean_a": math.nan, "mean_b": math.nan, "median_a": math.nan,
             "median_b": math.nan, **_energy_row(X, Y, b_max, stop, s, paired)}
            for base, X, Y, s in tqdm(jobs, desc="energy tests", unit="test", file=sys.stderr,
                                      disable=not progress or not jobs)]


def _adjust_and_judge(table: pd.DataFrame, alpha: float, correction: str) -> pd.DataFrame:
    """``table`` with the family's adjusted p-values, ``resolvable``, ``winner`` and ``verdict``.

    After every test has run, because each adjusted p-value depends on the whole family and
    an equivalence row's verdict on its pair's location-test row.
    """
    from kvstats.stats import adjust_pvalues

    if table.empty:
        for col, value in (("pvalue_adjusted", 1.0), ("min_attainable_p_adjusted", 1.0),
                           ("resolvable", False), ("significant", False), ("winner", ""),
                           ("verdict", "")):
            table[col] = pd.Series(dtype=type(value))
        return table
    p = table["pvalue"].to_numpy(np.float64)
    tested = ~np.isnan(p)
    adjusted = np.full(p.shape, np.nan)
    attainable = np.full(p.shape, np.nan)
    if tested.any():
        adjusted[tested] = adjust_pvalues(p[tested], method=correction, alpha=alpha).pvalues_adjusted
        attainable[tested] = attainable_adjusted(
            p[tested], table["min_attainable_p"].to_numpy(np.float64)[tested], correction, alpha)
    table["pvalue_adjusted"] = adjusted
    table["min_attainable_p_adjusted"] = attainable
    table["resolvable"] = attainable <= alpha
    table["significant"] = adjusted <= alpha
    table["winner"] = [_winner(t, s, r, m, a, b) for t, s, r, m, a, b in zip(
        table["test"], table["significant"], table["effect"], table["metric"],
        table["scheme_a"], table["scheme_b"])]
    table["verdict"] = _verdicts(table, alpha)
    mw = table["test"].isin(list(LOCATION_TESTS.values()))
    table.loc[mw, "winner"] = np.where(table.loc[mw, "significant"], table.loc[mw, "winner"],
                                       table.loc[mw, "verdict"])
    return table


def _matched(ia: np.ndarray, ib: np.ndarray, units: np.ndarray, unit: str, case: tuple,
             bud_a: float, bud_b: float, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """The two schemes' row positions in the same unit order, or a ValueError saying what does not pair."""
    ua, ub = units[ia], units[ib]
    problems = []
    for name, u in ((a, ua), (b, ub)):
        values, counts = np.unique(u, return_counts=True)
        if (counts > 1).any():
            problems.append(f"{unit} {_some(values[counts > 1])} more than once in {name}'s rows")
    for name, u, other in ((a, ua, ub), (b, ub, ua)):
        alone = np.setdiff1d(u, other)
        if alone.size:
            problems.append(f"{unit} {_some(alone)} only in {name}'s rows")
    if problems:
        where = ", ".join(f"{c} = {v}" for c, v in zip(CASE_COLUMNS, case))
        budget = f"budget {bud_a:g}" + ("" if bud_b == bud_a else f" vs {bud_b:g}")
        hint = (" (aggregate the trials of each cluster first: kvstats.analysis.aggregate_clusters)"
                if unit == "cluster" and any("more than once" in p for p in problems) else "")
        raise ValueError(f"pairing='trial' (the default) matches the rows of {a} and {b} "
                         f"one-to-one on {unit!r}, but at {where}, {budget}: "
                         + "; ".join(problems) + hint + "; pass pairing='none' if the two "
                         "schemes' rows are independent samples")
    # stable sorts: ties cannot occur (checked above), so row i of each side is one unit
    return ia[np.argsort(ua, kind="stable")], ib[np.argsort(ub, kind="stable")]


def _some(values: np.ndarray, k: int = 5) -> str:
    """Up to ``k`` unit values, then how many more."""
    shown = ", ".join(str(v) for v in values[:k])
    return shown + (f" (and {values.size - k} more)" if values.size > k else "")


def default_metrics(frame: pd.DataFrame) -> tuple[str, ...]:
    """The metrics :func:`compare_schemes` tests by default (the report's): :data:`METRICS`,
    then each energy-pooled SNR (``snr_k_pooled``, ``snr_v_pooled``) the frame has.

    Why the pooled SNRs as well as ``snr_k``/``snr_v``: the two answer different questions.
    ``snr_k`` is the mean over a trial's keys of per-vector dB (a geometric-mean SNR, the
    typical key); the pooled SNR 10·log10(Σ‖k‖²/Σ‖k − k̂‖²) is the trial's total error
    energy, what the Shannon distortion–rate bound limits and what the report's
    Shannon–φ planes plot. They rank schemes alike when every vector's error is alike,
    and apart when a scheme keeps some vectors nearly exact: kivi's float16 window of 32
    keys lifts its ``snr_k`` to 16.3 dB at n = 2 where its pooled SNR is 8.7 dB, below
    TurboQuant-mse's 9.4 (docs/measurement.md), so a test of ``snr_k`` alone would name
    kivi the winner on key SNR against the plotted numbers. The per-vector SNRs stay
    tested (they are dimensions of the 6D profile the energy test compares, and their
    rows are unchanged); each pooled SNR adds one test per pair, case and budget to the
    family. A pooled column with NaN (cells computed before the column existed, resumed
    into a newer sweep) is left out with a UserWarning: a test on it would be undefined.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame (:func:`~kvstats.analysis.frame.check_frame`).

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.analysis import METRICS
    >>> from kvstats.analysis.compare import default_metrics
    >>> f = pd.DataFrame({m: [0.5] for m in METRICS}).assign(distribution="gaussian", params="-",
    ...     dim=8, n_keys=4, budget=2.0, scheme="KV", bits_nominal=2.0, bits_total=2.0, trial=0)
    >>> default_metrics(f) == METRICS, default_metrics(f.assign(snr_k_pooled=9.0))[-1]
    (True, 'snr_k_pooled')
    """
    frame = check_frame(frame)
    out = []
    for c in POOLED_SNRS:
        if c not in frame.columns:
            continue
        missing = int(frame[c].isna().sum())
        if missing:
            warnings.warn(f"{c} is not tested: {missing} of the frame's {len(frame)} rows lack it "
                          "(cells computed before the pooled SNR columns existed); rerun those "
                          "cells in a new sweep directory to test it", UserWarning, stacklevel=3)
            continue
        out.append(c)
    return METRICS + tuple(out)


def _check_metrics(metrics: Sequence[str], frame: pd.DataFrame) -> tuple[str, ...]:
    """``metrics`` as a tuple: known, each once (a repeat would count twice in the family),
    and every pooled SNR among them a column of ``frame`` without NaN."""
    if isinstance(metrics, str):
        raise TypeError(f"metrics must be a list of metric names (e.g. [{metrics!r}]); received {metrics!r}")
    metrics = tuple(metrics)
    for m in metrics:
        check_choice(m, "metrics", TESTABLE_METRICS)
    repeated = sorted({m for m in metrics if metrics.count(m) > 1})
    if repeated:
        raise ValueError(f"metrics must name each metric once (its tests would count twice in "
                         f"the family); received {list(metrics)}, repeating {repeated}")
    for m in (m for m in metrics if m in POOLED_SNRS):
        if m not in frame.columns:
            raise ValueError(f"metrics has {m!r}, which the frame lacks (sweeps from before the "
                             f"pooled SNR columns); the frame's metric columns: "
                             f"{[c for c in TESTABLE_METRICS if c in frame.columns]}")
        missing = int(frame[m].isna().sum())
        if missing:
            raise ValueError(f"metrics has {m!r}, but {missing} of the frame's {len(frame)} rows "
                             "lack it (NaN: cells computed before the column existed); drop them "
                             "or leave it out")
    return metrics


def _check_margins(equivalence: Mapping[str, float] | None, metrics: Sequence[str],
                   test: str) -> dict[str, float]:
    if equivalence is None:
        return {}
    if not isinstance(equivalence, Mapping):
        raise TypeError(f"equivalence must map metric names to margins; received {equivalence!r}")
    out = {}
    for metric, margin in equivalence.items():
        check_choice(metric, "equivalence metric", list(metrics))
        if test == "ratio" and METRIC_TABLE[metric].unit == "dB":
            # the report's options refuse it too: a dB value can be 0 or negative, and its
            # ratio depends on the 0 dB reference, so "within 1 + δ" would say nothing
            raise ValueError(f"equivalence[{metric!r}]: {metric} is in dB (can be negative), a "
                             "ratio of means is meaningless; pass equivalence_test='rank' or "
                             "drop it")
        high = 0.5 if test == "rank" else None
        out[metric] = check_real(margin, f"equivalence[{metric!r}]", low=0, high=high,
                                 low_open=True, high_open=True)
    return out


def _winner(test: str, significant: bool, effect: float, metric: str, a: str, b: str) -> str:
    """The better scheme of a significant location-test row (the metric table's direction)."""
    if test not in LOCATION_TESTS.values():
        return ""
    if not significant or effect == 0:
        return NO_DIFFERENCE
    a_larger = effect > 0
    return a if a_larger == METRIC_TABLE[metric].higher_is_better else b


def _verdicts(table: pd.DataFrame, alpha: float) -> list[str]:
    from kvstats.stats.equivalence import equivalence_verdict

    key = ["scheme_a", "scheme_b", "budget", "budget_b", *CASE_COLUMNS, "metric"]
    paired = table.attrs.get("pairing") == "trial"
    # an equivalence row's difference test: the pair's location test (one per design)
    mw = table[table["test"].isin(list(LOCATION_TESTS.values()))].set_index(key)["pvalue_adjusted"]
    out = []
    for r in table.itertuples(index=False):
        if r.test == "equivalence":
            if math.isnan(r.pvalue):
                out.append(f"inconclusive ({r.note})")
                continue
            p_diff = mw.get(tuple(getattr(r, k) for k in key), 1.0)
            out.append(equivalence_verdict(r.pvalue_adjusted, p_diff, alpha))
        elif r.significant:
            out.append(DISTRIBUTIONS_DIFFER if r.test == "energy" else DIFFERENT)
        elif r.resolvable:
            out.append(NO_DIFFERENCE)
        else:
            # a permutation test whose units, not its B, set the floor says so
            units_bind = bool(r.max_permutations) and r.min_attainable_p > 1 / (1 + r.max_permutations)
            out.append(not_resolvable_text(r.test, int(r.max_permutations), int(r.n_a), int(r.n_b),
                                           float(r.min_attainable_p_adjusted), paired=paired,
                                           units_bind=units_bind, alpha=alpha))
    return out
