"""Where the large-sample tests and intervals miss their level (docs/statistics.md).

Prints two tables, measured in a fresh-eyes review on 2026-12-02:

* the exact size of the equivalence / non-inferiority tests (``tost_rank``, ``tost_ratio``)
  at the margin on sparse binary data with one arm constant (a reference scheme that is
  always perfect, the other missing now and then), with their plug-in (Wald-type) half
  alone (liberal: small exactly when few "events" were seen) and as they are now (a
  margin rejected only where the score-type half rejects too); with ``--equivalence``
  also sizes on continuous and recall-like data and TOST power, plug-in alone vs now;
* the coverage of the nominal 95% cluster bootstrap interval with few clusters of
  unequal size (1-39 observations each, intra-cluster correlation 0.3);
* the coverage of the report's 95% interval of a mean (``mean_ci``: BCa, 999 resamples)
  over few independent units (``--few-units``): the trials of a small sweep;
* the coverage of Mann-Whitney's 95% interval for r with unequal spreads, normal
  shifts and ties (``--mw``), with and without the Brunner-Munzel variance inflation
  (``k = 1`` is Newcombe's interval alone, as before 2026-12-02);
* the same interval with fewer than 10 values in the smaller arm (``--mw-small``), by the
  smallest arm size from which the inflation applies (10 before 2026-12-04, 5 now).

Not collected by pytest (the assertions live in test_stats_equivalence.py and
test_stats_cluster.py); run

    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --reps 4000
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --mw --reps 4000
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --mw-small --reps 10000
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --equivalence --reps 250
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --recall --reps 3000
    nice -n 10 .venv/bin/python tests/stats/calibrate_sparse_and_few_clusters.py --few-units --reps 2000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import optimize, stats

from kvstats.stats import cluster_bootstrap_ci, mann_whitney
from kvstats.stats import rank as rank_module
from kvstats.stats import equivalence
from kvstats.stats.equivalence import tost_rank, tost_ratio


def _band(reps, a):
    lo, hi = stats.binom.ppf(0.005, reps, a) / reps, stats.binom.isf(0.005, reps, a) / reps
    return f"[{lo:.3f}, {hi:.3f}]"


def sparse_sizes(reps, seed):
    """Exact size at alpha = 0.05 on the margin, one arm constant, plug-in alone vs now.

    With x constant the tests depend on y only through k = #{y = 1}: the size is the sum
    over k of the binomial probabilities of the k that reject (no Monte Carlo error).
    """
    print("\n### Exact size at the margin, sparse binary data (alpha = 0.05); plug-in alone / now")
    print("| n | tost_rank x = 0, y ~ Bern(0.2), 'greater' | same, paired | "
          "tost_ratio x = 1, y ~ Bern(1/1.1), 'less' | same, paired | Wilson score z-test, "
          "miss rate 1/11 |")
    print("|---|---|---|---|---|---|")
    for n in (8, 15, 30, 50, 100, 300):
        k = np.arange(n + 1)
        cells = []
        for test, p_event in (("rank", 0.2), ("rank-p", 0.2), ("ratio", 1 / 1.1), ("ratio-p", 1 / 1.1)):
            pair = []
            for flag in (False, True):
                equivalence._NULL_RESTRICTED = flag
                size = 0.0
                for i in k:
                    y = np.zeros(n)
                    y[:i] = 1.0
                    if test.startswith("rank"):
                        p = tost_rank(np.zeros(n), y, delta=0.1, alternative="greater",
                                      paired=test.endswith("-p")).pvalue
                    else:
                        p = 1.0 if i == 0 else tost_ratio(np.ones(n), y, margin=0.1, alternative="less",
                                                          paired=test.endswith("-p")).pvalue
                    size += stats.binom.pmf(i, n, p_event) * (p <= 0.05)
                pair.append(size)
            equivalence._NULL_RESTRICTED = True
            cells.append(f"{pair[0]:.3f} / {pair[1]:.3f}")
        p0 = 1 / 1.1
        wilson = stats.binom.pmf(k, n, p0)[(k / n - p0) / np.sqrt(p0 * (1 - p0) / n)
                                          >= stats.norm.ppf(0.95)].sum()
        print(f"| {n} | " + " | ".join(cells) + f" | {wilson:.3f} |", flush=True)


def _theta_binom(p_x, p_y=0.85, k=20):
    a, b = stats.binom.pmf(np.arange(k + 1), k, p_x), stats.binom.pmf(np.arange(k + 1), k, p_y)
    return float(sum(a[i] * b[:i].sum() for i in range(k + 1)) + 0.5 * (a * b).sum())


def continuous_sizes_and_power(reps, seed):
    """Size on the margin (one-sided, alpha = 0.05) and TOST power, plug-in alone vs now."""
    rng = np.random.default_rng(seed)
    p_rec = optimize.brentq(lambda p: _theta_binom(p) - 0.4, 0.5, 0.85)
    mu_ln = np.sqrt(1.25) * stats.norm.ppf(0.4)
    ratio = lambda x, y: tost_ratio(x, y, margin=0.1, alternative="less").pvalue  # noqa: E731
    rank = lambda x, y: tost_rank(x, y, delta=0.1, alternative="greater").pvalue  # noqa: E731
    tost_r = lambda x, y: tost_ratio(x, y, margin=0.1).pvalue  # noqa: E731
    tost_k = lambda x, y: tost_rank(x, y, delta=0.1).pvalue  # noqa: E731
    cases = [
        ("size", "ratio 1.1, normal N(11, 1) vs N(10, 1)", ratio,
         lambda n: (rng.normal(11, 1, n), rng.normal(10, 1, n))),
        ("size", "ratio 1.1, log-normal 1.1·LN(0, 1) vs LN(0, 1)", ratio,
         lambda n: (1.1 * rng.lognormal(0, 1, n), rng.lognormal(0, 1, n))),
        ("size", "ratio 1.1, recall-like Bin(20, 0.935)/20 vs Bin(20, 0.85)/20", ratio,
         lambda n: (rng.binomial(20, 0.935, n) / 20, rng.binomial(20, 0.85, n) / 20)),
        ("size", "θ 0.4, normal shift", rank,
         lambda n: (rng.normal(np.sqrt(2) * stats.norm.ppf(0.4), 1, n), rng.normal(0, 1, n))),
        ("size", "θ 0.4, log-normal LN(μ, 1) vs LN(0, 0.5)", rank,
         lambda n: (rng.lognormal(mu_ln, 1, n), rng.lognormal(0, 0.5, n))),
        ("size", f"θ 0.4, recall-like Bin(20, {p_rec:.4f})/20 vs Bin(20, 0.85)/20", rank,
         lambda n: (rng.binomial(20, p_rec, n) / 20, rng.binomial(20, 0.85, n) / 20)),
        ("power", "TOST ratio, exponential, ratio 1", tost_r,
         lambda n: (rng.exponential(1, n), rng.exponential(1, n))),
        ("power", "TOST ratio, log-normal σ = 1, ratio 1", tost_r,
         lambda n: (rng.lognormal(0, 1, n), rng.lognormal(0, 1, n))),
        ("power", "TOST rank, normal, θ 0.5", tost_k,
         lambda n: (rng.normal(0, 1, n), rng.normal(0, 1, n))),
    ]
    print(f"\n### Continuous and recall-like data, unpaired, alpha = 0.05 (size band "
          f"{_band(reps, 0.05)}); rejection rate plug-in alone / now")
    print("| what | data | n = 30 | n = 100 |")
    print("|---|---|---|---|")
    for kind, name, test, gen in cases:
        cells = []
        for n in (30, 100):
            data = [gen(n) for _ in range(reps)]
            pair = []
            for flag in (False, True):
                equivalence._NULL_RESTRICTED = flag
                pair.append(np.mean([test(x, y) <= 0.05 for x, y in data]))
            equivalence._NULL_RESTRICTED = True
            cells.append(f"{pair[0]:.3f} / {pair[1]:.3f}")
        print(f"| {kind} | {name} | " + " | ".join(cells) + " |", flush=True)


def recall_ratio_sizes(reps, seed):
    """The recall-like ratio case alone, one-sided p-values only (fast: no intervals)."""
    rng = np.random.default_rng(seed)
    print(f"\n### Ratio 1.1 'less', Bin(20, 0.935)/20 vs Bin(20, 0.85)/20, unpaired, "
          f"{reps} replicates (band {_band(reps, 0.05)}); plug-in alone / now")
    for n in (30, 100):
        data = [(rng.binomial(20, 0.935, n) / 20, rng.binomial(20, 0.85, n) / 20)
                for _ in range(reps)]
        pair = []
        for flag in (False, True):
            equivalence._NULL_RESTRICTED = flag
            pair.append(np.mean([equivalence._FiellerT(x, y, False).p_composite(1.1, upper=True)
                                 <= 0.05 for x, y in data]))
        equivalence._NULL_RESTRICTED = True
        print(f"| n = {n} | {pair[0]:.3f} / {pair[1]:.3f} |", flush=True)


def ratio_power(reps, seed):
    """TOST power of the Fieller test at ratio 1 (margin ±10%), n = 1000, p-values only."""
    rng = np.random.default_rng(seed)
    print(f"\n### TOST power at ratio 1, margin 0.1, n = 1000 each, {reps} replicates; "
          "plug-in alone / now")
    for name, gen in (("exponential", lambda: rng.exponential(1, 1000)),
                      ("log-normal σ = 1", lambda: rng.lognormal(0, 1, 1000))):
        data = [(gen(), gen()) for _ in range(reps)]
        pair = []
        for flag in (False, True):
            equivalence._NULL_RESTRICTED = flag
            rej = 0
            for x, y in data:
                ft = equivalence._FiellerT(x, y, False)
                rej += max(ft.p_composite(1.1, upper=True), ft.p_composite(1 / 1.1, upper=False)) <= 0.05
            pair.append(rej / reps)
        equivalence._NULL_RESTRICTED = True
        print(f"| {name} | {pair[0]:.3f} / {pair[1]:.3f} |", flush=True)


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


def few_unit_coverage(reps, seed):
    """Coverage of the summary's BCa interval of a mean over n independent units."""
    from kvstats.analysis.intervals import mean_ci
    rng = np.random.default_rng(seed)
    print(f"\n### Mean, BCa (999 resamples), coverage of 95% over n independent units "
          f"(band {_band(reps, 0.95)})")
    print("| n | N(0, 1) | Exp(1) | P(abs(t_(n-1)) < 1.96 sqrt((n-1)/n)) |")
    print("|---|---|---|---|")
    for n in (5, 8, 12, 20, 40):
        hits = []
        for gen, mean in ((lambda: rng.normal(0, 1, n), 0.0), (lambda: rng.exponential(1, n), 1.0)):
            covered = 0
            for _ in range(reps):
                _, low, high = mean_ci(gen(), 0.95, 999, int(rng.integers(2**31)))
                covered += low <= mean <= high
            hits.append(covered / reps)
        heuristic = 1 - 2 * stats.t.sf(1.96 * np.sqrt((n - 1) / n), n - 1)
        print(f"| {n} | {hits[0]:.3f} | {hits[1]:.3f} | {heuristic:.3f} |", flush=True)


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


