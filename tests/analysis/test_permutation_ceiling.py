"""A family whose level asks for more permutations than can ever run is refused up front
(``kvstats report --alpha 1e-20`` ran for ever: B ~ 1e22 per energy test)."""

import pytest

from kvstats.analysis import compare_schemes
from kvstats.analysis.compare import MAX_FAMILY_PERMUTATIONS
from kvstats.stats.sequential import required_resolution

from _sweep_frames import make_frame


def _frame():
    return make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5}, n=12)


def test_a_family_beyond_the_ceiling_is_refused_naming_what_to_change():
    with pytest.raises(ValueError) as exc:
        compare_schemes(_frame(), [("KQV", "QKQV")], alpha=1e-20)
    said = str(exc.value)
    assert "alpha=1e-20" in said and "energy_resolution='fixed'" in said and "1e+07" in said


def test_the_ceiling_is_where_the_family_needs_more():
    # n_tests of this frame: the metrics' rows + 1 energy test; alpha just inside and just
    # outside the ceiling (Holm's first step needs alpha / n_tests)
    table = compare_schemes(_frame(), [("KQV", "QKQV")], energy=False)
    n_tests = int(table.attrs["n_tests"]) + 1
    inside = n_tests / MAX_FAMILY_PERMUTATIONS
    assert required_resolution(n_tests, inside).n_permutations <= MAX_FAMILY_PERMUTATIONS
    outside = n_tests / (MAX_FAMILY_PERMUTATIONS + 10)
    assert required_resolution(n_tests, outside).n_permutations > MAX_FAMILY_PERMUTATIONS
    with pytest.raises(ValueError, match="permutations per energy test"):
        compare_schemes(_frame(), [("KQV", "QKQV")], alpha=outside)
    # "fixed" runs at any alpha (its energy tests at energy_resamples), as does a family
    # without energy tests
    fixed = compare_schemes(_frame(), [("KQV", "QKQV")], alpha=1e-20, energy_resolution="fixed",
                            energy_resamples=19)
    assert fixed.attrs["energy_max_permutations"] == 19
    assert compare_schemes(_frame(), [("KQV", "QKQV")], alpha=1e-20, energy=False).attrs["n_tests"] > 0
