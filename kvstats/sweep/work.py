"""The work of a sweep: one task (chunks of one case) -> per-trial frames, in a worker.

Pure apart from reading a real capture: the result depends only on the task (its cells,
seeds and chunk range), never on which worker runs it or on what ran before, so tasks
can run in any order on any executor. Only the calling process writes files.

How a chunk's trials are drawn (:func:`_chunk_data`), which scheme instance codes them
(:func:`_chunk_scheme`) and the rows they give (:func:`_cell_rows`) are functions of
their own, which :mod:`kvstats.sweep.replay` calls too: a replayed trial is computed by
the runner's code, not by a copy of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from kvstats.data.synthetic import sample
from kvstats.data.trials import Trials
from kvstats.metrics.profile import _profile
from kvstats.quant.schemes import Scheme, make_scheme
from kvstats.results import REAL
from kvstats.sweep.plan import Cell, _Task, chunk_span, data_seed, scheme_seed
from kvstats.sweep.sources import _load_real, _trial_clusters


def _roundtrip(scheme: Scheme, K: np.ndarray, V: np.ndarray,
               buffers: dict[tuple, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``scheme.roundtrip(K, V)``, written into arrays reused across the cells of a task
    when both coders take ``out``: a fresh chunk-sized array costs a first touch of
    every page (~14 ms per 32 MB here), paid per cell otherwise. Same numbers (the
    coders' arithmetic does not depend on where it writes); the frames keep no view of
    the arrays, so a later cell may overwrite them."""
    if not all(getattr(c, "roundtrip_writes_out", False) for c in (scheme.key_coder, scheme.value_coder)):
        return scheme.roundtrip(K, V)
    outs = []
    for side, x in (("K", K), ("V", V)):
        key = (side, x.shape, x.dtype.str)
        if key not in buffers:
            buffers[key] = np.empty_like(x)
        outs.append(buffers[key])
    coders = (scheme.key_coder, scheme.value_coder)
    return tuple(c.roundtrip(x, out=o) for c, x, o in zip(coders, (K, V), outs))


def _chunk_data(cell: Cell, chunk: int, start: int, count: int, *, seed: int, n_queries: int,
                dtype: str, generator: int, captured: Trials | None) -> Trials:
    """The trials ``start .. start + count - 1`` (chunk ``chunk``) of ``cell``'s case, as
    the sweep draws them: trials of the real capture ``captured``, or a synthetic draw at
    the chunk's data seed (:func:`~kvstats.sweep.plan.data_seed`). The runner and
    :mod:`kvstats.sweep.replay` both draw through here."""
    if captured is not None:
        return captured.subset(slice(start, start + count)).astype(dtype)
    # The data seed depends on the case and chunk only: every scheme and budget of a
    # case sees the same trials (paired comparisons).
    return sample(cell.distribution, count, cell.n_keys, cell.dim, seed=data_seed(seed, cell, chunk),
                  n_queries=n_queries, dtype=np.dtype(dtype), generator=generator, **cell.params)


def _chunk_scheme(cell: Cell, chunk: int, count: int, *, seed: int) -> Scheme:
    """The scheme instance that codes chunk ``chunk`` (``count`` trials) of ``cell``: one
    draw per trial (``draws=count``) at the chunk's scheme seed
    (:func:`~kvstats.sweep.plan.scheme_seed`), at the cell's budget (None for a
    fixed-budget scheme: :func:`~kvstats.sweep.plan.grid` gives its cells none)."""
    spec = cell.scheme
    return make_scheme(spec.name, cell.budget, cell.dim, seed=scheme_seed(seed, cell, chunk),
                       draws=count, **spec.params)


