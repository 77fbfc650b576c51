"""experiments/check_results_doc.py ``floor``: the sign counts of one scheme pair on the
trials whose larger value exceeds a floor, the producer of docs/results.md's Claim 1
sensitivity numbers (referee RY, F2; before it they came from no script).

References: the exact two-sided binomial p of scipy.stats.binomtest; the report's own sign
counts (``kvstats report``'s comparisons.csv note) for floor 0; hand-made pairs for the
set-aside counts. One tiny sweep (_tiny_sweep.py, d = 16, N = 32, 12 trials): seconds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, binomtest

from kvstats.cli import main as kvstats_main

from _tiny_sweep import tiny_toml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "check_results_doc.py"


def _script():
    spec = importlib.util.spec_from_file_location("check_results_doc_floor", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("crd_floor")
    (root / "t.toml").write_text(tiny_toml(seed=7, budgets=(2, 3), schemes=("KQV", "QKQV", "KV")))
    assert kvstats_main(["sweep", "--config", str(root / "t.toml"), "--out", str(root / "s"), "--workers", "1",
                         "--no-progress", "--no-figures"]) == 0
    return root / "s"


def _rows(text: str) -> list[list[str]]:
    table = text.split("Exact attention")[0]
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| case")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_hand_made_pairs():
    # two near-zero pairs (one each way), one pair of zeros, a rounding tie, three material pairs
    a = np.array([1e-300, 3e-300, 0.0, 0.3, 0.5, 0.1, 0.2])
    b = np.array([1e-310, 2e-300, 0.0, 0.3 * (1 + 1e-14), 0.4, 0.2, 0.7])
    c = _script().floor_counts(a, b, 1e-12)
    assert (c["kept"], c["a_lower"], c["b_lower"]) == (4, 2, 1)
    assert (c["aside"], c["aside_a_lower"]) == (2, 0)   # both near-zero pairs have b lower
    assert (c["aside_min"], c["aside_max"]) == (1e-310, 3e-300)
    assert c["p"] == pytest.approx(binomtest(1, 3).pvalue, rel=1e-12)   # scipy: 1.0
    c0 = _script().floor_counts(a, b, 0.0)   # no floor: every differing pair counts
    assert (c0["a_lower"], c0["b_lower"], c0["aside"]) == (2, 3, 0)
    assert np.isnan(c0["aside_max"])


def test_p_agrees_with_scipy_binomtest():
    rng = np.random.default_rng(1)
    f = _script().floor_counts
    for _ in range(30):
        n = int(rng.integers(1, 400))
        a, b = rng.exponential(size=n), rng.exponential(size=n) * rng.uniform(0.5, 2.0)
        fl = float(rng.choice([0.0, 0.1, 1.0]))
        c = f(a, b, fl)
        keep = np.maximum(a, b) > fl
        k, m = int((a < b)[keep].sum()), int((a != b)[keep].sum())
        assert (c["a_lower"], c["a_lower"] + c["b_lower"]) == (k, m)
        assert c["p"] == pytest.approx(binomtest(k, m).pvalue if m else 1.0, rel=1e-9)


def test_null_calibration_and_power():
    # exchangeable pairs with a third of them near zero: the kept pairs' exact test holds its
    # level (sign test: conservative; 2,000 replicates, binomial 99.9% bound on the rate);
    # a material shift on the kept pairs (b = 1.3 a) is found at least 80% of the time
    rng = np.random.default_rng(2)
    f = _script().floor_counts
    reps, n = 2000, 60
    p_null, p_alt = np.empty(reps), np.empty(reps)
    for i in range(reps):
        scale = np.where(rng.random(n) < 1 / 3, 1e-300, 1.0)
        a, b = rng.exponential(size=n) * scale, rng.exponential(size=n) * scale
        p_null[i] = f(a, b, 1e-12)["p"]
        p_alt[i] = f(a, a * np.where(scale == 1.0, 1.3, 0.5), 1e-12)["p"]
    assert (p_null <= 0.05).mean() <= binom.ppf(0.999, reps, 0.05) / reps
    assert (p_null <= 0.05).mean() >= 0.02   # not a test that never rejects
    assert (p_alt <= 0.05).mean() >= 0.8


@pytest.mark.parametrize("kw, word", [(dict(floor=-1.0), "floor"), (dict(floor=float("nan")), "floor"),
                                      (dict(a=[1.0, np.nan]), "NaN"), (dict(b=[1.0]), "shapes")])
def test_bad_input_names_the_argument(kw, word):
    args = dict(a=[1.0, 2.0], b=[2.0, 1.0], floor=0.0) | kw
    with pytest.raises(ValueError, match=word):
        _script().floor_counts(args["a"], args["b"], args["floor"])


def test_floor_zero_counts_are_the_reports(sweep, capsys):
    _script().main(["floor", str(sweep), "--pair", "KQV", "QKQV", "--floor", "0", "1e9"])
    rows = _rows(capsys.readouterr().out)
    table = pd.read_csv(sweep / "tables" / "comparisons.csv", keep_default_na=False)
    sign = table[(table.test == "sign") & (table.metric == "kl")]
    assert len(rows) == 2 * len(sign) == 4
    for row in rows:
        n, fl = float(row[1]), float(row[2])
        note = sign.loc[sign.budget == n, "note"].iloc[0]
        if fl == 0:   # KQV > QKQV is the report's "a > b"
            assert f"({row[5]} a > b, {row[4]} a < b" in note, (row, note)
        else:         # a floor above every KL sets every differing trial aside
            assert row[3:6] == ["0", "0", "0"] and int(row[7]) == 12 and row[6] == "1"


def test_one_scheme_at_two_budgets_and_entropy(sweep, capsys):
    _script().main(["floor", str(sweep), "--pair", "QKQV", "QKQV", "--budgets", "3", "2", "--floor", "0"])
    out = capsys.readouterr().out
    assert "QKQV@3<QKQV@2" in out
    rows = _rows(out)
    assert len(rows) == 1 and rows[0][1] == "3 vs 2"
    frame = pd.read_parquet(sweep / "results.parquet")
    q = frame[frame.scheme == "QKQV"].pivot_table(index="trial", columns="budget", values="kl")
    assert (int(rows[0][4]), int(rows[0][5])) == (int((q[3] < q[2]).sum()), int((q[3] > q[2]).sum()))
    h = frame.groupby("trial").attn_entropy.min().mean()
    line = next(ln for ln in out.splitlines() if ln.startswith("| gaussian") and ln.count("|") == 7)
    assert float(line.split("|")[3]) == pytest.approx(h, rel=5e-3)


@pytest.mark.parametrize("argv, word", [
    (["--pair", "KQV", "QKQv"], "QKQv"),
    (["--pair", "KQV", "KQV"], "--budgets"),
    (["--pair", "KQV", "KQV", "--budgets", "2", "2"], "two different budgets"),
    (["--metric", "kll"], "kll"),
    (["--floor", "-1"], "--floor"),
    (["--budget", "7"], "no rows"),
])
def test_bad_arguments_fail_loudly(sweep, capsys, argv, word):
    with pytest.raises(SystemExit) as exc:
        _script().main(["floor", str(sweep), *argv])
    assert exc.value.code not in (0, None) and word in str(exc.value)
