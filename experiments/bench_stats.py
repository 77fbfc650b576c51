"""Benchmark: Mann–Whitney p-values from scipy vs the hand-written core they replaced.

``kvstats.stats.power`` tests whole batches of simulated experiments at once. Until
issue #11 that went through a hand-written vectorised core (ranks, tie term, z, normal
p-value; kept verbatim below as ``old_core``); now it is
``scipy.stats.mannwhitneyu(x, y, axis=-1, method="asymptotic")`` (through
``kvstats.stats.rank._mwu_asymptotic``; for tie-free samples with min(n_x, n_y) <= 8 the
power simulation then replaces the p-values by exact ones, as ``mann_whitney``'s default
does). Both run here on the same data in the same process; the script checks that the
U statistics and p-values are identical (bit for bit) and prints the CPU times (one
untimed call of each, then the least of ``--repeats`` turns, old and new alternating)
and their ratio. Also timed: one pair at a time, the way the report calls
``mann_whitney``.

    .venv/bin/python experiments/bench_stats.py                    # 20,000 x (30 vs 30)
    .venv/bin/python experiments/bench_stats.py --batch 5000 --nx 100 --ny 80
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import scipy
from scipy import special, stats

from kvstats.stats import mann_whitney
from kvstats.stats.rank import _mwu_asymptotic


def old_core(x: np.ndarray, y: np.ndarray, alternative: str, continuity: bool = True):
    """kvstats.stats.rank._mwu_core before issue #11 (verbatim): U, tie term, z, p."""
    n1, n2 = x.shape[-1], y.shape[-1]
    lead = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    xy = np.concatenate([np.broadcast_to(x, lead + (n1,)), np.broadcast_to(y, lead + (n2,))],
                        axis=-1)
    ranks = stats.rankdata(xy, method="average", axis=-1)
    u1 = ranks[..., :n1].sum(axis=-1) - n1 * (n1 + 1) / 2
    t_obs = (stats.rankdata(xy, method="max", axis=-1)
             - stats.rankdata(xy, method="min", axis=-1) + 1.0)
    tie_term = (t_obs**2 - 1.0).sum(axis=-1)
    n = n1 + n2
    if alternative == "greater":
        u, factor = u1, 1.0
    elif alternative == "less":
        u, factor = n1 * n2 - u1, 1.0
    else:
        u, factor = np.maximum(u1, n1 * n2 - u1), 2.0
    sd = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    num = u - n1 * n2 / 2 - (0.5 if continuity else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, num / np.where(sd > 0, sd, 1.0), np.where(num > 0, np.inf, -np.inf))
    p = np.clip(special.ndtr(-z) * factor, 0.0, 1.0)
    return u1, tie_term, z, p


def best_times(fns, repeats: int) -> list[float]:
    """Least CPU seconds of each function over ``repeats`` turns (A B A B ...): turns put
    both under the same load of a shared machine, and CPU time moves less with it than
    wall time (one thread: run with OPENBLAS_NUM_THREADS=1). Each runs once untimed first
    (first-call imports and set-up are no turn's)."""
    for fn in fns:
        fn()
    times = np.full((repeats, len(fns)), np.inf)
    for r in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            times[r, i] = time.process_time() - t0
    return times.min(axis=0).tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--nx", type=int, default=30)
    ap.add_argument("--ny", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=500, help="single calls timed")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"numpy {np.__version__}, scipy {scipy.__version__}, {platform.processor() or platform.machine()}")

    rng = np.random.default_rng(args.seed)
    data = {"continuous": (rng.normal(0.3, 1, (args.batch, args.nx)),
                           rng.normal(size=(args.batch, args.ny))),
            "tied (5 levels)": (rng.integers(0, 5, (args.batch, args.nx)).astype(float),
                                rng.integers(0, 5, (args.batch, args.ny)).astype(float))}
    print(f"\nbatch {args.batch:,} x ({args.nx} vs {args.ny}), CPU seconds, least of "
          f"{args.repeats} turns; load average {os.getloadavg()[0]:.1f}")
    print(f"{'data':16s} {'alternative':11s} {'old core (s)':>12s} {'scipy (s)':>10s} "
          f"{'ratio':>6s}  p identical")
    for label, (x, y) in data.items():
        for alternative in ("two-sided", "greater"):
            p_old = old_core(x, y, alternative)[3]
            u_new, p_new = _mwu_asymptotic(x, y, alternative)
            same = np.array_equal(p_old, p_new) and np.array_equal(old_core(x, y, alternative)[0], u_new)
            t_old, t_new = best_times([lambda: old_core(x, y, alternative),
                                       lambda: _mwu_asymptotic(x, y, alternative)], args.repeats)
            print(f"{label:16s} {alternative:11s} {t_old:12.3f} {t_new:10.3f} "
                  f"{t_old / t_new:5.2f}x  {same}")
            if not same:
                raise SystemExit("p-values differ: the refactor changed a number")

    # One pair per call (the report's use): the old path ran the core on one pair.
    x, y = data["continuous"][0][: args.pairs], data["continuous"][1][: args.pairs]
    t_old, t_new, t_full = best_times(
        [lambda: [old_core(a, b, "two-sided") for a, b in zip(x, y)],
         lambda: [_mwu_asymptotic(a, b, "two-sided") for a, b in zip(x, y)],
         lambda: [mann_whitney(a, b) for a, b in zip(x, y)]], args.repeats)
    print(f"\nsingle pairs ({args.nx} vs {args.ny}), per call: old core "
          f"{1e6 * t_old / len(x):.0f} us, scipy {1e6 * t_new / len(x):.0f} us "
          f"(ratio {t_old / t_new:.2f}x); whole mann_whitney {1e6 * t_full / len(x):.0f} us")


if __name__ == "__main__":
    main()
