"""Size and power of the paired ratio TOST (tost_ratio, method "fieller") on skewed pairs,
next to the skew corrections tried (docs/statistics.md, "Calibration under skew and
ties"). Not collected by pytest; run

    nice .venv/bin/python tests/stats/calibrate_ratio_skew.py --reps 10000

Pairs: y exponential(1) or log-normal(-1/2, 1) (mean 1 both), x = ratio · y · e with
log-normal noise e of mean 1 and σ = 0.5 (strongly skewed x − r y), or a symmetric design
(y gamma(50)/50, x = ratio · (y + N(0, 0.2²))). Size: one-sided at the margin (ratio 1.1,
"less"; 1/1.1, "greater"; margin 0.1); power: "less" at ratio 1.

Columns: ``fieller`` is the test as shipped (``_tost_ratio_pvalues``, the code tost_ratio
runs); ``hall`` refers Hall's (1992) cubic transform of the paired t of x − r y (the
sample skewness of the differences, Johnson-type bias term) to t(n − 1); ``adverse`` uses
|skewness| in the direction that makes each side more conservative (``-hall(-t)`` for
"greater") and rejects only where the shipped test rejects too; ``boot`` (``--boot B``) is
the bootstrap-t of the paired t of x − r y (pairs resampled, the pivot centred at the
estimated ratio). None of these corrections is used by tost_ratio: see the docs section.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from kvstats.stats._equivalence_ratio import _tost_ratio_pvalues


def pairs(rng, reps, n, ratio, design):
    if design == "symmetric":
        y = rng.gamma(50.0, 1 / 50, (reps, n))
        return ratio * (y + rng.normal(0.0, 0.2, (reps, n))), y
    y = rng.exponential(1.0, (reps, n)) if design == "exp" else rng.lognormal(-0.5, 1.0, (reps, n))
    return ratio * y * rng.lognormal(-0.125, 0.5, (reps, n)), y


def paired_t(x, y, r):
    d = x - r[..., None] * y if np.ndim(r) else x - r * y
    n = d.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(n) * d.mean(-1) / d.std(-1, ddof=1)


def hall(t, gamma, n):
    """Hall's monotone cubic transform of a studentized mean (skewness gamma)."""
    a = gamma / 3
    return t + a * t**2 / np.sqrt(n) + a**2 * t**3 / (3 * n) + gamma / (6 * np.sqrt(n))


def skewness(x, y, r):
    c = x - r * y
    c = c - c.mean(-1, keepdims=True)
    return (c**3).mean(-1) / (c**2).mean(-1) ** 1.5


def boot_pvalues(x, y, r, side, n_boot, rng, chunk=50):
    reps, n = x.shape
    t = paired_t(x, y, r)
    centre = x.mean(-1) / y.mean(-1)
    count = np.zeros(reps)
    for _ in range(n_boot // chunk):
        ix = rng.integers(0, n, (reps, chunk, n))
        xs = np.take_along_axis(np.broadcast_to(x[:, None], ix.shape), ix, -1)
        ys = np.take_along_axis(np.broadcast_to(y[:, None], ix.shape), ix, -1)
        ts = np.nan_to_num(paired_t(xs, ys, np.broadcast_to(centre[:, None], (reps, chunk))))
        count += ((ts <= t[:, None]) if side == "less" else (ts >= t[:, None])).sum(1)
    return (1 + count) / (n_boot // chunk * chunk + 1)


def rejections(x, y, r, side, n_boot, rng):
    n = x.shape[-1]
    shipped = _tost_ratio_pvalues(x, y, 0.1, alternative=side, paired=True)
    t, g = paired_t(x, y, r), skewness(x, y, r)
    if side == "less":
        p_hall, p_adverse = stats.t.cdf(hall(t, g, n), n - 1), stats.t.cdf(hall(t, np.abs(g), n), n - 1)
    else:
        p_hall, p_adverse = stats.t.sf(hall(t, g, n), n - 1), stats.t.sf(-hall(-t, np.abs(g), n), n - 1)
    out = {"fieller": shipped, "hall": p_hall, "adverse": np.maximum(shipped, p_adverse)}
    if n_boot:
        out["boot"] = boot_pvalues(x, y, r, side, n_boot, rng)
    return {k: float(np.mean(p <= 0.05)) for k, p in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10000)
    ap.add_argument("--boot", type=int, default=0, help="bootstrap-t resamples (0: skip)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20, 50, 100, 200, 1000])
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"MC SE at 0.05: {np.sqrt(0.05 * 0.95 / args.reps):.4f} ({args.reps} replicates; "
          "n = 1000 with a quarter of them)")
    print("| design | n | less size | greater size | less power at ratio 1 |")
    print("|---|---|---|---|---|")
    for design in ("exp", "lognormal", "symmetric"):
        for n in args.sizes:
            reps = args.reps if n < 1000 else args.reps // 4
            cells = []
            for side, ratio, r in (("less", 1.1, 1.1), ("greater", 1 / 1.1, 1 / 1.1), ("less", 1.0, 1.1)):
                x, y = pairs(rng, reps, n, ratio, design)
                rej = rejections(x, y, r, side, args.boot if n <= 50 else 0, rng)
                cells.append(" / ".join(f"{v:.4f}" for v in rej.values()))
            print(f"| {design} | {n} | " + " | ".join(cells) + " |", flush=True)
    print("cells: " + " / ".join(["fieller", "hall", "adverse"] + (["boot"] if args.boot else [])))


if __name__ == "__main__":
    main()
