"""Benchmark: ``compare_schemes`` now against the ``compare.py`` of an older commit, same frame, same process.

Until 2026-12-02 ``compare_schemes`` picked each (case, budget, pair)'s rows by boolean
masks over the case's frame (``scheme_pairs``) and sorted them on the unit as DataFrames
(``_matched``); now the frame is grouped once and each side's rows are positions into
float64 arrays taken once per metric. This script imports the old module from git
(``git show REV:kvstats/analysis/compare.py``; its helpers are today's), runs both on
the same frame for both designs, checks that the tables are identical (every column of
the old table, bit for bit, NaN where NaN; columns added since are listed; with the
energy tests too, at a fixed small B; the nine metrics of ``METRICS``, the old default)
and prints the CPU times (least of ``--repeats`` turns, old and new alternating) and
their ratio, plus the row selection alone (old ``scheme_pairs`` + ``_matched`` + column
reads vs the positions).

    .venv/bin/python experiments/bench_compare.py                     # results/quick, old = cb171f8
    .venv/bin/python experiments/bench_compare.py --result results/quick --old HEAD~1 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

import kvstats
from kvstats.analysis import compare as new
from kvstats.analysis.frame import PROFILE_METRICS, METRICS

ROOT = Path(__file__).resolve().parents[1]


def old_module(rev: str) -> types.ModuleType:
    """kvstats/analysis/compare.py as of ``rev``, imported beside today's package."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:kvstats/analysis/compare.py"],
                         check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType("kvstats.analysis._compare_old")
    mod.__file__ = f"<{rev}:kvstats/analysis/compare.py>"
    sys.modules[mod.__name__] = mod     # dataclasses and typing look the module up
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def best_times(fns, repeats: int) -> tuple[list[float], list[object]]:
    """Least CPU seconds of each function over ``repeats`` turns (old, new, old, new, ...):
    taking turns puts both under the same load of a shared machine, and CPU time moves
    less with it than wall time (one thread: run with OPENBLAS_NUM_THREADS=1). Each runs once
    untimed first: with ``--repeats 1`` the first (old) call paid the cold start alone."""
    outs = [fn() for fn in fns]
    times = np.full((repeats, len(fns)), np.inf)
    for r in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            outs[i] = fn()
            times[r, i] = time.process_time() - t0
    return times.min(axis=0).tolist(), outs


#: Cells the old revision's table leaves NaN and today's fills (2b8e988: a paired energy row
#: counts the pairs whose profiles differ), and text cells today's extends by a reason after
#: ": " (278f6bd: an unresolvable sign-test verdict says how many of its pairs differ):
#: features added since, not changed numbers.
FILLED_SINCE = ("n_informative",)
EXTENDED_SINCE = ("winner", "verdict")


def same_table(a: pd.DataFrame, b: pd.DataFrame) -> tuple[bool, int]:
    """(same, cells): ``b`` has every column of ``a`` in ``a``'s order, with the same dtypes
    and values bit for bit (NaN where NaN), and the same rows and attrs, apart from
    ``cells`` cells of :data:`FILLED_SINCE` and :data:`EXTENDED_SINCE`. Columns ``b`` adds
    after the old revision (listed by :func:`added_columns`) are features the old code
    lacks."""
    if [c for c in b.columns if c in a.columns] != list(a.columns) or len(a) != len(b) \
            or a.attrs != b.attrs:
        return False, 0
    cells = 0
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if a[c].dtype != b[c].dtype:
            return False, 0
        if c in FILLED_SINCE:
            since = np.isnan(x) & ~np.isnan(y)
        elif c in EXTENDED_SINCE:
            since = np.array([u != v and v.startswith(f"{u}: ") for u, v in zip(x, y)], dtype=bool)
        else:
            since = np.zeros(len(x), dtype=bool)
        x, y = x[~since], y[~since]
        cells += int(since.sum())
        if x.dtype.kind == "f":
            if not np.array_equal(x.view(np.int64), y.view(np.int64)):
                return False, 0
        elif not np.array_equal(x, y):
            return False, 0
    return True, cells


def added_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    return [c for c in b.columns if c not in a.columns]


def selection_old(old: types.ModuleType, frame: pd.DataFrame, comparisons, unit: str | None) -> list:
    out = []
    for case, ba, bb, a, b, ga, gb in old.scheme_pairs(frame, comparisons):
        if unit:
            ga, gb = old._matched(ga, gb, unit, case, ba, bb, a, b)
        out.append([ga[m].to_numpy(np.float64) for m in METRICS]
                   + [ga[list(PROFILE_METRICS)].to_numpy(np.float64),
                      gb[list(PROFILE_METRICS)].to_numpy(np.float64)])
    return out


