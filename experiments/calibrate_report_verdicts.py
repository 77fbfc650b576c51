"""End-to-end calibration of the report's verdicts: whole null sweeps, the TOST at its
margin, clustered data by unit, and power (docs/statistics.md, "End-to-end calibration of
the report"). Run

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 nice .venv/bin/python \\
        experiments/calibrate_report_verdicts.py --runs 100 --seed 0 --out results/calibration.json

The null pair is KQV against ``kqvtwin``: KQV under another name, registered through the
public API (:func:`kvstats.define_scheme`, :func:`kvstats.quant.register.registered_scheme`)
with no ``codes_as``, so a sweep holds it beside KQV. A scheme's label is part of its cell
key, so the twin draws its own rotations and sketches on the same trials: the two schemes'
rows are exchangeable and every null of every test holds exactly. Each part counts, over
independent replicates, how often the report's verdicts (the ``significant`` and
``verdict`` columns of :func:`kvstats.analysis.compare_schemes`, which the report prints)
declare something, with exact 95 % Clopper–Pearson intervals:

1. ``null``: ``--runs`` whole sweeps (a new root seed each); the share of runs in which any
   row of the family is significant, for Holm and BH, paired (``pairing="trial"``) and
   unpaired (``pairing="none"``); also each test's raw rejection rate at p ≤ α.
2. ``tost``: trials resampled from a pool of paired KQV / kqvtwin rows, a's KL scaled so the
   pool's ratio of means lies on the margin, 1 + δ or 1 / (1 + δ): the share declared
   "equivalent" (the boundary of the null; at most α if the TOST holds its level).
3. ``clustered``: C clusters of M pool trials, a text effect u_c split ±u/2 between the two
   schemes (intra-cluster correlation ICC of the paired differences, exchangeable cluster
   means); the family-wise error rate with unit = cluster (``aggregate_clusters``) and unit
   = trial (the cluster column dropped, as ``unit="trial"`` does).
4. ``power``: KQV at 3 bits against kqvtwin at 4 (a cross-budget pair): rejections per
   metric and the share of significant rows naming the wrong winner.

``--parts`` picks parts; every setting, the commit, the date and the load go in the JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy
from scipy import stats
from tqdm import tqdm

import kvstats
from kvstats.analysis import aggregate_clusters, compare_schemes
from kvstats.analysis.verdicts import DIFFERENT, DISTRIBUTIONS_DIFFER
from kvstats.quant.register import registered_scheme
from kvstats.quant.registry import scheme_def

TWIN = "kqvtwin"
PAIR = [("KQV", TWIN)]
PARTS = ("null", "tost", "clustered", "power")
#: multiplicative metrics get the cluster effect on the log scale, the SNRs (dB) additively
POSITIVE = ("kl", "phi_k", "phi_v", "phi_t")
ADDITIVE = ("snr_k", "snr_v", "snr_t", "snr_k_pooled", "snr_v_pooled")


def twin_scheme() -> kvstats.quant.SchemeDef:
    """KQV under the name ``kqvtwin``: its build, bits, key theory and rotation flag.

    Returns
    -------
    SchemeDef
        Not registered; register it with ``registered_scheme(twin_scheme())``.

    Examples
    --------
    >>> from kvstats.quant.register import registered_scheme
    >>> import kvstats
    >>> with registered_scheme(twin_scheme()):
    ...     "kqvtwin" in kvstats.quant.scheme_names()
    True
    """
    kqv = scheme_def("KQV")

    def build(bits, dim, params, key_rng, value_rng, draws):
        return kqv.build(bits, dim, kqv.filled(params), key_rng, value_rng, draws)

    def expected_bits(bits, dim, n_tokens, params):
        # the (key, value) pair define_scheme wants; SchemeDef.expected_bits gives the total
        return kqv._bits(bits, dim, n_tokens, kqv.filled(params))

    return kvstats.define_scheme(TWIN, build, expected_bits, summary="KQV under another name",
                                 min_bits=kqv.min_bits, max_bits=kqv.max_bits, randomized=True,
                                 key_theory=kqv.key_theory, key_rotated=True)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> dict[str, Any]:
    """``{"k", "n", "rate", "low", "high"}``: k of n with its exact (Clopper–Pearson) interval.

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 <= k <= n``, ``n >= 1``.
    level : float
        Two-sided confidence level in (0, 1).

    Examples
    --------
    >>> r = clopper_pearson(0, 100)
    >>> r["rate"], round(r["high"], 4)      # 1 - 0.025 ** (1 / 100)
    (0.0, 0.0362)
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be an integer >= 1; received {n!r}")
    if not (isinstance(k, (int, np.integer)) and 0 <= k <= n):
        raise ValueError(f"k must be an integer in 0..n = 0..{n}; received {k!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); received {level!r}")
    ci = stats.binomtest(int(k), int(n)).proportion_ci(level, method="exact")
    return {"k": int(k), "n": int(n), "rate": k / n, "low": float(ci.low), "high": float(ci.high)}


