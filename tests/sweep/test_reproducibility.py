"""A cell's numbers depend on its key and the root seed only: not on the executor, the
workers, how a case is split into tasks, the order tasks run in, or an interruption and
resume. Pairing: one data draw per case and chunk, an independent scheme draw per cell and
chunk. Resume reuses only cells of the same code. Memory stays a few chunks for large N.
"""

import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.sweep import SweepConfig, plan, run, run_sweep, store, work

# two cases (two distributions), three schemes, two budgets: 12 cells, 3 chunks a case
GRID = {"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3],
        "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 2.5}}],
        "dims": [16], "n_keys": [32], "n_trials": 7, "chunk_size": 3, "seed": 5}


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted serial sweep, one task per case."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "_TARGET_TASKS", 1)
        res = run_sweep(GRID, executor="serial", progress=False)
    assert res.frame.groupby("cell_id").size().eq(7).all() and res.frame.cell_id.nunique() == 12
    return res.frame


@pytest.mark.parametrize("target", [1, 2, 64])
@pytest.mark.parametrize("order", ["grid", "reversed", "shuffled"])
def test_the_split_into_tasks_and_their_order_do_not_matter(same_bits, reference, monkeypatch, target, order):
    monkeypatch.setattr(plan, "_TARGET_TASKS", target)
    made = plan._tasks

    def reorder(config, todo, done=None):
        tasks = made(config, todo, done)
        if order == "reversed":
            return tasks[::-1]
        if order == "shuffled":
            return [tasks[i] for i in np.random.default_rng(target).permutation(len(tasks))]
        return tasks

    monkeypatch.setattr(run, "_tasks", reorder)
    spans = {(t.first, t.stop) for t in reorder(SweepConfig.from_dict(GRID),
                                                [(c, "x") for c in SweepConfig.from_dict(GRID).cells()])}
    # target 1 and 2 (over two cases): one task per case; 64: one task per chunk (3 a case)
    assert spans == ({(0, 3)} if target <= 2 else {(0, 1), (1, 2), (2, 3)})
    same_bits(run_sweep(GRID, executor="serial", progress=False).frame, reference)


def test_a_process_pool_of_two_or_three_workers_equals_serial(same_bits, reference):
    for workers in (2, 3):
        res = run_sweep(GRID, executor="process", workers=workers, progress=False)
        assert res.manifest["executor"] == f"ProcessPoolExecutor({workers})"
        same_bits(res.frame, reference)


def _in_order(frame, cell_ids):
    """``frame``'s rows, cells in the order ``cell_ids`` (trials in order within each)."""
    return pd.concat([frame[frame.cell_id == c] for c in cell_ids], ignore_index=True)


@pytest.mark.parametrize("scheme, budget, dist", [("KQV", 3, "heavy_tailed"), ("QKQV", 2, "gaussian")])
def test_a_cell_computed_alone_equals_that_cell_in_the_grid(same_bits, reference, scheme, budget, dist):
    """docs/results.md: a cell's numbers depend only on the root seed and its key (with the
    settings its id holds). The cell alone in its grid (one scheme, one budget, one case:
    one task, no other cell sharing its chunks' buffers) has the grid's rows, bit for bit,
    its id included."""
    entry = [d for d in GRID["distributions"] if (d if isinstance(d, str) else d["name"]) == dist]
    alone = run_sweep({**GRID, "schemes": [scheme], "budgets": [budget], "distributions": entry},
                      executor="serial", progress=False).frame
    want = reference[(reference.scheme == scheme) & (reference.budget == budget)
                     & (reference.distribution == dist)].reset_index(drop=True)
    assert len(want) == GRID["n_trials"]
    same_bits(alone, want)


def test_a_grid_listed_in_another_order_gives_each_cell_the_same_bits(same_bits, reference):
    """Schemes, budgets and distributions listed in reverse: the cells run in another
    order, in other tasks; each cell's rows are the same, bit for bit."""
    rev = run_sweep({**GRID, "schemes": GRID["schemes"][::-1], "budgets": GRID["budgets"][::-1],
                     "distributions": GRID["distributions"][::-1]}, executor="serial", progress=False).frame
    ids = list(reference.cell_id.unique())
    assert list(rev.cell_id.unique()) != ids and set(rev.cell_id) == set(ids)
    same_bits(_in_order(rev, ids), reference)


