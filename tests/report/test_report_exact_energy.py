"""The report on energy tests that enumerate their relabelling group (method "exact", up to 20
differing pairs or 11 vs 11) beside drawn ones: the table names the relabellings, not a B;
the Methods count early stops, B and the median over the drawn rows only."""

import math

import pandas as pd

from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result


def _tests_line(md):
    return next(line for line in md.splitlines() if line.startswith("- Tests:"))


def _energy_cells(md):
    return [line.split(" | ")[-2] for line in md.splitlines() if "| 6D energy" in line]


def test_exact_and_drawn_rows_are_said_apart(tmp_path):
    """10 vs 10 (separated: exact, C(20, 10)/2 classes) beside 30 vs 30 (null: drawn, stops
    early). The exact row's cell read "(B = 92378/759)", and the Methods counted it with the
    drawn ones ("of 2 stopped early", a median over both)."""
    small = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 3.0}, n=10, seed=7)
    big = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=30, seed=8,
                     case=("gaussian", "-", 64, 256))
    rep = hypothesis_report(sweep_result(pd.concat([small, big], ignore_index=True)), tmp_path,
                            figures=False, energy_resamples=19, pairing="none")
    md, comp = rep.files["markdown"].read_text(), rep.comparisons
    exact, drawn = (comp[(comp.test == "energy") & (comp.n_a == n)].iloc[0] for n in (10, 30))
    classes = math.comb(20, 10) // 2
    assert exact.note.endswith(f", exact ({classes} relabellings)") and exact.n_permutations == classes
    assert drawn.n_permutations < drawn.max_permutations            # stopped early
    b, used = int(drawn.max_permutations), int(drawn.n_permutations)
    cells = _energy_cells(md)
    assert len(cells) == 2 and cells[0].endswith(f"(exact, {classes} relabellings)")
    assert cells[1].endswith(f"(B = {used}/{b})")
    line = _tests_line(md)
    assert (f"Energy tests: 1 of 2 exact, every relabelling enumerated where that costs at most "
            "2^28 multiply-adds (the C(n_a + n_b, n_a) splits of the pooled units, halved at n vs "
            "n; every split of up to 21 units, of 22 all but 10 vs 12), without Monte Carlo error; "
            "the others Besag–Clifford sequential "
            f"p-values, at most B = {b} permutations (the family resolution, energy_resamples = 19 "
            f"raised to it), each stopping after 10 exceedances: 1 of 1 stopped early (median "
            f"{used} permutations); drawn p-values carry Monte Carlo error (p = 1/(1 + B) has a "
            "99% interval up to about 5.3/B), so a verdict near its threshold may change with "
            "the seed. ") in line
    assert (f"; a drawn permutation test: B ≥ {b} permutations; an exact permutation test: a floor "
            "1/C(n_a + n_b, n_a) (2/C(2n, n) at n vs n) ≤ that)") in line
    assert ("could not have rejected even on the most extreme data (a drawn permutation test: "
            "not at least half the time), the rest of the family") in line
    summary = md.split("## Summary")[1].split("\n## ")[0]
    energy = next(s for s in summary.splitlines() if s.startswith("- 2 energy tests"))
    assert energy.endswith("1 no significant difference (each could have rejected on the most "
                           "extreme data, a drawn permutation test at least half the time: its "
                           "resolution, not its power).")
    assert "half the time" not in next(s for s in summary.splitlines() if "Mann–Whitney tests" in s)


def test_a_report_of_exact_rows_only_names_no_b(tmp_path):
    """8 pairs: both energy tests enumerate the 2^7 swap classes; no B, no early stop."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 2.0}, n=8,
                   seed=9)
    rep = hypothesis_report(sweep_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    line = _tests_line(md)
    assert ("Energy tests: 2 of 2 exact, every relabelling enumerated where that costs at most "
            "2^28 multiply-adds (the 2^(m−1) swap classes of the m pairs that differ, up to m = 20), "
            "without Monte Carlo error. ") in line
    assert "Besag–Clifford" not in line and "B ≥" not in line and "half the time" not in line
    assert "; a sign test or an exact energy test: " in line
    assert [c.endswith("(exact, 128 relabellings)") for c in _energy_cells(md)] == [True, True]
    assert "half the time" not in md.split("## Summary")[1].split("\n## ")[0]
