"""The small sweeps the pairing tests run, and a recorder of the warnings a call gives."""

import warnings

GRID = {"dims": [16], "n_keys": [8], "n_trials": 6, "distributions": ["gaussian"],
        "report": {"figures": False, "energy_resamples": 19, "bootstrap_resamples": 99}}
# the two-operating-point recipe of docs/usage.md ("Which budgets a pair is compared at")
TWO_POINTS = {**GRID, "budgets": [3, 4],
              "schemes": [{"name": "turboquant_mse", "label": "TQ3", "budgets": [3]},
                          {"name": "turboquant_mse", "label": "TQ4", "budgets": [4]},
                          {"name": "kivi", "label": "kivi1", "budgets": [1]},
                          {"name": "kivi", "label": "kivi2", "budgets": [2]}],
              "comparisons": [["TQ3", "kivi1"], ["TQ4", "kivi2"]]}


def _warned(call):
    """``call()`` and the messages of the UserWarnings it gave, none deduplicated."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        value = call()
    return value, [str(w.message) for w in rec if issubclass(w.category, UserWarning)]
