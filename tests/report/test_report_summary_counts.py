"""The report opens with a Summary of what it found, then its Methods (the old header).

Every number of the Summary is a count of the report's own tables (tables/comparisons.csv's
verdicts, tables/crossovers.csv, tables/summary.csv's ‡ marks): checked here against those
files on constructed sweeps of both designs and of a clustered capture.
"""

import re

import numpy as np
import pandas as pd
import pytest

import kvstats.report.sections as sections
from kvstats.report import hypothesis_report

from _sweep_frames import clustered_frame, make_frame
from _sweep_frames import sweep_result as _result

#: The verdicts of comparisons.csv ("not resolvable at …" by its start).
VERDICTS = ("different", "distributions differ", "equivalent within δ",
            "no significant difference", "inconclusive", "not resolvable")
#: How the Summary names each test of comparisons.csv.
NAMES = {"sign": "sign test", "mann_whitney": "Mann–Whitney test", "ks": "KS test",
         "energy": "energy test", "equivalence": "equivalence test"}


def _crossover_free_and_partly_blind():
    """No crossover; the argmax-shift sign test at n = 3 sees only 3 differing pairs (not
    resolvable), at n = 2 all 60: one (case, pair, metric) whose "no crossover" is the design's."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.8, ("KQV", 3): 0.0, ("QKQV", 3): 0.8},
                   n=60, seed=7)
    a = (f["scheme"] == "KQV") & (f["budget"] == 3.0)
    b = (f["scheme"] == "QKQV") & (f["budget"] == 3.0)
    same = f.loc[a, "argmax_shift"].to_numpy().copy()
    same[:3] += 1.0
    f.loc[b, "argmax_shift"] = same
    return f, {}, {}


def _crossover_heavy_fdr():
    """Crossovers (the shifts swap sides between budgets), a Pareto KL (‡), margins, fdr_bh."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.8, ("KQV", 3): 0.8, ("QKQV", 3): 0.0},
                   n=60, seed=5)
    heavy = (f["scheme"] == "KQV") & (f["budget"] == 2.0)
    f.loc[heavy, "kl"] = np.random.default_rng(5).pareto(0.7, int(heavy.sum())) + 1.0
    return f, {"equivalence": {"kl": 0.3}}, {"correction": "fdr_bh"}


