"""Benchmark: the vectorised sweep runner vs a straightforward per-trial Python loop.

Both compute the same thing on the same reduced grid in one run, in one process:
for every cell (distribution, budget, scheme) and every trial, quantize (K, V) with an
independent draw of the scheme's randomness and measure the 6D error profile.

- vectorised: ``kvstats.run_sweep(..., executor="serial")`` (one scheme object with
  ``draws=T`` per chunk of trials, one ``error_profile`` call per chunk);
- loop: for each trial, ``make_scheme(..., draws=())`` (its own seed), ``quantize``,
  ``dequantize`` and ``error_profile`` on that single trial.

The ratio of the two mean KLs over the Gaussian cells is printed as a check that both
measure the same thing (different random draws, so they agree statistically, not bit for
bit). With ``--full-grid`` it also times the full seed-paper grid at d = 128
(experiments/dalberto.toml restricted to d = 128) with the default process pool.

    python experiments/bench_sweep.py [--trials 40] [--n-keys 1024 128] [--full-grid]
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


def loop_sweep(cfg: SweepConfig) -> pd.DataFrame:
    """The plain reference: one scheme object and one error_profile call per trial."""
    rows = []
    rng = np.random.default_rng(cfg.seed)
    for cell in cfg.cells():
        trials = kvstats.sample(cell.distribution, cfg.n_trials, cell.n_keys, cell.dim,
                                seed=int(rng.integers(2**63)), dtype=np.dtype(cfg.dtype), **cell.params)
        for t in range(cfg.n_trials):
            one = Trials(trials.K[t:t + 1], trials.V[t:t + 1], trials.q[t:t + 1], trials.meta)
            scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim,
                                         seed=int(rng.integers(2**63)))
            K_hat, V_hat = scheme.dequantize(scheme.quantize(one.K, one.V))
            prof = kvstats.error_profile(one, K_hat, V_hat)
            rows.append(prof.assign(distribution=cell.distribution, budget=cell.budget,
                                    scheme=cell.scheme.name))
    return pd.concat(rows, ignore_index=True)


def reduced_config(trials: int, n_keys: int) -> SweepConfig:
    return SweepConfig.from_dict({
        "schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 4, 6],
        "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
        "dims": [128], "n_keys": [n_keys], "n_trials": trials, "seed": 1, "dtype": "float32"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per cell of the reduced grid")
    parser.add_argument("--n-keys", type=int, nargs="+", default=[1024, 128],
                        help="context lengths N of the reduced grid (one comparison each)")
    parser.add_argument("--full-grid", action="store_true",
                        help="also time experiments/dalberto.toml restricted to d = 128")
    args = parser.parse_args()
    try:  # both paths run with one BLAS thread: on a shared machine extra threads only spin
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=1, user_api="blas")
        blas = "1 BLAS thread"
    except ImportError:
        blas = "default BLAS threads"

    print(f"# bench_sweep  {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, {blas}")
    print("| N | cells | trials/cell | vectorised (s) | per-trial loop (s) | speed-up | Gaussian mean KL vec / loop |")
    print("|---|---|---|---|---|---|---|")
    for n_keys in args.n_keys:
        cfg = reduced_config(args.trials, n_keys)
        run_sweep(reduced_config(4, n_keys), executor="serial", progress=False)  # warm caches (codebooks)
        tic = time.perf_counter()
        vec = run_sweep(cfg, executor="serial", progress=False).frame
        t_vec = time.perf_counter() - tic
        tic = time.perf_counter()
        loop = loop_sweep(cfg)
        t_loop = time.perf_counter() - tic
        # Gaussian cells only: heavy-tailed KL has infinite-variance-like scatter
        kl_ratio = (vec[vec.distribution == "gaussian"]["kl"].mean()
                    / loop[loop.distribution == "gaussian"]["kl"].mean())
        print(f"| {n_keys} | {len(cfg.cells())} | {cfg.n_trials} | {t_vec:.2f} | {t_loop:.2f} | "
              f"{t_loop / t_vec:.1f}x | {kl_ratio:.3f} |", flush=True)

    if args.full_grid:
        here = os.path.dirname(os.path.abspath(__file__))
        full = SweepConfig.from_toml(os.path.join(here, "dalberto.toml"))
        full = SweepConfig.from_dict({**full.to_dict(), "dims": [128]})
        tic = time.perf_counter()
        res = run_sweep(full, progress=True)
        print(f"full seed-paper grid at d = 128: {len(full.cells())} cells x {full.n_trials} trials, "
              f"N = {list(full.n_keys)}: {time.perf_counter() - tic:.1f} s ({res.manifest['executor']})")


if __name__ == "__main__":
    main()
