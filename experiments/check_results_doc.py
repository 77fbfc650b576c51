"""Numbers of docs/results.md's seed-grid sections, read back from the folders they cite.

    python experiments/check_results_doc.py pairs results/dalberto_d128 \\
        --paired results/dalberto_d128 --two-sample results/dalberto_d128_none \\
        --pair KQV QKQV --metric kl
    python experiments/check_results_doc.py means results/dalberto_d128 --metric kl phi_k --budget 4
    python experiments/check_results_doc.py crossovers results/dalberto_d128
    python experiments/check_results_doc.py replay results/dalberto_d128 --cells 5
    python experiments/check_results_doc.py floor results/dalberto_d128 --pair KQV QKQV --budget 2 \\
        --floor 0 1e-12 1e-7 1e-2

(results/dalberto_d128 is a sweep folder, which holds the paired report since
2026-12-01; results/dalberto_d128_none the two-sample report of ``kvstats report
results/dalberto_d128 --pairing none --out results/dalberto_d128_none``.)

``pairs`` prints, per case and budget of one scheme pair and metric, what the page quotes
of a comparison: both means, the ratio mean(b)/mean(a) with the BCa 95% interval of
experiments/dalberto_claims.py (1,999 resamples, seed = n, each scheme resampled on its
own), the paired report's sign test (trials where a > b and a < b, dominance [95% CI],
Holm-adjusted p, winner) and the two-sample report's Mann–Whitney r [95% CI], adjusted p
and winner, side by side. The report's row is found in either order (a report testing
b vs a has its effect negated and its counts swapped, so every column reads "a vs b");
where the two schemes were run at no common budget (K4V2 at 3 bits against K4V4 at 4),
the budget pairs the reports test are shown (``n`` column "3 vs 4"). A report folder is
one written by ``kvstats report`` or ``kvstats sweep`` (its ``tables/comparisons.csv``);
the design of each is checked (``sign`` rows in the paired one, ``mann_whitney`` in the
two-sample one). ``means`` prints per-scheme means, medians, p99 and max from the
per-trial table; ``crossovers`` the report's crossover rows; ``replay`` recomputes the
trials of a sweep's cells with today's code (:func:`kvstats.sweep.replay.replay_trials`)
and counts the stored rows that differ in any float column (NaN equal to NaN): do the
page's numbers still come out of the code?

``floor`` recounts the sign test of one pair on the trials whose larger value exceeds a
floor (:func:`floor_counts`; the report's own test is floor 0): per case, budget and
floor, the trials kept, how many have a < b and a > b (equal up to rounding, relative
1e-12 as the report's rule, counts for neither), the exact two-sided sign-test p
(unadjusted), and the differing trials set aside (both values <= floor) with how many of
them have a < b; then each case's exact-attention entropy (``attn_entropy``, mean over
trials in nats, and exp of it, the "effective number of keys"). ``--budgets NA NB``
compares a at NA with b at NB (one scheme at two budgets: ``--pair QKQV QKQV --budgets 2
3``). The metric must be non-negative (KL, Claim 1's; a metric with a negative value,
such as ``snr_t``, is refused). Docs/results.md's Claim 1 sensitivity bullet quotes it;
the floor was chosen after the fact, so its p-values are exploratory.

What it checks and what it does not. It reads only the result folders; it does **not**
read docs/results.md, so a wrong number on the page cannot make it fail: a reviewer
compares its output with the page's tables by eye. It exits non-zero with a message
(never an empty or "?" table) when a named scheme or metric is not in the sweep (or
``floor``'s metric has negative values), when a
report has no row for the pair (in either order) at a case and budget shown, or when a
table would come out empty. ``replay`` is the one check of the numbers themselves: it
recomputes them. Writes nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from kvstats.analysis.resolution import rounding_ties
from kvstats.results import load_result
from kvstats.stats import bootstrap_ratio_ci, sign_test

KEY = ["distribution", "params", "dim", "n_keys", "budget"]


def _p(x: float) -> str:
    if not np.isfinite(x):
        return "–"
    return "<1e-300" if x < 1e-300 else (f"{x:.2g}" if x < 1e-3 else f"{x:.3g}")


def _counts(note: str) -> tuple[int, int]:
    """(a > b, a < b) from a sign row's note: '... (1000 a > b, 0 a < b)'."""
    m = re.search(r"\((\d+) a > b, (\d+) a < b\)", str(note))
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _fail(message: str) -> NoReturn:
    raise SystemExit(f"check_results_doc.py: {message}")


