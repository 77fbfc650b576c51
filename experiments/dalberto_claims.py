"""The seed paper's claims, checked one by one on finished sweeps (numbers for docs/results.md).

    python experiments/dalberto_claims.py results/dalberto_d128 results/dalberto_d1024
    python experiments/dalberto_claims.py --figures docs/figures results/dalberto_d128 ...

Reads each sweep directory (``results.parquet`` + ``manifest.json`` and the report's
``tables/comparisons.csv``, whose p-values are adjusted over the whole report) and prints
Markdown tables:

1. KQV vs QKQV attention KL per case and budget: means, ratio QKQV/KQV with a bootstrap
   CI, the report's location test (rank-biserial r of Mann–Whitney for a two-sample
   report, the sign test's paired dominance for a paired one; the paper reports
   r = −0.983 and a 2.25x ratio at n = 4), adjusted p.
2. K geometry (φ_k, SNR_k) winners of KQV vs QKQV by budget: is there a crossover?
3. Low-rank vs heavy-tailed keys: mean KL per scheme and budget, ratio low-rank /
   heavy-tailed with a Mann–Whitney test between the two (independent cases).
4. KV vs KQV on heavy tails vs Gaussian keys: φ_k and KL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from kvstats.results import load_result
from kvstats.stats import bootstrap_ratio_ci, mann_whitney


def _case(r) -> str:
    p = "" if r["params"] == "-" else f" ({r['params']})"
    return f"{r['distribution']}{p}, d={r['dim']}"


def _p(x: float) -> str:
    return "<1e-300" if x < 1e-300 else (f"{x:.1e}" if x < 1e-3 else f"{x:.3f}")


def _location_test(comp: pd.DataFrame) -> tuple[str, str]:
    """The report's winner-carrying test and its effect's name: Mann–Whitney's r
    (``pairing = "none"``) or the sign test's paired dominance (``"trial"``)."""
    from kvstats.analysis.compare import LOCATION_TESTS

    found = [t for t in LOCATION_TESTS.values() if t in set(comp.test)]
    if len(found) != 1:
        raise ValueError(f"tables/comparisons.csv must hold one location test of "
                         f"{sorted(LOCATION_TESTS.values())}; found {found}")
    return found[0], ("r" if found[0] == "mann_whitney" else "dominance")


def kl_table(frame: pd.DataFrame, comp: pd.DataFrame) -> str:
    test, effect = _location_test(comp)
    rows = [f"| case | n | mean KL KQV | mean KL QKQV | QKQV/KQV [95% CI] | {effect} (KQV vs QKQV) [95% CI] | p adj (Holm) | winner |",
            "|---|---|---|---|---|---|---|---|"]
    mw = comp[(comp.test == test) & (comp.metric == "kl") & (comp.scheme_a == "KQV")
              & (comp.scheme_b == "QKQV")]
    for (dist, params, dim), grp in frame.groupby(["distribution", "params", "dim"], sort=False):
        for n in sorted(grp.budget.unique()):
            a = grp[(grp.scheme == "KQV") & (grp.budget == n)]["kl"].to_numpy()
            b = grp[(grp.scheme == "QKQV") & (grp.budget == n)]["kl"].to_numpy()
            if not len(a) or not len(b):
                continue
            ci = bootstrap_ratio_ci(b, a, n_resamples=1999, seed=int(n))
            t = mw[(mw.distribution == dist) & (mw.params == params) & (mw.dim == dim) & (mw.budget == n)]
            t = t.iloc[0]
            rows.append(f"| {_case({'distribution': dist, 'params': params, 'dim': dim})} | {n:g} | "
                        f"{a.mean():.4g} | {b.mean():.4g} | {b.mean() / a.mean():.3g} "
                        f"[{ci.low:.3g}, {ci.high:.3g}] | {t.effect:+.3f} [{t.effect_low:+.3f}, "
                        f"{t.effect_high:+.3f}] | {_p(t.pvalue_adjusted)} | {t.winner} |")
    return "\n".join(rows)


def geometry_table(cross: pd.DataFrame) -> str:
    rows = ["| case | pair | metric | winners by budget | crossover |", "|---|---|---|---|---|"]
    geo = cross.metric.isin(["phi_k", "snr_k", "phi_t", "snr_t"])
    # every KQV-vs-QKQV row, and every crossover of any pair
    sel = cross[geo & (((cross.scheme_a == "KQV") & (cross.scheme_b == "QKQV")) | cross.crossover)]
    for r in sel.itertuples(index=False):
        rows.append(f"| {_case(r._asdict())} | {r.scheme_a} vs {r.scheme_b} | {r.metric} | {r.winners} | "
                    f"{'**yes**' if r.crossover else 'no'} |")
    return "\n".join(rows)


def damage_table(frame: pd.DataFrame) -> str:
    rows = ["| d | scheme | n | heavy-tailed | KL low-rank: mean / median | KL heavy-tailed: mean / median | φ_k low-rank / heavy | r (low-rank vs heavy) | p (MW, raw) |",
            "|---|---|---|---|---|---|---|---|---|"]
    lr = frame[frame.distribution == "low_rank"]
    ht = frame[frame.distribution == "heavy_tailed"]
    for (dim, scheme, n), a in lr.groupby(["dim", "scheme", "budget"], sort=True):
        for params, b in ht[(ht.dim == dim) & (ht.scheme == scheme) & (ht.budget == n)].groupby("params"):
            x, y = a["kl"].to_numpy(), b["kl"].to_numpy()
            res = mann_whitney(x, y)
            rows.append(f"| {dim} | {scheme} | {n:g} | {params} | {x.mean():.3g} / {np.median(x):.3g} | "
                        f"{y.mean():.3g} / {np.median(y):.3g} | {a.phi_k.mean():.3f} / {b.phi_k.mean():.3f} | "
                        f"{res.rank_biserial:+.3f} | {_p(res.pvalue)} |")
    return "\n".join(rows)


