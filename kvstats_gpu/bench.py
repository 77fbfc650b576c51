"""Benchmark: quantized-cache decode attention vs dense bf16 attention at model scale.

Run ``python -m kvstats_gpu.bench`` (``--quick`` for 32k tokens only, ``--json FILE`` to
save the figures). One script, in this order:

1. correctness: the Pallas kernels of each backend asked for (``--impl``: Mosaic GPU and
   Triton by default; compiled on a GPU, interpreted on a CPU) against the dense
   reference on the dequantized cache; stops with exit status 1 on a mismatch;
2. throughput: for each context length (32k and 128k tokens, 8 KV heads, 4 query heads
   per KV head, d = 128), the time of one decode step over the quantized cache and of the
   fastest dense bf16 decode step at the same shape among :data:`DENSE_BASELINES` (XLA's
   ``jax.nn.dot_product_attention``, its cuDNN implementation, JAX's Pallas flash-decoding
   GQA kernel; each named, a failing one reported unavailable), the bytes each reads, the
   achieved memory bandwidth and its fraction of the device's peak, and the cache bytes
   per token against fp16, one row per (length, scheme, backend). Beside the time ratio,
   the quantized time against the dense step's byte floor at peak bandwidth (what dense
   attention could take at best, whatever XLA's dense path does) and XLA's own count of
   the bytes each compiled step accesses.

How a step is timed on a GPU (:func:`time_step`): steps enqueued back to back, as in a
model's decode loop, over copies of the inputs totalling at least :data:`L2_FLUSH_BYTES`
(so no step finds its cache in L2); the waited-for latency and the host's enqueue time per
call are reported beside it.

On a CPU the figures are CPU figures of the jnp reference path on a small configuration
(the Pallas interpreter is a correctness tool, not a fast path), and the script says so.
On a GPU it is sized to finish in well under 5 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kvstats_gpu._common import on_gpu
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import cache_bytes_per_token, dequantize_kv, quantize_kv
from kvstats_gpu.decode import decode_attention, dense_decode_attention

# Peak HBM bandwidth in bytes/s by jax device_kind (vendor data sheets).
PEAK_BANDWIDTH = {
    "NVIDIA H200": 4.8e12,
    "NVIDIA H100 80GB HBM3": 3.35e12,
    "NVIDIA H100 PCIe": 2.0e12,
    "NVIDIA H100 NVL": 3.9e12,
    "NVIDIA A100-SXM4-80GB": 2.039e12,
    "NVIDIA A100-SXM4-40GB": 1.555e12,
    "NVIDIA A100 80GB PCIe": 1.935e12,
    "NVIDIA A100-PCIE-40GB": 1.555e12,
    "NVIDIA L40S": 0.864e12,
    "NVIDIA L4": 0.3e12,
    "NVIDIA GeForce RTX 4090": 1.008e12,
    "NVIDIA GeForce RTX 3090": 0.936e12,
}


# Largest ||kernel - jnp reference|| / ||reference|| (all query heads' outputs) accepted for a
# decode step on the same cache. Both are float32 with IEEE products and differ in summation
# order only: 6.8e-7 in the interpreter (2026-12-02), 4.2e-7 to 6.1e-7 compiled on an H200
# (2026-12-04). Relative: at 32k-128k tokens an absolute 5e-5 let a 0.5-1% error pass
# (docs/gpu.md). tests/gpu/test_gpu_device.py uses the same bound.
AGREE_RTOL = 1e-4

# Largest ||dense baseline - float32 dense reference|| / ||reference|| accepted before a dense
# baseline's time counts: bf16 output rounding alone is up to 2^-9 per element (~2e-3 of the
# norm); a wrong scale or head mapping gives O(1). A baseline beyond it is "unavailable".
DENSE_RTOL = 2e-2

# The inputs of a timed step are cycled through copies totalling at least this many bytes,
# several times the L2 cache (H100 and H200: 50 MB enabled), so each step reads them from HBM.
L2_FLUSH_BYTES = 256 * 2 ** 20
# Steps enqueued per timed burst on a GPU (the host's enqueue overlaps the device's work;
# the burst's first dispatch and last wait are not overlapped: one of each per 128 steps).
BURST = 128
# ... but a burst is cut to about this many seconds of waited-for calls (a 5 ms step needs no
# overlap, and the bench must fit its time cap).
BURST_SECONDS = 0.02


def peak_bandwidth(device_kind: str) -> float | None:
    """Peak bandwidth for a device kind: the longest table name whose words occur as
    consecutive whole words of it (case-insensitive), else None. So an H20 is no H200, an A10
    no A100, and a bare "NVIDIA A100" (40 or 80 GB) none of the four A100s.

    Examples
    --------
    >>> peak_bandwidth("NVIDIA H200"), peak_bandwidth("NVIDIA H100 80GB HBM3 (SXM)"), peak_bandwidth("cpu")
    (4800000000000.0, 3350000000000.0, None)
    >>> peak_bandwidth("NVIDIA H20"), peak_bandwidth("NVIDIA A10"), peak_bandwidth("NVIDIA L4")
    (None, None, 300000000000.0)
    """
    padded = f" {' '.join(device_kind.lower().split())} "  # spaces at both ends: whole words only
    hits = [k for k in PEAK_BANDWIDTH if f" {' '.join(k.lower().split())} " in padded]
    return PEAK_BANDWIDTH[max(hits, key=len)] if hits else None


def _gqa_pallas(q: jax.Array, K: jax.Array, V: jax.Array, interpret: bool = False) -> jax.Array:
    # JAX's Pallas flash-decoding kernel (split-K, Triton) on q (H, G, d), K, V (H, N, d): ``mqa``, a
    # KV head per batch entry. Its ``gqa`` swaps (B, N, H, d) K, V to head-major in the timed step
    # (two transposes of the cache; referee RR, F1). block_k, k_splits: gqa's defaults, as before.
    from jax.experimental.pallas.ops.gpu import decode_attention as pallas_decode
    return pallas_decode.mqa(q, K, V, block_k=128, k_splits=16, interpret=interpret)


# The dense bf16 decode steps timed as baselines, ``fn(q, K, V)``, each on inputs in its own layout
# made outside the timed step: XLA's generic path (``implementation=None``: two matmuls, f32 logits
# in between) and cuDNN's fused attention on (B, T, heads, d) arrays, JAX's Pallas flash-decoding
# kernel on head-major ones (those in :data:`_HEAD_MAJOR_BASELINES`). Each is tried; one that fails
# to compile, run or agree is recorded as "unavailable: <reason>" (cuDNN needs a GPU with
# cuDNN; the Pallas kernel, Triton, which jax >= 0.11 deprecates). The fastest is the baseline.
DENSE_BASELINES: dict[str, Callable] = {
    "xla": jax.nn.dot_product_attention,
    "cudnn": lambda q, K, V: jax.nn.dot_product_attention(q, K, V, implementation="cudnn"),
    "pallas_gqa": _gqa_pallas,
}
# called on q (H, G, d), K, V (H, N, d) (the cache's layout); the others on (1, 1, HG, d), (1, N, H, d)
_HEAD_MAJOR_BASELINES = frozenset({"pallas_gqa"})


def rel_err(got: Any, want: Any) -> float:
    """``||got - want|| / ||want||`` over all elements (NaN if either has a NaN).

    Examples
    --------
    >>> rel_err(np.array([3.0, 4.5]), np.array([3.0, 4.0]))  # |(0, 0.5)| / |(3, 4)|
    0.1
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def n_copies(nbytes: int, gpu: bool = True) -> int:
    """Copies of a step's inputs (``nbytes`` each) that together reach :data:`L2_FLUSH_BYTES`
    (1 off a GPU, where the figures are CPU figures anyway).

    Examples
    --------
    >>> n_copies(35_127_296), n_copies(140_509_184), n_copies(536_870_912), n_copies(35_127_296, gpu=False)
    (8, 2, 1, 1)
    """
    return max(1, -(-L2_FLUSH_BYTES // max(1, int(nbytes)))) if gpu else 1


def input_copies(args: tuple, nbytes: int, gpu: bool = True) -> list[tuple]:
    """``args`` and copies of it (buffers of their own), :func:`n_copies` sets in all, for
    :func:`time_step` to cycle through (``nbytes``: the bytes of one set a step reads).

    Examples
    --------
    >>> sets = input_copies((jnp.ones(4),), L2_FLUSH_BYTES // 4)
    >>> len(sets), sets[1][0] is sets[0][0], bool((sets[1][0] == sets[0][0]).all())
    (4, False, True)
    """
    return [args] + [jax.tree.map(jnp.copy, args) for _ in range(n_copies(nbytes, gpu) - 1)]


def _compile_step(fn: Callable, args: tuple) -> tuple[Callable, float | None]:
    """``fn`` compiled by XLA for ``args``, and XLA's ``cost_analysis()`` "bytes accessed"
    (None where XLA gives none). Pallas kernels are custom calls XLA does not see into, so
    for a kernel's step the figure counts only the XLA operations around it.

    Examples
    --------
    >>> step, nbytes = _compile_step(lambda x: x + 1, (jnp.ones(1024, jnp.float32),))
    >>> float(step(jnp.ones(1024))[0]), nbytes  # 4 KiB read, 4 KiB written (XLA-CPU)
    (2.0, 8192.0)
    """
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, bytes_accessed(compiled.cost_analysis())


def bytes_accessed(cost: dict | list | None) -> float | None:
    """"bytes accessed" of an XLA cost analysis; None where there is none or it is negative
    (XLA-GPU's -1 for the cuDNN attention step on an H200, 2026-12-04).

    Examples
    --------
    >>> bytes_accessed({"bytes accessed": 8192.0}), bytes_accessed([{"bytes accessed": -1.0}]), bytes_accessed(None)
    (8192.0, None, None)
    """
    if isinstance(cost, (list, tuple)):  # one dict per program in older jax
        cost = cost[0] if cost else None
    nbytes = (cost or {}).get("bytes accessed")
    return None if nbytes is None or nbytes < 0 else float(nbytes)


def time_step(fn: Callable, arg_sets: list[tuple], *, reps: int, burst: int,
              check: Callable[[list], None] | None = None) -> dict[str, float]:
    """Median seconds per call of ``fn`` cycling through ``arg_sets`` (copies of one input).

    After a compile and a warm-up call on every set: ``"latency"``, one call waited for
    (dispatch and synchronisation included); ``"step"``, the time per call of a burst of
    calls enqueued back to back and waited for once (host dispatch overlapped, as in a
    decode loop); ``"enqueue"``, the host's share of that (the time to enqueue one call:
    when it is close to ``"step"`` the figure is host-bound, not device-bound). A burst
    has ``burst`` calls, fewer when that would take over :data:`BURST_SECONDS` at the
    waited-for latency (slow steps need no overlap); ``"burst"`` says how many. Medians over
    ``reps`` calls / bursts. ``check``, when given, is called after the timing with the
    outputs of the last burst (the timed outputs themselves, over every copy when the burst
    is at least as long as ``arg_sets``).

    Examples
    --------
    >>> t = time_step(jax.jit(lambda x: x + 1), [(jnp.ones(8),), (jnp.zeros(8),)], reps=3, burst=4)
    >>> sorted(t), all(v > 0 for v in t.values())
    (['burst', 'enqueue', 'latency', 'step'], True)
    """
    for args in arg_sets:
        jax.block_until_ready(fn(*args))
    jax.block_until_ready(fn(*arg_sets[0]))
    n = len(arg_sets)
    latency = []
    for r in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*arg_sets[r % n]))
        latency.append(time.perf_counter() - t0)
    lat = statistics.median(latency)
    burst = max(1, min(int(burst), int(BURST_SECONDS / lat)))
    step, enqueue = [], []
    for r in range(reps):
        t0 = time.perf_counter()
        outs = [fn(*arg_sets[(r * burst + i) % n]) for i in range(burst)]
        t1 = time.perf_counter()
        jax.block_until_ready(outs)
        step.append((time.perf_counter() - t0) / burst)
        enqueue.append((t1 - t0) / burst)
    if check is not None:
        check(outs)
    return {"step": statistics.median(step), "enqueue": statistics.median(enqueue), "latency": lat,
            "burst": burst}


