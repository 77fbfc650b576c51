"""Where the large-sample tests and intervals miss their level (docs/statistics.md).

Prints two tables, measured in a fresh-eyes review on 2026-12-02:

* the size of the equivalence / non-inferiority tests (``tost_rank``, ``tost_ratio``)
  at the margin on sparse binary data with one arm constant (a reference scheme that is
  always perfect, the other missing now and then): their plug-in standard errors are
  Wald-type, small exactly when few "events" were seen, and the tests are liberal;
* the coverage of the nominal 95% cluster bootstrap interval with few clusters of
  unequal size (1-39 observations each, intra-cluster correlation 0.3);
* the coverage of Mann-Whitney's 95% interval for r with unequal spreads, normal
  shifts and ties (``--mw``), with and without the Brunner-Munzel variance inflation
  (``k = 1`` is Newcombe's interval alone, as before 2026-12-02).

Not collected by pytest (the assertions live in test_stats_equivalence.py and
test_stats_cluster.py); run

    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --reps 4000
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --mw --reps 4000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats

from kvstats.stats import cluster_bootstrap_ci, mann_whitney
from kvstats.stats import rank as rank_module
from kvstats.stats.equivalence import tost_rank, tost_ratio


def _band(reps, a):
    lo, hi = stats.binom.ppf(0.005, reps, a) / reps, stats.binom.isf(0.005, reps, a) / reps
    return f"[{lo:.3f}, {hi:.3f}]"


def sparse_sizes(reps, seed):
    """Rejection rate at alpha = 0.05 on the margin, one arm constant."""
    rng = np.random.default_rng(seed)
    print(f"\n### Size at the margin, sparse binary data (alpha = 0.05, band {_band(reps, 0.05)})")
    print("| n | tost_rank x = 0, y ~ Bern(0.2), 'greater' | same, paired | "
          "tost_ratio fieller x = 1, y ~ Bern(1/1.1), 'less' |")
    print("|---|---|---|---|")
    for n in (8, 15, 30, 50, 100, 300):
        rank = paired = ratio = 0
        for _ in range(reps):
            y = (rng.random(n) < 0.2).astype(float)       # theta = 0.4, the lower margin
            rank += tost_rank(np.zeros(n), y, delta=0.1, alternative="greater").pvalue <= 0.05
            paired += tost_rank(np.zeros(n), y, delta=0.1, alternative="greater",
                                paired=True).pvalue <= 0.05
            y = (rng.random(n) < 1 / 1.1).astype(float)   # ratio 1.1, the upper margin
            ratio += tost_ratio(np.ones(n), y, margin=0.1, alternative="less").pvalue <= 0.05
        print(f"| {n} | {rank / reps:.3f} | {paired / reps:.3f} | {ratio / reps:.3f} |", flush=True)


def few_cluster_coverage(reps, seed):
    rng = np.random.default_rng(seed)
    print(f"\n### Cluster bootstrap (BCa, 999 resamples), coverage of 95%, sizes 1-39, ICC 0.3 "
          f"(band {_band(reps, 0.95)})")
    print("| clusters | coverage | sqrt((C - 1)/C) heuristic |")
    print("|---|---|---|")
    for c in (6, 10, 20, 40):
        hits = 0
        for _ in range(reps):
            labels = np.repeat(np.arange(c), rng.integers(1, 40, c))
            x = np.sqrt(0.3) * rng.normal(size=c)[labels] + np.sqrt(0.7) * rng.normal(size=labels.size)
            res = cluster_bootstrap_ci(x, labels, n_resamples=999, seed=int(rng.integers(2**31)))
            hits += res.low <= 0.0 <= res.high
        heuristic = 2 * stats.norm.cdf(1.96 * np.sqrt((c - 1) / c)) - 1
        print(f"| {c} | {hits / reps:.3f} | {heuristic:.3f} |", flush=True)


def mw_interval_coverage(reps, seed):
    """Coverage of the 95% interval for r, as mann_whitney computes it and with k = 1."""
    rng = np.random.default_rng(seed)
    print(f"\n### Mann-Whitney interval for r, coverage of 95% (band {_band(reps, 0.95)})")
    print("| x | y | r | inflated (current) | Newcombe alone (k = 1) |")
    print("|---|---|---|---|---|")
    d = lambda delta: 2 * stats.norm.cdf(delta / np.sqrt(2)) - 1   # noqa: E731
    cases = [("N(0, 0.2²) × 100", lambda: rng.normal(0, 0.2, 100), "N(0, 3²) × 20",
              lambda: rng.normal(0, 3, 20), 0.0),
             ("N(0, 3²) × 20", lambda: rng.normal(0, 3, 20), "N(0, 0.2²) × 100",
              lambda: rng.normal(0, 0.2, 100), 0.0),
             ("N(0, 0.2²) × 40", lambda: rng.normal(0, 0.2, 40), "N(0, 3²) × 40",
              lambda: rng.normal(0, 3, 40), 0.0),
             ("N(0.5, 1) × 20", lambda: rng.normal(0.5, 1, 20), "N(0, 1) × 30",
              lambda: rng.normal(0, 1, 30), d(0.5)),
             ("N(1.5, 1) × 12", lambda: rng.normal(1.5, 1, 12), "N(0, 1) × 12",
              lambda: rng.normal(0, 1, 12), d(1.5)),
             ("N(0, 1) × 40", lambda: rng.normal(0, 1, 40), "N(0, 1) × 40",
              lambda: rng.normal(0, 1, 40), 0.0),
             ("N(0.3, 1) × 200", lambda: rng.normal(0.3, 1, 200), "N(0, 1) × 200",
              lambda: rng.normal(0, 1, 200), d(0.3)),
             ("3 levels (0.2, 0.3, 0.5) × 30", lambda: rng.choice(3, 30, p=[0.2, 0.3, 0.5]),
              "3 levels uniform × 30", lambda: rng.choice(3, 30), 0.2)]
    real_max = rank_module._VAR_INFLATION_MAX
    for name_x, gen_x, name_y, gen_y, r_true in cases:
        hits = [0, 0]
        for _ in range(reps):
            x, y = gen_x(), gen_y()
            for i, cap in enumerate((real_max, 1.0)):
                rank_module._VAR_INFLATION_MAX = cap
                res = mann_whitney(x, y)
                hits[i] += res.rank_biserial_low <= r_true <= res.rank_biserial_high
            rank_module._VAR_INFLATION_MAX = real_max
        print(f"| {name_x} | {name_y} | {r_true:.3f} | {hits[0] / reps:.3f} | "
              f"{hits[1] / reps:.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--mw", action="store_true", help="only the Mann-Whitney interval table")
    args = ap.parse_args()
    start = time.time()
    if args.mw:
        mw_interval_coverage(args.reps, args.seed + 2)
    else:
        sparse_sizes(args.reps, args.seed)
        few_cluster_coverage(max(args.reps // 4, 200), args.seed + 1)
    print(f"\n{args.reps} replicates (cluster table: {max(args.reps // 4, 200)}), "
          f"{time.time() - start:.0f} s, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
