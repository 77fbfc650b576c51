"""The report's whole family under a null sweep: its family-wise error is at most α, and the
check fails for the plumbing bugs it exists for.

Every test of :func:`kvstats.analysis.compare_schemes` is calibrated on its own
(docs/statistics.md, "Validation at a glance"); this checks the table they form. Under
the complete null (no scheme differs from another) Holm rejects some row iff its first
step does, min p <= α/m, so the family's error is P(some p_i <= α/m), at most
Σ_i P(p_i <= α/m) (Bonferroni's inequality, any dependence between the rows).

- The null tables (2 schemes × 2 budgets, 9 metrics, 30 trials, Holm): some row
  significant in at most a stated bound of the tables, for both designs. At α = 0.3:
  Holm's guarantee holds at every α, and at a large one the error rates of a right and a
  wrong family lie far apart, so few tables tell them apart. Paired design: the 18 sign
  rows are exact binomial tests (30 pairs, no ties), each P(p <= α/m) known, the energy
  rows' at most α/m (a valid permutation p-value): bound 0.124, where α itself would leave
  the check blind to most errors. Unpaired: α (the Mann–Whitney rows are asymptotic, the
  KS rows' lattice has no closed form here).
- The same tables adjusted wrongly (no correction; one family per metric; the energy rows
  left out of the adjustment) exceed the check's limit: each with power >= 0.9, from a
  closed-form lower bound of its error rate (:func:`_broken_floor`), and on these tables.
- A table of independent sign tests (one budget, 24 pairs, α = 0.5): its family-wise error
  has a closed form, 1 − (1 − P(p <= t))^9 at the first step's threshold t (α/9 for Holm
  and Bonferroni, 1 − (1 − α)^(1/9) for Šidák and Holm–Šidák), checked two-sided. At this
  design the sign test's lattice puts a p-value (0.0639) between the two thresholds, so
  the check tells Šidák from Bonferroni (error 0.448 against 0.186), and either from a
  double adjustment (0.014, 0.058) or none (0.963).
"""

import functools
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from kvstats.analysis import compare_schemes
from kvstats.stats import add_adjusted_pvalues, adjust_pvalues

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _sweep_frames import make_frame  # noqa: E402  (tests/analysis' frame builder)

# two schemes at two budgets, every metric N(0, 1) per trial (make_frame): the null
NULL_SPEC = {(scheme, budget): 0.0 for scheme in ("KQV", "QKQV") for budget in (2, 3)}
COMPARISONS = [("KQV", "QKQV")]
ALPHA = 0.3
N_TRIALS = 30
# per table: 18 location rows (9 metrics × 2 budgets; "none" has 18 KS rows as well), 2 energy
N_LOCATION, N_ENERGY = 18, 2
N_ROWS = {"trial": N_LOCATION + N_ENERGY, "none": 2 * N_LOCATION + N_ENERGY}
# P(energy p <= α) under the null: the sequential test (compare_schemes' energy_stop h = 10)
# reports p = h/L when it stops at its L-th permutation, exact at those points (Besag &
# Clifford 1991), so at the largest h/L <= α: 10/34 = 0.294 (measured over these tables'
# 2000 energy rows: 0.293 paired, 0.297 unpaired)
ENERGY_REJECT = 10 / math.ceil(10 / ALPHA)


def sign_rejection(n, c):
    """P(two-sided sign-test p <= c) under the null, n pairs without ties: the test's p-value
    is a function of the count of positive differences, Bin(n, 1/2) (R's binom.test)."""
    k = np.arange(n + 1)
    p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, n, 0.5), stats.binom.sf(k - 1, n, 0.5)))
    return float(stats.binom.pmf(k, n, 0.5)[p <= c].sum())


def family_bound(pairing):
    """Upper bound of the null tables' family-wise error (the module docstring's)."""
    m = N_ROWS[pairing]
    if pairing == "trial":
        return N_LOCATION * sign_rejection(N_TRIALS, ALPHA / m) + N_ENERGY * ALPHA / m
    return ALPHA


@functools.cache
def _null_tables(pairing, reps):
    """``reps`` null tables (Holm at ALPHA): the rows' p-values, metric, test, significant."""
    tables = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the tables' notes about few units are not tested here
        for r in range(reps):
            table = compare_schemes(make_frame(NULL_SPEC, n=N_TRIALS, seed=9000 + r), COMPARISONS,
                                    pairing=pairing, alpha=ALPHA, seed=r)
            tables.append(table[["metric", "test", "pvalue", "significant"]])
    return tables


def _reps(calib):
    # 120 tables: ~3 s paired, ~10 s unpaired (CPU); the power below is computed at this size
    return calib.replicates(120, 1000)


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_any_significant_row_of_a_null_table_is_at_most_alpha(calib, pairing):
    # Measured 2026-12-03 over 1000 tables (these seeds): some row significant in 0.115
    # ("trial", bound 0.124) and 0.164 ("none", bound 0.3) of the tables
    reps = _reps(calib)
    tables = _null_tables(pairing, reps)
    assert {len(t) for t in tables} == {N_ROWS[pairing]}
    rate = np.mean([t["significant"].any() for t in tables])
    hi = calib.binom_interval(reps, family_bound(pairing))[1]
    assert rate <= hi, (pairing, rate, hi)


# The plumbing bugs this check exists for, applied to a table's raw p-values as
# compare_schemes would if its adjustment were broken so
def _no_correction(t):
    return (t["pvalue"] <= ALPHA).any()


def _per_metric(t):
    return add_adjusted_pvalues(t, "holm", ALPHA, by="metric")["reject"].any()


