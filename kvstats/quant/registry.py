"""The scheme registry: one table of scheme definitions, and scheme-name parsing.

(Over ~450 lines as one idea: the table of schemes, one entry and its expected-bits
formula per scheme; it grows by a few lines with every scheme added.)

Every fact about a scheme lives in its :class:`SchemeDef` entry of :data:`REGISTRY`:
the coders it gives each side (its builder), its allowed parameters and budget range,
whether its budget is fixed by its own parameters, whether it is randomized or groups
tokens, whether it exports to the GPU path, its expected stored bits per coordinate and
the closed form of its key error where one exists. The sweep, the quantized transformers
cache, the GPU path, the report and the tests ask the registry, never a name; a new
scheme is one entry plus its coder (docs/design.md).

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
``QKQV`` with default settings is ``turboquant_prod``.

A researcher's own scheme joins the table without an edit here: :func:`define_scheme`
builds its entry, :func:`register_scheme` validates and adds it (:data:`REGISTRY` is a
live view of the built-ins and the registered schemes; :data:`SCHEMES` stays the
built-in names; both in :mod:`kvstats.quant.register`), :func:`kvstats.quant.contract.check_scheme` holds it to the contract the
built-ins pass, and a sweep config's ``[sweep] plugins`` imports the module that
registers it (:mod:`kvstats.plugins`).
"""
# ~560 lines as one idea: the table, its builders and its expected-bits formulas are the
# facts about each scheme, kept in one place so that no consumer asks a name.

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import DTypeLike

from kvstats._checks import check_int, did_you_mean

if TYPE_CHECKING:
    from kvstats.quant.coder import Coder

__all__ = ["SchemeDef", "REGISTRY", "BUILTIN", "SCHEMES", "scheme_def", "parse_scheme_name"]

_MIXED_NAME = re.compile(r"^K([1-8])V([1-8])$")
_GROUP_SIZE = 32      # default tokens per group (kivi, qjl outliers) and kivi's window
_FP16_BITS = 16
_IDENTITY_BITS = 32   # identity stores float32 values
_FP32_BITS = 32
_KLT_GROUP = 1024     # klt's default block: two halves of 512 tokens calibrate each other
# llama.cpp block types (ggml-common.h block_q*): code bits, fp16 fields per block of 32
# (a scale; the "_1" types also a minimum)
_BLOCK_TYPES = {"q8_0": (8, 1), "q4_0": (4, 1), "q4_1": (4, 2), "q5_0": (5, 1), "q5_1": (5, 2)}
# microscaling: block size, scale bits per block, float32 scale per head
_MX_TYPES = {"mxfp4": (32, 8, False), "nvfp4": (16, 8, True)}

def _per_trial(params: Mapping[str, Any]) -> bool:
    return False


# (bits, dim, params, key_rng, value_rng, draws) -> (recorded bits, key coder, value coder)
Builder = Callable[[int | None, int, dict, np.random.Generator, np.random.Generator, tuple[int, ...]],
                   "tuple[float | None, Coder, Coder]"]


