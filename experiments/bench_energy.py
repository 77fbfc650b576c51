"""Benchmark: kvstats.stats.energy_test against dcor.homogeneity.energy_test.

Same data, same number of permutations B, same process, one after the other:

1. 2,000 vs 2,000 points in 6-D, B = 999: wall time of both, speed ratio, peak memory,
   and agreement (the statistic to rounding; the p-values within Monte-Carlo error, since
   the two libraries draw different permutations and dcor counts T_perm > T_obs while
   kvstats counts >=).
2. 20,000 vs 20,000 points in 6-D with kvstats only (dcor would need the full 40,000^2
   distance matrix, 12.8 GB, for every permutation): time and peak memory.

Peak memory is measured with ``tracemalloc`` (numpy reports its buffers to it) in a
separate run from the timing, so tracing does not slow the timed run; the process-wide
peak resident set size (``resource.getrusage``, includes the interpreter and libraries) is
printed too. Usage::

    python experiments/bench_energy.py [--dcor-resamples 999] [--big-resamples 999]
        [--skip-big]

Requires dcor (``pip install dcor``; pyproject extra "bench").
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import resource
import time
import tracemalloc

import numpy as np

from kvstats.stats import energy_test


def peak_traced(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def timed(fn):
    """(result, wall seconds, process CPU seconds summed over threads)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def compare_with_dcor(args, rng, dcor, cores) -> None:
    n, B = args.n, args.resamples
    X = rng.normal(size=(n, 6))
    Y = rng.normal(size=(n, 6))
    Y[:, 0] += 0.06          # a small shift, so that the p-value is neither 0 nor 1

    # warm-up: dcor compiles numba code on first use; kvstats imports scipy.spatial
    dcor.homogeneity.energy_test(X[:50], Y[:50], num_resamples=2, random_state=0)
    energy_test(X[:50], Y[:50], n_resamples=2)

    ours, t_ours, c_ours = timed(lambda: energy_test(X, Y, n_resamples=B, seed=args.seed))
    mem_ours = peak_traced(lambda: energy_test(X, Y, n_resamples=B, seed=args.seed))
    rss_after_ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    Bd = args.dcor_resamples
    ref, t_dcor, c_dcor = timed(lambda: dcor.homogeneity.energy_test(X, Y, num_resamples=Bd,
                                                             random_state=args.seed))
    t_dcor_scaled = t_dcor * B / Bd
    c_dcor_scaled = c_dcor * B / Bd
    mem_dcor = peak_traced(lambda: dcor.homogeneity.energy_test(X, Y, num_resamples=5,
                                                                random_state=args.seed))
    rss_after_dcor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    stat_rel = abs(ours.test_statistic - float(ref.statistic)) / abs(float(ref.statistic))
    p_se = math.sqrt(ours.pvalue * (1 - ours.pvalue) * (1 / B + 1 / Bd))
    print()
    print(f"## {n} vs {n} points, 6-D, B = {B}")
    print()
    print("| implementation | B | wall time (s) | CPU time (s) | peak traced memory (MB) | statistic | p-value |")
    print("|---|---|---|---|---|---|---|")
    print(f"| kvstats.stats.energy_test | {B} | {t_ours:.2f} | {c_ours:.2f} | {mem_ours:.0f} | "
          f"{ours.test_statistic:.6f} | {ours.pvalue:.4f} |")
    scaled = f" (measured {t_dcor:.1f} s at B = {Bd}, scaled to B = {B})" if Bd != B else ""
    print(f"| dcor.homogeneity.energy_test | {Bd} | {t_dcor_scaled:.1f}{scaled} | {c_dcor_scaled:.1f} | "
          f"{mem_dcor:.0f} (B = 5; independent of B) | {float(ref.statistic):.6f} | "
          f"{ref.pvalue:.4f} |")
    print()
    print(f"speed ratio (dcor / kvstats, same B): {t_dcor_scaled / t_ours:.0f}x in wall time, "
          f"{c_dcor_scaled / c_ours:.0f}x in CPU time; load average {os.getloadavg()[0]:.1f} "
          f"on {cores} cores")
    print(f"statistic relative difference: {stat_rel:.1e}; p-value difference "
          f"{abs(ours.pvalue - ref.pvalue):.4f} (Monte-Carlo SE of the difference {p_se:.4f})")
    print(f"process peak RSS after kvstats: {rss_after_ours:.0f} MB, after dcor: "
          f"{rss_after_dcor:.0f} MB (getrusage ru_maxrss; interpreter, libraries and data included)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=999)
    ap.add_argument("--dcor-resamples", type=int, default=999,
                    help="B for dcor; if below --resamples its time is scaled linearly")
    ap.add_argument("--big-n", type=int, default=20000)
    ap.add_argument("--big-resamples", type=int, default=999)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--only-big", action="store_true", help="skip the comparison with dcor")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import dcor

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
          f"{cores} usable cores, numpy {np.__version__}, dcor {dcor.__version__}")

    rng = np.random.default_rng(args.seed)
    if not args.only_big:
        compare_with_dcor(args, rng, dcor, cores)
    if not args.skip_big:
        nb, Bb = args.big_n, args.big_resamples
        Xb = rng.normal(size=(nb, 6))
        Yb = rng.normal(size=(nb, 6))
        big, t_big, c_big = timed(lambda: energy_test(Xb, Yb, n_resamples=Bb, seed=args.seed))
        mem_big = peak_traced(lambda: energy_test(Xb, Yb, n_resamples=Bb, seed=args.seed))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print()
        print(f"## {nb} vs {nb} points, 6-D (full distance matrix would be "
              f"{(2 * nb) ** 2 * 8 / 2**30:.1f} GiB)")
        print()
        print("| implementation | B | wall time (s) | CPU time (s) | peak traced memory (MB) | p-value |")
        print("|---|---|---|---|---|---|")
        print(f"| kvstats.stats.energy_test | {Bb} | {t_big:.1f} | {c_big:.1f} | {mem_big:.0f} "
              f"| {big.pvalue:.4f} |")
        print(f"process peak RSS at the end: {rss:.0f} MB (getrusage)")


if __name__ == "__main__":
    main()
