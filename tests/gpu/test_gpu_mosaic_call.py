"""kvstats_gpu.mosaic_call: the compiled Mosaic GPU entry point that jax 0.11 requires.

jax 0.11.2 (read from its wheel, docs/gpu.md) lowers no ``pl.pallas_call`` with
``plgpu.CompilerParams`` and defaults Mosaic kernels to Warpgroup semantics. These tests pin
what the device image needs: compiled Mosaic kernels are ``plgpu.kernel`` calls
(``mpmd_map``), never a Mosaic ``pallas_call``, with Lane semantics; and the kernel path
itself (parallel axes as the CUDA grid, the sequential axis as an ``emit_pipeline``, the
grid position passed to the body, output blocks accumulating across the pipeline) computes
the right numbers, run through jax's Mosaic GPU interpreter on the CPU.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import kvstats
import kvstats_gpu._common as common
from kvstats_gpu import make_cache_spec, quantize_kv
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.mosaic_call import grid_call, lane_params
from kvstats_gpu.qjl import qjl_scores, qjl_sketch
from kvstats_gpu.rotation import rotate, rotate_reference

plgpu = pytest.importorskip("jax.experimental.pallas.mosaic_gpu")


def _kernel_primitives(jaxpr, out=None):
    """(primitive name, compiler-params class name) of every kernel call in ``jaxpr``."""
    from jax.extend import core as jcore
    out = [] if out is None else out
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("pallas_call", "mpmd_map"):
            out.append((eqn.primitive.name, type(eqn.params.get("compiler_params")).__module__,
                        getattr(eqn.params.get("compiler_params"), "lowering_semantics", None)))
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                if isinstance(sub, (jcore.ClosedJaxpr, jcore.Jaxpr)):
                    _kernel_primitives(getattr(sub, "jaxpr", sub), out)
    return out


def _small_cache(name="QKQV", bits=3, H=2, N=100, C=256, seed=1):
    spec, params = make_cache_spec(name, bits, 128, seed=0)
    K, V = np.random.default_rng(seed).normal(size=(2, H, N, 128)).astype(np.float32)
    return spec, params, quantize_kv(K, V, spec, params, impl="reference", capacity=C)


def test_compiled_mosaic_kernels_are_plgpu_kernels_with_lane_semantics():
    spec, params, cache = _small_cache()
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    S = np.random.default_rng(0).normal(size=(128, 128)).astype(np.float32)
    x = jnp.zeros((64, 128))
    calls = [(lambda z: rotate(z, np.ones(256), impl="mosaic", interpret=False), jnp.zeros((64, 256))),
             (lambda z: encode_packed(z, cb, impl="mosaic", interpret=False), x),
             (lambda z: decode_packed(z, cb, impl="mosaic", interpret=False), jnp.zeros((64, 4, 16), jnp.uint8)),
             (lambda z: qjl_sketch(z, S, impl="mosaic", interpret=False), x),
             (lambda q: qjl_scores(q, cache.k_signs, cache.k_snorms, S, impl="mosaic", interpret=False),
              jnp.zeros((2, 4, 128))),
             (lambda q: decode_attention(q, cache, spec, params, impl="mosaic", interpret=False), jnp.zeros((8, 128)))]
    lane = plgpu.LoweringSemantics.Lane
    for fn, arg in calls:
        kernels = _kernel_primitives(jax.make_jaxpr(fn)(arg).jaxpr)
        assert kernels, "no kernel call traced"
        # jax >= 0.11 cannot lower a pallas_call with Mosaic GPU parameters at all
        assert all(k[0] == "mpmd_map" and "mosaic_gpu" in k[1] and k[2] == lane for k in kernels), kernels
    # the Triton backend and the interpreter still go through pl.pallas_call
    kernels = _kernel_primitives(jax.make_jaxpr(lambda z: encode_packed(z, cb, impl="triton", interpret=False))(x).jaxpr)
    assert [k[0] for k in kernels] == ["pallas_call"] and "triton" in kernels[0][1]
    kernels = _kernel_primitives(jax.make_jaxpr(lambda z: encode_packed(z, cb, impl="mosaic", interpret=True))(x).jaxpr)
    assert [k[0] for k in kernels] == ["pallas_call"]


def test_lane_semantics_is_passed_explicitly(monkeypatch):
    # jax 0.10 defaults to Lane, 0.11 to Warpgroup: the argument must be there whatever the default
    seen = []

    def recorder(**kwargs):
        seen.append(kwargs)
        return kwargs

    monkeypatch.setattr(plgpu, "CompilerParams", recorder)
    lane_params(("parallel", "sequential"))
    assert seen == [{"dimension_semantics": ("parallel", "sequential"),
                     "lowering_semantics": plgpu.LoweringSemantics.Lane}]


def test_grid_call_rejects_bad_arguments():
    kw = dict(out_shape=jax.ShapeDtypeStruct((64, 32), jnp.float32), in_specs=[], interpret=True, name="k",
              out_specs=pl.BlockSpec((64, 32), lambda i, j: (i, 0)))
    with pytest.raises(ValueError, match=r"backend must be one of \['mosaic', 'triton'\]"):
        grid_call(lambda o: None, "cuda", grid=(1, 1), **kw)
    with pytest.raises(ValueError, match="dimension_semantics must have one entry per grid axis \\(2\\)"):
        grid_call(lambda o: None, "mosaic", grid=(1, 1), dimension_semantics=("parallel",), **kw)
    with pytest.raises(ValueError, match=r"dimension_semantics must be one of \['parallel', 'sequential'\]"):
        grid_call(lambda o: None, "mosaic", grid=(1, 1), dimension_semantics=("parallel", "arbitrary"), **kw)


def test_program_ids_in_the_interpreter():
    def body(ids, o_ref):
        o_ref[...] = jnp.full(o_ref.shape, 10 * ids[0] + ids[1], jnp.int32)

    f = grid_call(body, "mosaic", out_shape=jax.ShapeDtypeStruct((2, 3, 8), jnp.int32), grid=(2, 3), in_specs=[],
                  out_specs=pl.BlockSpec((None, None, 8), lambda i, j: (i, j, 0)), interpret=True, name="ids",
                  program_ids=True)
    np.testing.assert_array_equal(np.asarray(f())[:, :, 0], [[0, 1, 2], [10, 11, 12]])


@pytest.fixture
def mosaic_gpu_interpreter(monkeypatch):
    """Run compiled-path Mosaic kernels (plgpu.kernel) through jax's Mosaic GPU interpreter on
    the CPU. That interpreter has no rule for ``plgpu.load``, so the bodies use plain ref
    loads (``KernelOps(mosaic=False)``): the arithmetic is the lowered arithmetic, the grid,
    pipeline and block copies are the compiled path's."""
    params_cls = getattr(plgpu, "InterpretGPUParams", None)
    if params_cls is None:
        params_mod = pytest.importorskip("jax._src.pallas.mosaic_gpu.interpret.params")
        params_cls = params_mod.InterpretGPUParams
    kernel = plgpu.kernel

    def interpreted(*args, **kwargs):
        return kernel(*args, **dict(kwargs, interpret=params_cls()))

    monkeypatch.setattr(plgpu, "kernel", interpreted)
    monkeypatch.setattr(common.KernelOps, "__init__", lambda self, mosaic: setattr(self, "mosaic", False))
    jax.clear_caches()  # traces made with the real plgpu.kernel must not be reused, nor these kept
    yield
    jax.clear_caches()


