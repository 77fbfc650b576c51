"""Tidy tables of a sweep: per-scheme summaries, pairwise tests, crossovers, theory.

Every function takes the per-trial frame of :func:`kvstats.run_sweep` (columns of
:func:`kvstats.error_profile` plus the cell columns) and returns a tidy
:class:`pandas.DataFrame` whose column names never depend on the arguments.

The unit of observation is the trial. All schemes of one case (distribution, params,
d, N) see the *same* trials, each with an independent draw of the scheme's randomness;
the Mann–Whitney, KS and energy tests treat the two schemes' trials as two samples.
Pairing makes their metrics positively correlated, which under the null makes these
two-sample tests conservative (valid, with some power lost).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from kvstats._checks import check_choice, check_int, check_real

__all__ = ["METRICS", "PROFILE_METRICS", "HIGHER_IS_BETTER", "CASE_COLUMNS", "summary_table",
           "compare_schemes", "find_crossovers", "theory_table", "check_frame"]

#: Per-trial metrics summarised and tested (columns of :func:`kvstats.error_profile`).
METRICS = ("snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t", "kl", "recall_at_5",
           "argmax_shift")
#: The 6D error profile (scale and direction for K, V, T) used by the energy test.
PROFILE_METRICS = ("snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t")
#: The winner rule: higher SNR and recall are better; lower φ, KL, argmax shift are better.
HIGHER_IS_BETTER = {"snr_k": True, "phi_k": False, "snr_v": True, "phi_v": False,
                    "snr_t": True, "phi_t": False, "kl": False, "recall_at_5": True,
                    "argmax_shift": False}
#: Columns identifying a case: the trials all schemes of a case share.
CASE_COLUMNS = ("distribution", "params", "dim", "n_keys")
_REQUIRED = CASE_COLUMNS + ("budget", "scheme", "bits_nominal", "bits_total", "trial") + METRICS


def check_frame(frame: Any, name: str = "frame") -> pd.DataFrame:
    """Check that ``frame`` is a sweep's per-trial frame; returns it."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame from kvstats.run_sweep; "
                        f"received {type(frame).__name__}")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks the sweep column(s) {missing}; required: {list(_REQUIRED)}")
    if frame.empty:
        raise ValueError(f"{name} must have at least one row; received an empty frame")
    nan = [c for c in METRICS if frame[c].isna().any()]
    if nan:
        raise ValueError(f"{name} has NaN in metric column(s) {nan}")
    return frame


# ---------------------------------------------------------------------- summaries
def _tail_alpha(x: np.ndarray, metric: str) -> float:
    """Hill tail index of a metric's per-trial values, or NaN where it is not computed.

    Computed for ``kl`` (from its positive values; a KL is ≥ 0 up to rounding) and for any
    metric whose values are all ≥ 0, when there are ≥ 10 positive finite values; not
    computed (NaN) for metrics with negative or non-finite values or too few positive ones.
    """
    from kvstats.stats.tail import heavy_tail_alpha

    alpha = heavy_tail_alpha(np.maximum(x, 0.0) if metric == "kl" else x)
    return math.nan if alpha is None else alpha


def _mean_ci(x: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float, float]:
    """Mean and bootstrap CI; constant or non-finite samples get a degenerate interval.

    The bootstrap's HeavyTailWarning is silenced: the tables flag those rows instead
    (``ci_reliable``), and a sweep report would otherwise warn once per row.
    """
    from kvstats.stats import HeavyTailWarning, bootstrap_ci

    mean = float(np.mean(x))
    if not np.isfinite(x).all():
        # e.g. SNR = +inf for an exact reconstruction: the mean is inf, no interval exists.
        return mean, mean, mean
    if np.ptp(x) == 0 or len(x) < 3:
        return mean, float(x.min()), float(x.max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeavyTailWarning)
        res = bootstrap_ci(x, confidence=confidence, n_resamples=n_resamples, seed=seed)
    low, high = _interval(res)
    return mean, low, high


