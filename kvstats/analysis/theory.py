"""Closed-form predictions beside a sweep's measurements (the theory table).

Which schemes have a prediction, and what it is, comes from the scheme registry
(:attr:`SchemeDef.key_theory <kvstats.quant.registry.SchemeDef>`,
:meth:`~kvstats.quant.registry.SchemeDef.key_rel_mse`); the constants of the variance
ratios from :mod:`kvstats.theory`. Schemes are matched by their label in the frame, so
a scheme run with non-default settings should carry another label.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kvstats._checks import check_int
from kvstats.analysis.frame import CASE_COLUMNS, check_frame
from kvstats.analysis.intervals import ci_reliable, mean_ci, ratio_ci
from kvstats.quant.registry import REGISTRY, SchemeDef
from kvstats.quant.rotation import next_pow2

__all__ = ["theory_table", "theory_schemes", "ratio_pairs", "THEORY_COLUMNS"]

#: Columns of :func:`theory_table`.
THEORY_COLUMNS = list(CASE_COLUMNS) + ["budget", "quantity", "scheme", "predicted",
                                       "predicted_asymptotic", "measured", "ci_low", "ci_high",
                                       "n_trials", "ci_reliable"]

# Rows of one budget list the MSE-key family before the MSE + QJL ("prod") family.
_FAMILIES = ("mse", "prod")


def _predicted_defs() -> list[SchemeDef]:
    """Budget-named registry schemes whose key side has a closed form, MSE family first."""
    defs = [d for d in REGISTRY.values() if d.key_theory is not None and not d.fixed_budget]
    return sorted(defs, key=lambda d: _FAMILIES.index(d.key_theory))


def _rotated(sdef: SchemeDef) -> bool:
    # The key side of an "mse"/"prod" scheme is random only through its rotation (and a
    # prod sketch, always beside the default Hadamard rotation): with default settings,
    # randomized means rotated, coding d_pad coordinates.
    return sdef.randomized({})


def theory_schemes() -> tuple[str, ...]:
    """Schemes with a key-SNR prediction, in the order of the theory table's rows.

    Examples
    --------
    >>> theory_schemes()
    ('KV', 'KQV', 'turboquant_mse', 'QKQV', 'turboquant_prod')
    """
    return tuple(d.name for d in _predicted_defs())


def ratio_pairs() -> tuple[tuple[str, str], ...]:
    """``(mse, prod)`` scheme pairs whose q·k-error variance ratio has a prediction.

    The first scheme codes rotated keys with an n-bit Lloyd–Max quantizer, the second
    with an (n−1)-bit one plus a 1-bit QJL residual (key theories "mse" and "prod").
    The ratio rows of :func:`theory_table` divide the second's ``ip_var`` by the first's.

    Examples
    --------
    >>> ratio_pairs()[0]
    ('KQV', 'QKQV')
    """
    defs = _predicted_defs()
    mse = [d.name for d in defs if d.key_theory == "mse" and _rotated(d)]
    prod = [d.name for d in defs if d.key_theory == "prod"]
    return tuple((m, p) for m in mse for p in prod)


def theory_table(frame: pd.DataFrame, *, n_resamples: int = 999, seed: int = 0) -> pd.DataFrame:
    """Closed-form predictions beside the sweep's measurements.

    Rows (per case and budget n, for schemes present with default settings):

    - ``k_snr_db`` (each scheme of :func:`theory_schemes`: KV, KQV, turboquant_mse at n
      bits; QKQV, turboquant_prod): predicted per-key SNR of the keys,
      −10·log10(relative MSE), the registry's ``key_rel_mse``. For an n-bit Lloyd–Max MSE
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
    - ``ip_var_ratio_same_budget`` (each pair of :func:`ratio_pairs` present, e.g.
      QKQV/KQV): Var of the q·k error, the prod scheme over the MSE scheme at the same
      n. Predicted (π/2 − 1/d_pad)·D_{n−1}/D_n, which tends to 2π as D_{n−1}/D_n → 4;
      the asymptotic 2π is in ``predicted_asymptotic``.
    - ``ip_var_ratio_residual``: the prod scheme at n over the MSE scheme at n−1 (e.g.
      QKQV at n over KQV at n−1): the same (n−1)-bit scalar part, its residual r
      estimated by the 1-bit QJL sketch or left as the error. The QJL estimate of q·r has
      variance ((π/2)‖q‖²‖r‖² − (q·r)²)/m, the bare residual projection ‖q‖²‖r‖²/d_pad,
      so with m = d_pad the ratio is π/2 − 1/d_pad (→ π/2).

    The closed forms come from :mod:`kvstats.theory` (``unit_vector_mse``,
    ``residual_inflation``, ``bit_trade_inflation``).

    Measured ratios are ratios of the mean ``ip_var`` (variance over query–key pairs of
    the q·k error, per trial) with a bootstrap CI (:func:`kvstats.stats.bootstrap_ratio_ci`).
    ``ci_reliable`` is False when a sample behind the row (``snr_k``, or either ``ip_var``
    sample) is nonnegative with a Hill tail index below 2 (as in
    :func:`~kvstats.analysis.summary_table`): the bootstrap of a mean is then not valid.
    Predictions assume the default settings (Hadamard rotation, Gaussian sketch,
    m = d_pad); schemes are matched by label, so give non-default settings other labels.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (``ip_var`` needed for the ratios).
    n_resamples : int
        Bootstrap resamples per interval.
    seed : int
        Seed of the bootstrap.

    Returns
    -------
    DataFrame
        Columns :data:`THEORY_COLUMNS`: case columns, ``budget``, ``quantity``,
        ``scheme``, ``predicted``, ``predicted_asymptotic``, ``measured``, ``ci_low``,
        ``ci_high``, ``n_trials``, ``ci_reliable``.

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [32], "n_keys": [64], "n_trials": 20}, executor="serial", progress=False)
    >>> theory_table(res.frame, n_resamples=99)["quantity"].tolist()
    ['k_snr_db']
    """
    frame = check_frame(frame)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    from kvstats import theory

    defs = _predicted_defs()
    pairs = ratio_pairs()
    rows = []
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        base = dict(zip(CASE_COLUMNS, case))
        d_pad = next_pow2(base["dim"])
        labels = set(grp["scheme"])
        for n in sorted(grp["budget"].unique()):
            if float(n) != int(n):
                continue
            n = int(n)
            at = grp[grp["budget"] == n]
            for sdef in defs:
                sub = at[at["scheme"] == sdef.name]
                if sub.empty:
                    continue
                # An unrotated key side codes the d coordinates of the unit vector, no
                # padding. A padded Hadamard rotation (d < d_pad) codes d_pad coordinates of
                # which the decode keeps a d-dimensional projection; d_pad·D_n overstates
                # that error, and no closed form is offered, so no prediction is made.
                coded = d_pad if _rotated(sdef) else base["dim"]
                if coded != base["dim"]:
                    continue
                rel = sdef.key_rel_mse(n, coded)
                if rel is None:  # e.g. a prod key side at n = 1 (no (n−1)-bit part)
                    continue
                x = sub["snr_k"].to_numpy(np.float64)
                mean, low, high = mean_ci(x, 0.95, n_resamples, seed + n)
                rows.append({**base, "budget": float(n), "quantity": "k_snr_db", "scheme": sdef.name,
                             "predicted": -10 * math.log10(rel), "predicted_asymptotic": math.nan,
                             "measured": mean, "ci_low": low, "ci_high": high, "n_trials": len(x),
                             "ci_reliable": ci_reliable(x)})
            for m_name, p_name in pairs:
                if not ({m_name, p_name} <= labels and n >= 2):  # n−1 ≥ 1 bits of MSE
                    continue
                has_var = "ip_var" in at
                q = at[at["scheme"] == p_name]["ip_var"].to_numpy(np.float64) if has_var else None
                k = at[at["scheme"] == m_name]["ip_var"].to_numpy(np.float64) if has_var else None
                if q is not None and len(q) and len(k):
                    rows.append({**base, "budget": float(n), "quantity": "ip_var_ratio_same_budget",
                                 "scheme": f"{p_name}/{m_name}",
                                 "predicted": theory.bit_trade_inflation(n, d_pad),
                                 "predicted_asymptotic": 2 * math.pi,
                                 **ratio_ci(q, k, n_resamples, seed + 100 + n)})
                prev = grp[(grp["budget"] == n - 1) & (grp["scheme"] == m_name)]
                if q is not None and len(q) and len(prev):
                    rows.append({**base, "budget": float(n), "quantity": "ip_var_ratio_residual",
                                 "scheme": f"{p_name}(n)/{m_name}(n-1)",
                                 "predicted": theory.residual_inflation(d_pad),
                                 "predicted_asymptotic": math.pi / 2,
                                 **ratio_ci(q, prev["ip_var"].to_numpy(np.float64), n_resamples,
                                            seed + 200 + n)})
    return pd.DataFrame(rows, columns=THEORY_COLUMNS)
