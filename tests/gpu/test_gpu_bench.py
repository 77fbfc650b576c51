import pytest

from kvstats_gpu import bench


def test_peak_bandwidth_table():
    assert bench.peak_bandwidth("NVIDIA H200") == 4.8e12  # NVIDIA H200 data sheet: 4.8 TB/s
    assert bench.peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert bench.peak_bandwidth("cpu") is None


def test_cpu_run_reports_consistent_figures():
    rows = bench.run([512], [("KQV", 4)], n_kv_heads=2, group=2, dim=64, reps=1)
    (row,) = rows
    assert row["tokens"] == 512 and row["scheme"] == "KQV@4"
    # 64-dim KQV at 4 bits per KV head: K 32+2, V 24+2 + 8+2 bytes, vs 2*2*64 in fp16
    assert row["cache_bytes_per_token"] == 2 * (34 + 36)
    assert row["ratio_to_fp16"] == pytest.approx(140 / 512)
    assert row["quant_ms"] > 0 and row["dense_bf16_ms"] > 0
    assert row["quant_GBps"] == pytest.approx(512 * 140 / (row["quant_ms"] * 1e-3) / 1e9)
    if row["platform"] == "cpu":
        assert row["quant_frac_peak"] is None and row["path"].startswith("jnp reference")
    table = bench._fmt(rows)
    assert table.splitlines()[0].startswith("| tokens | scheme | path | quant_ms")
