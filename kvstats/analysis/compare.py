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

The table's parts live beside this module: the designs and which rows each pair compares
(:mod:`~kvstats.analysis.pairing`), one row per test (:mod:`~kvstats.analysis.pair_tests`),
the family's adjustment, resolution and verdicts (:mod:`~kvstats.analysis.verdicts`), the
metrics tested and the metric arguments' checks (:mod:`~kvstats.analysis.tested_metrics`).
Here: :func:`compare_schemes`, which runs the per-metric rows of every pair
(:func:`_pair_rows`), then the energy tests at the family's resolution
(:func:`_energy_rows`), then the judging. Their names stay importable from here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from kvstats._checks import check_choice, check_int, check_real
from kvstats.analysis.clustered import N_IN_CLUSTER, warn_if_trials_share_clusters
from kvstats.analysis.frame import CASE_COLUMNS, PROFILE_METRICS, _in_trial_order, check_frame
from kvstats.analysis.pair_tests import (Row, _energy_row, _equivalence_row, _ks_row, _mw_row,
                                         _sign_row)
from kvstats.analysis.pairing import (LOCATION_TESTS, PAIRINGS, _check_design, _drop_not_compared, _matched,
                                      _pair_positions, scheme_pairs)
from kvstats.analysis.resolution import rounding_canonical
from kvstats.analysis.tested_metrics import (TESTABLE_METRICS, _check_margins, _check_metrics,
                                             default_metrics)
from kvstats.analysis.verdicts import (DIFFERENT, DISTRIBUTIONS_DIFFER, NO_DIFFERENCE,
                                       NOT_RESOLVABLE, _adjust_and_judge)
from kvstats.results import check_comparisons  # the one check of the pairs (also the config's)
from kvstats.stats._base import check_bool
from kvstats.stats.catalog import CORRECTIONS

__all__ = ["compare_schemes", "check_comparisons", "scheme_pairs", "default_metrics", "TESTABLE_METRICS",
           "NO_DIFFERENCE", "DIFFERENT", "DISTRIBUTIONS_DIFFER", "NOT_RESOLVABLE", "PAIRINGS",
           "LOCATION_TESTS"]

