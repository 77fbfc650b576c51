"""Gap of each scheme's key SNR to the Gaussian distortion–rate bound, from a finished sweep.

    .venv/bin/python experiments/deployed_bound.py results/deployed [--compare q4_0@4 KQV@4]
    .venv/bin/python experiments/deployed_bound.py results/deployed_real [--capture results/real/capture.npz]

Reads the sweep's per-trial results (``results.parquet``) and its report's summary
(``tables/summary.csv``: the mean key SNR and its bootstrap interval per case, budget
and scheme), and puts beside each the Shannon bound (:mod:`kvstats.rate_distortion`) at
the scheme's *total* key bits per coordinate (codes, norms, scales, bases: everything
the key side stores). The bound uses the eigenvalues of the case's covariance, known
in closed form from kvstats/data/synthetic.py:

- ``gaussian``: 1 (d times);
- ``low_rank`` (rank r, noise s): d/r + s² (r times), s² (d − r times);
- ``outlier_channels`` (c channels, magnitude m, offset 0): m² (c times), 1 (d − c times).

Other synthetic cases (heavy-tailed, focused) are not Gaussian and are left out: for a
non-Gaussian source of the same covariance the Gaussian bound is not a limit (it can be
beaten).

Real cases (``distribution = "real"``, one per layer of a capture) get the bound of a
Gaussian with the covariance measured per (layer, KV head) on the keys of all captured
texts (:func:`kvstats.data.spectrum.capture_spectra`; signal ``E‖k‖²`` with the mean, a
known mean being free), per trial. Real keys are not Gaussian, so this is a reference,
not a limit: a negative gap means a scheme exploits their shape. Pooled over all real
cases (``tables/real_pooled.csv``): means over every trial with 95% percentile-bootstrap
intervals over the texts (the trials of one text share its tokens across layers and
heads: the text is the unit), and with ``--compare`` the paired differences pooled the
same way, with the number of layers where the first scheme is ahead. The measured SNR is the sweep's ``snr_k``, the mean over keys of per-key SNR in
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

N_BOOT = 4999


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
    """The sweep's params label (``"rank=8"``; ``"-"``: none) as a dict of numbers (a real
    case's ``path='capture.npz@…'`` stays a string)."""
    out = {}
    for part in filter(None, str(label).replace("-", "").split(",") if label == "-" else str(label).split(",")):
        key, value = part.strip().split("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value.strip("'\"")
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


def real_bounds(capture: Path, trials: pd.DataFrame) -> pd.Series:
    """Per row of the real trials: the Gaussian bound (dB) of its (layer, head) at the row's
    key bits. The sweep's trial ``t`` of a one-layer case is (text, head) in C order, as
    :func:`kvstats.data.real.load_trials` orders them."""
    from kvstats.data.spectrum import capture_spectra

    spec, _ = capture_spectra(capture)  # every (text, layer, head), C order
    meta = json.loads(str(np.load(capture, allow_pickle=False)["meta"]))
    n_layers, n_heads = int(meta["n_layers"]), int(meta["n_kv_heads"])
    lam = spec.eigenvalues.reshape(-1, n_layers, n_heads, spec.eigenvalues.shape[-1])[0]
    ms = spec.mean_square.reshape(-1, n_layers, n_heads)[0]
    layer = trials["params"].map(lambda p: int(_params(p)["layer"])).to_numpy()
    head = trials["trial"].to_numpy() % n_heads
    out = np.empty(len(trials))
    for rate in np.unique(trials["key_bits_total"]):
        m = trials["key_bits_total"].to_numpy() == rate
        b = bound_snr_db(lam, float(rate), ms)            # (layers, heads)
        out[m] = b[layer[m], head[m]]
    return pd.Series(out, index=trials.index)


def text_bootstrap(values: np.ndarray, texts: np.ndarray, n_boot: int = N_BOOT,
                   seed: int = 0) -> tuple[float, float, float]:
    """Mean over all trials and a 95% percentile interval resampling texts (clusters)."""
    codes, inv = np.unique(texts, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=len(codes))
    counts = np.bincount(inv, minlength=len(codes)).astype(float)
    w = np.random.default_rng(seed).multinomial(len(codes), np.full(len(codes), 1 / len(codes)), n_boot)
    boot = (w @ sums) / (w @ counts)
    return float(values.mean()), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def real_pooled(real: pd.DataFrame) -> pd.DataFrame:
    """Per (scheme, budget), pooled over every real case: means and text-bootstrap intervals."""
    rows = []
    snr = "snr_k_pooled" if "snr_k_pooled" in real else "snr_k"
    for (scheme, budget), g in real.groupby(["scheme", "budget"], sort=False):
        row = {"scheme": scheme, "budget": budget, "key_bits_total": round(float(g["key_bits_total"].mean()), 4),
               "bits_total": round(float(g["bits_total"].mean()), 4), "n_trials": len(g),
               "n_texts": g["cluster"].nunique(), "n_layers": g["params"].nunique()}
        for name, col in (("snr_k", "snr_k"), ("snr_k_pooled", snr), ("kl", "kl"), ("snr_t", "snr_t"),
                          ("gap_db", "gap_db")):
            v = g[col].to_numpy(float) if col in g else None
            if v is None or not np.isfinite(v).all():
                continue
            row[name], row[f"{name}_low"], row[f"{name}_high"] = text_bootstrap(v, g["cluster"].to_numpy())
        row["bound_db"] = float(g["bound_db"].mean())
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["key_bits_total", "scheme"])


