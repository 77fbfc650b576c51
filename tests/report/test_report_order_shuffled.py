"""A report is a function of the sweep's data, not of its frame's row order: the same
rows, shuffled, write the same report.md, tables and report.json (but the seconds it took).

Before, the tables followed the rows' order of first appearance (schemes, budgets, cases
in another order) and the summary's and theory table's means took their last bits from
the order their values were summed in."""

import dataclasses
import json

import pytest

import kvstats

TABLES = ("summary", "comparisons", "crossovers", "theory")


@pytest.fixture(scope="module")
def result():
    # schemes listed out of alphabetical order: the report keeps the config's order
    return kvstats.run_sweep({"schemes": ["QKQV", "KQV"], "budgets": [2, 3],
                              "distributions": ["gaussian", "heavy_tailed"], "dims": [16],
                              "n_keys": [32], "n_trials": 12, "seed": 3},
                             executor="serial", progress=False)


def _report(result, folder, pairing):
    kvstats.hypothesis_report(result, folder, energy_resamples=49, bootstrap_resamples=99,
                              figures=False, pairing=pairing, equivalence={"kl": 0.5})
    payload = json.loads((folder / "report.json").read_text())
    return {"report.md": (folder / "report.md").read_text(),
            **{t: (folder / "tables" / f"{t}.csv").read_text() for t in TABLES},
            "report.json": payload}


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_shuffled_rows_write_the_same_report(result, tmp_path, pairing):
    ref = _report(result, tmp_path / "ref", pairing)
    # a new index too: nothing may read the frame's index labels
    shuffled = result.frame.sample(frac=1.0, random_state=7).reset_index(drop=True)
    got = _report(dataclasses.replace(result, frame=shuffled), tmp_path / "shuffled", pairing)
    for name in ref:
        assert got[name] == ref[name], name


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_shuffled_rows_give_the_same_table_rows(result, tmp_path, pairing):
    """Each table's rows, bit for bit, whatever their order (the tables' own part)."""
    ref = _report(result, tmp_path / "ref", pairing)
    shuffled = result.frame.sample(frac=1.0, random_state=7).reset_index(drop=True)
    got = _report(dataclasses.replace(result, frame=shuffled), tmp_path / "shuffled", pairing)
    for name in TABLES:
        assert sorted(got[name].splitlines()) == sorted(ref[name].splitlines()), name
