"""Running a sweep: check everything, resume finished cells, run tasks on an executor, collect.

Before any compute the whole grid is checked (:mod:`kvstats.sweep.preflight`: every distribution's
parameters at every (d, N), every scheme at every budget and d, user code's bits and
seeds), the output folder is refused if it holds files but no kvstats sweep, locked,
cleared of another sweep's outputs and checked writable (:mod:`kvstats.sweep.store`). A
cell is computed in chunks, possibly by several tasks; the calling process collects the
frames the workers return and writes a cell once all its trials have arrived, keeping the
chunks of cells not complete yet as part files (:mod:`kvstats.sweep.parts`), so an
interrupted sweep (even by ``kill -9``) resumes cleanly, computing only the chunks it lacks,
and remote workers need no shared file system. The frame and the files do not depend on
the executor or on task order.

The tasks run on an executor through :mod:`kvstats.sweep.pool` (its workers, their
progress, warnings and failures). User code reaches every worker: a task is sent as
``_user_task(payload, task)``, whose payload (:func:`kvstats.plugins.worker_payload`)
names the config's plugins and carries a script's own registrations by reference
(:func:`kvstats.plugins.install_worker_payload`), with the record of the user files this
process checked: a worker refuses other ones. The manifest records
:func:`kvstats.plugins.user_code`.

Kept whole at about 600 lines, one idea: a sweep's run from the checked grid to the
written result, whose steps share the run's state (cells to do, their parts, status,
executor); the pieces with an idea of their own have modules (plan, pool, store, work).
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import contextlib
import json
import multiprocessing
import os
import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Collection, Mapping

import pandas as pd

from kvstats._checks import check_int
from kvstats.plugins import _check_unchanged, user_code, worker_payload
from kvstats.quant.coder import NormOverflowError
from kvstats.results import SweepResult, _digest, _user_stacklevel, config_fingerprint
from kvstats.sweep.config import SweepConfig, load_config
from kvstats.sweep.numeric_env import NumericEnvWarning, env_differences, numeric_env
from kvstats.sweep.parts import (PARTS, _kept_chunks, check_parts_slot, drop_parts, resume_parts,
                                 write_part)
from kvstats.sweep.plan import Cell, _tasks, chunk_for, code_version
from kvstats.sweep.preflight import preflight as _preflight
from kvstats.sweep.pool import (WorkerDiedError, _default_workers, _gather, _n_rows, _one_blas_thread,
                                _pool_worker, _portable, _recording, _say, _show_warnings, _user_task)
from kvstats.sweep.store import (_git_revision, _now, check_cell_slots, check_out_folder,
                                 check_writable, clear_outputs, config_settings, load_cell, lock_dir,
                                 make_manifest, previous_config, write_cell, write_result)
from kvstats.sweep.work import _compute_task

__all__ = ["run_sweep", "check_grid", "WorkerDiedError"]


def _kept(cells_dir: Path | None, n_done: int, n_cells: int, exc: BaseException | None = None,
          unfinished: Collection[str] = frozenset(), case_of: Mapping[str, str] | None = None
          ) -> str | None:
    """The note a failed sweep's error ``exc`` gets: what is kept, and how to resume.

    A norm overflow is the data's (the sweep is seeded): the same sweep would fail the same
    way, so the note says to change the config first, not to rerun. The chunks of cells still
    unfinished (``unfinished``, their ids) that a resume reuses are counted too: those on
    disk in ``cells/parts`` that every unfinished cell of their case has (``case_of``: cell
    id -> case key; without it each cell counts alone), the rule of
    :func:`~kvstats.sweep.parts.resume_parts`. The count is the one the resume then says.

    Examples
    --------
    >>> _kept(Path("out/cells"), 4, 8)
    "[4 of 8 cells finished, kept in out/cells: rerun with resume (kvstats sweep --resume; run_sweep's default) to compute only the other 4]"
    >>> print(_kept(Path("out/cells"), 4, 8, NormOverflowError("K has a vector norm of 9.6e+04")))
    [4 of 8 cells finished, kept in out/cells; the same sweep fails the same way (its data are seeded): change the config as said, then rerun with resume (kvstats sweep --resume; run_sweep's default) to reuse the cells it leaves unchanged]
    >>> _kept(Path("out/cells"), 8, 8, OSError(28, "No space left on device"))
    "[all 8 cells finished, kept in out/cells: rerun with resume (kvstats sweep --resume; run_sweep's default) to write the results from them, computing nothing]"
    >>> _kept(None, 4, 8) is None
    True
    """
    if cells_dir is None:
        return None   # nothing is kept
    where = str(cells_dir)
    # what is on disk, not what was meant to be written (a full disk stops a part's write),
    # and of it what a resume reuses (an interrupt may land between a chunk's cells' writes)
    kept = _kept_chunks(cells_dir, {cid: (case_of or {}).get(cid, cid) for cid in unfinished})
    parts = sum(map(len, kept.values()))
    if parts:
        where += (f" (and {parts} finished chunk(s) of {sum(map(bool, kept.values()))} unfinished "
                  f"cell(s) in {cells_dir / PARTS})")
    if n_done == n_cells:   # failed after the last cell (writing the results): nothing to compute
        return (f"[all {n_cells} cells finished, kept in {where}: rerun with resume (kvstats sweep "
                "--resume; run_sweep's default) to write the results from them, computing nothing]")
    if isinstance(exc, NormOverflowError):
        return (f"[{n_done} of {n_cells} cells finished, kept in {where}; the same sweep fails "
                "the same way (its data are seeded): change the config as said, then rerun with resume "
                "(kvstats sweep --resume; run_sweep's default) to reuse the cells it leaves unchanged]")
    rest = " (their missing chunks)" if parts else ""
    return (f"[{n_done} of {n_cells} cells finished, kept in {where}: rerun with resume "
            f"(kvstats sweep --resume; run_sweep's default) to compute only the other "
            f"{n_cells - n_done}{rest}]")


def _cell_bar(n_cells: int, n_done: int, n_trials: int, show: bool, n_parts: int = 0) -> Any:
    """The sweep's progress bar: it moves per chunk, counting the cells' coded trials (its
    percentage is of those, as the count beside it), and shows the whole finished cells
    after them: ``sweep:  27%|██▋   | 648/2400 trials, 6/24 cells [...]`` (a cell is
    written once all its trials are in, so the two counts need not move together).

    The cells' count is the attribute ``cells_done`` (``n_done`` resumed cells at the
    start), which the caller raises as each cell is complete
    (tests/sweep/test_progress_bar.py holds its text); ``n_parts`` trials of unfinished
    cells resumed from their parts count from the start too.
    """
    from tqdm.auto import tqdm

    class CellBar(tqdm):
        cells_done = n_done

        @property
        def format_dict(self) -> dict[str, Any]:   # tqdm fills bar_format from this
            return {**super().format_dict, "cells_done": self.cells_done, "cells": n_cells}

    return CellBar(total=n_cells * n_trials, initial=n_done * n_trials + n_parts, desc="sweep", disable=not show,
                   file=sys.stderr,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} trials, "
                              "{cells_done}/{cells} cells [{elapsed}<{remaining}]")


def _one_or_mixed(values: dict[str, dict[str, str]]) -> dict[str, str]:
    """The one code (or environment) that computed a cell's parts, or a mark none equals."""
    items = list(values.values())
    return items[0] if len(items) == 1 else {"mixed": json.dumps(items, sort_keys=True)}


def _other_env(caught: list[warnings.WarningMessage]) -> dict[str, Any]:
    """The resumed cells of another numerical environment (cell id -> its record), from the
    :class:`NumericEnvWarning` s :func:`load_cell` gave; any other warning is shown again."""
    other: dict[str, Any] = {}
    for w in caught:
        if isinstance(w.message, NumericEnvWarning):
            other[w.message.cell_id] = w.message.stored
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return other


def check_grid(config: SweepConfig | Mapping[str, Any] | str | os.PathLike) -> list[tuple[Cell, str]]:
    """Check that every cell of a sweep can run, before any compute; return (cell, id) pairs.

    Loads the config (validated whole, ``[report]`` included), builds the grid (reading
    real captures' headers), then every distribution at every (d, N) on one tiny draw
    and every scheme at every budget and d, so that a bad parameter fails now with a
    message naming the entry, not after hours of other cells; a user scheme whose stored
    bits are not its declared ones, and user code whose same seed gives other keys or
    codes, are refused too (:func:`kvstats.sweep.preflight.preflight`). :func:`run_sweep` calls it.

    Examples
    --------
    >>> check_grid({"schemes": ["KQV"], "budgets": [3], "distributions": [
    ...     {"name": "low_rank", "params": {"rank": 40}}], "dims": [16], "n_keys": [8]})
    Traceback (most recent call last):
    ...
    ValueError: distribution 'low_rank' params rank=40 at d=16, N=8: rank must be an integer in [1, 16]; received 40
    """
    config = load_config(config)
    cells = [(c, config.cell_id(c)) for c in config.cells()]
    _preflight(config, cells)
    return cells


def _unguarded_main() -> str | None:
    """Where the main script calls the sweep outside ``if __name__ == "__main__":``, or None.

    A pool's forkserver or spawn workers import the main script again: an unguarded call
    would start a sweep in every worker, and the pool breaks (``BrokenProcessPool``). The
    call site is found on the stack and its top-level statement in the script's syntax tree.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None  # interactive, -c, notebooks: workers do not re-import a script
    line = None
    frame = sys._getframe(1)
    while frame is not None:
        if (frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
                and os.path.abspath(frame.f_code.co_filename) == os.path.abspath(path)):
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8-sig"))   # an editor's byte-order mark
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
                return None
            return f"{path}:{line}"
    return None


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
        The folder is locked while the sweep runs (a second sweep into it raises
        :class:`~kvstats.sweep.store.SweepLockedError`) and, before any compute, cleared
        of what an earlier sweep wrote there (manifest, results, report, figures, cells
        of another grid; :func:`~kvstats.sweep.store.clear_outputs`). A folder that
        holds files but no kvstats sweep is refused (ValueError,
        :func:`~kvstats.sweep.store.check_out_folder`).
    executor : Executor, "serial", "process" or None
        Where tasks run: any :class:`concurrent.futures.Executor` (e.g. a
        ``dask.distributed.Client(...).get_executor()``), ``"serial"`` (in this process),
        or ``None``/``"process"`` (a :class:`~concurrent.futures.ProcessPoolExecutor`
        with ``workers`` forkserver processes, default min(CPUs, tasks), each limited to
        one BLAS thread; one task runs serially). Called from a script's top level
        outside ``if __name__ == "__main__":`` (the workers would import the script
        again and start sweeps of their own), the default pool is replaced by a serial
        run, with a warning.
        An executor passed in is not shut down.
    progress : bool
        Show the progress bar on stderr (the cells' coded trials and finished cells),
        whatever stderr is; the ``kvstats`` command shows it only on a terminal.
    resume : bool
        Reuse finished cells found in ``out/cells`` (default) after checking each (its
        id, key, rows, schema and content hash); a cell that fails is recomputed, with a
        line on stderr and ``"recomputed"`` and the reason in the manifest. The chunks of
        unfinished cells (``out/cells/parts``, :mod:`kvstats.sweep.parts`) are checked
        alike and reused: only the chunks a case lacks are computed. With False every
        cell is recomputed and overwritten, and the parts are removed.
    workers : int, optional
        Processes of the default executor; more than 1 with another executor is a
        ValueError (it would be ignored).

    Returns
    -------
    SweepResult
        ``frame`` (one row per cell and trial; columns of :func:`kvstats.error_profile`
        plus :data:`CELL_COLUMNS`) and ``manifest`` (config, seed, versions, git
        revision, times, host, per-cell status: ``"computed"``, ``"resumed"`` or
        ``"recomputed"``).

    Raises
    ------
    ValueError, TypeError
        A bad config, or an ``out`` folder holding files but no kvstats sweep; found
        before any compute.
    Exception
        A cell's code failed (the message names the cell or case; a user scheme or
        distribution may raise anything): the sweep stops, tasks not started are
        cancelled, and every cell that finished (those of running tasks too) is written
        to ``out/cells``, the chunks of the others to ``out/cells/parts``; a note on the error says how many, and that the same sweep
        with ``resume`` computes only the rest.
    KeyboardInterrupt
        Ctrl-C: finished cells are kept as above, and the note says how many.
    WorkerDiedError
        A worker process of the default pool died (killed, out of memory): the message
        names the case(s) it was computing; finished cells are kept as above.
    SweepLockedError
        Another sweep writes into ``out``.
    OSError
        ``out`` cannot be written, or a cell's file name in ``out/cells`` is taken by a
        folder (IsADirectoryError naming it); both checked before any compute.

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 8},
    ...     executor="serial", progress=False)
    >>> sorted(res.frame["scheme"].unique()), len(res.frame)
    (['KQV', 'QKQV'], 16)
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError("run_sweep was called while a worker process imported the main script: "
                           "put the script's code under `if __name__ == \"__main__\":`")
    config = load_config(config)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False; received {progress!r}")
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False; received {resume!r}")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a folder path (str or os.PathLike) or None; received {out!r}")
    if workers is not None:
        workers = check_int(workers, "workers", low=1)
    if not (executor is None or executor in ("serial", "process") or isinstance(executor, cf.Executor)):
        raise TypeError("executor must be a concurrent.futures.Executor, 'serial', 'process' or None; "
                        f"received {executor!r}")
    if workers is not None and workers > 1 and not (executor is None or executor == "process"):
        # it would be ignored: the sweep would run serially or on the executor's own workers
        raise ValueError(f"workers sets the processes of the default pool (executor None or 'process'); "
                         f"received workers={workers} with executor={executor!r}")
    return _run_checked(config, check_grid(config), out, executor, progress, resume, workers)


def _run_checked(config: SweepConfig, cells: list[tuple[Cell, str]], out: str | os.PathLike | None,
                 executor: cf.Executor | str | None, progress: bool, resume: bool,
                 workers: int | None) -> SweepResult:
    """:func:`run_sweep` after its checks: ``cells`` is :func:`check_grid` of ``config``.

    ``kvstats sweep`` calls it too: it checks the grid before it takes the output folder's
    lock (held across the sweep and its report), and the grid is checked once.
    """
    started, tic = _now(), time.perf_counter()
    if out is not None:
        check_out_folder(out)  # before lock_dir creates the lock file in it
    with contextlib.ExitStack() as stack:
        out_dir = None if out is None else stack.enter_context(lock_dir(out))
        return _run_locked(config, cells, out_dir, executor, progress, resume, workers, started, tic)


def _run_locked(config: SweepConfig, cells: list[tuple[Cell, str]], out_dir: Path | None,
                executor: cf.Executor | str | None, progress: bool, resume: bool, workers: int | None,
                started: str, tic: float) -> SweepResult:
    # before any cell is removed, read or written: the user code this process runs must be
    # the files the cell ids hash
    _check_unchanged(config)
    git = _git_revision()  # the code that runs: the tree may change while a long sweep runs
    code = code_version()  # ... and what a stored cell must have been computed by to be reused
    env = numeric_env()    # ... and the CPU and BLAS it ran on (recorded; a resume warns)
    fingerprint = config_fingerprint(config)
    cells_dir = None
    if out_dir is not None:
        cells_dir = out_dir / "cells"
        # before anything in the folder is removed: a sweep refused for a cell's file
        # name taken by a folder, or for cells/ it cannot write, leaves an earlier sweep's
        # results as they were
        check_cell_slots(cells_dir, [cid for _, cid in cells])   # also without resume
        check_parts_slot(cells_dir)
        check_writable(cells_dir)   # creates it
        previous = previous_config(out_dir)
        other = previous is not None and _digest(previous) != _digest(config_settings(config.to_dict()))
        removed = clear_outputs(out_dir, {cid for _, cid in cells})
        foreign = [r for r in removed if r.startswith("cells/") and not r.endswith(".tmp")]
        if other or foreign:
            who = "a sweep of another config" if other else "an earlier sweep"
            n_parts = sum(r.startswith(f"cells/{PARTS}/") for r in foreign)   # chunks, not cells
            what = " and ".join(f"{n} {noun}" for n, noun in ((len(foreign) - n_parts, "cell(s)"),
                                                            (n_parts, "unfinished cells' chunk(s)")) if n)
            why = ("not in this grid, or computed by other versions of its user code"
                   if user_code(config) else "not in this grid")
            _say(f"{out_dir}: removed {len(removed)} file(s) {who} left there "
                 f"({what or '0 of them cells'} {why}); one folder holds one sweep")
    frames: dict[str, pd.DataFrame] = {}
    status: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    todo = []
    with warnings.catch_warnings(record=True) as caught:   # each cell's NumericEnvWarning: one below
        warnings.simplefilter("always", NumericEnvWarning)
        loaded = {cid: load_cell(cells_dir, cid, key=cell.key(), n_trials=config.n_trials, code=code,
                                 env=env)
                  for cell, cid in cells if cells_dir is not None and resume}
    other_env = _other_env(caught)
    for cell, cid in cells:
        done, reason = loaded.get(cid, (None, None))
        if done is not None:
            label = cell.params_label()
            if not (done["params"] == label).all():
                # a real capture's label names its file, which its key leaves out (the key
                # holds the content's fingerprint): a capture moved or renamed since is the
                # same cell, labelled as now, else one case would show under two labels
                done = done.assign(params=label)
            frames[cid] = done
            status[cid] = {"status": "resumed", "seconds": None,
                           **({"numeric_env": other_env[cid]} if cid in other_env else {})}
        else:
            if reason is not None:
                reasons[cid] = reason
                _say(f"cell {cid} ({cell.describe()}): the stored file {reason}; recomputing it")
            todo.append((cell, cid))
    # A cell is computed in chunks, possibly by several tasks; it is written (and counts
    # as done for a resume) once all its trials have arrived. Until then its chunks are
    # kept in cells/parts (kvstats.sweep.parts), and a resume computes only the chunks
    # its case lacks.
    pending: dict[str, dict[int, pd.DataFrame]] = {cid: {} for _, cid in todo}
    seconds = dict.fromkeys(pending, 0.0)
    keys = {cid: cell.key() for cell, cid in todo}
    chunks = {cid: chunk_for(config, cell.n_keys, cell.dim) for cell, cid in todo}

    # the code and the numerical environment of each part
    used: dict[str, dict[str, dict[str, str]]] = {cid: {} for cid in pending}
    used_env: dict[str, dict[str, dict[str, str]]] = {cid: {} for cid in pending}
    others: list[str] = []
    done: dict[str, set[int]] = {}   # case key -> the chunks resumed from parts
    n_resumed: dict[str, int] = {}   # cell id -> its chunks resumed from parts (the manifest's)
    parts_env: dict[str, Any] = {}   # cell id -> the environment of a resumed chunk not this one
    if cells_dir is not None:
        # the parts of resumed cells are left over (a cell written, its parts not yet
        # removed); without resume every part goes
        drop_parts(cells_dir, None if not resume else {cid for _, cid in cells if cid not in pending})
        stored = resume_parts(cells_dir, todo, n_trials=config.n_trials, code=code, say=_say,
                              chunk_of=lambda c: chunk_for(config, c.n_keys, c.dim)) if resume else {}
        for cell, cid in todo:
            for start, (part, meta) in stored.get(cid, {}).items():
                pending[cid][start] = part
                used[cid][json.dumps(code, sort_keys=True)] = code
                part_env = meta.get("numeric_env")
                used_env[cid][json.dumps(part_env, sort_keys=True)] = part_env
                if env_differences(part_env, env):
                    parts_env.setdefault(cid, part_env)
                seconds[cid] += float(meta.get("seconds") or 0.0)
                done.setdefault(cell.case_key(), set()).add(start // chunks[cid])
            n_resumed[cid] = len(stored.get(cid, {}))
        n_parts = sum(len(s) for s in stored.values())
        if n_parts:
            _say(f"resuming {n_parts} chunk(s) of {sum(map(bool, stored.values()))} unfinished cell(s) "
                 f"from {cells_dir / 'parts'}")
    if other_env or parts_env:   # one warning for the cells and the chunks resumed
        what = [f"{len(other_env)} of {len(cells) - len(todo)} resumed cell(s)"] if other_env else []
        what += [f"the resumed chunks of {len(parts_env)} cell(s)"] if parts_env else []
        first, stored_env = next(iter({**other_env, **parts_env}.items()))
        warnings.warn(
            f"{' and '.join(what)} were computed in another numerical environment (CPU or BLAS; "
            f"e.g. cell {first}: {env_differences(stored_env, env)}); "
            "their last bits may differ from cells computed here. They are kept (the manifest lists "
            "them, with n_other_env); resume=False (kvstats sweep without --resume) recomputes "
            "every cell here", NumericEnvWarning, stacklevel=_user_stacklevel())
    tasks = _tasks(config, todo, done)

    bar = _cell_bar(len(cells), len(cells) - len(todo), config.n_trials, progress,
                    sum(len(p) for ps in pending.values() for p in ps.values()))

    def collect(results: list[tuple[str, int, pd.DataFrame, float]], by: dict[str, str] = code,
                by_env: dict[str, str] = env) -> None:
        arrived: list[tuple[int, str, pd.DataFrame, float]] = []
        for cid, start, part, secs in results:
            pending[cid][start] = part
            used[cid][json.dumps(by, sort_keys=True)] = by
            used_env[cid][json.dumps(by_env, sort_keys=True)] = by_env
            seconds[cid] += secs
            arrived.append((start // chunks[cid], cid, part, secs))
        complete = [c for c in dict.fromkeys(a[1] for a in arrived)
                    if sum(map(len, pending[c].values())) >= config.n_trials]
        # chunk by chunk across the cells (every cell of chunk b, then b + 1): a resume reuses
        # a chunk only when every cell of its case has it, so an interrupt loses at most one
        for chunk, cid, part, secs in sorted(arrived, key=lambda a: a[0]) if cells_dir is not None else ():
            if cid not in complete:
                write_part(cells_dir, cid, chunk, part, key=keys[cid], config=fingerprint, code=by,
                           env=by_env, seconds=secs)
        for cid in complete:
            finish(cid)

    def finish(cid: str) -> None:
        parts = pending.pop(cid)
        frame = pd.concat([parts[s] for s in sorted(parts)], ignore_index=True)
        # the code that computed the cell: this process's, else the worker's (a
        # resume recomputes such a cell), or a mark no code equals (parts by two);
        # its numerical environment likewise (recorded, not checked)
        cell_code = _one_or_mixed(used.pop(cid))
        cell_env = _one_or_mixed(used_env.pop(cid))
        if cells_dir is not None:
            write_cell(cells_dir, cid, frame, key=keys[cid], config=fingerprint, code=cell_code,
                       env=cell_env)
            drop_parts(cells_dir, {cid})
        frames[cid] = frame
        bar.cells_done += 1
        status[cid] = ({"status": "recomputed", "reason": reasons[cid]} if cid in reasons
                       else {"status": "computed"})
        status[cid]["seconds"] = round(seconds[cid], 3)
        if n_resumed.get(cid):   # built partly (or wholly) from chunks an earlier run kept
            status[cid]["resumed_chunks"] = n_resumed[cid]
        if cell_env != env:
            status[cid]["numeric_env"] = cell_env
        if cell_code != code:
            status[cid]["code"] = cell_code
            others.append(cid)

    for cid in [cid for cid, ps in pending.items() if sum(map(len, ps.values())) == config.n_trials]:
        finish(cid)   # every chunk was in its parts (written, not yet put together)

    unpicklable = None
    progress_queue = None
    try:
        payload = worker_payload(config)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        # the script's registrations stay behind (a fork pool inherits them, a default one
        # runs serially); the plugins still go: a worker imports them itself, and checks
        # them against the record of the code this process checked
        payload = (config.plugins, None, user_code(config))
        unpicklable = f"{type(exc).__name__}: {exc}"
    own_pool = None
    alive: tuple[Any, ...] = ()   # the default pool's workers' pipe (below)
    seen_warnings: set = set()   # the tasks' warnings shown (each once)
    if executor is None or executor == "process":
        n_workers = workers or _default_workers(len(tasks))
        where = _unguarded_main() if n_workers > 1 and len(tasks) > 1 else None
        if unpicklable and n_workers > 1 and len(tasks) > 1 and where is None:
            warnings.warn("a scheme or distribution of the sweep was registered with a function "
                          f"that cannot be sent to worker processes ({unpicklable}); this sweep "
                          "runs serially. Define it at a module's top level, or register it in a "
                          "module named in [sweep] plugins, to use a process pool.",
                          RuntimeWarning, stacklevel=_user_stacklevel())
            n_workers = 1
        if where is not None:
            warnings.warn(f"run_sweep is called at the top level of the script {where}, outside "
                          "`if __name__ == \"__main__\":`; worker processes would import the script "
                          "again and start sweeps of their own, so this sweep runs serially. Put the "
                          "call under the guard to use a process pool.", RuntimeWarning,
                          stacklevel=_user_stacklevel())
            n_workers = 1
        if n_workers > 1 and len(tasks) > 1:
            # forkserver, not fork: forking a process that has started threads (JAX, BLAS)
            # can deadlock the child.
            context = multiprocessing.get_context("forkserver")
            progress_queue = context.SimpleQueue()   # written synchronously: no feeder thread
            # the workers end when this process does (pool._exit_with_sweep): the write end
            # stays here, open until the pool has shut down
            alive = context.Pipe(duplex=False)
            own_pool = cf.ProcessPoolExecutor(max_workers=n_workers, initializer=_pool_worker,
                                              initargs=(progress_queue, alive[0]), mp_context=context)
            pool: cf.Executor | None = own_pool
        else:
            pool = None
        executor_name = f"ProcessPoolExecutor({n_workers})" if own_pool else "serial"
    elif executor == "serial":
        pool, executor_name = None, "serial"
    else:
        pool, executor_name = executor, type(executor).__name__
    try:
        if pool is None:
            def chunk_done(done: list[tuple[str, int, pd.DataFrame, float]]) -> None:
                collect(done)
                bar.update(_n_rows(done))   # chunk by chunk: the bar moves within a task

            with _one_blas_thread():   # as a pool's worker (its spin-waits: pool.py), restored after
                for task in tasks:
                    with _recording() as caught:   # this thread's: run_sweep may run on one
                        _compute_task(task, emit=chunk_done)
                    _show_warnings([_portable(w) for w in caught], seen_warnings)
        else:
            futures = {pool.submit(_user_task, payload, task, i): i for i, task in enumerate(tasks)}
            _gather(futures, collect, bar, progress_queue, tasks, seen_warnings)
    except (Exception, KeyboardInterrupt) as exc:   # Ctrl-C too: say what it keeps
        kept = _kept(cells_dir, len(frames), len(cells), exc, {c for _, c in cells} - set(frames),
                     {cid: cell.case_key() for cell, cid in cells})
        if kept is not None:
            exc.add_note(kept)
        raise
    finally:
        bar.close()
        if own_pool is not None:
            own_pool.shutdown(wait=True, cancel_futures=True)
            for end in alive:
                end.close()

    if others:
        _say(f"{len(others)} cell(s) were computed by workers running other code than this process "
             f"(kvstats edited while the sweep ran, or another install): the manifest lists their "
             f"code; a resumed sweep recomputes them")
    # Cells in grid order, trials in order: the frame does not depend on completion order.
    frame = pd.concat([frames[cid] for _, cid in cells], ignore_index=True)
    manifest = make_manifest(config, cells, status, len(frame), started=started,
                             seconds=time.perf_counter() - tic, git=git, executor=executor_name,
                             code=code, env=env)
    own = user_code(config)
    if own:
        manifest["user_code"] = own   # the results came from user code: which, and its hash
    if out_dir is not None:
        try:
            write_result(out_dir, frame, manifest)
        except (Exception, KeyboardInterrupt) as exc:   # a full disk: every cell is kept, say so
            kept = _kept(cells_dir, len(frames), len(cells), exc, {c for _, c in cells} - set(frames),
                         {cid: cell.case_key() for cell, cid in cells})
            if kept is not None:
                exc.add_note(kept)
            raise
    return SweepResult(frame, manifest, config, out_dir)