class _Interrupt(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("executor", ["serial", "process"])
@pytest.mark.parametrize("k", [0, 5])
def test_interrupted_mid_write_then_resumed_equals_uninterrupted(same_bits, tmp_path, monkeypatch, reference,
                                                                 executor, k):
    """Ctrl-C arrives while the (k+1)-th cell file is being written, half of it on disk: the
    k finished cells are kept, the half-written one is not taken for a finished cell, and
    the resumed sweep gives the uninterrupted sweep's frame, reusing exactly the k."""
    writes = []
    real_write = store._write_table

    def interrupted(frame, stem, meta):
        if "kvstats_part" in meta:   # a chunk of a cell not complete yet (kvstats.sweep.parts)
            return real_write(frame, stem, meta)
        if "kvstats_cell" in meta and len(writes) == k:
            def half(tmp):
                tmp.write_bytes(b"PAR1" + b"\0" * 100)   # a part of a file, then Ctrl-C
                raise _Interrupt
            return store.atomic_write(stem.with_suffix(".parquet"), half)
        writes.append(stem.name)
        return real_write(frame, stem, meta)

    monkeypatch.setattr(store, "_write_table", interrupted)
    workers = 2 if executor == "process" else None
    with pytest.raises(_Interrupt):
        run_sweep(GRID, out=tmp_path, executor=executor, workers=workers, progress=False)
    stored = sorted(p.stem for p in (tmp_path / "cells").iterdir() if p.is_file())
    assert stored == sorted(writes) and len(stored) == k   # no partial file, no temporary
    monkeypatch.setattr(store, "_write_table", real_write)
    resumed = run_sweep(GRID, out=tmp_path, executor=executor, workers=workers, progress=False)
    status = {c["id"]: c["status"] for c in resumed.manifest["cells"]}
    assert sorted(i for i, s in status.items() if s == "resumed") == stored
    assert set(status.values()) <= {"resumed", "computed"}   # nothing torn to recompute
    same_bits(resumed.frame, reference)


def test_every_cell_and_chunk_has_its_own_scheme_draw_and_the_case_one_data_draw(monkeypatch):
    """docs/design.md, "Seeds": the data seed depends on the case and the chunk only; the
    scheme seed on the cell key (case, budget, scheme) and the chunk. So two budgets of one
    scheme use independent draws (not common random numbers), and the trial is the pairing
    unit of the report's paired tests: within a pair the data are shared, the scheme draws
    independent."""
    data, schemes = [], []
    real_sample, real_make = work.sample, work.make_scheme

    def spy_sample(*args, seed, **kw):
        data.append((args[0], seed))
        return real_sample(*args, seed=seed, **kw)

    def spy_make(name, bits, dim, *, seed, draws, **kw):
        schemes.append((name, bits, seed, draws))
        return real_make(name, bits, dim, seed=seed, draws=draws, **kw)

    monkeypatch.setattr(work, "sample", spy_sample)
    monkeypatch.setattr(work, "make_scheme", spy_make)
    run_sweep(GRID, executor="serial", progress=False)
    assert len(data) == 2 * 3   # each case's chunk is drawn once, for all six cells of the case
    assert len({s for _, s in data}) == 6
    assert len(schemes) == 12 * 3   # a scheme per cell and chunk ...
    seeds = [s for *_, s, _ in schemes]
    assert len(set(seeds)) == len(seeds)   # ... each with its own seed
    assert not set(seeds) & {s for _, s in data}
    assert sorted(d for *_, d in schemes) == [1] * 12 + [3] * 24   # draws: the chunk's trials


def test_a_cell_of_other_code_is_recomputed_and_the_manifest_names_the_code(same_bits, tmp_path, capfd):
    small = {**GRID, "distributions": ["gaussian"], "schemes": ["KV"], "budgets": [2]}
    first = run_sweep(small, out=tmp_path, executor="serial", progress=False)
    code = plan.code_version()
    assert first.manifest["versions"]["kvstats_source"] == f"sha256:{code['kvstats_source'][:12]}"
    again = run_sweep(small, out=tmp_path, executor="serial", progress=False)
    assert [c["status"] for c in again.manifest["cells"]] == ["resumed"]
    # the same cell as computed by another kvstats (its source changed since)
    (path,) = (tmp_path / "cells").iterdir()
    frame, meta = store.read_table_meta(path)
    store.write_cell(tmp_path / "cells", meta["cell_id"], frame, key=meta["key"], config=meta["config"],
                     code={**code, "kvstats_source": "0" * 64})
    capfd.readouterr()
    third = run_sweep(small, out=tmp_path, executor="serial", progress=False)
    (cell,) = third.manifest["cells"]
    assert cell["status"] == "recomputed"
    assert cell["reason"] == (f"was computed by other code: kvstats_source 000000000000 "
                              f"(now {code['kvstats_source'][:12]})")
    assert "was computed by other code" in capfd.readouterr().err
    same_bits(third.frame, first.frame)


@pytest.mark.parametrize("entries, match", [
    (["heavy_tailed", {"name": "heavy_tailed", "params": {"nu": 3.0}}],
     r"'heavy_tailed' with params - and with params nu=3.0 are the same distribution "
     r"\(defaults filled in: nu=3.0,scale=1.0\)"),
    ([{"name": "heavy_tailed", "params": [{"nu": 3}, {"nu": 3.0}]}],
     r"with params nu=3 and with params nu=3.0 are the same"),
    (["gaussian", {"name": "gaussian", "params": {"scale": 1}}], r"'gaussian' with params -"),
])
def test_one_distribution_twice_is_refused(entries, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig.from_dict({**GRID, "distributions": entries})
    SweepConfig.from_dict({**GRID, "distributions": ["heavy_tailed", {"name": "heavy_tailed",
                                                                      "params": {"nu": 3.5}}]})


def test_workers_with_an_executor_that_ignores_them_are_refused():
    with pytest.raises(ValueError, match=r"workers sets the processes of the default pool .* "
                                         r"received workers=2 with executor='serial'"):
        run_sweep(GRID, executor="serial", workers=2, progress=False)
    run_sweep({**GRID, "n_trials": 2, "distributions": ["gaussian"]}, executor="serial", workers=1,
              progress=False)   # what `kvstats sweep --workers 1` passes


@pytest.mark.parametrize("entry, match", [
    ({"schemes": [{"name": "KQV", "parms": {}}]},
     r"a scheme entry must have 'name' .*; received \{'name': 'KQV', 'parms': \{\}\}; "
     r"unknown key\(s\) \['parms'\] \(did you mean 'params'\?\)"),
    ({"distributions": [{"name": "gaussian", "param": {}}]},
     r"a distribution entry must have .*; unknown key\(s\) \['param'\] \(did you mean 'params'\?\)"),
])
def test_an_unknown_key_of_an_entry_is_named(entry, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig.from_dict({**GRID, "comparisons": [], **entry})


def test_a_label_that_is_not_a_string_is_refused():
    with pytest.raises(TypeError, match=r"scheme 'KQV' label must be a string; received 3"):
        SweepConfig.from_dict({**GRID, "schemes": [{"name": "KQV", "label": 3}], "comparisons": []})


def test_budgets_of_a_fixed_budget_scheme_are_refused():
    with pytest.raises(ValueError, match=r"scheme 'K4V2' has a fixed budget .* remove its 'budgets'; "
                                         r"received budgets \[3\]"):
        SweepConfig.from_dict({**GRID, "schemes": [{"name": "K4V2", "budgets": [3]}], "comparisons": []})


def test_memory_of_a_large_cell_is_a_few_chunks_whatever_its_trials(monkeypatch):
    """d = 1024, N = 4096, one trial per chunk (float32: 16 MiB per array of a chunk), all
    chunks in one task (the runner's longest loop): the peak of traced allocations (numpy's
    included) stays a few chunk-sized arrays, and does not grow with the number of chunks."""
    monkeypatch.setattr(plan, "_TARGET_TASKS", 1)
    chunk_bytes = 4096 * 1024 * 4

    def peak(n_trials):
        cfg = {"schemes": ["KV"], "budgets": [2], "distributions": ["gaussian"], "dims": [1024],
               "n_keys": [4096], "n_trials": n_trials, "chunk_size": 1, "dtype": "float32",
               "comparisons": []}
        tracemalloc.start()
        try:
            run_sweep(cfg, executor="serial", progress=False)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(2)   # first use: codebooks and caches
    two, five = peak(2), peak(5)
    assert two < 10 * chunk_bytes   # K, V, q, their codes and reconstructions, the profile
    assert five < two + chunk_bytes   # three more chunks, not three more chunks' data


def test_the_git_revision_is_that_of_the_checkout_kvstats_runs_from(tmp_path, monkeypatch):
    """An installed copy of kvstats inside another repository (its .venv) runs code that the
    repository's HEAD does not describe: the manifest then records no revision."""
    assert store._git_revision() is not None   # the tests run from the checkout
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run(git[:5] + ["init", "-q", str(tmp_path)], check=True)
    (tmp_path / "x").write_text("x")
    subprocess.run(git + ["add", "x"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    installed = tmp_path / ".venv" / "lib" / "site-packages" / "kvstats" / "sweep"
    installed.mkdir(parents=True)
    monkeypatch.setattr(store, "__file__", str(installed / "store.py"))
    assert store._git_revision() is None
    # the checkout itself (kvstats/ at its top) is recorded
    (tmp_path / "kvstats" / "sweep").mkdir(parents=True)
    monkeypatch.setattr(store, "__file__", str(tmp_path / "kvstats" / "sweep" / "store.py"))
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert store._git_revision() == {"revision": head, "dirty": False}


def test_a_failing_git_status_records_an_unknown_dirty_flag(monkeypatch):
    """`git status` failing (a lock held, a damaged index) says nothing of the tree: the
    manifest must not record it as clean."""
    run = subprocess.run

    def failing_status(cmd, *args, **kwargs):
        if cmd[:2] == ["git", "status"]:
            return subprocess.CompletedProcess(cmd, 128, stdout="", stderr="fatal: index locked")
        return run(cmd, *args, **kwargs)

    monkeypatch.setattr(store.subprocess, "run", failing_status)
    record = store._git_revision()
    assert record is not None and len(record["revision"]) == 40 and record["dirty"] is None


def test_a_replay_by_other_code_than_the_sweeps_warns(tmp_path):
    import json
    import warnings

    from kvstats.sweep import replay_trials

    small = {**GRID, "distributions": ["gaussian"], "schemes": ["KV"], "budgets": [2]}
    run_sweep(small, out=tmp_path, executor="serial", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert replay_trials(tmp_path, trials=[0]).profile().equals(
            replay_trials(tmp_path, trials=[0]).stored())
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["versions"]["kvstats_source"] = "sha256:000000000000"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match=r"other code than this process runs: kvstats_source "
                                            r"sha256:000000000000 \(this process: sha256:"):
        replay_trials(tmp_path, trials=[0])


def test_a_serial_sweep_moves_its_bar_per_chunk_within_a_task(monkeypatch):
    """One task holds a whole case (a real case always does): the bar must not wait for it."""
    import tqdm.auto

    monkeypatch.setattr(plan, "_TARGET_TASKS", 1)
    drawn, seen = [], []
    real_data = work._chunk_data

    def counting(*args, **kw):
        drawn.append(args[1])
        return real_data(*args, **kw)

    class Bar:
        def __init__(self, *args, total, initial, **kw):
            self.n = initial

        def update(self, n):
            self.n += n
            seen.append((len(drawn), self.n))

        def close(self):
            pass

    monkeypatch.setattr(work, "_chunk_data", counting)
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    run_sweep({**GRID, "distributions": ["gaussian"], "schemes": ["KV"]}, executor="serial")
    # two cells (budgets 2, 3), chunks of 3, 3, 1 trials: the bar moves after each chunk is coded
    assert seen == [(1, 6), (2, 12), (3, 14)]


def test_a_pool_sweep_moves_its_bar_per_chunk_within_a_task(monkeypatch):
    """The default pool's workers report each chunk as it is coded: the bar moves per chunk,
    not per task (a real case is one task), and counts every trial once."""
    import tqdm.auto

    monkeypatch.setattr(plan, "_TARGET_TASKS", 1)   # one task per case: two tasks
    updates = []

    class Bar:
        def __init__(self, *args, total, initial, **kw):
            self.total = total

        def update(self, n):
            updates.append(n)

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    res = run_sweep({**GRID, "schemes": ["KV"]}, workers=2)
    assert res.manifest["executor"] == "ProcessPoolExecutor(2)"
    # per case: two cells (budgets 2, 3), chunks of 3, 3, 1 trials
    assert sorted(updates) == [2, 2, 6, 6, 6, 6] and sum(updates) == 2 * 2 * 7


def test_the_bar_shows_whole_finished_cells_and_moves_per_chunk(monkeypatch, capfd):
    """The bar counts the cells' trials (it moves as each chunk is coded) and shows the
    cells finished as a whole number ("2/4 cells", never "2.3/4"); resumed cells are
    finished from the start. Every refresh is drawn (mininterval 0) to read them all."""
    import re

    import tqdm.auto

    BAR = r"sweep: +(\d+)%\|[^|]*\| \d+/\d+ trials, (\S+)/(\S+) cells"   # percent, cells done, cells
    real_tqdm = tqdm.auto.tqdm

    class EveryRefresh(real_tqdm):
        def __init__(self, *args, **kw):
            super().__init__(*args, mininterval=0, miniters=1, ascii=True, ncols=100, **kw)

    monkeypatch.setattr(tqdm.auto, "tqdm", EveryRefresh)
    monkeypatch.setattr(plan, "_TARGET_TASKS", 1)
    small = {**GRID, "distributions": ["gaussian"], "schemes": ["KV", "KQV"]}   # 4 cells, 7 trials
    capfd.readouterr()
    run_sweep(small, executor="serial", progress=True)
    shown = re.findall(BAR, capfd.readouterr().err)
    assert shown and all(done.isdigit() and total == "4" for _, done, total in shown), shown
    # chunks of 3, 3 and 1 trials, each coded by the 4 cells: 12, 24 and 28 of 28 coded trials
    assert [(int(p), int(done)) for p, done, _ in shown] == [(0, 0), (43, 0), (86, 0), (100, 4), (100, 4)]

    # resumed cells count as finished from the start (the pool's per-chunk reports:
    # test_a_pool_sweep_moves_its_bar_per_chunk_within_a_task)
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        first = run_sweep(small, out=out, executor="serial", progress=False)
        (Path(out) / "cells" / f"{first.manifest['cells'][0]['id']}.parquet").unlink()
        capfd.readouterr()
        run_sweep(small, out=out, executor="serial", progress=True)
    shown = re.findall(BAR, capfd.readouterr().err)
    assert shown[0] == ("75", "3", "4") and shown[-1] == ("100", "4", "4"), shown


def test_the_pool_bar_counts_a_tasks_unreported_chunks_when_it_returns():
    """Reports move the bar while their task runs; a task's trials its reports did not show
    are added when it returns (another executor's workers report none), and a report read
    after its task returned is not counted again: every trial once."""
    import concurrent.futures as cf
    import threading

    from kvstats.sweep.pool import _gather

    class Reports:
        """The progress queue: each drain reads the next batch (3 trials of task 0 and 2 of
        task 1, then a late report of 1 more of task 0)."""

        def __init__(self, batches):
            self.batches, self.now = batches, None

        def empty(self):
            if self.now is None:   # a drain begins
                self.now = self.batches.pop(0) if self.batches else []
            if self.now:
                return False
            self.now = None   # the drain ends
            return True

        def get(self):
            return self.now.pop(0)

    updates, a_collected = [], threading.Event()
    part = pd.DataFrame({"trial": range(4)})

    class Bar:
        update = staticmethod(updates.append)

    def collect(results, code, env):
        a_collected.set()

    with cf.ThreadPoolExecutor(2) as pool:
        a = pool.submit(lambda: ({}, [("a", 0, part, 0.0)], [], {}))
        b = pool.submit(lambda: a_collected.wait() and ({}, [("b", 0, part, 0.0)], [], {}))
        try:
            _gather({a: 0, b: 1}, collect, Bar, Reports([[(0, 3), (1, 2)], [(0, 1)]]), [], set())
        finally:
            a_collected.set()   # b returns whatever happened
    # b's 2 reported trials move the bar while b still runs (it waits for a's collection)
    assert updates == [3, 2, 1, 2]


def test_cells_of_a_worker_running_other_code_record_it_and_are_recomputed(same_bits, tmp_path, monkeypatch, capfd):
    """A pool worker imports kvstats itself; after an edit made while the sweep runs its
    code is not the calling process's. Its cells record the worker's code (so a resume
    recomputes them), the manifest lists it and a line says so. Simulated with a thread
    pool whose tasks report another source digest."""
    import concurrent.futures as cf

    small = {**GRID, "distributions": ["gaussian"], "schemes": ["KV"]}
    mine = plan.code_version()
    other = {**mine, "kvstats_source": "f" * 64}
    monkeypatch.setattr(plan, "code_version", lambda: dict(other))   # what _user_task reports
    with cf.ThreadPoolExecutor(2) as pool:
        first = run_sweep(small, out=tmp_path, executor=pool, progress=False)
    assert [c["code"] for c in first.manifest["cells"]] == [other, other]
    assert "2 cell(s) were computed by workers running other code" in capfd.readouterr().err
    assert first.manifest["n_other_code"] == 2
    monkeypatch.undo()
    # the manifest's versions are this process's; the cell's own record is not
    from kvstats.sweep import replay_trials

    cid = first.manifest["cells"][0]["id"]
    with pytest.warns(RuntimeWarning, match=rf"cell {cid} was computed by a worker running other code "
                                            rf"than this process runs: kvstats_source ffffffffffff "
                                            rf"\(this process: {mine['kvstats_source'][:12]}\)"):
        replay_trials(tmp_path, cell_id=cid, trials=[0])
    again = run_sweep(small, out=tmp_path, executor="serial", progress=False)
    assert [c["status"] for c in again.manifest["cells"]] == ["recomputed"] * 2
    assert all("code" not in c for c in again.manifest["cells"]) and again.manifest["n_other_code"] == 0
    same_bits(again.frame, first.frame)
    assert [c["status"] for c in run_sweep(small, out=tmp_path, executor="serial",
                                           progress=False).manifest["cells"]] == ["resumed"] * 2
