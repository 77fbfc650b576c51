"""Benchmark: the sweep runner vs a batched loop, a per-trial loop and the floor, one core.

Every path computes the same table (KV, KQV, QKQV x n = 2, 4, 6 x {Gaussian, Student-t
nu = 1.5}, d = 128, float32, 18 cells) from the same data, drawn chunk by chunk at the
runner's seeds (``kvstats.sweep.data_seed``), in one process with one BLAS thread. Each
path runs once untimed on a 4-trial grid (imports, codebooks, first touch), then
``--repeats`` times in turns (each figure of the table the minimum over its repeats; a
line below the table gives every turn's seconds and each loop's ratio to the runner per
turn, with its median and range):

- runner: ``kvstats.run_sweep(..., executor="serial")``. A chunk of trials is drawn
  once for every budget and scheme of its case; each cell codes it with one scheme of
  ``draws=T`` independent rotations/sketches (``Scheme.roundtrip``'s numbers, written
  into output arrays reused across cells) and one ``error_profile`` call.
- batched loop (the baseline): what a user writes with the public batch calls, one
  call of each per cell: ``make_scheme(..., draws=T, seed=kvstats.sweep.scheme_seed(...))``,
  ``Scheme.roundtrip`` on the case's (T, N, d) trials and ``error_profile`` on them, the
  cell's frame labelled and the frames concatenated. It draws the runner's scheme seeds,
  so its table must equal the runner's bit for bit: the script checks every
  ``error_profile`` column, its dtype and the row labels, and stops otherwise.
- per-trial loop (issue #15's "fair loop", kept for reference): the same, trial by
  trial: ``make_scheme(..., draws=())`` per trial (its seed spawned from the cell's
  scheme seed), ``Scheme.roundtrip`` and ``error_profile`` on one trial. Its rotations
  are other draws than the runner's (a ``draws=T`` scheme draws them together), so only
  its rows, columns, dtypes and the data-only column ``attn_entropy`` are checked equal.
- floor: the work no runner of these schemes can skip, each step timed alone on
  inputs prepared outside the clock, in three ways -- the whole batch, trial by trial,
  and on one cache-sized piece of rows (``--piece`` values, repeated; the in-cache rate
  a fused implementation could reach) scaled to the batch -- keeping the fastest:
  drawing each case's trials once; drawing every cell's rotations and sketches
  (``make_scheme(..., draws=T)``); per coded side the unit-vector scaling, the rotation
  and its inverse, the Lloyd-Max coding and the centroid lookup; per QJL residual its
  norm and the two sketch products (S r, S^T signs; the fast transform for srht);
  ``error_profile`` as the runner calls it. What depends on the data alone is counted
  once per case, as the runner computes it: the data's norms (the "norms" step) in the
  case's first cell, and the profile's reference (q.k, log-softmax, p V, norms,
  entropy) in one full ``error_profile`` per case, the case's other cells timed with
  that reference shared (``_profile(..., reference=...)``, kvstats/sweep/work.py).
  No checks, no allocation of outputs, no packing, no Python between
  steps. batched / floor bounds what any numpy runner computing these numbers bit for
  bit could gain over the batched loop on one core (a runner with other arithmetic --
  another order of the sums, float32 sketches -- would change the numbers).

Times are the process's CPU seconds by default (``--clock cpu``): on a shared machine
they move far less with the load than wall-clock seconds (``--clock wall``).

``--d1024`` times the seed grid at d = 1,024, N = 1,024
(experiments/dalberto_d1024_full.toml: 6 cases x 3 schemes x 5 budgets = 90 cells x
1,000 trials) for each sketch kind of ``--sketches``: the runner on all 90 cells at
``--d1024-trials`` trials per cell in this process (CPU seconds per trial of the grid,
extrapolated linearly to 1,000 trials on 2 cores: x 1,000 / 2), the floor of one
trial of the grid (the steps above for the Gaussian case's 15 cells, x 6 cases, plus
drawing all six cases), and, with ``--d1024-pool T``, the real grid at T trials per cell
through a pool of 2 workers like ``run_sweep``'s default (both started before the clock;
the CPU seconds of each, the busiest and their mean, and wall seconds, x 1,000 / T).

    python experiments/bench_sweep.py [--trials 64] [--n-keys 1024 256 16] [--repeats 3] [--no-per-trial]
                                      [--generator 1] [--clock cpu] [--d1024]
                                      [--d1024-trials 4] [--d1024-pool 16]
                                      [--sketches gaussian srht]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

import kvstats
from kvstats.data.trials import Trials
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.sketch import SKETCHES
from kvstats.sweep import SweepConfig, chunk_span, data_seed, load_config, run_sweep, scheme_seed

# The floor's steps use private helpers; imported where used, so that the runner-only
# timing (``--d1024-runner-only``) also runs against an older checkout (PYTHONPATH).

#: The clock of every figure: process CPU seconds or wall seconds (``--clock``).
CLOCK: Callable[[], float] = time.process_time


def reduced_config(trials: int, n_keys: int, generator: int) -> SweepConfig:
    return SweepConfig.from_dict({
        # float32 norms as in the seed grid: Student-t norms can exceed float16's range
        "schemes": [{"name": name, "params": {"norm_dtype": "float32"}} for name in ("KV", "KQV", "QKQV")],
        "budgets": [2, 4, 6],
        "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
        "dims": [128], "n_keys": [n_keys], "n_trials": trials, "seed": 1, "dtype": "float32",
        "generator": generator,
        # no pairs to test (the runner tests none anyway; the default pairs name the schemes
        # without their norm_dtype, so the config warned that it had none)
        "comparisons": []})


def _chunks(cfg: SweepConfig) -> dict[str, list[tuple[int, Trials]]]:
    """Each case's trials as the runner draws them: per chunk ``b`` (``cfg.chunk_for``
    trials, the last what is left), ``kvstats.sample`` at ``data_seed(cfg.seed, cell, b)``;
    {case key: [(chunk index, trials), ...]}."""
    out = {}
    for c in {c.case_key(): c for c in cfg.cells()}.values():
        size = cfg.chunk_for(c.n_keys, c.dim)
        out[c.case_key()] = [
            (b, kvstats.sample(c.distribution, chunk_span(cfg.n_trials, size, b)[1], c.n_keys, c.dim,
                               seed=data_seed(cfg.seed, c, b), n_queries=cfg.n_queries,
                               dtype=np.dtype(cfg.dtype), generator=cfg.generator, **c.params))
            for b in range(-(-cfg.n_trials // size))]
    return out


def _cases(cfg: SweepConfig) -> dict[str, Trials]:
    """Each case's trials as one batch (the runner's data; the floor's input)."""
    def whole(parts: list[tuple[int, Trials]]) -> Trials:
        if len(parts) == 1:
            return parts[0][1]
        return Trials(*(np.concatenate([getattr(t, a) for _, t in parts]) for a in ("K", "V", "q")))
    return {key: whole(parts) for key, parts in _chunks(cfg).items()}


