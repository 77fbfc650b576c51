"""Two reports of one sweep side by side: which location-test winners agree, flip, appear, vanish.

Usage:
    python experiments/compare_designs.py REPORT_A REPORT_B [--list]

REPORT_A and REPORT_B are report folders (their ``tables/comparisons.csv``, as written by
``kvstats report DIR --out REPORT --pairing none|trial``) or the CSV files themselves.
Each report's location test is the one that carries its winners (Mann–Whitney for
``pairing = "none"``, the sign test for ``"trial"``: ``kvstats.analysis.compare.LOCATION_TESTS``);
rows are joined on (case, budget, budget_b, scheme_a, scheme_b, metric). Prints the
family sizes, significant and not-resolvable counts per test, the winner transitions
A -> B and, with ``--list``, every row whose winner is not the same in both. Used for
docs/statistics.md ("The paired design") and docs/results.md ("The d = 128 claims under
the paired design").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from kvstats.analysis.compare import LOCATION_TESTS, NO_DIFFERENCE, NOT_RESOLVABLE

KEY = ["distribution", "params", "dim", "n_keys", "budget", "budget_b", "scheme_a", "scheme_b", "metric"]


def read_comparisons(path: str) -> pd.DataFrame:
    p = Path(path)
    return pd.read_csv(p / "tables" / "comparisons.csv" if p.is_dir() else p)


def location_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the report's winner-carrying test, indexed by KEY."""
    tests = set(LOCATION_TESTS.values()) & set(table["test"])
    if len(tests) != 1:
        raise ValueError(f"a report must have exactly one location test of {sorted(LOCATION_TESTS.values())}; "
                         f"found {sorted(tests)}")
    return table[table["test"] == tests.pop()].set_index(KEY)


def transitions(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per location row of both: the two winners and the transition label."""
    la, lb = location_rows(a), location_rows(b)
    cols = ["test", "winner", "pvalue_adjusted", "effect"]
    joined = la[cols].merge(lb[cols], left_index=True, right_index=True, suffixes=("_a", "_b"))
    won_a = ~joined["winner_a"].str.startswith((NO_DIFFERENCE, NOT_RESOLVABLE))
    won_b = ~joined["winner_b"].str.startswith((NO_DIFFERENCE, NOT_RESOLVABLE))
    same = joined["winner_a"] == joined["winner_b"]
    joined["transition"] = "neither"
    joined.loc[won_a & won_b, "transition"] = "agree"
    joined.loc[won_a & won_b & ~same, "transition"] = "flip"
    joined.loc[~won_a & won_b, "transition"] = "appear"
    joined.loc[won_a & ~won_b, "transition"] = "vanish"
    return joined


def main(argv: list[str] | None = None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report_a")
    ap.add_argument("report_b")
    ap.add_argument("--list", action="store_true", help="print every row whose winner differs")
    args = ap.parse_args(argv)
    a, b = read_comparisons(args.report_a), read_comparisons(args.report_b)
    for name, t in (("A", a), ("B", b)):
        sig = t.groupby("test")["significant"].sum().astype(int).to_dict()
        print(f"{name}: {len(t)} tests {t['test'].value_counts().to_dict()}; significant {sig}; "
              f"not resolvable {int((~t['resolvable']).sum())}")
    joined = transitions(a, b)
    counts = joined["transition"].value_counts().reindex(["agree", "flip", "appear", "vanish", "neither"],
                                                         fill_value=0)
    print(f"winners A -> B over {len(joined)} location rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.list:
        with pd.option_context("display.width", 220, "display.max_rows", None, "display.max_columns", None):
            print(joined[joined["transition"].isin(["flip", "appear", "vanish"])]
                  .reset_index()[["distribution", "params", "budget", "scheme_a", "scheme_b", "metric",
                                  "transition", "winner_a", "winner_b", "pvalue_adjusted_a",
                                  "pvalue_adjusted_b", "effect_a", "effect_b"]].to_string(index=False))
    return joined


if __name__ == "__main__":
    main()
