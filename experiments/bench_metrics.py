"""Benchmark: cost of the 6D error profile next to the quantizers it measures.

For each dtype and scheme, draws ``--trials`` Gaussian trials (in chunks, to bound
memory), times ``scheme.quantize`` + ``scheme.dequantize`` (one independent draw of the
scheme's randomness per trial, ``draws=chunk``) and ``kvstats.error_profile`` on the
result, and reports milliseconds per trial and their ratio. Sampling is not timed.

    .venv/bin/python experiments/bench_metrics.py                 # 1000 x 1024 x 128
    .venv/bin/python experiments/bench_metrics.py --write-docs    # also update docs/measurement.md

The table goes between the ``<!-- bench:start -->`` / ``<!-- bench:end -->`` markers of
docs/measurement.md with ``--write-docs``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

import kvstats

DOC = Path(__file__).resolve().parents[1] / "docs" / "measurement.md"


def run(trials: int, keys: int, dim: int, chunk: int, bits: int, schemes: list[str],
        dtypes: list[str], seed: int) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for name in schemes:
            t_quant = t_prof = 0.0
            done = 0
            for i, a in enumerate(range(0, trials, chunk)):
                n = min(chunk, trials - a)
                ss = np.random.SeedSequence([seed, i])
                t = kvstats.sample("gaussian", n, keys, dim, seed=ss, dtype=np.dtype(dtype))
                scheme = kvstats.make_scheme(name, bits, dim, seed=seed + i, draws=n)
                t0 = time.perf_counter()
                K_hat, V_hat = scheme.dequantize(scheme.quantize(t.K, t.V))
                t1 = time.perf_counter()
                kvstats.error_profile(t, K_hat, V_hat)
                t2 = time.perf_counter()
                t_quant += t1 - t0
                t_prof += t2 - t1
                done += n
                del t, K_hat, V_hat
            rows.append({"dtype": dtype, "scheme": name, "bits": bits, "trials": done,
                         "quant_ms": 1e3 * t_quant / done, "profile_ms": 1e3 * t_prof / done,
                         "ratio": t_prof / t_quant})
            r = rows[-1]
            print(f"{dtype:8s} {name:6s} n={bits}: quantize+dequantize {r['quant_ms']:.2f} ms/trial, "
                  f"error_profile {r['profile_ms']:.2f} ms/trial, ratio {r['ratio']:.2f}", flush=True)
    return rows


def table(rows: list[dict], args: argparse.Namespace) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    head = (f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
            f"({os.cpu_count()} logical CPUs visible, load average {load[0]:.1f} at the end, "
            f"shared with other jobs), Python {platform.python_version()}, numpy {np.__version__}. "
            f"`python experiments/bench_metrics.py --trials {args.trials} --keys {args.keys} "
            f"--dim {args.dim} --bits {args.bits}`: {args.trials} Gaussian trials, N = {args.keys}, "
            f"d = {args.dim}, one query per trial, chunks of {args.chunk} trials.\n\n")
    lines = ["| dtype | scheme | bits | quantize + dequantize (ms/trial) | error_profile (ms/trial) "
             "| profile / quantizer |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['scheme']} | {r['bits']} | {r['quant_ms']:.2f} | "
                     f"{r['profile_ms']:.2f} | {r['ratio']:.2f} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--keys", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=125, help="trials per chunk (bounds memory)")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--schemes", nargs="+", default=["KV", "KQV", "QKQV"])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-docs", action="store_true", help=f"update the table in {DOC}")
    args = ap.parse_args()
    rows = run(args.trials, args.keys, args.dim, args.chunk, args.bits, args.schemes,
               args.dtypes, args.seed)
    text = table(rows, args)
    print(text)
    if args.write_docs:
        doc = DOC.read_text()
        new, n = re.subn(r"(<!-- bench:start -->\n).*?(<!-- bench:end -->)",
                         lambda m: m.group(1) + text + m.group(2), doc, flags=re.S)
        if n != 1:
            raise SystemExit(f"{DOC} needs exactly one bench:start/bench:end marker pair")
        DOC.write_text(new)


if __name__ == "__main__":
    main()
