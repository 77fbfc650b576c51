"""Benchmark: the sweep runner vs the fair per-trial loop and the true floor, one core.

All paths compute the same table (KV, KQV, QKQV x n = 2, 4, 6 x {Gaussian, Student-t
nu = 1.5}, d = 128, float32, 18 cells) in one process with one BLAS thread, repeated
``--repeats`` times in turns (each figure the minimum over its repeats):

- runner: ``kvstats.run_sweep(..., executor="serial")``. A chunk of trials is drawn
  once for every budget and scheme of its case; each cell codes it with one scheme of
  ``draws=T`` independent rotations/sketches (``Scheme.roundtrip``'s numbers, written
  into output arrays reused across cells) and one ``error_profile`` call.
- fair loop: what a careful user writes without the runner, doing what the runner
  does trial by trial: each case's trials drawn once and shared by its cells (the
  same ``kvstats.sample`` call as the runner), then per cell and trial
  ``make_scheme(..., draws=())``, ``Scheme.roundtrip`` and ``error_profile``.
- floor: the work no runner of these schemes can skip, each step timed alone on
  inputs prepared outside the clock, as whole batches and trial by trial, keeping
  the faster: drawing each case's trials once; drawing every cell's rotations and
  sketches (``make_scheme(..., draws=T)``); per coded side the unit-vector scaling,
  the rotation and its inverse, the Lloyd-Max coding and the centroid lookup; per QJL
  residual its norm and the two sketch products (S r, S^T signs); ``error_profile``.
  No checks, no allocation of outputs, no packing. loop / floor bounds what any
  runner could gain over the fair loop on one core.

``--d1024`` also times a few cells of the seed grid at d = 1,024, N = 1,024 (the
d = 1024 half of experiments/dalberto.toml: 6 cases x 3 schemes x 5 budgets = 90 cells
x 1,000 trials): KV, KQV, QKQV at n = 2 and 6 on Gaussian keys through the runner, and
one draw of each of the six cases; it extrapolates the grid's time on 2 cores as
(drawing + 30 x the per-trial cost of each scheme, mean of n = 2, 6) x 1,000 trials / 2
workers, an estimate (perfect use of both cores, cost independent of the key law), for
each sketch kind given by ``--sketches`` that ``kvstats.quant.sketch.SKETCHES`` knows.

    python experiments/bench_sweep.py [--trials 64] [--n-keys 1024 256 16] [--repeats 3]
                                      [--generator 1] [--d1024] [--sketches gaussian srht]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable

import numpy as np

import kvstats
from kvstats.data.trials import Trials
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.qjl import _pm_from_bits, _reconstruct, _sign_bits, _store_norms
from kvstats.quant.sketch import SKETCHES
from kvstats.sweep import SweepConfig, run_sweep


def reduced_config(trials: int, n_keys: int, generator: int) -> SweepConfig:
    return SweepConfig.from_dict({
        # float32 norms as in the seed grid: Student-t norms can exceed float16's range
        "schemes": [{"name": name, "params": {"norm_dtype": "float32"}} for name in ("KV", "KQV", "QKQV")],
        "budgets": [2, 4, 6],
        "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
        "dims": [128], "n_keys": [n_keys], "n_trials": trials, "seed": 1, "dtype": "float32",
        "generator": generator})


def _cases(cfg: SweepConfig) -> dict[str, Trials]:
    """Each case's trials, drawn once (as the runner draws a chunk)."""
    rng = np.random.default_rng(cfg.seed)
    return {c.case_key(): kvstats.sample(c.distribution, cfg.n_trials, c.n_keys, c.dim,
                                         seed=int(rng.integers(2**63)), dtype=np.dtype(cfg.dtype),
                                         generator=cfg.generator, **c.params)
            for c in {c.case_key(): c for c in cfg.cells()}.values()}


def fair_loop(cfg: SweepConfig) -> float:
    """Seconds of the fair loop (shared data, per trial: make_scheme, roundtrip, error_profile)."""
    tic = time.perf_counter()
    cases = _cases(cfg)
    rng = np.random.default_rng(cfg.seed + 1)
    for cell in cfg.cells():
        trials = cases[cell.case_key()]
        for t in range(cfg.n_trials):
            one = Trials(trials.K[t:t + 1], trials.V[t:t + 1], trials.q[t:t + 1])
            scheme = kvstats.make_scheme(cell.scheme.name, cell.budget, cell.dim,
                                         seed=int(rng.integers(2**63)), **cell.scheme.params)
            kvstats.error_profile(one, *scheme.roundtrip(one.K, one.V))
    return time.perf_counter() - tic


