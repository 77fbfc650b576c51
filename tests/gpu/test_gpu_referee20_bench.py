"""A referee's finding on the bench (critic_gpu20): XLA's own byte counts of both steps and the
quantized time against the dense byte floor at peak bandwidth, checked on the CPU."""

import pytest

from kvstats_gpu import bench


def test_bench_records_xla_bytes_and_the_dense_floor_ratio(monkeypatch, capsys, tmp_path):
    # CPU stand-ins: on_gpu True with a made-up peak, so that the floor column is computed
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    monkeypatch.setattr(bench, "peak_bandwidth", lambda kind: 1e11)
    monkeypatch.setattr(bench, "L2_FLUSH_BYTES", 1)
    (row,) = bench.run([256], [("KQV", 4)], n_kv_heads=1, group=2, dim=64, reps=1, impls=("reference",))
    dense_bytes = 2 * 256 * 64 * 2 + 2 * 64 * 2  # K and V bf16, 2 query heads
    assert row["dense_bytes"] == dense_bytes and row["quant_bytes"] == 256 * row["cache_bytes_per_token"]
    assert row["speedup_vs_dense_floor"] == pytest.approx(dense_bytes / 1e11 / (row["quant_ms"] * 1e-3))
    # XLA's count covers at least what the step must read (the cache, or K and V)
    assert row["dense_xla_bytes"] >= dense_bytes and row["quant_xla_bytes"] >= row["quant_bytes"]
    table = bench._fmt([row])
    assert "speedup_vs_dense_floor" in table and "dense_xla_bytes" in table
    # the command line prints them on the row's 'measured' line (the runbook's summary keeps it)
    monkeypatch.setattr(bench, "correctness_check", lambda note, impl: {f"{impl}_err": 0.0})
    out = tmp_path / "b.json"
    assert bench.main(["--impl", "reference", "--tokens", "256", "--kv-heads", "1", "--group", "2", "--dim", "64",
                       "--reps", "1", "--schemes", "KQV:4", "--json", str(out)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("measured"))
    assert "dense byte floor at peak/quantized time" in line and "XLA's bytes accessed: dense" in line
    assert "speedup_vs_dense_floor" in out.read_text()
    # off a GPU there is no peak: the floor column is n/a
    monkeypatch.setattr(bench, "on_gpu", lambda: False)
    (row,) = bench.run([256], [("KQV", 4)], n_kv_heads=1, group=2, dim=64, reps=1)
    assert row["speedup_vs_dense_floor"] is None and row["dense_xla_bytes"] > 0
