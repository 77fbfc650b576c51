"""The sweep's progress bar: its percentage and the count beside it are of one unit (the
cells' coded trials, moving per chunk), and the finished cells follow as their own count.
Before, ``38%|...| 1/4 cells`` put a per-trial percentage beside a count of cells.

Mutants tried: HEAD's bar_format (no trials count: both tests fail), the percentage over
cells_done/cells (the first test fails at 15 of 40 trials).
"""

import re

from kvstats.sweep import run_sweep
from kvstats.sweep.run import _cell_bar


def _text(bar):
    return bar.format_meter(**{**bar.format_dict, "elapsed": 0})


def test_the_percentage_is_of_the_trials_it_counts(capfd):
    bar = _cell_bar(4, 1, 10, show=True)   # 4 cells of 10 trials, 1 resumed
    bar.update(5)                          # a chunk of a second cell
    first = _text(bar)
    bar.cells_done += 1                    # ... which is then complete
    bar.update(5)
    second = _text(bar)
    bar.close()
    capfd.readouterr()
    assert re.fullmatch(r"sweep:  38%\|.*\| 15/40 trials, 1/4 cells \[00:00<\?\]", first), first
    assert re.fullmatch(r"sweep:  50%\|.*\| 20/40 trials, 2/4 cells \[00:00<.*\]", second), second


def test_a_sweeps_bar_ends_at_every_trial_and_cell(capfd):
    run_sweep({"schemes": ["KQV"], "budgets": [2, 3], "distributions": ["gaussian"], "dims": [16],
               "n_keys": [8], "n_trials": 6, "chunk_size": 4, "report": {"comparisons": []}},
              executor="serial", progress=True)
    last = capfd.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert re.fullmatch(r"sweep: 100%\|.*\| 12/12 trials, 2/2 cells \[.*\]", last), last