#: The columns a loop labels its rows with (the runner's names and values).
LABELS = ("scheme", "budget", "distribution", "params", "trial")


def _labelled(parts: list[pd.DataFrame], cell) -> pd.DataFrame:
    """One cell's ``error_profile`` frames, in trial order, labelled as the runner's rows."""
    frame = pd.concat(parts, ignore_index=True)
    return frame.assign(scheme=cell.scheme.display(), budget=float(cell.budget),
                        distribution=cell.distribution, params=cell.params_label(),
                        trial=np.arange(len(frame)))


def batched_loop(cfg: SweepConfig) -> pd.DataFrame:
    """The table by the public batch calls, one of each per cell and chunk: make_scheme
    (``draws`` = the chunk's trials, the runner's scheme seed), roundtrip, error_profile."""
    chunks, frames = _chunks(cfg), []
    for cell in cfg.cells():
        parts = []
        for b, trials in chunks[cell.case_key()]:
            scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim, draws=trials.n_trials,
                                         seed=scheme_seed(cfg.seed, cell, b), **cell.scheme.params)
            parts.append(kvstats.error_profile(trials, *scheme.roundtrip(trials.K, trials.V)))
        frames.append(_labelled(parts, cell))
    return pd.concat(frames, ignore_index=True)


def per_trial_loop(cfg: SweepConfig) -> pd.DataFrame:
    """The table trial by trial (issue #15's fair loop): per cell and trial make_scheme
    (one draw, seeded from the cell's scheme seed), roundtrip and error_profile."""
    chunks, frames = _chunks(cfg), []
    for cell in cfg.cells():
        parts = []
        for b, trials in chunks[cell.case_key()]:
            seeds = np.random.SeedSequence(scheme_seed(cfg.seed, cell, b)).spawn(trials.n_trials)
            for t, seed in enumerate(seeds):
                one = Trials(trials.K[t:t + 1], trials.V[t:t + 1], trials.q[t:t + 1])
                scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim, seed=seed,
                                             **cell.scheme.params)
                parts.append(kvstats.error_profile(one, *scheme.roundtrip(one.K, one.V)))
        frames.append(_labelled(parts, cell))
    return pd.concat(frames, ignore_index=True)


