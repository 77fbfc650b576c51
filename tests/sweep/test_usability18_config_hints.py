"""A sweep config's comparison naming a scheme that its params renamed: the error says
how such a scheme is labelled and names the fix (a ``label``)."""

import pytest

from kvstats.sweep.config import load_config

GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [16], "n_keys": [8]}


def test_a_comparison_of_a_scheme_renamed_by_its_params_names_the_label_fix():
    schemes = [{"name": "KQV", "params": {"norm_dtype": "float32"}}, "turboquant_mse"]
    with pytest.raises(ValueError) as info:
        load_config({**GRID, "schemes": schemes, "comparisons": [["KQV", "turboquant_mse"]]})
    assert str(info.value).endswith("; a scheme with params is labelled name[params] "
                                    "(KQV[norm_dtype='float32']): give its [[schemes]] entry "
                                    'label = "KQV"'), str(info.value)
    labelled = [{**schemes[0], "label": "KQV"}, "turboquant_mse"]   # the fix works
    load_config({**GRID, "schemes": labelled, "comparisons": [["KQV", "turboquant_mse"]]})


def test_another_unknown_label_gets_no_such_hint():
    with pytest.raises(ValueError) as info:
        load_config({**GRID, "schemes": ["KQV", "KV"], "comparisons": [["KQV", "QK"]]})
    assert "name[params]" not in str(info.value)
