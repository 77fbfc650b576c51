"""Closed-form predictions and the rate–distortion limit beside a sweep's measurements.

Which schemes have a prediction, and what it is, comes from the scheme registry
(:attr:`SchemeDef.key_theory <kvstats.quant.registry.SchemeDef>`,
:meth:`~kvstats.quant.registry.SchemeDef.key_rel_mse`; where it holds, from the key side's
:meth:`~kvstats.quant.registry.SchemeDef.key_rotated` and
:meth:`~kvstats.quant.registry.SchemeDef.coded_dim`, asked only of the schemes a frame
holds, at their ``example_params``); the constants of the variance ratios from
:mod:`kvstats.theory`. Schemes are matched by their label in the frame, or by the registry
name a label stands for (``aliases``: a config entry of default settings under a label of
its own, ``TQ3``), so a scheme run with non-default settings should carry another label.

The limit: every scheme, at the bits per coordinate it stores, beside Shannon's
distortion–rate bound of its source (:mod:`kvstats.rate_distortion`) computed from the
covariance spectrum of the case (:mod:`kvstats.data.spectrum`; for a real capture the
covariance measured per (layer, KV head)), and its gap to it in dB.
"""
# ~510 lines as one idea: the predictions and the limit are one table (theory.csv),
# computed from the same case spectra; most of the lines are docstrings.

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kvstats._checks import _describe, check_int
from kvstats.analysis.clustered import warn_if_real_trials_lack_clusters
from kvstats.analysis.frame import CASE_COLUMNS, _in_trial_order, check_frame, reported_pooled_snrs
from kvstats.analysis.intervals import ci_reliable, mean_ci, ratio_ci
from kvstats.data.spectrum import Spectrum, capture_spectra, synthetic_spectrum
from kvstats.data.synthetic import DISTRIBUTIONS
from kvstats.quant.registry import REGISTRY, SchemeDef
from kvstats.results import REAL

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig

__all__ = ["theory_table", "theory_schemes", "ratio_pairs", "THEORY_COLUMNS", "BOUND_QUANTITIES",
           "CaseSpectra", "case_spectra", "real_case_spectra", "nominal_bounds"]

#: Columns of :func:`theory_table` (``rate`` and the ``gap`` columns are NaN outside the
#: bound rows).
THEORY_COLUMNS = list(CASE_COLUMNS) + ["budget", "quantity", "scheme", "predicted",
                                       "predicted_asymptotic", "measured", "ci_low", "ci_high",
                                       "n_trials", "ci_reliable", "rate", "gap_db", "gap_low",
                                       "gap_high", "n_units", "paired"]

#: Quantity of the bound rows per place: keys, values (the attention output T has none:
#: it is not what is coded, and its error depends on the softmax, not on a rate).
BOUND_QUANTITIES = {"k": "k_snr_bound", "v": "v_snr_bound"}

#: The spectra of one case: keys and values (None where no covariance exists or where
#: it is not known, e.g. a real capture that is not at hand).
CaseSpectra = tuple[Spectrum | None, Spectrum | None]
_CaseKey = tuple[str, str, int, int]

# Rows of one budget list the MSE-key family before the MSE + QJL ("prod") family.
_FAMILIES = ("mse", "prod")


def _predicted_defs(present: Any = None) -> list[SchemeDef]:
    """Budget-named registry schemes whose key side has a closed form, MSE family first;
    with ``present``, only those it names (a frame's schemes: an entry the frame does not
    hold is never asked a fact)."""
    defs = [d for d in REGISTRY.values() if d.key_theory is not None and not d.fixed_budget
            and (present is None or d.name in present)]
    return sorted(defs, key=lambda d: _FAMILIES.index(d.key_theory))


def _key_facts(sdef: SchemeDef, dim: int) -> tuple[bool, int]:
    # The entry's key-side facts for the settings a label stands for, its example
    # parameters with the defaults filled in (a user scheme's required ones among them):
    # whether its keys are rotated (the sphere law then holds for any keys, as a
    # yardstick) and how many coordinates it codes (d_pad after a padded Hadamard).
    return sdef.key_rotated(sdef.example_params), sdef.coded_dim(dim, sdef.example_params)