def runner_table(cfg: SweepConfig) -> pd.DataFrame:
    return run_sweep(cfg, executor="serial", progress=False).frame


def check_same_table(runner: pd.DataFrame, table: pd.DataFrame, path: str, exact: bool) -> None:
    """Stop (SystemExit) unless ``table`` holds the runner's rows (``LABELS``) and every
    other column of it is one of the runner's with its dtype; with ``exact``, every value
    equal bit for bit, else only ``attn_entropy`` (a function of the data alone)."""
    cols = list(table.columns)
    missing = [c for c in cols if c not in runner.columns]
    if missing:
        raise SystemExit(f"{path}: the runner's table lacks the columns {missing}")
    wrong = {c: (str(runner[c].dtype), str(table[c].dtype))
             for c in cols if runner[c].dtype != table[c].dtype}
    if wrong:
        raise SystemExit(f"{path}: dtypes differ from the runner's (runner, {path}): {wrong}")
    keys = list(LABELS)
    a = runner[cols].sort_values(keys, kind="stable").reset_index(drop=True)
    b = table.sort_values(keys, kind="stable").reset_index(drop=True)
    compare = cols if exact else keys + ["attn_entropy"]
    try:
        pd.testing.assert_frame_equal(a[compare], b[compare], check_exact=True)
    except AssertionError as exc:
        raise SystemExit(f"{path}: not the runner's table ({'every value' if exact else 'rows and data'} "
                         f"compared):\n{exc}") from None


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    tic = CLOCK()
    out = fn()
    return CLOCK() - tic, out


def _best(fn: Callable[[], object], repeats: int = 3, warm: bool = True) -> float:
    """Least seconds of ``repeats`` calls, after one untimed call (``warm``)."""
    if warm:
        fn()
    return min(_timed(fn)[0] for _ in range(repeats))