def _best(fn: Callable[[], object], repeats: int = 3) -> float:
    out = []
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        out.append(time.perf_counter() - tic)
    return min(out)


def _side_steps(coder: object, x: np.ndarray) -> list[Callable[[], object]]:
    """The unavoidable arithmetic of one coded side of ``x`` (T, N, d), as closures on
    prepared inputs: every intermediate is computed once here, outside the clock."""
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
    steps: list[Callable[[], object]] = [
        lambda: np.einsum("...i,...i->...", x, x),
        lambda: x * inv[..., None],
        lambda: cb._encode(y),
        lambda: mse._lookup(codes, x.dtype),
    ]
    if rot.kind != "identity":
        steps += [lambda: rot._apply(u), lambda: rot._inverse(cent)]
    if isinstance(coder, ProdQuantizer):
        base = rot._inverse(cent) * norms[..., None].astype(x.dtype)
        r = x - base
        rn = _store_norms(r, coder.norm_dtype, "x")
        pm = _pm_from_bits(_sign_bits(coder.sketch, r), x.dtype)
        steps += [lambda: np.linalg.norm(r, axis=-1), lambda: _sign_bits(coder.sketch, r),
                  lambda: _reconstruct(coder.sketch, pm, rn, x.dtype)]
    return steps


def floor_seconds(cfg: SweepConfig, repeats: int) -> float:
    """Seconds of the unavoidable work of ``cfg`` (see the module docstring)."""
    rng = np.random.default_rng(cfg.seed)
    first = {c.case_key(): c for c in cfg.cells()}
    total = sum(_best(lambda c=c: kvstats.sample(
        c.distribution, cfg.n_trials, c.n_keys, c.dim, seed=1, dtype=np.dtype(cfg.dtype),
        generator=cfg.generator, **c.params), repeats) for c in first.values())
    cases = _cases(cfg)
    T = cfg.n_trials
    for cell in cfg.cells():
        trials = cases[cell.case_key()]
        args = (cell.scheme.name, cell.budget, cell.dim)
        total += _best(lambda: kvstats.make_scheme(*args, draws=T, seed=int(rng.integers(2**63)),
                                                   **cell.scheme.params), repeats)
        batched = kvstats.make_scheme(*args, draws=T, seed=2, **cell.scheme.params)
        single = kvstats.make_scheme(*args, seed=2, **cell.scheme.params)
        per_step = []
        for coder_b, coder_1, x in ((batched.key_quantizer, single.key_quantizer, trials.K),
                                    (batched.value_quantizer, single.value_quantizer, trials.V)):
            whole = _side_steps(coder_b, x)
            one = [_side_steps(coder_1, x[t]) for t in range(T)]
            for i, step in enumerate(whole):
                per_step.append(min(_best(step, repeats),
                                    _best(lambda i=i: [s[i]() for s in one], repeats)))
        K_hat, V_hat = batched.roundtrip(trials.K, trials.V)
        prof_whole = _best(lambda: kvstats.error_profile(trials, K_hat, V_hat), repeats)
        ones = [Trials(trials.K[t:t + 1], trials.V[t:t + 1], trials.q[t:t + 1]) for t in range(T)]
        prof_one = _best(lambda: [kvstats.error_profile(o, K_hat[t:t + 1], V_hat[t:t + 1])
                                  for t, o in enumerate(ones)], repeats)
        total += sum(per_step) + min(prof_whole, prof_one)
    return total


#: The cases of the seed grid's d = 1,024 half (experiments/dalberto.toml).
D1024_CASES = [("gaussian", {}), ("heavy_tailed", {"nu": 1.05}), ("heavy_tailed", {"nu": 1.5}),
               ("heavy_tailed", {"nu": 3.0}), ("low_rank", {"rank": 8}), ("focused", {"strength": 0.5})]


def d1024_draw_seconds(trials: int, generator: int) -> float:
    """Seconds per trial to draw one trial of every case of the d = 1,024 grid."""
    return sum(_best(lambda: kvstats.sample(name, trials, 1024, 1024, seed=0, dtype=np.float32,
                                            generator=generator, **p), 1)
               for name, p in D1024_CASES) / trials


