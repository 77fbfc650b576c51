"""A SchemeSpec or DistributionSpec given as an object is checked as its dict form is.

Found by a referee pass (2026-12-02): ``SweepConfig(schemes=[SchemeSpec("KQV", budgets=(3, 3))],
...)`` skipped the entry's checks: two cells of one id, and ``run_sweep`` ended in a
``KeyError`` on the cell id after computing; ``label=3`` was taken, and ``params=[1]``
was "'list' object is not a mapping" naming nothing.
"""

import pytest

from kvstats.sweep import DistributionSpec, SchemeSpec, SweepConfig

BASE = dict(distributions=["gaussian"], dims=[16], n_keys=[8], n_trials=2, comparisons=[], budgets=[2])


@pytest.mark.parametrize("spec, error, message", [
    (SchemeSpec("KQV", budgets=(3, 3)), ValueError, "scheme 'KQV' budgets must not repeat values; received [3, 3]"),
    (SchemeSpec("KQV", budgets=(9,)), ValueError, "scheme 'KQV' budgets must be an integer in [2, 8]; received 9"),
    (SchemeSpec("KQV", budgets=(2.5,)), TypeError, "scheme 'KQV' budgets must be an integer in [2, 8]; received 2.5"),
    (SchemeSpec("KQV", label=3), TypeError, "scheme 'KQV' label must be a string; received 3"),
    (SchemeSpec("KQV", params=[1]), TypeError, "scheme 'KQV' params must be a table/dict of parameters; received [1]"),
])
def test_a_scheme_spec_object_gets_the_entry_checks(spec, error, message):
    with pytest.raises(error) as err:
        SweepConfig(schemes=[spec], **BASE)
    assert str(err.value) == message


def test_a_distribution_spec_object_gets_the_entry_checks():
    with pytest.raises(TypeError, match=r"^distribution 'low_rank' params\['rank'\] must be a number, "
                                        r"string or boolean; received \[1\]$"):
        SweepConfig(schemes=["KQV"], **{**BASE, "distributions": [DistributionSpec("low_rank", {"rank": [1]})]})


def test_valid_spec_objects_give_the_config_of_their_dict_form():
    objects = SweepConfig(schemes=[SchemeSpec("KQV", {"norm_dtype": "float32"}, "mine", (2, 3)), SchemeSpec("KV")],
                          **{**BASE, "distributions": [DistributionSpec("heavy_tailed", {"nu": 2.0})]})
    dicts = SweepConfig.from_dict({**BASE, "schemes": [
        {"name": "KQV", "params": {"norm_dtype": "float32"}, "label": "mine", "budgets": [2, 3]}, "KV"],
        "distributions": [{"name": "heavy_tailed", "params": {"nu": 2.0}}]})
    assert objects == dicts and objects.cells() == dicts.cells()