def _energy_left_out(t):
    energy = t["test"].eq("energy").to_numpy()
    p = t["pvalue"].to_numpy()
    return adjust_pvalues(p[~energy], "holm", ALPHA).reject.any() or (p[energy] <= ALPHA).any()


BROKEN = {"no_correction": _no_correction, "per_metric": _per_metric,
          "energy_left_out": _energy_left_out}


def _broken_floor(pairing, variant):
    """A lower bound of the broken family's error under the null, in closed form: the
    chance that the rows named below alone reject, being independent (other metrics and
    budgets are other draws; energy rows of other budgets other data and seeds)."""
    # one location row per metric and budget, P(p <= c): exact for the sign test; the
    # asymptotic Mann–Whitney's ≈ c (measured 0.0108, 0.2526 at 0.0125, 0.25 here)
    location = (lambda c: sign_rejection(N_TRIALS, c)) if pairing == "trial" else (lambda c: c)
    if variant == "no_correction":   # some location row <= α
        return 1 - (1 - location(ALPHA)) ** N_LOCATION
    if variant == "per_metric":      # a metric's family: its 2 (paired) or 4 (with KS) rows
        size = 2 if pairing == "trial" else 4
        return 1 - (1 - location(ALPHA / size)) ** N_LOCATION
    return 1 - (1 - ENERGY_REJECT) ** N_ENERGY   # an energy row alone <= α


@pytest.mark.parametrize("variant", list(BROKEN))
@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_the_check_fails_for_a_broken_family(calib, pairing, variant):
    # Floors (closed form) and rates measured over 1000 tables: no correction 0.982 / 0.98
    # ("trial"), 0.998 / 0.999 ("none"); per metric 0.846 / 0.854, 0.754 / 0.848; energy
    # left out 0.502 / 0.585, 0.502 / 0.538. The check's limit at 120 tables: 0.208
    # ("trial"), 0.408 ("none"); the least power, energy left out unpaired, 0.975
    reps = _reps(calib)
    limit = round(calib.binom_interval(reps, family_bound(pairing))[1] * reps)
    power = stats.binom.sf(limit, reps, _broken_floor(pairing, variant))   # P(count > limit)
    assert power >= 0.9, (pairing, variant, power)
    failures = sum(bool(BROKEN[variant](t)) for t in _null_tables(pairing, reps))
    assert failures > limit, (pairing, variant, failures, limit)


# One budget: 9 sign tests per table on independent metrics, each exact (24 pairs)
EXACT_SPEC = {("KQV", 2): 0.0, ("QKQV", 2): 0.0}
EXACT_PAIRS, EXACT_ALPHA, EXACT_M = 24, 0.5, 9


def _exact_error(threshold):
    """P(some of the 9 independent sign p-values <= threshold): the family-wise error of a
    procedure whose first step rejects below ``threshold``."""
    return 1 - (1 - sign_rejection(EXACT_PAIRS, threshold)) ** EXACT_M


# each correction's first-step threshold, and the rates of the broken versions of it
# (adjusted twice: Bonferroni α/m², Šidák 1 − (1 − α)^(1/m²); not at all: α)
_BONFERRONI = EXACT_ALPHA / EXACT_M
_SIDAK = 1 - (1 - EXACT_ALPHA) ** (1 / EXACT_M)
EXACT = {"holm": _BONFERRONI, "bonferroni": _BONFERRONI, "sidak": _SIDAK, "holm-sidak": _SIDAK}
WRONG = {_BONFERRONI: (_SIDAK, EXACT_ALPHA / EXACT_M**2, EXACT_ALPHA),
         _SIDAK: (_BONFERRONI, 1 - (1 - EXACT_ALPHA) ** (1 / EXACT_M**2), EXACT_ALPHA)}


def _exact_reps(calib):
    return calib.replicates(60, 600)   # ~19 ms a table: ~5 s for the four corrections


@pytest.mark.parametrize("correction", list(EXACT))
def test_family_error_of_independent_sign_tests_is_the_closed_form(calib, correction):
    # Measured 2026-12-03 (200 tables, these seeds): Holm 0.205 (closed form 0.186),
    # Šidák 0.45 (0.448)
    reps = _exact_reps(calib)
    rejected = np.empty(reps, bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps):
            table = compare_schemes(make_frame(EXACT_SPEC, n=EXACT_PAIRS, seed=5000 + r),
                                    COMPARISONS, alpha=EXACT_ALPHA, correction=correction,
                                    energy=False)
            rejected[r] = table["significant"].any()
    assert list(table["test"]) == ["sign"] * EXACT_M
    expected = _exact_error(EXACT[correction])
    lo, hi = calib.binom_interval(reps, expected)
    assert lo <= rejected.mean() <= hi, (correction, rejected.mean(), expected, lo, hi)


@pytest.mark.parametrize("threshold", [_BONFERRONI, _SIDAK], ids=["bonferroni", "sidak"])
def test_the_closed_form_check_tells_the_corrections_apart(calib, threshold):
    # power of the check above against the other threshold, a double adjustment and none:
    # at 60 tables 0.974, 0.990, 1 (Holm, Bonferroni) and 0.956, 1, 1 (Šidák, Holm–Šidák)
    reps = _exact_reps(calib)
    lo, hi = (round(x * reps) for x in calib.binom_interval(reps, _exact_error(threshold)))
    for wrong in WRONG[threshold]:
        q = _exact_error(wrong)
        power = stats.binom.cdf(lo - 1, reps, q) + stats.binom.sf(hi, reps, q)
        assert power >= 0.9, (threshold, wrong, q, power)