def _pairs(defs: list[SchemeDef]) -> tuple[tuple[str, str], ...]:
    # both key sides rotated: the ratio's constants are those of the sphere law
    rotated = [d for d in defs if d.key_rotated(d.example_params)]
    return tuple((m.name, p.name) for m in rotated if m.key_theory == "mse"
                 for p in rotated if p.key_theory == "prod")


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
    with an (n−1)-bit one plus a 1-bit QJL residual (key theories "mse" and "prod", both
    ``SchemeDef.key_rotated``). The ratio rows of :func:`theory_table` divide the second's
    ``ip_var`` by the first's.

    Examples
    --------
    >>> ratio_pairs()[0]
    ('KQV', 'QKQV')
    """
    return _pairs(_predicted_defs())


def theory_table(frame: pd.DataFrame, *, n_resamples: int = 999, seed: int = 0,
                 spectra: Mapping[_CaseKey, CaseSpectra] | None = None,
                 n_queries: int = 1, aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Closed-form predictions and the rate–distortion limit beside the sweep's measurements.

    Rows (per case and budget n, for schemes present with default settings):

    - ``k_snr_db`` (each scheme of :func:`theory_schemes`: KV, KQV, turboquant_mse at n
      bits; QKQV, turboquant_prod): predicted per-key SNR of the keys,
      −10·log10(relative MSE), the registry's ``key_rel_mse``. For an n-bit Lloyd–Max MSE
      quantizer on the rotated unit vector the relative MSE is d_pad·D_n, with D_n the
      Lloyd–Max distortion of the sphere-coordinate (Beta) density of dimension d_pad,
      exact for isotropic Gaussian keys (distribution ``"gaussian"``: a direction uniform
      on the sphere, rotated or not). Rows: schemes whose key side is rotated
      (``key_rotated``: KQV, turboquant_mse, QKQV, turboquant_prod) on every case where
      they code d coordinates (``coded_dim``: no padding; see the comment in the code),
      a yardstick for keys other than isotropic Gaussian (one
      randomized Hadamard rotation brings their coordinates close to the sphere law, not
      onto it: +0.5 to +0.9 dB above the prediction on outlier_channels keys at d = 64);
      the unrotated KV on ``"gaussian"`` cases only (its codebook fits no other key's
      coordinates: 6 to 12 dB below on outlier_channels keys). For (n−1)-bit MSE + a 1-bit Gaussian
      QJL residual with m = d_pad rows,
      the QJL reconstruction of the residual r ∈ R^d has E‖r̂ − r‖² = ‖r‖²(π/2·d/m − 1/m),
      so the relative MSE is d_pad·D_{n−1}·(π/2 − 1/d_pad) (unpadded: d = d_pad = m).
      Measured: the mean over trials of ``snr_k`` (itself a mean of per-key dB; by
      Jensen above the dB of the mean error that is predicted: +0.04 to +0.12 dB at
      n = 2…6, d = 128 on Gaussian keys, where the pooled SNR of the bound rows is within
      0.02 dB of the prediction; docs/theory.md §7); over texts on a real capture, as
      every measured row.
    - ``ip_var_ratio_same_budget`` (each pair of :func:`ratio_pairs` present, e.g.
      QKQV/KQV): Var of the q·k error, the prod scheme over the MSE scheme at the same
      n. Predicted (π/2 − 1/d_pad)·D_{n−1}/D_n, which tends to 2π as D_{n−1}/D_n → 4;
      the asymptotic 2π is in ``predicted_asymptotic``.
    - ``ip_var_ratio_residual``: the prod scheme at n over the MSE scheme at n−1 (e.g.
      QKQV at n over KQV at n−1): the same (n−1)-bit scalar part, its residual r
      estimated by the 1-bit QJL sketch or left as the error. The QJL estimate of q·r has
      variance ((π/2)‖q‖²‖r‖² − (q·r)²)/m, the bare residual projection ‖q‖²‖r‖²/d_pad,
      so with m = d_pad the ratio is π/2 − 1/d_pad (→ π/2). With padding (d < d_pad) the
      residual lives in R^d and is sketched with m = d_pad rows: (π/2 − 1/d)·d/d_pad
      (``residual_inflation(d, d_pad)``, 1.170 at d = 96, asymptotically (π/2)·d/d_pad),
      for a residual of isotropic direction; the same-budget row is then left out (the
      padded n-bit MSE error has no closed form, as for ``k_snr_db``).

    - ``k_snr_bound``, ``v_snr_bound`` (every scheme, per case and budget, when the
      frame has the pooled SNR columns): ``rate`` is the scheme's total stored bits per
      coordinate of that side (``key_bits_total`` / ``value_bits_total``: codes, norms,
      scales, everything; equal to the registry's ``expected_bits``); ``predicted`` is
      Shannon's bound on the pooled SNR at that rate for a Gaussian source with the
      case's covariance (:mod:`kvstats.rate_distortion`: reverse water-filling over the
      eigenvalues of :mod:`kvstats.data.spectrum`, signal ``E‖x‖²``); ``measured`` the
      mean over trials of the pooled SNR ``snr_k_pooled`` (``10·log10(Σ‖k‖²/Σ‖k − k̂‖²)``
      per trial); ``gap_db`` the mean of bound − measured with its bootstrap CI
      (``gap_low``, ``gap_high``; ≥ 0 for a Gaussian source, up to sampling error; where
      every unit has one bound, as a synthetic case, the bound minus the measured
      interval, BCa being equivariant under x ↦ c − x). On a
      real capture the bound is per trial, from its (layer, head)'s measured covariance
      (pass ``spectra`` from :func:`real_case_spectra`), and means and intervals are over
      texts (``n_units``: the clusters). No row where the covariance does not exist
      (heavy tails, ν ≤ 2), for an exact reconstruction, for a real case without
      ``spectra``, or for a pooled column that some rows lack (left out with a
      UserWarning, as the summary and the comparisons leave it out:
      :func:`~kvstats.analysis.frame.reported_pooled_snrs`). For a non-Gaussian source
      the bound is that of the Gaussian of equal covariance, which a scheme may beat (a
      negative gap).

    The closed forms come from :mod:`kvstats.theory` (``unit_vector_mse``,
    ``residual_inflation``, ``bit_trade_inflation``).

    Measured ratios are ratios of the mean ``ip_var`` (variance over query–key pairs of
    the q·k error, per trial) with a bootstrap CI (:func:`kvstats.stats.bootstrap_ratio_ci`).
    A sweep codes every trial of a case with every scheme and budget, so the two means
    come from the same trials: the interval resamples them as pairs (``paired`` True),
    matched on the trial (on the text where clustered). Where the two cells do not hold
    the same units once each (a frame filtered by hand), the two samples are resampled
    apart (``paired`` False), which is valid for independent samples only.
    On a clustered real capture every measured mean, ratio and interval is over the
    independent units, the texts (each text's trials averaged first; ``n_units``), and
    ``n_trials`` still counts the trials. Real trials that record no ``cluster`` (sweeps
    from before the column, NaN where resumed) are their own units for want of their text,
    with a :class:`~kvstats.analysis.clustered.TrialsAsUnitsWarning` saying so and how to
    record the texts (run the sweep again).
    ``ci_reliable`` is False when a sample behind the row (``snr_k``, or either ``ip_var``
    sample) is nonnegative with a Hill tail index below 2 (as in
    :func:`~kvstats.analysis.summary_table`): the bootstrap of a mean is then not valid.
    Predictions assume the default settings (Hadamard rotation, Gaussian sketch,
    m = d_pad); schemes are matched by label (or by ``aliases``), so give non-default
    settings other labels.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep` (``ip_var`` needed for the ratios).
    n_resamples : int
        Bootstrap resamples per interval.
    seed : int
        Seed of the bootstrap; each interval's resamples are drawn from it and the values
        behind it (:func:`kvstats.analysis.intervals.mean_ci`), so a mean also in
        :func:`~kvstats.analysis.summary_table` (``snr_k``, the pooled SNRs) gets its interval
        there at the same seed, resamples and confidence (0.95).
    spectra : mapping, optional
        ``(distribution, params, dim, n_keys)`` → (key, value)
        :class:`~kvstats.data.spectrum.Spectrum`, overriding the analytic spectra of
        synthetic cases (:func:`case_spectra`) and giving those of real cases
        (:func:`real_case_spectra`).
    n_queries : int
        Queries per trial of the sweep (the ``focused`` spectrum depends on it).
    aliases : mapping, optional
        Label → registry name, for labels that stand for a scheme at its default settings
        (a config's ``label = "TQ3"`` entry of ``turboquant_mse``: the report passes them);
        such a label's rows are predicted as its scheme's and carry the label.

    Returns
    -------
    DataFrame
        Columns :data:`THEORY_COLUMNS`: case columns, ``budget``, ``quantity``,
        ``scheme``, ``predicted``, ``predicted_asymptotic``, ``measured``, ``ci_low``,
        ``ci_high``, ``n_trials``, ``ci_reliable``, ``n_units`` (the independent units
        behind the interval), ``paired`` (a ratio row whose interval resampled matched
        pairs; False on the one-sample rows), and for the bound rows ``rate``,
        ``gap_db``, ``gap_low``, ``gap_high``.

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
    ...     "dims": [32], "n_keys": [64], "n_trials": 20}, executor="serial", progress=False)
    >>> kvstats.theory_table(res.frame, n_resamples=99)["quantity"].tolist()
    ['k_snr_db', 'k_snr_bound', 'v_snr_bound']
    """
    # each cell's values (and a text's trials) in trial order: no bit follows the row order
    frame = _in_trial_order(check_frame(frame))
    # texts are the units of a real capture; trials that cannot name theirs are said to be
    # units themselves (the summary's and the comparisons' warning; the report goes on, labelled)
    warn_if_real_trials_lack_clusters(frame, "theory_table")
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    seed = check_int(seed, "seed", low=0)
    n_queries = check_int(n_queries, "n_queries", low=1)
    if spectra is not None and not isinstance(spectra, Mapping):
        raise TypeError(f"spectra must be a mapping (distribution, params, dim, n_keys) -> "
                        f"(Spectrum, Spectrum); received {_describe(spectra)}")
    from kvstats import theory

    pooled = reported_pooled_snrs(frame)      # the summary's and the comparisons' rule
    if aliases is not None and not isinstance(aliases, Mapping):
        raise TypeError(f"aliases must be a mapping label -> registry name; received {_describe(aliases)}")
    # each row's scheme as the registry names it (a label of default settings: its scheme's)
    frame = frame.assign(_named=frame["scheme"].map(lambda s: dict(aliases or {}).get(s, s)))
    defs = _predicted_defs(set(frame["_named"]))
    pairs = _pairs(defs)
    rows = []
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        base = dict(zip(CASE_COLUMNS, case))
        coded_by = {d.name: _key_facts(d, base["dim"])[1] for d in defs}
        for n in sorted(grp["budget"].unique()):
            if float(n) != int(n):
                continue
            n = int(n)
            at = grp[grp["budget"] == n]
            for sdef, (label, sub) in ((d, g) for d in defs
                                       for g in at[at["_named"] == d.name].groupby("scheme", sort=False)):
                # The entry says how many coordinates its key side codes. A padded
                # Hadamard rotation (d < d_pad) codes d_pad of which the decode keeps a
                # d-dimensional projection; d_pad·D_n overstates that error, and no closed
                # form is offered, so no prediction is made.
                rotated, coded = _key_facts(sdef, base["dim"])
                if coded != base["dim"]:
                    continue
                # Unrotated, the coordinates are the key's own: the sphere law holds only
                # for a direction uniform on the sphere, i.e. isotropic Gaussian keys.
                if not rotated and base["distribution"] != "gaussian":
                    continue
                rel = sdef.key_rel_mse(n, coded)
                if rel is None:  # e.g. a prod key side at n = 1 (no (n−1)-bit part)
                    continue
                x = _unit_values(sub, "snr_k")
                mean, low, high = mean_ci(x, 0.95, n_resamples, seed)
                rows.append({**base, "budget": float(n), "quantity": "k_snr_db", "scheme": label,
                             "predicted": -10 * math.log10(rel), "predicted_asymptotic": math.nan,
                             "measured": mean, "ci_low": low, "ci_high": high, "n_trials": len(sub),
                             "ci_reliable": ci_reliable(x, metrics=["snr_k"]), "n_units": len(x), "paired": False})
            # Both schemes of a pair are rotated, coding d_pad coordinates each (their
            # coded_dim; a pair coding two numbers has no closed form); the residual r is
            # sketched in R^d with m = d_pad rows, so its QJL error is (π/2 − 1/d)·d/d_pad times
            # its own projection, which with padding (d < d_pad) is not π/2 − 1/d_pad.
            for m_name, p_name in pairs:
                q_cell = at[at["_named"] == p_name]
                d_pad = coded_by[p_name]
                padded = d_pad != base["dim"]
                if q_cell.empty or n < 2 or "ip_var" not in at or coded_by[m_name] != d_pad:
                    continue   # (n−1 ≥ 1 bits of MSE)
                k_cell = at[at["_named"] == m_name]
                prev_cell = grp[(grp["budget"] == n - 1) & (grp["_named"] == m_name)]
                lab = lambda cell: cell["scheme"].iloc[0]   # noqa: E731  (the label shown)
                # a prediction only where both cells of the ratio are present (so n is a
                # budget of the pair's schemes, which the formulas cover; another scheme's
                # budget, identity's 32, is not); padded: the n-bit MSE error is not
                # d_pad·D_n (see the k_snr_db rows), so no same-budget prediction
                ratios = []
                if not (padded or k_cell.empty):
                    ratios.append(("ip_var_ratio_same_budget", k_cell, f"{lab(q_cell)}/{lab(k_cell)}",
                                   theory.bit_trade_inflation(n, d_pad), 2 * math.pi))
                if not prev_cell.empty:
                    ratios.append(("ip_var_ratio_residual", prev_cell, f"{lab(q_cell)}(n)/{lab(prev_cell)}(n-1)",
                                   theory.residual_inflation(base["dim"], d_pad),
                                   math.pi / 2 * base["dim"] / d_pad))
                for quantity, den_cell, name, predicted, asymptotic in ratios:
                    num, den, paired = _paired_units(q_cell, den_cell, "ip_var")
                    rows.append({**base, "budget": float(n), "quantity": quantity, "scheme": name,
                                 "predicted": predicted, "predicted_asymptotic": asymptotic,
                                 **ratio_ci(num, den, n_resamples, seed,
                                            paired=paired),
                                 "n_trials": min(len(q_cell), len(den_cell)),
                                 "n_units": min(len(num), len(den))})
        rows += _bound_rows(base, grp, _spectra_for(tuple(case), spectra, n_queries), pooled,
                            n_resamples, seed)
    return pd.DataFrame(rows, columns=THEORY_COLUMNS)


