"""The registry of KV-cache quantization schemes compared at an equal bit budget.

A scheme pairs a key coder with a value coder. Every scheme quantizes ``K`` and ``V`` of
shape ``(*batch, N, d)`` into codes that hold exactly what a cache would store (packed
bits, small-integer codes, norms, scales), decodes them back, and accounts for its bits
per coordinate both nominally and with every stored overhead.

Schemes (n = ``bits``, the budget in bits per coordinate):

==================  =====================================================================
``KV``              K and V: n-bit Lloyd–Max on the unit vector, no rotation, no sketch
``KQV``             WHT; K: n-bit Lloyd–Max; V: (n−1)-bit Lloyd–Max + 1-bit QJL residual
``QKQV``            WHT; K and V: (n−1)-bit Lloyd–Max + 1-bit QJL residual
``turboquant_mse``  K and V: TurboQuant-mse (rotation + n-bit Lloyd–Max)
``turboquant_prod`` K and V: TurboQuant-prod ((n−1)-bit MSE + 1-bit QJL residual)
``qjl``             K: QJL sketch with m = n·d rows (+ outlier channels); V: per-token
                    asymmetric uniform n-bit (QJL paper)
``kivi``            KIVI: per-channel keys, per-token values, fp16 scale/zero per group,
                    a full-precision window of recent tokens
``mixed``           key/value mixed precision: K a-bit, V b-bit TurboQuant-mse;
                    also by name, ``"K4V2"``
``identity``        stores K and V unchanged (a reference that must reproduce exactly)
==================  =====================================================================

``KQV``/``QKQV`` follow D'Alberto (2026); ``turboquant_mse``/``turboquant_prod`` expose
the rotation and sketch settings of TurboQuant (Zandieh et al., 2025) directly, so
``QKQV`` with default settings is ``turboquant_prod``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kvstats._checks import as_float_array, as_generator, check_choice, check_int, SeedLike
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.qjl_keys import QJLKeyQuantizer
from kvstats.quant.sketch import SKETCHES
from kvstats.quant.rotation import ROTATIONS
from kvstats.quant.uniform import KIVIQuantizer, uniform_dequantize, uniform_quantize

SCHEMES = ("KV", "KQV", "QKQV", "turboquant_mse", "turboquant_prod", "qjl", "kivi",
           "mixed", "identity")
_MIXED_NAME = re.compile(r"^K([1-8])V([1-8])$")
_FP16_BITS = 16


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class BitBudget:
    """Bits per coordinate of a scheme for a given number of tokens and head dimension.

    ``nominal`` counts only the per-coordinate codes (the budget the scheme is named
    for); ``total`` counts everything stored: norms, residual norms, scales, zero-points,
    outlier indices, a full-precision window, the padding of a non power-of-two d.
    Scheme-level values are the mean of the key and value sides. ``breakdown`` gives the
    bits per coordinate of each stored part (keys ``"key_<part>"``/``"value_<part>"``),
    summing to ``2 * total``.
    """

    nominal: float
    total: float
    key_nominal: float
    key_total: float
    value_nominal: float
    value_total: float
    n_tokens: int
    dim: int
    breakdown: dict[str, float] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy frame of the scalar fields (the breakdown as ``bits_<part>``)."""
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "breakdown"}
        row.update({f"bits_{part}": bits for part, bits in self.breakdown.items()})
        return pd.DataFrame([row])


def _nbytes(obj: Any) -> int:
    """Bytes held by every array inside a (nested) codes object."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(_nbytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


@dataclass(frozen=True)
class SchemeCodes:
    """What a scheme stores for one ``(K, V)``: the key and value codes as a cache holds them."""

    scheme: str
    key: Any
    value: Any
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Real bytes stored (every array: codes, sign bits, norms, scales, windows)."""
        return _nbytes(self.key) + _nbytes(self.value)


