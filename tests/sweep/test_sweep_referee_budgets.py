"""The sweep's budgets outside a scheme's range are refused by the config, naming 'budgets'.

Found by a referee pass (2026-12-02): ``budgets = [1, 2]`` beside QKQV (n >= 2) passed
``SweepConfig``; only the grid's check refused it, as "scheme 'QKQV' at n=1, d=32: bits
must be an integer in [2, 8]; received 1", which names neither the key to change nor the
way out (budgets of the scheme's own).
"""

import pytest

from kvstats.sweep import SweepConfig

BASE = {"distributions": ["gaussian"], "dims": [32], "n_keys": [8], "n_trials": 2, "comparisons": []}


@pytest.mark.parametrize("scheme", ["QKQV", "turboquant_prod"])
def test_a_sweep_budget_a_scheme_cannot_run_names_the_key_the_range_and_the_fix(scheme):
    with pytest.raises(ValueError) as err:
        SweepConfig.from_dict({**BASE, "schemes": ["KV", scheme], "budgets": [1, 2, 3]})
    assert str(err.value) == (
        f"budgets [1] are outside scheme {scheme!r}'s range [2, 8]: leave them out of the "
        f"sweep's budgets, or give the entry of {scheme!r} budgets of its own (budgets = [2, 3]); "
        "received budgets [1, 2, 3]")


def test_schemes_whose_own_budgets_or_fixed_budget_set_their_bits_are_not_held_to_it():
    cfg = SweepConfig.from_dict({**BASE, "budgets": [1, 2], "schemes": [
        "KV", "K4V2", "q8_0", {"name": "QKQV", "budgets": [2, 3]}]})
    assert [(c.scheme.display(), c.budget) for c in cfg.cells()] == [
        ("KV", 1), ("KV", 2), ("K4V2", None), ("q8_0", None), ("QKQV", 2), ("QKQV", 3)]


def test_a_scheme_with_no_budget_left_in_range_is_told_its_range():
    with pytest.raises(ValueError, match=r"^budgets \[1\] are outside scheme 'QKQV''s range \[2, 8\]: "
                                         r".*give the entry of 'QKQV' budgets of its own \(budgets = "
                                         r"\[2\]\); received budgets \[1\]$"):
        SweepConfig.from_dict({**BASE, "schemes": ["QKQV"], "budgets": [1]})