def compare_paths(cfg: SweepConfig, repeats: int, per_trial: bool = True,
                  warm_cfg: SweepConfig | None = None,
                  runs: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Least seconds of each path (runner, batched loop, per-trial loop) over ``repeats``
    runs in turns, each path run once untimed on ``warm_cfg`` first; the first run's
    tables are checked against the runner's (:func:`check_same_table`), stopping on a
    difference. ``runs`` (if given) receives every run's seconds, by path, in turn order."""
    paths = {"runner": runner_table, "batched": batched_loop}
    if per_trial:
        paths["per-trial"] = per_trial_loop
    for fn in paths.values():  # imports, codebooks, first touch: not in any timed run
        fn(warm_cfg or cfg)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(repeats):  # in turns, so a load change hits every path
        tables = {}
        for name, fn in paths.items():
            seconds, tables[name] = _timed(lambda fn=fn: fn(cfg))
            times[name].append(seconds)
        if r == 0:
            check_same_table(tables["runner"], tables["batched"], "batched loop", exact=True)
            if per_trial:
                check_same_table(tables["runner"], tables["per-trial"], "per-trial loop", exact=False)
        del tables
    if runs is not None:
        runs.update(times)
    return {name: min(ts) for name, ts in times.items()}


def _turns(runs: dict[str, list[float]]) -> str:
    """Each path's seconds turn by turn and each loop's ratio to the runner per turn, with
    its median and range (the spread the minimum of the table hides)."""
    r = np.array(runs["runner"])
    out = [f"{name} {' '.join(f'{t:.2f}' for t in ts)}" for name, ts in runs.items()]
    for name in (n for n in runs if n != "runner"):
        ratio = np.array(runs[name]) / r
        out.append(f"{name} / runner per turn {' '.join(f'{x:.3f}' for x in ratio)} (median "
                   f"{np.median(ratio):.3f}, range {ratio.min():.3f}-{ratio.max():.3f})")
    return "; ".join(out)


def _side_steps(coder: object, x: np.ndarray) -> list[tuple[str, Callable[[], object]]]:
    """The unavoidable arithmetic of one coded side of ``x`` (T, N, d), as named closures
    on prepared inputs: every intermediate is computed once here, outside the clock."""
    from kvstats.quant.qjl import _in_dtype, _pm_from_bits, _reconstruct, _sign_bits, _store_norms

    mse = coder.mse if isinstance(coder, ProdQuantizer) else coder
    if not isinstance(mse, MSEQuantizer):
        raise TypeError(f"bench_sweep's floor knows MSE and Prod sides; received {type(coder).__name__}")
    rot, cb = mse.rotation, mse.codebook
    norms = np.sqrt(np.einsum("...i,...i->...", x, x))
    inv = (1.0 / np.where(norms > 0, norms, 1.0)).astype(x.dtype)
    u = x * inv[..., None]
    y = u if rot.kind == "identity" else rot._apply(u)
    codes = cb._encode(y)
    cent = mse._lookup(codes, x.dtype)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("norms", lambda: _data_norms(x)),
        ("scaling", lambda: x * inv[..., None]),
        ("Lloyd-Max coding", lambda: cb._encode(y)),
        ("centroid lookup", lambda: mse._lookup(codes, x.dtype)),
    ]
    if rot.kind != "identity":
        steps += [("rotation", lambda: rot._apply(u)), ("inverse rotation", lambda: rot._inverse(cent))]
    if isinstance(coder, ProdQuantizer):
        base = rot._inverse(cent) * norms[..., None].astype(x.dtype)
        r = x - base
        rn = _store_norms(r, coder.norm_dtype, "x")
        sk = _in_dtype(coder.sketch, x.dtype)  # a dense sketch cast once, outside the clock
        pm = _pm_from_bits(_sign_bits(sk, r), x.dtype)
        steps += [("residual norms", lambda: np.linalg.norm(r, axis=-1)),
                  ("sketch S r", lambda: _sign_bits(sk, r)),
                  ("sketch S^T signs", lambda: _reconstruct(sk, pm, rn, x.dtype))]
    return steps


def _data_norms(x: np.ndarray) -> np.ndarray:
    """The squared norms of the data's rows: the floor's "norms" step (data only, so
    timed once per case)."""
    return np.einsum("...i,...i->...", x, x)


