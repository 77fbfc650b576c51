"""The numbers of docs/results.md's Claim 1 sketch table, QJL section and direction-error note.

Three subcommands (issue #13); each prints markdown tables and the load average:

  ratios DIR...   KL ratio QKQV/KQV per sketch family, rows m, budget n and d from sweeps
                  of experiments/sketch_d128.toml / sketch_d1024.toml (labels
                  "<scheme>_<sketch>_m<rows>"), with a BCa bootstrap 95% interval (999
                  resamples) and the theory's prediction (kvstats.theory.bit_trade_inflation
                  with the family and m) beside it, plus the measured q·k error-variance
                  ratio (column ip_var) that the prediction is about.
  qjl             QJL's claims per sketch family and m in {d, 2d}: unbiasedness (z of the
                  mean error over R independent sketches, per query/key pair, and the
                  chi-square of all pairs' z) and the variance against the closed form
                  (kvstats.theory.qjl_variance) and the Gaussian bound (π/(2m))‖q‖²‖k‖²,
                  on synthetic Gaussian pairs (d = 128) and on real keys/queries of
                  --capture (a few layers, d = 64).
  srht            The SRHT sketch against the orthogonal closed form: mean and variance
                  over (Haar orientation of the pair, sketch) and for the fixed pair, at
                  d = 16, 64, 128 and m = d/2, d, 2d; then the cost of drawing a sketch and
                  of S x at d = m = 1024 per family (docs/qjl.md, "SRHT").
  direction       Candidate definitions of KQV's key direction error (φ, φ², 1 − cos φ,
                  ‖û − u‖²) per budget on Gaussian and Student-t keys at d = 128.

Examples:

  nice -n 10 python experiments/sketch_claims.py ratios results/sketch_d128 results/sketch_d1024
  nice -n 10 python experiments/sketch_claims.py qjl --capture /tmp/base/capture.npz
  nice -n 10 python experiments/sketch_claims.py srht
  nice -n 10 python experiments/sketch_claims.py direction
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from kvstats.analysis.intervals import ratio_ci
from kvstats.quant.qjl import qjl_encode, qjl_scores
from kvstats.quant.rotation import next_pow2
from kvstats.quant.sketch import SKETCHES, make_sketch
from kvstats.theory import bit_trade_inflation, qjl_variance

_LABEL = re.compile(r"^(KQV|QKQV)_([a-z]+)_m(\d+)$")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- ratios
def ratios(dirs: list[str], n_resamples: int) -> pd.DataFrame:
    """One row per (d, sketch, m, n): KL ratio QKQV/KQV with CI, prediction, ip_var ratio."""
    rows = []
    for folder in dirs:
        frame = pd.read_parquet(Path(folder) / "results.parquet")
        parsed = frame["scheme"].str.extract(_LABEL)
        frame = frame.assign(base=parsed[0], sketch=parsed[1], m=parsed[2].astype(float))
        for (d, sketch, m, n), g in frame.groupby(["dim", "sketch", "m", "budget"]):
            kqv = g[g["base"] == "KQV"].sort_values("trial")
            qkqv = g[g["base"] == "QKQV"].sort_values("trial")
            r = ratio_ci(qkqv["kl"].to_numpy(), kqv["kl"].to_numpy(), n_resamples, 0)
            rows.append({"d": int(d), "sketch": sketch, "m": int(m), "n": int(n),
                         "kl_KQV": kqv["kl"].mean(), "kl_QKQV": qkqv["kl"].mean(),
                         "ratio": r["measured"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "trials": r["n_trials"],
                         "ip_var_ratio": qkqv["ip_var"].mean() / kqv["ip_var"].mean(),
                         "predicted": bit_trade_inflation(int(n), next_pow2(int(d)), int(m), sketch)})
    order = {k: i for i, k in enumerate(SKETCHES)}
    out = pd.DataFrame(rows)
    return out.sort_values(["d", "sketch", "m", "n"], key=lambda c: c.map(order) if c.name == "sketch" else c)


def print_ratios(table: pd.DataFrame) -> None:
    print("| d | sketch | m | n | mean KL KQV | mean KL QKQV | QKQV / KQV [95% CI] | "
          "ip_var ratio | predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        print(f"| {r.d} | {r.sketch} | {r.m} | {r.n} | {r.kl_KQV:.3g} | {r.kl_QKQV:.3g} | "
              f"{r.ratio:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] | {r.ip_var_ratio:.2f} | "
              f"{r.predicted:.2f} |")


# --------------------------------------------------------------------------- qjl
def _pair_stats(kind: str, m: int, q: np.ndarray, k: np.ndarray, reps: int, seed: int) -> dict:
    """Mean-error z and variance checks of one pair over ``reps`` independent sketches."""
    d = q.shape[-1]
    s = make_sketch(kind, m, d, seed=seed, draws=reps)
    est = qjl_scores(s, q[None, None], qjl_encode(s, k[None, None], norm_dtype=np.float64))[:, 0, 0]
    truth = float(q @ k)
    sd = est.std(ddof=1)
    c = est - est.mean()
    s2, m4 = float((c ** 2).mean()), float((c ** 4).mean())
    se_var = math.sqrt(max(m4 - s2 ** 2, 0.0) / reps)
    closed = float(qjl_variance(kind, m, q, k))
    bound = math.pi / (2 * m) * float(q @ q) * float(k @ k)
    return {"z_mean": (est.mean() - truth) / (sd / math.sqrt(reps)),
            "rel_bias": (est.mean() - truth) / math.sqrt(float(q @ q) * float(k @ k)),
            "var_over_closed": s2 / closed, "z_var_closed": (s2 - closed) / se_var,
            "var_over_bound": s2 / bound, "z_var_bound": (s2 - bound) / se_var}


def _summarise(per_pair: pd.DataFrame) -> dict:
    z = per_pair["z_mean"].to_numpy()
    chi2 = float((z ** 2).sum())
    return {"pairs": len(z), "max|z_mean|": float(np.abs(z).max()),
            "chi2_p": float(stats.chi2.sf(chi2, len(z))),
            "max|bias|/(‖q‖‖k‖)": float(np.abs(per_pair["rel_bias"]).max()),
            "var/closed mean [min, max]": (per_pair["var_over_closed"].mean(),
                                           per_pair["var_over_closed"].min(),
                                           per_pair["var_over_closed"].max()),
            "max|z_var_closed|": float(np.abs(per_pair["z_var_closed"]).max()),
            "var/bound max": float(per_pair["var_over_bound"].max()),
            "max z_var_bound": float(per_pair["z_var_bound"].max())}


def qjl_claims(capture: str | None, layers: list[int], pairs: int, reps: int, seed: int) -> None:
    sets = {}
    rng = np.random.default_rng(seed)
    d = 128
    sets[f"synthetic Gaussian q, k (d = {d})"] = (rng.standard_normal((pairs, d)),
                                                  rng.standard_normal((pairs, d)))
    if capture:
        from kvstats.data.real import load_trials
        t = load_trials(capture, layer=layers)
        trial = rng.integers(0, t.K.shape[0], pairs)
        token = rng.integers(0, t.K.shape[1], pairs)
        k = np.asarray(t.K[trial, token], np.float64)
        q = np.asarray(t.q[trial, 0], np.float64)
        sets[f"real keys, layers {layers} of {Path(capture).name} (d = {k.shape[-1]})"] = (q, k)
    print(f"QJL claims: {pairs} pairs per set, {reps} independent sketches per pair "
          f"(norms exact, float64); load {_load()}\n")
    print("| keys | sketch | m | max abs z (mean) | chi² p (all pairs) | max abs bias / (‖q‖‖k‖) | "
          "Var / closed form, mean [min, max] | max abs z (closed form) | max Var / bound | "
          "max z (bound) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (q, k) in sets.items():
        dd = q.shape[-1]
        for kind in SKETCHES:
            for m in (dd, 2 * dd):
                per = pd.DataFrame([_pair_stats(kind, m, q[i], k[i], reps, seed + 1000 * i + m)
                                    for i in range(len(q))])
                s = _summarise(per)
                v = s["var/closed mean [min, max]"]
                print(f"| {name} | {kind} | {m} | {s['max|z_mean|']:.2f} | {s['chi2_p']:.3g} | "
                      f"{s['max|bias|/(‖q‖‖k‖)']:.2e} | {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}] | "
                      f"{s['max|z_var_closed|']:.2f} | {s['var/bound max']:.3f} | "
                      f"{s['max z_var_bound']:.1f} |", flush=True)


# --------------------------------------------------------------------------- srht
def srht_check(seed: int) -> None:
    def haar(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
        q, r = np.linalg.qr(rng.standard_normal((n, d, d)))
        return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]

    def est(s, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        sq, sk = s.project(q[:, None])[:, 0], s.project(k[:, None])[:, 0]
        return s.scale * np.linalg.norm(k, axis=-1) * (sq * np.where(sk >= 0, 1.0, -1.0)).sum(-1)

    rng = np.random.default_rng(seed)
    print(f"SRHT vs the orthogonal closed form (one partly aligned Gaussian pair per d); "
          f"load {_load()}\n")
    print("| d | m | R | orientation averaged: z (mean) | Var / closed form | SE | "
          "fixed pair: z (mean) | bias / ⟨q,k⟩ | Var / closed form |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d, reps in ((16, 20000), (64, 4000), (128, 2000)):
        k = rng.standard_normal(d)
        q = rng.standard_normal(d)
        q = q + 0.5 * np.linalg.norm(q) * k / np.linalg.norm(k)
        for m in (d // 2, d, 2 * d):
            s = make_sketch("srht", m, d, seed=rng, draws=reps)
            rot = haar(rng, reps, d)
            closed = float(qjl_variance("srht", m, q, k))
            e_rot = est(s, rot @ q, rot @ k)
            e_fix = est(s, np.broadcast_to(q, (reps, d)), np.broadcast_to(k, (reps, d)))
            z = [(e.mean() - q @ k) / (e.std(ddof=1) / math.sqrt(reps)) for e in (e_rot, e_fix)]
            print(f"| {d} | {m} | {reps} | {z[0]:.2f} | {e_rot.var() / closed:.4f} | "
                  f"{math.sqrt(2 / reps):.3f} | {z[1]:.2f} | {e_fix.mean() / (q @ k) - 1:+.4f} | "
                  f"{e_fix.var() / closed:.4f} |", flush=True)
    d = 1024
    x = rng.standard_normal((256, d)).astype(np.float32)
    print(f"\nCost at d = m = {d}, 256 float32 vectors (median of 5; load {_load()}):\n")
    print("| sketch | draw (s) | x @ matrix.T (s) | project (s) |")
    print("|---|---|---|---|")
    for kind in SKETCHES:
        t = []
        for _ in range(5):
            t0 = time.perf_counter()
            s = make_sketch(kind, d, d, seed=1)
            t1 = time.perf_counter()
            x @ s.matrix.T.astype(np.float32)
            t2 = time.perf_counter()
            s.project(x)
            t.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        med = np.median(np.array(t), axis=0)
        print(f"| {kind} | {med[0]:.4f} | {med[1]:.4f} | {med[2]:.4f} |", flush=True)


# --------------------------------------------------------------------------- direction
def direction(trials: int, n_keys: int, seed: int) -> None:
    from kvstats.data.synthetic import sample
    from kvstats.quant.schemes import make_scheme

    d = 128
    cases = [("gaussian", {}), ("heavy_tailed", {"nu": 3.0}), ("heavy_tailed", {"nu": 1.5}),
             ("heavy_tailed", {"nu": 1.05})]
    print(f"KQV key direction error, d = {d}, {trials} trials × {n_keys} keys, float32 keys, "
          f"float32 norms; means over all keys (median of φ in brackets); load {_load()}\n")
    print("| keys | n | mean φ (rad) [median] | mean φ² | mean 1 − cos φ | mean ‖û − u‖² | "
          "mean sin² φ |")
    print("|---|---|---|---|---|---|---|")
    for dist, params in cases:
        tr = sample(dist, trials, n_keys, d, seed=seed, **params)
        K = np.asarray(tr.K, np.float32)
        for n in range(2, 7):
            sch = make_scheme("KQV", n, d, seed=seed + n, draws=trials, norm_dtype="float32")
            K_hat, _ = sch.roundtrip(K, np.asarray(tr.V, np.float32))
            k64, h64 = K.astype(np.float64), np.asarray(K_hat, np.float64)
            u = k64 / np.linalg.norm(k64, axis=-1, keepdims=True)
            uh = h64 / np.linalg.norm(h64, axis=-1, keepdims=True)
            cos = np.clip((u * uh).sum(-1), -1.0, 1.0)
            phi = np.arccos(cos)
            label = dist if not params else f"Student-t ν = {params['nu']}"
            print(f"| {label} | {n} | {phi.mean():.4f} [{np.median(phi):.4f}] | "
                  f"{(phi ** 2).mean():.4f} | {(1 - cos).mean():.4f} | "
                  f"{((uh - u) ** 2).sum(-1).mean():.4f} | {(1 - cos ** 2).mean():.4f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ratios", help="Claim 1's sketch table from sweep folders")
    a.add_argument("dirs", nargs="+", help="sweep output folders (results.parquet)")
    a.add_argument("--resamples", type=int, default=999, help="bootstrap resamples (default 999)")
    b = sub.add_parser("qjl", help="QJL unbiasedness and variance per sketch family")
    b.add_argument("--capture", default=None, help="capture .npz of real keys (kvstats.load_trials)")
    b.add_argument("--layers", default="0,14,29", help="layers of the capture (default 0,14,29)")
    b.add_argument("--pairs", type=int, default=12, help="query/key pairs per set (default 12)")
    b.add_argument("--reps", type=int, default=2000, help="independent sketches per pair (default 2000)")
    b.add_argument("--seed", type=int, default=13)
    e = sub.add_parser("srht", help="SRHT against the orthogonal closed form; sketch costs")
    e.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("direction", help="candidate definitions of KQV's key direction error")
    c.add_argument("--trials", type=int, default=50)
    c.add_argument("--keys", type=int, default=256)
    c.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    t0 = time.time()
    if args.cmd == "ratios":
        print(f"load {_load()}\n")
        print_ratios(ratios(args.dirs, args.resamples))
    elif args.cmd == "qjl":
        qjl_claims(args.capture, [int(x) for x in args.layers.split(",")], args.pairs, args.reps, args.seed)
    elif args.cmd == "srht":
        srht_check(args.seed)
    else:
        direction(args.trials, args.keys, args.seed)
    print(f"\n{time.time() - t0:.0f} s; load {_load()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
