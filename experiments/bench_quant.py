"""Encode + decode throughput of every scheme, as ratios to baselines measured in the same run.

Each scheme has two rows: ``dequantize(quantize(K, V))`` and ``roundtrip(K, V)`` (the
same K_hat, V_hat bit for bit, without packing codes; what the sweep runs).

Baselines: a plain numpy copy of the same data (this machine's memory bandwidth limit)
and a dense d×d matrix rotation (what the fast Walsh–Hadamard transform replaces).

    python experiments/bench_quant.py [--vectors 65536] [--dim 128] [--bits 4] [--repeats 5]

Each figure is the median of ``--repeats`` runs. K and V are both ``vectors × dim``
float32, so a scheme's time covers coding 2 × vectors vectors.
"""

from __future__ import annotations

import argparse
import platform
import time
from datetime import date

import numpy as np

import kvstats

DEFAULT_BUDGET = 4


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: codebooks are built and cached here, not timed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=65_536, help="vectors per K and per V")
    parser.add_argument("--dim", type=int, default=128, help="head dimension d")
    parser.add_argument("--bits", type=int, default=DEFAULT_BUDGET, help="budget n per coordinate")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure (median)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    K = rng.standard_normal((args.vectors, args.dim), dtype=np.float32)
    V = rng.standard_normal((args.vectors, args.dim), dtype=np.float32)
    rotation = np.linalg.qr(rng.standard_normal((args.dim, args.dim)))[0].astype(np.float32)

    copy_s = median_seconds(lambda: (K.copy(), V.copy()), args.repeats)
    dense_s = median_seconds(lambda: (K @ rotation, V @ rotation), args.repeats)
    rows = [("numpy copy (baseline)", copy_s), ("dense d×d rotation", dense_s)]
    for name in kvstats.SCHEMES:
        if name == "mixed":
            scheme = kvstats.make_scheme("K4V2", None, args.dim, seed=0)
            name = "mixed K4V2"
        else:
            scheme = kvstats.make_scheme(name, args.bits, args.dim, seed=0)
        rows.append((name, median_seconds(lambda: scheme.dequantize(scheme.quantize(K, V)),
                                          args.repeats)))
        # what the sweep runs: the same K_hat, V_hat without the storage work
        rows.append((f"{name} roundtrip", median_seconds(lambda: scheme.roundtrip(K, V),
                                                         args.repeats)))

    gbytes = (K.nbytes + V.nbytes) / 1e9
    header = (f"# encode+decode, {args.vectors:,} K + {args.vectors:,} V vectors, d={args.dim}, "
              f"float32, n={args.bits}; {date.today()}, {platform.processor() or platform.machine()}, "
              f"median of {args.repeats}")
    print(header)
    print("| what | seconds | GB/s of input | × copy time | × dense rotation time |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.4f} | {gbytes / seconds:.2f} | {seconds / copy_s:.1f} | "
              f"{seconds / dense_s:.2f} |")


if __name__ == "__main__":
    main()
