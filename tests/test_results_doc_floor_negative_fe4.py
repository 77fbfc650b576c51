"""experiments/check_results_doc.py ``floor`` refuses a metric with negative values
(referee RE4 F2).

The floor sets aside pairs whose larger value is <= it, a floor on a non-negative metric
(Claim 1's KL). On ``snr_t`` or ``ip_bias`` a pair of two negatives was set aside even at
floor 0, so "floor 0: every trial" was false and p was not the report's (results/quick's
snr_t: 14 of 100 differing pairs set aside). Hand-made pairs; one tiny sweep, whose ip_bias
has negative values (checked below, so that the CLI case cannot pass vacuously).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.cli import main as kvstats_main

from _tiny_sweep import tiny_toml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "check_results_doc.py"


def _script():
    spec = importlib.util.spec_from_file_location("check_results_doc_floor_fe4", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("a, b, counts", [
    ([-2.0, -1.0, 0.5], [-1.0, -3.0, 0.4], "2 negative values in a, 2 in b"),
    ([0.1, 0.2], [0.3, -1e-300], "0 negative values in a, 1 in b"),
])
def test_negative_values_are_refused(a, b, counts):
    with pytest.raises(ValueError, match=f"non-negative metric.*{counts}"):
        _script().floor_counts(np.array(a), np.array(b), 0.0)


def test_zeros_are_values_of_a_non_negative_metric():
    # a KL of exactly 0 (and -0.0) is allowed; a pair of two zeros is a tie, set aside at floor 0
    c = _script().floor_counts(np.array([0.0, -0.0, 0.2]), np.array([0.0, 0.1, 0.3]), 0.0)
    assert (c["kept"], c["a_lower"], c["b_lower"], c["aside"]) == (2, 2, 0, 0)


def test_cli_refuses_a_metric_with_negative_values(tmp_path, capsys):
    (tmp_path / "t.toml").write_text(tiny_toml(seed=7, budgets=(2,), schemes=("KQV", "QKQV")))
    assert kvstats_main(["sweep", "--config", str(tmp_path / "t.toml"), "--out", str(tmp_path / "s"),
                         "--workers", "1", "--no-progress", "--no-figures"]) == 0
    frame = pd.read_parquet(tmp_path / "s" / "results.parquet")
    assert (frame.ip_bias < 0).any() and (frame.kl >= 0).all()
    with pytest.raises(SystemExit) as exc:
        _script().main(["floor", str(tmp_path / "s"), "--metric", "ip_bias", "--floor", "0"])
    assert "--metric" in str(exc.value) and "'ip_bias' has negative values" in str(exc.value)
    _script().main(["floor", str(tmp_path / "s"), "--metric", "kl", "--floor", "0"])
    assert "| gaussian" in capsys.readouterr().out
