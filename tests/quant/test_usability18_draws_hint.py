"""Codes for more or fewer trials than the scheme's draws: the error says how to build the
scheme (draws = the number of trials, or one shared draw)."""

import pytest

import kvstats


@pytest.mark.parametrize("name", ["KQV", "QKQV", "turboquant_mse"])
def test_a_draws_mismatch_names_the_draws_to_build_with(name):
    trials = kvstats.sample("gaussian", n_trials=10, n_keys=16, dim=32, seed=0)
    scheme = kvstats.make_scheme(name, 4, 32, seed=1, draws=20)
    with pytest.raises(ValueError) as info:
        scheme.quantize(trials.K, trials.V)
    assert str(info.value).endswith("build the scheme (or quantizer) with draws=10 (one draw per "
                                    "trial), or draws=() for one draw shared by all"), str(info.value)
    kvstats.make_scheme(name, 4, 32, seed=1, draws=10).quantize(trials.K, trials.V)   # the fix
