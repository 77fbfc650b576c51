"""Benchmark: sequential (Besag–Clifford) energy test vs the fixed-B test of the same resolution.

For a family of m tests under Holm at alpha = 0.05 (m = 1,140: the quick report), both
tests can reach p = 1/(1 + B) with B = required_resolution(m).n_permutations. For null
pairs and for separated pairs (6-D, n vs n points, standardized as in the report) it
prints the mean permutations used and the mean time per test of each, and their ratios;
then (``--power``) the power curve of the sequential test at the family's first-step
level alpha/m, N(0, I6) vs N(delta, I6). Usage::

    python experiments/bench_sequential.py [--n 100] [--family 1140] [--reps 20]
        [--power] [--power-n 30] [--power-reps 200]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np

from kvstats.stats import energy_test
from kvstats.stats.sequential import (energy_test_sequential, expected_null_permutations,
                                      required_resolution)


def compare(kind: str, n: int, reps: int, b_max: int, need: float, seed: int):
    """Mean (permutations, CPU seconds, p) over ``reps`` pairs for both tests.

    CPU seconds of the process (on a shared machine wall seconds move with the other jobs);
    both tests run once untimed first (imports, first-call set-up), and they take turns
    per pair, the sequential test first on even pairs and second on odd ones, so neither
    always follows the other."""
    rng = np.random.default_rng(seed)
    shift = 0.0 if kind == "null" else 1.0
    seq = np.zeros((reps, 3))
    fix = np.zeros((reps, 3))
    warm = np.random.default_rng([seed, 1]).normal(size=(2, n, 6))  # warm-up: not rng's draws
    energy_test_sequential(*warm, alpha_needed=need, seed=0, standardize=True)
    energy_test(*warm, n_resamples=99, seed=0, standardize=True)
    for i in range(reps):
        X, Y = rng.normal(size=(n, 6)), rng.normal(shift, 1, (n, 6))
        runs = {"seq": lambda: energy_test_sequential(X, Y, alpha_needed=need, seed=i,
                                                      standardize=True),
                "fix": lambda: energy_test(X, Y, n_resamples=b_max, seed=i, standardize=True)}
        took = {}
        for name in (("seq", "fix") if i % 2 == 0 else ("fix", "seq")):
            t0 = time.process_time()
            out = runs[name]()
            took[name] = (out, time.process_time() - t0)
        (r, t_seq), (f, t_fix) = took["seq"], took["fix"]
        seq[i] = r.n_permutations, t_seq, r.pvalue
        fix[i] = b_max, t_fix, f.pvalue
    return seq.mean(0), fix.mean(0), seq[:, 2], fix[:, 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="points per sample (report: 100 trials)")
    ap.add_argument("--family", type=int, default=1140, help="family size m")
    ap.add_argument("--reps", type=int, default=20, help="pairs per kind")
    ap.add_argument("--power", action="store_true", help="also print the power curve")
    ap.add_argument("--power-n", type=int, default=30)
    ap.add_argument("--power-reps", type=int, default=200)
    args = ap.parse_args()

    res = required_resolution(args.family)
    b_max, need = res.n_permutations, res.p_needed
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}  "
          f"{platform.processor() or platform.machine()}  cores={os.cpu_count()}  "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '-')}")
    print(f"family m = {args.family}, Holm alpha = 0.05: p_needed = {need:.4g}, B = {b_max}; "
          f"h = 10; 6-D, {args.n} vs {args.n}, standardized; {args.reps} pairs per kind")
    print(f"theory, continuous null: E[permutations] = {expected_null_permutations(10, b_max):.1f}")
    print(f"{'pair':10s} {'seq perms':>10s} {'fixed perms':>11s} {'perm ratio':>10s} "
          f"{'seq s':>8s} {'fixed s':>8s} {'time ratio':>10s}  seq p at min / fixed p at min "
          f"(CPU seconds, mean per test)")
    for seed, kind in enumerate(("null", "separated")):
        s, f, sp, fp = compare(kind, args.n, args.reps, b_max, need, seed)
        print(f"{kind:10s} {s[0]:10.1f} {f[0]:11.0f} {f[0] / s[0]:10.1f} {s[1]:8.4f} {f[1]:8.4f} "
              f"{f[1] / s[1]:10.1f}  {np.mean(sp <= need):.2f} / {np.mean(fp <= need):.2f}")

    print(f"load average {os.getloadavg()[0]:.1f} at the end")

    if args.power:
        print(f"\npower at p <= {need:.4g} (Holm first step, m = {args.family}), "
              f"N(0, I6) vs N(delta, I6), {args.power_n} vs {args.power_n}, "
              f"{args.power_reps} pairs per delta (sequential test)")
        rng = np.random.default_rng(100)
        for delta in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5):
            t0 = time.perf_counter()
            ps = np.array([energy_test_sequential(rng.normal(size=(args.power_n, 6)),
                                                  rng.normal(delta, 1, (args.power_n, 6)),
                                                  alpha_needed=need, seed=rng).pvalue
                           for _ in range(args.power_reps)])
            rate = np.mean(ps <= need)
            se = np.sqrt(rate * (1 - rate) / ps.size)
            print(f"delta = {delta:4.2f}: power {rate:.3f} ± {se:.3f}   "
                  f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