def mw_small_arm_coverage(reps, seed, cuts=(10, 6, 5, 4)):
    """Coverage (mean width) of the 95% interval for r with a small arm, by the arm size
    from which the Brunner-Munzel factor k applies (below it k = 1).

    k >= 1 only widens, so each replicate needs two intervals: k = 1 and the data's k
    (:func:`kvstats.stats.rank._variance_inflation` with no size cut). The first 20
    replicates of each case are checked against ``mann_whitney`` at the current cut.
    """
    from scipy import special

    rng = np.random.default_rng(seed)
    z = float(special.ndtri(0.975))

    def normal(n1, m1, s1, n2, m2, s2):
        name = lambda n, m, s: f"N({m:g}, {s:g}²) × {n}"      # noqa: E731
        return (name(n1, m1, s1), name(n2, m2, s2), stats.norm.cdf((m1 - m2) / np.hypot(s1, s2)),
                lambda: (rng.normal(m1, s1, n1), rng.normal(m2, s2, n2)))

    def binary(n1, p1, n2, p2):
        theta = p1 * (1 - p2) + 0.5 * (p1 * p2 + (1 - p1) * (1 - p2))
        return (f"Bern({p1:g}) × {n1}", f"Bern({p2:g}) × {n2}", theta,
                lambda: ((rng.random(n1) < p1).astype(float), (rng.random(n2) < p2).astype(float)))

    cases = [normal(100, 0, 0.2, 9, 0, 3), normal(9, 0, 3, 100, 0, 0.2), normal(9, 0, 0.2, 9, 0, 3),
             normal(100, 0, 1, 9, 0, 2), normal(100, 0, 0.2, 7, 0, 3), normal(6, 0, 3, 40, 0, 0.2),
             normal(6, 0, 0.2, 40, 0, 3), normal(100, 0, 1, 6, 0, 2), normal(100, 0, 0.2, 5, 0, 3),
             normal(5, 0, 3, 100, 0, 0.2), normal(5, 0, 0.2, 5, 0, 3), normal(100, 0, 1, 5, 0, 2),
             normal(100, 0, 0.2, 4, 0, 3), normal(9, 0, 1, 9, 0, 1), normal(6, 1, 1, 6, 0, 1),
             normal(5, 1, 1, 5, 0, 1), normal(5, 0, 1, 100, 0, 1), normal(4, 0, 1, 4, 0, 1),
             binary(9, 0.2, 9, 0.6), binary(100, 0.1, 9, 0.5), binary(5, 0.3, 5, 0.7)]
    print(f"\n### Mann-Whitney interval for r, small arm: coverage of 95% (mean width of r's "
          f"interval) by the arm size from which k applies (band {_band(reps, 0.95)})")
    print("| x | y | r | " + " | ".join(f"from {c}" for c in cuts) + " |")
    print("|---|---|---|" + "---|" * len(cuts))
    real_cut = rank_module._VAR_INFLATION_MIN_N
    for name_x, name_y, theta, draw in cases:
        thetas, ks = np.empty(reps), np.empty(reps)
        for i in range(reps):
            x, y = draw()
            thetas[i] = stats.mannwhitneyu(x, y, method="asymptotic").statistic / (x.size * y.size)
            rank_module._VAR_INFLATION_MIN_N = 2
            try:
                ks[i] = rank_module._variance_inflation(x, y, thetas[i])
            finally:
                rank_module._VAR_INFLATION_MIN_N = real_cut
            if i < 20:
                k = ks[i] if min(x.size, y.size) >= real_cut else 1.0
                lo, hi = rank_module._newcombe_theta_interval(thetas[i:i + 1], x.size, y.size, z, k)
                res = mann_whitney(x, y)
                assert abs(res.rank_biserial_low - (2 * lo[0] - 1)) < 1e-12
                assert abs(res.rank_biserial_high - (2 * hi[0] - 1)) < 1e-12
        n_min = min(x.size, y.size)
        plain = rank_module._newcombe_theta_interval(thetas, x.size, y.size, z, np.ones(reps))
        raised = rank_module._newcombe_theta_interval(thetas, x.size, y.size, z, ks)
        cells = []
        for cut in cuts:
            lo, hi = raised if n_min >= cut else plain
            cells.append(f"{np.mean((lo <= theta) & (theta <= hi)):.3f} ({2 * np.mean(hi - lo):.2f})")
        print(f"| {name_x} | {name_y} | {2 * theta - 1:.3f} | " + " | ".join(cells) + " |",
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--mw", action="store_true", help="only the Mann-Whitney interval table")
    ap.add_argument("--mw-small", action="store_true",
                    help="only the Mann-Whitney interval with fewer than 10 values in an arm")
    ap.add_argument("--equivalence", action="store_true",
                    help="only the equivalence tables (exact sparse sizes; continuous sizes, power)")
    ap.add_argument("--few-units", action="store_true",
                    help="only the coverage of a mean's interval over few independent units")
    ap.add_argument("--recall", action="store_true",
                    help="only the recall-like ratio sizes and the ratio TOST power at n = 1000 "
                         "(p-values only, fast)")
    args = ap.parse_args()
    start = time.time()
    if args.mw:
        mw_interval_coverage(args.reps, args.seed + 2)
    elif args.mw_small:
        mw_small_arm_coverage(args.reps, args.seed + 7)
    elif args.few_units:
        few_unit_coverage(args.reps, args.seed + 6)
    elif args.recall:
        recall_ratio_sizes(args.reps, args.seed + 4)
        ratio_power(max(args.reps // 10, 100), args.seed + 5)
    elif args.equivalence:
        sparse_sizes(args.reps, args.seed)
        continuous_sizes_and_power(args.reps, args.seed + 3)
    else:
        sparse_sizes(args.reps, args.seed)
        few_cluster_coverage(max(args.reps // 4, 200), args.seed + 1)
    print(f"\n{args.reps} replicates (cluster table: {max(args.reps // 4, 200)}), "
          f"{time.time() - start:.0f} s, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
