"""The sweep runner: schemes × bit budgets × distributions × d × N × trials.

A sweep is a grid of *cells*. A cell is one ``(distribution, params, d, N, budget,
scheme)``; its result is one row per trial with the 6D error profile
(:func:`kvstats.error_profile`) and the cell's coordinates. The runner is

- **reproducible cell by cell**: every random number of a cell comes from seeds derived
  from the root seed and a stable SHA-256 hash of the cell's key (never Python's
  ``hash()``, which is salted per process), so a cell's result does not depend on the
  order cells run in, on the executor, or on which other cells are in the grid;
- **paired**: all schemes and budgets of one ``(distribution, params, d, N)`` *case* see
  the same trials (same K, V, q): the data seed depends on the case only, the scheme seed
  on the full cell key (each trial gets an independent draw of the scheme's randomness,
  ``draws=T``);
- **vectorised** over trials inside a cell, in chunks of ``chunk_size`` trials to bound
  memory (the data of chunk ``b`` comes from the case seed and ``b``, so results depend
  on ``chunk_size``: it is part of the configuration and of every cell's id); a chunk
  is drawn once and coded by every scheme and budget of its case (``Scheme.roundtrip``);
- **resumable**: each finished cell is written to ``out/cells/<cell-id>.parquet`` (CSV
  without pyarrow), and the chunks of a cell not finished yet to
  ``out/cells/parts/<cell-id>-<chunk>.parquet`` as they arrive; a rerun with the same
  configuration loads finished cells and chunks instead of recomputing them;
- **parallel** through any :class:`concurrent.futures.Executor` (local processes by
  default, ``"serial"`` in-process, or ``dask.distributed.Client.get_executor()``).
  A task is a run of chunks of one case; workers return frames, and only the calling
  process writes files (a cell once all its chunks are back), so remote workers need no
  shared file system. A cell whose code fails stops the sweep, but every cell that
  finished (those of the tasks still running too) is written, and the error says how
  many and how to resume.

Real caches are a data source like the synthetic distributions: a distribution named
``"real"`` with ``params = {path = ..., layer = ..., head = ...}`` reads the trials of a
capture file (:func:`kvstats.data.real.load_trials`). Its d and N are the capture's (they
must be listed in ``dims`` and ``n_keys``), ``n_trials`` takes the first trials of the
selection, and the case key carries a content fingerprint of the file (the CRC-32s the
``.npz`` stores for its arrays) so that a resumed sweep never mixes two captures. The
workers read the file themselves (a remote worker needs it at the same path).

The package has one module per idea: :mod:`~kvstats.sweep.config` (the file format and
its validation), :mod:`~kvstats.sweep.specs` (one ``[[schemes]]`` or ``[[distributions]]``
entry read and checked), :mod:`~kvstats.sweep.plan` (cells, keys, seeds, chunks, tasks),
:mod:`~kvstats.sweep.sources` (the real data source), :mod:`~kvstats.sweep.work` (a
task -> per-trial frames, in a worker), :mod:`~kvstats.sweep.store` (cell files,
manifest), :mod:`~kvstats.sweep.parts` (the chunks of unfinished cells, kept for a
resume), :mod:`~kvstats.sweep.numeric_env` (the CPU and BLAS a cell was computed in:
recorded, and a resume of cells from elsewhere warns), :mod:`~kvstats.sweep.folder` (a folder kept to one sweep: its lock, which
folders a sweep may take, what a new sweep clears), :mod:`~kvstats.sweep.locks` (the
exclusive file lock, taken without waiting, of a sweep's folder and of a report's staging
folders), :mod:`~kvstats.sweep.pool` (tasks on an executor: workers, their progress,
warnings and failures), :mod:`~kvstats.sweep.run` (:func:`run_sweep`) and
:mod:`~kvstats.sweep.replay` (:func:`replay_trials`: any stored trial drawn and coded
again, bit for bit). The results schema
(columns, :class:`SweepResult`, :func:`load_result`) is :mod:`kvstats.results`, which
the report reads without importing the runner. Public names are imported lazily.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

# public name -> module that defines it
_EXPORTS = {
    "run_sweep": "kvstats.sweep.run",
    "check_grid": "kvstats.sweep.run",
    "SweepConfig": "kvstats.sweep.config",
    "SchemeSpec": "kvstats.sweep.config",
    "DistributionSpec": "kvstats.sweep.config",
    "load_config": "kvstats.sweep.config",
    "Cell": "kvstats.sweep.plan",
    "data_seed": "kvstats.sweep.plan",
    "scheme_seed": "kvstats.sweep.plan",
    "chunk_span": "kvstats.sweep.plan",
    "replay_trials": "kvstats.sweep.replay",
    "Replay": "kvstats.sweep.replay",
    "SweepResult": "kvstats.results",
    "load_result": "kvstats.results",
    "DEFAULT_COMPARISONS": "kvstats.results",
    "CELL_COLUMNS": "kvstats.results",
    "REAL": "kvstats.results",
}
_SUBMODULES = {"config", "plan", "sources", "work", "store", "parts", "run", "replay"}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
