"""'mixed' without key_bits / value_bits: a ValueError naming the missing side(s) and the
allowed values (critic_theory20 #6: run_sweep raised KeyError 'key_bits' from the
codes_as declaration; make_scheme a TypeError about None)."""

import pytest

import kvstats

SAY = r"scheme 'mixed' needs key_bits and value_bits, each an integer in \[1, 8\] .*received no "


@pytest.mark.parametrize("params, missing", [({}, "key_bits and no value_bits"),
                                             ({"key_bits": 4}, "value_bits"),
                                             ({"value_bits": 2}, "key_bits")])
def test_a_sweep_of_mixed_without_its_sides_is_told_which(params, missing):
    scheme = {"name": "mixed", "params": params} if params else "mixed"
    with pytest.raises(ValueError, match=SAY + missing + "$"):
        kvstats.run_sweep({"schemes": [scheme], "distributions": ["gaussian"], "dims": [32],
                           "n_keys": [64], "n_trials": 2}, executor="serial", progress=False)
    with pytest.raises(ValueError, match=SAY + missing + "$"):
        kvstats.make_scheme("mixed", None, 64, **params)


def test_mixed_with_both_sides_still_runs():
    res = kvstats.run_sweep({"schemes": [{"name": "mixed", "params": {"key_bits": 4, "value_bits": 2}}],
                             "distributions": ["gaussian"], "dims": [32], "n_keys": [64],
                             "n_trials": 2}, executor="serial", progress=False)
    assert set(res.frame["budget"]) == {3.0}