def _piece_seconds(coder_1: object, x: np.ndarray, piece: int, repeats: int,
                   skip: frozenset[str] = frozenset()) -> list[float | None]:
    """Per step, the seconds for all of ``x`` (T, N, d) at the in-cache rate: the step
    timed on one piece of ``piece // d`` rows (repeated, minimum kept), times the
    number of such pieces in ``x``; None for the steps named in ``skip`` (not timed)."""
    rows = max(1, piece // x.shape[-1])
    steps = _side_steps(coder_1, x[0, :rows])
    scale = x.shape[0] * x.shape[1] / rows
    return [None if name in skip else _best(step, max(repeats, 5)) * scale for name, step in steps]


def draw_seconds(cfg: SweepConfig, repeats: int) -> float:
    """Seconds to draw each case of ``cfg`` once (``n_trials`` trials)."""
    first = {c.case_key(): c for c in cfg.cells()}
    return sum(_best(lambda c=c: kvstats.sample(
        c.distribution, cfg.n_trials, c.n_keys, c.dim, seed=1, dtype=np.dtype(cfg.dtype),
        generator=cfg.generator, **c.params), repeats) for c in first.values())


def code_seconds(cfg: SweepConfig, repeats: int, piece: int = 1 << 16,
                 cells: list | None = None, parts: dict[str, float] | None = None) -> float:
    """Seconds of the unavoidable coding and profiling of the cells ``cells`` of ``cfg``
    (default: all): drawing their rotations and sketches, each side's steps, the profile;
    ``parts`` (if given) accumulates the seconds by step.

    What depends on the data alone is timed once per case, as the runner computes it:
    the data's norms (each side's "norms" step) in the case's first cell only, and the
    profile as the runner calls it -- one full ``error_profile`` in the case's first
    cell, which computes the trials' reference (q.k, log-softmax, p V, norms, entropy),
    then ``_profile(..., reference=...)`` with that reference for the case's other cells
    (kvstats/sweep/work.py). The reference is filled outside the clock."""
    from kvstats.metrics.profile import _profile

    parts = {} if parts is None else parts
    rng = np.random.default_rng(cfg.seed)
    cells = cfg.cells() if cells is None else cells
    cases = _cases(cfg) if cells else {}
    T = cfg.n_trials
    total = 0.0
    # per case: the reference of the whole batch and of each trial (for the per-trial timing)
    shared: dict[str, tuple[dict, list[dict]]] = {}
    for cell in cells:
        case = cell.case_key()
        trials = cases[case]
        first = case not in shared
        skip = frozenset() if first else frozenset({"norms"})
        args = (cell.scheme.name, cell.budget, cell.dim)
        t = _best(lambda: kvstats.make_scheme(*args, draws=T, seed=int(rng.integers(2**63)),
                                              **cell.scheme.params), repeats)
        parts["drawing rotations and sketches"] = parts.get("drawing rotations and sketches", 0.0) + t
        total += t
        batched = kvstats.make_scheme(*args, draws=T, seed=2, **cell.scheme.params)
        single = kvstats.make_scheme(*args, seed=2, **cell.scheme.params)
        per_step = []
        for coder_b, coder_1, x in ((batched.key_quantizer, single.key_quantizer, trials.K),
                                    (batched.value_quantizer, single.value_quantizer, trials.V)):
            whole = _side_steps(coder_b, x)
            one = [_side_steps(coder_1, x[t]) for t in range(T)]
            pieces = _piece_seconds(coder_1, x, piece, repeats, skip)
            for i, (name, step) in enumerate(whole):
                if name in skip:   # data only: timed in the case's first cell
                    continue
                per_step.append(min(_best(step, repeats),
                                    _best(lambda i=i: [s[i][1]() for s in one], repeats), pieces[i]))
                parts[name] = parts.get(name, 0.0) + per_step[-1]
        K_hat, V_hat = batched.roundtrip(trials.K, trials.V)
        ones = [Trials(trials.K[t:t + 1], trials.V[t:t + 1], trials.q[t:t + 1]) for t in range(T)]
        if first:   # the runner's first cell of a case: a full call, the reference included
            prof_whole = _best(lambda: kvstats.error_profile(trials, K_hat, V_hat), repeats)
            prof_one = _best(lambda: [kvstats.error_profile(o, K_hat[t:t + 1], V_hat[t:t + 1])
                                      for t, o in enumerate(ones)], repeats)
            ref: dict = {}
            refs_one: list[dict] = [{} for _ in ones]
            _profile(trials, K_hat, V_hat, reference=ref)
            for t, (o, r) in enumerate(zip(ones, refs_one)):
                _profile(o, K_hat[t:t + 1], V_hat[t:t + 1], reference=r)
            shared[case] = (ref, refs_one)
        else:       # its other cells: the case's reference reused
            ref, refs_one = shared[case]
            prof_whole = _best(lambda: _profile(trials, K_hat, V_hat, reference=ref), repeats)
            prof_one = _best(lambda: [_profile(o, K_hat[t:t + 1], V_hat[t:t + 1], reference=r)
                                      for t, (o, r) in enumerate(zip(ones, refs_one))], repeats)
        total += sum(per_step) + min(prof_whole, prof_one)
        parts["error_profile"] = parts.get("error_profile", 0.0) + min(prof_whole, prof_one)
    return total


def floor_seconds(cfg: SweepConfig, repeats: int, piece: int = 1 << 16,
                  parts: dict[str, float] | None = None) -> float:
    """Seconds of the unavoidable work of ``cfg`` (see the module docstring); ``parts``
    (if given) accumulates them by step."""
    parts = {} if parts is None else parts
    parts["drawing the data"] = parts.get("drawing the data", 0.0) + draw_seconds(cfg, repeats)
    return parts["drawing the data"] + code_seconds(cfg, repeats, piece, parts=parts)


def _breakdown(parts: dict[str, float], per: float = 1.0) -> str:
    return ", ".join(f"{k} {v / per:.3g}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))


#: The seed grid at d = 1,024, N = 1,024 (the d = 1024 half of experiments/dalberto.toml).
D1024_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dalberto_d1024_full.toml")


def d1024_config(sketch: str, trials: int) -> SweepConfig:
    """The seed grid with ``trials`` trials per cell and the QJL sides' sketch ``sketch``
    (the grid itself uses the default, Gaussian)."""
    cfg = load_config(D1024_CONFIG).to_dict()
    cfg["n_trials"] = trials
    if sketch != "gaussian":
        for spec in cfg["schemes"]:
            if spec["name"] != "KV":
                spec["params"] = {**spec.get("params", {}), "sketch": sketch}
    return SweepConfig.from_dict(cfg)


def d1024_runner(sketch: str, trials: int, repeats: int) -> float:
    """Runner seconds per trial of the whole seed grid (90 cells) in this process."""
    cfg = d1024_config(sketch, trials)
    run_sweep(d1024_config(sketch, 2), executor="serial", progress=False)  # warm caches
    return _best(lambda: run_sweep(cfg, executor="serial", progress=False), repeats, warm=False) / trials


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of a live process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def d1024_pooled(sketch: str, trials: int) -> str:
    """The seed grid at ``trials`` trials per cell through ``run_sweep`` on a pool of 2
    worker processes (as the default pool, one BLAS thread each): wall seconds and the
    CPU seconds of each worker (both busy at once, so memory-bandwidth contention is
    in them), each extrapolated to 1,000 trials."""
    import concurrent.futures as cf
    import multiprocessing

    from kvstats.sweep.pool import _one_blas_thread

    pool = cf.ProcessPoolExecutor(max_workers=2, initializer=_one_blas_thread,
                                  mp_context=multiprocessing.get_context("forkserver"))
    try:
        # start both workers outside the clock: the pool spawns them on demand, one per
        # task submitted while none is idle (one quick task started only the first, and
        # the second, spawned during the run, went unmeasured)
        list(pool.map(time.sleep, [0.5, 0.5]))
        pids = list(pool._processes)
        if len(pids) != 2:
            raise RuntimeError(f"the pool started {len(pids)} worker(s), not 2")
        cpu0 = [_cpu_of(p) for p in pids]
        tic = time.perf_counter()
        run_sweep(d1024_config(sketch, trials), executor=pool, progress=False)
        wall = time.perf_counter() - tic
        each = [_cpu_of(p) - c for p, c in zip(pids, cpu0)]
        cpu = max(each)
    finally:
        pool.shutdown()
    scale = 1000 / trials / 60
    # the 6 tasks of this run (one per case) cannot split evenly over 2 workers; the full
    # grid's 66 tasks nearly can, so the mean of the two is what its workers approach
    mean = sum(each) / len(each)
    return (f"{trials} trials/cell ({trials / 10:.1f}% of the grid): busiest worker {cpu:.1f} CPU s "
            f"-> **{cpu * scale:.1f} min** (workers {' / '.join(f'{c:.1f}' for c in each)} s, mean "
            f"-> {mean * scale:.1f} min); {wall:.0f} s wall -> {wall * scale:.0f} min")


def d1024_row(sketch: str, trials: int, pool_trials: int, repeats: int, piece: int,
              notes: list[str]) -> str:
    """One table row for ``sketch``: runner and floor per trial of the grid, both
    extrapolated to the grid on 2 cores, and the pooled run if ``pool_trials``; the
    floor's breakdown by step goes to ``notes``."""
    cfg = d1024_config(sketch, trials)
    runner = d1024_runner(sketch, trials, 1)
    gauss_cells = [c for c in cfg.cells() if c.distribution == "gaussian"]
    n_cases = len({c.case_key() for c in cfg.cells()})
    # floor: drawing all cases + coding/profiling the Gaussian case's cells x n_cases
    # (the coding does not depend on the key law, apart from rare rescaled rows)
    parts: dict[str, float] = {"drawing the data": draw_seconds(cfg, repeats) / n_cases}
    floor = n_cases * (parts["drawing the data"] + code_seconds(cfg, repeats, piece, gauss_cells, parts))
    floor /= trials
    breakdown = _breakdown(parts, trials / 1e3)
    notes.append(f"floor of one trial of one case (15 cells), {sketch}, ms: {breakdown}")
    pooled = d1024_pooled(sketch, pool_trials) if pool_trials else "—"
    return (f"| {sketch} | {1e3 * runner:.0f} | **{runner * 1000 / 2 / 60:.1f}** | {1e3 * floor:.0f} | "
            f"{floor * 1000 / 2 / 60:.1f} | {runner / floor:.2f}x | {pooled} | {os.getloadavg()[0]:.1f} |")


def main() -> None:
    global CLOCK
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64, help="trials per cell of the reduced grid")
    parser.add_argument("--n-keys", type=int, nargs="*", default=[1024, 256, 16],
                        help="context lengths N of the reduced grid (one comparison each; none: skip)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path (minimum kept)")
    parser.add_argument("--generator", type=int, default=1, choices=[1, 2],
                        help="data-generator version of the runner and the loop (config key generator)")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="process CPU seconds (default; steadier on a shared machine) or wall seconds")
    parser.add_argument("--no-per-trial", action="store_true",
                        help="leave the per-trial loop out (issue #15's reference; slow at small N)")
    parser.add_argument("--piece", type=int, default=1 << 16,
                        help="values per in-cache piece of the floor's third timing")
    parser.add_argument("--d1024", action="store_true",
                        help="also time the d = 1,024, N = 1,024 seed grid (runner, floor, extrapolations)")
    parser.add_argument("--d1024-trials", type=int, default=4,
                        help="trials per cell of the in-process d = 1,024 runner and floor")
    parser.add_argument("--d1024-pool", type=int, default=0,
                        help="also run the seed grid at this many trials per cell on 2 worker processes "
                             "(the busiest worker's CPU seconds and wall seconds; 0: skip; without "
                             "--d1024: only this)")
    parser.add_argument("--d1024-runner-only", action="store_true",
                        help="d = 1,024: only the in-process runner (CPU seconds per grid trial; "
                             "runs against older checkouts too)")
    parser.add_argument("--sketches", nargs="+", default=["gaussian", "srht"],
                        help="QJL sketches of the d = 1,024 timing (unknown kinds are skipped)")
    args = parser.parse_args()
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1, user_api="blas")  # one core: the comparison is per core

    print(f"# bench_sweep  {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
          f"1 BLAS thread, generator {args.generator}, {args.clock} seconds, "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.n_keys:
        print("d = 128; KV, KQV, QKQV x n = 2, 4, 6 x {Gaussian, Student-t nu = 1.5} = 18 cells, float32; "
              f"{args.clock} seconds, minimum of {args.repeats} runs in turns; tables checked equal")
        print("| N | trials/cell | runner (s) | batched loop (s) | **batched / runner** | per-trial loop (s) "
              "| per-trial / runner | floor (s) | batched / floor | runner / floor | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    floor_notes: list[str] = []
    for n_keys in args.n_keys:
        cfg = reduced_config(args.trials, n_keys, args.generator)
        runs: dict[str, list[float]] = {}
        t = compare_paths(cfg, args.repeats, per_trial=not args.no_per_trial,
                          warm_cfg=reduced_config(4, n_keys, args.generator), runs=runs)
        parts: dict[str, float] = {}
        t_floor = floor_seconds(cfg, args.repeats, args.piece, parts)
        floor_notes.append(f"turns at N = {n_keys}, s: {_turns(runs)}")
        floor_notes.append(f"floor at N = {n_keys}, s: {_breakdown(parts)}")
        r, b = t["runner"], t["batched"]
        pt = (f"{t['per-trial']:.2f} | {t['per-trial'] / r:.2f}x" if "per-trial" in t else "— | —")
        print(f"| {n_keys} | {cfg.n_trials} | {r:.2f} | {b:.2f} | **{b / r:.2f}x** | {pt} | {t_floor:.2f} | "
              f"{b / t_floor:.2f}x | {r / t_floor:.2f}x | {os.getloadavg()[0]:.1f} |", flush=True)
    if floor_notes:
        print("\n".join([""] + floor_notes))

    if args.d1024_pool and not args.d1024:
        print(f"\nd = 1,024 seed grid on 2 worker processes ({kvstats.__file__}), load average "
              f"{os.getloadavg()[0]:.1f}")
        for sketch in args.sketches:
            print(f"| {sketch} | {d1024_pooled(sketch, args.d1024_pool)} | load {os.getloadavg()[0]:.1f} |",
                  flush=True)
        return
    if args.d1024 and args.d1024_runner_only:
        print(f"\nd = 1,024 seed grid, runner only ({kvstats.__file__}): {args.clock} seconds per trial "
              f"of the 90 cells, {args.d1024_trials} trials/cell, minimum of {args.repeats}")
        for sketch in args.sketches:
            t = d1024_runner(sketch, args.d1024_trials, args.repeats)
            print(f"| {sketch} | {1e3 * t:.0f} ms | grid on 2 cores {t * 1000 / 2 / 60:.1f} min | "
                  f"load {os.getloadavg()[0]:.1f} |", flush=True)
        return
    if args.d1024:
        print("\nd = 1,024, N = 1,024: the seed grid (experiments/dalberto_d1024_full.toml, 90 cells x "
              f"1,000 trials); "
              f"runner and floor per trial of the grid ({args.d1024_trials} trials/cell, one process, "
              f"{args.clock} seconds), x 1,000 trials / 2 cores")
        print("| sketch | runner per grid trial (ms) | runner: grid on 2 cores (min) | floor per grid "
              "trial (ms) | floor: grid on 2 cores (min) | runner / floor | 2-worker run, extrapolated "
              "| load |")
        print("|---|---|---|---|---|---|---|---|")
        notes: list[str] = []
        for sketch in args.sketches:
            if sketch not in SKETCHES:
                print(f"| {sketch} | not available (kvstats.quant.sketch.SKETCHES = {list(SKETCHES)}) |||||||")
                continue
            print(d1024_row(sketch, args.d1024_trials, args.d1024_pool, args.repeats, args.piece, notes),
                  flush=True)
        print("\n".join([""] + notes))
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
