"""Gap of each scheme's key SNR to the Gaussian distortion–rate bound, from a finished sweep.

    .venv/bin/python experiments/deployed_bound.py results/deployed [--compare q4_0@4 KQV@4]

Reads the sweep's per-trial results (``results.parquet``) and its report's summary
(``tables/summary.csv``: the mean key SNR and its bootstrap interval per case, budget
and scheme), and puts beside each the Shannon bound (:mod:`kvstats.rate_distortion`) at
the scheme's *total* key bits per coordinate (codes, norms, scales, bases: everything
the key side stores). The bound uses the eigenvalues of the case's covariance, known
in closed form from kvstats/data/synthetic.py:

- ``gaussian``: 1 (d times);
- ``low_rank`` (rank r, noise s): d/r + s² (r times), s² (d − r times);
- ``outlier_channels`` (c channels, magnitude m, offset 0): m² (c times), 1 (d − c times).

Other cases (heavy-tailed, focused) are not Gaussian and are left out: for a
non-Gaussian source of the same covariance the Gaussian bound is not a limit (it can be
beaten). The measured SNR is the sweep's ``snr_k``, the mean over keys of per-key SNR in
dB; the bound is on the pooled SNR ``E‖k‖²/E‖k − k̂‖²`` (docs/formats.md says how far
apart the two are). Writes ``tables/bound_gap.csv`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from kvstats.data.synthetic import default_params
from kvstats.rate_distortion import bound_snr_db


def eigenvalues(distribution: str, params: dict, d: int) -> np.ndarray | None:
    """The case's covariance eigenvalues, or None for a non-Gaussian case."""
    p = {**default_params(distribution), **params} if distribution in (
        "gaussian", "low_rank", "outlier_channels") else None
    if p is None:
        return None
    s2 = p["scale"] ** 2
    if distribution == "gaussian":
        return np.full(d, s2)
    if distribution == "low_rank":
        r = p["rank"] or min(8, d)
        return s2 * np.r_[np.full(r, d / r + p["noise"] ** 2), np.full(d - r, p["noise"] ** 2)]
    if p["offset"] != 0:
        return None  # a mean: the bound needs it as signal power; not used here
    c = p["n_channels"]
    return s2 * np.r_[np.full(c, p["magnitude"] ** 2), np.ones(d - c)]


def _params(label: str) -> dict:
    """The sweep's params label (``"rank=8"``; ``"-"``: none) as a dict of numbers."""
    out = {}
    for part in filter(None, str(label).replace("-", "").split(",") if label == "-" else str(label).split(",")):
        key, value = part.strip().split("=")
        out[key] = json.loads(value)
    return out


def paired(trials: pd.DataFrame, a: str, b: str, metric: str, n_boot: int = 4999,
           seed: int = 0) -> pd.DataFrame:
    """Per case: mean over trials of metric(a) − metric(b) with a paired percentile
    bootstrap 95% interval (every scheme of a case sees the same trials). ``a``/``b``
    are ``label@budget``."""
    rng = np.random.default_rng(seed)
    out = []
    for (dist, params), g in trials.groupby(["distribution", "params"], dropna=False, sort=False):
        sides = []
        for spec in (a, b):
            label, budget = spec.split("@")
            s = g[(g["scheme"] == label) & (g["budget"] == float(budget))].set_index("trial")[metric]
            sides.append(s)
        if sides[0].empty or sides[1].empty:
            continue
        diff = (sides[0] - sides[1]).dropna().to_numpy()
        boot = diff[rng.integers(0, diff.size, (n_boot, diff.size))].mean(axis=1)
        out.append({"distribution": dist, "params": params, "metric": metric, "a": a, "b": b,
                    "diff": diff.mean(), "ci_low": np.quantile(boot, 0.025),
                    "ci_high": np.quantile(boot, 0.975), "n_trials": diff.size})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a finished sweep directory (results.parquet, tables/)")
    parser.add_argument("--compare", nargs=2, action="append", metavar=("A@n", "B@n"), default=[],
                        help="also print the paired difference A − B of snr_k and kl per case "
                             "(labels at budgets, e.g. q4_0@4 KQV@4); repeatable")
    args = parser.parse_args()
    trials = pd.read_parquet(args.sweep / "results.parquet")
    for a, b in args.compare:
        for metric in ("snr_k", "snr_t", "kl"):
            for _, r in paired(trials, a, b, metric).iterrows():
                print(f"{r['distribution']} {r['params'] or ''}: {metric} {a} − {b} = {r['diff']:.4g} "
                      f"({r['ci_low']:.4g}, {r['ci_high']:.4g}), {r['n_trials']} trials")
    summary = pd.read_csv(args.sweep / "tables" / "summary.csv")
    keys = ["distribution", "params", "dim", "n_keys", "budget", "scheme"]
    bits = trials.groupby(keys, dropna=False)["key_bits_total"].mean().reset_index()
    snr = summary[summary["metric"] == "snr_k"]
    rows = []
    for _, b in bits.iterrows():
        lam = eigenvalues(b["distribution"], _params(b["params"]), int(b["dim"]))
        if lam is None:
            continue
        m = snr[(snr["distribution"] == b["distribution"]) & (snr["params"].fillna("") == (b["params"] or ""))
                & (snr["budget"] == b["budget"]) & (snr["scheme"] == b["scheme"])]
        if m.empty:
            continue
        m = m.iloc[0]
        bound = float(bound_snr_db(lam, float(b["key_bits_total"])))
        rows.append({"distribution": b["distribution"], "params": b["params"], "scheme": b["scheme"],
                     "budget": b["budget"], "key_bits_total": round(float(b["key_bits_total"]), 4),
                     "snr_k": m["mean"], "ci_low": m["ci_low"], "ci_high": m["ci_high"],
                     "bound_db": bound, "gap_db": bound - m["mean"]})
    out = pd.DataFrame(rows).sort_values(["distribution", "key_bits_total", "scheme"])
    out.to_csv(args.sweep / "tables" / "bound_gap.csv", index=False)
    for dist, g in out.groupby("distribution", sort=False):
        print(f"\n{dist} {g['params'].iloc[0] or ''}\n")
        print("| scheme | n | key bits | SNR_k dB (95% CI) | bound dB | gap dB |")
        print("|---|---|---|---|---|---|")
        for _, r in g.iterrows():
            print(f"| {r['scheme']} | {r['budget']:g} | {r['key_bits_total']:.3f} | "
                  f"{r['snr_k']:.2f} ({r['ci_low']:.2f}, {r['ci_high']:.2f}) | {r['bound_db']:.2f} | "
                  f"{r['gap_db']:.2f} |")


if __name__ == "__main__":
    main()
