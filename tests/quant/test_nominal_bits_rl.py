"""Nominal bits are the code bits per coded coordinate a coder stores (referee RL, F1).

The report calls cells with ``bits_nominal == budget`` equal-budget and defines the
nominal n as code bits per coordinate (kvstats/report/wording.py). ``ProdQuantizer`` kept
``nominal_bits = bits`` whatever its sketch rows ``m`` (QKQV with m = 32 at d = 128, n = 3
stores 2·128 + 32 code bits per 128 coordinates: 2.25), and ``QJLKeyQuantizer`` ignored
its outlier sketch's signs. The reference values here are the coders' own ``stored_bits``
(code parts only) divided by the coded coordinates, and the hand counts in comments.
"""

from __future__ import annotations

import pandas as pd
import pytest

import kvstats
from kvstats.quant import contract
from kvstats.quant.contract import budgets
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.qjl_keys import QJLKeyQuantizer
from kvstats.quant.registry import BUILTIN
from kvstats.report.wording import _budget_text
from kvstats.results import read_table

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# powers of two and not (96, 100, 36, 160: a Hadamard rotation pads them)
DIMS = (32, 36, 64, 96, 100, 128, 160)


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_builtin_default_is_at_its_budget_for_every_d(name):
    """The change must not move any default cell off its budget (so no default cell
    changes which comparisons are equal-budget)."""
    params = dict(BUILTIN[name].example_params)
    checked = 0
    for dim in DIMS:
        for bits in budgets(name):
            try:
                scheme = kvstats.make_scheme(name, bits, dim, **params)
            except ValueError:   # a block format's d must be a multiple of 16 or 32
                continue
            asked = scheme.bits if bits is None else bits
            if asked is None:    # identity records no budget: its 32 bits are its nominal
                asked = 32.0
            assert scheme.bits_per_coord(100).nominal == asked, (name, dim, bits)
            checked += 1
    assert checked >= len(budgets(name))   # at least the powers of two ran


def _prod_code_bits(coder: ProdQuantizer) -> float:
    """Code bits per coded coordinate from the coder's own accounting (norms left out)."""
    parts = coder.stored_bits(1)
    return (parts["mse_codes"] + parts["residual_signs"]) / coder.mse.rotation.out_dim


@pytest.mark.parametrize("dim,bits,m,expected", [
    (128, 3, 32, 2.25),      # 2·128 + 32 over 128: the referee's QKQV case
    (128, 3, 256, 4.0),      # turboquant_prod m = 256: 2·128 + 256 over 128
    (128, 3, 512, 6.0),      # 2·128 + 512 over 128
    (96, 3, 64, 2.5),        # d_pad 128: 2·128 + 64 over 128
    (96, 4, None, 4.0),      # default m = d_pad: the budget
    (100, 2, 100, 1 + 100 / 128),
])
def test_prod_nominal_is_the_code_bits_it_stores(dim, bits, m, expected):
    coder = ProdQuantizer(dim, bits, m=m)
    assert coder.nominal_bits == pytest.approx(expected, rel=1e-15)
    assert coder.nominal_bits == pytest.approx(_prod_code_bits(coder), rel=1e-15)


@pytest.mark.parametrize("name", ["QKQV", "turboquant_prod", "KQV"])
def test_a_non_default_m_moves_the_schemes_nominal_and_the_contract_says_so(name):
    b = kvstats.make_scheme(name, 3, 128, m=32).bits_per_coord(1024)
    assert b.value_nominal == 2.25
    assert b.key_nominal == (3.0 if name == "KQV" else 2.25)   # KQV's keys: plain MSE
    # the contract's nominal clause flags a setting that moves it, as it does qjl's value_bits
    with pytest.raises(contract.SchemeContractError, match="nominal bits"):
        contract.check_expected_bits(name, {"m": 32}, dims=(128,), n_tokens=(10,))
    contract.check_expected_bits(name, {"m": 32}, dims=(128,), n_tokens=(10,), nominal=False)
    # the export clause reads the nominal bits with the sketch's rows
    contract.check_export(name, {"m": 40})


@pytest.mark.parametrize("n_outliers,outlier_m,expected", [
    (0, None, 2.0),          # 128 signs over 64 coordinates
    (0, 40, 2.0),            # outlier_m unused without outliers
    (4, None, 4.0),          # 128 + 128 (outlier_m defaults to m)
    (2, 32, 2.5),            # 128 + 32
])
def test_qjl_keys_nominal_counts_the_outlier_signs(n_outliers, outlier_m, expected):
    coder = QJLKeyQuantizer(64, 128, n_outliers=n_outliers, outlier_m=outlier_m)
    parts = coder.stored_bits(1)
    assert coder.nominal_bits == expected
    assert coder.nominal_bits == (parts["signs"] + parts.get("outlier_signs", 0)) / 64
    b = kvstats.make_scheme("qjl", 2, 64, n_outliers=n_outliers,
                            **({} if outlier_m is None else {"outlier_m": outlier_m})).bits_per_coord(64)
    assert b.key_nominal == expected and b.value_nominal == 2.0


def _summary(rows):
    cols = ["distribution", "params", "dim", "n_keys", "budget", "scheme", "bits_nominal", "bits_total"]
    return pd.DataFrame([dict(zip(cols, ("gaussian", "-", 128, 1024, *r))) for r in rows])


def test_the_report_does_not_call_a_moved_cell_equal_budget():
    # nominal and total from the coders, as the sweep writes them (kvstats/sweep/work.py)
    rows = []
    for name, params in (("KV", {}), ("QKQV", {"m": 32}), ("KQV", {})):
        b = kvstats.make_scheme(name, 3, 128, **params).bits_per_coord(1024)
        rows.append((3.0, name, b.nominal, b.total))
    text = _budget_text(_summary(rows))
    assert "KV 3.125, KQV 3.1875 bits per coordinate" in text    # the example: at n = 3 only
    assert "QKQV 2" not in text.split("Not at their budget")[0]
    assert "Not at their budget n, so not equal-budget to the others there: QKQV at n = 3 (nominal 2.25)." \
        in text
    # every scheme at its budget: no such sentence
    assert "Not at their budget" not in _budget_text(_summary([r for r in rows if r[1] != "QKQV"]))


def test_a_sweep_report_names_the_cell_whose_m_moves_it(tmp_path):
    """Through the command: KV beside QKQV with m = 8 at d = 16 (nominal (n−1) + 8/16)."""
    from _tiny_sweep import tiny_toml

    from kvstats.cli import main

    toml = tiny_toml(schemes=("KV", "QKQV"), n_trials=8, energy_resamples=19, bootstrap_resamples=49)
    toml = toml.replace('name = "QKQV"', 'name = "QKQV"\nlabel = "QKQV"\nparams = {m = 8}')
    config = tmp_path / "tiny.toml"
    config.write_text(toml)
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-figures"]) == 0
    table = read_table(out / "results.parquet")
    got = table.drop_duplicates(["scheme", "budget"]).set_index(["scheme", "budget"])["bits_nominal"]
    # 1·16 + 8 and 2·16 + 8 code bits over 16 coordinates; KV at its budgets
    assert got.to_dict() == {("KV", 2.0): 2.0, ("KV", 3.0): 3.0, ("QKQV", 2.0): 1.5, ("QKQV", 3.0): 2.5}
    md = (out / "report.md").read_text()
    assert ("Not at their budget n, so not equal-budget to the others there: QKQV at n = 2 "
            "(nominal 1.5), QKQV at n = 3 (nominal 2.5).") in md
