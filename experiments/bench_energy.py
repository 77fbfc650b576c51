"""Benchmark: kvstats.stats.energy_test against dcor.homogeneity.energy_test.

Same data, same number of permutations B, same process, one after the other:

1. 2,000 vs 2,000 points in 6-D, B = 999: wall time of both, speed ratio, peak memory,
   and agreement, checked (the run stops otherwise): the statistic to a relative 1e-9;
   the p-values within 4 Monte-Carlo SE, since the two libraries draw different
   permutations and dcor counts T_perm > T_obs while kvstats counts >=.
2. 20,000 vs 20,000 points in 6-D with kvstats only (dcor would need the full 40,000^2
   distance matrix, 12.8 GB, for every permutation): time and peak memory.

Peak memory is measured with ``tracemalloc`` (numpy reports its buffers to it) in a
separate run from the timing, so tracing does not slow the timed run; the process-wide
peak resident set size (``resource.getrusage``, includes the interpreter and libraries) is
printed too.

``--paired``: the paired test instead (``energy_test(..., paired=True)``), whose swap
relabellings are evaluated as m x m quadratic forms s'Cs (kvstats/stats/energy.py's
module docstring; drawn, ``method="permutation"``, also at m <= 20 where the default
enumerates), against the pooled-label path it replaced (the same swaps as 2m-long
boolean labels through the 2m x 2m core ``_permutation_statistics``, as the code did
before; ``kvstats.stats._energy_reference.PooledPairs``, the reference the tests use), on
the same data and draws, in the same process, each run once untimed (the first call
imports scipy.spatial), then alternating new/baseline (A B A B ...), as many runs as
about 2 s of the warm calls' time allows (at least ``--repeats``); prints the wall and
CPU times (best and median), their ratios, the peak traced memory of each, and checks
that both give the same p-value. No dcor needed.

``--versus-sequential``: the fixed-B test (``energy_test``) against the sequential test
run to its cap (``energy_test_sequential`` on separated data, so it never stops early) with
the same B: both draw the same relabellings, the fixed test in its cores' chunks, the
sequential one in doubling batches of up to 8,192. One untimed run of each, then
alternating runs (A B A B ...), CPU time best and median, peak traced memory, and a
check that both give the same p-value. Run it with ``PYTHONPATH`` pointing at another
checkout to time that version's code.

Usage::

    python experiments/bench_energy.py [--dcor-resamples 999] [--big-resamples 999]
        [--skip-big]
    python experiments/bench_energy.py --paired [--paired-m 100 1000 3000]
        [--resamples 999] [--repeats 3]
    python experiments/bench_energy.py --versus-sequential [--sizes 100 1000]
        [--resamples 22799] [--repeats 5]

Requires dcor (``pip install dcor``; pyproject extra "bench") except with ``--paired`` and
``--versus-sequential``.
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
from kvstats.stats._energy_reference import PooledPairs


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
    # same outputs, checked in the same run: the statistic to rounding, the p-values within
    # their Monte-Carlo error (different permutations; 4 SE fails by chance with p ~ 6e-5)
    if not stat_rel <= 1e-9:
        raise SystemExit(f"the statistics differ: relative difference {stat_rel:.1e} > 1e-9")
    if abs(ours.pvalue - ref.pvalue) > 4 * p_se + 1e-12:
        raise SystemExit(f"the p-values differ by {abs(ours.pvalue - ref.pvalue):.4f}, "
                         f"more than 4 Monte-Carlo SE ({4 * p_se:.4f})")


def bench_paired(args, cores) -> None:
    B = args.resamples
    load0 = os.getloadavg()
    print()
    print(f"## paired energy test, 6-D pairs, B = {B}, standardize=True: s'Cs (m x m) vs "
          f"pooled 2m labels (2m x 2m), best and median of >= {args.repeats} alternating "
          f"runs (more for small m: about 2 s of timing per size)")
    print()
    print("| m pairs (runs) | s'Cs wall (s) best / median | pooled wall (s) best / median "
          "| wall ratio (best) | CPU ratio (best) | peak traced MB s'Cs / pooled | p-value |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(args.seed)
    for m in args.paired_m:
        shared = rng.normal(size=(m, 6))
        X = shared + 0.3 * rng.normal(size=(m, 6)) + 0.03
        Y = shared + 0.3 * rng.normal(size=(m, 6))

        def new_fn():
            return energy_test(X, Y, n_resamples=B, seed=args.seed, standardize=True,
                               paired=True, method="permutation")   # the drawn swaps

        def old_fn():   # the pooled-label reference the tests compare the fast path with
            return PooledPairs.of(X, Y, kind="V", standardize=True).test(B, args.seed)

        new_fn()                                 # warm-up, untimed: the first call imports
        old_fn()                                 # scipy.spatial lazily (0.6-2.5 s)
        _, w_new, _ = timed(new_fn)              # warm calls size the timing loop
        _, w_old, _ = timed(old_fn)
        repeats = max(args.repeats, min(200, int(2.0 / (w_new + w_old))))
        tn, to = [], []
        for _ in range(repeats):                 # A B A B: load drifts hit both alike
            res, w, c = timed(new_fn)
            tn.append((w, c))
            (p_old, stats_old, _), w, c = timed(old_fn)
            to.append((w, c))
        if res.pvalue != p_old:
            raise SystemExit(f"m = {m}: p-values differ: {res.pvalue} vs {p_old}")
        stat_rel = abs(res.statistic - stats_old[0]) / abs(stats_old[0])
        mem_new, mem_old = peak_traced(new_fn), peak_traced(old_fn)
        (wn, cn), (wo, co) = np.min(tn, axis=0), np.min(to, axis=0)
        mn, mo = np.median(tn, axis=0)[0], np.median(to, axis=0)[0]
        print(f"| {m:,} ({repeats}) | {wn:.4f} / {mn:.4f} | {wo:.4f} / {mo:.4f} | "
              f"**{wo / wn:.2f}x** | {co / cn:.2f}x | {mem_new:.0f} / {mem_old:.0f} | "
              f"{res.pvalue:.4f} both (statistics agree to {stat_rel:.0e}) |")
    load1 = os.getloadavg()
    print()
    print(f"load average before {load0[0]:.2f} (5 min {load0[1]:.2f}), after {load1[0]:.2f} "
          f"(5 min {load1[1]:.2f}) on {cores} usable cores")


def bench_versus_sequential(args, cores) -> None:
    from kvstats.stats.sequential import energy_test_sequential

    B = args.resamples
    load0 = os.getloadavg()
    print()
    print(f"## fixed-B energy_test vs energy_test_sequential at its cap, 6-D, B = {B}, "
          f"standardize=True, separated samples (shift 1 SD), CPU seconds best / median of "
          f"{args.repeats} alternating runs")
    print()
    print("| n vs n | paired | fixed CPU (s) | sequential CPU (s) | fixed / sequential (median) "
          "| peak traced MB fixed / sequential | p-value |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(args.seed)
    for n in args.sizes:
        for paired in (False, True):
            X, Y = rng.normal(size=(n, 6)), rng.normal(1.0, 1.0, size=(n, 6))
            kw = dict(seed=args.seed, standardize=True, paired=paired)

            def fixed():
                return energy_test(X, Y, n_resamples=B, **kw)

            def sequential():
                return energy_test_sequential(X, Y, max_permutations=B, **kw)

            fixed()                               # warm-up, untimed (first-call imports)
            sequential()
            tf, ts = [], []
            for _ in range(args.repeats):         # A B A B: load drifts hit both alike
                res_f, _, c = timed(fixed)
                tf.append(c)
                res_s, _, c = timed(sequential)
                ts.append(c)
            if res_s.stopped_early or res_f.pvalue != res_s.pvalue:
                raise SystemExit(f"n = {n}, paired = {paired}: the sequential test stopped "
                                 f"early or its p-value differs ({res_s.pvalue} vs "
                                 f"{res_f.pvalue})")
            mem_f, mem_s = peak_traced(fixed), peak_traced(sequential)
            print(f"| {n} | {paired} | {min(tf):.4f} / {np.median(tf):.4f} | "
                  f"{min(ts):.4f} / {np.median(ts):.4f} | "
                  f"**{np.median(tf) / np.median(ts):.2f}** | {mem_f:.0f} / {mem_s:.0f} | "
                  f"{res_f.pvalue:.2g} both |")
    load1 = os.getloadavg()
    print()
    print(f"load average before {load0[0]:.2f} (5 min {load0[1]:.2f}), after {load1[0]:.2f} "
          f"(5 min {load1[1]:.2f}) on {cores} usable cores")


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
    ap.add_argument("--paired", action="store_true",
                    help="benchmark the paired test's s'Cs form against the pooled-label path")
    ap.add_argument("--paired-m", type=int, nargs="+", default=[100, 1000, 3000],
                    help="numbers of pairs for --paired")
    ap.add_argument("--repeats", type=int, default=3,
                    help="least number of alternating timed runs for --paired")
    ap.add_argument("--versus-sequential", action="store_true",
                    help="time energy_test against energy_test_sequential run to its cap")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000],
                    help="points per sample for --versus-sequential")
    args = ap.parse_args()

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.versus_sequential:
        print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{cpu_model()}, {cores} usable cores, numpy {np.__version__}, "
              f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
        bench_versus_sequential(args, cores)
        return
    if args.paired:
        print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{cpu_model()}, {cores} usable cores, numpy {np.__version__}, "
              f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
        bench_paired(args, cores)
        return

    if args.only_big:
        dcor = None
    else:
        try:
            import dcor
        except ModuleNotFoundError:
            raise SystemExit("the comparison needs dcor (pip install dcor; pyproject extra "
                             "'bench'); --only-big and --paired run without it") from None

    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
          f"{cores} usable cores, numpy {np.__version__}"
          + (f", dcor {dcor.__version__}" if dcor else ""))

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
