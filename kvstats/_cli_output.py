"""How the ``kvstats`` command talks back: its stdout, its one-line errors and warnings, and
the exit statuses they carry, SIGTERM's included (:mod:`kvstats.cli` runs the commands;
private to it).

Nothing heavy at import (the parser's ``--help`` and argument errors import no numpy):
errors of modules the command may not have loaded are matched through :func:`raised`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from typing import Iterator

__all__ = ["PIPE_CLOSED", "Stdout", "Terminated", "close_bars", "computing_error", "discard",
           "error_text", "import_error_text", "kept_note", "missing_package", "one_line", "os_error_text",
           "print_error", "raised", "sigterm_as_interrupt", "warning_printer"]

#: Exit status when stdout's (or stderr's) reader went away: 128 + SIGPIPE (13), as a
#: shell reports a tool the closed pipe killed.
PIPE_CLOSED = 141


def one_line(text: str) -> str:
    """``text`` with every run of whitespace, newlines included, as one space."""
    return " ".join(text.split())


def error_text(exc: BaseException) -> str:
    """``exc`` as one line with its notes (the runner adds the failing cell as a note to
    errors it cannot rebuild with a longer message), each once.

    Examples
    --------
    >>> exc = ValueError("Expecting value: line 1 column 1 (char 0)")
    >>> exc.add_note("[distribution 'x' params - at d=8, N=4]")
    >>> error_text(exc)
    "Expecting value: line 1 column 1 (char 0) [distribution 'x' params - at d=8, N=4]"
    """
    text = str(exc)
    notes = [n for n in getattr(exc, "__notes__", ()) if n not in text]
    return one_line(" ".join([text, *notes]))


def computing_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while kvstats computed, not while it checked the input:
    a sweep's runner names the cell or case (``[cell: ...]``, ``[case: ...]``) in the
    message of a ``ValueError``/``TypeError`` or in a note (kvstats.sweep.work), the
    config checked whole before any compute; a report notes ``[report: computing ...]``
    on an error raised after its input (options, pairs, frame, family) was checked
    (:func:`kvstats.hypothesis_report`, in ``kvstats report`` and in a sweep's report
    phase). Such an error is a bug in the code that computed (a plugin's, or kvstats'),
    whose traceback says where; except a norm overflow, an error of the seeded data whose
    message says what to change in the config.

    Examples
    --------
    >>> from kvstats._cli_output import computing_error
    >>> computing_error(TypeError("object of type 'int' has no len() [cell: 'boom' at n=3]"))
    True
    >>> computing_error(ValueError("scheme 'boom' at n=3, d=64: rank must be >= 1"))
    False
    >>> exc = ValueError("zero-size array to reduction operation maximum which has no identity")
    >>> exc.add_note("[report: computing the tables, its input checked]")
    >>> computing_error(exc)
    True
    >>> computing_error(ValueError("--alpha must be a float in (0, 1) (the [report] option alpha); received 2.0"))
    False
    """
    overflow = raised("kvstats.quant.coder", "NormOverflowError")
    return (re.search(r"\[(cell|case|report): ", error_text(exc)) is not None
            and not isinstance(exc, overflow))


def os_error_text(exc: OSError) -> str:
    """``exc`` as one line: our own messages as they are, the OS's as 'what: path'; then
    its notes (a sweep's: the cells kept, and how to resume).

    Examples
    --------
    >>> exc = OSError(28, "No space left on device", "out/cells/a.parquet")
    >>> exc.add_note("[2 of 4 cells finished, kept in out/cells]")
    >>> os_error_text(exc)
    "cannot use 'out/cells/a.parquet': No space left on device [2 of 4 cells finished, kept in out/cells]"
    """
    if exc.filename is None:
        text = exc.strerror or str(exc)
    else:
        where = f"{exc.filename!s}" + (f" -> {exc.filename2!s}" if exc.filename2 else "")
        text = f"cannot use {where!r}: {exc.strerror}"
    return one_line(" ".join([text, *getattr(exc, "__notes__", ())]))


#: pip's name for a module kvstats imports only when a config needs it, and the extra
#: of pyproject.toml that installs it (``make install`` installs them all).
_PIP_NAMES = {"ml_dtypes": ("ml_dtypes", None), "torch": ("torch", "models"),
              "transformers": ("transformers", "models"), "gguf": ("gguf", "models"),
              "jax": ("jax", "gpu"), "pyarrow": ("pyarrow", "parquet"),
              "dask": ("dask[distributed]", "dask"), "distributed": ("dask[distributed]", "dask"),
              "optimum": ("optimum-quanto", "peers")}


