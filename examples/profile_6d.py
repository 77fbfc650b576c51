"""The 6D error profile of one scheme on one distribution, trial by trial, and its Shannon–φ planes.

The 6D profile splits the damage a scheme does into scale (SNR, dB) and direction (the
angle φ, radians) for the keys K, the values V and the attention output T = softmax(qKᵀ/√d)V.
This script draws one set of trials, codes it with one scheme at budgets 2..5, and

- prints the per-trial table at one budget (one row per trial: what the statistics
  compare) with the definition and unit of each column, read from kvstats' metric table,
  and writes the whole table (every budget) to OUT/profile.csv;
- draws the Shannon–φ plane of K, V and T (the scheme's trajectory over the budgets, the
  rate–distortion limit at each n) into OUT/shannon_phi_{k,v,t}.png.

    .venv/bin/python examples/profile_6d.py                         # KQV, Student-t keys: 17 s wall, 10 s CPU
    .venv/bin/python examples/profile_6d.py --scheme QKQV --distribution gaussian
    .venv/bin/python examples/profile_6d.py --fast --out /tmp/p6    # N = 128: 6 s wall, 3 s CPU (the tests)

Every budget codes the same trials (as a sweep does), each trial with its own draw of the
scheme's rotation and sketch (``draws``). Times: the 2-core machine at load average 2-4, one
BLAS thread, 2026-12-02.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

import kvstats
from kvstats.metrics import METRIC_TABLE, PROFILE_6D

BUDGETS = (2, 3, 4, 5)


def profile_over_budgets(trials, scheme: str, seed: int) -> pd.DataFrame:
    """One error_profile per budget on the same trials, with its budget and stored bits."""
    n_trials, n_keys, dim = trials.K.shape
    frames = []
    for n in BUDGETS:
        coder = kvstats.make_scheme(scheme, n, dim, seed=seed, draws=n_trials)
        K_hat, V_hat = coder.roundtrip(trials.K, trials.V)
        stored = coder.bits_per_coord(n_keys)
        frames.append(kvstats.error_profile(trials, K_hat, V_hat).assign(
            budget=float(n), bits_total=stored.total, trial=np.arange(n_trials)))
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheme", default="KQV", help="a scheme of `kvstats schemes` (default KQV)")
    ap.add_argument("--distribution", default="heavy_tailed",
                    help="a distribution of `kvstats schemes` (default heavy_tailed, Student-t nu = 3)")
    ap.add_argument("--bits", type=int, default=3, choices=BUDGETS, help="budget of the printed table (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the trials; the scheme's is seed + 1 (default 0)")
    ap.add_argument("--fast", action="store_true", help="30 trials of N = 128 (seconds): what the tests run")
    ap.add_argument("--out", default="/tmp/kvstats_profile_6d", help="folder for the table and plots "
                                                                      "(default %(default)s)")
    args = ap.parse_args(argv)
    n_trials, n_keys, dim = (30, 128, 64) if args.fast else (200, 512, 128)
    params = {"nu": 3.0} if args.distribution == "heavy_tailed" else {}
    label = ",".join(f"{k}={v}" for k, v in params.items()) or "-"

    trials = kvstats.sample(args.distribution, n_trials=n_trials, n_keys=n_keys, dim=dim, seed=args.seed, **params)
    frame = profile_over_budgets(trials, args.scheme, args.seed + 1)
    os.makedirs(args.out, exist_ok=True)
    frame.to_csv(os.path.join(args.out, "profile.csv"), index=False)

    at_n = frame[frame.budget == args.bits]
    case = f"{args.distribution} ({label})" if params else args.distribution
    print(f"{args.scheme} at n = {args.bits} ({at_n.bits_total.iloc[0]:.4f} bits per coordinate stored) on "
          f"{case} keys: {n_trials} trials of N = {n_keys}, d = {dim}")
    columns = list(PROFILE_6D) + ["kl", "recall_at_5", "argmax_shift", "snr_k_pooled", "snr_v_pooled"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print("\nper-trial table (first 5 of its rows; all of them in profile.csv):")
        print(at_n[["trial"] + columns].head(5).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print("\nmeans over the trials, each budget:")
        print(frame.groupby("budget")[columns].mean().to_string(float_format=lambda v: f"{v:.4g}"))
    print("\nthe columns (unit; which end is worse):")
    for name in columns:
        m = METRIC_TABLE[name]
        print(f"  {name:13s} {m.unit or '-':8s} worse: {m.worst:5s} {m.definition}")

    for place in "kvt":
        path = os.path.join(args.out, f"shannon_phi_{place}.png")
        # a profile frame: the scheme and the case are named (the case draws its limit lines)
        kvstats.plot_shannon_phi(frame, place=place, scheme=args.scheme, distribution=args.distribution,
                                 params=label, dim=dim, n_keys=n_keys).savefig(path, dpi=100)
        print(f"wrote {path}")
    print(f"wrote {os.path.join(args.out, 'profile.csv')} ({len(frame)} rows)")


if __name__ == "__main__":
    main()

# How to read the output.
# - One row per trial: a trial's keys share its query and its draw of the rotation, so the
#   trial, not the key, is the unit the tests compare (docs/measurement.md).
# - snr_* (dB) is the scale of the error: about 6 dB more per bit for a good scalar code.
#   phi_* (rad) is its direction: attention scores read the keys' direction, so phi_k
#   matters more than snr_k when two codes lose the same energy in different ways (an
#   error along x changes the norm and keeps phi = 0).
# - T is the attention output: its error mixes the keys' (through p) and the values'.
#   kl (nats) is the attention distribution's loss, recall_at_5 and argmax_shift what the
#   top keys kept. A KL is never negative; recall is in [0, 1].
# - snr_k_pooled is the energy-pooled SNR, what the rate–distortion limit bounds. It
#   parts from snr_k (the mean of per-vector dB) where a few keys carry most of the
#   energy (Student-t keys with nu near 1) or some are kept nearly exact (kivi's window):
#   compare the two columns; for KQV on nu = 3 keys they agree within a tenth of a dB.
# - The planes: up is a smaller error, left a better direction; each point is the mean at
#   one n (labelled), crosses are 95% intervals, faint dots the trials. The grey dashed
#   line at each n is the rate–distortion limit for a Gaussian source of the case's
#   covariance at n bits: a point above it stores more than n (its norms), and none is
#   drawn where no limit exists (Student-t nu <= 2) or for T (not coded).