@dataclass(frozen=True)
class SchemeDef:
    """Everything the project knows about one scheme.

    Attributes
    ----------
    name : str
        Registry name (``"K{a}V{b}"`` names resolve to ``mixed``).
    summary : str
        One line.
    params : frozenset of str
        Keyword parameters :func:`kvstats.make_scheme` accepts for it.
    min_bits, max_bits : int
        Allowed budget n (bits per coordinate); unused when ``fixed_budget``.
    fixed_budget : bool
        The budget is fixed by the scheme's own parameters (``mixed``, ``identity``):
        ``make_scheme`` takes ``bits=None`` (or, for mixed, their mean).
    token_group_param : str or None
        Parameter giving the number of tokens that share stored statistics (kivi, qjl);
        None for per-vector schemes.
    gpu : bool
        ``Scheme.export()`` is supported (kvstats_gpu can run it).
    key_theory : {"mse", "prod"} or None
        Closed-form family of the key side (see :meth:`key_rel_mse`).
    build : callable
        ``(bits, dim, params, key_rng, value_rng, draws) -> (bits, key_coder, value_coder)``;
        ``bits`` already checked against ``min_bits..max_bits`` unless ``fixed_budget``.
    example_params : mapping
        Parameters of a minimal instance (those without a default: ``mixed`` needs
        ``key_bits`` and ``value_bits``); the contract tests build every entry with them.
    token_group_default : int
        ``token_group`` when ``token_group_param`` is not given (32; klt: 1024).
    _couples : callable
        ``params -> bool``, see :meth:`couples_trials` (default: never).
    """

    name: str
    summary: str
    params: frozenset[str]
    min_bits: int
    max_bits: int
    fixed_budget: bool
    token_group_param: str | None
    gpu: bool
    key_theory: str | None
    build: Builder = field(repr=False, compare=False)
    _randomized: Callable[[Mapping[str, Any]], bool] = field(repr=False, compare=False)
    _bits: Callable[..., tuple[float, float]] = field(repr=False, compare=False)
    _coded: Callable[[int, Mapping[str, Any]], int] = field(repr=False, compare=False)
    example_params: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    token_group_default: int = _GROUP_SIZE
    _couples: Callable[[Mapping[str, Any]], bool] = field(default=_per_trial, repr=False, compare=False)

    def randomized(self, params: Mapping[str, Any]) -> bool:
        """Whether the scheme has random components (rotation, sketch) under ``params``.

        Examples
        --------
        >>> scheme_def("turboquant_mse").randomized({}), scheme_def("K4V2").randomized({"rotation": "identity"})
        (True, False)
        """
        return bool(self._randomized(params))

    def couples_trials(self, params: Mapping[str, Any]) -> bool:
        """Whether the slices of one encode call share stored statistics under ``params``
        (one scale per call: ``scale="tensor"``), so that a trial's codes depend on the
        trials coded with it and a sweep's numbers on its chunk size.

        Examples
        --------
        >>> scheme_def("fp8_e4m3").couples_trials({"scale": "tensor"}), scheme_def("fp8_e4m3").couples_trials({})
        (True, False)
        """
        return bool(self._couples(params))

    def token_group(self, params: Mapping[str, Any]) -> int:
        """Tokens that share stored statistics (1 = per-vector), under ``params``.

        Examples
        --------
        >>> scheme_def("kivi").token_group({"group_size": 16}), scheme_def("KQV").token_group({})
        (16, 1)
        """
        if self.token_group_param is None:
            return 1
        return check_int(params.get(self.token_group_param, self.token_group_default),
                         self.token_group_param, low=1)

    def coded_dim(self, dim: int, params: Mapping[str, Any]) -> int:
        """Coordinates the scheme's codes spend their bits on, for vectors of dimension ``dim``.

        ``d_pad`` (the next power of two) for a Hadamard rotation, the ``rank`` principal
        axes for klt, ``dim`` otherwise (the block formats code every coordinate; the QJL
        keys code a sketch of the ``dim`` coordinates). What the theory layer needs to
        put a scheme's bits per coded coordinate beside a bound.

        Examples
        --------
        >>> scheme_def("KQV").coded_dim(96, {}), scheme_def("KQV").coded_dim(96, {"rotation": "haar"})
        (128, 96)
        >>> scheme_def("q4_0").coded_dim(96, {}), scheme_def("klt").coded_dim(128, {"rank": 16})
        (96, 16)
        """
        dim = check_int(dim, "dim", low=1)
        return int(self._coded(dim, params))

    def key_rel_mse(self, bits: int, d_pad: int) -> float | None:
        """Predicted relative key error ``E‖k − k̂‖²/‖k‖²`` at ``bits`` with ``d_pad`` coded
        coordinates (:mod:`kvstats.theory`, default settings), None without a closed form.

        ``"mse"``: ``d_pad·D_beta(n, d_pad)``; ``"prod"``: ``d_pad·D_beta(n−1, d_pad)``
        times the Gaussian QJL reconstruction factor ``π/2 − 1/d_pad`` (m = d_pad rows).

        Examples
        --------
        >>> round(scheme_def("KQV").key_rel_mse(4, 128), 4), scheme_def("kivi").key_rel_mse(4, 128)
        (0.0093, None)
        """
        if self.key_theory is None:
            return None
        from kvstats import theory

        bits = check_int(bits, "bits", low=1, high=8)
        if self.key_theory == "prod":
            if bits < 2:
                return None
            return theory.unit_vector_mse(bits - 1, d_pad) * theory.residual_inflation(d_pad)
        return theory.unit_vector_mse(bits, d_pad)

    def expected_bits(self, bits: int | None, dim: int, n_tokens: int, **params: Any) -> float:
        """Total stored bits per coordinate (K and V averaged, every overhead counted).

        Written from the definitions (docs/qjl.md, docs/theory.md), not from the coders:
        the contract tests hold ``Scheme.bits_per_coord(n_tokens).total`` against it.

        Examples
        --------
        >>> scheme_def("KQV").expected_bits(4, 128, 1024)  # (4·128+16 + 3·128+128+32)/128/2
        4.1875
        >>> scheme_def("K4V2").expected_bits(None, 128, 10, key_bits=4, value_bits=2)
        3.125
        """
        dim = check_int(dim, "dim", low=2)
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        key, value = self._bits(bits, dim, n_tokens, params)
        return (key + value) / 2 / (n_tokens * dim)


