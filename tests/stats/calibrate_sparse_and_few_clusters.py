"""Where the large-sample tests and intervals miss their level (docs/statistics.md).

Prints two tables, measured in a fresh-eyes review on 2026-12-02:

* the size of the equivalence / non-inferiority tests (``tost_rank``, ``tost_ratio``)
  at the margin on sparse binary data with one arm constant (a reference scheme that is
  always perfect, the other missing now and then): their plug-in standard errors are
  Wald-type, small exactly when few "events" were seen, and the tests are liberal;
* the coverage of the nominal 95% cluster bootstrap interval with few clusters of
  unequal size (1-39 observations each, intra-cluster correlation 0.3).

Not collected by pytest (the assertions live in test_stats_equivalence.py and
test_stats_cluster.py); run

    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --reps 4000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats

from kvstats.stats import cluster_bootstrap_ci
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args()
    start = time.time()
    sparse_sizes(args.reps, args.seed)
    few_cluster_coverage(max(args.reps // 4, 200), args.seed + 1)
    print(f"\n{args.reps} replicates (cluster table: {max(args.reps // 4, 200)}), "
          f"{time.time() - start:.0f} s, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
