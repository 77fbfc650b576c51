"""experiments/check_results_doc.py: it fails loudly instead of printing empty or "?"
tables (unknown scheme or metric, a pair a report does not test), reads a report's row in
either order, and its docstring's examples run (referee RI, F5).

One tiny sweep (_tiny_sweep.py: KQV, QKQV, KV on Gaussian keys, d = 16, N = 32, 12 trials, budgets 2..4)
whose report compares only KQV with QKQV, plus its two-sample report: seconds."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pandas as pd
import pytest

from kvstats.cli import main as kvstats_main

from _tiny_sweep import tiny_toml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "check_results_doc.py"

TOML = tiny_toml(seed=5, budgets=(2, 3, 4), schemes=("KQV", "QKQV", "KV"))


def _script():
    spec = importlib.util.spec_from_file_location("check_results_doc_j4", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("crd")
    (root / "t.toml").write_text(TOML)
    sweep, none = root / "sweep", root / "none"
    assert kvstats_main(["sweep", "--config", str(root / "t.toml"), "--out", str(sweep), "--workers", "1",
                         "--no-progress", "--no-figures"]) == 0
    assert kvstats_main(["report", str(sweep), "--pairing", "none", "--no-figures", "--out", str(none)]) == 0
    return sweep, none


def _run(argv, capsys):
    _script().main(argv)
    return capsys.readouterr().out


def _rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| case")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_unknown_scheme_fails_with_its_name(folders, capsys):
    sweep, _ = folders
    with pytest.raises(SystemExit) as exc:  # the old script printed a header, no rows, exit 0
        _run(["pairs", str(sweep), "--paired", str(sweep), "--pair", "KQV", "QKQv", "--no-ratio"], capsys)
    assert exc.value.code not in (0, None) and "QKQv" in str(exc.value) and "KQV" in str(exc.value)


def test_unknown_metric_fails(folders, capsys):
    sweep, _ = folders
    with pytest.raises(SystemExit) as exc:  # the old script raised a KeyError traceback
        _run(["pairs", str(sweep), "--pair", "KQV", "QKQV", "--metric", "kll", "--no-ratio"], capsys)
    assert "kll" in str(exc.value)


def test_pair_the_report_does_not_test_fails(folders, capsys):
    # KV is in the sweep but not in [report] comparisons: the old script printed "?" cells
    sweep, none = folders
    for flag, folder in (("--paired", sweep), ("--two-sample", none)):
        with pytest.raises(SystemExit) as exc:
            _run(["pairs", str(sweep), flag, str(folder), "--pair", "KQV", "KV", "--no-ratio"], capsys)
        assert exc.value.code not in (0, None)
        assert "KQV vs KV" in str(exc.value) and str(folder) in str(exc.value)


def test_budget_absent_fails(folders, capsys):
    sweep, _ = folders
    with pytest.raises(SystemExit) as exc:  # the old script printed an empty table, exit 0
        _run(["pairs", str(sweep), "--paired", str(sweep), "--budget", "7", "--no-ratio"], capsys)
    assert "no rows" in str(exc.value)


def test_reversed_pair_reads_the_report_row_flipped(folders, capsys):
    # the report stores KQV vs QKQV; asked for QKQV vs KQV the old script printed "?"
    sweep, none = folders
    args = ["--paired", str(sweep), "--two-sample", str(none), "--metric", "kl", "snr_k", "--no-ratio"]
    forward = _rows(_run(["pairs", str(sweep), "--pair", "KQV", "QKQV", *args], capsys))
    backward = _rows(_run(["pairs", str(sweep), "--pair", "QKQV", "KQV", *args], capsys))
    assert len(forward) == len(backward) == 6  # 2 metrics x 3 budgets
    table = pd.read_csv(sweep / "tables" / "comparisons.csv", keep_default_na=False)
    for f, b in zip(forward, backward):
        assert "?" not in f + b
        assert (f[2], f[3]) == (b[3], b[2])  # means swap
        assert (f[5], f[6]) == (b[6], b[5])  # a > b and a < b counts swap
        eff = re.findall(r"[+-]\d\.\d{3}", f[7])
        assert re.findall(r"[+-]\d\.\d{3}", b[7]) == [f"{-float(eff[0]):+.3f}", f"{-float(eff[2]):+.3f}",
                                                     f"{-float(eff[1]):+.3f}"]
        assert f[8:10] == b[8:10] and f[-2:] == b[-2:]  # p and winner (a name) unchanged
    # and the forward row is the report's own
    row = table[(table.test == "sign") & (table.metric == "kl") & (table.budget == 2)].iloc[0]
    assert forward[0][7].startswith(f"{float(row.effect):+.3f}")


def test_cross_budget_pair_shows_the_reports_budget_pair(tmp_path, capsys):
    # K4V2 (3 bits) vs K4V4 (4 bits): no common budget; the old script printed no rows
    (tmp_path / "kf.toml").write_text(tiny_toml(seed=5, budgets=(4,), schemes=("K4V2", "K4V4")))
    assert kvstats_main(["sweep", "--config", str(tmp_path / "kf.toml"), "--out", str(tmp_path / "kf"),
                         "--workers", "1", "--no-progress", "--no-figures"]) == 0
    budgets = pd.read_parquet(tmp_path / "kf" / "results.parquet").groupby("scheme").budget.unique()
    assert set(budgets["K4V2"]) != set(budgets["K4V4"])  # else this test tests nothing new
    out = _run(["pairs", str(tmp_path / "kf"), "--paired", str(tmp_path / "kf"), "--pair", "K4V4", "K4V2",
                "--metric", "kl", "--no-ratio"], capsys)
    rows = _rows(out)
    assert len(rows) == 1 and " vs " in rows[0][1] and "?" not in rows[0]


def test_docstring_examples_run(folders, capsys):
    sweep, none = folders
    doc = _script().__doc__.split("\n\n")[1]
    commands = [" ".join(c.split()) for c in doc.replace("\\\n", " ").splitlines() if c.strip()]
    assert [c.split()[2] for c in commands] == ["pairs", "means", "crossovers", "replay", "floor"]
    for command in commands:
        argv = shlex.split(command)[2:]
        argv = [str(none) if a == "results/dalberto_d128_none" else str(sweep) if a == "results/dalberto_d128"
                else a for a in argv]
        assert not any(a.startswith("results/") for a in argv), command
        if argv[0] == "pairs":
            argv.append("--no-ratio")  # the bootstrap is not what is checked here
        text = _run(argv, capsys)
        assert text.strip() and "?" not in text.split(), command