def _sweep(cfg: dict, root: str) -> pd.DataFrame:
    return kvstats.run_sweep(cfg, out=root, executor="serial", progress=False, resume=False).frame


def null_config(seed: int, n_trials: int = 40, dim: int = 16, n_keys: int = 32) -> dict:
    """The null sweep: KQV and kqvtwin at 3 and 4 bits, Gaussian and t(ν = 3) keys.

    Examples
    --------
    >>> null_config(7)["schemes"]
    ['KQV', 'kqvtwin']
    """
    return {"schemes": ["KQV", TWIN], "budgets": [3, 4],
            "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 3.0}}],
            "dims": [dim], "n_keys": [n_keys], "n_trials": n_trials, "seed": int(seed),
            "comparisons": [list(PAIR[0])]}


def null_runs(runs: int, seed: int, *, n_trials: int = 40, alpha: float = 0.05,
              energy_resamples: int = 99, progress: bool = False) -> dict[str, Any]:
    """Whole null sweeps: how often the report's verdicts declare any difference.

    Each run is a fresh sweep of :func:`null_config` (root seed drawn from ``seed``), then
    :func:`~kvstats.analysis.compare_schemes` with the report's defaults for each design
    (``pairing`` "trial" / "none") and correction ("holm" / "fdr_bh"). kqvtwin must be
    registered.

    Returns
    -------
    dict
        ``family`` (tests per design), ``any`` (per design and correction: runs with a
        significant row, with its interval), ``per_test`` (raw p ≤ alpha per test kind),
        ``records`` (one dict per run).

    Examples
    --------
    >>> from kvstats.quant.register import registered_scheme
    >>> with registered_scheme(twin_scheme()):
    ...     out = null_runs(1, 0, n_trials=8)
    >>> out["any"]["trial/holm"]["n"]
    1
    """
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, runs)
    records, family, raw = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in tqdm(range(runs), desc="null runs", disable=not progress, file=sys.stderr):
            frame = _sweep(null_config(seeds[r], n_trials), f"{tmp}/run{r}")
            rec = {"run": r, "sweep_seed": int(seeds[r])}
            for pairing in ("trial", "none"):
                for corr in ("holm", "fdr_bh"):
                    c = compare_schemes(frame, PAIR, alpha=alpha, correction=corr, pairing=pairing,
                                        energy_resamples=energy_resamples, seed=r)
                    sig = c["significant"].astype(bool)
                    key = f"{pairing}/{corr}"
                    family[pairing] = int(c.attrs["n_tests"])
                    rec[key] = {"any": bool(sig.any()), "n_significant": int(sig.sum()),
                                "verdicts_declaring": int(c["verdict"].isin(_DECLARE).sum())}
                    if corr == "holm":        # raw p-values do not depend on the correction
                        for test, p in c.groupby("test")["pvalue"]:
                            p = p.to_numpy(float)
                            k, n = raw.get(f"{pairing}/{test}", (0, 0))
                            raw[f"{pairing}/{test}"] = (k + int((p <= alpha).sum()), n + int(np.isfinite(p).sum()))
            records.append(rec)
    keys = [f"{p}/{c}" for p in ("trial", "none") for c in ("holm", "fdr_bh")]
    return {"config": null_config(-1, n_trials), "seed_note": "config seed = sweep_seed of each record",
            "runs": runs, "alpha": alpha, "energy_resamples": energy_resamples, "family": family,
            "any": {k: clopper_pearson(sum(rec[k]["any"] for rec in records), runs) for k in keys},
            "per_test": {k: clopper_pearson(*v) for k, v in sorted(raw.items()) if v[1]},
            "records": records}


