"""The typed bridge to the GPU path: a scheme's parameters as plain arrays.

``Scheme.export()`` returns a :class:`SchemeExport`: for each side the randomized-Hadamard
signs, the Lloyd–Max codebook (centroids and boundaries) and, for TurboQuant-prod, the
QJL sketch and its estimator constant. ``kvstats_gpu`` builds its cache from these and
nothing else (no probing of the numpy coders' internals). Coders export themselves
(``MSEQuantizer.export``, ``ProdQuantizer.export``); which schemes can is
``SchemeDef.gpu`` in the registry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

__all__ = ["SideExport", "SchemeExport"]


@dataclass(frozen=True, eq=False)
class SideExport:
    """One side (keys or values) of a scheme, as the GPU path needs it.

    Attributes
    ----------
    coder : {"mse", "prod"}
        TurboQuant-mse, or TurboQuant-prod (MSE codes + a 1-bit QJL residual).
    bits : int
        Bits of the scalar (Lloyd–Max) codes: the MSE part (``bits − 1`` of a prod coder).
    dim, dim_padded : int
        Head dimension d and coded coordinates d_pad (next power of two for Hadamard).
    signs : ndarray (d_pad,) or None
        ±1 float64 signs of the randomized Hadamard transform ``H·diag(signs)/√d_pad``;
        None when there is no rotation.
    centroids : ndarray (2**bits,)
        float64 Lloyd–Max centroids of the sphere-coordinate law of dimension ``dim_padded``.
    boundaries : ndarray (2**bits − 1,)
        float64 cell boundaries of those centroids.
    sketch : ndarray (m, d) or None
        float64 QJL sketch of the residual (prod only).
    sketch_scale : float
        Estimator constant c of ``c·‖r‖·Sᵀ sign(S r)``; 0.0 without a sketch.
    norm_dtype : numpy.dtype
        Storage dtype of the norms.
    """

    coder: str
    bits: int
    dim: int
    dim_padded: int
    signs: Float[np.ndarray, "d_pad"] | None
    centroids: Float[np.ndarray, "levels"]
    boundaries: Float[np.ndarray, "levels_minus_1"]
    sketch: Float[np.ndarray, "m d"] | None
    sketch_scale: float
    norm_dtype: np.dtype

    @property
    def m(self) -> int:
        """Sketch rows (0 without a sketch)."""
        return 0 if self.sketch is None else int(self.sketch.shape[-2])


@dataclass(frozen=True, eq=False)
class SchemeExport:
    """A scheme's two sides for the GPU path (:meth:`kvstats.quant.schemes.Scheme.export`).

    Examples
    --------
    >>> import kvstats
    >>> ex = kvstats.make_scheme("KQV", 4, 64, seed=0).export()
    >>> ex.key.coder, ex.key.bits, ex.value.coder, ex.value.bits, ex.value.m
    ('mse', 4, 'prod', 3, 64)
    """

    name: str
    dim: int
    key: SideExport
    value: SideExport
