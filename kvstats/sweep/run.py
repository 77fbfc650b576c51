"""Running a sweep: resume finished cells, plan tasks, run them on an executor, collect.

A cell is computed in chunks, possibly by several tasks; the calling process collects
the frames the workers return and writes a cell (:mod:`kvstats.sweep.store`) once all
its trials have arrived, so an interrupted sweep resumes cleanly and remote workers
need no shared file system. The frame and the files do not depend on the executor or
on the order tasks finish in.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from kvstats._checks import check_int
from kvstats.results import SweepResult
from kvstats.sweep.config import SweepConfig, load_config
from kvstats.sweep.plan import _tasks
from kvstats.sweep.store import _git_revision, _now, load_cell, make_manifest, write_cell, write_result
from kvstats.sweep.work import _compute_task

__all__ = ["run_sweep"]


def _one_blas_thread() -> None:
    """Worker initializer: one BLAS thread per worker process.

    The pool already puts one process on every core; a multi-threaded BLAS inside each
    then oversubscribes the cores, and its spin-waiting threads make a small batched
    matmul take ~1 s instead of ~1 ms on a loaded machine (measured: median of 15 calls
    of (24, 64, 128) @ (24, 128, 128), 1.1 s with 2 OpenBLAS threads under load, 0.8 ms
    with 1).
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _default_workers(n_tasks: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, n_tasks))


def run_sweep(config: SweepConfig | Mapping[str, Any] | str | os.PathLike, out: str | os.PathLike | None = None,
              executor: cf.Executor | str | None = None, progress: bool = True, *,
              resume: bool = True, workers: int | None = None) -> SweepResult:
    """Run a sweep and return its tidy per-trial frame and manifest.

    Parameters
    ----------
    config : SweepConfig, dict or path
        The grid (a TOML path is read with :meth:`SweepConfig.from_toml`).
    out : path, optional
        Directory for ``cells/<cell-id>.parquet``, ``results.parquet`` and
        ``manifest.json``. Without it nothing is written and nothing can be resumed.
    executor : Executor, "serial", "process" or None
        Where tasks run: any :class:`concurrent.futures.Executor` (e.g. a
        ``dask.distributed.Client(...).get_executor()``), ``"serial"`` (in this process),
        or ``None``/``"process"`` (a :class:`~concurrent.futures.ProcessPoolExecutor`
        with ``workers`` forkserver processes, default min(CPUs, tasks), each limited to
        one BLAS thread; one task runs serially).
        An executor passed in is not shut down.
    progress : bool
        Show a tqdm progress bar over cells.
    resume : bool
        Reuse finished cells found in ``out/cells`` (default). With False every cell is
        recomputed and overwritten.
    workers : int, optional
        Processes of the default executor.

    Returns
    -------
    SweepResult
        ``frame`` (one row per cell and trial; columns of :func:`kvstats.error_profile`
        plus :data:`CELL_COLUMNS`) and ``manifest`` (config, seed, versions, git
        revision, times, host, per-cell status: ``"computed"`` or ``"resumed"``).

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 8},
    ...     executor="serial", progress=False)
    >>> sorted(res.frame["scheme"].unique()), len(res.frame)
    (['KQV', 'QKQV'], 16)
    """
    config = load_config(config)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False; received {progress!r}")
    if workers is not None:
        workers = check_int(workers, "workers", low=1)
    started, tic = _now(), time.perf_counter()
    git = _git_revision()  # the code that runs: the tree may change while a long sweep runs
    cells = [(c, config.cell_id(c)) for c in config.cells()]
    out_dir = None if out is None else Path(out)
    cells_dir = None
    if out_dir is not None:
        cells_dir = out_dir / "cells"
        cells_dir.mkdir(parents=True, exist_ok=True)
    frames: dict[str, pd.DataFrame] = {}
    status: dict[str, dict[str, Any]] = {}
    todo = []
    for cell, cid in cells:
        done = load_cell(cells_dir, cid) if (cells_dir is not None and resume) else None
        if done is not None:
            frames[cid] = done
            status[cid] = {"status": "resumed", "seconds": None}
        else:
            todo.append((cell, cid))
    tasks = _tasks(config, todo)

    from tqdm.auto import tqdm
    # counts trials (integers: no float drift), shown in cells
    bar = tqdm(total=len(cells) * config.n_trials, initial=(len(cells) - len(todo)) * config.n_trials,
               desc="sweep", disable=not progress, file=sys.stderr, unit_scale=1 / config.n_trials,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.0f} cells [{elapsed}<{remaining}]")

    # A cell is computed in chunks, possibly by several tasks; it is written (and counts
    # as done for a resume) once all its trials have arrived.
    pending: dict[str, dict[int, pd.DataFrame]] = {cid: {} for _, cid in todo}
    seconds = dict.fromkeys(pending, 0.0)

    def collect(results: list[tuple[str, int, pd.DataFrame, float]]) -> None:
        for cid, start, part, secs in results:
            pending[cid][start] = part
            seconds[cid] += secs
            bar.update(len(part))
            if sum(map(len, pending[cid].values())) == config.n_trials:
                parts = pending.pop(cid)
                frame = pd.concat([parts[s] for s in sorted(parts)], ignore_index=True)
                if cells_dir is not None:
                    write_cell(cells_dir, cid, frame)
                frames[cid] = frame
                status[cid] = {"status": "computed", "seconds": round(seconds[cid], 3)}

    own_pool = None
    if executor is None or executor == "process":
        n_workers = workers or _default_workers(len(tasks))
        if n_workers > 1 and len(tasks) > 1:
            # forkserver, not fork: forking a process that has started threads (JAX, BLAS)
            # can deadlock the child.
            own_pool = cf.ProcessPoolExecutor(max_workers=n_workers, initializer=_one_blas_thread,
                                              mp_context=multiprocessing.get_context("forkserver"))
            pool: cf.Executor | None = own_pool
        else:
            pool = None
        executor_name = f"ProcessPoolExecutor({n_workers})" if own_pool else "serial"
    elif executor == "serial":
        pool, executor_name = None, "serial"
    elif isinstance(executor, cf.Executor):
        pool, executor_name = executor, type(executor).__name__
    else:
        raise TypeError("executor must be a concurrent.futures.Executor, 'serial', 'process' or None; "
                        f"received {executor!r}")
    try:
        if pool is None:
            for task in tasks:
                collect(_compute_task(task))
        else:
            futures = [pool.submit(_compute_task, task) for task in tasks]
            try:
                for fut in cf.as_completed(futures):
                    collect(fut.result())
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
    finally:
        bar.close()
        if own_pool is not None:
            own_pool.shutdown(wait=True, cancel_futures=True)

    # Cells in grid order, trials in order: the frame does not depend on completion order.
    frame = pd.concat([frames[cid] for _, cid in cells], ignore_index=True)
    manifest = make_manifest(config, cells, status, len(frame), started=started,
                             seconds=time.perf_counter() - tic, git=git, executor=executor_name)
    if out_dir is not None:
        write_result(out_dir, frame, manifest)
    return SweepResult(frame, manifest, config, out_dir)
