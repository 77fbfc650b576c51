"""Benchmark: cost of the 6D error profile next to the quantizers it measures.

For each dtype and scheme, draws ``--trials`` Gaussian trials (in chunks, to bound
memory), times ``scheme.quantize`` + ``scheme.dequantize`` (one independent draw of the
scheme's randomness per trial, ``draws=chunk``), ``scheme.roundtrip`` (what the sweep
runs: the same reconstructions without packing codes, checked bit for bit), each the
lesser of two calls in turns, and ``kvstats.error_profile`` on the result, the lesser of
two calls too (everything runs once untimed per scheme first), and reports CPU
milliseconds per trial and the profile's ratio to each. Sampling is not timed.

    .venv/bin/python experiments/bench_metrics.py                 # 1000 x 1024 x 128
    .venv/bin/python experiments/bench_metrics.py --write-docs    # also update docs/measurement.md
    .venv/bin/python experiments/bench_metrics.py --claims 200 --write-docs

``--claims T`` instead measures the KQV-vs-QKQV attention KL at n = 2..6 (Gaussian keys,
d = 128, N = 1024, T independent trials per scheme and budget) beside the closed-form
prediction. With ``--write-docs`` each table goes between its markers
(``bench:start/end``, ``claims:start/end``) in docs/measurement.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

import kvstats

DOC = Path(__file__).resolve().parents[1] / "docs" / "measurement.md"


def _digest(*arrays: np.ndarray) -> tuple:
    """Dtype, shape and a BLAKE2 digest of the bytes of each array (no copy of contiguous
    data): equal digests mean equal arrays bit for bit, short of a hash collision."""
    return tuple((a.dtype.str, a.shape, hashlib.blake2b(np.ascontiguousarray(a)).digest())
                 for a in arrays)


def run(trials: int, keys: int, dim: int, chunk: int, bits: int, schemes: list[str],
        dtypes: list[str], seed: int) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for name in schemes:
            # warm-up, not timed: codebooks and tables are built and cached on first use
            w = kvstats.sample("gaussian", 1, keys, dim, seed=seed, dtype=np.dtype(dtype))
            s = kvstats.make_scheme(name, bits, dim, seed=seed, draws=1)
            s.roundtrip(w.K, w.V)
            kvstats.error_profile(w, *s.dequantize(s.quantize(w.K, w.V)))
            t_quant = t_round = t_prof = 0.0
            done = 0
            for i, a in enumerate(range(0, trials, chunk)):
                n = min(chunk, trials - a)
                ss = np.random.SeedSequence([seed, i])
                t = kvstats.sample("gaussian", n, keys, dim, seed=ss, dtype=np.dtype(dtype))
                scheme = kvstats.make_scheme(name, bits, dim, seed=seed + i, draws=n)
                # CPU seconds: on a shared machine wall time moves with the other jobs. Each
                # path runs twice, in turns (A B A B), with nothing of the other's held, and
                # the lesser time counts: a call's time moved up to 3x with the memory the
                # process held before it (fresh pages of its outputs; 2026-12-02, float64)
                paths = {"store": lambda: scheme.dequantize(scheme.quantize(t.K, t.V)),
                         "round": lambda: scheme.roundtrip(t.K, t.V)}
                best, digests = {"store": np.inf, "round": np.inf}, {}
                for path in ("store", "round", "store", "round"):
                    c = time.process_time()
                    K_hat, V_hat = paths[path]()
                    best[path] = min(best[path], time.process_time() - c)
                    digests[path] = _digest(K_hat, V_hat)
                    del K_hat, V_hat
                # roundtrip (what the sweep runs) gives the same K_hat, V_hat bit for bit
                if digests["store"] != digests["round"]:
                    raise SystemExit(f"{name} {dtype}: roundtrip differs from dequantize(quantize())")
                # the profile timed as the coders are: the lesser of two calls (one call
                # alone read up to 12 % above it)
                K_hat, V_hat = paths["round"]()
                prof = np.inf
                for _ in range(2):
                    c = time.process_time()
                    kvstats.error_profile(t, K_hat, V_hat)
                    prof = min(prof, time.process_time() - c)
                t_prof += prof
                t_quant += best["store"]
                t_round += best["round"]
                done += n
                del t, K_hat, V_hat
            rows.append({"dtype": dtype, "scheme": name, "bits": bits, "trials": done,
                         "quant_ms": 1e3 * t_quant / done, "round_ms": 1e3 * t_round / done,
                         "profile_ms": 1e3 * t_prof / done,
                         "ratio": t_prof / t_quant, "ratio_round": t_prof / t_round})
            r = rows[-1]
            print(f"{dtype:8s} {name:6s} n={bits}: quantize+dequantize {r['quant_ms']:.2f} ms/trial, "
                  f"roundtrip {r['round_ms']:.2f}, error_profile {r['profile_ms']:.2f} ms/trial, "
                  f"ratios {r['ratio']:.2f} / {r['ratio_round']:.2f}", flush=True)
    return rows


def claims(T: int, seed: int) -> str:
    """KL and q·k-error-variance ratios QKQV/KQV per budget, with theory beside them."""
    from kvstats.stats import bootstrap_ratio_ci, mann_whitney

    d, N = 128, 1024
    lines = ["| n | mean KL KQV | mean KL QKQV | KL ratio QKQV/KQV [95% CI] | rank-biserial r "
             "(KQV vs QKQV) | p (one-sided) | ip_var ratio measured | predicted ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for n in range(2, 7):
        prof = {}
        for j, name in enumerate(("KQV", "QKQV")):
            t = kvstats.sample("gaussian", T, N, d, seed=np.random.SeedSequence([seed, n, j]))
            s = kvstats.make_scheme(name, n, d, seed=1000 * n + j, draws=T)
            prof[name] = kvstats.error_profile(t, *s.dequantize(s.quantize(t.K, t.V)))
        a, b = prof["KQV"]["kl"].to_numpy(), prof["QKQV"]["kl"].to_numpy()
        ci = bootstrap_ratio_ci(b, a, n_resamples=1999, seed=n)
        mw = mann_whitney(a, b, alternative="less")
        ipr = prof["QKQV"]["ip_var"].mean() / prof["KQV"]["ip_var"].mean()
        pred = kvstats.theory.bit_trade_inflation(n, dim=d)     # (π/2 − 1/d)·D_{n−1}/D_n
        lines.append(f"| {n} | {a.mean():.3g} | {b.mean():.3g} | {ci.estimate:.2f} "
                     f"[{ci.low:.2f}, {ci.high:.2f}] | {mw.rank_biserial:.3f} | {mw.pvalue:.1e} | "
                     f"{ipr:.2f} | {pred:.2f} |")
        print(lines[-1], flush=True)
    head = (f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC: "
            f"`python experiments/bench_metrics.py --claims {T}` — Gaussian keys and values, "
            f"d = {d}, N = {N}, one query per trial, {T} independent trials per scheme and "
            "budget (independent data and scheme randomness per trial). The KL ratio CI is "
            "a BCa bootstrap of mean(QKQV)/mean(KQV) (`kvstats.stats.bootstrap_ratio_ci`); "
            "r and p are `kvstats.stats.mann_whitney(KQV, QKQV, alternative='less')`. "
            "Predicted ratio: `kvstats.theory.bit_trade_inflation(n, dim=128)` = "
            "(π/2 − 1/d)·D_{n−1}/D_n, the q·k error variance of QKQV's "
            "keys over KQV's (D_b the Lloyd–Max distortion of the sphere-coordinate density, "
            "d = 128), which is also the KL ratio to second order in the logit error "
            "(KL ≈ ½ Var_p(δ)).\n\n")
    return head + "\n".join(lines) + "\n"


def table(rows: list[dict], args: argparse.Namespace) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    head = (f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
            f"({os.cpu_count()} logical CPUs visible, load average {load[0]:.1f} at the end, "
            f"shared with other jobs), Python {platform.python_version()}, numpy {np.__version__}. "
            f"`python experiments/bench_metrics.py --trials {args.trials} --keys {args.keys} "
            f"--dim {args.dim} --bits {args.bits}`: {args.trials} Gaussian trials, N = {args.keys}, "
            f"d = {args.dim}, one query per trial, chunks of {args.chunk} trials; process CPU "
            "seconds (OPENBLAS_NUM_THREADS=1).\n\n")
    lines = ["| dtype | scheme | bits | quantize + dequantize (ms/trial) | roundtrip (ms/trial) "
             "| error_profile (ms/trial) | profile / quantize + dequantize | profile / roundtrip |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['scheme']} | {r['bits']} | {r['quant_ms']:.2f} | "
                     f"{r['round_ms']:.2f} | {r['profile_ms']:.2f} | {r['ratio']:.2f} | "
                     f"{r['ratio_round']:.2f} |")
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
    ap.add_argument("--claims", type=int, default=0, metavar="T",
                    help="measure the KQV vs QKQV KL claim with T trials instead of timing")
    args = ap.parse_args()
    if args.claims:
        _write(claims(args.claims, args.seed), "claims", args.write_docs)
        return
    rows = run(args.trials, args.keys, args.dim, args.chunk, args.bits, args.schemes,
               args.dtypes, args.seed)
    _write(table(rows, args), "bench", args.write_docs)


def _write(text: str, marker: str, write_docs: bool) -> None:
    print(text)
    if write_docs:
        doc = DOC.read_text()
        new, n = re.subn(rf"(<!-- {marker}:start -->\n).*?(<!-- {marker}:end -->)",
                         lambda m: m.group(1) + text + m.group(2), doc, flags=re.S)
        if n != 1:
            raise SystemExit(f"{DOC} needs exactly one {marker}:start/{marker}:end marker pair")
        DOC.write_text(new)


if __name__ == "__main__":
    main()