def _comparisons(folder: str, test: str) -> pd.DataFrame:
    path = Path(folder) / "tables" / "comparisons.csv"
    if not path.is_file():
        _fail(f"{path} not found: is {folder} a folder written by `kvstats report` or `kvstats sweep`?")
    table = pd.read_csv(path, keep_default_na=False, na_values=["NaN", "nan", ""])
    if test not in set(table["test"]):
        _fail(f"{path} has no '{test}' rows (tests: {sorted(set(table['test']))}): "
              f"is it the {'paired' if test == 'sign' else 'two-sample'} report?")
    table = table[table["test"] == test].copy()
    if "budget_b" not in table.columns:  # reports before cross-budget pairs: one budget per row
        table["budget_b"] = table["budget"]
    return table


def _report_row(table: pd.DataFrame, case: dict, a: str, b: str, n_a: float, n_b: float):
    """The report's one row of a vs b at budgets (n_a, n_b), in either orientation.

    Returns ``(row, flipped)``; ``flipped`` when the report stores it as b vs a, whose
    effect and counts then change sign and side. ``(None, False)`` when absent.
    """
    in_case = np.logical_and.reduce([table[k] == v for k, v in case.items()])
    for sa, sb, ba, bb, flipped in ((a, b, n_a, n_b, False), (b, a, n_b, n_a, True)):
        t = table.loc[in_case & (table.scheme_a == sa) & (table.scheme_b == sb)
                      & (table.budget == ba) & (table.budget_b == bb)]
        if len(t) > 1:
            _fail(f"{len(t)} report rows for {sa} vs {sb} at budgets {ba:g}/{bb:g}, {case}: expected one")
        if len(t) == 1:
            return t.iloc[0], flipped
    return None, False


def _budget_pairs(grp: pd.DataFrame, a: str, b: str, tables: list[pd.DataFrame], case: dict):
    """(budget of a, budget of b) to compare in one case: the budgets both schemes were run
    at; else (mixed-precision pairs such as K4V2 at 3 vs K4V4 at 4) the budget pairs a
    report tests; else the single budget of each."""
    n_a = sorted(grp.loc[grp.scheme == a, "budget"].unique())
    n_b = sorted(grp.loc[grp.scheme == b, "budget"].unique())
    common = [n for n in n_a if n in n_b]
    if common:
        return [(n, n) for n in common]
    found: set[tuple[float, float]] = set()
    for table in tables:
        in_case = np.logical_and.reduce([table[k] == v for k, v in case.items()])
        for _, r in table.loc[in_case].iterrows():
            if (r.scheme_a, r.scheme_b) == (a, b):
                found.add((r.budget, r.budget_b))
            elif (r.scheme_a, r.scheme_b) == (b, a):
                found.add((r.budget_b, r.budget))
    found = {(x, y) for x, y in found if x in n_a and y in n_b}
    if found:
        return sorted(found)
    return [(n_a[0], n_b[0])] if len(n_a) == 1 and len(n_b) == 1 else []


def _pair_in(args: argparse.Namespace, frame: pd.DataFrame) -> tuple[str, str]:
    """``--pair``'s two scheme names, each checked to be in the sweep."""
    schemes = sorted(frame.scheme.unique())
    for name in args.pair:
        if name not in schemes:
            _fail(f"--pair: scheme {name!r} is not in {args.sweep} (schemes there: {schemes})")
    return tuple(args.pair)