def real_paired(real: pd.DataFrame, a: str, b: str, metric: str) -> dict | None:
    """A − B pooled over every real trial (paired by case and trial), text-bootstrap
    interval, and the layers where A's mean is higher."""
    sides = []
    for spec in (a, b):
        label, budget = spec.split("@")
        g = real[(real["scheme"] == label) & (real["budget"] == float(budget))]
        sides.append(g.set_index(["params", "trial"]))
    if sides[0].empty or sides[1].empty:
        return None
    x, y = sides[0][metric].align(sides[1][metric], join="inner")
    diff = (x - y).to_numpy(float)
    texts = sides[0]["cluster"].reindex(x.index).to_numpy()
    mean, low, high = text_bootstrap(diff, texts)
    per_layer = (x - y).groupby(level="params").mean()
    return {"metric": metric, "a": a, "b": b, "diff": mean, "ci_low": low, "ci_high": high,
            "n_trials": diff.size, "layers_a_higher": int((per_layer > 0).sum()), "n_layers": len(per_layer)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a finished sweep directory (results.parquet, tables/)")
    parser.add_argument("--compare", nargs=2, action="append", metavar=("A@n", "B@n"), default=[],
                        help="also print the paired difference A − B of snr_k and kl per case "
                             "(labels at budgets, e.g. q4_0@4 KQV@4); repeatable")
    parser.add_argument("--capture", type=Path, default=Path("results/real/capture.npz"),
                        help="the capture of the sweep's real cases (for their covariance)")
    args = parser.parse_args()
    trials = pd.read_parquet(args.sweep / "results.parquet")
    real = trials[trials["distribution"] == "real"].copy()
    trials = trials[trials["distribution"] != "real"]
    if not real.empty:
        real["bound_db"] = real_bounds(args.capture, real)
        snr = "snr_k_pooled" if "snr_k_pooled" in real else "snr_k"
        real["gap_db"] = real["bound_db"] - real[snr]
        pooled = real_pooled(real)
        (args.sweep / "tables").mkdir(exist_ok=True)
        pooled.to_csv(args.sweep / "tables" / "real_pooled.csv", index=False)
        print(f"\nreal keys, pooled over {real['params'].nunique()} layers "
              f"(means, 95% intervals over texts; gap = bound − {snr})\n")
        print("| scheme | n | key bits | snr_k dB | pooled snr_k dB | bound dB | gap dB | KL |")
        print("|---|---|---|---|---|---|---|---|")
        for _, r in pooled.iterrows():
            print(f"| {r['scheme']} | {r['budget']:g} | {r['key_bits_total']:.3f} | {r['snr_k']:.2f} "
                  f"({r['snr_k_low']:.2f}, {r['snr_k_high']:.2f}) | {r['snr_k_pooled']:.2f} | "
                  f"{r['bound_db']:.2f} | {r['gap_db']:.2f} ({r['gap_db_low']:.2f}, {r['gap_db_high']:.2f}) | "
                  f"{r['kl']:.3g} ({r['kl_low']:.3g}, {r['kl_high']:.3g}) |")
        for a, b in args.compare:
            for metric in ("snr_k", "snr_t", "kl"):
                r = real_paired(real, a, b, metric)
                if r is not None:
                    print(f"real (pooled): {metric} {a} − {b} = {r['diff']:.4g} ({r['ci_low']:.4g}, "
                          f"{r['ci_high']:.4g}), {r['n_trials']} trials; {a} higher in "
                          f"{r['layers_a_higher']}/{r['n_layers']} layers")
    if trials.empty:
        return
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
