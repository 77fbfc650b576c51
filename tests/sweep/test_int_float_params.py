"""``nu = 3`` (an int, as TOML or Python may write it) and ``nu = 3.0`` are one
distribution across sweeps: the same config fingerprint, cell ids, data and labels
(before, the int drew other trials and stood as another case: critic_sweep20 #4)."""

import pytest

from kvstats.results import config_fingerprint
from kvstats.sweep import SweepConfig, run_sweep

BASE = {"schemes": ["KQV"], "budgets": [3], "dims": [8], "n_keys": [8], "n_trials": 4,
        "comparisons": []}


def _config(tmp_path, nu_text):
    path = tmp_path / f"c{nu_text}.toml"
    path.write_text('[sweep]\nbudgets = [3]\ndims = [8]\nn_keys = [8]\nn_trials = 4\ncomparisons = []\n'
                    '[[schemes]]\nname = "KQV"\n[[distributions]]\nname = "heavy_tailed"\n'
                    f'params = [{{nu = 1.5}}, {{nu = {nu_text}}}]\n'
                    '[[distributions]]\nname = "low_rank"\nparams = {rank = 2, noise = 1}\n')
    return SweepConfig.from_toml(path)


def test_an_int_for_a_float_parameter_is_that_float(tmp_path, same_bits):
    as_int, as_float = _config(tmp_path, "3"), _config(tmp_path, "3.0")
    from_python = SweepConfig.from_dict({**BASE, "distributions": [
        {"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]},
        {"name": "low_rank", "params": {"rank": 2, "noise": 1.0}}]})
    for other in (as_float, from_python):
        assert config_fingerprint(as_int) == config_fingerprint(other)
        assert [as_int.cell_id(c) for c in as_int.cells()] == [other.cell_id(c) for c in other.cells()]
    assert [c.params_label() for c in as_int.cells()] == ["nu=1.5", "nu=3.0", "noise=1.0,rank=2"]
    low_rank = as_int.distributions[2].params
    assert type(low_rank["rank"]) is int and type(low_rank["noise"]) is float   # rank's default: an int
    same_bits(run_sweep(as_int, executor="serial", progress=False).frame,
              run_sweep(from_python, executor="serial", progress=False).frame)


def test_within_one_sweep_the_two_are_still_one_case_twice():
    with pytest.raises(ValueError, match=r"with params nu=3 and with params nu=3.0 are the same"):
        SweepConfig.from_dict({**BASE, "distributions": [
            {"name": "heavy_tailed", "params": [{"nu": 3}, {"nu": 3.0}]}]})