def _interval(res: Any) -> tuple[float, float]:
    """(low, high) from a bootstrap result object or a (low, high) pair."""
    for lo, hi in (("low", "high"), ("ci_low", "ci_high")):
        if hasattr(res, lo):
            return float(getattr(res, lo)), float(getattr(res, hi))
    ci = getattr(res, "confidence_interval", res)
    return float(ci[0]), float(ci[1])


def summary_table(frame: pd.DataFrame, *, confidence: float = 0.95, n_resamples: int = 999,
                  seed: int = 0) -> pd.DataFrame:
    """Mean and bootstrap CI of every metric per case, budget and scheme, plus worst cases.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`.
    confidence : float
        Confidence level of the bootstrap intervals (BCa, :func:`kvstats.stats.bootstrap_ci`).
    n_resamples : int
        Bootstrap resamples per interval.
    seed : int
        Seed of the bootstrap (one stream per row, derived from ``seed``).

    Returns
    -------
    DataFrame
        One row per (case, budget, scheme, metric): ``mean``, ``ci_low``, ``ci_high``,
        ``median``, ``p99``, ``max``, ``n_trials``, ``n_nonfinite`` and the scheme's
        ``bits_nominal``/``bits_total``, then ``tail_index`` and ``ci_reliable``. A metric
        with non-finite values (SNR = +inf for exact reconstructions) has its mean as both
        CI ends and counts them in ``n_nonfinite``.

        ``tail_index`` is the Hill estimate α̂ of the right-tail index of the metric's
        per-trial values (:func:`kvstats.stats.tail_index`, default k = floor(√n_pos)),
        computed for ``kl`` (from its positive values) and for every metric whose values
        are all ≥ 0, when at least 10 values are positive and all are finite; elsewhere it
        is NaN, meaning *not computed*. ``ci_reliable`` is False when α̂ < 2: the variance
        looks infinite and the bootstrap CI of the mean is not valid (Athreya 1987); read
        ``median``, ``p99``, ``max`` and the rank tests instead. It is True otherwise,
        including where ``tail_index`` is not computed. Hill's α̂ is noisy at small n (its
        standard error is α̂/√k): below ~100 trials light-tailed metrics are sometimes
        flagged too.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.report.tables import METRICS, summary_table
    >>> rng = np.random.default_rng(0)
    >>> f = pd.DataFrame({m: rng.random(50) for m in METRICS}).assign(distribution="gaussian",
    ...     params="-", dim=64, n_keys=128, budget=4.0, scheme="KQV", bits_nominal=4.0,
    ...     bits_total=4.25, trial=np.arange(50))
    >>> int(summary_table(f, n_resamples=199).set_index("metric").loc["kl", "n_trials"])
    50
    """
    frame = check_frame(frame)
    confidence = check_real(confidence, "confidence", low=0, high=1, low_open=True, high_open=True)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    seed = check_int(seed, "seed", low=0)
    rows = []
    keys = list(CASE_COLUMNS) + ["budget", "scheme"]
    for i, (key, grp) in enumerate(frame.groupby(keys, sort=False)):
        base = dict(zip(keys, key))
        base["bits_nominal"] = float(grp["bits_nominal"].iloc[0])
        base["bits_total"] = float(grp["bits_total"].iloc[0])
        for j, metric in enumerate(METRICS):
            x = grp[metric].to_numpy(dtype=np.float64)
            finite = np.isfinite(x)
            mean, low, high = _mean_ci(x, confidence, n_resamples, seed + 1000 * i + j)
            alpha = _tail_alpha(x, metric)
            # with +inf present, interpolating quantiles would compute inf - inf
            method = "linear" if finite.all() else "higher"
            rows.append({**base, "metric": metric, "mean": mean, "ci_low": low, "ci_high": high,
                         "median": float(np.quantile(x, 0.5, method=method)),
                         "p99": float(np.quantile(x, 0.99, method=method)),
                         "max": float(np.max(x)), "n_trials": int(len(x)),
                         "n_nonfinite": int((~finite).sum()), "tail_index": alpha,
                         "ci_reliable": not alpha < 2})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- comparisons