def missing_package(exc: ImportError) -> str | None:
    """The package whose absence ``exc`` reports (its top-level name), or None when it
    reports something else: a name missing from a module that is there (``cannot import
    name``) or a module of kvstats itself is a bug or a half-updated install, which its
    traceback locates, not a package to install.

    Examples
    --------
    >>> missing_package(ModuleNotFoundError("No module named 'torch.nn'", name="torch.nn"))
    'torch'
    >>> missing_package(ModuleNotFoundError("No module named 'ml_dtypes'"))   # no name given
    'ml_dtypes'
    >>> missing_package(ImportError("cannot import name 'f' from 'kvstats.stats'", name="kvstats.stats"))
    >>> missing_package(ModuleNotFoundError("No module named 'kvstats.gone'", name="kvstats.gone"))
    """
    if not isinstance(exc, ModuleNotFoundError):
        return None
    named = re.search(r"No module named '([^']+)'", str(exc))   # a name the importer left out
    module = (exc.name or (named.group(1) if named else "")).split(".")[0]
    return None if module in ("", "kvstats", "kvstats_gpu") else module


def import_error_text(exc: ImportError) -> str:
    """A missing package as one line: which, for what (the exception's notes name the
    scheme or cell), and the command that installs it.

    Examples
    --------
    >>> exc = ModuleNotFoundError("No module named 'ml_dtypes'", name="ml_dtypes")
    >>> exc.add_note("[scheme 'fp8_e4m3', d=64]")
    >>> import_error_text(exc)  # doctest: +NORMALIZE_WHITESPACE
    "the Python package 'ml_dtypes' is not installed ([scheme 'fp8_e4m3', d=64]; No module
    named 'ml_dtypes'): install it with `.venv/bin/pip install ml_dtypes`"
    >>> import_error_text(ModuleNotFoundError("No module named 'torch'", name="torch"))  # doctest: +NORMALIZE_WHITESPACE
    "the Python package 'torch' is not installed (No module named 'torch'): install it with
    `.venv/bin/pip install torch` (or the 'models' extra: `.venv/bin/pip install -e
    '.[models]'`; `make install` installs every extra)"
    """
    module = missing_package(exc)
    notes = " ".join(getattr(exc, "__notes__", ()))
    context = "; ".join(t for t in (notes, one_line(str(exc))) if t)
    pip, extra = _PIP_NAMES.get(module, (module, None))
    fix = f"install it with `.venv/bin/pip install {pip}`"
    if extra:
        fix += f" (or the {extra!r} extra: `.venv/bin/pip install -e '.[{extra}]'`; `make install` installs every extra)"
    return f"the Python package {module!r} is not installed ({context}): {fix}"


class Stdout:
    """The handlers' stdout. A reader that goes away (``kvstats theory ... | head``) ends
    the printing, not the work: later lines are dropped and :func:`main` returns
    :data:`PIPE_CLOSED`, without a message."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, line: str) -> None:
        if not self.closed:
            try:
                print(line, flush=True)  # flushed: a closed pipe shows here, not at exit
            except BrokenPipeError:
                self.closed = True
                discard("stdout")

    def flush(self) -> None:
        """Flush what others wrote (argparse's ``--help``); a closed pipe counts as above."""
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self.closed = True
            discard("stdout")


def _replace_unencodable() -> None:
    """Let stdout and stderr replace what their encoding cannot write (a cp1252 or cp437
    console, ``PYTHONIOENCODING=ascii``) instead of raising: the help, ``schemes`` and
    ``theory`` print π, − and ≥ ("?" there), not a UnicodeEncodeError half-way.

    Examples
    --------
    >>> from kvstats._cli_output import _replace_unencodable
    >>> _replace_unencodable()   # a UTF-8 stream (or one without reconfigure) is left as it is
    """
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            "π−≥–".encode(encoding)
        except UnicodeEncodeError:
            if getattr(stream, "errors", "strict") in ("strict", "surrogateescape") and hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="replace")
        except LookupError:   # an encoding Python does not know: nothing can be written anyway
            pass


def discard(name: str) -> None:
    """Point ``sys.stdout`` or ``sys.stderr`` at /dev/null after its reader went away, so
    that later writes and the interpreter's final flush neither fail nor print
    'Exception ignored'."""
    devnull = open(os.devnull, "w", encoding="utf-8")
    try:
        os.dup2(devnull.fileno(), getattr(sys, name).fileno())  # its buffer now drains there
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (in tests)
        setattr(sys, name, devnull)
    else:
        devnull.close()


def close_bars() -> None:
    """Close the progress bars still open (an interrupted loop's), so that a message printed
    next starts its own line and no bar is redrawn after it."""
    tqdm = sys.modules.get("tqdm")   # none is open if tqdm was never imported
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()


