"""The coder protocol: one side (keys or values) of a KV-cache quantization scheme.

A :class:`~kvstats.quant.schemes.Scheme` holds two coders, one per side, and asks each
the same things; every coder of the project implements :class:`Coder`:

- ``MSEQuantizer`` (mse.py, TurboQuant-mse), ``ProdQuantizer`` (prod.py, TurboQuant-prod),
  ``QJLKeyQuantizer`` (qjl_keys.py, the QJL paper's keys);
- ``UniformTokenCoder``, ``KIVIKeyCoder``, ``KIVIValueCoder`` (uniform.py);
- :class:`IdentityCoder` (here): stores the vectors unchanged.

The contract:

``encode(x)``
    ``x`` ``(*batch, n, d)`` (float32 or float64, finite) → a frozen codes dataclass
    holding exactly what a cache stores; its ``nbytes`` property counts those bytes.
``decode(codes)``
    → ``(*batch, n, d)`` in the dtype that was encoded.
``roundtrip(x)``
    equal bit for bit to ``decode(encode(x))`` (coders with a cheaper exact path skip
    the packing); same validation and errors as ``encode``.
``stored_bits(n_tokens)``
    bits stored for ``n_tokens`` vectors of one head, by part (the names become the
    ``key_<part>``/``value_<part>`` entries of ``BitBudget.breakdown``).
``describe()``
    every setting; the key ``"coder"`` names the kind (``"mse"``, ``"prod"``, ...).
``nominal_bits``
    the bits per coordinate the coder is named for (its budget without overheads).

``storable_limits(x)`` (optional; the default is :func:`float32_limits`)
    ``[(what, limit, value), ...]``: each range the coder's format stores ``x`` in, the
    largest value it holds and ``x``'s value there (``what`` words it for a message: "values
    of magnitude", "vector norms (stored as float16)"). ``value <= limit`` for all of them
    means ``encode`` stores ``x`` (as float32, as a cache codes it) without overflow; a
    value beyond is refused by ``encode`` (or would be stored as inf). A limit may be a
    sufficient bound on a per-vector quantity for formats whose stored value depends on
    other vectors too (a group's or block's). Each limit is a constant of the coder, and
    each value at most ``max|x|·√d`` (a norm, a block's scale or minimum, a group's zero
    or scale): a cache skips the rules when that bound is below the smallest limit (one
    reduction per update; the rules cost tens of µs). Computed by the code that computes the stored
    quantity; a cache asks it through :func:`storable_limits` before holding a state, so a
    state it could never code is refused at the update that brings it.

Optional: a coder whose ``roundtrip(x, out=arr)`` writes its result into ``arr`` says so
with the class attribute ``roundtrip_writes_out = True`` (MSE, Prod); the sweep then reuses
one array per shape across cells.

Coders that the GPU path supports (MSE, Prod) also implement :class:`ExportableCoder`:
``export()`` returns a :class:`kvstats.quant.export.SideExport` of plain arrays.

Coders that store vector norms in a narrow float (``norm_dtype``) check them with
:func:`check_norm_range` before storing: an overflow is an error, an underflow (to zero or
to a subnormal) a ``UserWarning`` naming the side.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from jaxtyping import Float
from numpy.typing import DTypeLike

from kvstats._checks import _describe, as_float_array, check_int

if TYPE_CHECKING:
    from kvstats.quant.export import SideExport

__all__ = ["Codes", "Coder", "ExportableCoder", "IdentityCodes", "IdentityCoder", "NormOverflowError",
           "as_norm_dtype", "check_norm_range", "float32_limits", "norm_limits", "storable_limits"]

_F32_MAX = float(np.finfo(np.float32).max)
_NORM_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def as_norm_dtype(norm_dtype: DTypeLike) -> np.dtype:
    """``norm_dtype`` as the numpy dtype vector norms are stored in: float16, float32 or
    float64 (the one check of every coder that stores norms).

    Raises a ``TypeError`` for what is not a dtype at all and a ``ValueError`` for a
    dtype outside the three, each naming them.

    Examples
    --------
    >>> as_norm_dtype("half")
    dtype('float16')
    >>> as_norm_dtype(np.int8)
    Traceback (most recent call last):
    ...
    ValueError: norm_dtype must be one of float16, float32, float64; received int8
    """
    try:
        dtype = np.dtype(norm_dtype)
    except TypeError as exc:
        raise TypeError(f"norm_dtype must be one of float16, float32, float64; received "
                        f"{_describe(norm_dtype)}") from exc
    if dtype not in _NORM_DTYPES:
        raise ValueError(f"norm_dtype must be one of float16, float32, float64; received {dtype}")
    return dtype


@runtime_checkable
class Codes(Protocol):
    """What a coder stores for a batch of vectors (a frozen dataclass).

    Examples
    --------
    >>> codes = IdentityCoder(4).encode(np.zeros((2, 4), dtype=np.float32))
    >>> isinstance(codes, Codes), codes.nbytes
    (True, 32)
    """

    @property
    def nbytes(self) -> int:
        """Real bytes stored (every array of the codes)."""


@runtime_checkable
class Coder(Protocol):
    """One side (keys or values) of a scheme; see the module docstring for the contract.

    Examples
    --------
    >>> from kvstats.quant.mse import MSEQuantizer
    >>> isinstance(MSEQuantizer(64, 2), Coder), isinstance(IdentityCoder(4), Coder)
    (True, True)
    """

    nominal_bits: float

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> Codes:
        """Code vectors ``(*batch, n, d)``; returns what a cache stores."""

    def decode(self, codes: Codes) -> Float[np.ndarray, "*batch n d"]:
        """Reconstruct the vectors in the dtype that was encoded."""

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))`` bit for bit."""

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Bits stored for ``n_tokens`` vectors, by part."""

    def describe(self) -> dict[str, Any]:
        """Every setting; ``"coder"`` names the kind."""


@runtime_checkable
class ExportableCoder(Coder, Protocol):
    """A coder the GPU path can run: it exports its parameters as plain arrays.

    Examples
    --------
    >>> from kvstats.quant.mse import MSEQuantizer
    >>> isinstance(MSEQuantizer(64, 2), ExportableCoder), isinstance(IdentityCoder(4), ExportableCoder)
    (True, False)
    """

    def export(self) -> SideExport:
        """Rotation signs, codebook and sketch (:class:`kvstats.quant.export.SideExport`)."""


# --------------------------------------------------------------------------- norm range
class NormOverflowError(ValueError):
    """A vector norm beyond the dtype it is stored or decoded in (:func:`check_norm_range`,
    the MSE coders): an error of the data, which a seeded sweep meets again on every rerun
    (its note says to change the config first).

    Examples
    --------
    >>> try:
    ...     check_norm_range(np.array([7e4]), np.float16, "V")
    ... except NormOverflowError as exc:
    ...     print(isinstance(exc, ValueError))
    True
    """


def check_norm_range(norms: Float[np.ndarray, "*batch"], norm_dtype: DTypeLike, name: str) -> None:
    """Check that vector norms survive storage in ``norm_dtype``: raise on overflow, warn on underflow.

    A coder that stores ``‖x‖`` in a narrow float loses vectors silently at both ends:
    a norm above the dtype's largest finite value would be stored as inf, one at most
    half its smallest subnormal as 0 (the vector then decodes as exact zeros), and one
    below its smallest normal as a subnormal with fewer significant bits (float16: a norm
    of 1e-6 keeps about 4 bits, a relative error up to 3%). Call this with the norms as
    computed (float64 or the input's dtype), before casting them.

    Parameters
    ----------
    norms : array_like
        Non-negative norms (any shape; NaN is an error, +inf an overflow).
    norm_dtype : {numpy.float16, numpy.float32, numpy.float64}
        The dtype the norms will be stored in.
    name : str
        The side, ``"K"`` or ``"V"`` (or what the vectors are), named in the messages.

    Returns
    -------
    None

    Raises
    ------
    NormOverflowError
        (a ValueError) A norm above ``finfo(norm_dtype).max`` (the message suggests a wider
        dtype, in Python and in a sweep config's spelling).
    ValueError
        A NaN or negative norm.
    TypeError
        ``norm_dtype`` not a dtype (a dtype other than float16/32/64: ValueError), ``name``
        not a str, ``norms`` not real numbers.

    Warns
    -----
    UserWarning
        Nonzero norms that the cast rounds to zero, or to a subnormal of ``norm_dtype``:
        how many, the smallest, and what is lost. Exact zeros (zero vectors) are fine.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from kvstats.quant.coder import check_norm_range
    >>> check_norm_range(np.array([0.0, 0.5, 300.0]), np.float16, "K")   # fine: nothing
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     check_norm_range(np.array([1.0, 1e-9]), np.float16, "K")
    >>> print(str(caught[0].message)[:61])
    K: 1 of 2 vector norms are below float16's smallest subnormal
    >>> check_norm_range(np.array([7e4]), np.float16, "V")
    Traceback (most recent call last):
    ...
    kvstats.quant.coder.NormOverflowError: V has a vector norm of 7e+04, above the largest float16 (65504); store the norms as float32 (norm_dtype=np.float32; in a sweep config params = {norm_dtype = "float32"} on the scheme's [[schemes]] entry) or rescale V
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str naming the side (e.g. 'K' or 'V'); received {_describe(name)}")
    dtype = as_norm_dtype(norm_dtype)
    arr = np.asarray(norms)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"norms must be an array of real numbers; received {_describe(norms)}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size == 0:
        return
    if np.isnan(arr).any() or (arr < 0).any():
        raise ValueError(f"norms of {name} must be non-negative numbers; received "
                         f"{int(np.isnan(arr).sum())} NaN and {int((arr < 0).sum())} negative")
    info = np.finfo(dtype)
    top = float(arr.max())
    if top > float(info.max):
        if dtype == np.float64:   # no wider dtype (an infinite norm)
            fix = f"rescale {name}"
        else:
            wider = "float32" if dtype == np.float16 else "float64"
            # the Python and the sweep config's (TOML) spelling: the same data fail every rerun
            fix = (f"store the norms as {wider} (norm_dtype=np.{wider}; in a sweep config "
                   f'params = {{norm_dtype = "{wider}"}} on the scheme\'s [[schemes]] entry) '
                   f"or rescale {name}")
        raise NormOverflowError(f"{name} has a vector norm of {top:.4g}, above the largest {dtype.name} "
                         f"({float(info.max):.6g}); {fix}")
    stored = arr.astype(dtype).astype(np.float64)  # no overflow left: a plain rounding
    lost = (arr > 0) & (stored == 0)
    low = (stored > 0) & (stored < float(info.smallest_normal))
    advice = f"rescale {name}" if dtype == np.float64 else f"use a wider norm_dtype or rescale {name}"
    if lost.any():
        warnings.warn(
            f"{name}: {int(lost.sum())} of {arr.size} vector norms are below {dtype.name}'s smallest "
            f"subnormal {float(info.smallest_subnormal):.3g} (smallest {float(arr[lost].min()):.3g}) "
            f"and are stored as 0: those vectors decode as exact zeros; {advice}",
            UserWarning, stacklevel=2)
    if low.any():
        # half a subnormal step over the smallest such norm (ordered to avoid underflow)
        rel = float(info.smallest_subnormal) / float(arr[low].min()) / 2
        warnings.warn(
            f"{name}: {int(low.sum())} of {arr.size} vector norms are {dtype.name} subnormals "
            f"(below {float(info.smallest_normal):.3g}; smallest {float(arr[low].min()):.3g}): stored "
            f"with fewer significant bits, relative error up to {rel:.2g}; {advice}",
            UserWarning, stacklevel=2)


# --------------------------------------------------------------------------- storable range
def float32_limits(x: Any) -> list[tuple[str, float, float]]:
    """The range every coder stores ``x`` in, float32 (a cache codes float32 states: a
    float64 value beyond it is inf there): the default ``storable_limits`` of a coder whose
    format holds nothing narrower (identity, fp8, microscaling).

    Parameters
    ----------
    x : numpy array or torch tensor ``(*batch, n, d)``
        The vectors (empty: no limit applies).

    Returns
    -------
    list of (str, float, float)
        ``[("values of magnitude", FLT_MAX, max |x|)]``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.coder import float32_limits
    >>> float32_limits(np.array([[1.0, -1e39]]))
    [('values of magnitude', 3.4028234663852886e+38, 1e+39)]
    """
    if 0 in tuple(x.shape):
        return []
    return [("values of magnitude", _F32_MAX, float(abs(x).max()))]


def norm_limits(norms: Any, norm_dtype: DTypeLike) -> list[tuple[str, float, float]]:
    """The range of vector norms stored in ``norm_dtype`` (what :func:`check_norm_range`
    refuses beyond): for the ``storable_limits`` of coders that store norms.

    Parameters
    ----------
    norms : numpy array or torch tensor
        The norms as the coder computes them (empty: no limit applies).
    norm_dtype : {"float16", "float32", "float64"}
        Checked by :func:`as_norm_dtype`.

    Returns
    -------
    list of (str, float, float)
        ``[("vector norms (stored as <dtype>)", finfo(dtype).max, max norm)]``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.coder import norm_limits
    >>> norm_limits(np.array([3.0, 7e4]), np.float16)
    [('vector norms (stored as float16)', 65504.0, 70000.0)]
    """
    dtype = as_norm_dtype(norm_dtype)
    if 0 in tuple(norms.shape):
        return []
    return [(f"vector norms (stored as {dtype.name})", float(np.finfo(dtype).max), float(norms.max()))]


def storable_limits(coder: Any, x: Any) -> list[tuple[str, float, float]]:
    """``coder.storable_limits(x)``, or :func:`float32_limits` for a coder without the
    method (a user's coder written before it): each ``(what, limit, value)`` that storing
    ``x`` needs (the module docstring). ``x`` is what the coder encodes: a numpy array for
    the numpy coders, a torch tensor for :class:`kvstats.models.code_attention.SideCoder`.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.coder import IdentityCoder, storable_limits
    >>> from kvstats.quant.mse import MSEQuantizer
    >>> x = np.zeros((1, 64), dtype=np.float32)
    >>> x[0, 0] = 7e4
    >>> [(what, limit) for what, limit, value in storable_limits(MSEQuantizer(64, 2), x) if value > limit]
    [('vector norms (stored as float16)', 65504.0)]
    >>> storable_limits(IdentityCoder(64), x)
    [('values of magnitude', 3.4028234663852886e+38, 70000.0)]
    """
    method = getattr(coder, "storable_limits", None)
    return list(method(x)) if method is not None else float32_limits(x)


# --------------------------------------------------------------------------- identity
@dataclass(frozen=True, eq=False)
class IdentityCodes:
    """The vectors themselves, ``(*batch, n, d)`` as given."""

    values: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes stored (the values in their own dtype)."""
        return int(self.values.nbytes)


class IdentityCoder:
    """Stores the vectors unchanged; accounted as float32 (32 bits per coordinate).

    The reference scheme ``identity`` must reproduce its input exactly, so it keeps the
    input's dtype: for float64 input ``encode(x).nbytes`` is twice what `stored_bits`
    accounts (the float32 reference a cache would hold); for float32 input they agree.

    Parameters
    ----------
    dim : int
        Vector dimension d.

    Examples
    --------
    >>> coder = IdentityCoder(4)
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> bool(np.array_equal(coder.roundtrip(x), x)), coder.stored_bits(2)
    (True, {'values': 256.0})
    """

    nominal_bits = 32.0

    def __init__(self, dim: int):
        self.dim = check_int(dim, "dim", low=1)

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> IdentityCodes:
        """A copy of ``x`` (validated: finite floats with last axis ``dim``)."""
        x = as_float_array(x, "x", min_ndim=1)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last axis of length {self.dim}; received {_describe(x)}")
        return IdentityCodes(np.array(x, copy=True))

    def decode(self, codes: IdentityCodes) -> Float[np.ndarray, "*batch n d"]:
        """A copy of the stored values."""
        if not isinstance(codes, IdentityCodes):
            raise TypeError(f"codes must be IdentityCodes from IdentityCoder.encode; "
                            f"received {type(codes).__name__}")
        return np.array(codes.values, copy=True)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """``{"values": 32·d·n_tokens}``."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        return {"values": self.nominal_bits * self.dim * n_tokens}

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 only (:func:`float32_limits`).

        Examples
        --------
        >>> IdentityCoder(2).storable_limits(np.array([[1.0, -3.0]]))
        [('values of magnitude', 3.4028234663852886e+38, 3.0)]
        """
        return float32_limits(x)

    def describe(self) -> dict[str, Any]:
        """``{"coder": "identity"}``."""
        return {"coder": "identity"}


def _finite_decode(out: np.ndarray, what: str, name: str, widen: str | None = None) -> np.ndarray:
    """``out``, a decoded array, if finite, else a NormOverflowError naming ``what`` (the
    argument: the vectors ``name`` or their codes) and the fix: rescale ``name``, or for a
    float32 ``out`` first ``widen`` (default: pass ``name`` as float64).

    A sketch's reconstruction ``c·‖r‖·Sᵀ sign(S r)`` can have coordinates a few times
    ``‖r‖``, so vectors whose norms ``out.dtype`` holds may still decode past its range
    (only with float32/float64 norms: float16 norms stop at 65504). The inputs were
    finite, so a non-finite value is such an overflow; min and max find it without a
    temporary the size of ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.coder import _finite_decode
    >>> _finite_decode(np.ones((2, 3), np.float32), "K", "K").shape
    (2, 3)
    >>> try:
    ...     _finite_decode(np.array([[1.0, np.inf]], np.float32), "K", "K")
    ... except ValueError as exc:
    ...     print(str(exc)[:44])
    K: decoded values beyond the largest float32
    """
    if out.size and not (np.isfinite(out.min()) and np.isfinite(out.max())):
        top = float(np.finfo(out.dtype).max)
        widen = f"pass {name} as float64" if widen is None else widen
        fix = f"rescale {name}" if out.dtype == np.float64 else f"{widen} or rescale {name}"
        raise NormOverflowError(f"{what}: decoded values beyond the largest {out.dtype} ({top:.4g}), the "
                                f"dtype of the decode: a sketch's reconstruction c·‖r‖·Sᵀ sign(S r) can "
                                f"have coordinates a few times the norm it scales; {fix}")
    return out


def _check_norms_fit(norms: np.ndarray, dtype: np.dtype, name: str,
                     product: str = "norm times sketch direction") -> None:
    """Raise NormOverflowError for a norm above the largest ``dtype``, the dtype the vectors
    decode in (``product``: how the decode forms them, named in the message); one norm per
    vector, so this is cheap. The MSE, prod and QJL-key coders share it.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.coder import _check_norms_fit
    >>> _check_norms_fit(np.array([1e38]), np.dtype(np.float32), "K")   # fits: nothing
    >>> try:
    ...     _check_norms_fit(np.array([1e39]), np.dtype(np.float32), "K")
    ... except ValueError as exc:
    ...     print(str(exc)[:47])
    K has a vector norm of 1e+39, above the largest
    """
    top = float(np.finfo(dtype).max)
    if norms.size and float(norms.max()) > top:
        fix = f"rescale {name}" if dtype == np.float64 else f"pass {name} as float64 or rescale it"
        raise NormOverflowError(f"{name} has a vector norm of {float(norms.max()):.4g}, above the largest "
                                f"{dtype} ({top:g}), the dtype it decodes in ({product}); {fix}")