def pairs(args: argparse.Namespace) -> None:
    frame = load_result(args.sweep).frame
    a_name, b_name = _pair_in(args, frame)
    if a_name == b_name:
        _fail(f"--pair: two different schemes expected, got {a_name!r} twice")
    for metric in args.metric:
        if metric not in frame.columns or not pd.api.types.is_numeric_dtype(frame[metric]):
            _fail(f"--metric: {metric!r} is not a metric column of {args.sweep}")
    sign = _comparisons(args.paired, "sign") if args.paired else None
    mw = _comparisons(args.two_sample, "mann_whitney") if args.two_sample else None
    tables = [t for t in (sign, mw) if t is not None]
    for metric in args.metric:
        print(f"\n{a_name} vs {b_name}, {metric} (ratio = mean {b_name} / mean {a_name})\n")
        head = ["case", "n", f"mean {a_name}", f"mean {b_name}", "ratio [95% CI]"]
        if sign is not None:
            head += [f"{a_name}>{b_name}", f"{a_name}<{b_name}", "dominance [95% CI]", "p adj (paired)", "winner (paired)"]
        if mw is not None:
            head += ["r [95% CI]", "p adj (two-sample)", "winner (two-sample)"]
        lines = []
        for (dist, params, dim, n_keys), grp in frame.groupby(KEY[:4], sort=False):
            case = dict(distribution=dist, params=params, dim=dim, n_keys=n_keys)
            sel_tables = [t.loc[t.metric == metric] for t in tables]
            for n, n_b in _budget_pairs(grp, a_name, b_name, sel_tables, case):
                if args.budget and n not in args.budget:
                    continue
                x = grp[(grp.scheme == a_name) & (grp.budget == n)][metric].to_numpy(float)
                y = grp[(grp.scheme == b_name) & (grp.budget == n_b)][metric].to_numpy(float)
                ratio = "–"
                if args.ratio and x.mean() != 0:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ci = bootstrap_ratio_ci(y, x, n_resamples=1999, seed=int(n))
                    ratio = f"{ci.estimate:.4g} [{ci.low:.4g}, {ci.high:.4g}]"
                label = f"{n:g}" if n == n_b else f"{n:g} vs {n_b:g}"
                row = [f"{dist} {params}", label, f"{x.mean():.4g}", f"{y.mean():.4g}", ratio]
                for table, kind, folder in ((sign, "sign", args.paired), (mw, "mw", args.two_sample)):
                    if table is None:
                        continue
                    t, flipped = _report_row(table.loc[table.metric == metric], case, a_name, b_name, n, n_b)
                    if t is None:
                        _fail(f"{folder} has no {'sign' if kind == 'sign' else 'mann_whitney'} row for "
                              f"{a_name} vs {b_name} (either order), {metric}, {dist} {params}, d = {dim}, "
                              f"N = {n_keys}, budget {label}: is the pair in that report's comparisons?")
                    s = -1.0 if flipped else 1.0
                    lo, hi = sorted((s * t.effect_low, s * t.effect_high))
                    eff = f"{s * t.effect:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                    if kind == "sign":
                        up, down = _counts(t.note)
                        if flipped:
                            up, down = down, up
                        row += [str(up), str(down), eff, _p(t.pvalue_adjusted), str(t.winner)]
                    else:
                        row += [eff, _p(t.pvalue_adjusted), str(t.winner)]
                lines.append("| " + " | ".join(row) + " |")
        if not lines:
            _fail(f"no rows for {a_name} vs {b_name}, {metric}"
                  + (f" at budget {args.budget}" if args.budget else "")
                  + f": the two schemes share no case and budget in {args.sweep}")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        print("\n".join(lines))


def means(args: argparse.Namespace) -> None:
    frame = load_result(args.sweep).frame
    for metric in args.metric:
        if metric not in frame.columns or not pd.api.types.is_numeric_dtype(frame[metric]):
            _fail(f"--metric: {metric!r} is not a metric column of {args.sweep}")
    if args.budget:
        frame = frame[frame.budget.isin(args.budget)]
    if frame.empty:
        _fail(f"--budget: no trials of {args.sweep} at budget {args.budget}")
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


