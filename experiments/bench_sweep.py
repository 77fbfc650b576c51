"""Benchmark: the sweep runner vs a straightforward per-trial Python loop.

All paths compute the same thing on the same reduced grid, in one run and one process
(one BLAS thread): for every cell (distribution, budget, scheme) and every trial, draw
(K, V, q), quantize with an independent draw of the scheme's randomness and measure the
6D error profile.

- runner: ``kvstats.run_sweep(..., executor="serial")`` in this process; "runner, all
  cores" is the default (a process pool of one worker per core, as ``kvstats sweep``
  runs), compared by wall time with the one-process loop. Trials come in chunks; a
  chunk is drawn once for every budget and scheme of its case (the paired design) and
  each cell codes it with one scheme object holding ``draws=T`` independent
  rotations/sketches (``Scheme.roundtrip``: no bit packing) and one ``error_profile``
  call;
- loop: what a user without the runner writes: for each cell and each trial,
  ``kvstats.sample`` one trial, ``make_scheme(..., draws=())`` with its own seed,
  ``quantize``, ``dequantize`` and ``error_profile``;
- loop, shared data: the same loop, but each case's trials are drawn once up front and
  shared by its cells (isolates what batching the scheme work over trials gains);
- floor: only the work no runner of these schemes can avoid, timed the same way:
  drawing each case's trials once, drawing every cell's rotations and sketches
  (``make_scheme(..., draws=T)``) and, per QJL side, the two sketch products (S·r to
  encode, Sᵀ·signs to reconstruct) in float32. loop / floor bounds the speed-up any
  runner could reach on one core, however fast its other work.

The runner (``Scheme.roundtrip``) and the loop (``quantize``/``dequantize``) give the same
reconstructions bit for bit (tests/quant/test_roundtrip.py).

The mean KL over the Gaussian cells of the runner and of the loop are compared as a
check that both measure the same thing (different random draws: they agree
statistically, not bit for bit). ``--full-grid`` also times the seed paper's full grid
at d = 128 (experiments/dalberto.toml restricted to d = 128) with the default process
pool.

    python experiments/bench_sweep.py [--trials 64] [--n-keys 1024 256 64 16] [--full-grid]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np
import pandas as pd

import kvstats
from kvstats.data.trials import Trials
from kvstats.sweep import SweepConfig, run_sweep


def loop_sweep(cfg: SweepConfig, shared_data: bool = False) -> pd.DataFrame:
    """The plain reference: one trial at a time, one scheme object per trial."""
    rows = []
    rng = np.random.default_rng(cfg.seed)
    cases: dict[str, Trials] = {}
    for cell in cfg.cells():
        dtype = np.dtype(cfg.dtype)
        if shared_data and cell.case_key() not in cases:
            cases[cell.case_key()] = kvstats.sample(cell.distribution, cfg.n_trials, cell.n_keys, cell.dim,
                                                    seed=int(rng.integers(2**63)), dtype=dtype, **cell.params)
        for t in range(cfg.n_trials):
            if shared_data:
                all_trials = cases[cell.case_key()]
                one = Trials(all_trials.K[t:t + 1], all_trials.V[t:t + 1], all_trials.q[t:t + 1],
                             all_trials.meta)
            else:
                one = kvstats.sample(cell.distribution, 1, cell.n_keys, cell.dim,
                                     seed=int(rng.integers(2**63)), dtype=dtype, **cell.params)
            scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim,
                                         seed=int(rng.integers(2**63)), **cell.scheme.params)
            K_hat, V_hat = scheme.dequantize(scheme.quantize(one.K, one.V))
            prof = kvstats.error_profile(one, K_hat, V_hat)
            rows.append(prof.assign(distribution=cell.distribution, budget=cell.budget,
                                    scheme=cell.scheme.name))
    return pd.concat(rows, ignore_index=True)


def floor_seconds(cfg: SweepConfig) -> float:
    """Seconds of the unavoidable work of ``cfg`` (see the module docstring)."""
    rng = np.random.default_rng(cfg.seed)
    tic = time.perf_counter()
    for cell in {c.case_key(): c for c in cfg.cells()}.values():
        kvstats.sample(cell.distribution, cfg.n_trials, cell.n_keys, cell.dim,
                       seed=int(rng.integers(2**63)), dtype=np.dtype(cfg.dtype), **cell.params)
    seconds = time.perf_counter() - tic
    for cell in cfg.cells():
        tic = time.perf_counter()
        scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim, draws=cfg.n_trials,
                                     seed=int(rng.integers(2**63)), **cell.scheme.params)
        seconds += time.perf_counter() - tic
        for coder in (scheme.key_quantizer, scheme.value_quantizer):
            if hasattr(coder, "sketch"):  # a QJL residual: encode and reconstruct products
                S = coder.sketch.matrix.astype(np.float32)
                r = rng.standard_normal((cfg.n_trials, cell.n_keys, cell.dim), dtype=np.float32)
                tic = time.perf_counter()
                signs = np.where(r @ np.swapaxes(S, -1, -2) >= 0, 1.0, -1.0).astype(np.float32)
                signs @ S
                seconds += time.perf_counter() - tic
    return seconds


def reduced_config(trials: int, n_keys: int) -> SweepConfig:
    return SweepConfig.from_dict({
        # float32 norms as in the seed grid: Student-t norms can exceed float16's range
        "schemes": [{"name": name, "params": {"norm_dtype": "float32"}} for name in ("KV", "KQV", "QKQV")],
        "budgets": [2, 4, 6],
        "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
        "dims": [128], "n_keys": [n_keys], "n_trials": trials, "seed": 1, "dtype": "float32"})


def _timed(fn, *args, **kw):
    tic = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - tic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64, help="trials per cell of the reduced grid")
    parser.add_argument("--n-keys", type=int, nargs="+", default=[1024, 256, 64, 16],
                        help="context lengths N of the reduced grid (one comparison each)")
    parser.add_argument("--full-grid", action="store_true",
                        help="also time experiments/dalberto.toml restricted to d = 128")
    args = parser.parse_args()
    try:  # every path runs with one BLAS thread: on a shared machine extra threads only spin
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=1, user_api="blas")
        blas = "1 BLAS thread"
    except ImportError:
        blas = "default BLAS threads"

    print(f"# bench_sweep  {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
          f"{blas}, load average {os.getloadavg()[0]:.1f}")
    print("d = 128; KV, KQV, QKQV x n = 2, 4, 6 x {Gaussian, Student-t nu = 1.5} = 18 cells")
    print(f"| N | trials/cell | runner (s) | loop (s) | speed-up | loop, shared data (s) | speed-up "
          f"| floor (s) | loop / floor | runner, all {os.cpu_count()} cores (s) | loop / it "
          f"| runner outside cells | Gaussian mean KL runner / loop |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n_keys in args.n_keys:
        cfg = reduced_config(args.trials, n_keys)
        run_sweep(reduced_config(4, n_keys), executor="serial", progress=False)  # warm caches (codebooks)
        res, t_vec = _timed(run_sweep, cfg, executor="serial", progress=False)
        loop, t_loop = _timed(loop_sweep, cfg)
        _, t_shared = _timed(loop_sweep, cfg, shared_data=True)
        t_floor = floor_seconds(cfg)
        _, t_pool = _timed(run_sweep, cfg, progress=False)
        # the manifest times each cell's scheme and metric work; the rest is drawing trials
        cells_s = sum(c["seconds"] for c in res.manifest["cells"])
        vec = res.frame
        kl_ratio = (vec[vec.distribution == "gaussian"]["kl"].mean()  # Gaussian only: heavy-tailed
                    / loop[loop.distribution == "gaussian"]["kl"].mean())  # KL has huge scatter
        print(f"| {n_keys} | {cfg.n_trials} | {t_vec:.2f} | {t_loop:.2f} | {t_loop / t_vec:.1f}x | "
              f"{t_shared:.2f} | {t_shared / t_vec:.1f}x | {t_floor:.2f} | {t_loop / t_floor:.1f}x | "
              f"{t_pool:.2f} | {t_loop / t_pool:.1f}x | "
              f"{1 - cells_s / t_vec:.0%} | {kl_ratio:.3f} |",
              flush=True)

    if args.full_grid:
        here = os.path.dirname(os.path.abspath(__file__))
        full = SweepConfig.from_toml(os.path.join(here, "dalberto.toml"))
        full = SweepConfig.from_dict({**full.to_dict(), "dims": [128]})
        res, secs = _timed(run_sweep, full, progress=True)
        print(f"full seed-paper grid at d = 128: {len(full.cells())} cells x {full.n_trials} trials, "
              f"N = {list(full.n_keys)}: {secs:.1f} s ({res.manifest['executor']})")


if __name__ == "__main__":
    main()
