"""KV-cache quantization schemes compared at an equal bit budget: `make_scheme`, `Scheme`.

A scheme pairs a key coder with a value coder (:class:`kvstats.quant.coder.Coder`). Every
scheme quantizes ``K`` and ``V`` of shape ``(*batch, N, d)`` into codes that hold exactly
what a cache would store (packed bits, small-integer codes, norms, scales), decodes them
back, and accounts for its bits per coordinate both nominally and with every stored
overhead. Which coders a scheme has, its parameters and budgets are its entry in
:data:`kvstats.quant.registry.REGISTRY` (names in :data:`SCHEMES`; ``"K{a}V{b}"`` is
mixed precision); :meth:`Scheme.export` hands the GPU path plain arrays
(:mod:`kvstats.quant.export`).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from jaxtyping import Float
from numpy.typing import ArrayLike

from kvstats._checks import SeedLike, _describe, as_float_array, as_generator, check_choice, check_int, did_you_mean
from kvstats.quant.coder import Codes, Coder
from kvstats.quant.export import SchemeExport
from kvstats.quant.registry import REGISTRY, SCHEMES, parse_scheme_name, scheme_def
from kvstats.quant.rotation import ROTATIONS
from kvstats.quant.sketch import SKETCHES

__all__ = ["SCHEMES", "BitBudget", "SchemeCodes", "Scheme", "make_scheme"]


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

    Examples
    --------
    >>> import kvstats
    >>> b = kvstats.make_scheme("KQV", 3, 128).bits_per_coord(256)
    >>> b.nominal, b.total, sum(b.breakdown.values()) == 2 * b.total
    (3.0, 3.1875, True)
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
        """One-row tidy frame of the scalar fields (the breakdown as ``bits_<part>``).

        Examples
        --------
        >>> from kvstats.quant.schemes import make_scheme
        >>> row = make_scheme("KQV", 2, 128).bits_per_coord(64).to_frame()  # values: prod, two norms
        >>> row[["nominal", "total", "bits_key_norm"]].round(4).values.tolist()
        [[2.0, 2.1875, 0.125]]
        """
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "breakdown"}
        row.update({f"bits_{part}": bits for part, bits in self.breakdown.items()})
        return pd.DataFrame([row])


@dataclass(frozen=True)
class SchemeCodes:
    """What a scheme stores for one ``(K, V)``: the key and value codes as a cache holds them."""

    scheme: str
    key: Codes
    value: Codes
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Real bytes stored (every array: codes, sign bits, norms, scales, windows)."""
        return int(self.key.nbytes + self.value.nbytes)


