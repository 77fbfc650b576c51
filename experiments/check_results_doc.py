"""Numbers of docs/results.md's seed-grid sections, read back from the files they cite.

    python experiments/check_results_doc.py pairs results/dalberto_d128 \\
        --paired results/dalberto_d128_paired --two-sample results/dalberto_d128 \\
        --pair KQV QKQV --metric kl
    python experiments/check_results_doc.py means results/dalberto_d128 --metric kl phi_k --budget 4
    python experiments/check_results_doc.py crossovers results/dalberto_d128_paired
    python experiments/check_results_doc.py replay results/dalberto_d128 --cells 5

``pairs`` prints, per case and budget of one scheme pair and metric, what the page quotes
of a comparison: both means, the ratio mean(b)/mean(a) with the BCa 95% interval of
experiments/dalberto_claims.py (1,999 resamples, seed = n, each scheme resampled on its
own), the paired report's sign test (trials where a > b and a < b, dominance [95% CI],
Holm-adjusted p, winner) and the two-sample report's Mann–Whitney r [95% CI], adjusted p
and winner, side by side. A report folder is one written by ``kvstats report`` (its
``tables/comparisons.csv``); the design of each is checked (``sign`` rows in the paired
one, ``mann_whitney`` in the two-sample one). ``means`` prints per-scheme means, medians,
p99 and max from the per-trial table; ``crossovers`` the report's crossover rows;
``replay`` recomputes the trials of a sweep's cells with today's code
(:func:`kvstats.sweep.replay.replay_trials`) and counts the stored rows that differ in
any float column (NaN equal to NaN): do the page's numbers still come out of the code?

Reads only; writes nothing. A reviewer compares its output with the page's tables.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from kvstats.results import load_result
from kvstats.stats import bootstrap_ratio_ci

KEY = ["distribution", "params", "dim", "n_keys", "budget"]


def _comparisons(folder: str, test: str) -> pd.DataFrame:
    path = Path(folder) / "tables" / "comparisons.csv"
    table = pd.read_csv(path, keep_default_na=False, na_values=["NaN", "nan", ""])
    if test not in set(table["test"]):
        raise SystemExit(f"{path} has no '{test}' rows (tests: {sorted(set(table['test']))}): "
                         f"is it the {'paired' if test == 'sign' else 'two-sample'} report?")
    return table[table["test"] == test]


def _p(x: float) -> str:
    if not np.isfinite(x):
        return "–"
    return "<1e-300" if x < 1e-300 else (f"{x:.2g}" if x < 1e-3 else f"{x:.3g}")


def _counts(note: str) -> tuple[int, int]:
    """(a > b, a < b) from a sign row's note: '... (1000 a > b, 0 a < b)'."""
    m = re.search(r"\((\d+) a > b, (\d+) a < b\)", str(note))
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def pairs(args: argparse.Namespace) -> None:
    frame = load_result(args.sweep).frame
    a_name, b_name = args.pair
    sign = _comparisons(args.paired, "sign") if args.paired else None
    mw = _comparisons(args.two_sample, "mann_whitney") if args.two_sample else None
    for metric in args.metric:
        print(f"\n{a_name} vs {b_name}, {metric} (ratio = mean {b_name} / mean {a_name})\n")
        head = ["case", "n", f"mean {a_name}", f"mean {b_name}", "ratio [95% CI]"]
        if sign is not None:
            head += [f"{a_name}>{b_name}", f"{a_name}<{b_name}", "dominance [95% CI]", "p adj (paired)", "winner (paired)"]
        if mw is not None:
            head += ["r [95% CI]", "p adj (two-sample)", "winner (two-sample)"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for (dist, params, dim, n_keys), grp in frame.groupby(KEY[:4], sort=False):
            for n in sorted(grp.budget.unique()):
                if args.budget and n not in args.budget:
                    continue
                x = grp[(grp.scheme == a_name) & (grp.budget == n)][metric].to_numpy(float)
                y = grp[(grp.scheme == b_name) & (grp.budget == n)][metric].to_numpy(float)
                if not len(x) or not len(y):
                    continue
                ratio = "–"
                if args.ratio and x.mean() != 0:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ci = bootstrap_ratio_ci(y, x, n_resamples=1999, seed=int(n))
                    ratio = f"{ci.estimate:.4g} [{ci.low:.4g}, {ci.high:.4g}]"
                row = [f"{dist} {params}", f"{n:g}", f"{x.mean():.4g}", f"{y.mean():.4g}", ratio]
                sel = dict(distribution=dist, params=params, dim=dim, n_keys=n_keys, budget=n,
                           scheme_a=a_name, scheme_b=b_name, metric=metric)
                for table, kind in ((sign, "sign"), (mw, "mw")):
                    if table is None:
                        continue
                    t = table.loc[np.logical_and.reduce([table[k] == v for k, v in sel.items()])]
                    if len(t) != 1:
                        row += ["?"] * (5 if kind == "sign" else 3)
                        continue
                    t = t.iloc[0]
                    eff = f"{t.effect:+.3f} [{t.effect_low:+.3f}, {t.effect_high:+.3f}]"
                    if kind == "sign":
                        up, down = _counts(t.note)
                        row += [str(up), str(down), eff, _p(t.pvalue_adjusted), str(t.winner)]
                    else:
                        row += [eff, _p(t.pvalue_adjusted), str(t.winner)]
                print("| " + " | ".join(row) + " |")


def means(args: argparse.Namespace) -> None:
    frame = load_result(args.sweep).frame
    if args.budget:
        frame = frame[frame.budget.isin(args.budget)]
    stats = frame.groupby(KEY + ["scheme"], sort=False)[args.metric].agg(
        ["mean", "median", lambda s: s.quantile(0.99), "max"])
    with pd.option_context("display.width", 250, "display.max_rows", None, "display.max_columns", None,
                           "display.float_format", "{:.4g}".format):
        print(stats.rename(columns={"<lambda_0>": "p99"}, level=1))


def crossovers(args: argparse.Namespace) -> None:
    table = pd.read_csv(Path(args.report) / "tables" / "crossovers.csv", keep_default_na=False)
    hit = table[table["crossover"].astype(str) == "True"]
    print(f"{len(hit)} crossovers of {len(table)} rows")
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(hit[["params", "scheme_a", "scheme_b", "metric", "winners"]].to_string(index=False))


def replay(args: argparse.Namespace) -> None:
    import time

    from kvstats.sweep.replay import replay_trials

    frame = load_result(args.sweep).frame
    ids = list(frame["cell_id"].unique())[: args.cells or None]
    tic, differing = time.perf_counter(), 0
    for cid in ids:
        trials = sorted(frame.loc[frame["cell_id"] == cid, "trial"])
        rep = replay_trials(args.sweep, trials=trials, cell_id=cid)
        new, old = rep.profile().reset_index(drop=True), rep.stored().reset_index(drop=True)
        cols = [c for c in new.columns if c in old.columns and pd.api.types.is_float_dtype(new[c])]
        a, b = new[cols].to_numpy(float), old[cols].to_numpy(float)
        rows = int((~((a == b) | (np.isnan(a) & np.isnan(b)))).any(axis=1).sum())
        differing += rows > 0
        if rows:
            print(f"{cid}: {rows} of {len(new)} rows differ")
    print(f"{len(ids)} cells replayed, {differing} with differing rows, {time.perf_counter() - tic:.0f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="examples:\n" + __doc__.split("\n\n", 1)[1].split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pairs", help="one scheme pair per case and budget: means, ratio, both designs' tests")
    p.add_argument("sweep", help="sweep folder (results.parquet, manifest.json)")
    p.add_argument("--paired", help="report folder written with --pairing trial")
    p.add_argument("--two-sample", help="report folder written with --pairing none")
    p.add_argument("--pair", nargs=2, default=["KQV", "QKQV"], metavar=("A", "B"))
    p.add_argument("--metric", nargs="+", default=["kl"])
    p.add_argument("--budget", nargs="*", type=float, default=[])
    p.add_argument("--no-ratio", dest="ratio", action="store_false", help="skip the bootstrap of the ratio")
    p.set_defaults(func=pairs)
    p = sub.add_parser("means", help="per-scheme mean, median, p99, max of metrics")
    p.add_argument("sweep")
    p.add_argument("--metric", nargs="+", default=["kl"])
    p.add_argument("--budget", nargs="*", type=float, default=[])
    p.set_defaults(func=means)
    p = sub.add_parser("crossovers", help="the crossovers a report flags")
    p.add_argument("report")
    p.set_defaults(func=crossovers)
    p = sub.add_parser("replay", help="recompute a sweep's trials; count rows that differ from the stored ones")
    p.add_argument("sweep")
    p.add_argument("--cells", type=int, default=0, help="only the first N cells (default: all)")
    p.set_defaults(func=replay)
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main(sys.argv[1:])