def d1024_estimate(sketch: str, trials: int, draw: float) -> str:
    """Runner seconds per trial of the d = N = 1,024 cells (KV, KQV, QKQV x n = 2, 6 on
    Gaussian keys), extrapolated with ``draw`` (seconds per trial of drawing all six
    cases) to the seed grid's 6 cases x 15 cells x 1,000 trials on 2 workers."""
    cfg = SweepConfig.from_dict({
        "schemes": [{"name": n, "params": {"norm_dtype": "float32",
                                           **({"sketch": sketch} if n != "KV" else {})}}
                    for n in ("KV", "KQV", "QKQV")],
        "budgets": [2, 6], "distributions": ["gaussian"], "dims": [1024], "n_keys": [1024],
        "n_trials": trials, "seed": 3, "dtype": "float32"})
    res = run_sweep(cfg, executor="serial", progress=False)
    by: dict[str, list[float]] = {}
    for c in res.manifest["cells"]:
        by.setdefault(c["key"]["scheme"], []).append(c["seconds"] / trials)
    per_scheme = {k: float(np.mean(v)) for k, v in by.items()}   # mean over n = 2, 6
    # per trial: draw the six cases, code and profile 6 x 5 budgets of each scheme
    grid = (draw + 6 * 5 * sum(per_scheme.values())) * 1000 / 2
    schemes = ", ".join(f"{k} {1e3 * v:.0f}" for k, v in per_scheme.items())
    return f"| {sketch} | {trials} | {schemes} | {1e3 * draw:.0f} | {grid / 60:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64, help="trials per cell of the reduced grid")
    parser.add_argument("--n-keys", type=int, nargs="+", default=[1024, 256, 16],
                        help="context lengths N of the reduced grid (one comparison each)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path (minimum kept)")
    parser.add_argument("--generator", type=int, default=1, choices=[1, 2],
                        help="data-generator version of the runner and the loop (config key generator)")
    parser.add_argument("--d1024", action="store_true",
                        help="also time d = 1,024, N = 1,024 cells and extrapolate the seed grid")
    parser.add_argument("--d1024-trials", type=int, default=16, help="trials per d = 1,024 cell")
    parser.add_argument("--sketches", nargs="+", default=["gaussian", "srht"],
                        help="QJL sketches of the d = 1,024 timing (unknown kinds are skipped)")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1, user_api="blas")  # one core: the comparison is per core

    print(f"# bench_sweep  {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
          f"1 BLAS thread, generator {args.generator}, load average {os.getloadavg()[0]:.1f}")
    print("d = 128; KV, KQV, QKQV x n = 2, 4, 6 x {Gaussian, Student-t nu = 1.5} = 18 cells, float32")
    print("| N | trials/cell | runner (s) | fair loop (s) | loop / runner | floor (s) | loop / floor "
          "| runner / floor | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_keys in args.n_keys:
        cfg = reduced_config(args.trials, n_keys, args.generator)
        run_sweep(reduced_config(4, n_keys, args.generator), executor="serial", progress=False)  # warm caches
        t_run, t_loop = [], []
        for _ in range(args.repeats):  # in turns, so a load change hits both
            t_run.append(_best(lambda: run_sweep(cfg, executor="serial", progress=False), 1))
            t_loop.append(fair_loop(cfg))
        t_floor = floor_seconds(cfg, args.repeats)
        r, lo = min(t_run), min(t_loop)
        print(f"| {n_keys} | {cfg.n_trials} | {r:.2f} | {lo:.2f} | **{lo / r:.2f}x** | {t_floor:.2f} | "
              f"{lo / t_floor:.2f}x | {r / t_floor:.2f}x | {os.getloadavg()[0]:.1f} |", flush=True)

    if args.d1024:
        print("\nd = 1,024, N = 1,024 (KV, KQV, QKQV x n = 2, 6, Gaussian keys) through the runner; "
              "the seed grid (6 cases x 15 cells x 1,000 trials) extrapolated to 2 workers")
        print("| sketch | trials/cell | runner per trial and cell (ms) | drawing the 6 cases per trial (ms) "
              "| grid on 2 cores, estimated (min) |")
        print("|---|---|---|---|---|")
        draw = d1024_draw_seconds(args.d1024_trials, args.generator)
        for sketch in args.sketches:
            if sketch not in SKETCHES:
                print(f"| {sketch} | not available (kvstats.quant.sketch.SKETCHES = {list(SKETCHES)}) ||||")
                continue
            print(d1024_estimate(sketch, args.d1024_trials, draw), flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