def _cell_rows(cell: Cell, cid: str, scheme: Scheme, trials: Trials, K_hat: np.ndarray,
               V_hat: np.ndarray, start: int, reference: dict,
               captured: Trials | None) -> pd.DataFrame:
    """The rows of the results table for ``trials`` (trials ``start ..`` of ``cell``) coded
    as ``(K_hat, V_hat)`` by ``scheme``: ``error_profile`` and the cell's columns. Each
    side's nominal bits are its coder's own (``key_bits_nominal``/``value_bits_nominal``):
    the Shannon–φ plane reads a side's limit there, which the totals cannot tell (a side
    may store more overhead than the other at the same code bits)."""
    n, t = cell.n_keys, trials.n_trials
    bb = scheme.bits_per_coord(n)
    budget = float(bb.nominal) if cell.budget is None else float(cell.budget)
    # = error_profile(trials, K_hat, V_hat).assign(**cell columns)
    return _profile(trials, K_hat, V_hat, reference=reference, columns=dict(
        trial=np.arange(start, start + t), distribution=cell.distribution,
        params=cell.params_label(), dim=cell.dim, n_keys=n, budget=budget,
        scheme=cell.scheme.display(), bits_nominal=float(bb.nominal),
        bits_total=float(bb.total), key_bits_total=float(bb.key_total),
        value_bits_total=float(bb.value_total), key_bits_nominal=float(bb.key_nominal),
        value_bits_nominal=float(bb.value_nominal), cell_id=cid,
        cluster=_trial_clusters(captured, start, t)))


def _naming(exc: Exception, where: str, message: str | None = None) -> Exception:
    """``exc`` naming the entry, cell or case it came from, to raise in its place.

    A ``ValueError`` or ``TypeError`` (bad input: the command line prints its message as
    one line, without notes) becomes one of its type whose message is ``message``
    (default: its own followed by ``where``), chained to it. Any other exception (a user
    scheme's code may raise anything), or one whose type cannot be built from a message
    alone (``json.JSONDecodeError``), is returned itself, its type and arguments kept,
    with ``where`` as a note.

    Examples
    --------
    >>> str(_naming(ValueError("rank too large"), "[cell: 'KQV' at n=3]"))
    "rank too large [cell: 'KQV' at n=3]"
    >>> _naming(ZeroDivisionError("x"), "[cell: c]").__notes__
    ['[cell: c]']
    """
    if isinstance(exc, (ValueError, TypeError)):
        try:
            named = type(exc)(f"{exc} {where}" if message is None else message)
        except Exception:   # another constructor: the note below
            pass
        else:
            named.__cause__ = exc
            return named
    exc.add_note(where)
    return exc


def _compute_task(task: _Task, emit: Callable[[list], None] | None = None
                  ) -> list[tuple[str, int, pd.DataFrame, float]]:
    """Run one task; returns (cell id, first trial, per-trial frame, seconds) per cell
    and chunk. Runs in workers. With ``emit`` (a serial run) each chunk's results go to
    ``emit`` as they are made, and none are returned: the progress bar moves per chunk,
    not per task (a real case is one task)."""
    first = task.cells[0][0]
    out = []
    buffers: dict[tuple, np.ndarray] = {}
    captured = _load_real(first, task.n_trials) if first.distribution == REAL else None
    for b in range(task.first, task.stop):
        start, t = chunk_span(task.n_trials, task.chunk, b)
        try:
            trials = _chunk_data(first, b, start, t, seed=task.seed, n_queries=task.n_queries,
                                 dtype=task.dtype, generator=task.generator, captured=captured)
        except Exception as exc:
            # a user distribution's sampler may fail at any chunk: say which case and trials
            raise _naming(exc, f"[case: {first.describe_case()}, trials {start}..{start + t - 1}]")
        reference: dict = {}  # what error_profile computes from the trials alone, once per chunk
        done = []
        for cell, cid in task.cells:
            tic = time.perf_counter()
            try:
                scheme = _chunk_scheme(cell, b, t, seed=task.seed)
                K_hat, V_hat = _roundtrip(scheme, trials.K, trials.V, buffers)
                prof = _cell_rows(cell, cid, scheme, trials, K_hat, V_hat, start, reference, captured)
            except Exception as exc:
                # say which cell: the message alone does not tell a 90-cell grid apart
                raise _naming(exc, f"[cell: {cell.describe()}]")
            done.append((cid, start, prof, time.perf_counter() - tic))
        del trials
        if emit is None:
            out += done
        else:
            emit(done)
    return out