# --- the rate–distortion limit ---------------------------------------------------------

def _parse_params(label: str) -> dict[str, Any]:
    """The parameters of a synthetic case from its ``params`` label (``"nu=1.5,rank=8"``, ``"-"``)."""
    if label in ("-", ""):
        return {}
    out: dict[str, Any] = {}
    for part in str(label).split(","):
        key, _, value = part.partition("=")
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


def case_spectra(distribution: str, params: str, dim: int, n_keys: int,
                 n_queries: int = 1) -> CaseSpectra:
    """Key and value spectra of a synthetic case of a sweep, from its frame columns.

    The sweep draws standard Gaussian values for every synthetic case
    (:func:`kvstats.sample`'s default), so the value spectrum is ``I_d``. A real case
    (``distribution == "real"``) needs its capture: see :func:`real_case_spectra`;
    here it gets ``(None, None)``. A distribution registered with
    :func:`kvstats.register_distribution` has no known key spectrum: ``(None, I_d)``.

    Parameters
    ----------
    distribution, params, dim, n_keys : the case columns of the frame
        ``params`` is the frame's label (``"rank=8"``, ``"-"`` for the defaults).
    n_queries : int
        Queries per trial of the sweep (only ``focused`` depends on it).

    Returns
    -------
    (Spectrum or None, Spectrum or None)

    Examples
    --------
    >>> k, v = case_spectra("low_rank", "rank=4", 16, 64)
    >>> k.eigenvalues[:5].round(6).tolist(), float(v.mean_square)
    ([4.01, 4.01, 4.01, 4.01, 0.01], 16.0)
    """
    if distribution == REAL:
        return None, None
    value = synthetic_spectrum("gaussian", int(dim))
    if distribution not in DISTRIBUTIONS:
        # a registered distribution of the user's: its key covariance has no closed form
        # here, so no key bound (the values are still the sweep's standard Gaussians)
        return None, value
    key = synthetic_spectrum(distribution, int(dim), _parse_params(params), n_keys=int(n_keys),
                             n_queries=n_queries)
    return key, value


