"""The tasks of a sweep on an executor: the default pool's workers, what a task brings
back, and how the calling process gathers it.

A task is sent as :func:`_user_task`: the user code first, then
:func:`kvstats.sweep.work._compute_task`; it returns its frames with the worker's
:func:`~kvstats.sweep.plan.code_version` and :func:`~kvstats.sweep.numeric_env.numeric_env`
(which the cells record) and the warnings it raised, which the calling process shows
(:func:`_show_warnings`, each once per sweep). :func:`_gather` collects the tasks as they
finish, moves the progress bar per chunk (the default pool's workers report
each chunk, and each task's start, on a queue) and, when a task fails, keeps every task
that finishes (:mod:`kvstats.sweep.run` writes their cells); a worker that died is a
:class:`WorkerDiedError` naming the cases its pool was computing.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import pickle
import sys
import threading
import warnings
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd

from kvstats.plugins import WorkerPayload, install_worker_payload
from kvstats.sweep import plan
from kvstats.sweep.numeric_env import numeric_env
from kvstats.sweep.store import _usable_cpus
from kvstats.sweep.work import _compute_task

__all__ = ["WorkerDiedError"]


def _say(message: str) -> None:
    """A line of the sweep's on stderr (``kvstats sweep: ...``)."""
    print(f"kvstats sweep: {message}", file=sys.stderr, flush=True)


class WorkerDiedError(RuntimeError):
    """A worker process of the default pool died abruptly (finished cells are kept)."""


