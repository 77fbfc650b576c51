"""Referee RC's findings F1, F4, F5 (kvstats_gpu): sharded decode compiles once per static
configuration; peak_bandwidth matches whole device names; rotate refuses rows whose rotation
would overflow the input dtype."""

import jax
import jax.monitoring
import numpy as np
import pytest
from jax.sharding import Mesh

from _gpu_helpers import _kv, manual_spec
from kvstats_gpu import bench, sharding
from kvstats_gpu.cache import quantize_kv
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.rotation import rotate, rotate_reference

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


@pytest.fixture
def counted(monkeypatch):
    """Counts of traces of the sharded body (decode_partials runs only while tracing) and of
    XLA backend compiles (jax's monitoring event, one per executable built)."""
    counts = {"traces": 0, "compiles": 0}
    inner = sharding.decode_partials

    def tracing_counter(*args, **kwargs):
        counts["traces"] += 1
        return inner(*args, **kwargs)

    def on_event(event, duration, **kwargs):
        if event == BACKEND_COMPILE:
            counts["compiles"] += 1

    monkeypatch.setattr(sharding, "decode_partials", tracing_counter)
    # a step compiled by an earlier test in this process would not retrace here
    cached = getattr(sharding, "_sharded_step", None)
    if cached is not None:
        cached.cache_clear()
    jax.monitoring.register_event_duration_secs_listener(on_event)
    yield counts
    jax.monitoring.unregister_event_duration_listener(on_event)


def test_sharded_decode_compiles_once_per_static_configuration(counted):
    # F1: a fresh shard_map closure under jax.jit on every call recompiled the step each time
    # (referee's p7.py: one backend compile on every later call with the same shapes)
    spec, params = manual_spec(64, 3, 2, 0, 64)
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("heads", "seq"))
    kw = dict(seq_axis="seq", impl="reference", block_tokens=64)
    outs = []
    for seed in (0, 1, 2):  # same shapes, new values: one trace and compile in all
        K, V, q = _kv(2, 40, 64, 2, seed=seed)
        cache = quantize_kv(K, V, spec, params, impl="reference")
        before = dict(counted)
        out = sharding.sharded_decode_attention(q, cache, spec, params, mesh, **kw)
        outs.append(np.asarray(out))
        if seed == 0:
            assert counted["traces"] == 1 and counted["compiles"] >= 1, counted
        else:
            assert counted == before, (seed, before, counted)
        # the cached step computes the call's own inputs, not the first call's
        np.testing.assert_allclose(outs[-1], np.asarray(decode_attention(q, cache, spec, params, impl="reference")),
                                   atol=1e-5)
    assert not np.allclose(outs[0], outs[1])
    # another static (block_tokens) is another step: traced once more
    sharding.sharded_decode_attention(q, cache, spec, params, mesh, seq_axis="seq", impl="reference",
                                      block_tokens=128)
    assert counted["traces"] == 2, counted


def test_sharded_decode_refuses_bad_statics_before_the_cache():
    spec, params = manual_spec(64, 3, 2, 0, 64)
    K, V, q = _kv(2, 10, 64, 2)
    cache = quantize_kv(K, V, spec, params, impl="reference")
    mesh = Mesh(np.array(jax.devices()[:1]), ("heads",))
    with pytest.raises(ValueError, match="impl"):
        sharding.sharded_decode_attention(q, cache, spec, params, mesh, impl="cuda")
    with pytest.raises(TypeError, match="interpret must be True, False or None"):
        sharding.sharded_decode_attention(q, cache, spec, params, mesh, interpret="yes")
    with pytest.raises((TypeError, ValueError), match="n_splits"):
        sharding.sharded_decode_attention(q, cache, spec, params, mesh, n_splits=[2])


def test_peak_bandwidth_matches_whole_names_only():
    # F4: substring matching gave an H20 the H200's 4.8 TB/s ('nvidia h20' in 'nvidia h200'),
    # an A10 the A100-SXM4-80GB's 2.039 TB/s, and a bare 'NVIDIA A100' one of four A100s
    for kind in ("NVIDIA H20", "NVIDIA A10", "NVIDIA A100", "NVIDIA H100", "H200", "cpu", "", "NVIDIA H2"):
        assert bench.peak_bandwidth(kind) is None, kind
    # every device on record gets its own figure, also inside a longer device kind
    for kind, value in bench.PEAK_BANDWIDTH.items():
        assert bench.peak_bandwidth(kind) == value
        assert bench.peak_bandwidth(kind.lower() + " (sxm)") == value
    assert bench.peak_bandwidth("NVIDIA  H200") == 4.8e12  # NVIDIA H200 data sheet: 4.8 TB/s
    assert bench.peak_bandwidth("NVIDIA L4") == 0.3e12 and bench.peak_bandwidth("NVIDIA L40S") == 0.864e12


ROTATE_IMPLS = [("reference", None), ("triton", True), ("mosaic", True)]


@pytest.mark.parametrize("impl,interpret", ROTATE_IMPLS)
def test_rotate_refuses_float16_rows_that_would_overflow(impl, interpret):
    # F5 (referee's p5.py): finite float16 rows of 10000 (norm 1.13e5) rotated to inf silently;
    # with signs +1 the whole norm lands on coordinate 0
    s = np.ones(128)
    x = np.full((16, 128), 10000, np.float16)
    with pytest.raises(ValueError, match=r"x's rows must have norm <= 65504 \(float16 max 65504.*"
                                         r"received a row of norm 113137"):
        rotate(x, s, impl=impl, interpret=interpret)
    with pytest.raises(ValueError, match="x's rows must have norm <= 65504"):
        rotate(x, s, inverse=True, impl=impl, interpret=interpret)
    # just under the limit: accepted, finite, and the float16 rounding of the float32 rotation
    ok = np.full((16, 128), 5780, np.float16)  # norm 65387 (coordinate 0 after rotation)
    y = np.asarray(rotate(ok, s, impl=impl, interpret=interpret))
    assert y.dtype == np.float16 and np.isfinite(y).all()
    ref = np.asarray(rotate_reference(ok.astype(np.float32), s))
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=2 ** -10, atol=1e-3 * 65504 * 2 ** -10)


def test_rotate_refuses_float32_rows_past_the_float32_accumulation():
    # the unscaled x·H is accumulated in float32: up to √d_pad times the row norm
    s = np.ones(128)
    under = np.full((1, 128), 2.6e36, np.float32)  # norm 2.94e37 <= 3.4e38/√128 = 3.01e37
    assert np.isfinite(np.asarray(rotate_reference(under, s))).all()
    row = np.full((1, 128), 1e37, np.float32)  # norm 1.13e38 <= float32 max, x·H's first 1.28e39
    with pytest.raises(ValueError, match=r"float32 max 3.40282e\+38, / √128"):
        rotate_reference(row, s)
    # under jit the check cannot run (documented): the old silent inf, not a wrong finite value
    y = np.asarray(jax.jit(lambda z: rotate_reference(z, s))(row))
    assert not np.isfinite(y[0, 0])
