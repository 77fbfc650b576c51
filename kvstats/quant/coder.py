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

Coders that the GPU path supports (MSE, Prod) also implement :class:`ExportableCoder`:
``export()`` returns a :class:`kvstats.quant.export.SideExport` of plain arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_int

if TYPE_CHECKING:
    from kvstats.quant.export import SideExport

__all__ = ["Codes", "Coder", "ExportableCoder", "IdentityCodes", "IdentityCoder"]


@runtime_checkable
class Codes(Protocol):
    """What a coder stores for a batch of vectors (a frozen dataclass)."""

    @property
    def nbytes(self) -> int:
        """Real bytes stored (every array of the codes)."""


@runtime_checkable
class Coder(Protocol):
    """One side (keys or values) of a scheme; see the module docstring for the contract."""

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
    """A coder the GPU path can run: it exports its parameters as plain arrays."""

    def export(self) -> SideExport:
        """Rotation signs, codebook and sketch (:class:`kvstats.quant.export.SideExport`)."""


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

    The reference scheme ``identity`` must reproduce its input exactly.

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

    def describe(self) -> dict[str, Any]:
        """``{"coder": "identity"}``."""
        return {"coder": "identity"}