#: the verdicts that declare a difference (compare_schemes' wording of a significant row)
_DECLARE = (DIFFERENT, DISTRIBUTIONS_DIFFER)


def make_pool(n_trials: int, seed: int, root: str) -> pd.DataFrame:
    """Paired KQV / kqvtwin rows at 3 bits (d = 16, N = 32), Gaussian and t(ν = 3) keys.

    Examples
    --------
    >>> import tempfile
    >>> from kvstats.quant.register import registered_scheme
    >>> with registered_scheme(twin_scheme()), tempfile.TemporaryDirectory() as d:
    ...     len(make_pool(5, 0, d))
    20
    """
    cfg = null_config(seed, n_trials)
    cfg["budgets"] = [3]
    return _sweep(cfg, root)


def _pair(pool: pd.DataFrame, dist: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    known = sorted(pool["distribution"].unique())
    if dist not in known:
        raise ValueError(f"distribution must be one of the pool's {known}; received {dist!r}")
    g = pool[pool["distribution"] == dist]
    a = g[g["scheme"] == "KQV"].sort_values("trial").reset_index(drop=True)
    b = g[g["scheme"] == TWIN].sort_values("trial").reset_index(drop=True)
    if not a["trial"].equals(b["trial"]):
        raise ValueError(f"pool: KQV's and {TWIN}'s trials differ at distribution {dist!r}")
    return a, b


def _renumber(a: pd.DataFrame, b: pd.DataFrame, cluster: np.ndarray | None = None) -> pd.DataFrame:
    n = len(a)
    for x in (a, b):
        x["trial"] = np.arange(n)
        x["cluster"] = np.arange(n) if cluster is None else cluster
    return pd.concat([a, b], ignore_index=True)


def tost_at_margin(pool: pd.DataFrame, reps: int, seed: int, cells: list[tuple[str, int, float]],
                   delta: float = 0.2, progress: bool = False) -> list[dict[str, Any]]:
    """Share of resampled pairs declared "equivalent" when the true KL ratio is on the margin.

    For each ``(distribution, n, alpha)`` and side (ratio 1 + δ, 1 / (1 + δ)): n trials
    drawn with replacement from the pool, a's KL scaled by ``base * side`` where ``base`` is
    the pool's own ratio of means (so the resampled population's ratio is exactly on the
    margin); family of ``metrics=["kl"], energy=False`` with ``equivalence={"kl": delta}``.

    Examples
    --------
    >>> import tempfile
    >>> from kvstats.quant.register import registered_scheme
    >>> with registered_scheme(twin_scheme()), tempfile.TemporaryDirectory() as d:
    ...     pool = make_pool(20, 0, d)
    >>> [c["side"] for c in tost_at_margin(pool, 2, 0, [("gaussian", 10, 0.05)])]
    ['1+delta', '1/(1+delta)']
    """
    rng = np.random.default_rng(seed)
    out = []
    bar = tqdm(total=2 * reps * len(cells), desc="TOST at margin", disable=not progress, file=sys.stderr)
    for dist, n, alpha in cells:
        a0, b0 = _pair(pool, dist)
        base = b0["kl"].mean() / a0["kl"].mean()
        for side, k in (("1+delta", 1 + delta), ("1/(1+delta)", 1 / (1 + delta))):
            eq = 0
            for _ in range(reps):
                idx = rng.integers(0, len(a0), n)
                a, b = a0.iloc[idx].copy(), b0.iloc[idx].copy()
                a["kl"] = a["kl"].to_numpy() * base * k
                c = compare_schemes(_renumber(a, b), PAIR, metrics=["kl"], energy=False,
                                    equivalence={"kl": delta}, alpha=alpha)
                eq += bool(c.loc[c["test"] == "equivalence", "verdict"].iloc[0].startswith("equivalent"))
                bar.update()
            out.append({"distribution": dist, "n": n, "alpha": alpha, "delta": delta, "side": side,
                        "true_ratio": k, "equivalent": clopper_pearson(eq, reps)})
    bar.close()
    return out


def clustered(pool: pd.DataFrame, reps: int, seed: int, cells: list[tuple[int, int, float]],
              alpha: float = 0.05, energy_resamples: int = 99, progress: bool = False) -> list[dict[str, Any]]:
    """Family-wise error on clustered null data, unit = cluster against unit = trial.

    For each ``(C, M, icc)``: C·M distinct Gaussian pool pairs, cluster effect
    ``u_c ~ N(0, 1) · sd · sqrt(icc / (1 - icc))`` (sd: the pool's sd of the paired
    difference, on the log scale for KL and the angles), +u/2 to a and −u/2 to b.

    Examples
    --------
    >>> import tempfile
    >>> from kvstats.quant.register import registered_scheme
    >>> with registered_scheme(twin_scheme()), tempfile.TemporaryDirectory() as d:
    ...     pool = make_pool(20, 0, d)
    >>> [r["unit"] for r in clustered(pool, 1, 0, [(4, 3, 0.3)])]
    ['cluster', 'trial']
    """
    rng = np.random.default_rng(seed)
    a0, b0 = _pair(pool, "gaussian")
    pos = [m for m in POSITIVE if m in a0]
    add = [m for m in ADDITIVE if m in a0]
    sd = {m: float(np.std(np.log(a0[m]) - np.log(b0[m]))) for m in pos}
    sd |= {m: float(np.std(a0[m] - b0[m])) for m in add}
    out = []
    bar = tqdm(total=reps * len(cells), desc="clustered", disable=not progress, file=sys.stderr)
    for n_clusters, size, icc in cells:
        if not 0 <= icc < 1:
            raise ValueError(f"cells: icc must lie in [0, 1); received {icc!r}")
        n = n_clusters * size
        if n > len(a0):
            raise ValueError(f"cells: C·M = {n} exceeds the pool's {len(a0)} Gaussian trials")
        scale = np.sqrt(icc / (1 - icc))
        hits = {"cluster": 0, "trial": 0}
        sign = {"cluster": [0, 0], "trial": [0, 0]}
        family, units = {}, {}
        for r in range(reps):
            idx = rng.choice(len(a0), n, replace=False)
            a, b = a0.iloc[idx].copy(), b0.iloc[idx].copy()
            u = np.repeat(rng.standard_normal(n_clusters), size) * scale
            for m in pos:
                a[m] = a[m].to_numpy() * np.exp(sd[m] * u / 2)
                b[m] = b[m].to_numpy() * np.exp(-sd[m] * u / 2)
            for m in add:
                a[m] = a[m].to_numpy() + sd[m] * u / 2
                b[m] = b[m].to_numpy() - sd[m] * u / 2
            f = _renumber(a, b, np.repeat(np.arange(n_clusters), size))
            for unit in ("cluster", "trial"):
                g = aggregate_clusters(f) if unit == "cluster" else f.drop(columns="cluster")
                c = compare_schemes(g, PAIR, alpha=alpha, energy_resamples=energy_resamples, seed=r)
                family[unit] = int(c.attrs["n_tests"])
                units[unit] = int(c["n_a"].max())     # pairs each test saw: clusters or trials
                hits[unit] += bool(c["significant"].astype(bool).any())
                p = c.loc[c["test"] == "sign", "pvalue"].to_numpy(float)
                sign[unit][0] += int((p <= alpha).sum())
                sign[unit][1] += int(np.isfinite(p).sum())
            bar.update()
        for unit in ("cluster", "trial"):
            out.append({"clusters": n_clusters, "per_cluster": size, "icc": icc, "unit": unit,
                        "family": family[unit], "pairs_tested": units[unit], "any": clopper_pearson(hits[unit], reps),
                        "sign_per_test": clopper_pearson(*sign[unit]) if sign[unit][1] else None})
    bar.close()
    return out


def power_runs(runs: int, seed: int, *, n_trials: int = 20, alpha: float = 0.05,
               energy_resamples: int = 99, progress: bool = False) -> dict[str, Any]:
    """KQV at 3 bits against kqvtwin at 4 (kqvtwin registered): rejections per metric.

    Returns
    -------
    dict
        ``any`` (runs with a significant row), ``rows`` (per distribution, metric, test:
        significant runs and wrong-winner rows), ``wrong_winner`` (significant rows naming
        KQV, the worse scheme).

    Examples
    --------
    >>> from kvstats.quant.register import registered_scheme
    >>> with registered_scheme(twin_scheme()):
    ...     out = power_runs(1, 0, n_trials=8)
    >>> out["any"]["n"]
    1
    """
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, runs)
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in tqdm(range(runs), desc="power runs", disable=not progress, file=sys.stderr):
            cfg = null_config(seeds[r], n_trials)
            cfg["schemes"] = [{"name": "KQV", "budgets": [3]}, {"name": TWIN, "budgets": [4]}]
            c = compare_schemes(_sweep(cfg, f"{tmp}/run{r}"), PAIR, alpha=alpha,
                                energy_resamples=energy_resamples, seed=r)
            tables.append(c.assign(run=r)[["run", "distribution", "metric", "test", "significant", "winner"]])
    t = pd.concat(tables, ignore_index=True)
    t["significant"] = t["significant"].astype(bool)
    t["wrong"] = t["significant"] & t["winner"].eq("KQV")
    rows = [{"distribution": d, "metric": m, "test": k, "significant": clopper_pearson(int(g["significant"].sum()), len(g)),
             "wrong_winner": int(g["wrong"].sum())}
            for (d, m, k), g in t.groupby(["distribution", "metric", "test"], sort=True)]
    sig = t[t["significant"]]
    return {"config": {**cfg, "seed": None}, "runs": runs, "n_trials": n_trials, "alpha": alpha,
            "energy_resamples": energy_resamples, "family": len(t) // runs,
            "any": clopper_pearson(int(t.groupby("run")["significant"].any().sum()), runs),
            "wrong_winner": clopper_pearson(int(sig["wrong"].sum()), len(sig)) if len(sig) else None,
            "rows": rows}


