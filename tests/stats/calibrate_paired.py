"""Calibration tables of the paired tests (docs/statistics.md, "Paired designs").

Prints, for ``wilcoxon_signed_rank`` and ``energy_test(paired=True)``: the size at
alpha = 0.05 and 0.01 under exchangeable pairs (independent, correlated, anti-correlated,
quantized) next to the unpaired test on the same data, the power under a shift, and the
coverage of the rank-biserial interval. Not collected by pytest (the assertions live in
test_stats_signed_rank.py and test_stats_energy_paired.py); run

    nice -n 10 .venv/bin/python tests/stats/calibrate_paired.py --reps 4000
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from scipy import stats

from kvstats.stats import energy_test, mann_whitney, wilcoxon_signed_rank


def _pairs(rng, n, rho, quantize):
    z = rng.normal(size=(n, 2))
    x, y = z[:, 0], rho * z[:, 0] + math.sqrt(1 - rho**2) * z[:, 1]
    return (np.round(2 * x), np.round(2 * y)) if quantize else (x, y)


def _band(reps, a):
    lo, hi = stats.binom.ppf(0.005, reps, a) / reps, stats.binom.isf(0.005, reps, a) / reps
    return f"[{lo:.4f}, {hi:.4f}]"


def signed_rank_size(reps, seed):
    print("\n### Signed rank: size under exchangeable pairs (99% binomial band in brackets)")
    print(f"| design | signed rank p<=0.05 {_band(reps, 0.05)} | p<=0.01 {_band(reps, 0.01)} "
          "| Mann-Whitney p<=0.05 | p<=0.01 |")
    print("|---|---|---|---|---|")
    designs = [("independent, n = 40 (exact)", 40, 0.0, False),
               ("rho = +0.95, n = 200", 200, 0.95, False),
               ("rho = -0.66, n = 200", 200, -0.66, False),
               ("rho = -0.95, n = 50", 50, -0.95, False),
               ("rho = +0.9 rounded to 0.5 (zeros, ties), n = 100", 100, 0.9, True),
               ("rho = +0.5, n = 12 (exact)", 12, 0.5, False)]
    rng = np.random.default_rng(seed)
    for name, n, rho, quantize in designs:
        pw, pm = np.empty(reps), np.empty(reps)
        for i in range(reps):
            x, y = _pairs(rng, n, rho, quantize)
            pw[i] = wilcoxon_signed_rank(x, y).pvalue
            pm[i] = mann_whitney(x, y).pvalue
        print(f"| {name} | {np.mean(pw <= 0.05):.4f} | {np.mean(pw <= 0.01):.4f} | "
              f"{np.mean(pm <= 0.05):.4f} | {np.mean(pm <= 0.01):.4f} |")


def signed_rank_power(reps, seed):
    print("\n### Signed rank: power at alpha = 0.05, one-sided (x = z + e + delta, y = z + e')")
    print("| n | delta | signed rank | paired t | Mann-Whitney |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(seed)
    for n, delta in [(20, 0.25), (60, 0.25), (200, 0.1)]:
        hits = np.zeros(3)
        for _ in range(reps):
            z = rng.normal(0, 2, n)
            x, y = z + rng.normal(delta, 0.5, n), z + rng.normal(0, 0.5, n)
            hits += [wilcoxon_signed_rank(x, y, alternative="greater").pvalue <= 0.05,
                     stats.ttest_rel(x, y, alternative="greater").pvalue <= 0.05,
                     mann_whitney(x, y, alternative="greater").pvalue <= 0.05]
        w, t, m = hits / reps
        print(f"| {n} | {delta} | {w:.3f} | {t:.3f} | {m:.3f} |")


def coverage(reps, seed):
    print(f"\n### Rank-biserial interval: coverage at 95% (99% band {_band(reps, 0.95)})")
    print("| differences D | rho = 2P(D+D'>0)-1 | n = 20 | n = 100 | n = 400 |")
    print("|---|---|---|---|---|")
    designs = [("N(0.5, 1)", lambda r, n: r.normal(0.5, 1, n),
                2 * stats.norm.cdf(0.5 * math.sqrt(2)) - 1),
               ("N(1.2, 1)", lambda r, n: r.normal(1.2, 1, n),
                2 * stats.norm.cdf(1.2 * math.sqrt(2)) - 1),
               ("t_2 + 0.5", lambda r, n: r.standard_t(2, n) + 0.5, 0.3871664095206693),
               ("t_2 + 1.5", lambda r, n: r.standard_t(2, n) + 1.5, 0.7958877974486289),
               ("Exp(1) - 0.5", lambda r, n: r.exponential(1, n) - 0.5, 4 / math.e - 1)]
    rng = np.random.default_rng(seed)
    for name, draw, rho in designs:
        row = []
        for n in (20, 100, 400):
            hits = 0
            for _ in range(reps):
                res = wilcoxon_signed_rank(draw(rng, n), np.zeros(n))
                hits += res.rank_biserial_low <= rho <= res.rank_biserial_high
            row.append(f"{hits / reps:.4f}")
        print(f"| {name} | {rho:.3f} | " + " | ".join(row) + " |")


def energy_paired(reps, seed, m=30, b=99):
    print(f"\n### Energy test, 6D-like (dim 3), m = {m} pairs, B = {b}, standardize=True")
    print(f"| design | paired p<=0.05 {_band(reps, 0.05)} | p<=0.01 {_band(reps, 0.01)} | "
          "unpaired p<=0.05 | p<=0.01 |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(seed)
    for name, sign, shift in [("X = Z + e, Y = Z + e' (null)", 1, 0.0),
                              ("X = Z + e, Y = -Z + e' (null)", -1, 0.0),
                              ("X = Z + e, Y = Z + e' (null), independent Z", 0, 0.0),
                              ("X = Z + e + 0.15, Y = Z + e' (shift)", 1, 0.15),
                              ("X = Z + e + 0.3, Y = -Z + e' (shift)", -1, 0.3)]:
        pp, pu = np.empty(reps), np.empty(reps)
        for i in range(reps):
            z = rng.normal(size=(m, 3))
            x = z + 0.3 * rng.normal(size=(m, 3)) + shift
            zy = rng.normal(size=(m, 3)) if sign == 0 else sign * z
            y = zy + 0.3 * rng.normal(size=(m, 3))
            pp[i] = energy_test(x, y, n_resamples=b, seed=i, standardize=True, paired=True).pvalue
            pu[i] = energy_test(x, y, n_resamples=b, seed=i, standardize=True).pvalue
        print(f"| {name} | {np.mean(pp <= 0.05):.4f} | {np.mean(pp <= 0.01):.4f} | "
              f"{np.mean(pu <= 0.05):.4f} | {np.mean(pu <= 0.01):.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4000, help="null replicates per design")
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    start = time.time()
    print(f"load average at start: {os.getloadavg()}")
    signed_rank_size(args.reps, args.seed)
    signed_rank_power(max(args.reps // 4, 100), args.seed + 1)
    coverage(max(args.reps // 2, 100), args.seed + 2)
    energy_paired(args.reps, args.seed + 3)
    print(f"\n{time.time() - start:.0f} s; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
