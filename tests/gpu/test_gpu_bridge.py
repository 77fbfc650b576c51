"""The typed bridge: a scheme's export (Scheme.export()) -> GPU cache spec and parameters,
parametrised over the scheme registry (no list of names here)."""

import numpy as np
import pytest

import kvstats
from kvstats.quant.registry import REGISTRY
from kvstats_gpu.bridge import gpu_schemes, make_cache_spec, spec_from_export, spec_from_scheme
from kvstats_gpu.codebook import StaticCodebook

GPU = [d for d in REGISTRY.values() if d.gpu]
NOT_GPU = [d for d in REGISTRY.values() if not d.gpu]


def _args(d, bits=3):
    """(bits, params) building scheme ``d`` at a mid budget."""
    if d.fixed_budget:
        return None, ({"key_bits": bits, "value_bits": 2} if "key_bits" in d.params else {})
    return max(d.min_bits, min(bits, d.max_bits)), {}


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("d", GPU, ids=lambda d: d.name)
@pytest.mark.parametrize("dim", [64, 96])  # 96: Hadamard pads to 128 coordinates
def test_spec_holds_exactly_the_exported_arrays(d, dim):
    bits, params = _args(d)
    scheme = kvstats.make_scheme(d.name, bits, dim, seed=3, **params)
    ex = scheme.export()
    spec, cp = spec_from_scheme(scheme)
    assert spec.dim == dim and spec.name == scheme.name
    for side, sx, signs, sketch in (("k", ex.key, cp.k_signs, cp.k_sketch), ("v", ex.value, cp.v_signs, cp.v_sketch)):
        assert getattr(spec, f"{side}_dpad") == sx.dim_padded
        assert getattr(spec, f"{side}_codebook") == StaticCodebook.from_arrays(sx.centroids, sx.boundaries)
        assert getattr(spec, f"{side}_bits") == sx.bits
        assert getattr(spec, f"{side}_m") == sx.m and getattr(spec, f"{side}_scale") == sx.sketch_scale
        assert _same(signs, None if sx.signs is None else sx.signs.astype(np.float32))
        assert _same(sketch, None if sx.sketch is None else sx.sketch.astype(np.float32))
    # make_cache_spec is the same draw from the name
    spec2, cp2 = make_cache_spec(d.name, bits, dim, seed=3, **params)
    assert spec2 == spec and all(_same(a, b) for a, b in zip(cp, cp2))


@pytest.mark.parametrize("d", NOT_GPU, ids=lambda d: d.name)
def test_schemes_without_a_gpu_export_are_refused(d):
    bits, params = _args(d)
    with pytest.raises(ValueError, match="GPU path supports") as err:
        make_cache_spec(d.name, bits, 64, **params)
    assert str(gpu_schemes()) in str(err.value)
    with pytest.raises(ValueError, match="GPU export"):
        spec_from_scheme(kvstats.make_scheme(d.name, bits, 64, **params))


def test_gpu_schemes_are_the_registrys():
    assert gpu_schemes() == [d.name for d in GPU]
    spec, _ = make_cache_spec("K3V2", None, 64)  # mixed, by its K{a}V{b} name
    assert (spec.k_bits, spec.v_bits) == (3, 2)


@pytest.mark.parametrize("name", ["K9V2", "K0V1", "K10V2", "KQ", ""])
def test_malformed_names_are_refused(name):
    # the old K\d+V\d+ pattern accepted K9V2 and K10V2
    with pytest.raises(ValueError, match=r"GPU path supports, one of \['KV'"):
        make_cache_spec(name, None, 64)


def test_exports_the_gpu_cache_cannot_hold_are_refused():
    with pytest.raises(TypeError, match="name must be a str"):
        make_cache_spec(4, 4, 64)
    with pytest.raises(ValueError, match="norm_dtype must be float16"):
        make_cache_spec("KQV", 4, 64, norm_dtype=np.float32)
    with pytest.raises(ValueError, match="multiple of 8"):
        make_cache_spec("KQV", 4, 64, m=12)
    with pytest.raises(ValueError, match="rotation must be 'hadamard' or 'identity'"):
        make_cache_spec("KQV", 4, 64, rotation="haar")
    with pytest.raises(ValueError, match=r"draws must be \(\)"):
        spec_from_scheme(kvstats.make_scheme("KQV", 4, 64, draws=(2,)))
    with pytest.raises(TypeError, match="scheme must be a kvstats Scheme"):
        spec_from_scheme("KQV")
    with pytest.raises(TypeError, match="ex must be a SchemeExport"):
        spec_from_export(kvstats.make_scheme("KQV", 4, 64))
