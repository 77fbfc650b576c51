"""theory_table's ratio rows exist only where both cells of the ratio are at the budget
(critic_theory20 #1: identity's budget 32 in a case with KQV/QKQV reached
bit_trade_inflation(32) and crashed theory_table and the report)."""

import kvstats
from kvstats.analysis.theory import theory_table
from kvstats.report import hypothesis_report


def _sweep():
    return kvstats.run_sweep({"schemes": ["KQV", "QKQV", "identity"], "budgets": [2, 3],
                              "distributions": ["gaussian"], "dims": [32], "n_keys": [64],
                              "n_trials": 5, "report": {"bootstrap_resamples": 49}},
                             executor="serial", progress=False)


def test_identity_beside_a_ratio_pair_gets_no_ratio_rows_at_its_budget(tmp_path):
    res = _sweep()
    assert 32.0 in set(res.frame["budget"])            # identity's budget is in the case
    table = theory_table(res.frame, n_resamples=49)
    ratios = table[table["quantity"].str.startswith("ip_var_ratio")]
    # same budget at n = 2 and 3, the residual ratio at n = 3 (KQV at 2), none at 32
    assert sorted(zip(ratios["quantity"], ratios["budget"])) == [
        ("ip_var_ratio_residual", 3.0), ("ip_var_ratio_same_budget", 2.0),
        ("ip_var_ratio_same_budget", 3.0)]
    assert not (table["budget"] == 32.0).any()         # identity: no prediction, no finite gap
    md = (tmp_path / "rep" / "report.md")
    hypothesis_report(res, tmp_path / "rep", figures=False, energy_resamples=19)
    assert "QKQV/KQV" in md.read_text()
