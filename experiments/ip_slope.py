"""The q·k slope (``ip_slope``) per scheme and budget against its closed form.

For each scheme and budget n: T trials of Gaussian keys and queries at dimension d (one
independent draw of the scheme's randomness per trial), the per-trial least-squares
slope through the origin of q·k̂ on q·k (``kvstats.error_profile``'s ``ip_slope``), its
mean over the trials with a 95% t-interval, and the prediction: β = 1 − D(n) for a key
coded by n-bit Lloyd–Max on the rotated unit vector (registry ``key_theory = "mse"``:
turboquant_mse, KQV; D = ``kvstats.theory.unit_vector_mse``, the centroid condition
makes E[q·k̂ | k] = (1 − D) q·k), β = 1 for the unbiased residual estimator
(``key_theory = "prod"``: turboquant_prod, QKQV). ``z`` is (mean − β)/SE.

Prints the command, the runtime and the load average, then one markdown table.

Example (docs/results.md, "QJL's own claims"):

  nice -n 10 python experiments/ip_slope.py --bits 2 3 4 --dim 128 --trials 1000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy import stats

import kvstats
from kvstats.quant.registry import scheme_def
from kvstats.theory import unit_vector_mse

SCHEMES = ("turboquant_mse", "KQV", "turboquant_prod", "QKQV")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def predicted_slope(scheme: str, bits: int, dim: int) -> float:
    """β of E[q·k̂ | k] = β q·k for the scheme's keys: 1 − D(n) (MSE keys), 1 (prod keys)."""
    theory = scheme_def(scheme).key_theory
    if theory == "mse":
        return 1.0 - unit_vector_mse(bits, dim)
    if theory == "prod":
        return 1.0
    raise ValueError(f"scheme must have key_theory 'mse' or 'prod'; received {scheme!r} "
                     f"(key_theory {theory!r})")


def measure(scheme: str, bits: int, dim: int, n_trials: int, n_keys: int, n_queries: int,
            seed: int, rotation: str | None) -> dict[str, float | str | int]:
    t = kvstats.sample("gaussian", n_trials, n_keys, dim, seed=seed, n_queries=n_queries)
    params = {} if rotation is None else {"rotation": rotation}
    s = kvstats.make_scheme(scheme, bits, dim, seed=seed + 1, draws=n_trials, **params)
    K_hat, V_hat = s.dequantize(s.quantize(t.K, t.V))
    x = kvstats.error_profile(t, K_hat, V_hat, k=min(5, n_keys))["ip_slope"].to_numpy()
    mean, se = float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))
    half = float(stats.t.ppf(0.975, x.size - 1)) * se
    beta = predicted_slope(scheme, bits, dim)
    return {"scheme": scheme, "n": bits, "mean": mean, "lo": mean - half, "hi": mean + half,
            "sd": float(x.std(ddof=1)), "beta": beta, "z": (mean - beta) / se}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--schemes", nargs="+", default=list(SCHEMES),
                    help=f"schemes whose keys have key_theory mse or prod (default: {' '.join(SCHEMES)})")
    ap.add_argument("--bits", nargs="+", type=int, default=[2, 3, 4], help="budgets n (default 2 3 4)")
    ap.add_argument("--dim", type=int, default=128, help="head dimension d (default 128)")
    ap.add_argument("--trials", type=int, default=1000, help="trials T per cell (default 1000)")
    ap.add_argument("--keys", type=int, default=256, help="keys N per trial (default 256)")
    ap.add_argument("--queries", type=int, default=1, help="queries n_q per trial (default 1)")
    ap.add_argument("--rotation", choices=["hadamard", "haar"], default=None,
                    help="rotation of every scheme (default: each scheme's own, hadamard)")
    ap.add_argument("--seed", type=int, default=2026, help="base seed (default 2026)")
    args = ap.parse_args(argv)
    for s in args.schemes:
        predicted_slope(s, 2, args.dim)          # refuse a scheme without a prediction first
    t0 = time.perf_counter()
    print("command: python " + " ".join(sys.argv))
    print(f"load average before: {_load()}")
    rows = []
    for i, scheme in enumerate(args.schemes):
        for n in args.bits:
            rows.append(measure(scheme, n, args.dim, args.trials, args.keys, args.queries,
                                seed=args.seed + 1000 * i + 10 * n, rotation=args.rotation))
    print(f"runtime {time.perf_counter() - t0:.1f} s; load average after: {_load()}")
    print(f"\nGaussian keys and queries, d = {args.dim}, T = {args.trials} trials of N = "
          f"{args.keys} keys and n_q = {args.queries} queries, rotation "
          f"{args.rotation or 'hadamard (default)'}\n")
    print("| scheme | n | mean ip_slope [95% CI] | SD per trial | predicted β | z |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scheme']} | {r['n']} | {r['mean']:.5f} [{r['lo']:.5f}, {r['hi']:.5f}] | "
              f"{r['sd']:.4f} | {r['beta']:.5f} | {r['z']:+.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
