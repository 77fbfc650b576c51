"""Run by test_gpu_sharding.py in a subprocess with 4 CPU host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4 must be set before jax is imported).
Prints one line per check: "<name> <max abs difference>"."""

import os
import sys

import numpy as np

assert "xla_force_host_platform_device_count=4" in os.environ.get("XLA_FLAGS", "")
import jax  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _gpu_helpers import _kv, manual_spec  # noqa: E402

from kvstats_gpu.cache import quantize_kv  # noqa: E402
from kvstats_gpu.decode import decode_attention  # noqa: E402
from kvstats_gpu.sharding import shard_cache, sharded_decode_attention  # noqa: E402

assert len(jax.devices()) == 4, jax.devices()
print("devices", len(jax.devices()))
spec, params = manual_spec(64, 3, 2, 64, 64)  # prod keys and prod values: every accumulator
for length in (700, 300):  # 300 < capacity/2: the second sequence shard holds no valid token
    K, V, q = _kv(4, length, 64, 2, seed=length)
    cache = quantize_kv(K, V, spec, params, capacity=1024, impl="reference")
    single = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    if length == 700:
        heads = Mesh(np.array(jax.devices()), ("heads",))
        out = sharded_decode_attention(q, shard_cache(cache, heads), spec, params, heads, impl="reference")
        assert len(out.sharding.device_set) == 4
        print(f"heads4_len{length}", np.abs(np.asarray(out) - single).max())
    grid = Mesh(np.array(jax.devices()).reshape(2, 2), ("heads", "seq"))
    out = sharded_decode_attention(q, shard_cache(cache, grid, seq_axis="seq"), spec, params, grid,
                                   seq_axis="seq", impl="reference")
    print(f"heads2_seq2_len{length}", np.abs(np.asarray(out) - single).max())
# the Pallas kernel (interpret mode) inside shard_map, sequence over all 4 devices
seqm = Mesh(np.array(jax.devices()).reshape(1, 4), ("heads", "seq"))
out = sharded_decode_attention(q, cache, spec, params, seqm, seq_axis="seq", impl="pallas", interpret=True,
                               block_tokens=64)
print("pallas_seq4", np.abs(np.asarray(out) - single).max())  # d = 64: the Triton body
# the Mosaic body (d = 128) inside shard_map; 300 of 1024 tokens: two shards hold none
spec, params = manual_spec(128, 2, 2, 128, 128)
K, V, q = _kv(4, 300, 128, 2, seed=1)
cache = quantize_kv(K, V, spec, params, capacity=1024, impl="reference")
single = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
out = sharded_decode_attention(q, cache, spec, params, seqm, seq_axis="seq", impl="mosaic", interpret=True,
                               block_tokens=64)
print("mosaic_seq4", np.abs(np.asarray(out) - single).max())