def time_dense_baselines(q: jax.Array, K: jax.Array, V: jax.Array, *, reps: int, burst: int,
                         gpu: bool = True) -> dict[str, Any]:
    """Time each of :data:`DENSE_BASELINES` on ``q (HG, d)``, ``K, V (H, N, d)`` (bf16).

    Returns ``{"baselines": {name: ms or "unavailable: <reason>"}, "fastest": name or None,
    "time": time_step's dict of the fastest, "xla_bytes": XLA's bytes accessed by the
    "xla" step, "bytes": {name: XLA's bytes accessed by its step, None where it did not
    compile}}``. Each baseline's first output and its timed outputs must be within
    :data:`DENSE_RTOL` of :func:`~kvstats_gpu.decode.dense_decode_attention` (float32), else
    it is unavailable: a baseline that fails never aborts the bench.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> K = jnp.ones((1, 256, 64), jnp.bfloat16)
    >>> out = time_dense_baselines(jnp.ones((2, 64), jnp.bfloat16), K, K, reps=1, burst=1, gpu=False)
    >>> out["fastest"], out["baselines"]["cudnn"].startswith("unavailable: ")  # on a CPU
    ('xla', True)
    >>> out["bytes"]["xla"] >= 2 * K.nbytes, sorted(out["bytes"]) == sorted(DENSE_BASELINES)
    (True, True)
    """
    H, N, d, nbytes = *K.shape, 2 * K.size * K.dtype.itemsize + q.size * q.dtype.itemsize
    want = np.asarray(dense_decode_attention(q, K, V))
    # a layout's inputs made outside the timed steps (B = 1, one query position), when first asked for
    layouts = {True: lambda: (q.reshape(H, -1, d), K, V),
               False: lambda: (q[None, None], jnp.swapaxes(K, 0, 1)[None], jnp.swapaxes(V, 0, 1)[None])}
    sets, sets_head_major = [], None
    out: dict[str, Any] = {"baselines": {}, "fastest": None, "time": None, "xla_bytes": None,
                           "bytes": dict.fromkeys(DENSE_BASELINES)}

    def check(outs: list) -> None:
        err = max(rel_err(np.asarray(o, np.float32).reshape(want.shape), want) for o in outs)
        if not err <= DENSE_RTOL:  # a NaN fails too
            raise ValueError(f"output differs from the float32 dense reference by {err:.3g} > {DENSE_RTOL:g}")

    for name, fn in DENSE_BASELINES.items():
        if (head_major := name in _HEAD_MAJOR_BASELINES) is not sets_head_major:
            sets, sets_head_major = input_copies(layouts[head_major](), nbytes, gpu), head_major
        try:
            step, out["bytes"][name] = _compile_step(fn, sets[0])
            check([step(*sets[0])])
            t = time_step(step, sets, reps=reps, burst=burst, check=check)
        except Exception as exc:  # any failure leaves this baseline out, never the bench
            out["baselines"][name] = f"unavailable: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            continue
        out["baselines"][name] = 1e3 * t["step"]
        if name == "xla":
            out["xla_bytes"] = out["bytes"][name]
        if out["time"] is None or t["step"] < out["time"]["step"]:
            out["fastest"], out["time"] = name, t
    return out


