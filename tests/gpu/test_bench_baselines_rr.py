"""Referee RR, F1: each dense baseline of the bench reads K and V in the layout it wants, so no
transpose of the cache is timed with it (the Pallas baseline was JAX's ``gqa`` on (1, N, H, d)
K, V, which swapped both back to head-major inside the timed step), and XLA's bytes-accessed
count of every dense baseline is in the rows and the JSON. Checked on the CPU: the steps the
bench compiles are lowered for CUDA at the runbook's 32k-token shape."""

import functools
import json
import re

import jax
import jax.numpy as jnp
import numpy as np

from kvstats_gpu import bench
from kvstats_gpu.decode import dense_decode_attention

# StableHLO: "stablehlo.transpose %x, dims = [...] : (tensor<1x32768x8x128xbf16>) -> ..."
TRANSPOSE = re.compile(r"stablehlo\.transpose [^:]*: \(tensor<([0-9x]+)x[a-z0-9]+>\)")


def _transposed_kv(text, kv_size):
    """Shapes of the transposes in ``text`` whose operand is at least as large as K (or V)."""
    shapes = [tuple(int(v) for v in m.group(1).split("x")) for m in TRANSPOSE.finditer(text)]
    return [s for s in shapes if np.prod(s) >= kv_size]


def test_transpose_pattern_finds_the_old_gqa_layout_swap(lower_cuda):
    # the pattern itself, on what jax's gqa does to (B, N, H, d) K, V (so the test below can fail)
    S = jax.ShapeDtypeStruct
    text = lower_cuda(lambda K, V: (jnp.swapaxes(K, 1, 2) * 2, jnp.swapaxes(V, 1, 2) * 2),
                      S((1, 4096, 8, 128), jnp.bfloat16), S((1, 4096, 8, 128), jnp.bfloat16))
    assert _transposed_kv(text, 4096 * 8 * 128) == [(1, 4096, 8, 128)] * 2


def test_no_dense_baseline_transposes_k_or_v_in_its_timed_step(monkeypatch, lower_cuda, lowers_through):
    # the runbook's 32k shape: 8 KV heads, 4 query heads each, d = 128, bf16. The steps the bench
    # would compile (function and the very inputs it times) are captured, then lowered for CUDA.
    H, G, N, d = 8, 4, 32768, 128
    captured = {}

    def capture(fn, args):
        captured[fn] = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
        raise RuntimeError("captured")  # the baseline is then "unavailable": nothing is timed

    monkeypatch.setattr(bench, "_compile_step", capture)
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    K = jax.random.normal(k1, (H, N, d), jnp.bfloat16)
    V = jax.random.normal(k2, (H, N, d), jnp.bfloat16)
    q = jax.random.normal(k3, (H * G, d), jnp.bfloat16)
    out = bench.time_dense_baselines(q, K, V, reps=1, burst=1, gpu=False)
    assert out["fastest"] is None and len(captured) == len(bench.DENSE_BASELINES)
    lowered = {}
    for name, fn in bench.DENSE_BASELINES.items():
        try:
            lowered[name] = lower_cuda(fn, *captured[fn])
        except Exception:  # cuDNN's path may refuse to lower without a GPU; the other two must lower
            assert name == "cudnn"
    assert {"xla", "pallas_gqa"} <= set(lowered)
    for name, text in lowered.items():  # jax's gqa: [(1, 32768, 8, 128)] * 2
        assert _transposed_kv(text, N * H * d) == [], name
    # the Pallas kernel gets K and V as the bench holds them: (H, N, d) operands of its custom call
    pallas = lowered["pallas_gqa"]
    assert lowers_through(pallas, "triton")
    assert "tensor<8x32768x128xbf16>" in pallas and "tensor<1x32768x8x128xbf16>" not in pallas


def test_the_pallas_baseline_agrees_with_the_reference_through_the_bench(monkeypatch):
    # the head mapping (query head h*G + g on KV head h) and scale, through time_dense_baselines'
    # own input preparation: the Pallas interpreter stands in for the compiled kernel
    H, G, N, d = 2, 4, 256, 64
    rng = np.random.default_rng(3)
    K, V = (jnp.asarray(a, jnp.bfloat16) for a in rng.normal(size=(2, H, N, d)))
    q = jnp.asarray(2 * rng.normal(size=(H * G, d)), jnp.bfloat16)  # peaked softmax: a head swap shows
    got = np.asarray(bench._gqa_pallas(q.reshape(H, G, d), K, V, interpret=True), np.float32)
    want = np.asarray(dense_decode_attention(q, K, V))
    assert bench.rel_err(got.reshape(want.shape), want) < 1e-2  # bf16 output and partial sums
    # a query head on the wrong KV head is O(1) away (so the bound above can fail)
    swapped = np.asarray(dense_decode_attention(q, K[::-1], V[::-1]))
    assert bench.rel_err(swapped, want) > 0.3
    monkeypatch.setattr(bench, "DENSE_BASELINES", {
        "xla": jax.nn.dot_product_attention, "pallas_gqa": functools.partial(bench._gqa_pallas, interpret=True)})
    out = bench.time_dense_baselines(q, K, V, reps=1, burst=1, gpu=False)
    assert isinstance(out["baselines"]["pallas_gqa"], float), out["baselines"]["pallas_gqa"]
    assert set(out["bytes"]) == {"xla", "pallas_gqa"} and out["bytes"]["pallas_gqa"] is not None


def test_every_dense_baselines_bytes_are_in_the_rows_and_the_json(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(bench, "correctness_check", lambda note, impl: {f"{impl}_err": 0.0})
    path = tmp_path / "bench.json"
    assert bench.main(["--impl", "reference", "--tokens", "256", "--kv-heads", "1", "--group", "2", "--dim", "64",
                       "--reps", "1", "--schemes", "KQV:4", "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())["rows"]
    counts = row["dense_baselines_bytes"]
    assert sorted(counts) == sorted(bench.DENSE_BASELINES)
    # the xla step compiles on the CPU and reads at least K, V and q; its count is dense_xla_bytes
    assert counts["xla"] == row["dense_xla_bytes"] >= row["dense_bytes"] == 2 * 256 * 64 * 2 + 2 * 64 * 2
    # every timed baseline has a count; one that did not compile (on a CPU: cuDNN, the Triton
    # kernel) has none
    assert all(counts[k] is not None for k, ms in row["dense_baselines_ms"].items() if isinstance(ms, float))
    assert counts["cudnn"] is None and counts["pallas_gqa"] is None
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("measured dense baselines"))
    assert "XLA's bytes accessed" in line and f"xla {row['dense_xla_bytes'] / 1e6:.4g} MB" in line