def _one_blas_thread() -> Any:
    """Worker initializer: one BLAS thread per worker process; also the serial path's
    context manager (the limits it returns restore the earlier ones on exit).

    The pool already puts one process on every core; a multi-threaded BLAS inside each
    then oversubscribes the cores, and its spin-waiting threads make a small batched
    matmul take ~1 s instead of ~1 ms on a loaded machine (measured: median of 15 calls
    of (24, 64, 128) @ (24, 128, 128), 1.1 s with 2 OpenBLAS threads under load, 0.8 ms
    with 1).
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


# In a worker of the default pool: where it reports each chunk's trials as they are coded
# (set by _pool_worker); None elsewhere (serial runs, another executor's workers).
_PROGRESS: Any = None


def _pool_worker(progress: Any, alive: Any) -> None:
    """Initializer of the default pool's workers: one BLAS thread, the queue their
    chunks' progress goes to (a task returns its frames only when all its chunks are done;
    a real case is one task), and a thread that ends the worker once the sweep's process
    is gone (:func:`_exit_with_sweep`)."""
    global _PROGRESS
    _one_blas_thread()
    _PROGRESS = progress
    threading.Thread(target=_exit_with_sweep, args=(alive,), daemon=True,
                     name="kvstats-exit-with-sweep").start()


def _exit_with_sweep(alive: Any) -> None:
    """End this worker when the sweep's process is gone, however it ended (``kill -9``,
    the OOM killer). ``alive`` is the read end of a pipe whose only write end the sweep's
    process holds (a forkserver worker gets just this end), so reading it returns only at
    end of file: when that process has exited, or closed it after its pool shut down.
    Otherwise the worker, its forkserver (which the workers keep alive) and the caller's
    stdout they hold would outlive the sweep: a worker waits for tasks forever, or blocks
    writing a result nobody reads. Unlike polling the sweep's pid, end of file comes for
    a process that is dead but not yet reaped, and never for another process given its pid."""
    try:
        alive.recv_bytes()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _user_task(payload: WorkerPayload, task: Any, tag: int = 0
               ) -> tuple[dict[str, str], list[tuple[str, int, pd.DataFrame, float]], list[tuple],
                          dict[str, str]]:
    """A task in a worker process: the user code first
    (:func:`kvstats.plugins.install_worker_payload`), then :func:`_compute_task`; returned
    with the worker's :func:`~kvstats.sweep.plan.code_version`, the warnings it raised and
    its :func:`~kvstats.sweep.numeric_env.numeric_env`.
    A worker imports kvstats itself: after an edit made while the sweep runs (or on a
    remote worker with another install or CPU) its code or its last bits are not the
    calling process's, and its cells must say so. In the default pool each chunk's trials (all cells) go to the
    progress queue as ``(tag, trials)``, written before the task returns.

    Warnings are recorded, this thread's only (:func:`_recording`: a task may run on a
    thread; the worker's filters still apply), and returned, for the calling process to show (:func:`_show_warnings`, as a serial run's): a worker's stderr
    is not the caller's, nor are its ``warnings`` settings (``kvstats sweep`` prints each
    warning as one ``kvstats sweep: warning:`` line).
    """
    if _PROGRESS is not None:
        _PROGRESS.put((tag, 0))   # started: if this worker dies, the error names its task
    out: list[tuple[str, int, pd.DataFrame, float]] = []

    def emit(done: list[tuple[str, int, pd.DataFrame, float]]) -> None:
        out.extend(done)
        if _PROGRESS is not None:
            _PROGRESS.put((tag, _n_rows(done)))

    with _recording() as caught:
        install_worker_payload(payload)
        _compute_task(task, emit=emit)
    return plan.code_version(), out, [_portable(w) for w in caught], numeric_env()


# Task warnings are recorded per thread. ``warnings.catch_warnings(record=True)`` swaps the
# module-global ``showwarning`` and filters and restores them on exit, so tasks that overlap
# on threads (a ThreadPoolExecutor, a dask worker's threads) restore each other's state in
# the wrong order and leave the process's warnings going to a dead task's list. Instead one
# hook on ``warnings._showwarnmsg`` (which the C ``warn`` calls, after the filters, before
# ``showwarning``) is installed while any thread records, and sends each warning to the
# list of the thread that raised it, or on as before.
_THREAD = threading.local()        # .log: the list this thread's warnings go to, or absent
_HOOK_LOCK = threading.Lock()
_hook_users = 0                    # threads recording now
_hook: Any = None                  # the installed hook
_replaced: Any = None              # the ``_showwarnmsg`` it replaced


def _hook_for(show: Any, impl: Any) -> Any:
    """The ``_showwarnmsg`` hook: a recording thread's warning goes to its list, any other
    to ``show`` (the one replaced). ``impl`` is ``_showwarnmsg_impl`` when it was installed:
    if it has changed, a ``catch_warnings(record=True)`` entered since (say, by the task's
    own code) is recording, and gets the warning, as it would without this hook."""
    def _showwarnmsg(msg: warnings.WarningMessage) -> None:
        log = getattr(_THREAD, "log", None)
        if log is not None and warnings._showwarnmsg_impl is impl:   # type: ignore[attr-defined]
            log.append(msg)
        else:
            show(msg)
    return _showwarnmsg


@contextlib.contextmanager
def _recording() -> Any:
    """Record the warnings this thread raises (under the process's filters), as a list of
    :class:`warnings.WarningMessage`; other threads' warnings, and the process's
    ``warnings`` state, are left alone. One limit: while any thread is inside a
    ``catch_warnings(record=True)`` of its own (process-wide state in the standard
    library), a recording thread's warnings go to that block's list instead, as they
    would without this hook.

    Like ``catch_warnings``, it starts with the filters' once-per-place records cleared, so
    that a warning shown before (an earlier sweep's) is recorded again.

    Examples
    --------
    >>> import warnings
    >>> from kvstats.sweep.pool import _recording
    >>> before = warnings._showwarnmsg
    >>> with _recording() as caught:
    ...     warnings.warn("mine", UserWarning)
    >>> [str(w.message) for w in caught], warnings._showwarnmsg is before
    (['mine'], True)
    """
    global _hook_users, _hook, _replaced
    with _HOOK_LOCK:
        if _hook_users == 0:
            _replaced = warnings._showwarnmsg   # type: ignore[attr-defined]
            _hook = _hook_for(_replaced, warnings._showwarnmsg_impl)  # type: ignore[attr-defined]
            warnings._showwarnmsg = _hook   # type: ignore[attr-defined]
        _hook_users += 1
        getattr(warnings, "_filters_mutated", lambda: None)()   # catch_warnings' reset of the records
    outer = getattr(_THREAD, "log", None)
    _THREAD.log = caught = []
    try:
        yield caught
    finally:
        _THREAD.log = outer
        with _HOOK_LOCK:
            _hook_users -= 1
            # the one replaced, unless other code has replaced the hook since (theirs stays;
            # the hook then passes every warning on)
            if _hook_users == 0 and warnings._showwarnmsg is _hook:   # type: ignore[attr-defined]
                warnings._showwarnmsg = _replaced   # type: ignore[attr-defined]


def _portable(w: warnings.WarningMessage) -> tuple[type[Warning], str, str, int, str | None]:
    """A recorded warning as ``(category, text, file, line, module)``, which pickles (its
    message or ``source`` object may not); a category that does not pickle (a class
    defined in a function) travels as UserWarning. The module's dotted name (None if
    none has that file) is what a filter's ``module`` matches."""
    category = w.category
    try:
        pickle.dumps(category)
    except Exception:
        category = UserWarning
    module = next((name for name, mod in list(sys.modules.items())
                   if getattr(mod, "__file__", None) == w.filename), None)
    return category, str(w.message), w.filename, w.lineno, module


def _show_warnings(warned: list[tuple[type[Warning], str, str, int, str | None]], seen: set) -> None:
    """Warn here, under this process's filters and ``showwarning``, what a task recorded
    (in a worker or here), each warning once per sweep (``seen``): the same warning of
    every chunk and task is one line, not hundreds; the filters' own once-per-place
    record does not hold it, being cleared whenever any code changes the filters. "The
    same" is the same category and place: a message that counts what its chunk held
    (the norm-range warnings) differs from chunk to chunk, and the first one stands for all."""
    for warning in warned:
        category, text, filename, lineno, module = warning
        place = (category, filename, lineno, module)
        if place not in seen:
            seen.add(place)
            warnings.warn_explicit(text, category, filename, lineno, module=module)


def _n_rows(results: list[tuple[str, int, pd.DataFrame, float]]) -> int:
    return sum(len(part) for _, _, part, _ in results)


def _gather(futures: dict[cf.Future, int], collect: Any, bar: Any, progress: Any,
            tasks: list[Any], seen_warnings: set) -> None:
    """Collect the tasks' results as they finish; the bar moves per chunk where the workers
    report chunks (``progress``, the default pool's queue), else per task.

    A task's chunk reports are written before it returns, so those not yet read when its
    result is are read first; the bar then adds what the task's reports did not show, and
    ignores its reports that arrive later (none can): every trial counts once.

    When a task fails, the tasks not started are cancelled and every other task that
    finishes is still collected (the running ones finish first: the pool's shutdown would
    wait for them anyway; not after Ctrl-C), so that its cells are written for a resume;
    not when collecting failed (a write, or Ctrl-C, in this process). A worker that died
    (``BrokenProcessPool``) is a :class:`WorkerDiedError` naming the ``tasks`` its pool
    was computing (the default pool's workers report each task's start).
    """
    shown = dict.fromkeys(futures.values(), 0)   # trials the bar shows per task
    started: set[int] = set()
    finished: set[int] = set()
    collecting = False

    def drain() -> None:
        while progress is not None and not progress.empty():
            tag, n = progress.get()
            started.add(tag)
            if tag not in finished and n:
                shown[tag] += n
                bar.update(n)

    def take(fut: cf.Future) -> None:
        nonlocal collecting
        tag = futures[fut]
        worker_code, results, warned, worker_env = fut.result()
        collecting = True
        collect(results, worker_code, worker_env)
        collecting = False
        finished.add(tag)
        _show_warnings(warned, seen_warnings)
        rest = _n_rows(results) - shown[tag]
        if rest:
            bar.update(rest)

    waiting = set(futures)
    try:
        while waiting:
            done, waiting = cf.wait(waiting, timeout=0.5 if progress is not None else None,
                                    return_when=cf.FIRST_COMPLETED)
            drain()
            for fut in done:
                take(fut)
    except BaseException as exc:
        for fut in futures:
            fut.cancel()   # those not started
        if collecting:
            raise
        if isinstance(exc, Exception):
            running = sum(not fut.done() for fut in futures)
            if running:   # the error prints once they are done: say why nothing happens
                _say(f"a task failed; waiting for the {running} running task(s) to finish, to keep "
                     "their cells (Ctrl-C stops now)")
            cf.wait(futures)
        for fut in futures:
            if (futures[fut] not in finished and fut.done() and not fut.cancelled()
                    and fut.exception() is None):
                take(fut)
        if not isinstance(exc, BrokenProcessPool):
            raise
        drain()
        lost = [tasks[i].describe() for i in sorted(started - finished)]
        where = ("" if not lost else f" while computing the case {lost[0]}" if len(lost) == 1
                 else f" while computing one of the cases {'; '.join(lost)}")
        raise WorkerDiedError(
            f"a worker process of the sweep died abruptly{where} (killed, out of memory, or the "
            "script that calls run_sweep is not guarded by `if __name__ == \"__main__\":`); run "
            "it serially (kvstats sweep --workers 1; executor='serial') to see the failure in "
            "this process") from exc


def _default_workers(n_tasks: int) -> int:
    return max(1, min(_usable_cpus(), n_tasks))
