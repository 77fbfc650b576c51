"""Encode + decode throughput of every scheme, as ratios to baselines measured in the same run.

Each registered scheme (``kvstats.quant.registry.REGISTRY``; ``mixed`` as K4V2, the formats
with a fixed budget at their own) has two rows: ``dequantize(quantize(K, V))`` and
``roundtrip(K, V)`` (what the sweep runs: no packing of codes). Before timing, the script
checks that both give the same K_hat, V_hat bit for bit (``identity``: K and V).

Baselines: a plain numpy copy of the same data (this machine's memory bandwidth limit)
and a dense d×d matrix rotation (what the fast Walsh–Hadamard transform replaces). The
llama.cpp and MX block formats (``PEER_TYPES``) also have a peer: ``gguf.quants``'
numpy ``quantize`` + ``dequantize`` of K and V (gguf is optional: pyproject extra
"models"; without it, or without a format's type, the peer table says so). It takes the
same turns, and its K_hat, V_hat must equal kvstats' bit for bit (the script stops
otherwise); a second table gives its time against kvstats' two paths.

    python experiments/bench_quant.py [--vectors 16384] [--dim 128] [--bits 4] [--repeats 5]

Times are the process's CPU seconds (``--clock cpu``, the default; run with
OPENBLAS_NUM_THREADS=1) or wall seconds (``--clock wall``). Each scheme takes turns with
the two baselines (copy, rotation, storage path, roundtrip, copy, ...), ``--repeats``
turns; each figure is the least time of its turns, and a row's ratios are against the
baselines' least times in the same turns. K and V are both ``vectors × dim``
float32, so a scheme's time covers coding 2 × vectors vectors.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import date

import numpy as np

import kvstats
from kvstats.quant.registry import REGISTRY

DEFAULT_BUDGET = 4

#: The block formats with a gguf.quants peer: kvstats name -> GGMLQuantizationType name.
PEER_TYPES = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1",
              "mxfp4": "MXFP4"}


def gguf_peer(name: str):
    """(function, note): ``gguf.quants``' quantize + dequantize of K and V for the block
    format ``name`` as a function of (K, V), or None and why not (not a block format,
    gguf not installed, a gguf without this type)."""
    if name not in PEER_TYPES:
        return None, "no gguf type"
    try:
        import gguf.quants
        from gguf import GGMLQuantizationType
    except ImportError as exc:
        return None, f"gguf not installed ({exc}; pip install gguf, pyproject extra 'models')"
    kind = getattr(GGMLQuantizationType, PEER_TYPES[name], None)
    if kind is None:
        return None, f"this gguf has no {PEER_TYPES[name]}"

    def peer(K, V):
        return tuple(gguf.quants.dequantize(gguf.quants.quantize(x, kind), kind).reshape(x.shape)
                     for x in (K, V))
    return peer, ""


def best_in_turns(fns, repeats: int, clock=time.process_time) -> list[float]:
    """Least time (``clock``) of each function over ``repeats`` turns (A B C A B C ...), after a
    warm-up of each (codebooks are built and cached there, not timed). Taking turns puts
    a scheme and its baselines under the same load; the least time, because other jobs on
    a shared machine only ever add time."""
    for fn in fns:
        fn()
    times = np.full((repeats, len(fns)), np.inf)
    for r in range(repeats):
        for i, fn in enumerate(fns):
            start = clock()
            fn()
            times[r, i] = clock() - start
    return times.min(axis=0).tolist()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=16_384,
                        help="vectors per K and per V (default: 2 x 8 MB, past the 4 MB L2)")
    parser.add_argument("--dim", type=int, default=128, help="head dimension d")
    parser.add_argument("--bits", type=int, default=DEFAULT_BUDGET, help="budget n per coordinate")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure (the least is kept)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="process CPU seconds (default: on a shared machine wall seconds move "
                             "with the other jobs' load) or wall seconds")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    K = rng.standard_normal((args.vectors, args.dim), dtype=np.float32)
    V = rng.standard_normal((args.vectors, args.dim), dtype=np.float32)
    rotation = np.linalg.qr(rng.standard_normal((args.dim, args.dim)))[0].astype(np.float32)

    # The baselines write into buffers allocated once: a fresh array's first touch of its
    # pages costs more than the copy itself, and a coder may reuse its output too
    # (``roundtrip(x, out=)``), so only the reads and writes are the floor.
    out_k, out_v = np.empty_like(K), np.empty_like(V)

    def copy():
        np.copyto(out_k, K)
        np.copyto(out_v, V)

    def dense():
        np.matmul(K, rotation, out=out_k)
        np.matmul(V, rotation, out=out_v)

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    # (name, seconds, copy seconds and dense seconds in the same turns)
    rows, peers = [], []
    for name, sdef in REGISTRY.items():
        if name == "mixed":
            name = "K4V2"     # mixed by name: K 4-bit, V 2-bit
        bits = None if sdef.fixed_budget else args.bits
        if bits is not None and not sdef.min_bits <= bits <= sdef.max_bits:
            print(f"# {name}: skipped, --bits {bits} outside {sdef.min_bits}..{sdef.max_bits}")
            continue
        scheme = kvstats.make_scheme(name, bits, args.dim, seed=0)
        # same run, same outputs: the storage path and roundtrip must give the same K_hat,
        # V_hat bit for bit (identity: K and V themselves)
        decoded = scheme.dequantize(scheme.quantize(K, V))
        direct = scheme.roundtrip(K, V)
        want = (K, V) if name == "identity" else decoded
        for a, b, c in zip(decoded, direct, want):
            if not (np.array_equal(a, b) and np.array_equal(a, c) and a.dtype == K.dtype):
                raise SystemExit(f"{name}: dequantize(quantize(K, V)) and roundtrip(K, V) differ")
        peer, why = gguf_peer(name)
        if peer is not None:  # the peer's K_hat, V_hat are kvstats' bit for bit
            for a, b in zip(direct, peer(K, V)):
                if not (np.array_equal(a, b) and a.dtype == b.dtype):
                    raise SystemExit(f"{name}: gguf.quants' quantize+dequantize differs from kvstats'")
        elif name in PEER_TYPES:
            peers.append(f"| {name} | — ({why}) | | | |")
        del decoded, direct, want
        # roundtrip is what the sweep runs: the same K_hat, V_hat without the storage work
        fns = [copy, dense, lambda: scheme.dequantize(scheme.quantize(K, V)), lambda: scheme.roundtrip(K, V)]
        c, d, t_store, t_round, *t_peer = best_in_turns(
            fns + ([lambda: peer(K, V)] if peer is not None else []), args.repeats, clock)
        rows += [(name, t_store, c, d), (f"{name} roundtrip", t_round, c, d)]
        if t_peer:
            peers.append(f"| {name} | {t_peer[0]:.4f} | {t_store:.4f} | {t_round:.4f} | "
                         f"**{t_peer[0] / t_round:.2f}** ({t_peer[0] / t_store:.2f}) |")

    if not rows:
        raise SystemExit(f"--bits {args.bits}: no scheme takes this budget (1..8)")
    gbytes = (K.nbytes + V.nbytes) / 1e9
    header = (f"# encode+decode, {args.vectors:,} K + {args.vectors:,} V vectors, d={args.dim}, "
              f"float32, n={args.bits}; {date.today()}, {platform.processor() or platform.machine()}, "
              f"{args.clock} seconds, best of {args.repeats} turns; "
              f"load average {os.getloadavg()[0]:.1f} at the end")
    print(header)
    print(f"| what | {args.clock} seconds | GB/s of input | × copy time | × dense rotation time |")
    print("|---|---:|---:|---:|---:|")
    copy_s, dense_s = min(r[2] for r in rows), min(r[3] for r in rows)
    print(f"| numpy copy into a buffer (baseline; least of all turns) | {copy_s:.4f} "
          f"| {gbytes / copy_s:.2f} | 1.0 | {copy_s / dense_s:.2f} |")
    print(f"| dense d×d rotation into a buffer (least of all turns) | {dense_s:.4f} "
          f"| {gbytes / dense_s:.2f} | {dense_s / copy_s:.1f} | 1.00 |")
    for name, seconds, c, d in rows:
        print(f"| {name} | {seconds:.4f} | {gbytes / seconds:.2f} | {seconds / c:.1f} | "
              f"{seconds / d:.2f} |")
    if peers:
        print(f"\n# block formats against their peer, gguf.quants quantize + dequantize (numpy), "
              f"same turns, values bit-equal to kvstats'; {args.clock} seconds")
        print("| format | gguf.quants | kvstats storage path | kvstats roundtrip "
              "| gguf / kvstats roundtrip (/ storage) |")
        print("|---|---:|---:|---:|---:|")
        print("\n".join(peers))

if __name__ == "__main__":
    main()