def _environment() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    dirty = git("status", "--porcelain", "--", "kvstats")
    return {"date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git("rev-parse", "--short", "HEAD"),
            "kvstats_uncommitted": dirty.splitlines() if dirty else [],
            "load_before": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "pandas": pd.__version__, "argv": sys.argv[1:]}


def calibrate(runs: int = 100, seed: int = 0, *, parts=PARTS, tost_reps: int = 300, cluster_reps: int = 100,
              power_runs_n: int = 20, pool_trials: int = 2000, n_trials: int = 40, alpha: float = 0.05,
              energy_resamples: int = 99, tost_cells=(("gaussian", 200, 0.05), ("heavy_tailed", 60, 0.05)),
              cluster_cells=((20, 10, 0.3), (20, 10, 0.1), (12, 5, 0.3), (20, 10, 0.0)), delta: float = 0.2,
              progress: bool = False) -> dict[str, Any]:
    """Every part asked for, under one registration of kqvtwin; the dict :func:`main` writes.

    Examples
    --------
    >>> out = calibrate(runs=1, parts=("null",), n_trials=8)
    >>> sorted(out)
    ['null', 'settings']
    """
    for name, value in (("runs", runs), ("tost_reps", tost_reps), ("cluster_reps", cluster_reps),
                        ("power_runs_n", power_runs_n), ("pool_trials", pool_trials), ("n_trials", n_trials)):
        if not (isinstance(value, (int, np.integer)) and value >= 1):
            raise ValueError(f"{name} must be an integer >= 1; received {value!r}")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f"parts must be a non-empty subset of {list(PARTS)}; received {list(parts)!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1); received {alpha!r}")
    seeds = dict(zip(PARTS + ("pool",), np.random.SeedSequence(seed).generate_state(len(PARTS) + 1)))
    settings = {"runs": runs, "seed": seed, "parts": list(parts), "tost_reps": tost_reps,
                "cluster_reps": cluster_reps, "power_runs": power_runs_n, "pool_trials": pool_trials,
                "n_trials": n_trials, "alpha": alpha, "energy_resamples": energy_resamples, "delta": delta,
                "tost_cells": [list(c) for c in tost_cells], "cluster_cells": [list(c) for c in cluster_cells],
                "part_seeds": {k: int(v) for k, v in seeds.items()}, **_environment()}
    out: dict[str, Any] = {"settings": settings}
    start = time.perf_counter()
    with warnings.catch_warnings(), registered_scheme(twin_scheme()), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")     # the per-row notes (few pairs, ties) are in the verdicts
        timing = settings["part_elapsed_s"] = {}

        def timed(part, t0):
            timing[part] = round(time.perf_counter() - t0, 1)

        if "null" in parts:
            t0 = time.perf_counter()
            out["null"] = null_runs(runs, int(seeds["null"]), n_trials=n_trials, alpha=alpha,
                                    energy_resamples=energy_resamples, progress=progress)
            timed("null", t0)
        if "tost" in parts or "clustered" in parts:
            t0 = time.perf_counter()
            pool = make_pool(pool_trials, int(seeds["pool"]), f"{tmp}/pool")
            settings["pool"] = {**null_config(int(seeds["pool"]), pool_trials), "budgets": [3]}
            timed("pool", t0)
        if "tost" in parts:
            t0 = time.perf_counter()
            out["tost"] = tost_at_margin(pool, tost_reps, int(seeds["tost"]), [tuple(c) for c in tost_cells],
                                         delta, progress)
            timed("tost", t0)
        if "clustered" in parts:
            t0 = time.perf_counter()
            out["clustered"] = clustered(pool, cluster_reps, int(seeds["clustered"]),
                                         [tuple(c) for c in cluster_cells], alpha, energy_resamples, progress)
            timed("clustered", t0)
        if "power" in parts:
            t0 = time.perf_counter()
            out["power"] = power_runs(power_runs_n, int(seeds["power"]), n_trials=max(2, n_trials // 2),
                                      alpha=alpha, energy_resamples=energy_resamples, progress=progress)
            timed("power", t0)
    settings["elapsed_s"] = round(time.perf_counter() - start, 1)
    settings["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def _cell(r: dict) -> str:
    return f"{r['k']}/{r['n']} = {r['rate']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def format_table(out: dict[str, Any]) -> str:
    """The printed table: one line per measured rate, k/n = rate [95 % Clopper–Pearson].

    Examples
    --------
    >>> print(format_table({"settings": {"alpha": 0.05}, "power": {"n_trials": 20, "family": 24, "runs": 4,
    ...     "any": clopper_pearson(4, 4), "wrong_winner": None, "rows": []}}))  # doctest: +ELLIPSIS
    part ...
    power ... 4/4 = 1.000 [0.398, 1.000]
    """
    lines = [f"{'part':<10} {'setting':<58} k/n = rate [95% Clopper-Pearson]"]

    def add(part, setting, r):
        lines.append(f"{part:<10} {setting:<58} {_cell(r)}")

    if "null" in out:
        nu = out["null"]
        for key, r in nu["any"].items():
            pairing = key.split("/")[0]
            add("null", f"any row significant, pairing={pairing}, {key.split('/')[1]} (family {nu['family'][pairing]})", r)
        for key, r in nu["per_test"].items():
            add("null", f"per test p <= {nu['alpha']}: {key}", r)
    for r in out.get("tost", []):
        add("tost", f"'equivalent', {r['distribution']} n={r['n']} alpha={r['alpha']} ratio {r['side']}",
            r["equivalent"])
    for r in out.get("clustered", []):
        add("clustered", f"FWER {r['clusters']}x{r['per_cluster']} ICC={r['icc']} unit={r['unit']} (family {r['family']})",
            r["any"])
        if r["sign_per_test"]:
            add("clustered", f"  sign per test, unit={r['unit']}", r["sign_per_test"])
    if "power" in out:
        pw = out["power"]
        add("power", f"any row significant, KQV-3 vs twin-4 (family {pw['family']})", pw["any"])
        if pw["wrong_winner"]:
            add("power", "significant rows naming the worse scheme", pw["wrong_winner"])
        for r in pw["rows"]:
            add("power", f"  {r['distribution']} {r['metric']} {r['test']}", r["significant"])
    return "\n".join(lines)


def _cell_arg(types):
    def parse(text):
        parts = text.split(",")
        if len(parts) != len(types):
            raise argparse.ArgumentTypeError(f"expected {len(types)} comma-separated values; received {text!r}")
        try:
            return tuple(t(x) for t, x in zip(types, parts))
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    return parse


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: run :func:`calibrate`, write ``--out`` (JSON), print the table.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     out = main(["--runs", "1", "--parts", "null", "--trials", "8", "--out", os.path.join(d, "c.json")])
    ...     os.path.exists(os.path.join(d, "c.json"))  # doctest: +ELLIPSIS
    part ...
    True
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100, help="null sweeps (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="root seed of every part (default 0)")
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write (default: print only)")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--trials", type=int, default=40, help="trials per cell of a null sweep; power uses half")
    ap.add_argument("--tost-reps", type=int, default=300, help="replicates per TOST cell and side")
    ap.add_argument("--cluster-reps", type=int, default=100, help="replicates per clustered cell")
    ap.add_argument("--power-runs", type=int, default=20, help="power sweeps")
    ap.add_argument("--pool-trials", type=int, default=2000, help="trials per case of the TOST / cluster pool")
    ap.add_argument("--tost-cells", nargs="+", type=_cell_arg((str, int, float)), metavar="DIST,N,ALPHA",
                    default=[("gaussian", 200, 0.05), ("heavy_tailed", 60, 0.05)],
                    help="TOST cells (default gaussian,200,0.05 heavy_tailed,60,0.05)")
    ap.add_argument("--cluster-cells", nargs="+", type=_cell_arg((int, int, float)), metavar="C,M,ICC",
                    default=[(20, 10, 0.3), (20, 10, 0.1), (12, 5, 0.3), (20, 10, 0.0)],
                    help="clustered cells: clusters, trials per cluster, ICC (default 20,10,0.3 "
                         "20,10,0.1 12,5,0.3 20,10,0.0)")
    ap.add_argument("--energy-resamples", type=int, default=99, help="the report's default, 99")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    out = calibrate(args.runs, args.seed, parts=tuple(args.parts), tost_reps=args.tost_reps,
                    cluster_reps=args.cluster_reps, power_runs_n=args.power_runs, pool_trials=args.pool_trials,
                    n_trials=args.trials, energy_resamples=args.energy_resamples, tost_cells=args.tost_cells,
                    cluster_cells=args.cluster_cells, progress=not args.no_progress)
    out["settings"]["command"] = "experiments/calibrate_report_verdicts.py " + " ".join(argv if argv is not None
                                                                                      else sys.argv[1:])
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    print(format_table(out))
    return out


if __name__ == "__main__":
    main()