# --------------------------------------------------------------------------- schemes
class Scheme:
    """A KV-cache quantization scheme: ``quantize(K, V)``, ``dequantize(codes)``, bit accounting.

    Build one with :func:`make_scheme`. ``K`` and ``V`` have shape ``(*batch, N, d)``
    with the same ``N`` and ``d``; ``batch`` broadcasts against the scheme's ``draws``
    (independent draws of its randomness, see docs/internals.md). A scheme holds two
    coders (:class:`kvstats.quant.coder.Coder`), ``key_coder`` and ``value_coder``; what
    they are is the scheme's registry entry (:mod:`kvstats.quant.registry`).

    Examples
    --------
    >>> scheme = make_scheme("kivi", 2, 64, group_size=32, residual=32)
    >>> scheme
    Scheme('kivi', bits=2, dim=64, draws=())
    >>> type(scheme.key_coder).__name__, type(scheme.value_coder).__name__
    ('KIVIKeyCoder', 'KIVIValueCoder')
    """

    def __init__(self, name: str, bits: float | None, dim: int, key: Coder, value: Coder,
                 seed: SeedLike, draws: tuple[int, ...], params: dict[str, Any]):
        self.name, self.bits, self.dim = name, bits, dim
        self.key_coder, self.value_coder = key, value
        self.seed, self.draws, self.params = seed, draws, params

    @property
    def key_quantizer(self) -> Coder:
        """The key coder (same as ``key_coder``), e.g. an ``MSEQuantizer``."""
        return self.key_coder

    @property
    def value_quantizer(self) -> Coder:
        """The value coder (same as ``value_coder``)."""
        return self.value_coder

    def __repr__(self) -> str:
        return f"Scheme({self.name!r}, bits={self.bits}, dim={self.dim}, draws={self.draws})"

    def _check_kv(self, K: ArrayLike, V: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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

    def quantize(self, K: Float[np.ndarray, "*batch n d"], V: Float[np.ndarray, "*batch n d"]
                 ) -> SchemeCodes:
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
        return SchemeCodes(self.name, self.key_coder.encode(K), self.value_coder.encode(V),
                           K.shape, K.dtype)

    def dequantize(self, codes: SchemeCodes
                   ) -> tuple[Float[np.ndarray, "*batch n d"], Float[np.ndarray, "*batch n d"]]:
        """Reconstruct ``(K_hat, V_hat)`` in the dtype the scheme was given (float32 or
        float64; float16, bfloat16 and integer K are read as float64, and come back so).

        Examples
        --------
        >>> scheme = make_scheme("identity", None, 8)
        >>> K = np.arange(16.0, dtype=np.float32).reshape(2, 8)
        >>> K_hat, V_hat = scheme.dequantize(scheme.quantize(K, -K))
        >>> K_hat.dtype, bool(np.array_equal(K_hat, K) and np.array_equal(V_hat, -K))
        (dtype('float32'), True)
        """
        if not isinstance(codes, SchemeCodes):
            raise TypeError(f"codes must be the SchemeCodes returned by quantize; "
                            f"received {type(codes).__name__}")
        if codes.scheme != self.name:
            raise ValueError(f"codes were made by scheme {codes.scheme!r}, not {self.name!r}")
        K_hat = np.asarray(self.key_coder.decode(codes.key), dtype=codes.dtype)
        V_hat = np.asarray(self.value_coder.decode(codes.value), dtype=codes.dtype)
        return K_hat, V_hat

    def roundtrip(self, K: Float[np.ndarray, "*batch n d"], V: Float[np.ndarray, "*batch n d"]
                  ) -> tuple[Float[np.ndarray, "*batch n d"], Float[np.ndarray, "*batch n d"]]:
        """``(K_hat, V_hat)`` equal bit for bit to ``dequantize(quantize(K, V))``, faster.

        What the sweep uses: it needs only the reconstructions, so codes are not packed
        into bytes and a TurboQuant-prod side reconstructs its MSE part once instead of
        twice (each coder's ``roundtrip``). Same validation and errors as :meth:`quantize`;
        the dtype is that of ``K`` (float32 or float64: float16, bfloat16 and integer input
        is read as float64).

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
        return (np.asarray(self.key_coder.roundtrip(K), dtype=K.dtype),
                np.asarray(self.value_coder.roundtrip(V), dtype=K.dtype))

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
        for prefix, coder in (("key", self.key_coder), ("value", self.value_coder)):
            side_parts = coder.stored_bits(n_tokens)
            parts.update({f"{prefix}_{p}": b / coords for p, b in side_parts.items()})
            totals[prefix] = sum(side_parts.values()) / coords
            nominals[prefix] = float(coder.nominal_bits)
        return BitBudget(nominal=(nominals["key"] + nominals["value"]) / 2,
                         total=(totals["key"] + totals["value"]) / 2,
                         key_nominal=nominals["key"], key_total=totals["key"],
                         value_nominal=nominals["value"], value_total=totals["value"],
                         n_tokens=n_tokens, dim=self.dim, breakdown=parts)

    def describe(self) -> dict[str, Any]:
        """Every setting of the scheme (so every result records what was used)."""
        return {"scheme": self.name, "bits": self.bits, "dim": self.dim,
                "draws": list(self.draws), "params": dict(self.params),
                "key": self.key_coder.describe(), "value": self.value_coder.describe()}

    def export(self) -> SchemeExport:
        """The scheme's parameters as plain arrays for the GPU path (:mod:`kvstats.quant.export`).

        Raises a ValueError for a scheme without a GPU export (``SchemeDef.gpu``), for
        independent draws (``draws != ()``) and for a Haar rotation.

        Examples
        --------
        >>> import kvstats
        >>> ex = kvstats.make_scheme("QKQV", 3, 96, seed=0).export()
        >>> ex.key.coder, ex.key.bits, ex.key.dim_padded, ex.key.sketch.shape
        ('prod', 2, 128, (128, 96))
        """
        if not scheme_def(self.name).gpu:
            gpu = [name for name, d in REGISTRY.items() if d.gpu]
            raise ValueError(f"scheme must be one with a GPU export ({gpu} or 'K{{a}}V{{b}}') "
                             f"to export; received {self.name!r}")
        if self.draws:
            raise ValueError(f"draws must be () to export (one shared draw); received "
                             f"draws={self.draws}")
        return SchemeExport(self.name, self.dim, self.key_coder.export(), self.value_coder.export())


# --------------------------------------------------------------------------- factory
def _draws(draws: int | tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(draws, (int, np.integer)) and not isinstance(draws, bool):
        draws = (int(draws),)
    try:
        draws = tuple(int(check_int(n, "draws", low=1)) for n in draws)
    except TypeError as exc:
        raise TypeError(f"draws must be an int or a tuple of positive ints; received {draws!r}") from exc
    return draws


# The schemes' streams hang off their own branch of a seed's tree: ``kvstats.sample`` spawns
# the seed's first children, so with one seed for both (the defaults are 0) a Haar rotation
# was the QR of the very keys it then coded (5.8x the key MSE of KQV at N = d = 64).
_SCHEME_BRANCH = 0x6B7673   # "kvs"


def _scheme_streams(seed: SeedLike) -> list[np.random.Generator]:
    """The key and value coders' generators of ``seed``: the children of the seed's
    sequence under :data:`_SCHEME_BRANCH` (a Generator passed in moves on by one spawn,
    so a shared one gives a new draw each call)."""
    rng = as_generator(seed)
    if isinstance(seed, np.random.Generator):
        rng = rng.spawn(1)[0]
    root = rng.bit_generator.seed_seq
    branch = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, _SCHEME_BRANCH),
                                    pool_size=root.pool_size)
    return [np.random.default_rng(child) for child in branch.spawn(2)]


def make_scheme(name: str, bits: float | None, dim: int, seed: SeedLike = 0,
                draws: int | tuple[int, ...] = (), **params: Any) -> Scheme:
    """Build a registered scheme at a budget of ``bits`` per coordinate.

    What each scheme is (its coders, allowed parameters, budget range) is its entry in
    :data:`kvstats.quant.registry.REGISTRY`.

    Parameters
    ----------
    name : str
        One of :data:`SCHEMES`, or ``"K{a}V{b}"`` for mixed precision (e.g. ``"K4V2"``).
    bits : int or None
        The budget n in bits per coordinate (2..8 for schemes with a 1-bit QJL residual,
        1..8 otherwise). For mixed precision it is the mean (a+b)/2 and may be None.
        A fixed-budget scheme (``SchemeDef.fixed_budget``: the formats, ``mixed``,
        ``identity``) takes None or its own budget (for ``identity``, which records None:
        its coders' 32 bits); another is a ValueError. A scheme run at budgets whose build
        records another budget than ``bits`` is a ValueError too.
    dim : int
        Head dimension d.
    seed : int, SeedSequence or Generator
        Seed of the scheme's randomness (rotation signs, sketches). Same seed, same bits.
        Its streams are a branch of the seed no data generator draws from: one seed for
        :func:`kvstats.sample` and for the scheme gives independent data and codes.
    draws : int or tuple of int
        Batch shape of independent draws of that randomness (default: one shared draw).
    **params
        Scheme settings, ``scheme_def(name).params`` lists those a scheme accepts:
        ``rotation`` ("hadamard" | "haar" | "identity"), ``sketch`` (``SKETCHES``), ``m``
        (sketch rows), ``norm_dtype``; for ``qjl``: ``n_outliers``, ``outlier_m``,
        ``group_size``, ``value_bits``, ``value_group_size``; for ``kivi``:
        ``group_size``, ``residual``; for ``mixed``: ``key_bits``, ``value_bits``; for
        ``fp8_e4m3``/``fp8_e5m2``: ``scale`` ("head" | "tensor" | a float: a static
        scale, as a calibrated cache keeps); for ``nvfp4``: ``scale`` ("head" |
        "tensor"); for ``klt``: ``rank``,
        ``group_size`` (tokens per calibration block).

    Examples
    --------
    >>> import kvstats
    >>> kvstats.make_scheme("QKQV", 3, 128, seed=1, sketch="orthogonal").describe()["value"]["coder"]
    'prod'
    >>> kvstats.make_scheme("K4V2", None, 128).bits_per_coord(512).nominal
    3.0
    """
    sdef, params = parse_scheme_name(name, params)
    dim = check_int(dim, "dim", low=2)
    draws = _draws(draws)
    unknown = set(params) - sdef.params
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for scheme {name!r}"
                         f"{did_you_mean(sorted(unknown)[0], sdef.params)}; allowed: {sorted(sdef.params)}")
    full = sdef.filled(params)   # what the builder reads; the scheme records params as given
    # the built-ins' shared parameters, checked before any draw; a scheme of one's own
    # may mean something else by them (its builder checks its own)
    for param, allowed in (("rotation", ROTATIONS), ("sketch", SKETCHES)):
        if param in full and sdef.name in SCHEMES:
            check_choice(full[param], param, allowed)
    key_rng, value_rng = _scheme_streams(seed)
    if not sdef.fixed_budget:
        bits = check_int(bits, "bits", low=sdef.min_bits, high=sdef.max_bits)
    given = bits
    bits, key, value = _built(name, sdef.build(bits, dim, full, key_rng, value_rng, draws))
    _check_recorded(name, sdef.fixed_budget, given, bits, key, value)
    return Scheme(name, bits, dim, key, value, seed, draws, params)


def _check_recorded(name: str, fixed: bool, given: Any, bits: Any, key: Coder, value: Coder) -> None:
    """The budget a build records against the one asked for, for every scheme alike,
    whether or not its build checks it: rows labelled with one budget must hold it."""
    if not fixed:
        if bits != given:   # it would sit in the rows of `given`, coding at `bits`
            raise ValueError(f"the build function of scheme {name!r} must record the budget it was "
                             f"given (bits={given}); it returned bits={bits!r}")
    elif given is not None and bits is not None and given != bits:
        raise ValueError(f"bits for {name} must be None or {bits:g} (its budget is fixed); "
                         f"received {given!r}")
    elif given is not None and bits is None:
        # it records no budget: the one its coders store (identity's 32), if they agree
        nominal = sorted({float(key.nominal_bits), float(value.nominal_bits)})
        real = isinstance(given, numbers.Real) and not isinstance(given, bool)
        if not (len(nominal) == 1 and real and given == nominal[0]):
            allowed = f"None or {nominal[0]:g}" if len(nominal) == 1 else "None"
            raise ValueError(f"bits for {name} must be {allowed} (fixed by the format); "
                             f"received {given!r}")


def _built(name: str, built: Any) -> tuple[float | None, Coder, Coder]:
    """A scheme's ``build`` result checked: ``(bits, key coder, value coder)`` (a user's
    build that returns them in another order or omits the budget is told so here, not
    later by an AttributeError deep in a sweep)."""
    if not (isinstance(built, tuple) and len(built) == 3):
        raise TypeError(f"the build function of scheme {name!r} must return (bits, key_coder, "
                        f"value_coder); received {_describe(built)}")
    bits, key, value = built
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, numbers.Real)):
        raise TypeError(f"the build function of scheme {name!r} must return (bits, key_coder, "
                        f"value_coder) with bits a number or None; received bits of type "
                        f"{type(bits).__name__}")
    for side, coder in (("key", key), ("value", value)):
        if not isinstance(coder, Coder):
            raise TypeError(f"the build function of scheme {name!r} must return (bits, key_coder, "
                            f"value_coder); its {side} coder, a {type(coder).__name__}, lacks the "
                            "Coder protocol (encode, decode, roundtrip, stored_bits, describe, nominal_bits)")
    return bits, key, value
