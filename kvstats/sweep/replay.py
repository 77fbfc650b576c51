"""Replay trials of a sweep: the exact K, V, q, scheme draw and result row of any trial.

A sweep stores one row per (cell, trial) but not the trials themselves: they are drawn
again from seeds. :func:`replay_trials` names a cell the way the results table does (its
``scheme`` label, ``budget``, ``distribution``, ``params`` label, ``dim``, ``n_keys``, or
its ``cell_id``) and gives back, for the requested trials, what the sweep computed with:

- the data (``K``, ``V``, ``q`` as the sweep drew them, :attr:`Replay.data`);
- the scheme instance that coded each trial (:meth:`Replay.scheme`): the sweep makes one
  instance per chunk of trials with one draw of its randomness (rotation, sketch) per
  trial, so trials of one chunk share an instance and trial ``t`` is its draw
  ``t - start``;
- the reconstruction (:meth:`Replay.roundtrip`) and the result rows
  (:meth:`Replay.profile`), recomputed, and the stored rows (:meth:`Replay.stored`) to
  check them against.

Nothing is copied from the runner: the chunk's seeds are :func:`kvstats.sweep.plan.data_seed`
and :func:`~kvstats.sweep.plan.scheme_seed`, and its data, scheme and rows come from the
runner's own functions (:mod:`kvstats.sweep.work`), so a replayed row is the stored row
bit for bit. A real-capture case replays too: its trials are the capture's (the file
must still hold the content the sweep read, which its fingerprint checks), its scheme
draws are seeded as for synthetic cases.

(Some 540 lines, one idea: name one cell as the results table does, with messages that
list the grid's values, and give its trials back; most of it is docstrings.)

The function is ``replay_trials``, not ``replay``: importing this module sets the
package's attribute ``replay`` to the module, which would shadow a function of that name.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvstats._checks import _describe, check_int, did_you_mean
from kvstats.data.trials import PER_TRIAL_META, Trials
from kvstats.quant.schemes import Scheme, make_scheme
from kvstats.results import MANIFEST, REAL, SweepResult, load_result, results_file
from kvstats.sweep.config import SweepConfig
from kvstats.sweep.numeric_env import NumericEnvWarning, env_differences, numeric_env
from kvstats.sweep.plan import Cell, _fmt_params, chunk_span, code_version, user_code_digest
from kvstats.sweep.sources import _load_real
from kvstats.sweep.work import _cell_rows, _chunk_data, _chunk_scheme, _roundtrip

__all__ = ["replay_trials", "Replay"]

# The selectors, in the order they narrow the grid, with the results-table column each
# matches (``bits`` is the table's ``budget``).
_SELECTORS = ("cell_id", "scheme", "bits", "distribution", "params", "dim", "n_keys")
_COLUMN = {"bits": "budget"}


class Replay:
    """Trials of one cell of a sweep, replayed: made by :func:`replay_trials`.

    Chunks are drawn and coded when asked for, not kept (a chunk of a large case holds
    hundreds of MB); only :attr:`data`, the requested trials, is kept once drawn.

    Attributes
    ----------
    config : SweepConfig
        The sweep's configuration.
    cell : Cell
        The cell (:meth:`Cell.describe` says it in words).
    cell_id : str
        Its ``cell_id`` in the results table.
    trials : tuple of int
        The requested trial numbers (the ``trial`` column), in the order given.
    chunk_size : int
        Trials per chunk of this case (:meth:`SweepConfig.chunk_for`).
    out : pathlib.Path or None
        The sweep folder, when the source was one (for :meth:`stored`).
    """

    def __init__(self, config: SweepConfig, cell: Cell, trials: tuple[int, ...],
                 out: Path | None = None, frame: pd.DataFrame | None = None):
        self.config, self.cell, self.trials, self.out = config, cell, trials, out
        self.cell_id = config.cell_id(cell)
        self.chunk_size = config.chunk_for(cell.n_keys, cell.dim)
        self._frame = frame
        self._captured: Trials | None = None
        self._data: Trials | None = None

    def __repr__(self) -> str:
        return (f"Replay({self.cell.describe()}, cell_id={self.cell_id!r}, trials={list(self.trials)}, "
                f"chunk_size={self.chunk_size})")

    # ------------------------------------------------------------ chunks
    def chunk_of(self, trial: int) -> int:
        """The chunk holding ``trial`` (its draw is ``trial - chunk_span(...)[0]``).

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9])
        >>> r.chunk_of(9), r.chunk_trials(2)
        (2, range(8, 10))
        """
        return self._check_trial(trial, "trial") // self.chunk_size

    def chunk_trials(self, chunk: int) -> range:
        """The trial numbers of chunk ``chunk`` (the last chunk may be short).

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> r.chunk_trials(0), r.chunk_trials(2)
        (range(0, 4), range(8, 10))
        """
        start, count = chunk_span(self.config.n_trials, self.chunk_size, chunk)
        return range(start, start + count)

    def chunk_data(self, chunk: int) -> Trials:
        """All trials of chunk ``chunk`` as the sweep drew them (``K``, ``V``, ``q``).

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> r.chunk_data(2).K.shape     # trials 8 and 9
        (2, 8, 16)
        """
        start, count = chunk_span(self.config.n_trials, self.chunk_size, chunk)
        cfg = self.config
        return _chunk_data(self.cell, chunk, start, count, seed=cfg.seed, n_queries=cfg.n_queries,
                           dtype=cfg.dtype, generator=cfg.generator, captured=self._capture())

    def chunk_scheme(self, chunk: int) -> Scheme:
        """The scheme instance that coded chunk ``chunk``: ``draws`` = its trial count, and
        its draw ``i`` coded trial ``chunk_trials(chunk)[i]``.

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> r.chunk_scheme(0).draws, r.chunk_scheme(2).draws
        ((4,), (2,))
        """
        _, count = chunk_span(self.config.n_trials, self.chunk_size, chunk)
        return _chunk_scheme(self.cell, chunk, count, seed=self.config.seed)

    def scheme(self, trial: int) -> tuple[Scheme, int]:
        """``(scheme, i)``: the instance that coded ``trial`` and its draw ``i``.

        The instance codes the trial's whole chunk at once (its arrays have a leading
        axis of ``draws``); row ``i`` of ``scheme.roundtrip(K, V)`` on the chunk's data
        (:meth:`chunk_data`) is the trial's reconstruction.

        Examples
        --------
        >>> r = replay_trials({"schemes": ["QKQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[5])
        >>> scheme, i = r.scheme(5)
        >>> scheme.draws, i
        ((4,), 1)
        """
        b = self.chunk_of(trial)
        return self.chunk_scheme(b), trial - b * self.chunk_size

    # ------------------------------------------------------------ the requested trials
    @property
    def data(self) -> Trials:
        """The requested trials (``K``, ``V``, ``q``), in the order of :attr:`trials`; ``meta``
        holds their ``trial`` numbers (and a real trial's ``text``, ``layer``, ``head``).

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> bool((r.data.K[0] == r.chunk_data(2).K[1]).all()), r.data.meta["trial"]
        (True, [9, 2])
        """
        if self._data is None:
            parts = {}
            for b, rows in self._by_chunk():
                drawn = self.chunk_data(b)
                parts[b] = (drawn.K[rows], drawn.V[rows], drawn.q[rows])
            meta: dict[str, Any] = {"trial": list(self.trials)}
            captured = self._capture()
            if captured is not None:  # a real trial's text, layer, head and cluster
                meta.update({k: [v[t] for t in self.trials] for k, v in captured.meta.items()
                             if k in PER_TRIAL_META})
            self._data = Trials(*self._in_order(parts), meta)
        return self._data

    def roundtrip(self) -> tuple[np.ndarray, np.ndarray]:
        """``(K_hat, V_hat)`` of the requested trials, as the sweep's scheme coded them.

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> scheme, i = r.scheme(9)          # chunk 2's instance, its draw 1
        >>> data = r.chunk_data(2)
        >>> bool((r.roundtrip()[0][0] == scheme.roundtrip(data.K, data.V)[0][i]).all())
        True
        """
        parts = {}
        for b, rows in self._by_chunk():
            _, _, K_hat, V_hat = self._coded(b)
            parts[b] = (K_hat[rows], V_hat[rows])
        K_hat, V_hat = self._in_order(parts)
        return K_hat, V_hat

    def profile(self) -> pd.DataFrame:
        """The results-table rows of the requested trials, recomputed.

        The columns and values of the sweep's ``results.parquet`` rows (error profile and
        cell columns), in the order of :attr:`trials`, index ``0 ..``; every chunk holding
        a requested trial is coded whole, as the sweep coded it.

        Examples
        --------
        >>> r = replay_trials({"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...     "dims": [16], "n_keys": [8], "n_trials": 10, "chunk_size": 4}, trials=[9, 2])
        >>> r.profile()[["trial", "scheme", "budget"]].values.tolist()
        [[9, 'KQV', 3.0], [2, 'KQV', 3.0]]
        """
        frames = []
        for b, rows in self._by_chunk():
            data, scheme, K_hat, V_hat = self._coded(b)
            start = self.chunk_trials(b).start
            rows_b = _cell_rows(self.cell, self.cell_id, scheme, data, K_hat, V_hat, start, {},
                                self._capture())
            frames.append(rows_b.iloc[rows])
        frame = pd.concat(frames).set_index("trial", drop=False).loc[list(self.trials)]
        return frame.reset_index(drop=True)

    def stored(self) -> pd.DataFrame:
        """The rows the sweep stored for the requested trials, to compare with :meth:`profile`.

        Read from the source's results (a sweep folder or a :class:`SweepResult`), in the
        order of :attr:`trials`, index ``0 ..``.

        Raises
        ------
        ValueError
            The source was a config (no results), or its results lack the rows.

        Examples
        --------
        >>> import tempfile, kvstats
        >>> cfg = {"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
        ...        "dims": [16], "n_keys": [8], "n_trials": 5, "comparisons": []}
        >>> out = tempfile.mkdtemp()
        >>> _ = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
        >>> r = replay_trials(out, trials=[4])
        >>> r.stored().equals(r.profile())
        True
        """
        frame = self._frame
        if frame is None:
            try:   # the table the folder's manifest names
                table = None if self.out is None else results_file(self.out)
            except FileNotFoundError:
                table = None
            if table is None:
                where = ("a config" if self.out is None
                         else f"the folder {str(self.out)!r}, which holds no results table")
                raise ValueError(f"source must be a sweep folder with results (or a SweepResult) to "
                                 f"read stored rows; received {where}")
            frame = self._frame = load_result(self.out).frame   # checked: an edited file is refused
        rows = frame[frame["cell_id"] == self.cell_id]
        missing = sorted(set(self.trials) - set(rows["trial"]))
        if missing:
            raise ValueError(f"the stored results hold no row of cell {self.cell_id} "
                             f"({self.cell.describe()}) for trials {missing[:10]}")
        return rows.set_index("trial", drop=False).loc[list(self.trials)].reset_index(drop=True)

    # ------------------------------------------------------------ internals
    def _capture(self) -> Trials | None:
        if self.cell.distribution != REAL:
            return None
        if self._captured is None:  # the first n_trials of the selection, fingerprint checked
            self._captured = _load_real(self.cell, self.config.n_trials)
        return self._captured

    def _coded(self, b: int) -> tuple[Trials, Scheme, np.ndarray, np.ndarray]:
        data = self.chunk_data(b)
        scheme = self.chunk_scheme(b)
        K_hat, V_hat = _roundtrip(scheme, data.K, data.V, {})
        return data, scheme, K_hat, V_hat

    def _by_chunk(self) -> list[tuple[int, np.ndarray]]:
        """(chunk, rows of the chunk) of the requested trials, chunk by chunk."""
        t = np.asarray(self.trials)
        return [(int(b), t[t // self.chunk_size == b] - int(b) * self.chunk_size)
                for b in np.unique(t // self.chunk_size)]

    def _in_order(self, parts: dict[int, tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        """Arrays of every requested trial, in the order of :attr:`trials`, from per-chunk parts."""
        chunks = [b for b, _ in self._by_chunk()]
        t = np.asarray(self.trials)
        # the parts hold the trials chunk by chunk, each chunk's in the order given
        at = {trial: k for k, trial in enumerate(np.concatenate([t[t // self.chunk_size == b]
                                                                  for b in chunks]).tolist())}
        order = [at[trial] for trial in self.trials]
        return tuple(np.concatenate([parts[b][i] for b in chunks])[order]
                     for i in range(len(parts[chunks[0]])))

    def _check_trial(self, trial: Any, name: str) -> int:
        n = self.config.n_trials
        try:
            return check_int(trial, name, low=0, high=n - 1)
        except ValueError:
            raise ValueError(f"{name} must be a trial number in [0, {n - 1}] (the sweep ran "
                             f"n_trials={n} per cell); received {trial}") from None


def _source(source: Any) -> tuple[SweepConfig, Path | None, pd.DataFrame | None, dict[str, Any] | None]:
    """The config, the folder, the results frame and the manifest (those at hand) of a source."""
    if isinstance(source, SweepResult):
        return source.config, source.out, source.frame, source.manifest
    if isinstance(source, SweepConfig):
        return source, None, None, None
    if isinstance(source, Mapping):
        return SweepConfig.from_dict(source), None, None, None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():   # a mistyped sweep folder is not told of a missing config file
            where = "" if path.is_absolute() else f" (relative to the working directory {os.getcwd()!r})"
            raise FileNotFoundError(f"source {str(path)!r} does not exist{where}: give a sweep folder "
                                    "(written by `kvstats sweep`) or a TOML config")
        if not path.is_dir():
            return SweepConfig.from_toml(path), None, None, None
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(f"source {str(path)!r} is a folder without {MANIFEST}: give a "
                                    "sweep folder (written by `kvstats sweep`) or a config")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            config = manifest["config"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"manifest {str(manifest_path)!r} holds no readable sweep config "
                             f"('config' table): {exc}") from exc
        return SweepConfig.from_dict(config), path, None, manifest
    raise TypeError("source must be a sweep folder, a TOML config path, a SweepConfig, a config "
                    f"dict or a SweepResult; received {_describe(source)}")


def _check_recorded(cell: Cell, cid: str, manifest: dict[str, Any] | None, out: Path | None) -> None:
    """Refuse a cell the sweep did not compute: the grid its config builds now differs.

    For a real case that means the capture file changed (the cell key holds its content
    fingerprint): its trials are no longer the sweep's, and replaying them would be
    silently wrong.
    """
    recorded = [c for c in (manifest or {}).get("cells", []) if isinstance(c, dict)]
    if not recorded or cid in {c.get("id") for c in recorded}:
        return
    where = "the sweep" if out is None else f"the sweep in {str(out)!r}"
    if cell.source is not None:
        cases = [c["key"].get("case", {}) for c in recorded if isinstance(c.get("key"), dict)]
        read = sorted({str(case.get("capture")) for case in cases if case.get("distribution") == REAL})
        raise ValueError(f"distribution 'real' capture {cell.params['path']!r} holds other content "
                         f"(fingerprint {cell.source}) than {where} read (fingerprint(s) {read}): "
                         "its trials cannot be replayed from this file")
    if user_code_digest(cell) is not None:
        # the cell id holds its user code's digest: that code is not the sweep's any more
        from kvstats.user_imports import file_sha256 as _sha256

        plugins = ((manifest or {}).get("user_code") or {}).get("plugins") or []
        # a plugin's record lists the user modules it imports ("imports"): an edit of one
        # of those changes the digest as much as an edit of the plugin itself
        records = [r for p in plugins if isinstance(p, dict)
                   for r in [p, *[i for i in p.get("imports") or [] if isinstance(i, dict)]]]
        changed = [r.get("file") for r in records if r.get("sha256") != _sha256(r.get("file"))]
        what = (f"the user code file(s) {changed} changed since (their SHA-256 differs from the manifest's)"
                if changed else "the source of its scheme's or distribution's functions changed since")
        raise ValueError(f"cell {cid} ({cell.describe()}) is computed by user code other than {where} "
                         f"ran: {what}; its trials cannot be replayed with this code")
    raise ValueError(f"cell {cid} ({cell.describe()}) is not among the cells {where} computed: its "
                     "config builds another grid here (another kvstats version?)")


def _budget_of(cell: Cell) -> float:
    """The results table's ``budget`` of ``cell`` (a fixed-budget scheme's nominal bits)."""
    if cell.budget is not None:
        return float(cell.budget)
    scheme = make_scheme(cell.scheme.name, None, cell.dim, **cell.scheme.params)
    return float(scheme.bits_per_coord(cell.n_keys).nominal)


def _shown(name: str, config: SweepConfig) -> Callable[[Cell], Any]:
    """What the results table shows for a cell in the column a selector matches."""
    return {"cell_id": config.cell_id, "scheme": lambda c: c.scheme.display(), "bits": _budget_of,
            "distribution": lambda c: c.distribution, "params": Cell.params_label,
            "dim": lambda c: c.dim, "n_keys": lambda c: c.n_keys}[name]


def _wanted(name: str, value: Any) -> Any:
    """A selector's value, checked, as the table shows it."""
    if name in ("cell_id", "scheme", "distribution"):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string (the results table's {name!r} column); "
                            f"received {_describe(value)}")
        return value
    if name == "bits":
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(f"bits must be a number (the results table's 'budget' column); "
                            f"received {_describe(value)}")
        return float(value)
    if name == "params":
        if isinstance(value, Mapping):  # a dict of parameters: the label it would have
            value = _fmt_params(value)
        if not isinstance(value, str):
            raise TypeError("params must be the results table's 'params' label (e.g. 'nu=1.5', '-' "
                            f"for none) or a dict of the parameters; received {_describe(value)}")
        return value
    return check_int(value, name)  # dim, n_keys


def _values(cells: list[Cell], show: Callable[[Cell], Any]) -> list[Any]:
    return sorted({show(c) for c in cells})


def _listing(values: list[Any], most: int = 12) -> str:
    """``values`` as a list for a message; a long one (cell ids) cut, with its length."""
    if len(values) <= most:
        return repr(values)
    return repr(values[:most])[:-1] + f", ... ({len(values)} in all)]"


def _select(config: SweepConfig, given: dict[str, Any]) -> Cell:
    """The one cell the selectors name; a ValueError naming the selector that fails."""
    cells = config.cells()
    narrowed: list[str] = []
    for name in _SELECTORS:
        if given[name] is None:
            continue
        show, want = _shown(name, config), _wanted(name, given[name])
        keep = [c for c in cells if show(c) == want]
        if not keep:
            allowed = _values(cells, show)
            scope = "" if not narrowed else f" among the cells with {', '.join(narrowed)}"
            raise ValueError(f"{name} must be one of {_listing(allowed)} (the {_COLUMN.get(name, name)!r} "
                             f"values of the sweep's grid{scope}); received {given[name]!r}"
                             f"{did_you_mean(given[name], allowed)}")
        cells = keep
        narrowed.append(f"{name}={given[name]!r}")
    if len(cells) > 1:
        open_ = {name: _values(cells, _shown(name, config)) for name in _SELECTORS[1:]}
        raise ValueError(f"the selectors must name one cell; {len(cells)} cells of the grid match "
                         f"({', '.join(narrowed) or 'no selector given'}): give "
                         + "; ".join(f"{k} (one of {_listing(v)})" for k, v in open_.items() if len(v) > 1))
    return cells[0]


def _trial_numbers(trials: Any, n_trials: int) -> tuple[int, ...]:
    # a column of a results frame (a Series) or an array is as good as a list
    if isinstance(trials, (str, bytes, Mapping)) or not isinstance(trials, (Integral, Iterable)):
        raise TypeError(f"trials must be a trial number or a sequence of them; received {_describe(trials)}")
    items: Iterable[Any] = [trials] if isinstance(trials, Integral) else trials
    out = []
    for t in items:
        try:
            out.append(check_int(t, "trials", low=0, high=n_trials - 1))
        except ValueError:
            raise ValueError(f"trials must be trial numbers in [0, {n_trials - 1}] (the sweep ran "
                             f"n_trials={n_trials} per cell); received {t}") from None
    if not out:
        raise ValueError("trials must name at least one trial; received none")
    if len(set(out)) != len(out):
        raise ValueError(f"trials must not repeat a trial; received {out}")
    return tuple(out)


def replay_trials(source: SweepConfig | SweepResult | Mapping[str, Any] | str | os.PathLike, *,
           trials: int | Iterable[int], scheme: str | None = None, bits: float | None = None,
           distribution: str | None = None, params: str | Mapping[str, Any] | None = None,
           dim: int | None = None, n_keys: int | None = None, cell_id: str | None = None) -> Replay:
    """Replay trials of one cell of a sweep: its data, scheme draws and result rows.

    The cell is named as the results table names it; a selector may be left out when
    the cells matching the others agree on it (e.g. ``dim`` in a sweep of one ``dims``).

    Parameters
    ----------
    source : str, path, SweepConfig, dict or SweepResult
        A sweep folder (its ``manifest.json`` holds the config), a TOML config, a config,
        or :func:`kvstats.load_result`'s result.
    trials : int or iterable of int
        Trial numbers (the ``trial`` column; a list, an array or a column of the results
        frame), distinct, in ``[0, n_trials - 1]``.
    scheme : str, optional
        The ``scheme`` column: the scheme's label (``'KQV'``, ``"QKQV[sketch='orthogonal']"``).
    bits : float, optional
        The ``budget`` column (a fixed-budget scheme's, e.g. K4V2, is its nominal bits).
    distribution : str, optional
        The ``distribution`` column (``'heavy_tailed'``, ``'real'``, ...).
    params : str or dict, optional
        The ``params`` column (``'nu=1.05'``; ``'-'`` for none), or the parameters as a dict.
    dim, n_keys : int, optional
        The ``dim`` and ``n_keys`` columns (d and N).
    cell_id : str, optional
        The ``cell_id`` column: names the cell alone.

    Returns
    -------
    Replay
        ``data`` (K, V, q of the trials), ``scheme(trial)`` (the instance that coded it and
        its draw), ``roundtrip()``, ``profile()`` (the result rows, recomputed) and
        ``stored()`` (the rows the sweep stored).

    Raises
    ------
    ValueError
        A selector with a value no cell has (the message lists the grid's values), or
        selectors that leave more than one cell (it says which to add); a trial outside
        the sweep.
    TypeError
        A selector or ``trials`` of the wrong type.

    Examples
    --------
    >>> import tempfile, kvstats
    >>> from kvstats.sweep import replay_trials
    >>> out = tempfile.mkdtemp()
    >>> _ = kvstats.run_sweep({"schemes": ["KV", "QKQV"], "budgets": [2, 3], "dims": [16],
    ...     "n_keys": [8], "n_trials": 6, "chunk_size": 4, "distributions": [
    ...     {"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]}]},
    ...     out=out, executor="serial", progress=False)
    >>> r = replay_trials(out, scheme="QKQV", bits=3, params="nu=1.5", trials=[5, 1])
    >>> r.data.K.shape, r.scheme(5)[0].draws, r.scheme(5)[1]
    ((2, 8, 16), (2,), 1)
    >>> r.profile().equals(r.stored())   # the stored rows, bit for bit
    True
    >>> replay_trials(out, scheme="QKQV", bits=7, trials=0)
    Traceback (most recent call last):
    ...
    ValueError: bits must be one of [2.0, 3.0] (the 'budget' values of the sweep's grid among the cells with scheme='QKQV'); received 7
    """
    config, out, frame, manifest = _source(source)
    given = {"cell_id": cell_id, "scheme": scheme, "bits": bits, "distribution": distribution,
             "params": params, "dim": dim, "n_keys": n_keys}
    cell = _select(config, given)
    replayed = Replay(config, cell, _trial_numbers(trials, config.n_trials), out, frame)
    _check_recorded(cell, replayed.cell_id, manifest, out)
    _warn_other_code(manifest, replayed.cell_id)
    _warn_other_env(manifest, replayed.cell_id)
    return replayed


def _warn_other_env(manifest: dict[str, Any] | None, cid: str) -> None:
    """Warn when cell ``cid`` was computed on another CPU or BLAS than this process runs
    (the cell entry's ``"numeric_env"``, else the manifest's): the replayed rows may then
    differ from the stored ones in their last bits. Nothing is said where none is recorded."""
    entry = next((c for c in (manifest or {}).get("cells") or []
                  if isinstance(c, dict) and c.get("id") == cid), {})
    recorded = entry["numeric_env"] if "numeric_env" in entry else (manifest or {}).get("numeric_env")
    diff = env_differences(recorded, numeric_env()) if isinstance(recorded, dict) else None
    if diff:
        warnings.warn(f"cell {cid} was computed in another numerical environment than this process "
                      f"runs in: {diff}; replayed rows may differ from the stored ones in their last "
                      "bits", NumericEnvWarning, stacklevel=3)


def _warn_other_code(manifest: dict[str, Any] | None, cid: str) -> None:
    """Warn when the code that computed cell ``cid`` (kvstats' source digest, numpy, scipy:
    the manifest's versions, or the cell entry's ``"code"`` when a worker running other
    code computed it) is not this process's: the replayed rows may then differ from the
    stored ones."""
    import scipy

    entry = next((c for c in (manifest or {}).get("cells") or []
                  if isinstance(c, dict) and c.get("id") == cid), {})
    mine = code_version()
    if isinstance(entry.get("code"), dict):   # a worker's: full digests (or a "mixed" mark)
        recorded, now = entry["code"], mine
        keys = sorted(set(recorded) | set(now))
        what = f"cell {cid} was computed by a worker running other code than this process runs: "
    else:
        recorded = (manifest or {}).get("versions")
        if not isinstance(recorded, dict) or "kvstats_source" not in recorded:
            return   # a manifest from before the digest was recorded: nothing to compare
        now = {**mine, "kvstats_source": f"sha256:{mine['kvstats_source'][:12]}"}
        keys = sorted(now)
        what = "the sweep was computed by other code than this process runs: "

    def short(value: Any) -> str:
        text = str(value)
        return text[:12] if len(text) == 64 else text if len(text) <= 24 else "(several)"

    other = [f"{k} {short(recorded.get(k))} (this process: {short(now.get(k))})"
             for k in keys if recorded.get(k) != now.get(k)]
    if other:
        warnings.warn(what + ", ".join(other) + "; replayed rows may differ from the stored ones",
                      RuntimeWarning, stacklevel=3)
