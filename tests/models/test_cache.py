"""QuantizedCache: codes, chunking, window, token groups, memory (no model needed)."""

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache


def _kv(n, seed=0, heads=3, d=64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, heads, n, d, generator=g), torch.randn(1, heads, n, d, generator=g)


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("QKQV", 3), ("KV", 2), ("K4V2", None)])
def test_chunks_are_coded_with_the_same_randomness(name, bits):
    # Keys arriving in chunks (prefill, then decode steps) must decode exactly as if the
    # whole sequence had been coded at once: one rotation/sketch per layer and head.
    k, v = _kv(15)
    whole = QuantizedCache(name, bits, seed=7)
    K1, V1 = whole.update(k, v, layer_idx=0)
    parts = QuantizedCache(name, bits, seed=7)
    parts.update(k[:, :, :10], v[:, :, :10], layer_idx=0)
    parts.update(k[:, :, 10:11], v[:, :, 10:11], layer_idx=0)
    K2, V2 = parts.update(k[:, :, 11:], v[:, :, 11:], layer_idx=0)
    # Same codes; the float32 decode may differ in the last bits (vectorised fwht over
    # differently sized arrays, BLAS-dependent), so a tolerance of a few float32 ulps:
    # values reach |x| ~ 4, whose ulp is 4.8e-7 (1.2e-6 = 2.5 ulps seen with OpenBLAS).
    torch.testing.assert_close(K1, K2, rtol=5e-7, atol=1e-6)
    torch.testing.assert_close(V1, V2, rtol=5e-7, atol=1e-6)
    assert parts.get_seq_length() == 15 and parts.nbytes() == whole.nbytes()
    # ... and the codes really are lossy and, for randomized schemes, layer-specific
    # (per-layer seeds).
    assert not torch.equal(K1, k)
    if name != "KV":
        K_other, _ = whole.update(k, v, layer_idx=1)
        assert (K_other - K1).abs().max() > 1e-3


def test_keep_decoded_buffer_does_not_change_results():
    k, v = _kv(12)
    a, b = QuantizedCache("KQV", 3, seed=1), QuantizedCache("KQV", 3, seed=1, keep_decoded=False)
    for sl in (slice(0, 5), slice(5, 6), slice(6, 12)):
        Ka, Va = a.update(k[:, :, sl], v[:, :, sl], layer_idx=0)
        Kb, Vb = b.update(k[:, :, sl], v[:, :, sl], layer_idx=0)
    assert torch.equal(Ka, Kb) and torch.equal(Va, Vb)


def test_full_precision_window():
    k, v = _kv(10)
    cache = QuantizedCache("KV", 2, window=4)
    K, V = cache.update(k, v, layer_idx=0)
    layer = cache.layers[0]
    assert layer.n_coded == 6 and cache.get_seq_length() == 10
    assert torch.equal(K[:, :, 6:], k[:, :, 6:]) and torch.equal(V[:, :, 6:], v[:, :, 6:])
    assert not torch.equal(K[:, :, :6], k[:, :, :6])
    k1, v1 = _kv(1, seed=5)
    K, _ = cache.update(k1, v1, layer_idx=0)
    assert layer.n_coded == 7 and K.shape[-2] == 11 and torch.equal(K[:, :, -1:], k1)


def test_token_grouped_scheme_codes_whole_groups_only():
    k, v = _kv(20)
    cache = QuantizedCache("kivi", 2, group_size=8)
    K, _ = cache.update(k, v, layer_idx=0)
    assert cache.layers[0].n_coded == 16 and torch.equal(K[:, :, 16:], k[:, :, 16:])
    windowed = QuantizedCache("kivi", 2, window=4, group_size=8)
    windowed.update(k[:, :, :11], v[:, :, :11], layer_idx=0)
    assert windowed.layers[0].n_coded == 0          # 11 - 4 = 7 < one group
    windowed.update(k[:, :, 11:], v[:, :, 11:], layer_idx=0)
    assert windowed.layers[0].n_coded == 16         # 20 - 4 = 16 = two groups


def test_memory_matches_the_scheme_accounting():
    import kvstats

    n = 40
    k, v = _kv(n)
    cache = QuantizedCache("KQV", 4)
    cache.update(k, v, layer_idx=0)
    budget = kvstats.make_scheme("KQV", 4, 64).bits_per_coord(n)
    # bits per coordinate x (K and V) x coordinates per token / 8 = bytes per token
    expected = budget.total * 2 * 3 * 64 / 8
    assert cache.bytes_per_token() == pytest.approx(expected, rel=0.02)
    assert cache.fp16_bytes_per_token() == 2 * 2 * 3 * 64
    report = cache.memory_report()
    assert report["ratio_to_fp16"] < 0.3 and report["nbytes"] == cache.nbytes()


def test_bad_input():
    with pytest.raises(ValueError, match="name must be one of"):
        QuantizedCache("nonsense", 4)
    with pytest.raises(ValueError, match="bits must be an integer in"):
        QuantizedCache("KQV", 1)
    with pytest.raises(ValueError, match="window must be an integer in"):
        QuantizedCache("KV", 4, window=-1)
    with pytest.raises(ValueError, match="the cache is empty"):
        QuantizedCache("KV", 4).bytes_per_token()
    cache = QuantizedCache("KV", 4)
    cache.update(*_kv(3), layer_idx=0)
    with pytest.raises(NotImplementedError, match="cannot be cropped"):
        cache.crop(-1)
