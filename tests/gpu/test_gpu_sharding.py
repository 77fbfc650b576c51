import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jax.sharding import Mesh

import jax
from kvstats_gpu.sharding import shard_cache, sharded_decode_attention


def test_sharded_equals_single_device_on_4_host_devices():
    # XLA reads the device count once, at import, so this runs in a fresh interpreter
    # (compiling unoptimized, as conftest.cpu_compiles_unoptimized does in this process)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
    script = Path(__file__).with_name("_multidevice_check.py")
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         cwd=Path(__file__).parents[2])
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split() for line in res.stdout.strip().splitlines())
    assert lines.pop("devices") == "4"
    assert set(lines) == {"heads4_len700", "heads2_seq2_len700", "heads2_seq2_len300", "pallas_seq4",
                          "mosaic_seq4"}
    for name, diff in lines.items():
        # only the float32 summation order differs (the combine is exact algebra)
        assert float(diff) < 1e-5, (name, diff)


def test_bad_mesh_arguments():
    from _gpu_helpers import _kv, manual_spec
    from kvstats_gpu.cache import quantize_kv
    spec, params = manual_spec(64, 3, 2, 0, 64)
    K, V, q = _kv(2, 10, 64, 2)
    cache = quantize_kv(K, V, spec, params, impl="reference")
    mesh = Mesh(np.array(jax.devices()[:1]), ("heads",))
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        sharded_decode_attention(q, cache, spec, params, "mesh")
    with pytest.raises(ValueError, match="seq_axis must be one of the mesh axes"):
        sharded_decode_attention(q, cache, spec, params, mesh, seq_axis="seq")
    with pytest.raises(ValueError, match=r"head_axis must be one of the mesh axes \['heads'\]; received 'x'"):
        shard_cache(cache, mesh, head_axis="x")
    with pytest.raises(ValueError, match="seq_axis must be one of the mesh axes"):
        shard_cache(cache, mesh, seq_axis="seq")
    with pytest.raises(TypeError, match="cache must be a QuantizedKVCache; received tuple"):
        shard_cache(tuple(cache), mesh)
    # an empty cache is refused, as by decode_attention (it gave NaN: l = 0 on every shard)
    with pytest.raises(ValueError, match="cache.length must be >= 1 to attend; received 0"):
        sharded_decode_attention(q, cache._replace(length=jax.numpy.asarray(0, jax.numpy.int32)), spec, params,
                                 mesh)