def correctness_check(impl_note: str, impl: str = "pallas") -> dict[str, float]:
    """Kernels vs references on a small cache; raises AssertionError on a mismatch.

    ``impl`` is a Pallas backend (``"pallas"``, ``"mosaic"``, ``"triton"``: compiled on a
    GPU, interpreted elsewhere) or ``"reference"``; returns the relative errors
    (:func:`rel_err`, bound :data:`AGREE_RTOL`) by scheme.

    Examples
    --------
    >>> errs = correctness_check("jnp reference", impl="reference")  # doctest: +ELLIPSIS
    correctness (jnp reference): reference_KQV4_rel_err_vs_dense_on_dequantized = ...
    >>> sorted(errs), max(errs.values()) < 1e-5
    (['reference_KQV4_rel_err_vs_dense_on_dequantized', 'reference_QKQV3_rel_err_vs_dense_on_dequantized'], True)
    """
    interpret = not on_gpu()
    out = {}
    rng = np.random.default_rng(0)
    for name, bits in (("KQV", 4), ("QKQV", 3)):
        spec, params = make_cache_spec(name, bits, 128, seed=1)
        K, V = rng.normal(size=(2, 2, 300, 128)).astype(np.float32)
        q = rng.normal(size=(8, 128)).astype(np.float32)
        cache = quantize_kv(K, V, spec, params, impl=impl, interpret=interpret)
        got = np.asarray(decode_attention(q, cache, spec, params, impl=impl, interpret=interpret,
                                          block_tokens=64))
        ref = np.asarray(dense_decode_attention(q, *dequantize_kv(cache, spec, params), length=300))
        err = rel_err(got, ref)
        if not err <= AGREE_RTOL:
            raise AssertionError(f"{name} ({impl}): Pallas decode attention differs from the dense reference "
                                 f"by {err:.3g} (relative; bound {AGREE_RTOL:g})")
        out[f"{impl}_{name}{bits}_rel_err_vs_dense_on_dequantized"] = err
    print(f"correctness ({impl_note}): " + ", ".join(f"{k} = {v:.2e}" for k, v in out.items()))
    return out