def test_compiled_path_rotation_in_the_mosaic_gpu_interpreter(mosaic_gpu_interpreter):
    # d = 256: a 2-D parallel grid (row blocks x two 128-column blocks), both mapped to
    # plgpu.kernel's named axes; a pipeline with no sequential axis
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 256)).astype(np.float32)
    s = np.where(rng.random(256) < 0.5, -1.0, 1.0)
    for inverse in (False, True):
        got = rotate(x, s, inverse=inverse, impl="mosaic", interpret=False)
        np.testing.assert_allclose(np.asarray(got), np.asarray(rotate_reference(x, s, inverse=inverse)), atol=1e-5)


def test_compiled_path_decode_attention_in_the_mosaic_gpu_interpreter(mosaic_gpu_interpreter):
    # the sequential block axis as emit_pipeline's grid, the grid position passed to the body,
    # output blocks resident across the pipeline (one slot): 2 heads x 2 splits x 2 blocks of
    # 64 tokens; 100 valid tokens, so split 1 is empty and block 1 of split 0 partly masked
    spec, params, cache = _small_cache()
    q = np.random.default_rng(2).normal(size=(8, 128)).astype(np.float32)
    got = decode_attention(q, cache, spec, params, impl="mosaic", interpret=False, block_tokens=64, n_splits=2)
    want = decode_attention(q, cache, spec, params, impl="reference")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)