def _few_pairs():
    """Six trials: no sign test can reach the family's first step (every one not resolvable)."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 2.0, ("KQV", 3): 2.0, ("QKQV", 3): 0.0},
                   n=6, seed=6)
    return f, {}, {}


def _two_samples_rank_margins():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.6, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=40, seed=8)
    return f, {"equivalence": {"kl": 0.1, "snr_k": 0.2}, "equivalence_test": "rank"}, {"pairing": "none"}


def _clustered(pairing):
    def build():
        f = clustered_frame()
        f.loc[f["scheme"] == "QKQV", "snr_k"] += 0.5
        return f, {}, {"pairing": pairing}
    return build


def _one_budget():
    """One pair at one budget: one energy test ("1 energy test"), no crossover to read."""
    return make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=20, seed=1), {}, {}


SWEEPS = {"paired, partly blind": _crossover_free_and_partly_blind,
          "one budget": _one_budget,
          "paired, crossovers, fdr_bh": _crossover_heavy_fdr,
          "paired, few pairs": _few_pairs,
          "two samples, rank margins": _two_samples_rank_margins,
          "texts, paired": _clustered("trial"),
          "texts, two samples": _clustered("none")}


def _report(tmp_path, build):
    f, report, kw = build()
    # every option declared in the config (given in the call, the Summary names them as set
    # after the sweep: test_report_options_after_sweep.py)
    rep = hypothesis_report(_result(f, report={**report, **kw, "energy_resamples": 19}), tmp_path,
                            figures=False)
    return rep, rep.files["markdown"].read_text()


def _section(md, title):
    return md.split(f"\n## {title}\n\n", 1)[1].split("\n## ", 1)[0]


def _summary_items(md):
    return [line[2:] for line in _section(md, "Summary").splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("name", list(SWEEPS))
def test_summary_counts_are_the_tables_counts(tmp_path, name):
    rep, md = _report(tmp_path, SWEEPS[name])
    items = _summary_items(md)
    assert 4 <= len(items) <= 8, items                      # short: at most ~8 lines
    comp = pd.read_csv(tmp_path / "tables" / "comparisons.csv", keep_default_na=False,
                       na_values=["NaN"])
    family = re.match(r"Family: (\d+) p-values adjusted together by (\S+) at α = ([\d.]+)", items[0])
    assert family is not None, items[0]
    assert int(family[1]) == int(comp["pvalue"].notna().sum())
    assert family[2] == rep.comparisons.attrs["correction"]
    assert float(family[3]) == rep.comparisons.attrs["alpha"]
    # one line per test of comparisons.csv, whose verdict counts are the file's
    for test, rows in comp.groupby("test"):
        line = [i for i in items if re.match(rf"\d+ {NAMES[test]}s?\b", i)]
        assert len(line) == 1, (test, items)
        table = rows["verdict"].map(lambda v: next(k for k in VERDICTS if v.startswith(k)))
        body = line[0].split(": ", 1)[1]
        if test == "equivalence":
            # the TOST's one conclusion, then what the others are: "different" is the location
            # test's rejection, not a TOST outcome (it read "88 different, 7 equivalent, ...")
            head = re.match(r"(\d+) equivalent within δ, (\d+) not\b", body)
            assert head is not None and int(head[1]) + int(head[2]) == len(rows), line[0]
            said = {"equivalent within δ": int(head[1]),
                    **{v: int(c) for c, v in re.findall(r"(\d+) (inconclusive)", body)},
                    **{"different": int(c) for c in re.findall(
                        r"(\d+) with a significant (?:sign|Mann–Whitney) test \(\"different\"\)", body)}}
            assert not re.search(r"\d+ different", body), line[0]
        else:
            # a verdict after its count, "distributions differ" as 'significant ("…")' (it
            # read "1 distributions differ")
            said = {v: int(c) for c, v in re.findall(rf"(\d+) (?:significant \(\")?({'|'.join(VERDICTS)})", body)}
            assert not re.search(r"\d+ distributions differ", body), line[0]
        said = {v: c for v, c in said.items() if c}
        assert said == table.value_counts().to_dict(), line[0]
        assert int(line[0].split()[0]) == len(rows)
        assert (len(rows) == 1) == bool(re.match(rf"1 {NAMES[test]}\b", line[0])), line[0]
        # "no significant difference" only where the test could have rejected
        nsd = rows[table == "no significant difference"]
        assert nsd["resolvable"].astype(bool).all() and not nsd["significant"].astype(bool).any()
    # the crossovers, and the blind ones, as the crossover table has them (crossovers.csv is
    # written from it; with no metric at two budgets the file is empty, without a header)
    cross = rep.crossovers
    line = next(i for i in items if i.startswith("Crossovers: "))
    if cross.empty:
        assert line.startswith("Crossovers: none can be read, no pair having a metric tested at two or more budgets")
        cross = pd.DataFrame({"crossover": pd.Series(dtype=bool), "winners": pd.Series(dtype=str)})
    else:
        assert cross.equals(pd.read_csv(tmp_path / "tables" / "crossovers.csv",
                                        keep_default_na=False, dtype={"params": str}))
    without = cross[~cross["crossover"]]
    budgets = without["winners"].str.split("; ")
    blind = int(budgets.map(lambda w: any("not resolvable" in v for v in w)).sum())
    unseen = bool(budgets.map(lambda w: all("not resolvable" in v for v in w)).all())
    if cross.empty:
        pass
    elif cross["crossover"].any():
        assert line.startswith(f"Crossovers: {int(cross['crossover'].sum())} of the {len(cross)} ")
    elif unseen:
        assert line.startswith("Crossovers: none can be seen, since no budget's test could")
    else:
        assert line.startswith(f"Crossovers: none in the {len(cross)} (case, pair, metric)s")
    told = re.search(r"; (\d+) of (them|the (\d+) without one) ha(?:s|ve) a budget whose test could not", line)
    unseen = unseen and not cross["crossover"].any()
    assert (int(told[1]) if told else 0) == (0 if unseen else blind), line
    if told and told[3]:
        assert int(told[3]) == len(without)
    if told:   # the crossover section's own count, the same
        assert f"Of the {len(without)} (case, pair, metric)s without a crossover, {blind} have" in md
    # the ‡ marks, as summary.csv has them
    summ = pd.read_csv(tmp_path / "tables" / "summary.csv")
    marked = int((~summ["ci_reliable"].astype(bool)).sum())
    line = next(i for i in items if i.startswith("Heavy tails"))
    theory = pd.read_csv(tmp_path / "tables" / "theory.csv")
    if marked or not theory["ci_reliable"].astype(bool).all():
        assert (f"{marked} of {len(summ)} summary means are marked ‡" if marked
                else "no summary mean is marked ‡") in line
    else:
        assert line == "Heavy tails and few nonzero values: no mean of the report's tables is marked."
    assert items[-1].startswith("Winners per budget: the winner column of each pair table")


def test_the_sweeps_reach_every_verdict_and_crossover_branch(tmp_path):
    """The constructed sweeps above are not all alike: between them every verdict, the three
    crossover sentences and a ‡ mark occur (else the count test would check little)."""
    seen, crossings = set(), set()
    for i, build in enumerate(SWEEPS.values()):
        rep, md = _report(tmp_path / str(i), build)
        seen |= {(t, next(k for k in VERDICTS if v.startswith(k)))
                 for t, v in zip(rep.comparisons["test"], rep.comparisons["verdict"])}
        line = next(i for i in _summary_items(md) if i.startswith("Crossovers: "))
        crossings.add("found" if re.match(r"Crossovers: \d", line) else
                      "none" if line.startswith("Crossovers: none in the") else
                      "unseen" if line.startswith("Crossovers: none can be seen") else line)
        crossings.add("blind" if " a budget whose test could not" in line else "")
        crossings.add("‡" if "summary means are marked ‡" in md else "")
    assert {("sign", "different"), ("sign", "no significant difference"), ("sign", "not resolvable"),
            ("mann_whitney", "different"), ("ks", "no significant difference"),
            ("energy", "distributions differ"), ("equivalence", "inconclusive")} <= seen, seen
    assert {"found", "none", "unseen", "blind", "‡"} <= crossings, crossings


@pytest.mark.parametrize("name", ["paired, crossovers, fdr_bh", "texts, two samples"])
def test_summary_says_the_family_design_and_unit(tmp_path, name):
    rep, md = _report(tmp_path, SWEEPS[name])
    family = _summary_items(md)[0]
    if name.startswith("texts"):
        assert ("design: two independent samples per pair (pairing = \"none\"); unit: the text, "
                "its trials averaged first (12 texts per mean, 10 trials per text); the "
                "trial-level tests (not independent) are a family of their own, not counted "
                "here.") in family
    else:
        # the bound's condition as the Methods' error-rate line words it (test_report_g2.py)
        assert ("(false discovery rate ≤ 0.05, under independence or positive regression "
                "dependence of the tests, which is not known to hold for two-sided tests on "
                "shared trials (fdr_by holds under any)); design: paired (pairing = \"trial\": each "
                "scheme's value on a trial matched with the other's on the same trial); unit: "
                "the trial (60 trials per mean).") in family


def test_summary_comes_first_then_methods(tmp_path):
    rep, md = _report(tmp_path, SWEEPS["paired, partly blind"])
    heads = [line for line in md.splitlines() if line.startswith("#")]
    assert heads[:4] == ["# kvstats hypothesis report", "## Summary", "## Methods", "## Metrics and units"]
    page = rep.files["html"].read_text()
    assert page.index("<h1>kvstats hypothesis report</h1>") < page.index("<h2>Summary</h2>") \
        < page.index("<h2>Methods</h2>") < page.index("<h2>Metrics and units</h2>")
    # the first result is read before any method: the Summary holds no Methods bullet
    assert "- Sweep:" not in _section(md, "Summary") and "- Sweep:" in _section(md, "Methods")


@pytest.mark.parametrize("name", ["paired, crossovers, fdr_bh", "texts, two samples"])
def test_every_header_sentence_is_in_methods_once(tmp_path, monkeypatch, name):
    """The old header's bullets (header_lines, unchanged) are the Methods, each once in the report."""
    said = []

    def recorded(*args, **kwargs):
        said.extend(header_lines(*args, **kwargs))
        return said

    header_lines = sections.header_lines
    monkeypatch.setattr(sections, "header_lines", recorded)
    rep, md = _report(tmp_path, SWEEPS[name])
    methods = [line[2:] for line in _section(md, "Methods").splitlines() if line.startswith("- ")]
    assert methods == said and len(said) >= 8
    for line in said:
        assert md.count(line) == 1, line