def run(tokens: list[int], schemes: list[tuple[str, int | None]], n_kv_heads: int, group: int, dim: int,
        reps: int, impls: tuple[str, ...] = ("pallas",),
        on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Time one decode step per (length, scheme, impl) against the fastest dense bf16 step.

    Times are per step in a stream of steps over copies of the inputs (:func:`time_step`,
    :func:`n_copies`); GB/s = the bytes a step must read / that time.
    ``speedup_vs_dense`` is the fastest dense baseline's time (:func:`time_dense_baselines`,
    named in ``dense_baseline``, every baseline's time in ``dense_baselines_ms``) over the
    quantized one, ``speedup_vs_xla_dense`` the same against XLA's generic dense path;
    ``speedup_vs_dense_floor`` is ``dense_bytes / peak / quant time``, the quantized step
    against the least time dense attention could take (reading K, V and q once at peak
    bandwidth; on a GPU with a known peak), so a dense path slower than its floor does not
    flatter the ratio. ``dense_xla_bytes`` and ``quant_xla_bytes`` are XLA's count of the
    bytes each compiled step accesses (:func:`_compile_step`): a dense count far above
    ``dense_bytes`` says XLA's dense path copies or re-reads K and V (``dense_baselines_bytes``:
    every dense baseline's count, so one that copies K, V around its kernel shows too).
    ``impls``: Pallas backends to time on a GPU (``"pallas"``, ``"mosaic"``, ``"triton"``);
    off a GPU one row per scheme of the jnp reference path. ``on_row(row)`` is called as
    each row is measured (the command line prints and saves it at once, so a run cut short
    by a time limit keeps what it measured).

    Examples
    --------
    >>> (row,) = run([256], [("KQV", 4)], n_kv_heads=1, group=2, dim=64, reps=1)
    >>> row["scheme"], row["tokens"], row["cache_bytes_per_token"], row["ratio_to_fp16"], row["dense_baseline"]
    ('KQV@4', 256, 70, 0.2734375, 'xla')
    """
    gpu = on_gpu()
    impls = tuple(impls) if gpu else ("reference",)
    device = jax.devices()[0]
    peak = peak_bandwidth(device.device_kind) if gpu else None
    burst = BURST if gpu else 1  # a CPU step takes milliseconds: nothing to overlap
    rows = []
    key = jax.random.key(0)
    for n in tokens:
        k1, k2, k3, key = jax.random.split(key, 4)
        K = jax.random.normal(k1, (n_kv_heads, n, dim), jnp.bfloat16)
        V = jax.random.normal(k2, (n_kv_heads, n, dim), jnp.bfloat16)
        q = jax.random.normal(k3, (n_kv_heads * group, dim), jnp.bfloat16)
        # dense bf16 baselines at the same shape (B=1, one query position, GQA)
        dense_bytes = 2 * K.size * 2 + q.size * 2
        dense = time_dense_baselines(q, K, V, reps=reps, burst=burst, gpu=gpu)
        t_dense = dense["time"] or dict.fromkeys(("step", "latency", "enqueue", "burst"))
        t_xla = dense["baselines"].get("xla")
        d_ms = None if t_dense["step"] is None else 1e3 * t_dense["step"]
        ms = lambda v: None if v is None else 1e3 * v  # noqa: E731
        for (name, bits), impl in ((sb, i) for sb in schemes for i in impls):
            spec, params = make_cache_spec(name, bits, dim, seed=0)
            cache = quantize_kv(K, V, spec, params, impl=impl)
            acc = cache_bytes_per_token(spec, n_kv_heads)
            q_bytes = n * acc["bytes"]  # the codes and norms of the attended tokens
            quant_sets = input_copies((q, cache), q_bytes, gpu)
            step, quant_xla_bytes = _compile_step(lambda q, c: decode_attention(q, c, spec, params, impl=impl),
                                                 quant_sets[0])
            # on a GPU the timed outputs themselves (the last burst's, over the cache copies)
            # against the jnp reference on the same cache at the timed shape (the correctness
            # check before the timing runs at 300 tokens); the reference runs before the timing
            want = (np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
                    if gpu and impl != "reference" else None)
            errs: list[float] = []
            t = time_step(step, quant_sets, reps=reps, burst=burst,
                          check=None if want is None else lambda outs: errs.extend(rel_err(o, want) for o in outs))
            del quant_sets
            err = float(np.max(errs)) if errs else None  # np.max: a NaN is kept, not skipped
            t_q = t["step"]
            row = {"device": device.device_kind, "platform": device.platform, "tokens": n,
                   "kv_heads": n_kv_heads, "q_heads": n_kv_heads * group, "dim": dim,
                   "scheme": name if bits is None else f"{name}@{bits}", "path": impl if gpu else "jnp reference (CPU)",
                   "quant_ms": 1e3 * t_q, "dense_bf16_ms": d_ms, "dense_baseline": dense["fastest"],
                   "dense_baselines_ms": dense["baselines"], "dense_baselines_bytes": dense["bytes"],
                   "speedup_vs_dense": None if d_ms is None else d_ms / (1e3 * t_q),
                   "speedup_vs_xla_dense": t_xla / (1e3 * t_q) if isinstance(t_xla, float) else None,
                   "speedup_vs_dense_floor": None if peak is None else dense_bytes / peak / t_q,
                   "quant_bytes": q_bytes, "dense_bytes": dense_bytes,
                   "quant_xla_bytes": quant_xla_bytes, "dense_xla_bytes": dense["xla_bytes"],
                   "quant_GBps": q_bytes / t_q / 1e9,
                   "dense_GBps": None if d_ms is None else dense_bytes / d_ms / 1e6,
                   "quant_frac_peak": None if peak is None else q_bytes / t_q / peak,
                   "dense_frac_peak": None if peak is None or d_ms is None else dense_bytes / d_ms / 1e-3 / peak,
                   "quant_latency_ms": 1e3 * t["latency"], "dense_latency_ms": ms(t_dense["latency"]),
                   "quant_enqueue_ms": 1e3 * t["enqueue"], "dense_enqueue_ms": ms(t_dense["enqueue"]),
                   "quant_copies": n_copies(q_bytes, gpu), "dense_copies": n_copies(dense_bytes, gpu),
                   "quant_burst": t["burst"], "dense_burst": t_dense["burst"],
                   "cache_bytes_per_token": acc["bytes"], "fp16_bytes_per_token": acc["fp16_bytes"],
                   "ratio_to_fp16": acc["ratio_to_fp16"], "rel_err_vs_reference": err,
                   "agrees_with_reference": None if err is None else err <= AGREE_RTOL}
            rows.append(row)
            if on_row is not None:
                on_row(row)
            del cache
        del K, V
    return rows


def parse_scheme_arg(text: str) -> tuple[str, int | None]:
    """A ``--schemes`` entry ``NAME:BITS`` as ``(name, bits)``; a bare ``NAME`` (a fixed
    budget such as ``K4V2``) has ``bits = None``.

    Examples
    --------
    >>> parse_scheme_arg("KQV:4"), parse_scheme_arg("K4V2")
    (('KQV', 4), ('K4V2', None))
    """
    name, sep, bits = text.partition(":")
    if not name or (sep and not bits.isdigit()):
        raise ValueError(f"--schemes entries must be NAME:BITS with an integer BITS (e.g. KQV:4), or NAME for a "
                         f"fixed budget (e.g. K4V2); received {text!r}")
    return name, int(bits) if sep else None


def _frac(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _mb(v: float | None) -> str:
    return "n/a" if v is None else f"{v / 1e6:.4g} MB"


def _fmt(rows: list[dict[str, Any]]) -> str:
    cols = ["tokens", "scheme", "path", "quant_ms", "dense_bf16_ms", "dense_baseline", "speedup_vs_dense",
            "speedup_vs_xla_dense", "speedup_vs_dense_floor", "quant_GBps", "quant_frac_peak", "dense_GBps",
            "dense_frac_peak", "dense_bytes", "dense_xla_bytes", "quant_bytes", "quant_xla_bytes",
            "quant_latency_ms", "quant_enqueue_ms", "cache_bytes_per_token", "ratio_to_fp16", "rel_err_vs_reference"]
    cell = lambda v: "n/a" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows])


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m kvstats_gpu.bench --help``); returns the exit status:
    0, 1 when a backend failed its correctness check, 2 without a GPU under ``--require-gpu``
    (bad arguments exit with status 2 through argparse).

    Examples
    --------
    >>> try:
    ...     main(["--schemes", "KQV:four"])
    ... except SystemExit as exc:
    ...     print("exit", exc.code)
    exit 2
    """
    p = argparse.ArgumentParser(prog="python -m kvstats_gpu.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="32k tokens only (GPU) / the smallest CPU size")
    p.add_argument("--tokens", type=int, nargs="+", default=None, help="context lengths (default 32768 131072 "
                   "on a GPU, 2048 8192 on a CPU)")
    p.add_argument("--schemes", nargs="+", default=["KQV:4", "QKQV:4", "turboquant_mse:4"],
                   help="NAME:BITS entries, or NAME for a fixed budget such as K4V2 (default KQV:4 QKQV:4 "
                        "turboquant_mse:4)")
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--group", type=int, default=4, help="query heads per KV head")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--impl", nargs="+", default=["mosaic", "triton"],
                   choices=["pallas", "mosaic", "triton", "reference"],
                   help="Pallas backends to check and time (default: mosaic triton; on a CPU only the "
                        "correctness check uses them, through the interpreter); 'reference' times the jnp "
                        "path compiled by XLA (a GPU figure when both Pallas backends fail)")
    p.add_argument("--json", default=None, help="write the figures to this file")
    p.add_argument("--require-gpu", action="store_true",
                   help="exit with status 2 at once if jax sees no GPU (the runbook passes it: without a GPU the "
                        "figures would be CPU figures)")
    args = p.parse_args(argv)
    for flag, values in (("--tokens", args.tokens or []), ("--kv-heads", [args.kv_heads]),
                         ("--group", [args.group]), ("--reps", [] if args.reps is None else [args.reps])):
        if any(v < 1 for v in values):  # found before the correctness check, not after it
            p.error(f"{flag} must be positive integers; received {' '.join(map(str, values))}")
    try:  # bad --schemes entries are usage errors, found before any measurement
        schemes = [parse_scheme_arg(s) for s in args.schemes]
        for name, bits in schemes:
            make_cache_spec(name, bits, args.dim, seed=0)
    except (ValueError, TypeError) as exc:  # TypeError: a name that needs BITS given without
        p.error(str(exc))
    gpu = on_gpu()
    device = jax.devices()[0]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"kvstats_gpu benchmark, {stamp}, jax {jax.__version__}, device: {device.device_kind} ({device.platform}), "
          f"load average {os.getloadavg()[0]:.2f}")
    if not gpu and args.require_gpu:
        print(f"NO GPU: jax's default backend is {jax.default_backend()!r} and --require-gpu was given; "
              "nothing measured", file=sys.stderr)
        return 2
    peak = peak_bandwidth(device.device_kind) if gpu else None
    print("bytes counted: quantized = the cache's codes and norms of the attended tokens; dense = K and V in "
          "bf16 and the queries (intermediates such as the quantized step's per-split partials and the dense "
          "logits not counted); XLA's bytes accessed: its cost analysis of each compiled step (a Pallas "
          "kernel is a custom call it does not count); GB/s = bytes / median step time"
          + (f", a step timed in a stream of up to {BURST} enqueued back to back over copies of its inputs "
             f"totalling >= {L2_FLUSH_BYTES / 2 ** 20:.0f} MiB (so none is read from L2)" if gpu else
             " (CPU: one call at a time)")
          + (f"; peak HBM bandwidth of {device.device_kind}: {peak / 1e12:.3g} TB/s" if peak else ""))
    if not gpu:
        size = "at the sizes asked for" if args.tokens is not None else "on a small configuration"
        print(f"NOTE: no GPU. These are CPU figures of the jnp reference path {size}; "
              "they say nothing about GPU performance.")
    if args.tokens is not None:
        tokens = args.tokens
    elif gpu:
        tokens = [32768] if args.quick else [32768, 131072]
    else:
        tokens = [2048] if args.quick else [2048, 8192]
    reps = args.reps or (20 if gpu else 3)
    if not gpu and args.kv_heads == 8 and args.tokens is None:
        kv_heads = 2  # keep the CPU run to seconds
    else:
        kv_heads = args.kv_heads
    check, passed, failed = {}, [], {}
    for impl in args.impl:
        try:
            note = ("the jnp reference compiled by XLA" if impl == "reference" else f"compiled {impl} kernels"
                    if gpu else f"{impl} kernels in the Pallas interpreter on the CPU")
            check.update(correctness_check(note, impl))
            passed.append(impl)
        except Exception as exc:  # a compile failure fails this backend; the others still run
            failed[impl] = f"{type(exc).__name__}: {str(exc)[:2000]}"
            print(f"CORRECTNESS FAILURE ({impl}): {failed[impl]}", file=sys.stderr)
    rows: list[dict[str, Any]] = []

    def save(complete: bool) -> None:
        # rewritten after every step: a run killed by a time limit leaves what it measured
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"date": stamp, "jax": jax.__version__, "device": device.device_kind, "gpu": gpu,
                           "load_average": os.getloadavg()[0], "impls": args.impl, "correctness": check,
                           "failed": failed, "rows": rows, "complete": complete}, fh, indent=2)

    def on_row(row: dict[str, Any]) -> None:
        first = not any(r["tokens"] == row["tokens"] for r in rows)
        rows.append(row)
        g = lambda v, f=".4g": "n/a" if v is None else format(v, f)  # noqa: E731
        err, ok = row["rel_err_vs_reference"], row["agrees_with_reference"]  # verdicts first: the
        verdict = ("" if err is None else  # runbook's summary keeps a row's first 400 characters
                   f" [{'agrees' if ok else 'MISMATCH'}: ||out - reference|| / ||reference|| {err:.2e}"
                   f"{']' if ok else f' > {AGREE_RTOL:g}]'}") + (" HOST-BOUND (enqueueing a step takes "
                   "about as long as a step)" if gpu and row["quant_enqueue_ms"] >= 0.8 * row["quant_ms"] else "")
        print(f"measured {row['tokens']} tokens, {row['scheme']}, {row['path']}{verdict}: {row['quant_ms']:.4g} ms, "
              f"{row['quant_GBps']:.4g} GB/s ({_frac(row['quant_frac_peak'])} of peak); fastest dense bf16 "
              f"({row['dense_baseline']}) {g(row['dense_bf16_ms'])} ms, {g(row['dense_GBps'])} GB/s "
              f"({_frac(row['dense_frac_peak'])}); dense/quantized time {g(row['speedup_vs_dense'], '.3g')} "
              f"(XLA dense {g(row['speedup_vs_xla_dense'], '.3g')})"
              + ("" if row["speedup_vs_dense_floor"] is None else
                 f", dense byte floor at peak/quantized time {row['speedup_vs_dense_floor']:.3g}")
              + f"; XLA's bytes accessed: dense (XLA's path) {_mb(row['dense_xla_bytes'])} (floor {_mb(row['dense_bytes'])}), "
              f"quantized {_mb(row['quant_xla_bytes'])} (cache {_mb(row['quant_bytes'])})"
              f"; one step waited for {row['quant_latency_ms']:.4g} "
              f"ms (dense {g(row['dense_latency_ms'])}), host enqueue {row['quant_enqueue_ms']:.4g} ms/step",
              flush=True)
        if first:  # once per length, after its first row
            print(f"measured dense baselines at {row['tokens']} tokens (XLA's bytes accessed; floor "
                  f"{_mb(row['dense_bytes'])}): " + "; ".join(f"{k} {_mb(row['dense_baselines_bytes'][k])} " + (
                      f"{v:.4g} ms" if isinstance(v, float) else v[:160]) for k, v in row["dense_baselines_ms"].items())
                  + f"; fastest: {row['dense_baseline']}", flush=True)
        if row["agrees_with_reference"] is False:
            failed[f"{row['path']}@{row['tokens']}"] = (f"output differs from the jnp reference by "
                                                        f"{row['rel_err_vs_reference']:.3g} (relative) > "
                                                        f"{AGREE_RTOL:g}")
        save(complete=False)

    save(complete=not passed)
    if not passed:
        return 1
    run(tokens, schemes, kv_heads, args.group, args.dim, reps, tuple(passed), on_row=on_row)
    print(_fmt(rows))
    if gpu and rows and rows[0]["quant_frac_peak"] is None:
        print(f"(no peak bandwidth on record for {device.device_kind!r}: add it to PEAK_BANDWIDTH)")
    save(complete=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
