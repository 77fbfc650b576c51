"""Warnings of a sweep's tasks on threads, and a failure while writing the results (H2).

RA F1: ``_user_task`` wrapped every task in ``warnings.catch_warnings(record=True)``,
which swaps the module-global ``showwarning`` and restores it on exit: tasks overlapping
on a ThreadPoolExecutor restored each other's state out of order and left the process's
warnings going to a finished task's list (later warnings vanished; a task's own could be
lost or shown twice). RA's note: an OSError while ``results.parquet`` was written (after
every cell was saved) got no note saying the cells are kept and how to resume.
"""

import concurrent.futures as cf
import errno
import threading
import warnings

import numpy as np
import pytest

import kvstats
from kvstats.quant.register import registered_scheme
from kvstats.quant.uniform import UniformTokenCoder
from kvstats.sweep import run_sweep
from kvstats.sweep import store

# The referee's (RA) reproducer: 12 cells of 60 trials in chunks of 2, on 4 threads;
# on the old code the warnings hook was left wrong after 5 of 6 runs.
RA_CONFIG = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3],
             "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 3.0}}, "low_rank"],
             "dims": [16], "n_keys": [32], "n_trials": 60, "chunk_size": 2, "seed": 1, "comparisons": []}


def _noisy_build(bits, dim, params, key_rng, value_rng, draws):
    if int(np.prod(draws)) > 1:   # a chunk (the grid check builds one draw)
        warnings.warn("h2 noisy: a chunk was coded", UserWarning)
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def _noisy_bits(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


NOISY = {"schemes": ["h2noisy", "KQV"], "budgets": [2, 3], "distributions": ["gaussian", "low_rank"],
         "dims": [16], "n_keys": [16], "n_trials": 24, "chunk_size": 2, "seed": 3, "comparisons": []}


def test_threaded_sweeps_leave_the_warnings_state_as_found():
    """Six threaded sweeps, then the process's warnings still reach where they went before
    (here: the list of the enclosing catch_warnings), and showwarning, the hook and the
    filters are the same objects. Failed on the old code (the hook was a task's
    ``list.append`` after runs 1-5 in RA's run; the later warning was lost)."""
    run_sweep(RA_CONFIG, executor="serial", progress=False)   # imports (scipy adds a filter then)
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        state = (warnings.showwarning, warnings._showwarnmsg, warnings._showwarnmsg_impl)
        filters = list(warnings.filters)
        for run in range(6):
            with cf.ThreadPoolExecutor(4) as pool:
                run_sweep(RA_CONFIG, executor=pool, progress=False)
            now = (warnings.showwarning, warnings._showwarnmsg, warnings._showwarnmsg_impl)
            assert now == state, f"run {run}: warnings state changed to {now}"
            assert warnings.filters == filters
        warnings.warn("h2: after the sweeps", UserWarning)
    assert [str(w.message) for w in outer if "h2:" in str(w.message)] == ["h2: after the sweeps"]


def test_a_tasks_warning_is_shown_once_per_threaded_sweep():
    """A scheme warns on every chunk (12 chunks in each of its 4 cells, on 4 threads): each
    sweep shows it exactly once, with the scheme's file and line, under the caller's
    filters; a second sweep shows it once again (each sweep shows its own). On the old code
    a task's warning could go to another task's finished list (lost), straight to the
    caller (shown again beside the gathered one), and later sweeps showed none."""
    lines = _noisy_build.__code__.co_firstlineno + 2
    with registered_scheme(kvstats.define_scheme("h2noisy", _noisy_build, _noisy_bits,
                                                 summary="warns per chunk")):
        for run in range(4):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                with cf.ThreadPoolExecutor(4) as pool:
                    run_sweep(NOISY, executor=pool, progress=False)
            noisy = [(str(w.message), w.filename, w.lineno) for w in caught if "h2 noisy" in str(w.message)]
            assert noisy == [("h2 noisy: a chunk was coded", __file__, lines)], f"run {run}: {noisy}"
        # and under a filter of the caller's, none (the filters apply on the task's thread)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            warnings.filterwarnings("ignore", message="h2 noisy")
            with cf.ThreadPoolExecutor(4) as pool:
                run_sweep(NOISY, executor=pool, progress=False)
        assert [w for w in caught if "h2 noisy" in str(w.message)] == []


def test_recording_is_per_thread():
    """Deterministic interleaving of two recording threads and the main thread: A starts
    recording, B starts, A stops, then B and the main thread warn; B's warning is B's
    only, the main thread's goes where it went before, and after both stop the hook is
    the one found. A catch_warnings(record=True) inside a recording thread still gets its
    own warnings."""
    from kvstats.sweep.pool import _recording

    steps = {name: threading.Event() for name in ("a_in", "b_in", "a_out", "b_warned")}
    logs: dict[str, list] = {}

    def thread_a():
        with _recording() as caught:
            steps["a_in"].set()
            steps["b_in"].wait(10)
        logs["a"] = caught
        steps["a_out"].set()

    def thread_b():
        steps["a_in"].wait(10)
        with _recording() as caught:
            steps["b_in"].set()
            steps["a_out"].wait(10)
            warnings.warn("h2: from B", UserWarning)
            with warnings.catch_warnings(record=True) as inner:
                warnings.warn("h2: B's own catch", UserWarning)
            logs["inner"] = inner
            steps["b_warned"].set()
        logs["b"] = caught

    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        hook = warnings._showwarnmsg
        threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
        for t in threads:
            t.start()
        steps["b_warned"].wait(10)
        warnings.warn("h2: from main", UserWarning)
        for t in threads:
            t.join(10)
        assert warnings._showwarnmsg is hook
    texts = {k: [str(w.message) for w in v] for k, v in logs.items()}
    assert texts == {"a": [], "b": ["h2: from B"], "inner": ["h2: B's own catch"]}
    assert [str(w.message) for w in outer] == ["h2: from main"]


def test_a_failed_results_write_says_every_cell_is_kept(tmp_path, monkeypatch):
    """A full disk while results.parquet is written (after the last cell): the OSError
    says all cells are kept and how to resume; the resumed sweep computes nothing and
    equals a sweep that never failed. Failed on the old code (no note)."""
    config = {"schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
              "n_keys": [8], "n_trials": 6, "seed": 2, "comparisons": []}
    write_table = store._write_table

    def full_disk(frame, stem, meta):
        if stem.name == "results":
            raise OSError(errno.ENOSPC, "No space left on device", str(stem))
        return write_table(frame, stem, meta)

    monkeypatch.setattr(store, "_write_table", full_disk)
    with pytest.raises(OSError, match="No space left") as info:
        run_sweep(config, out=tmp_path, executor="serial", progress=False)
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert (f"[all 2 cells finished, kept in {tmp_path / 'cells'}: rerun with resume "
            "(kvstats sweep --resume; run_sweep's default) to write the results from them, "
            "computing nothing]") == note
    assert len([p for p in (tmp_path / "cells").iterdir() if p.suffix in (".parquet", ".csv")]) == 2
    monkeypatch.setattr(store, "_write_table", write_table)
    resumed = run_sweep(config, out=tmp_path, executor="serial", progress=False)
    assert {c["status"] for c in resumed.manifest["cells"]} == {"resumed"}
    assert resumed.frame.equals(run_sweep(config, executor="serial", progress=False).frame)