def print_error(command: str, exc: BaseException, message: str, code: int) -> int:
    """Print the one-line error and return ``code``. When stderr's reader is gone too
    (``kvstats ... 2>&1 | head``) the line is dropped, the status kept, unless the error
    is that very closed pipe (the progress bar's write): then :data:`PIPE_CLOSED`."""
    try:
        close_bars()
        print(f"kvstats {command}: error: {message}", file=sys.stderr, flush=True)
    except BrokenPipeError:
        discard("stderr")
        return PIPE_CLOSED if isinstance(exc, BrokenPipeError) else code
    return code


def warning_printer(command: str):
    """A ``warnings.showwarning`` that prints ``kvstats <command>: warning: <message>``: on
    the command line the source line a warning points at is kvstats' own entry script,
    which tells the user nothing (the message says what to change in the config)."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        try:
            print(f"kvstats {command}: warning: {one_line(str(message))}", file=sys.stderr,
                  flush=True)
        except BrokenPipeError:
            discard("stderr")
    return show


def raised(module: str, name: str) -> tuple[type[BaseException], ...]:
    """The exception class ``module.name`` if that module is loaded, else ``()``.

    An ``except`` clause evaluates its classes only when an exception is matched, and a
    command that never imported the module cannot have raised its exception: so the
    handlers catch the sweep's errors without :func:`main` importing the sweep (pandas,
    scipy) for ``kvstats schemes`` or a bad argument.

    Examples
    --------
    >>> raised("argparse", "ArgumentError")
    (<class 'argparse.ArgumentError'>,)
    >>> raised("kvstats.no_such_module", "Error")
    ()
    """
    loaded = sys.modules.get(module)
    return () if loaded is None else (getattr(loaded, name),)


def kept_note(note: str) -> str:
    """A sweep's kept-cells note (:func:`kvstats.sweep.run._kept`, worded for
    ``run_sweep``'s users too) in the command's words; another note as it is.

    Examples
    --------
    >>> from pathlib import Path
    >>> from kvstats.sweep.run import _kept
    >>> kept_note(_kept(Path("out/cells"), 2, 6))
    '2 of 6 cells finished, kept in out/cells: rerun the same command with --resume to compute only the other 4'
    >>> kept_note(_kept(Path("out/cells"), 0, 6))
    'no cell of 6 had finished: rerun the same command'
    >>> kept_note("[the sweep finished]")
    'the sweep finished'

    Finished chunks of unfinished cells (``cells/parts``) are kept too: with none of the
    cells finished, a rerun without ``--resume`` would delete them.

    >>> kept_note("[0 of 6 cells finished, kept in out/cells (and 4 finished chunk(s) of 2 "
    ...           "unfinished cell(s) in out/cells/parts): rerun with resume (kvstats sweep "
    ...           "--resume; run_sweep's default) to compute only the other 6 (their missing chunks)]")
    'no cell of 6 had finished; 4 finished chunk(s) of 2 unfinished cell(s) are kept in out/cells/parts: rerun the same command with --resume to compute only the missing chunks'
    """
    kept = re.fullmatch(r"\[(\d+) of (\d+) cells finished, kept in (.+?)"
                        r"(?: \(and (.+) in (.+)\))?: rerun with resume "
                        r"\(kvstats sweep --resume; run_sweep's default\) to compute only the "
                        r"other \d+( \(their missing chunks\))?\]", note)
    if kept is None:
        return note.strip("[]")
    done, total, where, chunks, parts = int(kept[1]), int(kept[2]), kept[3], kept[4], kept[5]
    if done == 0 and chunks is None:
        return f"no cell of {total} had finished: rerun the same command"
    if done == 0:
        return (f"no cell of {total} had finished; {chunks} are kept in {parts}: rerun the same "
                "command with --resume to compute only the missing chunks")
    also = f" (and {chunks} in {parts})" if chunks is not None else ""
    rest = " (their missing chunks)" if chunks is not None else ""
    return (f"{done} of {total} cells finished, kept in {where}{also}: rerun the same command with "
            f"--resume to compute only the other {total - done}{rest}")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a scheduler's time limit), raised where Ctrl-C's
    KeyboardInterrupt is: the same clean-up runs (a sweep's pool shut down, its finished
    cells kept and counted), and :func:`kvstats.cli.main` returns 143 (128 + SIGTERM)."""


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)   # a second TERM ends the process at once
    # passed on to the pool's workers, as Ctrl-C reaches them (the terminal signals the
    # whole group): the pool's shutdown would otherwise wait on them, and can wait forever
    # on one it was starting when the interrupt struck
    multiprocessing = sys.modules.get("multiprocessing")   # no pool without it
    for child in multiprocessing.active_children() if multiprocessing else ():
        child.terminate()
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM as :class:`Terminated` while a command runs (only the main thread can set a
    handler: elsewhere the default stays); the caller's handler afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:   # None: a handler not set from Python, which cannot be set back; the default
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