# --------------------------------------------------------------------------- name parsing
def scheme_def(name: str) -> SchemeDef:
    """The :class:`SchemeDef` of a registry name or of ``"K{a}V{b}"`` (a, b in 1..8: mixed).

    An unknown name is a ValueError listing the names, with a near miss
    (:func:`kvstats._checks.did_you_mean`) or the range of a ``K{a}V{b}`` name out of 1..8.

    Examples
    --------
    >>> scheme_def("K4V2").name, scheme_def("kivi").token_group_param
    ('mixed', 'group_size')
    >>> scheme_def("k4v2")
    Traceback (most recent call last):
    ...
    ValueError: scheme name must be one of [...] or 'K{a}V{b}' (e.g. 'K4V2'); received 'k4v2' (did you mean 'K4V2'?)
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a scheme name string; received {name!r}")
    if _MIXED_NAME.match(name):
        return REGISTRY["mixed"]
    if name in REGISTRY:
        return REGISTRY[name]
    if re.fullmatch(r"K\d+V\d+", name, flags=re.IGNORECASE) and not _MIXED_NAME.match(name.upper()):
        hint = " (mixed precision K{a}V{b} takes a and b in 1..8)"
    elif _MIXED_NAME.match(name.upper()):
        hint = f" (did you mean {name.upper()!r}?)"
    else:
        hint = did_you_mean(name, REGISTRY) or (
            "; a scheme of your own must be registered in this process first (kvstats.register_scheme, "
            "or a module named in a sweep config's [sweep] plugins)")
    raise ValueError(f"scheme name must be one of {list(REGISTRY)} or 'K{{a}}V{{b}}' (e.g. 'K4V2'); "
                     f"received {name!r}{hint}")


def parse_scheme_name(name: str, params: Mapping[str, Any]) -> tuple[SchemeDef, dict[str, Any]]:
    """``(SchemeDef, params)`` for a name; ``"K{a}V{b}"`` adds ``key_bits=a, value_bits=b``.

    Examples
    --------
    >>> d, p = parse_scheme_name("K4V2", {"rotation": "haar"})
    >>> d.name, p
    ('mixed', {'rotation': 'haar', 'key_bits': 4, 'value_bits': 2})
    """
    sdef = scheme_def(name)
    params = dict(params)
    mixed = _MIXED_NAME.match(name)
    if mixed:
        key_bits, value_bits = int(mixed[1]), int(mixed[2])
        if params.get("key_bits", key_bits) != key_bits or params.get("value_bits", value_bits) != value_bits:
            raise ValueError(f"name {name!r} fixes key_bits={key_bits}, value_bits={value_bits}; "
                             f"received params {params}")
        params.update(key_bits=key_bits, value_bits=value_bits)
    return sdef, params


# --------------------------------------------------------------------------- builders
def _norm_dtype(params: Mapping[str, Any]) -> DTypeLike:
    return params.get("norm_dtype", np.float16)


def _mse(bits: int, dim: int, rotation: str, rng, draws, params, name: str) -> Coder:
    from kvstats.quant.mse import MSEQuantizer

    return MSEQuantizer(dim, bits, rotation=rotation, seed=rng, draws=draws,
                        norm_dtype=_norm_dtype(params), name=name)


def _prod(bits: int, dim: int, rng, draws, params, name: str) -> Coder:
    from kvstats.quant.prod import ProdQuantizer

    return ProdQuantizer(dim, bits, rotation=params.get("rotation", "hadamard"),
                         sketch=params.get("sketch", "gaussian"), m=params.get("m"), seed=rng,
                         draws=draws, norm_dtype=_norm_dtype(params), name=name)


def _rotation(params: Mapping[str, Any]) -> str:
    return params.get("rotation", "hadamard")


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
    coder = QJLKeyQuantizer(dim, m, sketch=params.get("sketch", "gaussian"),
                            n_outliers=params.get("n_outliers", 0),
                            outlier_m=params.get("outlier_m"),
                            group_size=params.get("group_size", _GROUP_SIZE), seed=key_rng,
                            draws=draws, norm_dtype=_norm_dtype(params))
    value_bits = check_int(params.get("value_bits", bits), "value_bits", low=1, high=8)
    group = check_int(params.get("value_group_size", dim), "value_group_size", low=1)
    return bits, coder, UniformTokenCoder(value_bits, dim, group)


def _build_kivi(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.uniform import KIVIKeyCoder, KIVIValueCoder

    group_size = params.get("group_size", _GROUP_SIZE)
    residual = params.get("residual", _GROUP_SIZE)
    return bits, KIVIKeyCoder(bits, dim, group_size, residual), \
        KIVIValueCoder(bits, dim, group_size, residual)


def _build_mixed(bits, dim, params, key_rng, value_rng, draws):
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

    return None, IdentityCoder(dim), IdentityCoder(dim)


def _fixed_bits(name: str, nominal: int, bits: int | None) -> int:
    if bits is not None and bits != nominal:
        raise ValueError(f"bits for {name} must be None or {nominal} (fixed by the format); "
                         f"received {bits}")
    return nominal


def _build_block(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.blockfmt import BlockTypeCoder

    bits = _fixed_bits(fmt, _BLOCK_TYPES[fmt][0], bits)
    return bits, BlockTypeCoder(fmt, dim), BlockTypeCoder(fmt, dim)


def _build_fp8(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.fp8 import FP8Coder

    bits = _fixed_bits(fmt, 8, bits)
    scale = params.get("scale", "head")
    return bits, FP8Coder(fmt, dim, scale), FP8Coder(fmt, dim, scale)


def _build_mx(fmt, bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.microscaling import MXCoder

    bits = _fixed_bits(fmt, 4, bits)
    scale = params.get("scale", "head")
    return bits, MXCoder(fmt, dim, scale), MXCoder(fmt, dim, scale)


def _build_klt(bits, dim, params, key_rng, value_rng, draws):
    from kvstats.quant.klt import KLTCoder

    rank, group = params.get("rank"), params.get("group_size", _KLT_GROUP)
    return bits, KLTCoder(bits, dim, rank, group), KLTCoder(bits, dim, rank, group)


# --------------------------------------------------------------------------- expected bits
# Each returns (key bits, value bits) stored for n tokens of dimension d, from the
# definitions: n-bit Lloyd–Max codes of the d_pad rotated coordinates and one norm per
# vector; TurboQuant-prod adds m residual sign bits and a residual norm; fp16 scale and
# zero per uniform group; KIVI's window holds R = min(residual, N) tokens in fp16.
def _d_pad(dim: int, rotation: str) -> int:
    return 1 << (dim - 1).bit_length() if rotation == "hadamard" else dim


def _norm_bits(params: Mapping[str, Any]) -> int:
    return 8 * np.dtype(params.get("norm_dtype", np.float16)).itemsize


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
    outliers = params.get("n_outliers", 0)
    key = n * (m + _norm_bits(params))
    if outliers:
        groups = math.ceil(n / params.get("group_size", _GROUP_SIZE))
        index_bits = math.ceil(math.log2(dim))
        key += n * (params.get("outlier_m") or m) + n * _norm_bits(params) + groups * outliers * index_bits
    value_bits = params.get("value_bits", bits)
    value_groups = math.ceil(dim / params.get("value_group_size", dim))
    return key, n * (value_bits * dim + 2 * _FP16_BITS * value_groups)


def _kivi_bits(bits, dim, n, params):
    g = params.get("group_size", _GROUP_SIZE)
    window = min(params.get("residual", _GROUP_SIZE), n)
    q = n - window
    key = bits * q * dim + 2 * _FP16_BITS * math.ceil(q / g) * dim + _FP16_BITS * window * dim
    value = bits * q * dim + 2 * _FP16_BITS * q * math.ceil(dim / g) + _FP16_BITS * window * dim
    return key, value


def _mixed_bits(bits, dim, n, params):
    coded = _d_pad(dim, _rotation(params))
    return (_mse_bits(params["key_bits"], coded, n, params),
            _mse_bits(params["value_bits"], coded, n, params))


def _identity_bits(bits, dim, n, params):
    return _IDENTITY_BITS * n * dim, _IDENTITY_BITS * n * dim


def _block_bits(fmt, bits, dim, n, params):
    # llama.cpp: per block of 32 coordinates, 32 codes and `fields` fp16 numbers
    code, fields = _BLOCK_TYPES[fmt]
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
    halves = 2 * max(1, n // params.get("group_size", _KLT_GROUP))
    codes = min(bits * dim, 8 * rank) * n
    side = halves * (_FP16_BITS * (rank * dim + dim + rank) + 8 * rank)
    return codes + side, codes + side


# --------------------------------------------------------------------------- the table
def _always(params: Mapping[str, Any]) -> bool:
    return True


def _never(params: Mapping[str, Any]) -> bool:
    return False


def _tensor_scale(params: Mapping[str, Any]) -> bool:
    return params.get("scale", "head") == "tensor"


def _rotated(params: Mapping[str, Any]) -> bool:
    return _rotation(params) != "identity"


def _all_coords(dim: int, params: Mapping[str, Any]) -> int:
    return dim


def _rotated_coords(dim: int, params: Mapping[str, Any]) -> int:
    return _d_pad(dim, _rotation(params))


def _klt_coords(dim: int, params: Mapping[str, Any]) -> int:
    rank = params.get("rank")
    return dim if rank is None else min(rank, dim)


_VECTOR = frozenset({"rotation", "sketch", "m", "norm_dtype"})
_ENTRIES = (
    SchemeDef(name="KV", summary="K and V: n-bit Lloyd–Max on the unit vector, no rotation, no sketch",
              params=frozenset({"norm_dtype"}), min_bits=1, max_bits=8, fixed_budget=False,
              token_group_param=None, gpu=True, key_theory="mse", build=_build_kv,
              _randomized=_never, _bits=_kv_bits, _coded=_all_coords),
    SchemeDef(name="KQV", summary="WHT; K: n-bit Lloyd–Max; V: (n−1)-bit Lloyd–Max + 1-bit QJL residual",
              params=_VECTOR, min_bits=2, max_bits=8, fixed_budget=False, token_group_param=None,
              gpu=True, key_theory="mse", build=_build_kqv, _randomized=_always, _bits=_kqv_bits,
              _coded=_rotated_coords),
    SchemeDef(name="QKQV", summary="WHT; K and V: (n−1)-bit Lloyd–Max + 1-bit QJL residual",
              params=_VECTOR, min_bits=2, max_bits=8, fixed_budget=False, token_group_param=None,
              gpu=True, key_theory="prod", build=_build_prod, _randomized=_always,
              _bits=_prod_scheme_bits, _coded=_rotated_coords),
    SchemeDef(name="turboquant_mse", summary="K and V: TurboQuant-mse (rotation + n-bit Lloyd–Max)",
              params=frozenset({"rotation", "norm_dtype"}), min_bits=1, max_bits=8,
              fixed_budget=False, token_group_param=None, gpu=True, key_theory="mse",
              build=_build_turboquant_mse, _randomized=_rotated, _bits=_turboquant_mse_bits,
              _coded=_rotated_coords),
    SchemeDef(name="turboquant_prod", summary="K and V: TurboQuant-prod ((n−1)-bit MSE + 1-bit QJL residual)",
              params=_VECTOR, min_bits=2, max_bits=8, fixed_budget=False, token_group_param=None,
              gpu=True, key_theory="prod", build=_build_prod, _randomized=_always,
              _bits=_prod_scheme_bits, _coded=_rotated_coords),
    SchemeDef(name="qjl", summary="K: QJL sketch with m = n·d rows (+ outlier channels); V: per-token "
              "asymmetric uniform n-bit (QJL paper)",
              params=frozenset({"sketch", "m", "n_outliers", "outlier_m", "group_size", "value_bits",
                                "value_group_size", "norm_dtype"}),
              min_bits=1, max_bits=8, fixed_budget=False, token_group_param="group_size", gpu=False,
              key_theory=None, build=_build_qjl, _randomized=_always, _bits=_qjl_bits,
              _coded=_all_coords),
    SchemeDef(name="kivi", summary="KIVI: per-channel keys, per-token values, fp16 scale/zero per group, "
              "a full-precision window of recent tokens",
              params=frozenset({"group_size", "residual"}), min_bits=1, max_bits=8, fixed_budget=False,
              token_group_param="group_size", gpu=False, key_theory=None, build=_build_kivi,
              _randomized=_never, _bits=_kivi_bits, _coded=_all_coords),
    SchemeDef(name="mixed", summary="key/value mixed precision: K a-bit, V b-bit TurboQuant-mse; also by "
              "name, 'K4V2'", params=frozenset({"key_bits", "value_bits", "rotation", "norm_dtype"}),
              min_bits=1, max_bits=8, fixed_budget=True, token_group_param=None, gpu=True,
              key_theory=None, build=_build_mixed, _randomized=_rotated, _bits=_mixed_bits,
              _coded=_rotated_coords, example_params=MappingProxyType({"key_bits": 4, "value_bits": 2})),
    SchemeDef(name="identity", summary="stores K and V unchanged (a reference that must reproduce exactly)",
              params=frozenset(), min_bits=1, max_bits=8, fixed_budget=True, token_group_param=None,
              gpu=False, key_theory=None, build=_build_identity, _randomized=_never,
              _bits=_identity_bits, _coded=_all_coords),
    *(SchemeDef(name=fmt, summary=f"llama.cpp {fmt}: blocks of 32 along d, {code}-bit codes, an fp16 "
                f"scale{' and minimum' if fields == 2 else ''} per block ({code + 16 * fields / 32:g} bits)",
                params=frozenset(), min_bits=code, max_bits=code, fixed_budget=True,
                token_group_param=None, gpu=False, key_theory=None,
                build=partial(_build_block, fmt), _randomized=_never,
                _bits=partial(_block_bits, fmt), _coded=_all_coords)
      for fmt, (code, fields) in _BLOCK_TYPES.items()),
    *(SchemeDef(name=fmt, summary=f"FP8 {fmt[4:].upper()} KV cache (vLLM): x/s rounded to FP8, a float32 "
                "scale s = amax/max per head ('head'), per call ('tensor') or static (a float)",
                params=frozenset({"scale"}), min_bits=8, max_bits=8, fixed_budget=True,
                token_group_param=None, gpu=False, key_theory=None,
                build=partial(_build_fp8, fmt), _randomized=_never, _bits=_fp8_bits,
                _coded=_all_coords, _couples=_tensor_scale)
      for fmt in ("fp8_e4m3", "fp8_e5m2")),
    SchemeDef(name="mxfp4", summary="OCP MXFP4: blocks of 32 along d, E2M1 elements, an E8M0 scale per "
              "block (4.25 bits)", params=frozenset(), min_bits=4, max_bits=4, fixed_budget=True,
              token_group_param=None, gpu=False, key_theory=None, build=partial(_build_mx, "mxfp4"),
              _randomized=_never, _bits=partial(_mx_bits, "mxfp4"), _coded=_all_coords),
    SchemeDef(name="nvfp4", summary="NVIDIA NVFP4: blocks of 16 along d, E2M1 elements, an E4M3 scale per "
              "block and a float32 scale per head (4.5 bits + 32 per head)",
              params=frozenset({"scale"}), min_bits=4, max_bits=4, fixed_budget=True,
              token_group_param=None, gpu=False, key_theory=None, build=partial(_build_mx, "nvfp4"),
              _randomized=_never, _bits=partial(_mx_bits, "nvfp4"), _coded=_all_coords,
              _couples=_tensor_scale),
    SchemeDef(name="klt", summary="K and V: principal axes of the other half of the cache, bits by "
              "reverse water-filling, Lloyd–Max per axis (basis and allocation stored)",
              params=frozenset({"rank", "group_size"}), min_bits=1, max_bits=8, fixed_budget=False,
              token_group_param="group_size", gpu=False, key_theory=None, build=_build_klt,
              _randomized=_never, _bits=_klt_bits, _coded=_klt_coords,
              token_group_default=_KLT_GROUP),
)

#: The built-in entries (a constant).
BUILTIN: Mapping[str, SchemeDef] = MappingProxyType({d.name: d for d in _ENTRIES})
# built-ins first, then user schemes in the order registered (register_scheme)
_TABLE: dict[str, SchemeDef] = dict(BUILTIN)
#: Every scheme known to this process: a live read-only view (the built-ins, then the user
#: schemes of :func:`register_scheme`, which appear and disappear with their registration).
REGISTRY: Mapping[str, SchemeDef] = MappingProxyType(_TABLE)
#: The built-in scheme names (a constant; :func:`scheme_names` adds the user schemes).
SCHEMES = tuple(BUILTIN)
# user scheme name -> the plugin that registered it (None: registered by a script)
_ORIGIN: dict[str, str | None] = {}
