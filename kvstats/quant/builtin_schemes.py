"""The built-in schemes: one :class:`~kvstats.quant.schemedef.SchemeDef` each, with its
builder and its expected-bits formula (:data:`ENTRIES`; :mod:`kvstats.quant.registry`
serves them by name). Their names, order and one-line summaries are
:mod:`kvstats.quant.catalog`'s, which the command's ``--help`` reads without numpy.

(Over ~330 lines as one idea: the table of the built-ins, one entry and its expected-bits
formula per scheme; it grows by a few lines with every scheme added.)

Each parameter's constant default is written once, in its entry's ``defaults``
(:class:`~kvstats.quant.schemedef.SchemeDef`): :func:`kvstats.make_scheme` hands the
builder the parameters with them filled in, as the entry's methods hand its formulas, so a
builder or formula reads ``params["rotation"]``; defaults that depend on the bits or d (qjl's
``m = n·d``, klt's ``rank = d``) are the builder's own ``params.get``.

``expected_bits`` is written from the definitions (docs/qjl.md, docs/theory.md: a norm is
16 bits in float16, a 1-bit QJL residual with ``m`` rows stores ``m`` sign bits and a
norm, a Hadamard rotation codes ``d_pad`` coordinates, ...), independently of the coders'
own ``stored_bits``, so that the test suite can hold one against the other.

The deployed formats are fixed-budget entries named as their engines name them: llama.cpp's
``q8_0``, ``q4_0``, ``q4_1``, ``q5_0``, ``q5_1`` (:mod:`kvstats.quant.blockfmt`), vLLM's
``fp8_e4m3``, ``fp8_e5m2`` (:mod:`kvstats.quant.fp8`), ``mxfp4`` and ``nvfp4``
(:mod:`kvstats.quant.microscaling`); ``klt`` is the transform coder of
:mod:`kvstats.quant.klt` (docs/formats.md). ``coded_dim`` says how many coordinates a
scheme's codes spend their bits on.

``KQV``/``QKQV`` follow D'Alberto (2026); ``turboquant_mse``/``turboquant_prod`` expose
the rotation and sketch settings of TurboQuant (Zandieh et al., 2025) directly, so
``QKQV`` with default settings is ``turboquant_prod`` (one builder), ``KV`` is
``turboquant_mse`` with ``rotation="identity"`` and ``K{a}V{a}`` is ``turboquant_mse`` at
``a`` bits (declared as each entry's ``codes_as``, which a sweep reads to refuse such a pair).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from kvstats._checks import check_int
from kvstats.quant.catalog import BLOCK_TYPES, FP8_FORMATS, SUMMARIES
from kvstats.quant.schemedef import _GROUP_SIZE, SchemeDef

if TYPE_CHECKING:
    from kvstats.quant.coder import Coder

__all__ = ["ENTRIES"]

_FP16_BITS = 16
_IDENTITY_BITS = 32   # identity stores float32 values
_FP32_BITS = 32
_KLT_GROUP = 1024     # klt's default block: two halves of 512 tokens calibrate each other
# microscaling: block size, scale bits per block, float32 scale per head
_MX_TYPES = {"mxfp4": (32, 8, False), "nvfp4": (16, 8, True)}


# --------------------------------------------------------------------------- builders
# Each gets ``params`` with its entry's defaults filled in (make_scheme fills them).
def _mse(bits: int, dim: int, rotation: str, rng, draws, params, name: str) -> Coder:
    from kvstats.quant.mse import MSEQuantizer

    return MSEQuantizer(dim, bits, rotation=rotation, seed=rng, draws=draws,
                        norm_dtype=params["norm_dtype"], name=name)


def _prod(bits: int, dim: int, rng, draws, params, name: str) -> Coder:
    from kvstats.quant.prod import ProdQuantizer

    return ProdQuantizer(dim, bits, rotation=params["rotation"], sketch=params["sketch"],
                         m=params.get("m"), seed=rng, draws=draws, norm_dtype=params["norm_dtype"],
                         name=name)


def _rotation(params: Mapping[str, Any]) -> str:
    return params["rotation"]


def _build_kv(bits, dim, params, key_rng, value_rng, draws):
    return bits, _mse(bits, dim, "identity", key_rng, draws, params, "K"), \
        _mse(bits, dim, "identity", value_rng, draws, params, "V")


def _build_turboquant_mse(bits, dim, params, key_rng, value_rng, draws):
    rot = _rotation(params)
    return bits, _mse(bits, dim, rot, key_rng, draws, params, "K"), \
        _mse(bits, dim, rot, value_rng, draws, params, "V")


def _build_kqv(bits, dim, params, key_rng, value_rng, draws):
    return bits, _mse(bits, dim, _rotation(params), key_rng, draws, params, "K"), \
        _prod(bits, dim, value_rng, draws, params, "V")


def _build_prod(bits, dim, params, key_rng, value_rng, draws):
    return bits, _prod(bits, dim, key_rng, draws, params, "K"), \
        _prod(bits, dim, value_rng, draws, params, "V")


def _build_qjl(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.qjl_keys import QJLKeyQuantizer
    from kvstats.quant.uniform import UniformTokenCoder

    m = check_int(params.get("m", bits * dim), "m", low=1)
    coder = QJLKeyQuantizer(dim, m, sketch=params["sketch"], n_outliers=params["n_outliers"],
                            outlier_m=params.get("outlier_m"), group_size=params["group_size"],
                            seed=key_rng, draws=draws, norm_dtype=params["norm_dtype"])
    value_bits = check_int(params.get("value_bits", bits), "value_bits", low=1, high=8)
    group = check_int(params.get("value_group_size", dim), "value_group_size", low=1)
    return bits, coder, UniformTokenCoder(value_bits, dim, group)


def _build_kivi(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.uniform import KIVIKeyCoder, KIVIValueCoder

    group_size, residual = params["group_size"], params["residual"]
    return bits, KIVIKeyCoder(bits, dim, group_size, residual), \
        KIVIValueCoder(bits, dim, group_size, residual)


def _check_mixed_sides(params: Mapping[str, Any]) -> None:
    """'mixed' has no default widths: a side not given is a ValueError naming it (it was a
    KeyError where the sweep's config asks :func:`_mixed_codes_as`, a TypeError elsewhere)."""
    missing = [side for side in ("key_bits", "value_bits") if params.get(side) is None]
    if missing:
        raise ValueError(f"scheme 'mixed' needs key_bits and value_bits, each an integer in [1, 8] "
                         f"(e.g. params {{'key_bits': 4, 'value_bits': 2}}, or the name 'K4V2'); "
                         f"received no {' and no '.join(missing)}")


def _build_mixed(bits, dim, params, key_rng, value_rng, draws):
    _check_mixed_sides(params)
    key_bits = check_int(params.get("key_bits"), "key_bits", low=1, high=8)
    value_bits = check_int(params.get("value_bits"), "value_bits", low=1, high=8)
    mean_bits = (key_bits + value_bits) / 2
    if bits is not None and bits != mean_bits:
        raise ValueError(f"bits for mixed precision K{key_bits}V{value_bits} must be None "
                         f"or their mean {mean_bits}; received {bits}")
    rot = _rotation(params)
    return mean_bits, _mse(key_bits, dim, rot, key_rng, draws, params, "K"), \
        _mse(value_bits, dim, rot, value_rng, draws, params, "V")


def _build_identity(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.coder import IdentityCoder

    # it records no budget; make_scheme refuses one other than its coders' 32 bits (a
    # cache's rows labelled "identity:4" holding 32 bits), as for any such scheme
    return None, IdentityCoder(dim), IdentityCoder(dim)


def _fixed_bits(name: str, nominal: int, bits: int | None) -> int:
    if bits is not None and bits != nominal:
        raise ValueError(f"bits for {name} must be None or {nominal} (fixed by the format); "
                         f"received {bits}")
    return nominal


def _build_block(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.blockfmt import BlockTypeCoder

    bits = _fixed_bits(fmt, BLOCK_TYPES[fmt][0], bits)
    return bits, BlockTypeCoder(fmt, dim), BlockTypeCoder(fmt, dim)


def _build_fp8(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.fp8 import FP8Coder

    bits = _fixed_bits(fmt, 8, bits)
    return bits, FP8Coder(fmt, dim, params["scale"]), FP8Coder(fmt, dim, params["scale"])


def _build_mx(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.microscaling import MXCoder

    bits = _fixed_bits(fmt, 4, bits)
    # nvfp4's scale (mxfp4 takes none: its per-block scales are all it stores)
    return bits, MXCoder(fmt, dim, **params), MXCoder(fmt, dim, **params)


def _build_klt(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.klt import KLTCoder

    rank, group = params.get("rank"), params["group_size"]
    return bits, KLTCoder(bits, dim, rank, group, name="K"), KLTCoder(bits, dim, rank, group, name="V")


# --------------------------------------------------------------------------- expected bits
# Each returns (key bits, value bits) stored for n tokens of dimension d, from the
# definitions: n-bit Lloyd–Max codes of the d_pad rotated coordinates and one norm per
# vector; TurboQuant-prod adds m residual sign bits and a residual norm; fp16 scale and
# zero per uniform group; KIVI's window holds R = min(residual, N) tokens in fp16.
def _d_pad(dim: int, rotation: str) -> int:
    return 1 << (dim - 1).bit_length() if rotation == "hadamard" else dim


def _norm_bits(params: Mapping[str, Any]) -> int:
    return 8 * np.dtype(params["norm_dtype"]).itemsize


def _mse_bits(b: int, coded: int, n: int, params) -> float:
    return n * (b * coded + _norm_bits(params))


def _prod_bits(b: int, dim: int, n: int, params) -> float:
    coded = _d_pad(dim, _rotation(params))
    m = params.get("m") or coded
    return n * ((b - 1) * coded + m + 2 * _norm_bits(params))


def _kv_bits(bits, dim, n, params):
    return _mse_bits(bits, dim, n, params), _mse_bits(bits, dim, n, params)


def _turboquant_mse_bits(bits, dim, n, params):
    coded = _d_pad(dim, _rotation(params))
    return _mse_bits(bits, coded, n, params), _mse_bits(bits, coded, n, params)


def _kqv_bits(bits, dim, n, params):
    coded = _d_pad(dim, _rotation(params))
    return _mse_bits(bits, coded, n, params), _prod_bits(bits, dim, n, params)


def _prod_scheme_bits(bits, dim, n, params):
    return _prod_bits(bits, dim, n, params), _prod_bits(bits, dim, n, params)


def _qjl_bits(bits, dim, n, params):
    m = params.get("m", bits * dim)
    outliers = params["n_outliers"]
    key = n * (m + _norm_bits(params))
    if outliers:
        groups = math.ceil(n / params["group_size"])
        index_bits = math.ceil(math.log2(dim))
        key += n * (params.get("outlier_m") or m) + n * _norm_bits(params) + groups * outliers * index_bits
    value_bits = params.get("value_bits", bits)
    value_groups = math.ceil(dim / params.get("value_group_size", dim))
    return key, n * (value_bits * dim + 2 * _FP16_BITS * value_groups)


def _kivi_bits(bits, dim, n, params):
    g = params["group_size"]
    window = min(params["residual"], n)
    q = n - window
    key = bits * q * dim + 2 * _FP16_BITS * math.ceil(q / g) * dim + _FP16_BITS * window * dim
    value = bits * q * dim + 2 * _FP16_BITS * q * math.ceil(dim / g) + _FP16_BITS * window * dim
    return key, value


def _mixed_bits(bits, dim, n, params):
    _check_mixed_sides(params)
    coded = _d_pad(dim, _rotation(params))
    return (_mse_bits(params["key_bits"], coded, n, params),
            _mse_bits(params["value_bits"], coded, n, params))


def _identity_bits(bits, dim, n, params):
    return _IDENTITY_BITS * n * dim, _IDENTITY_BITS * n * dim


def _block_bits(fmt, bits, dim, n, params):
    # llama.cpp: per block of 32 coordinates, 32 codes and `fields` fp16 numbers
    code, fields = BLOCK_TYPES[fmt]
    side = n * (code * dim + fields * _FP16_BITS * dim // 32)
    return side, side


def _fp8_bits(bits, dim, n, params):
    # one byte per coordinate, one float32 scale per head
    return 8 * n * dim + _FP32_BITS, 8 * n * dim + _FP32_BITS


def _mx_bits(fmt, bits, dim, n, params):
    # 4-bit E2M1 elements, an 8-bit scale per block, nvfp4's float32 scale per head
    block, scale_bits, per_head = _MX_TYPES[fmt]
    side = n * (4 * dim + scale_bits * dim // block) + _FP32_BITS * per_head
    return side, side


def _klt_bits(bits, dim, n, params):
    # min(n·d, 8·rank) code bits per vector; per half of each block of group_size tokens
    # (two per block, at least one block) a float16 rank×d basis, mean and rank scales
    # and a byte of allocation per axis
    rank = params.get("rank") or dim
    halves = 2 * max(1, n // params["group_size"])
    codes = min(bits * dim, 8 * rank) * n
    side = halves * (_FP16_BITS * (rank * dim + dim + rank) + 8 * rank)
    return codes + side, codes + side


# --------------------------------------------------------------------------- the table
def _always(params: Mapping[str, Any]) -> bool:
    return True


def _never(params: Mapping[str, Any]) -> bool:
    return False


def _tensor_scale(instead: str, params: Mapping[str, Any]) -> str:
    """One scale per call couples the trials coded together: what to use instead, or ""."""
    return instead if params["scale"] == "tensor" else ""


# the settings each format takes instead of scale="tensor" (nvfp4 takes no static scale)
_FP8_PER_TRIAL = partial(_tensor_scale, "scale='head' (the default) or a static scale=<float>")
_NVFP4_PER_TRIAL = partial(_tensor_scale, "scale='head' (the default)")


def _scale_over_tokens(params: Mapping[str, Any]) -> bool:
    # "head" and "tensor" take their scale from every token a call codes; a float is static
    return isinstance(params["scale"], str)


def _rotated(params: Mapping[str, Any]) -> bool:
    return _rotation(params) != "identity"


def _all_coords(dim: int, params: Mapping[str, Any]) -> int:
    return dim


def _rotated_coords(dim: int, params: Mapping[str, Any]) -> int:
    return _d_pad(dim, _rotation(params))


def _klt_coords(dim: int, params: Mapping[str, Any]) -> int:
    rank = params.get("rank")
    return dim if rank is None else min(rank, dim)


# Which entries code as another (SchemeDef.codes_as: the same coders, the same draws for one
# seed), each written beside the builders that make it so: _build_kv is _build_turboquant_mse
# with the rotation fixed to identity; _build_mixed with key_bits = value_bits = a is
# _build_turboquant_mse at a bits (one rotation setting for both sides, key_rng to keys).
# tests/sweep/test_scheme_aliases.py codes every declared pair with one seed to the same bits.
def _kv_codes_as(params: Mapping[str, Any]) -> tuple[str, dict[str, Any], None]:
    return "turboquant_mse", {**params, "rotation": "identity"}, None


def _mixed_codes_as(params: Mapping[str, Any]) -> tuple[str, dict[str, Any], int] | None:
    _check_mixed_sides(params)
    if params.get("key_bits") != params.get("value_bits"):
        return None
    sides = {k: v for k, v in params.items() if k not in ("key_bits", "value_bits")}
    return "turboquant_mse", sides, params["key_bits"]


# the type a number given for each numeric parameter is written as (SchemeDef.canonical:
# scale = 1 and scale = 1.0 are one setting, one cell id); the others are strings
_PARAM_TYPES = {"scale": float, **dict.fromkeys(("m", "n_outliers", "outlier_m", "group_size", "value_bits",
                                                 "value_group_size", "residual", "key_bits", "rank"), int)}


def _entry(name: str, defaults: Mapping[str, Any] = MappingProxyType({}), **fields: Any) -> SchemeDef:
    """A built-in entry, its summary the catalog's, its numeric parameters' types declared."""
    types = {key: kind for key, kind in _PARAM_TYPES.items() if key in fields["params"]}
    return SchemeDef(name=name, summary=SUMMARIES[name], defaults=MappingProxyType(dict(defaults)),
                     param_types=MappingProxyType(types), **fields)


# the constant defaults, each written here once (norm_dtype by name: the key a sweep's
# scheme identity compares, kvstats.quant.registry.resolved_scheme)
_NORM = {"norm_dtype": "float16"}
_ROTATED = {"rotation": "hadamard", **_NORM}
_VECTOR_DEFAULTS = {**_ROTATED, "sketch": "gaussian"}
_VECTOR = frozenset({*_VECTOR_DEFAULTS, "m"})
_HEAD_SCALE = {"scale": "head"}
#: Every built-in entry (their order is the catalog's: kvstats.quant.registry.BUILTIN).
ENTRIES = (
    _entry("KV", params=frozenset(_NORM), defaults=_NORM, min_bits=1, max_bits=8, fixed_budget=False,
           token_group_param=None, gpu=True, key_theory="mse", build=_build_kv, _randomized=_never,
           _bits=_kv_bits, _coded=_all_coords, _codes_as=_kv_codes_as),
    _entry("KQV", params=_VECTOR, defaults=_VECTOR_DEFAULTS, min_bits=2, max_bits=8, fixed_budget=False,
           token_group_param=None, gpu=True, key_theory="mse", build=_build_kqv, _randomized=_always,
           _bits=_kqv_bits, _coded=_rotated_coords, _key_rotated=_rotated),
    *(_entry(name, params=_VECTOR, defaults=_VECTOR_DEFAULTS, min_bits=2, max_bits=8,
             fixed_budget=False, token_group_param=None, gpu=True, key_theory="prod", build=_build_prod,
             _randomized=_always, _bits=_prod_scheme_bits, _coded=_rotated_coords, _key_rotated=_rotated)
      for name in ("QKQV", "turboquant_prod")),
    _entry("turboquant_mse", params=frozenset(_ROTATED), defaults=_ROTATED, min_bits=1, max_bits=8,
           fixed_budget=False, token_group_param=None, gpu=True, key_theory="mse",
           build=_build_turboquant_mse, _randomized=_rotated, _bits=_turboquant_mse_bits,
           _coded=_rotated_coords, _key_rotated=_rotated),
    _entry("qjl", params=frozenset({"sketch", "m", "n_outliers", "outlier_m", "group_size", "value_bits",
                                    "value_group_size", "norm_dtype"}),
           defaults={"sketch": "gaussian", "n_outliers": 0, "group_size": _GROUP_SIZE, **_NORM},
           min_bits=1, max_bits=8, fixed_budget=False, token_group_param="group_size", gpu=False,
           key_theory=None, build=_build_qjl, _randomized=_always, _bits=_qjl_bits,
           _coded=_all_coords),
    _entry("kivi", params=frozenset({"group_size", "residual"}),
           defaults={"group_size": _GROUP_SIZE, "residual": _GROUP_SIZE}, min_bits=1, max_bits=8,
           fixed_budget=False, token_group_param="group_size", gpu=False, key_theory=None,
           build=_build_kivi, _randomized=_never, _bits=_kivi_bits, _coded=_all_coords),
    _entry("mixed", params=frozenset({"key_bits", "value_bits", *_ROTATED}), defaults=_ROTATED,
           min_bits=1, max_bits=8, fixed_budget=True, token_group_param=None, gpu=True,
           key_theory=None, build=_build_mixed, _randomized=_rotated, _bits=_mixed_bits,
           _coded=_rotated_coords, example_params=MappingProxyType({"key_bits": 4, "value_bits": 2}),
           _codes_as=_mixed_codes_as, _key_rotated=_rotated),
    _entry("identity", params=frozenset(), min_bits=1, max_bits=8, fixed_budget=True,
           token_group_param=None, gpu=False, key_theory=None, build=_build_identity,
           _randomized=_never, _bits=_identity_bits, _coded=_all_coords),
    *(_entry(fmt, params=frozenset(), min_bits=code, max_bits=code, fixed_budget=True,
             token_group_param=None, gpu=False, key_theory=None, build=partial(_build_block, fmt),
             _randomized=_never, _bits=partial(_block_bits, fmt), _coded=_all_coords)
      for fmt, (code, _) in BLOCK_TYPES.items()),
    *(_entry(fmt, params=frozenset(_HEAD_SCALE), defaults=_HEAD_SCALE, min_bits=8, max_bits=8,
             fixed_budget=True, token_group_param=None, gpu=False, key_theory=None,
             build=partial(_build_fp8, fmt), _randomized=_never, _bits=_fp8_bits,
             _coded=_all_coords, _couples=_FP8_PER_TRIAL, _couples_tokens=_scale_over_tokens)
      for fmt in FP8_FORMATS),
    _entry("mxfp4", params=frozenset(), min_bits=4, max_bits=4, fixed_budget=True,
           token_group_param=None, gpu=False, key_theory=None, build=partial(_build_mx, "mxfp4"),
           _randomized=_never, _bits=partial(_mx_bits, "mxfp4"), _coded=_all_coords),
    _entry("nvfp4", params=frozenset(_HEAD_SCALE), defaults=_HEAD_SCALE, min_bits=4, max_bits=4,
           fixed_budget=True, token_group_param=None, gpu=False, key_theory=None,
           build=partial(_build_mx, "nvfp4"), _randomized=_never, _bits=partial(_mx_bits, "nvfp4"),
           _coded=_all_coords, _couples=_NVFP4_PER_TRIAL, _couples_tokens=_scale_over_tokens),
    _entry("klt", params=frozenset({"rank", "group_size"}), defaults={"group_size": _KLT_GROUP},
           min_bits=1, max_bits=8, fixed_budget=False, token_group_param="group_size", gpu=False,
           key_theory=None, build=_build_klt, _randomized=_never, _bits=_klt_bits, _coded=_klt_coords),
)