def real_case_spectra(config: SweepConfig) -> dict[_CaseKey, CaseSpectra]:
    """Spectra of the real cases of a sweep config, measured on their captures.

    Each real case's trials get the covariance of their (layer, KV head), measured on
    all texts of the capture (:func:`kvstats.data.spectrum.capture_spectra`). A capture
    that cannot be read (moved, changed) gives no entry; the report then shows no bound
    for that case.

    Returns
    -------
    dict
        ``(distribution, params label, dim, n_keys)`` → ``(key Spectrum, value Spectrum)``.

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> real_case_spectra(SweepConfig.from_dict({"schemes": ["KV"], "distributions": ["gaussian"]}))
    {}
    """
    out: dict[_CaseKey, CaseSpectra] = {}
    if not any(d.name == REAL for d in config.distributions):
        return out
    try:
        cells = config.cells()
    except (OSError, ValueError):   # the capture is gone or changed: no measured bound
        return out
    for cell in cells:
        if cell.distribution != REAL:
            continue
        key = (REAL, cell.params_label(), int(cell.dim), int(cell.n_keys))
        if key in out:
            continue
        try:
            out[key] = capture_spectra(cell.params["path"], layer=cell.params.get("layer"),
                                       head=cell.params.get("head"))
        except (OSError, ValueError):
            continue
    return out


