"""Calibration of the report's two-sample and paired tests at few units (3-8 per arm) on
skewed and tied data (docs/statistics.md, "Calibration under skew and ties").
Not collected by pytest; run

    nice .venv/bin/python tests/stats/calibrate_small_n.py --reps 4000

Each test is called through the row function the report uses (kvstats.analysis.pair_tests:
rounding ties, KS's exact/permutation switch, the sequential energy test with the family's
settings), so what is measured is what the report prints. Null designs (exchangeable):

* ``skew``: log-normal(0, 1) values; paired: x = u e₁, y = u e₂ with a shared unit effect
  u ~ log-normal(0, 1) and e ~ log-normal(0, 0.5) (within-pair exchangeable).
* ``ties``: floor of those values (most are 0, 1 or 2: heavy ties, skewed).
* ``levels``: three levels {0, 1, 2} with probabilities (0.6, 0.3, 0.1); paired through a
  Gaussian copula (ρ = 0.7) so both members of a pair share the marginal.

Rejection rates at α = 0.01, 0.05, 0.10 (a valid test: at most α up to Monte Carlo error).
The equivalence tests are measured at a margin's edge (their null's boundary): ``tost_rank``
with θ = 0.6 exactly (δ = 0.1; x on {0, 1, 2} with probabilities (0.2, 0.3, 0.5) against y
uniform on {0, 1, 2}, θ = E[x]/3 + 1/6), ``tost_ratio`` with mean(x)/mean(y) = 1.1 exactly
(margin 0.1; y uniform on {1, 2, 3}, x on {1, 2, 3, 4} with (0.3, 0.3, 0.3, 0.1), and
the skewed pairs x = 1.1 y e of calibrate_ratio_skew.py), paired through the copula.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy import stats

from kvstats.analysis.pair_tests import _energy_row, _equivalence_row, _ks_row, _mw_row, _sign_row

LEVELS = np.array([0.6, 0.3, 0.1])
ALPHAS = (0.01, 0.05, 0.10)


def _discrete(u, probs, values=None):
    """Inverse CDF of a finite law at uniforms u."""
    values = np.arange(len(probs)) if values is None else np.asarray(values, float)
    return values[np.searchsorted(np.cumsum(probs)[:-1], u, side="right")].astype(float)


def _copula(rng, n, rho=0.7, cols=1):
    z1 = rng.normal(size=(n, cols))
    z2 = rho * z1 + np.sqrt(1 - rho**2) * rng.normal(size=(n, cols))
    return stats.norm.cdf(z1), stats.norm.cdf(z2)


def null_sample(rng, design, n, paired, cols=1):
    """(x, y) of shape (n, cols) under exchangeability."""
    if design == "levels":
        if paired:
            u1, u2 = _copula(rng, n, cols=cols)
        else:
            u1, u2 = rng.random((n, cols)), rng.random((n, cols))
        return _discrete(u1, LEVELS), _discrete(u2, LEVELS)
    if paired:
        unit = rng.lognormal(0.0, 1.0, (n, 1))
        x, y = unit * rng.lognormal(0, 0.5, (n, cols)), unit * rng.lognormal(0, 0.5, (n, cols))
    else:
        x, y = rng.lognormal(0, 1, (n, cols)), rng.lognormal(0, 1, (n, cols))
    return (np.floor(x), np.floor(y)) if design == "ties" else (x, y)


def margin_sample(rng, which, n, paired):
    """(x, y) at a margin's edge: ``rank`` θ = 0.6, ``ratio-levels`` / ``ratio-skew`` 1.1."""
    if which == "ratio-skew":
        y = rng.lognormal(-0.5, 1.0, n)
        x = 1.1 * (y if paired else rng.lognormal(-0.5, 1.0, n)) * rng.lognormal(-0.125, 0.5, n)
        return x, y
    u1, u2 = _copula(rng, n) if paired else (rng.random((n, 1)), rng.random((n, 1)))
    if which == "rank":
        return _discrete(u1[:, 0], [0.2, 0.3, 0.5]), _discrete(u2[:, 0], [1 / 3, 1 / 3, 1 / 3])
    return (_discrete(u1[:, 0], [0.3, 0.3, 0.3, 0.1], [1, 2, 3, 4]),
            _discrete(u2[:, 0], [1 / 3, 1 / 3, 1 / 3], [1, 2, 3]))


def _rates(p):
    p = np.asarray(p)
    defined = ~np.isnan(p)
    return " / ".join(f"{np.mean(p[defined] <= a):.4f}" for a in ALPHAS) + (
        f" ({np.mean(~defined):.2f} undefined)" if not defined.all() else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--tost-reps", type=int, default=2000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[3, 5, 8])
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"rates at alpha = {ALPHAS}; MC SE at 0.05: {np.sqrt(.0475 / args.reps):.4f} "
          f"({args.reps} replicates), TOST {np.sqrt(.0475 / args.tost_reps):.4f} "
          f"({args.tost_reps})")
    print("| test | design | n per arm | rejection rate at 0.01 / 0.05 / 0.10 |")
    print("|---|---|---|---|")
    warnings.simplefilter("ignore")
    for n in args.sizes:
        for design in ("skew", "ties", "levels"):
            rows = {"mann_whitney": [], "ks": [], "sign (paired)": [], "energy": [],
                    "energy (paired)": []}
            for i in range(args.reps):
                x, y = null_sample(rng, design, n, False)
                rows["mann_whitney"].append(_mw_row(x[:, 0], y[:, 0])["pvalue"])
                rows["ks"].append(_ks_row(x[:, 0], y[:, 0], i)["pvalue"])
                x, y = null_sample(rng, design, n, True)
                rows["sign (paired)"].append(_sign_row(x[:, 0], y[:, 0])["pvalue"])
                for name, paired in (("energy", False), ("energy (paired)", True)):
                    X, Y = null_sample(rng, design, n, paired, cols=6)
                    rows[name].append(_energy_row(X, Y, 999, 10, i, paired)["pvalue"])
            for name, p in rows.items():
                print(f"| {name} | {design} | {n} | {_rates(p)} |", flush=True)
        for which, test in (("rank", "rank"), ("ratio-levels", "ratio"), ("ratio-skew", "ratio")):
            for paired in (False, True):
                p = [_equivalence_row(*margin_sample(rng, which, n, paired), 0.1, test, 0.05,
                                      paired)["pvalue"] for _ in range(args.tost_reps)]
                print(f"| tost_{test}{' (paired)' if paired else ''} | margin edge, {which} | {n} "
                      f"| {_rates(p)} |", flush=True)


if __name__ == "__main__":
    main()