# --------------------------------------------------------------------------- one side
class _Side:
    """One side (keys or values) of a scheme: encode, decode and stored-bit accounting."""

    nominal_bits: float

    def encode(self, x: np.ndarray) -> Any:
        raise NotImplementedError

    def decode(self, codes: Any) -> np.ndarray:
        raise NotImplementedError

    def roundtrip(self, x: np.ndarray) -> np.ndarray:
        """``decode(encode(x))``; sides with a cheaper exact path override it."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Bits stored for ``n_tokens`` vectors, by part."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError


class _VectorSide(_Side):
    """A per-vector coder (MSE, Prod): the stored bits scale with the number of tokens."""

    def __init__(self, coder: Any, kind: str, nominal_bits: float):
        self.coder, self.kind, self.nominal_bits = coder, kind, nominal_bits

    def encode(self, x):
        return self.coder.encode(x)

    def decode(self, codes):
        return self.coder.decode(codes)

    def roundtrip(self, x):
        return self.coder.roundtrip(x)

    def stored_bits(self, n_tokens):
        return {part: bits * n_tokens for part, bits in self.coder.bits_per_vector().items()}

    def describe(self):
        return {"coder": self.kind, **self.coder.describe()}


class _QJLKeySide(_Side):
    """QJL keys (sketch + outlier channels); bits depend on the number of token groups."""

    def __init__(self, coder: QJLKeyQuantizer, nominal_bits: float):
        self.coder, self.nominal_bits = coder, nominal_bits

    def encode(self, x):
        return self.coder.encode(x)

    def decode(self, codes):
        return self.coder.decode(codes)

    def stored_bits(self, n_tokens):
        return dict(self.coder.stored_bits(n_tokens))

    def describe(self):
        return {"coder": "qjl", **self.coder.describe()}


class _UniformTokenSide(_Side):
    """Per-token asymmetric uniform values (the QJL paper's value quantizer)."""

    def __init__(self, bits: int, dim: int, group_size: int):
        self.bits, self.dim, self.group_size, self.nominal_bits = bits, dim, group_size, bits

    def encode(self, x):
        return uniform_quantize(x, self.bits, axis=-1, group_size=self.group_size)

    def decode(self, codes):
        return uniform_dequantize(codes)

    def stored_bits(self, n_tokens):
        groups_per_token = -(-self.dim // self.group_size)
        return {"codes": self.bits * self.dim * n_tokens,
                "scale_zero": 2 * _FP16_BITS * groups_per_token * n_tokens}

    def describe(self):
        return {"coder": "uniform_per_token", "bits": self.bits, "group_size": self.group_size}


class _IdentitySide(_Side):
    """Stores the vectors unchanged; accounted as float32 (32 bits per coordinate)."""

    nominal_bits = 32.0

    def __init__(self, dim: int):
        self.dim = dim

    def encode(self, x):
        return np.array(x, copy=True)

    def decode(self, codes):
        return np.array(codes, copy=True)

    def stored_bits(self, n_tokens):
        return {"values": self.nominal_bits * self.dim * n_tokens}

    def describe(self):
        return {"coder": "identity"}


# --------------------------------------------------------------------------- schemes
class Scheme:
    """A KV-cache quantization scheme: ``quantize(K, V)``, ``dequantize(codes)``, bit accounting.

    Build one with :func:`make_scheme`. ``K`` and ``V`` have shape ``(*batch, N, d)``
    with the same ``N`` and ``d``; ``batch`` broadcasts against the scheme's ``draws``
    (independent draws of its randomness, see docs/internals.md).
    """

    def __init__(self, name: str, bits: float, dim: int, key: _Side, value: _Side,
                 seed: SeedLike, draws: tuple[int, ...], params: dict[str, Any]):
        self.name, self.bits, self.dim = name, bits, dim
        self.key_side, self.value_side = key, value
        self.seed, self.draws, self.params = seed, draws, params

    @property
    def key_quantizer(self) -> Any:
        """The key coder (for inner-product analyses), e.g. an ``MSEQuantizer``."""
        return getattr(self.key_side, "coder", None)

    @property
    def value_quantizer(self) -> Any:
        """The value coder."""
        return getattr(self.value_side, "coder", None)

    def __repr__(self) -> str:
        return f"Scheme({self.name!r}, bits={self.bits}, dim={self.dim}, draws={self.draws})"

    def _check_kv(self, K: Any, V: Any) -> tuple[np.ndarray, np.ndarray]:
        K = as_float_array(K, "K", min_ndim=2)
        V = as_float_array(V, "V", min_ndim=2)
        for name, x in (("K", K), ("V", V)):
            if x.shape[-1] != self.dim:
                raise ValueError(f"{name} must have last dimension dim={self.dim}; "
                                 f"received shape {x.shape}")
        if K.shape != V.shape:
            raise ValueError(f"K and V must have the same shape (same number of tokens); "
                             f"received K {K.shape} and V {V.shape}")
        if K.dtype != V.dtype:
            V = V.astype(K.dtype)
        return K, V

    def quantize(self, K: Any, V: Any) -> SchemeCodes:
        """Code keys and values; returns what a cache would store.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> scheme = kvstats.make_scheme("KQV", 4, 64, seed=0)
        >>> K = np.random.default_rng(0).standard_normal((16, 64))
        >>> codes = scheme.quantize(K, K)
        >>> K_hat, V_hat = scheme.dequantize(codes)
        >>> K_hat.shape, bool(np.mean((K - K_hat) ** 2) < 0.02 * np.mean(K ** 2))
        ((16, 64), True)
        """
        K, V = self._check_kv(K, V)
        return SchemeCodes(self.name, self.key_side.encode(K), self.value_side.encode(V),
                           K.shape, K.dtype)

    def dequantize(self, codes: SchemeCodes) -> tuple[np.ndarray, np.ndarray]:
        """Reconstruct ``(K_hat, V_hat)`` in the dtype the scheme was given."""
        if not isinstance(codes, SchemeCodes):
            raise TypeError(f"codes must be the SchemeCodes returned by quantize; "
                            f"received {type(codes).__name__}")
        if codes.scheme != self.name:
            raise ValueError(f"codes were made by scheme {codes.scheme!r}, not {self.name!r}")
        K_hat = np.asarray(self.key_side.decode(codes.key), dtype=codes.dtype)
        V_hat = np.asarray(self.value_side.decode(codes.value), dtype=codes.dtype)
        return K_hat, V_hat

    def roundtrip(self, K: Any, V: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(K_hat, V_hat)`` equal bit for bit to ``dequantize(quantize(K, V))``, faster.

        What the sweep uses: it needs only the reconstructions, so codes are not packed
        into bytes and a TurboQuant-prod side reconstructs its MSE part once instead of
        twice. Same validation and errors as :meth:`quantize`; the dtype is that of ``K``.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> scheme = kvstats.make_scheme("QKQV", 3, 96, seed=0, draws=2)
        >>> K = np.random.default_rng(0).standard_normal((2, 16, 96))
        >>> K_hat, V_hat = scheme.roundtrip(K, 2 * K)
        >>> ref = scheme.dequantize(scheme.quantize(K, 2 * K))
        >>> bool(np.array_equal(K_hat, ref[0]) and np.array_equal(V_hat, ref[1]))
        True
        """
        K, V = self._check_kv(K, V)
        return (np.asarray(self.key_side.roundtrip(K), dtype=K.dtype),
                np.asarray(self.value_side.roundtrip(V), dtype=K.dtype))

    def bits_per_coord(self, n_tokens: int) -> BitBudget:
        """Bits per coordinate for ``n_tokens`` tokens of dimension ``dim``, nominal and total.

        Examples
        --------
        >>> import kvstats
        >>> b = kvstats.make_scheme("KQV", 4, 128).bits_per_coord(1024)
        >>> b.nominal, round(b.total, 4)
        (4.0, 4.1875)
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        coords = n_tokens * self.dim
        parts, totals, nominals = {}, {}, {}
        for prefix, side in (("key", self.key_side), ("value", self.value_side)):
            side_parts = side.stored_bits(n_tokens)
            parts.update({f"{prefix}_{p}": b / coords for p, b in side_parts.items()})
            totals[prefix] = sum(side_parts.values()) / coords
            nominals[prefix] = float(side.nominal_bits)
        return BitBudget(nominal=(nominals["key"] + nominals["value"]) / 2,
                         total=(totals["key"] + totals["value"]) / 2,
                         key_nominal=nominals["key"], key_total=totals["key"],
                         value_nominal=nominals["value"], value_total=totals["value"],
                         n_tokens=n_tokens, dim=self.dim, breakdown=parts)

    def describe(self) -> dict[str, Any]:
        """Every setting of the scheme (so every result records what was used)."""
        return {"scheme": self.name, "bits": self.bits, "dim": self.dim,
                "draws": list(self.draws), "params": dict(self.params),
                "key": self.key_side.describe(), "value": self.value_side.describe()}


class _KIVIScheme(Scheme):
    """KIVI codes keys and values together (the window is shared), so it wraps one coder."""

    def __init__(self, name, bits, dim, coder: KIVIQuantizer, seed, draws, params):
        super().__init__(name, bits, dim, _Side(), _Side(), seed, draws, params)
        self.coder = coder

    @property
    def key_quantizer(self):
        return self.coder

    value_quantizer = key_quantizer

    def quantize(self, K, V):
        K, V = self._check_kv(K, V)
        return SchemeCodes(self.name, self.coder.encode(K, V), None, K.shape, K.dtype)

    def dequantize(self, codes):
        if not isinstance(codes, SchemeCodes) or codes.scheme != self.name:
            raise TypeError("codes must be the SchemeCodes returned by this scheme's quantize")
        K_hat, V_hat = self.coder.decode(codes.key)
        return np.asarray(K_hat, codes.dtype), np.asarray(V_hat, codes.dtype)

    def roundtrip(self, K, V):
        return self.dequantize(self.quantize(K, V))  # K and V share the window: no side split

    def bits_per_coord(self, n_tokens):
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        coords = n_tokens * self.dim
        key_parts, value_parts = self.coder.stored_bits(n_tokens, self.dim)
        parts = {f"key_{p}": b / coords for p, b in key_parts.items()}
        parts.update({f"value_{p}": b / coords for p, b in value_parts.items()})
        key_total = sum(key_parts.values()) / coords
        value_total = sum(value_parts.values()) / coords
        return BitBudget(float(self.bits), (key_total + value_total) / 2, float(self.bits),
                         key_total, float(self.bits), value_total, n_tokens, self.dim, parts)

    def describe(self):
        return {"scheme": self.name, "bits": self.bits, "dim": self.dim,
                "draws": list(self.draws), "params": dict(self.params),
                "key": {"coder": "kivi_per_channel", **self.coder.describe()},
                "value": {"coder": "kivi_per_token", **self.coder.describe()}}


# --------------------------------------------------------------------------- factory
_ALLOWED_PARAMS = {
    "KV": {"norm_dtype"},
    "KQV": {"rotation", "sketch", "m", "norm_dtype"},
    "QKQV": {"rotation", "sketch", "m", "norm_dtype"},
    "turboquant_mse": {"rotation", "norm_dtype"},
    "turboquant_prod": {"rotation", "sketch", "m", "norm_dtype"},
    "qjl": {"sketch", "m", "n_outliers", "outlier_m", "group_size", "value_bits",
            "value_group_size"},
    "kivi": {"group_size", "residual"},
    "mixed": {"key_bits", "value_bits", "rotation", "norm_dtype"},
    "identity": set(),
}


def _draws(draws: Any) -> tuple[int, ...]:
    if isinstance(draws, (int, np.integer)) and not isinstance(draws, bool):
        draws = (int(draws),)
    try:
        draws = tuple(int(check_int(n, "draws", low=1)) for n in draws)
    except TypeError as exc:
        raise TypeError(f"draws must be an int or a tuple of positive ints; received {draws!r}") from exc
    return draws


def make_scheme(name: str, bits: float | None, dim: int, seed: SeedLike = 0,
                draws: int | tuple[int, ...] = (), **params: Any) -> Scheme:
    """Build a registered scheme at a budget of ``bits`` per coordinate.

    Parameters
    ----------
    name : str
        One of :data:`SCHEMES`, or ``"K{a}V{b}"`` for mixed precision (e.g. ``"K4V2"``).
    bits : int or None
        The budget n in bits per coordinate (2..8 for schemes with a 1-bit QJL residual,
        1..8 otherwise). For mixed precision it is the mean (a+b)/2 and may be None.
        Ignored (may be None) for ``identity``.
    dim : int
        Head dimension d.
    seed : int, SeedSequence or Generator
        Seed of the scheme's randomness (rotation signs, sketches). Same seed, same bits.
    draws : int or tuple of int
        Batch shape of independent draws of that randomness (default: one shared draw).
    **params
        Scheme settings: ``rotation`` ("hadamard" | "haar" | "identity"), ``sketch``
        ("gaussian" | "orthogonal"), ``m`` (sketch rows), ``norm_dtype``; for ``qjl``:
        ``n_outliers``, ``outlier_m``, ``group_size``, ``value_bits``,
        ``value_group_size``; for ``kivi``: ``group_size``, ``residual``; for ``mixed``:
        ``key_bits``, ``value_bits``.

    Examples
    --------
    >>> import kvstats
    >>> kvstats.make_scheme("QKQV", 3, 128, seed=1, sketch="orthogonal").describe()["value"]["coder"]
    'prod'
    >>> kvstats.make_scheme("K4V2", None, 128).bits_per_coord(512).nominal
    3.0
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a scheme name string; received {name!r}")
    mixed = _MIXED_NAME.match(name)
    if mixed:
        key_bits, value_bits = int(mixed[1]), int(mixed[2])
        if params.get("key_bits", key_bits) != key_bits or params.get("value_bits", value_bits) != value_bits:
            raise ValueError(f"name {name!r} fixes key_bits={key_bits}, value_bits={value_bits}; "
                             f"received params {params}")
        params = {**params, "key_bits": key_bits, "value_bits": value_bits}
        kind = "mixed"
    else:
        kind = check_choice(name, "name", list(SCHEMES) + ["K{a}V{b}, e.g. 'K4V2'"])
    dim = check_int(dim, "dim", low=2)
    draws = _draws(draws)
    unknown = set(params) - _ALLOWED_PARAMS[kind]
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for scheme {name!r}; "
                         f"allowed: {sorted(_ALLOWED_PARAMS[kind])}")
    rotation = check_choice(params.get("rotation", "hadamard"), "rotation", ROTATIONS)
    sketch = check_choice(params.get("sketch", "gaussian"), "sketch", SKETCHES)
    norm_dtype = params.get("norm_dtype", np.float16)
    key_rng, value_rng = as_generator(seed).spawn(2)

    def mse(b, rot, rng):
        coder = MSEQuantizer(dim, b, rotation=rot, seed=rng, draws=draws, norm_dtype=norm_dtype)
        return _VectorSide(coder, "mse", b)

    def prod(b, rng):
        coder = ProdQuantizer(dim, b, rotation=rotation, sketch=sketch, m=params.get("m"),
                              seed=rng, draws=draws, norm_dtype=norm_dtype)
        return _VectorSide(coder, "prod", b)

    if kind == "identity":
        return Scheme(name, None, dim, _IdentitySide(dim), _IdentitySide(dim),
                      seed, draws, params)
    if kind == "mixed":
        key_bits = check_int(params.get("key_bits"), "key_bits", low=1, high=8)
        value_bits = check_int(params.get("value_bits"), "value_bits", low=1, high=8)
        mean_bits = (key_bits + value_bits) / 2
        if bits is not None and bits != mean_bits:
            raise ValueError(f"bits for mixed precision K{key_bits}V{value_bits} must be None "
                             f"or their mean {mean_bits}; received {bits}")
        return Scheme(name, mean_bits, dim, mse(key_bits, rotation, key_rng),
                      mse(value_bits, rotation, value_rng), seed, draws, params)

    low = 2 if kind in ("KQV", "QKQV", "turboquant_prod") else 1
    bits = check_int(bits, "bits", low=low, high=8)
    if kind == "KV":
        key, value = mse(bits, "identity", key_rng), mse(bits, "identity", value_rng)
    elif kind == "turboquant_mse":
        key, value = mse(bits, rotation, key_rng), mse(bits, rotation, value_rng)
    elif kind == "KQV":
        key, value = mse(bits, rotation, key_rng), prod(bits, value_rng)
    elif kind in ("QKQV", "turboquant_prod"):
        key, value = prod(bits, key_rng), prod(bits, value_rng)
    elif kind == "qjl":
        m = check_int(params.get("m", bits * dim), "m", low=1)
        coder = QJLKeyQuantizer(dim, m, sketch=sketch, n_outliers=params.get("n_outliers", 0),
                                outlier_m=params.get("outlier_m"),
                                group_size=params.get("group_size", 32), seed=key_rng, draws=draws)
        value_bits = check_int(params.get("value_bits", bits), "value_bits", low=1, high=8)
        key = _QJLKeySide(coder, m / dim)
        value = _UniformTokenSide(value_bits, dim, params.get("value_group_size", dim))
    else:  # kivi
        coder = KIVIQuantizer(bits, group_size=params.get("group_size", 32),
                              residual=params.get("residual", 32))
        return _KIVIScheme(name, bits, dim, coder, seed, draws, params)
    return Scheme(name, bits, dim, key, value, seed, draws, params)
