"""``energy_test_sequential(X, Y)`` without a cap: the error says what to pass (there is
no default: the cap decides what the test can resolve)."""

import numpy as np
import pytest

from kvstats.stats.sequential import energy_test_sequential, required_resolution


def test_no_cap_names_what_to_pass_and_each_works():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(20, 6)), rng.normal(size=(20, 6))
    with pytest.raises(ValueError) as info:
        energy_test_sequential(X, Y)
    assert str(info.value).endswith(
        "(e.g. max_permutations=999, energy_test's n_resamples, or, for a test in a corrected "
        "family of m, alpha_needed=required_resolution(m).p_needed)"), str(info.value)
    assert energy_test_sequential(X, Y, max_permutations=999).max_permutations == 999
    need = required_resolution(10).p_needed
    assert 1 / (1 + energy_test_sequential(X, Y, alpha_needed=need).max_permutations) <= need