def _spectra_for(case: _CaseKey, spectra: Mapping[_CaseKey, CaseSpectra] | None,
                 n_queries: int) -> CaseSpectra:
    if spectra is not None and case in spectra:
        return spectra[case]
    return case_spectra(*case, n_queries=n_queries)


def _trial_bounds(spec: Spectrum, rate: float, trials: np.ndarray) -> np.ndarray:
    """The bound (dB) of each trial: one number for a synthetic case, per (layer, head) for a real one."""
    b = np.asarray(spec.bound_snr_db(rate), np.float64)
    if b.ndim == 0:
        return np.full(len(trials), float(b))
    if trials.max(initial=-1) >= len(b):
        raise ValueError(f"spectra must cover every trial of the case: trial index {int(trials.max())} "
                         f"but the spectrum has {len(b)} rows")
    return b[trials]


def _cell_clusters(cell: pd.DataFrame) -> np.ndarray | None:
    """A cell's cluster labels, or None where its trials are their own units (synthetic
    trials carry no cluster, or NaN in a frame shared with real cases)."""
    if "cluster" not in cell or cell["cluster"].isna().any():
        return None
    return cell["cluster"].to_numpy()


def _unit_values(cell: pd.DataFrame, column: str) -> np.ndarray:
    """A cell's ``column`` per independent unit: text means on a clustered real capture."""
    return _by_unit(cell[column].to_numpy(np.float64), _cell_clusters(cell))