def selection_new(frame: pd.DataFrame, comparisons, unit: str | None) -> list:
    values = {m: frame[m].to_numpy(np.float64) for m in METRICS}
    profile_t = frame[list(PROFILE_METRICS)].to_numpy(np.float64).T.copy()
    units = frame[unit].to_numpy() if unit else None
    out = []
    for case, ba, bb, a, b, ia, ib in new._pair_positions(frame, comparisons):
        if unit:
            ia, ib = new._matched(ia, ib, units, unit, case, ba, bb, a, b)
        out.append([values[m][ia] for m in METRICS] + [profile_t.take(ia, axis=1).T, profile_t.take(ib, axis=1).T])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--result", default=str(ROOT / "results" / "quick"), help="a sweep directory")
    ap.add_argument("--old", default="cb171f8", help="the git revision of the old compare.py")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--energy-resamples", type=int, default=99,
                    help="fixed B of the energy tests in the identity check")
    args = ap.parse_args()
    old = old_module(args.old)
    res = kvstats.load_result(args.result)
    frame, comparisons = res.frame, [tuple(p) for p in res.config.comparisons]
    n_cases = frame.groupby(list(new.CASE_COLUMNS), sort=False).ngroups
    print(f"pandas {pd.__version__}, numpy {np.__version__}, {platform.machine()}, "
          f"load {os.getloadavg()[0]:.2f}; {args.result}: {len(frame):,} rows, {n_cases} cases, "
          f"{len(comparisons)} pairs; old = {args.old}")

    print(f"\n{'pairing':8s} {'energy':6s} {'old (CPU s)':>11s} {'new (CPU s)':>11s} {'ratio':>6s} "
          f"{'pairs':>5s} {'saved/pair (ms)':>15s}  identical")
    for pairing in ("trial", "none"):
        kw = dict(pairing=pairing, energy=False, metrics=METRICS)
        (t_old, t_new), (a, b) = best_times(
            [lambda: old.compare_schemes(frame, comparisons, **kw),
             lambda: new.compare_schemes(frame, comparisons, **kw)], args.repeats)
        n_pairs = len(a.drop_duplicates([*new.CASE_COLUMNS, "budget", "scheme_a", "scheme_b"]))
        same, cells_since = same_table(a, b)
        added = added_columns(a, b)
        print(f"{pairing:8s} {'no':6s} {t_old:11.2f} {t_new:11.2f} {t_old / t_new:5.2f}x {n_pairs:5d} "
              f"{1e3 * (t_old - t_new) / n_pairs:15.2f}  {same}"
              + (f" (new columns, not in {args.old}: {', '.join(added)})" if added else "")
              + (f" ({cells_since} cells of {FILLED_SINCE + EXTENDED_SINCE} filled or extended since)" if cells_since else ""))
        if not same:
            raise SystemExit(f"pairing={pairing}: the tables differ")
        # the energy rows too (their X, Y come from the new positions), once, at a fixed B
        kw = dict(pairing=pairing, metrics=METRICS, energy_resolution="fixed",
                  energy_resamples=args.energy_resamples)
        same, cells_since = same_table(old.compare_schemes(frame, comparisons, **kw),
                                    new.compare_schemes(frame, comparisons, **kw))
        print(f"{pairing:8s} {'B=' + str(args.energy_resamples):6s} {'':>11s} {'':>11s} {'':>6s} "
              f"{n_pairs:5d} {'':>15s}  {same}"
              + (f" ({cells_since} cells of {FILLED_SINCE + EXTENDED_SINCE} filled or extended since)" if cells_since else ""))
        if not same:
            raise SystemExit(f"pairing={pairing}, energy: the tables differ")

    if hasattr(old, "_pair_positions"):   # the old revision already selects rows by position
        print(f"\nrow selection alone: skipped ({args.old} already selects rows by position; "
              "compare with a revision before 7c8cf6e, such as the default cb171f8)")
        print(f"\nload {os.getloadavg()[0]:.2f} at the end; CPU seconds")
        return
    print("\nrow selection alone (pairs, unit matching, metric and 6D reads):")
    for pairing, unit in (("trial", "cluster" if "cluster" in frame.columns else "trial"), ("none", None)):
        f = old._clusters(frame, "frame") if unit == "cluster" else frame
        (t_old, t_new), (a, b) = best_times(
            [lambda: selection_old(old, f, comparisons, unit),
             lambda: selection_new(f, comparisons, unit)], args.repeats)
        same = len(a) == len(b) and all(
            x.shape == y.shape and x.flags.f_contiguous == y.flags.f_contiguous
            and np.array_equal(x, y, equal_nan=True) for p, q in zip(a, b) for x, y in zip(p, q))
        print(f"  {pairing:6s} old {1e3 * t_old / len(a):6.2f} ms/pair, new {1e3 * t_new / len(b):6.3f} "
              f"ms/pair ({t_old / t_new:.0f}x), {len(a)} pairs, same arrays and layout: {same}")
        if not same:
            raise SystemExit("the selected rows differ")
    print(f"\nload {os.getloadavg()[0]:.2f} at the end; CPU seconds")


if __name__ == "__main__":
    main()
