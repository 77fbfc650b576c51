"""Size and power of tost_ratio's difference test (``pvalue_difference``, method "fieller")
next to the plain Welch / paired t-test it bounds from above (docs/statistics.md, "Ratio
of means"). Run

    nice .venv/bin/python experiments/calibrate_ratio_difference.py --reps 40000 --agree 1500

``shipped`` is the p-value tost_ratio reports: twice the smaller one-sided p-value at
ratio 1, each the larger of the plug-in (Welch / paired t) and the score-type one
(``_FiellerT.p_difference``, the code tost_ratio runs); ``plain`` is
``scipy.stats.ttest_ind(equal_var=False)`` / ``ttest_rel`` (the same t and df, computed
here from ``_FiellerT.t_df(1)`` for whole batches). Size at ratio 1, power at ratio 1.25
(x scaled), rejection rates at α = 0.05, 0.01, 0.001. ``--agree N``: on N random inputs
(random normal, skewed and sparse inputs, paired and not), how often "p <= 2α" disagrees with "1
outside tost_ratio's (1 − 2α) interval", for either p-value. ``warned``: the share of
paired samples on which tost_ratio emits SkewedPairsWarning (sd of log(x_i/y_i) >=
SKEWED_PAIRS_LOG_SD; the liberal rows, noise σ 1, should be warned, the others not).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy import stats

from kvstats.stats._equivalence_ratio import (SKEWED_PAIRS_LOG_SD, _FiellerT, _no_spread,
                                              tost_ratio)

ALPHAS = (0.05, 0.01, 0.001)


def pvalues(x, y, paired):
    """(shipped, plain) two-sided p-values of ratio = 1 for every row of x, y."""
    ft = _FiellerT(x, y, paired)
    t, df = ft.t_df(1.0)
    plain = np.minimum(1.0, 2 * np.minimum(stats.t.cdf(t, df), stats.t.sf(t, df)))
    none = _no_spread(ft)          # tost_ratio reports p = 1 there ("degenerate")
    return np.where(none, 1.0, ft.p_difference()), np.where(none, 1.0, plain)


def designs(rng, reps, ratio):
    """(label, paired, x, y) with mean(x)/mean(y) = ratio; log-normals of mean 1."""
    def ln(s, n):
        return rng.lognormal(-s * s / 2, s, (reps, n))

    def normal(n):
        return rng.normal(1.0, 0.3, (reps, n)).clip(0)

    for n in (10, 30, 100):
        yield f"unpaired normal(1, 0.3) n={n}", False, ratio * normal(n), normal(n)
        yield f"unpaired exponential n={n}", False, ratio * rng.exponential(1, (reps, n)), \
            rng.exponential(1, (reps, n))
        yield f"unpaired log-normal σ 1 n={n}", False, ratio * ln(1, n), ln(1, n)
        c = rng.normal(size=(reps, n))
        yield (f"paired normal ρ 0.5 n={n}", True,
               ratio * (1 + 0.2 * c + 0.2 * rng.normal(size=(reps, n))).clip(0),
               (1 + 0.2 * c + 0.2 * rng.normal(size=(reps, n))).clip(0))
        for noise in (0.5, 1.0):
            y = ln(1, n)
            yield f"paired LN σ 1 × noise σ {noise} n={n}", True, ratio * y * ln(noise, n), y
    if ratio == 1:
        big = min(reps, 8000)      # bounded memory: the score fit holds several (reps, n) arrays
        y = rng.lognormal(-0.5, 1, (big, 1000))
        yield "paired LN σ 1 × noise σ 1 n=1000", True, y * rng.lognormal(-0.5, 1, (big, 1000)), y
        u, b = rng.random((reps, 100)), rng.binomial(1, 0.9, (reps, 100)) + 0.0
        yield ("paired binary, 4% discordant n=100", True,
               np.where(u < 0.02, 1 - b, b), np.where((u >= 0.02) & (u < 0.04), 1 - b, b))
        yield ("unpaired Bernoulli(0.05) n=100", False,
               rng.binomial(1, 0.05, (reps, 100)) + 0.0, rng.binomial(1, 0.05, (reps, 100)) + 0.0)


def warned(x, y):
    """Share of rows tost_ratio(paired=True) warns on (SkewedPairsWarning), vectorised."""
    keep = (x > 0) & (y > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.where(keep, np.log(x) - np.log(y), np.nan)
        s = np.nanstd(lr, axis=-1, ddof=1)
    return float(np.mean((keep.sum(-1) >= 3) & (s >= SKEWED_PAIRS_LOG_SD)))


def table(rng, reps, ratio):
    print(f"\nratio {ratio}, {reps} samples per row: rejection rate shipped / plain")
    print(f"{'design':40s} " + " ".join(f"{'α = ' + str(a):>15s}" for a in ALPHAS))
    for label, paired, x, y in designs(rng, reps, ratio):
        keep = (x.mean(-1) > 0) & (y.mean(-1) > 0)
        shipped, plain = pvalues(x[keep], y[keep], paired)
        cells = [f"{np.mean(shipped <= a):.4f}/{np.mean(plain <= a):.4f}" for a in ALPHAS]
        label += "" if keep.sum() == reps else f" ({keep.sum()})"
        if paired:
            cells.append(f"warned {warned(x[keep], y[keep]):.3f}")
        print(f"{label:40s} " + " ".join(f"{c:>15s}" for c in cells), flush=True)


def agreement(rng, n_inputs):
    bad, total = {"shipped": 0, "plain": 0}, 0
    for i in range(n_inputs):
        n, paired, kind = int(rng.integers(3, 60)), bool(i % 2), i % 6
        if kind == 0:
            x, y = rng.exponential(1, n), rng.exponential(1, n)
        elif kind == 1:
            x, y = rng.binomial(1, 0.9, n) + 0.0, rng.binomial(1, 0.85, n) + 0.0
        elif kind == 2:
            y = rng.lognormal(0, 1, n)
            x = y * rng.lognormal(0.1, 0.3, n)
        elif kind == 3:
            x, y = rng.integers(0, 3, n) + 0.0, rng.integers(0, 3, n) + 0.0
        elif kind == 4:
            y = rng.lognormal(0, 1, n)
            x = y * rng.lognormal(-0.3, 1, n)
        else:
            y = rng.exponential(1, n)
            x = y.copy()
            x[: int(rng.integers(0, 3))] *= 1.5
        if x.mean() <= 0 or y.mean() <= 0:
            continue
        for a in (0.05, 0.01):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = tost_ratio(x, y, margin=0.2, alpha=a, paired=paired)
            if r.method == "degenerate":
                continue
            total += 1
            plain = (stats.ttest_rel(x, y) if paired else stats.ttest_ind(x, y, equal_var=False)).pvalue
            outside = r.low > 1 or r.high < 1
            bad["shipped"] += (r.pvalue_difference <= 2 * a) != outside
            bad["plain"] += (plain <= 2 * a) != outside
    print(f"\n'p <= 2α' vs '1 outside the (1 − 2α) interval', {total} inputs: disagreements "
          f"shipped {bad['shipped']}, plain {bad['plain']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--agree", type=int, default=0)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for ratio in (1.0, 1.25):
        table(rng, args.reps, ratio)
    if args.agree:
        agreement(rng, args.agree)


if __name__ == "__main__":
    main()