def _paired_units(a: pd.DataFrame, b: pd.DataFrame, column: str
                  ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Two cells' ``column`` per independent unit, aligned on the unit where they are pairs.

    A sweep codes every trial of a case with every scheme and budget (its data seed
    depends on the case and chunk only, :func:`kvstats.sweep.plan.data_seed`), so two
    cells' values on one trial, or on a clustered capture one text's means, are a pair.
    Pairs when both cells hold the same units once each (trials, or texts when both
    are clustered, each text over as many trials): returns the aligned values and True.
    Otherwise (a frame of unmatched trials) each cell's unit values and False, to be
    resampled apart.
    """
    ca, cb = _cell_clusters(a), _cell_clusters(b)
    if (ca is None) == (cb is None):
        if ca is None:      # trials are the units
            sa = pd.Series(a[column].to_numpy(np.float64), index=a["trial"].to_numpy())
            sb = pd.Series(b[column].to_numpy(np.float64), index=b["trial"].to_numpy())
        else:               # texts are the units: their trials' means, over as many trials
            sa, sb = (_cluster_means(cell[column].to_numpy(np.float64), c)
                      for cell, c in ((a, ca), (b, cb)))
            sizes_a, sizes_b = (pd.Series(c).value_counts().sort_index() for c in (ca, cb))
            if not sizes_a.equals(sizes_b):
                return _unit_values(a, column), _unit_values(b, column), False
        if (sa.index.is_unique and sb.index.is_unique and len(sa) == len(sb)
                and sa.index.isin(sb.index).all()):
            sa = sa.sort_index()     # the unit's order, not the rows': one interval per frame
            return sa.to_numpy(), sb.reindex(sa.index).to_numpy(), True
    return _unit_values(a, column), _unit_values(b, column), False


def _by_unit(values: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """Cluster means when trials come in clusters (the texts of a real capture), else the values."""
    if clusters is None or len(np.unique(clusters)) == len(clusters):
        return values
    return _cluster_means(values, clusters).to_numpy(np.float64)


def _cluster_means(values: np.ndarray, clusters: np.ndarray) -> pd.Series:
    """Mean of ``values`` per cluster, indexed by the cluster label (first-seen order)."""
    s = pd.Series(values).groupby(clusters, sort=False)
    return s.sum() / s.size()


def _bound_rows(base: dict, grp: pd.DataFrame, spectra: CaseSpectra, pooled: tuple[str, ...],
                n_resamples: int, seed: int) -> list[dict]:
    rows = []
    for place, spec in zip(("k", "v"), spectra):
        col, bits = f"snr_{place}_pooled", f"{'key' if place == 'k' else 'value'}_bits_total"
        if spec is None or not spec.defined or col not in pooled or bits not in grp:
            continue
        for (n, scheme), cell in grp.groupby(["budget", "scheme"], sort=False):
            x = cell[col].to_numpy(np.float64)
            if not np.isfinite(x).all():     # exact reconstructions: no finite gap
                continue
            rate = float(cell[bits].iloc[0])
            bound = _trial_bounds(spec, rate, cell["trial"].to_numpy(np.int64))
            clusters = _cell_clusters(cell)
            xu, gu, bu = (_by_unit(v, clusters) for v in (x, bound - x, bound))
            mean, low, high = mean_ci(xu, 0.95, n_resamples, seed)
            if np.ptp(bu) == 0:     # one bound for all units: the gap's interval mirrors the SNR's
                gap, glow, ghigh = bu[0] - mean, bu[0] - high, bu[0] - low
            else:                   # per (layer, head) bounds: the gap is its own sample
                gap, glow, ghigh = mean_ci(gu, 0.95, n_resamples, seed)
            rows.append({**base, "budget": float(n), "quantity": BOUND_QUANTITIES[place],
                         "scheme": scheme, "predicted": float(bu.mean()),
                         "predicted_asymptotic": math.nan, "measured": mean, "ci_low": low,
                         "ci_high": high, "n_trials": len(x), "ci_reliable": ci_reliable(xu, metrics=[col]),
                         "rate": rate, "gap_db": gap, "gap_low": glow, "gap_high": ghigh,
                         "n_units": len(xu), "paired": False})
    return rows


def nominal_bounds(frame: pd.DataFrame, *, spectra: Mapping[_CaseKey, CaseSpectra] | None = None,
                   n_queries: int = 1) -> pd.DataFrame:
    """The bound SNR at each budget n of each case (n bits per coordinate, no overhead).

    The reference points of the Shannon–φ plane (:func:`kvstats.report.plot_shannon_phi`):
    the highest pooled SNR any code of n bits per coordinate reaches on a Gaussian source
    of the case's covariance; for a real case the mean over its trials of the bound of
    each trial's (layer, head).

    Returns
    -------
    DataFrame
        Columns: case columns, ``place`` ("k", "v"), ``budget``, ``bound_snr_db`` (NaN
        where no bound exists) and ``note`` (how the spectrum was obtained, or why there
        is no bound: heavy tails with ν ≤ 2, a real case without its capture).

    Examples
    --------
    >>> f = pd.DataFrame({"distribution": ["gaussian"], "params": ["-"], "dim": [64],
    ...                   "n_keys": [128], "budget": [3.0], "trial": [0]})
    >>> nominal_bounds(f)[["place", "bound_snr_db"]].round(3).values.tolist()
    [['k', 18.062], ['v', 18.062]]
    """
    n_queries = check_int(n_queries, "n_queries", low=1)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame (a sweep's per-trial frame); received "
                        f"{_describe(frame)}")
    missing = [c for c in (*CASE_COLUMNS, "budget", "trial") if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the column(s) {missing}; required: "
                         f"{[*CASE_COLUMNS, 'budget', 'trial']}")
    rows = []
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        specs = _spectra_for(tuple(case), spectra, n_queries)
        trials = np.unique(grp["trial"].to_numpy(np.int64))
        for place, spec in zip(("k", "v"), specs):
            for n in sorted(grp["budget"].unique()):
                ok = spec is not None and spec.defined
                rows.append({**dict(zip(CASE_COLUMNS, case)), "place": place, "budget": float(n),
                             "bound_snr_db": float(_trial_bounds(spec, float(n), trials).mean())
                             if ok else math.nan,
                             "note": spec.note if spec is not None else
                             "the capture's covariance is not at hand"})
    return pd.DataFrame(rows, columns=[*CASE_COLUMNS, "place", "budget", "bound_snr_db", "note"])
