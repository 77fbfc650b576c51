"""The key quantizer of the QJL paper (Zandieh, Daliri, Han, 2024).

Per group of tokens, a few high-magnitude channels are sketched separately from the
rest, each part with its own QJL sign codes and norm (:mod:`kvstats.quant.qjl`);
docs/qjl.md derives the variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxtyping import Float, UInt
from numpy.typing import DTypeLike

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.coder import _check_norms_fit, _finite_decode, as_norm_dtype, float32_limits, norm_limits
from kvstats.quant.qjl import (QJLCodes, _broadcast_batch, _in_dtype, _pm_from_bits,
                               _pm_signs, _reconstruct, _row_norms, _sign_bits, _store_norms, qjl_encode,
                               qjl_reconstruct, qjl_scores)
from kvstats.quant.sketch import SKETCHES, Sketch, _as_draws, make_sketch

__all__ = ["QJLKeyCodes", "QJLKeyQuantizer"]


def _lead(a: np.ndarray, ndim: int) -> np.ndarray:
    """View of ``a`` with new leading axes up to ``ndim`` dimensions (explicit broadcasting)."""
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


@dataclass(frozen=True, eq=False)
class QJLKeyCodes:
    """Codes of :class:`QJLKeyQuantizer`.

    ``inlier``: QJL codes of the keys with their outlier channels zeroed. ``outlier``:
    QJL codes of the outlier channels alone (None when ``n_outliers = 0``).
    ``outlier_idx``: ``(*batch, n_groups, n_outliers)`` channel indices (ascending;
    uint8 for d ≤ 256, else uint16). ``n_tokens``, ``group_size``: the grouping;
    ``dtype``: the encoded keys' dtype (what :meth:`QJLKeyQuantizer.decode` returns).
    """

    inlier: QJLCodes
    outlier: QJLCodes | None
    outlier_idx: UInt[np.ndarray, "*batch groups n_outliers"]
    n_tokens: int
    group_size: int
    dtype: np.dtype = np.dtype(np.float64)

    @property
    def nbytes(self) -> int:
        """Bytes stored (signs, norms, outlier indices)."""
        out = 0 if self.outlier is None else self.outlier.nbytes
        return int(self.inlier.nbytes + out + self.outlier_idx.nbytes)


class QJLKeyQuantizer:
    """The QJL paper's key quantizer, with outlier channels sketched separately.

    Tokens are grouped in runs of ``group_size`` along the token axis (a final partial
    run is its own group). In each group, the ``n_outliers`` channels of largest L2
    norm over the group's tokens are split off. The inlier part ``k_in`` (outlier
    channels zeroed) is sketched with ``m`` rows and the outlier part ``k_out`` with an
    independent sketch of ``outlier_m`` rows, each with its own stored norm. The score is
    the sum of two unbiased estimators (an srht inlier sketch: on average over the
    pair's orientation), each applied to the query restricted to the same channels:

        ĉ(q, k) = c·‖k_in‖·⟨S q_in, sign(S k_in)⟩ + c'·‖k_out‖·⟨S' q_out, sign(S' k_out)⟩,

    so the variance is ((π/2)‖q_in‖²‖k_in‖² − ⟨q,k_in⟩²)/m + ((π/2)‖q_out‖²‖k_out‖² −
    ⟨q,k_out⟩²)/outlier_m (Gaussian): the large outlier energy is multiplied only by the
    query's energy in a few channels.

    Parameters
    ----------
    dim : int
        Head dimension d.
    m : int
        Sketch rows for the inliers (sign bits per token).
    sketch : {"gaussian", "orthogonal", "srht"}
        Kind of both sketches (`kvstats.quant.sketch.make_sketch`), except that with
        ``"srht"`` the outlier part is sketched with ``"orthogonal"``: ``k_out`` has only
        ``n_outliers`` nonzero coordinates, the keys for which an srht estimate is biased
        (with no variance when one coordinate dominates; docs/qjl.md, "SRHT"), while the
        orthogonal constant is exact for every vector. Same rows and bits.
    n_outliers : int
        Outlier channels per group, 0..dim (0: plain QJL, no second sketch).
    outlier_m : int, optional
        Sketch rows for the outlier part; default ``m`` (the outlier part carries most
        of the energy of such keys, so it gets as many sign bits as the rest).
    group_size : int
        Tokens per group for the outlier selection.
    seed, draws
        Randomness and batch of independent draws.
    norm_dtype : float16 (default), float32 or float64

    Attributes
    ----------
    nominal_bits : float
        Sign bits per coordinate actually stored (the Coder protocol of
        :mod:`kvstats.quant.coder`): ``m / dim``, plus ``outlier_m / dim`` when
        ``n_outliers > 0`` (every token's outlier part holds its own signs); norms and
        outlier indices are overheads. The ``qjl`` scheme's default ``m = n·d`` without
        outliers gives its budget n; outliers at the default ``outlier_m = m`` double it.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import QJLKeyQuantizer
    >>> qk = QJLKeyQuantizer(64, 128, n_outliers=4, group_size=16, seed=0)
    >>> K = np.random.default_rng(0).standard_normal((40, 64)); K[:, 3] *= 20
    >>> codes = qk.encode(K)
    >>> codes.outlier_idx.shape, bool((codes.outlier_idx == 3).any(axis=-1).all())
    ((3, 4), True)
    >>> qk.scores(K[:2], codes).shape
    (2, 40)
    >>> qk.nominal_bits, QJLKeyQuantizer(64, 128).nominal_bits   # 128 + 128 signs over 64
    (4.0, 2.0)
    """

    def __init__(self, dim: int, m: int, sketch: str = "gaussian", n_outliers: int = 0,
                 outlier_m: int | None = None, group_size: int = 32, seed: SeedLike = 0,
                 draws: int | tuple[int, ...] = (), norm_dtype: DTypeLike = np.float16,
                 name: str = "K"):
        self.dim = check_int(dim, "dim", low=1)
        self.name = name  # named in norm warnings and errors
        self.m = check_int(m, "m", low=1)
        self.sketch_kind = check_choice(sketch, "sketch", SKETCHES)
        self.n_outliers = check_int(n_outliers, "n_outliers", low=0, high=self.dim)
        self.outlier_m = self.m if outlier_m is None else check_int(outlier_m, "outlier_m", low=1)
        # the outlier sketch's signs are code bits of every token, as the inliers'
        self.nominal_bits = (self.m + (self.outlier_m if self.n_outliers else 0)) / self.dim
        self.group_size = check_int(group_size, "group_size", low=1)
        self.draws = _as_draws(draws)
        self.norm_dtype = as_norm_dtype(norm_dtype)
        self.idx_dtype = np.dtype(np.uint8 if self.dim <= 256 else np.uint16)
        in_rng, out_rng = as_generator(seed).spawn(2)
        self.sketch = make_sketch(sketch, self.m, self.dim, seed=in_rng, draws=self.draws)
        # k_out is axis-aligned (n_outliers channels): srht's constant is exact only on
        # average over orientations, so that part takes the orthogonal sketch
        out_kind = "orthogonal" if self.sketch_kind == "srht" else self.sketch_kind
        self.outlier_sketch = (make_sketch(out_kind, self.outlier_m, self.dim, seed=out_rng,
                                           draws=self.draws) if self.n_outliers else None)

    def hold_sketches_as(self, dtype: DTypeLike) -> None:
        """Hold the dense sketch matrices (Gaussian, orthogonal) in ``dtype`` from now on
        (:meth:`~kvstats.quant.sketch.Sketch.held_as`).

        For a caller that codes and decodes arrays of that dtype only (the quantized
        cache: float32). Every product casts the matrix to its input's dtype
        (:meth:`~kvstats.quant.sketch.Sketch.project`), to the same values and layout as
        a matrix held in that dtype, so float32 inputs give the same codes and decodes
        bit for bit, at half the memory of float64. Float64 inputs would then multiply
        by the rounded matrix. An ``"srht"`` sketch holds only its ±1 signs: in int8
        (exact: the same numbers for either dtype, at 1/8 of the bytes); the outlier
        sketch of ``sketch="srht"`` is orthogonal, a dense matrix.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import QJLKeyQuantizer
        >>> qk = QJLKeyQuantizer(64, 128, n_outliers=4, group_size=16, seed=0)
        >>> K = np.random.default_rng(0).standard_normal((40, 64)).astype(np.float32)
        >>> before = qk.encode(K)
        >>> qk.hold_sketches_as(np.float32)
        >>> qk.sketch.matrix.dtype, bool(np.array_equal(qk.encode(K).inlier.signs, before.inlier.signs))
        (dtype('float32'), True)
        """
        dtype = check_choice(np.dtype(dtype), "dtype", [np.dtype(np.float32), np.dtype(np.float64)])
        self.sketch = self.sketch.held_as(dtype)
        if self.outlier_sketch is not None:
            self.outlier_sketch = self.outlier_sketch.held_as(dtype)

    # -- grouping
    def n_groups(self, n_tokens: int) -> int:
        """Number of token groups (the last may be partial).

        Examples
        --------
        >>> from kvstats import QJLKeyQuantizer
        >>> QJLKeyQuantizer(64, 64, group_size=32).n_groups(100)
        4
        """
        return -(-check_int(n_tokens, "n_tokens", low=1) // self.group_size)

    def _token_mask(self, idx: np.ndarray, n_tokens: int) -> np.ndarray:
        """Boolean ``(*batch, n_tokens, d)``: True on each token's group's outlier channels."""
        mask = np.zeros((*idx.shape[:-1], self.dim), dtype=bool)
        np.put_along_axis(mask, idx.astype(np.intp), True, axis=-1)
        return np.repeat(mask, self.group_size, axis=-2)[..., :n_tokens, :]

    def _pad_tokens(self, x: np.ndarray, axis: int = -2) -> np.ndarray:
        n = x.shape[axis]
        pad = self.n_groups(n) * self.group_size - n
        if pad == 0:
            return x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, pad)
        return np.pad(x, widths)

    def _split(self, K: Float[np.ndarray, "*batch n d"]) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray | None, np.ndarray]:
        """Validated keys ``K``, the inlier part, the outlier part (None without outliers)
        and the per-group outlier channels ``(*batch, G, n_outliers)``."""
        K = as_float_array(K, "K", min_ndim=2)
        if K.shape[-1] != self.dim:
            raise ValueError(f"K must have last dimension dim={self.dim}; received shape {K.shape}")
        n_tokens = K.shape[-2]
        g = self.n_groups(n_tokens)
        if self.n_outliers == 0:
            return K, K, None, np.zeros((*K.shape[:-2], g, 0), dtype=self.idx_dtype)
        # Zero padding of the last partial group leaves its channel norms unchanged.
        padded = self._pad_tokens(K)
        energy = np.square(padded).reshape(*K.shape[:-2], g, self.group_size, self.dim).sum(axis=-2)
        top = np.argsort(-energy, axis=-1, kind="stable")[..., :self.n_outliers]
        idx = np.sort(top, axis=-1).astype(self.idx_dtype)
        mask = self._token_mask(idx, n_tokens)
        k_out = np.where(mask, K, 0).astype(K.dtype, copy=False)
        k_in = np.where(mask, 0, K).astype(K.dtype, copy=False)
        return K, k_in, k_out, idx

    def encode(self, K: Float[np.ndarray, "*batch n d"]) -> QJLKeyCodes:
        """Encode keys ``(*batch, N, d)``."""
        K, k_in, k_out, idx = self._split(K)
        outlier = (None if k_out is None else
                   qjl_encode(self.outlier_sketch, k_out, self.norm_dtype, f"{self.name} (outliers)"))
        inlier = qjl_encode(self.sketch, k_in, self.norm_dtype, self.name)
        for part in (inlier, outlier):  # what decode multiplies in K's dtype (as MSEQuantizer)
            if part is not None:
                _check_norms_fit(part.norms, K.dtype, self.name)
        return QJLKeyCodes(inlier, outlier, idx, K.shape[-2], self.group_size, K.dtype)

    def storable_limits(self, K: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32, the norms' ``norm_dtype`` and ``K``'s dtype, which decoding multiplies
        them in: a key's norm bounds its inlier and outlier parts' norms, which `encode`
        stores (computed as it computes them). A sketch's reconstruction can still reach
        a few times the norm: `decode` and `roundtrip` check their output's range.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.quant.qjl_keys import QJLKeyQuantizer
        >>> QJLKeyQuantizer(4, 8).storable_limits(np.array([[3.0, 4.0, 0.0, 0.0]]))[1]
        ('vector norms (stored as float16)', 65504.0, 5.0)
        """
        K = as_float_array(K, "K", min_ndim=2)
        if not K.size:
            return float32_limits(K)
        norms = _row_norms(K)
        return (float32_limits(K) + norm_limits(norms, self.norm_dtype)
                + [(f"vector norms (decoded in {K.dtype})", float(np.finfo(K.dtype).max), float(norms.max()))])

    def roundtrip(self, K: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(K))`` bit for bit, without packing the sign bits.

        Each part's signs go straight to ±1 (unpacking packed bits gives them back
        exactly) with the same norm storage, casts and validation as encode/decode.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import QJLKeyQuantizer
        >>> qk = QJLKeyQuantizer(64, 128, n_outliers=4, group_size=16, seed=0)
        >>> K = np.random.default_rng(0).standard_normal((40, 64)).astype(np.float32)
        >>> bool(np.array_equal(qk.roundtrip(K), qk.decode(qk.encode(K))))
        True
        """
        K, k_in, k_out, idx = self._split(K)

        def part(sketch: Sketch, x: np.ndarray) -> np.ndarray:
            # qjl_encode then qjl_reconstruct, minus the pack/unpack of the signs
            _broadcast_batch(x.shape[:-2], sketch.draws, "x")
            sketch = _in_dtype(sketch, K.dtype)  # one cast for both products
            norms = _store_norms(x, self.norm_dtype, self.name)
            _check_norms_fit(norms, K.dtype, self.name)
            return _reconstruct(sketch, _pm_from_bits(_sign_bits(sketch, x), K.dtype), norms,
                                K.dtype)

        rec = part(self.sketch, k_in)
        if k_out is not None:
            rec = np.where(self._token_mask(idx, K.shape[-2]), part(self.outlier_sketch, k_out), rec)
        return _finite_decode(rec, self.name, self.name)

    def _check(self, codes: object) -> QJLKeyCodes:
        if not isinstance(codes, QJLKeyCodes):
            raise TypeError(f"codes must be QJLKeyCodes from QJLKeyQuantizer.encode; "
                            f"received {type(codes).__name__}")
        if codes.group_size != self.group_size or codes.outlier_idx.shape[-1] != self.n_outliers:
            raise ValueError(f"codes were made with group_size={codes.group_size}, "
                             f"n_outliers={codes.outlier_idx.shape[-1]}; this quantizer has "
                             f"group_size={self.group_size}, n_outliers={self.n_outliers}")
        return codes

    def _grouped_scores(self, sketch: Sketch, sq: np.ndarray, part: QJLCodes,
                        n_tokens: int) -> np.ndarray:
        """Scores when the sketched query depends on the key's group.

        ``sq``: ``(..., n_q, G, m)`` sketched (restricted) queries per group; returns
        ``(..., n_q, N)`` = c·‖k‖·⟨sq[group(k)], sign(S k)⟩ via one batched matmul per group.
        """
        signs = self._pad_tokens(_pm_signs(part.signs, sketch.m, sq.dtype))  # (..., G*gs, m)
        g = sq.shape[-2]
        signs = signs.reshape(*signs.shape[:-2], g, self.group_size, sketch.m)
        raw = np.matmul(np.moveaxis(sq, -3, -2), np.swapaxes(signs, -1, -2))  # (..., G, n_q, gs)
        raw = np.moveaxis(raw, -2, -3)  # (..., n_q, G, gs)
        raw = raw.reshape(*raw.shape[:-2], g * self.group_size)[..., :n_tokens]
        return raw * (sketch.scale * part.norms.astype(sq.dtype))[..., None, :]

    def scores(self, q: Float[np.ndarray, "*batch n_q d"],
               codes: QJLKeyCodes) -> Float[np.ndarray, "*batch n_q n"]:
        """Unbiased estimates of ``q @ K.T``, shape ``(*batch, n_q, N)``, dtype of ``q``.

        Equal (to rounding) to ``q @ decode(codes).T``.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import QJLKeyQuantizer
        >>> qk = QJLKeyQuantizer(32, 64, n_outliers=2, group_size=8, seed=0)
        >>> rng = np.random.default_rng(1)
        >>> K, q = rng.standard_normal((20, 32)), rng.standard_normal((3, 32))
        >>> codes = qk.encode(K)
        >>> bool(np.allclose(qk.scores(q, codes), q @ qk.decode(codes).T))
        True
        """
        codes = self._check(codes)
        q = as_float_array(q, "q", min_ndim=2)
        if q.shape[-1] != self.dim:
            raise ValueError(f"q must have last dimension dim={self.dim}; received shape {q.shape}")
        if self.n_outliers == 0:
            return qjl_scores(self.sketch, q, codes.inlier)
        try:
            np.broadcast_shapes(q.shape[:-2], codes.inlier.signs.shape[:-2])
        except ValueError as exc:
            raise ValueError(f"the batch axes of q {q.shape[:-2]} must broadcast against those "
                             f"of the codes {codes.inlier.signs.shape[:-2]}") from exc
        idx = codes.outlier_idx.astype(np.intp)  # (*b, G, n_out)
        # Query values on each group's outlier channels: (..., n_q, G, n_out).
        qx, ix = q[..., :, None, :], idx[..., None, :, :]
        nd = max(qx.ndim, ix.ndim)
        q_out = np.take_along_axis(_lead(qx, nd), _lead(ix, nd), axis=-1)

        def restricted(sketch: Sketch) -> np.ndarray:
            # S q_out for each group: Σ_j∈idx S[:, j] q_j, (..., n_q, G, m).
            st = np.swapaxes(sketch.matrix, -1, -2)[..., None, :, :].astype(q.dtype)
            ix = idx[..., None]
            nd = max(st.ndim, ix.ndim)
            cols = np.take_along_axis(_lead(st, nd), _lead(ix, nd), axis=-2)  # (..., G, n_out, m)
            return np.matmul(q_out[..., :, :, None, :], cols[..., None, :, :, :])[..., 0, :]

        sq_full = self.sketch._project(q)
        sq_in = sq_full[..., :, None, :] - restricted(self.sketch)
        n = codes.n_tokens
        return (self._grouped_scores(self.sketch, sq_in, codes.inlier, n)
                + self._grouped_scores(self.outlier_sketch, restricted(self.outlier_sketch),
                                       codes.outlier, n)).astype(q.dtype, copy=False)

    def decode(self, codes: QJLKeyCodes,
               dtype: DTypeLike | None = None) -> Float[np.ndarray, "*batch n d"]:
        """Unbiased reconstruction ``(*batch, N, d)``: each part's ``c‖k‖Sᵀsign(Sk)`` on its channels.

        In the dtype that was encoded unless ``dtype`` is given. A sketch's reconstruction
        can reach a few times the norm: a result past that dtype's range raises
        NormOverflowError (as `roundtrip`), never an inf.
        """
        codes = self._check(codes)
        dtype = codes.dtype if dtype is None else dtype
        rec = qjl_reconstruct(self.sketch, codes.inlier, dtype)
        if self.n_outliers:
            mask = self._token_mask(codes.outlier_idx, codes.n_tokens)
            rec = np.where(mask, qjl_reconstruct(self.outlier_sketch, codes.outlier, dtype), rec)
        return _finite_decode(rec, f"codes of {self.name}", self.name,
                              f"decode in float64 ({self.name} encoded as float64, or dtype=np.float64)")

    def stored_bits(self, n_tokens: int) -> dict[str, int]:
        """Total bits stored for ``n_tokens`` keys, by part.

        Per token: ``m`` (+ ``outlier_m``) sign bits and one (two) norms; per group:
        ``n_outliers · ceil(log2 d)`` index bits (the information in the indices; they
        are held in uint8/uint16 in memory).

        Examples
        --------
        >>> from kvstats import QJLKeyQuantizer
        >>> QJLKeyQuantizer(128, 256, n_outliers=4, outlier_m=64, group_size=32).stored_bits(64)
        {'signs': 16384, 'norm': 1024, 'outlier_signs': 4096, 'outlier_norm': 1024, 'outlier_indices': 56}
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        norm_bits = 8 * self.norm_dtype.itemsize
        parts = {"signs": self.m * n_tokens, "norm": norm_bits * n_tokens}
        if self.n_outliers:
            parts["outlier_signs"] = self.outlier_m * n_tokens
            parts["outlier_norm"] = norm_bits * n_tokens
            parts["outlier_indices"] = (self.n_groups(n_tokens) * self.n_outliers
                                        * (self.dim - 1).bit_length())
        return parts

    def describe(self) -> dict[str, Any]:
        """Every setting: coder kind, sketch kinds, rows, outliers, group size, norm dtype, draws."""
        return {"coder": "qjl", "quantizer": "qjl_key", "dim": self.dim, "sketch": self.sketch_kind, "m": self.m,
                "n_outliers": self.n_outliers,
                "outlier_sketch": self.outlier_sketch.kind if self.n_outliers else None,
                "outlier_m": self.outlier_m if self.n_outliers else 0,
                "group_size": self.group_size, "norm_dtype": str(self.norm_dtype),
                "draws": list(self.draws)}