def floor_counts(a, b, floor: float) -> dict:
    """Sign-test counts of paired values a, b on the pairs whose larger value exceeds ``floor``.

    Pairs with ``max(a, b) <= floor`` are set aside (values below any resolution: a KL of
    1e-300 against one of 1e-310 is no material difference); ``floor = 0`` sets aside only
    pairs of two zeros (ties), so its counts and p are the report's own test's. The floor
    is a floor on a non-negative metric (Claim 1's KL): on a metric that can be negative
    (``snr_t``, ``ip_bias``) a pair of two negatives would be set aside at any floor, so
    negative values are refused. Within the kept pairs, values equal up
    to rounding (:func:`kvstats.analysis.resolution.rounding_ties`, relative 1e-12) count
    for neither side, as in the report's sign test.

    Parameters
    ----------
    a, b : array_like, 1-D, same length >= 1
        Paired values (a[i] and b[i] on the same trial), no NaN, none negative.
    floor : float >= 0
        A pair is kept when its larger value is above it.

    Returns
    -------
    dict
        ``kept`` (pairs kept), ``a_lower``, ``b_lower`` (kept pairs with a < b, b < a),
        ``p`` (exact two-sided sign-test p on the kept pairs, unadjusted; 1 when none
        differ), ``aside`` (differing pairs set aside), ``aside_a_lower`` (of them, a < b),
        ``aside_max`` and ``aside_min`` (largest and smallest positive value among the
        set-aside differing pairs; NaN when there are none).

    Examples
    --------
    >>> import numpy as np
    >>> import sys; sys.path.insert(0, "experiments")
    >>> from check_results_doc import floor_counts
    >>> a = np.array([1e-300, 2e-300, 0.5, 0.1, 0.3])
    >>> b = np.array([1e-310, 3e-300, 0.4, 0.2, 0.3])
    >>> c = floor_counts(a, b, 1e-12)
    >>> c["kept"], c["a_lower"], c["b_lower"], c["aside"], c["aside_a_lower"]
    (3, 1, 1, 2, 1)
    >>> floor_counts(a, b, 0.0)["a_lower"], round(floor_counts(a, b, 0.0)["p"], 3)
    (2, 1.0)
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"a and b must be 1-D, non-empty and of one length; received shapes "
                         f"{a.shape} and {b.shape}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("a and b must hold no NaN; received "
                         f"{int(np.isnan(a).sum())} NaN in a, {int(np.isnan(b).sum())} in b")
    if (a < 0).any() or (b < 0).any():
        raise ValueError("a and b must be values of a non-negative metric (such as kl): the "
                         "floor sets aside pairs whose larger value is <= it; received "
                         f"{int((a < 0).sum())} negative values in a, {int((b < 0).sum())} "
                         f"in b (smallest {float(min(a.min(), b.min())):.3g})")
    if not (np.isfinite(floor) and floor >= 0):
        raise ValueError(f"floor must be a finite number >= 0; received {floor!r}")
    tie = rounding_ties(a, b)
    keep = np.maximum(a, b) > floor
    differ = ~tie & (a != b)
    a_low = differ & (a < b)
    # the report's test (pair_tests._sign_row) on the kept pairs: rounding ties made exact
    res = sign_test(a[keep], np.where(tie, a, b)[keep]) if keep.any() else None
    aside = differ & ~keep
    vals = np.r_[a[aside], b[aside]]
    pos = vals[vals > 0]
    return {"kept": int(keep.sum()), "a_lower": res.n_negative if res else 0,
            "b_lower": res.n_positive if res else 0, "p": float(res.pvalue) if res else 1.0,
            "aside": int(aside.sum()), "aside_a_lower": int((a_low & ~keep).sum()),
            "aside_max": float(vals.max()) if vals.size else float("nan"),
            "aside_min": float(pos.min()) if pos.size else float("nan")}


def _paired_values(grp: pd.DataFrame, a: str, n_a: float, b: str, n_b: float, metric: str):
    """a's and b's values on the trials both were run on (matched by ``trial``)."""
    x = grp[(grp.scheme == a) & (grp.budget == n_a)].set_index("trial")[metric]
    y = grp[(grp.scheme == b) & (grp.budget == n_b)].set_index("trial")[metric]
    both = x.index.intersection(y.index).sort_values()
    return x.loc[both].to_numpy(float), y.loc[both].to_numpy(float)


def floor(args: argparse.Namespace) -> None:
    frame = load_result(args.sweep).frame
    a_name, b_name = _pair_in(args, frame)
    if args.metric not in frame.columns or not pd.api.types.is_numeric_dtype(frame[args.metric]):
        _fail(f"--metric: {args.metric!r} is not a metric column of {args.sweep}")
    if (frame[args.metric] < 0).any():   # a floor on |value| would be another test: refused
        _fail(f"--metric: the floor applies to non-negative metrics such as kl; {args.metric!r} "
              f"has negative values in {args.sweep} (smallest {frame[args.metric].min():.3g}), "
              f"and pairs of two negatives would be set aside at any floor")
    for f in args.floor:
        if not (np.isfinite(f) and f >= 0):
            _fail(f"--floor: each floor must be a finite number >= 0; received {f!r}")
    if args.budgets and a_name == b_name and args.budgets[0] == args.budgets[1]:
        _fail(f"--budgets: {a_name} against itself needs two different budgets; received {args.budgets}")
    if not args.budgets and a_name == b_name:
        _fail(f"--pair: {a_name} against itself needs --budgets NA NB")
    # one scheme at two budgets: name each side by its budget
    a_lab, b_lab = ((f"{a_name}@{args.budgets[0]:g}", f"{b_name}@{args.budgets[1]:g}") if a_name == b_name
                    else (a_name, b_name))
    head = ["case", "n", "floor", "kept (larger > floor)", f"{a_lab}<{b_lab}", f"{a_lab}>{b_lab}",
            "p (exact, unadjusted)", "set aside (differing)", f"of them {a_lab}<{b_lab}",
            "set-aside positive values in"]
    lines = []
    for (dist, params, dim, n_keys), grp in frame.groupby(KEY[:4], sort=False):
        budgets = ([tuple(args.budgets)] if args.budgets else
                   [(n, n) for n in sorted(set(grp.loc[grp.scheme == a_name, "budget"])
                                           & set(grp.loc[grp.scheme == b_name, "budget"]))])
        for n_a, n_b in budgets:
            if args.budget and n_a not in args.budget:
                continue
            x, y = _paired_values(grp, a_name, n_a, b_name, n_b, args.metric)
            if x.size == 0:
                continue
            label = f"{n_a:g}" if n_a == n_b else f"{n_a:g} vs {n_b:g}"
            for f in args.floor:
                c = floor_counts(x, y, f)
                span = f"[{c['aside_min']:.2g}, {c['aside_max']:.2g}]" if c["aside"] else "–"
                lines.append("| " + " | ".join([
                    f"{dist} {params}", label, f"{f:g}", str(c["kept"]), str(c["a_lower"]),
                    str(c["b_lower"]), _p(c["p"]), str(c["aside"]), str(c["aside_a_lower"]), span]) + " |")
    if not lines:
        _fail(f"no rows for {a_name} vs {b_name}, {args.metric}"
              + (f" at budget {args.budget}" if args.budget else "")
              + (f" at budgets {args.budgets}" if args.budgets else "")
              + f": the two schemes share no case, budget and trial in {args.sweep}")
    print(f"\n{a_lab} vs {b_lab}, {args.metric}: sign counts on the trials whose larger value is above "
          f"the floor (floor 0: every trial)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    print("\n".join(lines))
    if "attn_entropy" in frame.columns:
        # one value per trial (every scheme of a case sees the same exact attention)
        h = frame.groupby(KEY[:4] + ["trial"], sort=False)["attn_entropy"].min().dropna()
        if len(h):
            print("\nExact attention entropy per case (nats; mean over trials, exp(mean) = effective keys)\n")
            print("| case | trials | mean H | exp(mean H) | min | max |\n|---|---|---|---|---|---|")
            for (dist, params, dim, n_keys), v in h.groupby(level=list(range(4)), sort=False):
                print(f"| {dist} {params} | {len(v)} | {v.mean():.3g} | {np.exp(v.mean()):.3g} | "
                      f"{v.min():.3g} | {v.max():.3g} |")


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
    p = sub.add_parser("floor", help="one pair's sign counts on the trials whose larger value exceeds a floor; "
                                     "attention entropies")
    p.add_argument("sweep")
    p.add_argument("--pair", nargs=2, default=["KQV", "QKQV"], metavar=("A", "B"))
    p.add_argument("--metric", default="kl")
    p.add_argument("--floor", nargs="+", type=float, default=[0.0, 1e-12])
    p.add_argument("--budget", nargs="*", type=float, default=[], help="only these budgets (of A)")
    p.add_argument("--budgets", nargs=2, type=float, metavar=("NA", "NB"),
                   help="A at NA against B at NB (e.g. one scheme at two budgets)")
    p.set_defaults(func=floor)
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main(sys.argv[1:])