_COLUMNS = list(CASE_COLUMNS) + ["budget", "budget_b", "scheme_a", "scheme_b", "metric", "test",
                                 "statistic", "pvalue", "effect", "effect_low", "effect_high",
                                 "mean_a", "mean_b", "median_a", "median_b", "n_a", "n_b",
                                 "n_informative", "n_permutations", "max_permutations", "min_attainable_p",
                                 "margin_low", "margin_high", "note", "identical_pairs"]


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
    Clopper–Pearson-based CI; :func:`kvstats.stats.sign_test`; NaN with its CI where no pair
    differs, ``n_informative`` 0: the dominance is 0/0), on the standardised 6D profile an
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
        the family), is a ValueError. A pair is compared at each budget both schemes
        ran; two schemes that each ran at a single budget, different ones (fixed-budget
        ``K4V2`` against ``K4V4``, or two entries of one config at ``budgets = [4]`` and
        ``[2]``), across them (``budget`` ≠ ``budget_b``). A pair that ran in one case
        but is compared in none (``[3, 4]`` against ``[1, 2]``) gets no row and a
        UserWarning naming it.
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
        Under "family", a family needing more than :data:`MAX_FAMILY_PERMUTATIONS` per
        energy test is a ValueError (use "fixed", a larger alpha or fewer tests).
    energy_stop : int >= 1
        Exceedances that stop an energy test early (Besag–Clifford h).
    seed : int
        Seed of the energy permutations: the i-th (case, budget, pair), in the order of
        their keys sorted as text (not the frame's row order), uses ``seed + i``.
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
        "none" cannot tell: on a real capture's per-trial frame it tests the trials as
        independent, though those of one text are not (the report's "trial-level"
        table, labelled so); pass the cluster means of
        :func:`~kvstats.analysis.aggregate_clusters` for tests over texts.

    Returns
    -------
    DataFrame
        One row per test with the case columns, ``budget``, ``budget_b``, ``scheme_a``,
        ``scheme_b``, ``metric``, ``test``, ``statistic``, ``pvalue``, ``effect``,
        ``effect_low``, ``effect_high``, ``mean_a``, ``mean_b``, ``median_a``,
        ``median_b``, ``n_a``, ``n_b``, ``n_informative`` (the units that carry the test's
        information where that count is not ``n_a``/``n_b``: for a sign-test row the pairs
        whose values differ, its ``n_nonzero``, which set its resolution min(1, 2·2⁻ᵏ); for
        a paired energy row the pairs whose 6D profiles differ, 2^(1−k); for a two-sample
        energy row 0 when the pooled profiles are all one point (no relabelling changes
        the statistic: p = 1 whatever B), else NaN; NaN for the other tests, whose limits
        are ``n_a``, ``n_b``, the ties and B),
        ``n_permutations`` (drawn; for an exact energy row, whose note ends "exact (N relabellings)", the N relabelling classes enumerated, as is then ``max_permutations``; 0: not a permutation test), ``max_permutations`` (B_max), ``min_attainable_p``, ``margin_low``,
        ``margin_high`` (equivalence rows), ``note``, ``pvalue_adjusted``,
        ``min_attainable_p_adjusted``, ``resolvable`` (an equivalence row: could the TOST
        have concluded equivalence at these sizes? The ratio TOST always can, its
        ``min_attainable_p`` 0; the rank TOST's is the least p known for data of these
        sizes, an upper bound, so False there means not shown: docs/statistics.md,
        "Resolution of a TOST row"), ``significant``, ``winner``,
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
    correction = check_choice(correction, "correction", CORRECTIONS)
    energy_resamples = check_int(energy_resamples, "energy_resamples", low=1)
    energy_resolution = check_choice(energy_resolution, "energy_resolution", ["family", "fixed"])
    energy_stop = check_int(energy_stop, "energy_stop", low=1)
    seed = check_int(seed, "seed", low=0)
    equivalence_test = check_choice(equivalence_test, "equivalence_test", ["ratio", "rank"])
    margins = _check_margins(equivalence, metrics, equivalence_test)
    pairing = check_choice(pairing, "pairing", PAIRINGS)
    # a flag given as text ("no") is truthy: it would run the tests it names without a word
    ks = None if ks is None else check_bool(ks, "ks")
    energy, progress = check_bool(energy, "energy"), check_bool(progress, "progress")
    if not metrics and not energy:
        raise ValueError("compare_schemes has nothing to test: metrics is empty and energy=False "
                         "(the table would have no rows); name at least one metric of "
                         f"{list(TESTABLE_METRICS)} or pass energy=True; received metrics={list(metrics)}")
    frame, unit, ks = _check_design(frame, pairing, ks)
    # each cell's rows in trial order, as the summary reads them: a two-sample test's
    # values (and a mean's last bits) then follow the data, not the frame's row order
    frame = _in_trial_order(frame)
    if unit is None:   # paired: a cluster repeated in a scheme's rows is an error of _matched
        warn_if_trials_share_clusters(frame, "compare_schemes(pairing='none')")
    elif unit == "trial":   # paired on trials: real ones without their text are said to be
        warn_if_trials_share_clusters(frame, "compare_schemes(pairing='trial')")

    # a pair that shares a case but no budget it is compared at: said, not a silent 0 rows
    comparisons = _drop_not_compared(frame, comparisons)
    rows, energy_jobs, energy_skipped = _pair_rows(frame, comparisons, metrics, margins,
                                                   equivalence_test, alpha, seed, ks, energy, unit)
    # the family: every p-value adjusted together (an undefined equivalence test is none)
    n_tests = sum(1 for r in rows if not math.isnan(r["pvalue"])) + len(energy_jobs)
    b_max = energy_resamples
    if energy_resolution == "family" and n_tests:
        from kvstats.stats.sequential import required_resolution

        b_max = max(b_max, required_resolution(n_tests, alpha, correction).n_permutations)
        if b_max > MAX_FAMILY_PERMUTATIONS and energy_jobs:
            raise ValueError(
                f"alpha={alpha!r} with correction={correction!r} over this family of {n_tests} tests "
                f"needs B = {b_max:.3g} permutations per energy test to be able to reject, more than "
                f"the {MAX_FAMILY_PERMUTATIONS:.0e} a test may run (energy_resolution='family'); use "
                "energy_resolution='fixed' (each energy test then runs energy_resamples and is "
                "reported as not resolvable), a larger alpha, or fewer tests (metrics, comparisons)")
    rows += _energy_rows(energy_jobs, b_max, energy_stop, unit is not None, progress)

    table = pd.DataFrame(rows, columns=_COLUMNS)
    # only a TOST says whether its pairs were identical in every unit (tost_ratio/tost_rank)
    table["identical_pairs"] = table["identical_pairs"].eq(True)
    table.attrs.update(alpha=alpha, correction=correction, n_tests=n_tests,
                       energy_max_permutations=b_max if energy_jobs else 0,
                       energy_resolution=energy_resolution, pairing=pairing,
                       energy_skipped=energy_skipped)
    return _adjust_and_judge(table, alpha, correction)


#: The most permutations an energy test runs under ``energy_resolution="family"``: a guard
#: against a family whose level asks for more than can ever end (alpha = 1e-20 asks for
#: ~1e22). The default report's family (720 tests at alpha 0.05, Holm) needs 14,399; at
#: 10⁷ a 6D test of 1,000 vs 1,000 trials would run for hours.
MAX_FAMILY_PERMUTATIONS = 10**7

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
    # a cluster mean's trial count: two means of one text pair only over as many trials
    sizes = frame[N_IN_CLUSTER].to_numpy() if paired and N_IN_CLUSTER in frame.columns else None
    rows, energy_jobs, energy_skipped = [], [], 0
    pairs = list(_pair_positions(frame, comparisons))
    # the table is a function of the data, not of the frame's row order: a pair's permutations
    # use seed + its place among the pairs' keys sorted (as text: any column type sorts), not
    # its place in the frame
    keys = [tuple(map(str, (*p[0], *p[1:5]))) for p in pairs]
    place = dict(zip(sorted(range(len(keys)), key=keys.__getitem__), range(len(keys))))
    for k, (case, bud_a, bud_b, a, b, ia, ib) in enumerate(pairs):
        i = place[k]
        if paired:
            ia, ib = _matched(ia, ib, units, unit, case, bud_a, bud_b, a, b, sizes)
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
                    x, y, margins[metric], equivalence_test, alpha, paired, (a, b))})
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
