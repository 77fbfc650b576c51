"""Referee RX's F1 on experiments/bench_sweep.py, held fixed: the floor times what depends
on the data alone once per case, as the runner computes it (kvstats/sweep/work.py shares
the profile's reference across a case's cells), so that it is a lower bound.

No timing is asserted: spies count the data-only work the floor's timed steps do, with a
case's nine cells and with its first cell alone; a floor that redid it per cell (the
script before this fix) counts nine times as much in the first.
"""

from __future__ import annotations

import pytest

import kvstats.metrics.profile as profile_module


@pytest.fixture
def bench(load_experiment):
    return load_experiment("bench_sweep")


def _first_cells(cfg):
    """The first cell of each case of ``cfg``, in the runner's order."""
    seen = {}
    for c in cfg.cells():
        seen.setdefault(c.case_key(), c)
    return list(seen.values())


def _count(monkeypatch, module, name: str, run) -> int:
    calls = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    try:
        run()
    finally:
        monkeypatch.setattr(module, name, real)
    return len(calls)


def test_floor_computes_the_profiles_reference_once_per_case(bench, monkeypatch):
    """_profile forms ||k||^2 and ||v||^2 (``_sumsq``) only when it computes the trials'
    reference: the floor's profile step must compute it as often for a case's 9 cells as
    for its first cell alone (old script: 9 times as often)."""
    cfg = bench.reduced_config(2, 16, 1)
    cells = cfg.cells()
    first = _first_cells(cfg)
    assert len(cells) == 18 and len(first) == 2
    n_all = _count(monkeypatch, profile_module, "_sumsq", lambda: bench.code_seconds(cfg, 1, cells=cells))
    n_first = _count(monkeypatch, profile_module, "_sumsq", lambda: bench.code_seconds(cfg, 1, cells=first))
    assert n_first > 0
    assert n_all == n_first


def test_floor_times_the_data_norms_once_per_case(bench, monkeypatch):
    """The "norms" step (||x||^2 of the data: data only) is timed in a case's first cell
    only: as many calls for the 18 cells as for the 2 first cells (old script: no
    such step of its own, timed per cell)."""
    cfg = bench.reduced_config(2, 16, 1)
    n_all = _count(monkeypatch, bench, "_data_norms", lambda: bench.code_seconds(cfg, 1))
    n_first = _count(monkeypatch, bench, "_data_norms",
                     lambda: bench.code_seconds(cfg, 1, cells=_first_cells(cfg)))
    assert n_first > 0
    assert n_all == n_first


def test_floor_shares_the_reference_the_runner_would_and_times_the_other_cells(bench, monkeypatch):
    """Every cell's profile is still timed: the cells after a case's first call _profile
    with the case's (filled) reference; the first cell calls the full error_profile."""
    cfg = bench.reduced_config(2, 16, 1)
    shared = []
    real = profile_module._profile

    def spy(trials, K_hat, V_hat, k=profile_module._DEFAULT_K, reference=None, columns=None):
        shared.append(reference is not None and len(reference) > 0)
        return real(trials, K_hat, V_hat, k, reference, columns)

    monkeypatch.setattr(profile_module, "_profile", spy)
    bench.code_seconds(cfg, 1)
    # per cell: the whole-batch and per-trial timings, each warm + 1 repeat (2 trials);
    # the 16 later cells' calls all reuse a filled reference
    assert sum(shared) == 16 * 2 * (1 + 2)


def test_turns_give_every_runs_seconds_and_the_median_ratio(bench, monkeypatch):
    """compare_paths hands back every turn's seconds (the table keeps the minimum), and
    _turns reports each loop's per-turn ratio to the runner with its median and range
    (here on set times: ratios 1.1, 0.9, 1.0 -> median 1.000, range 0.900-1.100)."""
    times = iter([1.0, 1.1, 2.0, 1.8, 2.0, 3.6])
    monkeypatch.setattr(bench, "_timed", lambda fn: (next(times), None))
    monkeypatch.setattr(bench, "check_same_table", lambda *a, **k: None)
    for name in ("runner_table", "batched_loop"):
        monkeypatch.setattr(bench, name, lambda cfg: None)
    runs = {}
    best = bench.compare_paths(bench.reduced_config(2, 16, 1), 3, per_trial=False, runs=runs)
    assert runs == {"runner": [1.0, 2.0, 2.0], "batched": [1.1, 1.8, 3.6]}
    assert best == {"runner": 1.0, "batched": 1.1}
    runs["batched"][2] = 2.0
    line = bench._turns(runs)
    assert "batched / runner per turn 1.100 0.900 1.000 (median 1.000, range 0.900-1.100)" in line