def _get(res: Any, *names: str, default: float = math.nan) -> float:
    for name in names:
        if hasattr(res, name):
            value = getattr(res, name)
            return float(value) if value is not None else default
    return default


def _mw_row(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    from kvstats.stats import mann_whitney

    res = mann_whitney(x, y)
    ci = None
    for name in ("rank_biserial_ci", "r_ci", "ci"):
        if hasattr(res, name):
            ci = getattr(res, name)
            break
    low = _get(res, "rank_biserial_low", "r_low", "ci_low")
    high = _get(res, "rank_biserial_high", "r_high", "ci_high")
    if ci is not None:
        low, high = float(ci[0]), float(ci[1])
    return {"test": "mann_whitney", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": _get(res, "rank_biserial", "r", "effect_size"), "effect_low": low,
            "effect_high": high, "note": ""}


def _ks_row(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    from kvstats.stats import ks_2samp

    with warnings.catch_warnings():
        # quantized metrics are often tied; the report flags it per row instead of warning
        warnings.simplefilter("ignore")
        res = ks_2samp(x, y)
    tied = bool(getattr(res, "has_ties", False))
    return {"test": "ks", "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "effect": float(res.statistic), "effect_low": math.nan, "effect_high": math.nan,
            "note": "ties: conservative" if tied else ""}


def _energy_row(X: np.ndarray, Y: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    from kvstats.stats import energy_test

    if not (np.isfinite(X).all() and np.isfinite(Y).all()):
        return None  # an exact reconstruction (SNR = inf) has no finite 6D point
    res = energy_test(X, Y, n_resamples=n_resamples, seed=seed, standardize=True)
    return {"test": "energy", "metric": "profile_6d", "statistic": float(res.statistic),
            "pvalue": float(res.pvalue), "effect": math.nan, "effect_low": math.nan,
            "effect_high": math.nan, "note": "standardised 6D profile"}


def _pairs(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]]):
    """Yield (case key, budget_a, budget_b, a, b, sub_a, sub_b) for every comparable pair."""
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        present = set(grp["scheme"])
        for a, b in comparisons:
            if a not in present or b not in present:
                continue
            ga, gb = grp[grp["scheme"] == a], grp[grp["scheme"] == b]
            budgets_a, budgets_b = list(dict.fromkeys(ga["budget"])), list(dict.fromkeys(gb["budget"]))
            if len(budgets_a) == 1 and len(budgets_b) == 1 and budgets_a != budgets_b:
                # fixed-budget schemes (e.g. K4V2 vs K4V4): compare them directly
                yield case, budgets_a[0], budgets_b[0], a, b, ga, gb
                continue
            for bud in budgets_a:
                if bud in budgets_b:
                    yield case, bud, bud, a, b, ga[ga["budget"] == bud], gb[gb["budget"] == bud]


def compare_schemes(frame: pd.DataFrame, comparisons: Iterable[Sequence[str]] | None = None, *,
                    metrics: Sequence[str] = METRICS, alpha: float = 0.05,
                    correction: str = "holm", energy_resamples: int = 499, seed: int = 0,
                    ks: bool = True, energy: bool = True) -> pd.DataFrame:
    """Pairwise tests between schemes at each case and budget, adjusted across the whole table.

    For each pair (a, b), case and budget: per metric a Mann–Whitney U test (``effect``
    = rank-biserial r, positive when a's values tend to be larger, with its CI) and a
    two-sample KS test (``effect`` = D); on the standardised 6D profile an energy
    permutation test. Every p-value in the table is adjusted together (Holm by default,
    ``"fdr_bh"`` for Benjamini–Hochberg). ``winner`` (Mann–Whitney rows) applies
    :data:`HIGHER_IS_BETTER`: the scheme whose values are better in the direction of r
    when the adjusted p-value is below ``alpha``, else ``"no significant difference"``.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`.
    comparisons : sequence of (str, str), optional
        Scheme label pairs (default: KQV/QKQV, KQV/KV, QKQV/KV). Pairs absent from a case
        are skipped. Fixed-budget schemes (``K4V2``) with different budgets are compared
        directly (``budget`` ≠ ``budget_b``).
    metrics : sequence of str
        Metrics tested one by one (subset of :data:`METRICS`).
    alpha : float
        Family-wise (Holm) or false-discovery (BH) level.
    correction : {"holm", "fdr_bh"}
        Multiple-testing correction over every p-value in the table.
    energy_resamples : int
        Permutations of each energy test.
    seed : int
        Seed of the energy permutations.
    ks, energy : bool
        Include the KS and energy tests.

    Returns
    -------
    DataFrame
        One row per test with the case columns, ``budget``, ``budget_b``, ``scheme_a``,
        ``scheme_b``, ``metric``, ``test``, ``statistic``, ``pvalue``, ``effect``,
        ``effect_low``, ``effect_high``, ``mean_a``, ``mean_b``, ``median_a``,
        ``median_b``, ``n_a``, ``n_b``, ``note``, ``pvalue_adjusted``, ``significant``,
        ``winner``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.report.tables import METRICS, compare_schemes
    >>> rng = np.random.default_rng(0)
    >>> def cell(scheme, shift):
    ...     return pd.DataFrame({m: rng.random(40) + shift for m in METRICS}).assign(
    ...         distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0,
    ...         scheme=scheme, bits_nominal=4.0, bits_total=4.25, trial=np.arange(40))
    >>> f = pd.concat([cell("KQV", 0.0), cell("QKQV", 1.0)])
    >>> t = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False)
    >>> t.set_index("metric").loc["kl", "winner"]
    'KQV'
    """
    frame = check_frame(frame)
    from kvstats.sweep import DEFAULT_COMPARISONS
    from kvstats.stats import adjust_pvalues

    comparisons = [tuple(p) for p in (DEFAULT_COMPARISONS if comparisons is None else comparisons)]
    for pair in comparisons:
        if len(pair) != 2 or not all(isinstance(s, str) for s in pair):
            raise TypeError(f"comparisons must be pairs of scheme labels; received {pair!r}")
    for m in metrics:
        check_choice(m, "metrics", METRICS)
    alpha = check_real(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    correction = check_choice(correction, "correction", ["holm", "fdr_bh"])
    energy_resamples = check_int(energy_resamples, "energy_resamples", low=1)
    seed = check_int(seed, "seed", low=0)

    rows = []
    for i, (case, bud_a, bud_b, a, b, ga, gb) in enumerate(_pairs(frame, comparisons)):
        base = {**dict(zip(CASE_COLUMNS, case)), "budget": float(bud_a), "budget_b": float(bud_b),
                "scheme_a": a, "scheme_b": b, "n_a": len(ga), "n_b": len(gb)}
        for metric in metrics:
            x, y = ga[metric].to_numpy(np.float64), gb[metric].to_numpy(np.float64)
            extra = {"metric": metric, "mean_a": float(np.mean(x)), "mean_b": float(np.mean(y)),
                     "median_a": float(np.median(x)), "median_b": float(np.median(y))}
            rows.append({**base, **extra, **_mw_row(x, y)})
            if ks:
                rows.append({**base, **extra, **_ks_row(x, y)})
        if energy:
            X = ga[list(PROFILE_METRICS)].to_numpy(np.float64)
            Y = gb[list(PROFILE_METRICS)].to_numpy(np.float64)
            row = _energy_row(X, Y, energy_resamples, seed + i)
            if row is not None:
                rows.append({**base, "mean_a": math.nan, "mean_b": math.nan, "median_a": math.nan,
                             "median_b": math.nan, **row})
    columns = list(CASE_COLUMNS) + ["budget", "budget_b", "scheme_a", "scheme_b", "metric", "test",
                                    "statistic", "pvalue", "effect", "effect_low", "effect_high",
                                    "mean_a", "mean_b", "median_a", "median_b", "n_a", "n_b", "note"]
    table = pd.DataFrame(rows, columns=columns)
    if table.empty:
        for col, value in (("pvalue_adjusted", 1.0), ("significant", False), ("winner", "")):
            table[col] = pd.Series(dtype=type(value))
        return table
    adj = adjust_pvalues(table["pvalue"].to_numpy(), method=correction, alpha=alpha)
    table["pvalue_adjusted"] = _adjusted(adj)
    table["significant"] = table["pvalue_adjusted"] < alpha
    table["winner"] = [_winner(r, alpha) for r in table.itertuples(index=False)]
    table.attrs.update(alpha=alpha, correction=correction, energy_resamples=energy_resamples)
    return table


def _adjusted(adj: Any) -> np.ndarray:
    for name in ("pvalues_adjusted", "pvalue_adjusted", "adjusted", "pvalues"):
        if hasattr(adj, name):
            return np.asarray(getattr(adj, name), dtype=np.float64)
    if isinstance(adj, tuple):  # (reject, adjusted) as statsmodels returns
        return np.asarray(adj[1], dtype=np.float64)
    return np.asarray(adj, dtype=np.float64)


def _winner(row: Any, alpha: float) -> str:
    if row.test != "mann_whitney":
        return ""
    if not row.pvalue_adjusted < alpha or row.effect == 0:
        return "no significant difference"
    a_larger = row.effect > 0
    return row.scheme_a if a_larger == HIGHER_IS_BETTER[row.metric] else row.scheme_b


# ---------------------------------------------------------------------- crossovers
def find_crossovers(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Where the winner of a metric changes with the budget, per case and scheme pair.

    Parameters
    ----------
    comparisons : DataFrame
        The table of :func:`compare_schemes`.

    Returns
    -------
    DataFrame
        One row per (case, pair, metric) tested at two or more budgets:
        ``winners`` ("2:QKQV, 3:no significant difference, 4:KQV" in budget order),
        ``crossover`` (True when each scheme wins significantly at some budget) and a
        ``description`` sentence.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
    ...     "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV", "scheme_b": "QKQV",
    ...     "metric": "phi_k", "test": "mann_whitney", "winner": ["QKQV", "KQV"]})
    >>> bool(find_crossovers(t)["crossover"].iloc[0])
    True
    """
    if not isinstance(comparisons, pd.DataFrame):
        raise TypeError(f"comparisons must be the DataFrame of compare_schemes; received "
                        f"{type(comparisons).__name__}")
    cols = list(CASE_COLUMNS) + ["scheme_a", "scheme_b", "metric"]
    out_cols = cols + ["winners", "crossover", "description"]
    mw = comparisons[(comparisons["test"] == "mann_whitney")
                     & (comparisons["budget"] == comparisons["budget_b"])]
    rows = []
    for key, grp in mw.groupby(cols, sort=False):
        grp = grp.sort_values("budget")
        if len(grp) < 2:
            continue
        winners = list(zip(grp["budget"], grp["winner"]))
        won = {w for _, w in winners if w not in ("", "no significant difference")}
        cross = len(won) == 2
        rec = dict(zip(cols, key))
        rec["winners"] = ", ".join(f"{_fmt_budget(b)}:{w}" for b, w in winners)
        case = f"{rec['distribution']}({rec['params']}), d={rec['dim']}, N={rec['n_keys']}"
        if cross:
            a, b = rec["scheme_a"], rec["scheme_b"]
            wa = [_fmt_budget(bud) for bud, w in winners if w == a]
            wb = [_fmt_budget(bud) for bud, w in winners if w == b]
            rec["description"] = (f"CROSSOVER in {rec['metric']} for {case}: {a} wins at n = "
                                  f"{', '.join(wa)}; {b} wins at n = {', '.join(wb)}.")
        else:
            rec["description"] = (f"no crossover in {rec['metric']} for {case}: "
                                  + (f"only {next(iter(won))} wins significantly" if won
                                     else "no significant winner at any budget") + ".")
        rec["crossover"] = cross
        rows.append(rec)
    return pd.DataFrame(rows, columns=out_cols)


def _fmt_budget(b: float) -> str:
    return f"{b:g}"


# ---------------------------------------------------------------------- theory
def _predict_k_rel_mse(scheme: str, n: int, d_pad: int) -> float:
    """Relative key MSE E‖k − k̂‖²/‖k‖² of a scheme's key side (kvstats.theory)."""
    from kvstats import theory

    if scheme in ("QKQV", "turboquant_prod"):
        # Gaussian QJL reconstruction of the residual r with m = d_pad rows:
        # E‖r̂ − r‖² = ‖r‖²(π/2·d_pad/m − 1/m), the same factor as residual_inflation(d_pad)
        return theory.unit_vector_mse(n - 1, d_pad) * theory.residual_inflation(d_pad)
    return theory.unit_vector_mse(n, d_pad)


def _pad(dim: int) -> int:
    return 1 << (int(dim) - 1).bit_length()


def theory_table(frame: pd.DataFrame, *, n_resamples: int = 999, seed: int = 0) -> pd.DataFrame:
    """Closed-form predictions beside the sweep's measurements.

    Rows (per case and budget n, for schemes present with default settings):

    - ``k_snr_db`` (KV, KQV, turboquant_mse at n bits; QKQV, turboquant_prod): predicted
      per-key SNR of the keys, −10·log10(relative MSE). For an n-bit Lloyd–Max MSE
      quantizer on the rotated unit vector the relative MSE is d_pad·D_n, with D_n the
      Lloyd–Max distortion of the sphere-coordinate (Beta) density of dimension d_pad
      (exact for Gaussian keys with or without rotation; for other keys only after a
      rotation). Rotated schemes get this row only when d is a power of two (no
      padding; see the comment in the code). For (n−1)-bit MSE + a 1-bit Gaussian
      QJL residual with m = d_pad rows,
      the QJL reconstruction of the residual r has E‖r̂ − r‖² = ‖r‖²(π/2·d_pad/m − 1/m),
      so the relative MSE is d_pad·D_{n−1}·(π/2 − 1/d_pad). Measured: the mean over
      trials of ``snr_k`` (itself a mean of per-key dB; by Jensen slightly above the dB
      of the mean error).
    - ``ip_var_ratio_same_budget``: Var of the q·k error, QKQV over KQV at the same n.
      Predicted (π/2 − 1/d_pad)·D_{n−1}/D_n, which tends to 2π as D_{n−1}/D_n → 4;
      the asymptotic 2π is in ``predicted_asymptotic``.
    - ``ip_var_ratio_residual``: QKQV at n over KQV at n−1: the same (n−1)-bit scalar
      part, its residual r estimated by the 1-bit QJL sketch or left as the error. The
      QJL estimate of q·r has variance ((π/2)‖q‖²‖r‖² − (q·r)²)/m, the bare residual
      projection ‖q‖²‖r‖²/d_pad, so with m = d_pad the ratio is π/2 − 1/d_pad (→ π/2).

    The closed forms come from :mod:`kvstats.theory` (``unit_vector_mse``,
    ``residual_inflation``, ``bit_trade_inflation``).

    Measured ratios are ratios of the mean ``ip_var`` (variance over query–key pairs of
    the q·k error, per trial) with a bootstrap CI (:func:`kvstats.stats.bootstrap_ratio_ci`).
    ``ci_reliable`` is False when a sample behind the row (``snr_k``, or either ``ip_var``
    sample) is nonnegative with a Hill tail index below 2 (as in :func:`summary_table`):
    the bootstrap of a mean is then not valid.
    Predictions assume the default settings (Hadamard rotation, Gaussian sketch,
    m = d_pad); schemes are matched by label, so give non-default settings other labels.

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [32], "n_keys": [64], "n_trials": 20}, executor="serial", progress=False)
    >>> theory_table(res.frame, n_resamples=99)["quantity"].tolist()
    ['k_snr_db']

    Returns
    -------
    DataFrame
        Columns: case columns, ``budget``, ``quantity``, ``scheme``, ``predicted``,
        ``predicted_asymptotic``, ``measured``, ``ci_low``, ``ci_high``, ``n_trials``,
        ``ci_reliable``.
    """
    frame = check_frame(frame)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    from kvstats import theory

    rows = []
    plain = frame  # schemes are matched by label: only default-setting labels are used
    for case, grp in plain.groupby(list(CASE_COLUMNS), sort=False):
        base = dict(zip(CASE_COLUMNS, case))
        d_pad = _pad(base["dim"])
        labels = set(grp["scheme"])
        for n in sorted(grp["budget"].unique()):
            if float(n) != int(n):
                continue
            n = int(n)
            at = grp[grp["budget"] == n]
            for scheme in ("KV", "KQV", "turboquant_mse", "QKQV", "turboquant_prod"):
                sub = at[at["scheme"] == scheme]
                if sub.empty:
                    continue
                if scheme in ("QKQV", "turboquant_prod") and n < 2:
                    continue
                # KV codes the unrotated unit vector: d coordinates, no padding. A padded
                # Hadamard rotation (d < d_pad) codes d_pad coordinates of which the decode
                # keeps a d-dimensional projection; d_pad·D_n overstates that error, and no
                # closed form is offered, so no prediction is made.
                coded = base["dim"] if scheme == "KV" else d_pad
                if coded != base["dim"]:
                    continue
                rel = _predict_k_rel_mse(scheme, n, coded)
                x = sub["snr_k"].to_numpy(np.float64)
                mean, low, high = _mean_ci(x, 0.95, n_resamples, seed + n)
                rows.append({**base, "budget": float(n), "quantity": "k_snr_db", "scheme": scheme,
                             "predicted": -10 * math.log10(rel), "predicted_asymptotic": math.nan,
                             "measured": mean, "ci_low": low, "ci_high": high, "n_trials": len(x),
                             "ci_reliable": _reliable(x)})
            if {"KQV", "QKQV"} <= labels and n >= 2:
                q = at[at["scheme"] == "QKQV"]["ip_var"].to_numpy(np.float64) if "ip_var" in at else None
                k = at[at["scheme"] == "KQV"]["ip_var"].to_numpy(np.float64) if "ip_var" in at else None
                if q is not None and len(q) and len(k):
                    pred = theory.bit_trade_inflation(n, d_pad)
                    rows.append({**base, "budget": float(n), "quantity": "ip_var_ratio_same_budget",
                                 "scheme": "QKQV/KQV", "predicted": pred,
                                 "predicted_asymptotic": 2 * math.pi,
                                 **_ratio(q, k, n_resamples, seed + 100 + n)})
                prev = grp[(grp["budget"] == n - 1) & (grp["scheme"] == "KQV")]
                if q is not None and len(q) and len(prev):
                    rows.append({**base, "budget": float(n), "quantity": "ip_var_ratio_residual",
                                 "scheme": "QKQV(n)/KQV(n-1)", "predicted": theory.residual_inflation(d_pad),
                                 "predicted_asymptotic": math.pi / 2,
                                 **_ratio(q, prev["ip_var"].to_numpy(np.float64), n_resamples,
                                          seed + 200 + n)})
    return pd.DataFrame(rows, columns=list(CASE_COLUMNS) + [
        "budget", "quantity", "scheme", "predicted", "predicted_asymptotic", "measured",
        "ci_low", "ci_high", "n_trials", "ci_reliable"])


def _reliable(*samples: np.ndarray) -> bool:
    """False when a sample is nonnegative with Hill α̂ < 2 (the bootstrap's own screen)."""
    from kvstats.stats.tail import heavy_tail_alpha

    alphas = [heavy_tail_alpha(np.asarray(x, np.float64)) for x in samples]
    return not any(a is not None and a < 2 for a in alphas)


def _ratio(x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    from kvstats.stats import HeavyTailWarning, bootstrap_ratio_ci

    measured = float(np.mean(x) / np.mean(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeavyTailWarning)  # flagged in ci_reliable instead
        res = bootstrap_ratio_ci(x, y, n_resamples=n_resamples, seed=seed)
    low, high = _interval(res)
    return {"measured": measured, "ci_low": low, "ci_high": high,
            "n_trials": int(min(len(x), len(y))), "ci_reliable": _reliable(x, y)}
