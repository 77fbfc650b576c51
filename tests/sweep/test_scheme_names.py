"""Scheme names in messages: one "did you mean" for make_scheme and the sweep config
(kvstats._checks.did_you_mean), and no "n=None" for a format without a budget.

Mutants tried: did_you_mean without case folding ('kqv' gets no suggestion), scheme_def
without the suggestion (make_scheme says nothing), Cell.scheme_at printing n=None.
"""

import pytest

import kvstats
from kvstats._checks import did_you_mean
from kvstats.quant.registry import SCHEMES
from kvstats.sweep import SweepConfig, run_sweep
from kvstats.sweep.run import check_grid


@pytest.mark.parametrize("typo, meant", [("kqv", "KQV"), ("QKVQ", "QKQV"), ("k4v2", "K4V2"),
                                         ("Q4_0", "q4_0"), ("turboquant-mse", "turboquant_mse")])
def test_make_scheme_and_the_config_suggest_the_same_name(typo, meant):
    hint = f"received {typo!r} (did you mean {meant!r}?)"
    with pytest.raises(ValueError) as api:
        kvstats.make_scheme(typo, 3, 32)
    with pytest.raises(ValueError) as cfg:
        SweepConfig.from_dict({"schemes": [typo], "budgets": [3], "distributions": ["gaussian"]})
    assert hint in str(api.value) and str(api.value) == str(cfg.value)


def test_no_suggestion_for_a_far_name_and_the_range_for_k9v2():
    assert did_you_mean("zzz", SCHEMES) == "" and did_you_mean(3, SCHEMES) == ""
    with pytest.raises(ValueError, match=r"received 'K9V2' \(mixed precision K\{a\}V\{b\} takes a and b "
                                         r"in 1\.\.8\)$"):
        kvstats.make_scheme("K9V2", None, 32)


def test_a_fixed_budget_format_is_named_without_n(tmp_path, capfd):
    """q8_0 has no budget n: the preflight error and the recompute line say no 'n=None'."""
    with pytest.raises(ValueError) as exc:
        check_grid({"schemes": ["q8_0", "KQV"], "budgets": [3], "distributions": ["gaussian"],
                    "dims": [20], "n_keys": [8], "report": {"comparisons": []}})
    assert str(exc.value).startswith("scheme 'q8_0', d=20: dim must be a multiple of 32")
    cfg = {"schemes": ["KQV", "q8_0"], "budgets": [3], "distributions": ["gaussian"], "dims": [32],
           "n_keys": [8], "n_trials": 4, "report": {"comparisons": []}}
    res = run_sweep(cfg, out=tmp_path, executor="serial", progress=False)
    for cell in (tmp_path / "cells").iterdir():
        cell.write_bytes(cell.read_bytes()[:50])  # truncated: both recomputed, with a line each
    capfd.readouterr()
    run_sweep(cfg, out=tmp_path, executor="serial", progress=False)
    err = capfd.readouterr().err
    ids = {c["key"]["scheme"]: c["id"] for c in res.manifest["cells"]}
    assert f"cell {ids['q8_0']} ('q8_0', gaussian(-), d=32, N=8): the stored file" in err
    assert f"cell {ids['KQV']} ('KQV' at n=3, gaussian(-), d=32, N=8): the stored file" in err
    assert "n=None" not in err


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2", "nvfp4"])
def test_a_per_call_scale_is_refused_in_a_sweep(name):
    """scale='tensor' gives one scale to all the trials an encode call codes: a sweep (which
    codes trials in chunks) would make each trial's codes depend on its chunk. Per-head and
    static scales code each trial alone and are accepted."""
    grid = {"budgets": [3], "distributions": ["gaussian"], "dims": [64], "n_keys": [16],
            "report": {"comparisons": []}}
    advice = (r"scale='head' \(the default\)$" if name == "nvfp4"   # nvfp4 has no static scale
              else r"scale='head' \(the default\) or a static scale=<float>$")
    with pytest.raises(ValueError, match=r"scale='tensor'.*chunk size; use a per-trial setting: " + advice):
        SweepConfig.from_dict({**grid, "schemes": [{"name": name, "params": {"scale": "tensor"}}]})
    for scale in ("head",) if name == "nvfp4" else ("head", 0.5):
        SweepConfig.from_dict({**grid, "schemes": [{"name": name, "params": {"scale": scale}}]})