def kv_table(frame: pd.DataFrame, comp: pd.DataFrame) -> str:
    rows = ["| case | n | φ_k KV | φ_k KQV | mean KL KV | mean KL KQV | KL winner (KQV vs KV, Holm) |",
            "|---|---|---|---|---|---|---|"]
    mw = comp[(comp.test == _location_test(comp)[0]) & (comp.metric == "kl") & (comp.scheme_a == "KQV")
              & (comp.scheme_b == "KV")]
    sel = frame[frame.distribution.isin(["gaussian", "heavy_tailed"])]
    for (dist, params, dim), grp in sel.groupby(["distribution", "params", "dim"], sort=False):
        for n in sorted(grp.budget.unique()):
            kv = grp[(grp.scheme == "KV") & (grp.budget == n)]
            kqv = grp[(grp.scheme == "KQV") & (grp.budget == n)]
            t = mw[(mw.distribution == dist) & (mw.params == params) & (mw.dim == dim) & (mw.budget == n)]
            win = t.iloc[0].winner if len(t) else "–"
            rows.append(f"| {_case({'distribution': dist, 'params': params, 'dim': dim})} | {n:g} | "
                        f"{kv.phi_k.mean():.4f} | {kqv.phi_k.mean():.4f} | {kv.kl.mean():.4g} | "
                        f"{kqv.kl.mean():.4g} | {win} |")
    return "\n".join(rows)


def figures(dirs: list[str], out: Path) -> None:
    """Small PNGs of the key figures for docs/ (dpi 80)."""
    from kvstats.report import (plot_crossover, plot_kl_vs_bits, plot_lowrank_vs_heavytail,
                                plot_shannon_phi, save_figure)

    out.mkdir(parents=True, exist_ok=True)
    for d in dirs:
        res = load_result(d)
        tag = Path(d).name
        comp = pd.read_csv(Path(d) / "tables" / "comparisons.csv", keep_default_na=False,
                           na_values=["NaN", "nan", ""])
        f = res.frame
        for stem, fig in ((f"{tag}_kl_vs_bits", lambda: plot_kl_vs_bits(f)),
                          (f"{tag}_crossover_kqv_qkqv", lambda: plot_crossover(comp, pair=("KQV", "QKQV")))):
            _save_png(fig(), out / stem)
        for dist, params in (("gaussian", "-"), ("heavy_tailed", "nu=1.5")):
            if ((f.distribution == dist) & (f.params == params)).any():
                for place in ("k", "t"):
                    _save_png(plot_shannon_phi(f, place, distribution=dist, params=params, max_points=200),
                              out / f"{tag}_shannon_phi_{place}_{dist}")
        if {"low_rank", "heavy_tailed"} <= set(f.distribution):
            _save_png(plot_lowrank_vs_heavytail(f), out / f"{tag}_lowrank_vs_heavytail")


def _save_png(fig, stem: Path) -> None:
    import matplotlib.pyplot as plt
    fig.savefig(stem.with_suffix(".png"), dpi=80, bbox_inches="tight")
    plt.close(fig)


def main(dirs: list[str]) -> None:
    if dirs and dirs[0] == "--figures":
        figures(dirs[2:], Path(dirs[1]))
        return
    for d in dirs:
        res = load_result(d)
        comp = pd.read_csv(Path(d) / "tables" / "comparisons.csv", keep_default_na=False,
                           na_values=["NaN", "nan", ""])
        cross = pd.read_csv(Path(d) / "tables" / "crossovers.csv", keep_default_na=False)
        cross["crossover"] = cross["crossover"].astype(str) == "True"
        cfg = res.config
        print(f"\n## {d}: {len(cfg.cells())} cells, {cfg.n_trials} trials/cell, N = {list(cfg.n_keys)}, "
              f"d = {list(cfg.dims)}, seed {cfg.seed}, {res.manifest['seconds']:.0f} s "
              f"({res.manifest['executor']})\n")
        print("### KQV vs QKQV: attention KL\n")
        print(kl_table(res.frame, comp))
        print("\n### K geometry and output: winners by budget\n")
        print(geometry_table(cross))
        if {"low_rank", "heavy_tailed"} <= set(res.frame.distribution):
            print("\n### Low-rank vs heavy-tailed keys\n")
            print(damage_table(res.frame))
        print("\n### KV vs KQV: heavy tails vs Gaussian\n")
        print(kv_table(res.frame, comp))


def _parse(argv: list[str]) -> list[str]:
    import argparse

    parser = argparse.ArgumentParser(
        description="Check the seed paper's claims on finished sweep directories and print "
                    "Markdown tables (numbers for docs/results.md).",
        epilog="Example: python experiments/dalberto_claims.py results/dalberto_d128 results/dalberto_d1024")
    parser.add_argument("--figures", metavar="DIR", type=Path, default=None,
                        help="instead of the tables, write the claim figures into DIR")
    parser.add_argument("dirs", nargs="+", metavar="SWEEP_DIR",
                        help="sweep output directories (results + manifest + the report's tables/)")
    args = parser.parse_args(argv)
    return (["--figures", str(args.figures)] if args.figures is not None else []) + args.dirs


if __name__ == "__main__":
    main(_parse(sys.argv[1:]))
