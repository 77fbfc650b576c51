"""A subspace-aware transform coder (``klt``): principal axes, water-filled bits, Lloyd–Max.

The classical transform code (Huang & Schultheiss 1963; Gersho & Gray, *Vector
Quantization and Signal Compression*, ch. 8) applied to one head's cache:

1. **calibration** — the mean ``μ``, the covariance and its eigen-decomposition
   ``U diag(λ) Uᵀ`` of a set of calibration tokens, the eigenvalues shrunk toward their
   mean by Ledoit–Wolf's intensity (a sample's eigenvalues spread wider than the axes'
   variances on other tokens); the ``rank`` leading axes are kept;
2. **allocation** — ``B = bits·d`` code bits per vector are spread over those axes by
   greedy reverse water-filling: each bit goes to the axis whose distortion it lowers
   most, ``λᵢ·(D(bᵢ) − D(bᵢ+1))`` with ``D`` the Lloyd–Max distortion of a unit
   Gaussian (``D(0) = 1``), at most 8 bits per axis (the Lloyd–Max codebooks); the
   gains decrease in ``bᵢ``, so this is the top-B of all gains (ties by axis order);
3. **coding** — coefficient ``yᵢ = uᵢ·(x − μ)`` with the ``bᵢ``-bit Lloyd–Max codebook of
   N(0, λᵢ) (the Gaussian one scaled by ``σᵢ = √λᵢ``); axes with no bits decode to 0;
   ``x̂ = μ + Σ uᵢ ŷᵢ``.

**Calibration tokens are never the coded ones** (two-fold cross-fitting): the ``n``
tokens of a call are cut into blocks of ``group_size`` (the last block absorbs the
remainder; one block when ``n < 2·group_size``), each block into two halves (the first
``⌊m/2⌋`` tokens and the rest), and each half is coded with the statistics fitted on the
*other* half. This works inside a sweep (every trial's cache fits its own axes) and in a
cache that codes whole blocks. A call needs at least 2 tokens.

**Bits, every one counted.** Per vector ``min(bits·d, 8·rank)`` code bits (the budget is
capped when ``rank`` axes cannot hold it; ``stored_bits`` counts what is stored). Per
half, the side information it is decoded with: the ``rank × d`` basis, ``μ`` and the
``rank`` scales ``σᵢ`` in float16 and one byte of allocation per axis,
``16·rank·d + 16·d + 24·rank`` bits — two such sets per block, amortised over the
block's tokens: ``2·(16·rank·d + 16·d + 24·rank)/(group_size·d)`` bits per coordinate
(4.1 at d = rank = 128 and 1,024 tokens; 0.54 at rank 16). The encoder projects with the
stored (float16) basis and mean, so decoding uses exactly what is stored. A mean or scale
beyond float16 (65504) is a ValueError (checked before any product of the tokens can
overflow); calibration tokens whose every scale is below float16's smallest normal
(6.1e-5) warn: those axes keep little precision, and below ~3e-8 decode to the mean.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_int
from kvstats.quant.codebook import lloyd_max_codebook
from kvstats.quant.coder import float32_limits

__all__ = ["KLTCodes", "KLTCoder", "water_fill_bits", "MAX_AXIS_BITS"]

MAX_AXIS_BITS = 8
_FP16_BITS = 16
_FP16_MAX = float(np.finfo(np.float16).max)
_FP16_NORMAL = float(np.finfo(np.float16).smallest_normal)  # below: subnormal, precision lost


def _raise_beyond_fp16(name: str, what: str, value: float) -> None:
    raise ValueError(f"{name} is beyond klt's float16 side information: a {what} {value:.4g} > "
                     f"65504; received such {name}")


def _lm_distortion() -> np.ndarray:
    """``D(b)`` for b = 0..8: the Lloyd–Max distortion of N(0, 1) (D(0) = 1)."""
    return np.array([1.0] + [lloyd_max_codebook(b).mse for b in range(1, MAX_AXIS_BITS + 1)])


def _per_half(a: np.ndarray, core: int) -> np.ndarray:
    """``max |a|`` per half ``(H,)`` of ``a (*batch, H, *core axes)`` (0 for an empty batch)."""
    axes = tuple(i for i in range(a.ndim) if i != a.ndim - 1 - core)
    return np.max(np.abs(a), axis=axes, initial=0.0)


def _as_held(basis: np.ndarray) -> np.ndarray:
    """``basis (..., rank, d)`` in float64, each matrix laid out as the covariance route
    fits it and as `KLTCoder._sides` holds it (the rank axis contiguous): the products
    round by layout, so one layout for every route, call and slice of the codes keeps
    ``roundtrip`` equal to ``decode(encode())`` bit for bit."""
    return np.swapaxes(np.swapaxes(basis, -1, -2).astype(np.float64, order="C"), -1, -2)


def _merge(parts: list[tuple[np.ndarray, tuple[np.ndarray, ...]]], ok: np.ndarray) -> tuple[np.ndarray, ...]:
    """The two routes' ``(mu, frob, lam, basis)`` of `KLTCoder._fit`, each on its halves
    (boolean ``sel`` over the halves axis: -1 of mu and frob, -2 of lam, -3 of basis)."""
    out = []
    for i, axis in enumerate((-1, -1, -2, -3)):
        ref = parts[0][1][i]
        shape = list(ref.shape)
        shape[axis] = ok.size
        a = np.empty(shape, ref.dtype)
        for sel, arrays in parts:
            np.moveaxis(a, axis, 0)[sel] = np.moveaxis(arrays[i], axis, 0)
        out.append(a)
    return tuple(out)


def water_fill_bits(variances: Float[np.ndarray, "*batch r"], total: int) -> np.ndarray:
    """Integer bits per axis (uint8, ``(*batch, r)``): ``total`` bits by greedy reverse
    water-filling over Lloyd–Max distortions, at most 8 per axis.

    Parameters
    ----------
    variances : array ``(*batch, r)``
        Non-negative variances ``λᵢ`` of the axes.
    total : int
        Bits to spend per vector, at most ``8·r``.

    Examples
    --------
    >>> water_fill_bits(np.array([4.0, 1.0, 0.0]), 4)   # the big axis first
    array([3, 1, 0], dtype=uint8)
    >>> water_fill_bits(np.ones(4), 6)                  # equal axes: ties by axis order
    array([2, 2, 1, 1], dtype=uint8)
    """
    lam = as_float_array(variances, "variances", min_ndim=1)
    if np.any(lam < 0):
        raise ValueError(f"variances must be non-negative; received minimum {float(lam.min())}")
    r = lam.shape[-1]
    total = check_int(total, "total", low=0, high=MAX_AXIS_BITS * r)
    gain = -np.diff(_lm_distortion())                         # decreasing in b
    gains = (lam[..., :, None] * gain).reshape(*lam.shape[:-1], r * MAX_AXIS_BITS)
    order = np.argsort(-gains, axis=-1, kind="stable")[..., :total]
    return np.sum(order[..., None] // MAX_AXIS_BITS == np.arange(r), axis=-2).astype(np.uint8)


@dataclass(frozen=True, eq=False)
class KLTCodes:
    """What a klt side stores, per half ``h`` of every block: ``basis (*batch, H, rank, d)``,
    ``mean (*batch, H, d)``, ``sigma (*batch, H, rank)`` (float16), ``alloc (*batch, H,
    rank)`` (uint8); and ``packed (*batch, n, ⌈B/8⌉)``, each vector's codes in axis order,
    ``bᵢ`` bits each, least significant first."""

    packed: np.ndarray
    basis: np.ndarray
    mean: np.ndarray
    sigma: np.ndarray
    alloc: np.ndarray
    bounds: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored: packed codes and every half's side information."""
        return int(sum(a.nbytes for a in (self.packed, self.basis, self.mean, self.sigma, self.alloc)))


class KLTCoder:
    """One side of the ``klt`` scheme (a :class:`~kvstats.quant.coder.Coder`).

    Parameters
    ----------
    bits : int
        Budget n: ``n·d`` code bits per vector (1..8).
    dim : int
        Head dimension d.
    rank : int or None
        Principal axes coded (None: all d).
    group_size : int
        Tokens per block (each block's two halves calibrate each other); ≥ 2.
    name : str
        What error messages call the coded array (the scheme passes "K" or "V").

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((400, 2)) @ np.array([[3.0, 0.0], [0.0, 0.1]])
    >>> coder = KLTCoder(2, 2, group_size=400)
    >>> codes = coder.encode(x)
    >>> codes.alloc[:, 0].tolist()                  # 4 bits: all on the strong axis
    [4, 4]
    >>> bool(np.array_equal(coder.roundtrip(x), coder.decode(codes)))
    True
    >>> coder.stored_bits(400)
    {'codes': 1600.0, 'side': 288.0}
    """

    def __init__(self, bits: int, dim: int, rank: int | None = None, group_size: int = 1024,
                 name: str = "x"):
        self.bits = check_int(bits, "bits", low=1, high=MAX_AXIS_BITS)
        self.dim = check_int(dim, "dim", low=1)
        self.rank = self.dim if rank is None else check_int(rank, "rank", low=1, high=self.dim)
        self.group_size = check_int(group_size, "group_size", low=2)
        self.code_bits = min(self.bits * self.dim, MAX_AXIS_BITS * self.rank)
        self.nominal_bits = self.code_bits / self.dim
        self._distortion = _lm_distortion()
        self.name = name

    # ------------------------------------------------------------------ halves
    def halves(self, n: int) -> tuple[int, ...]:
        """Token boundaries of the halves: ``(0, a₁, b₁, a₂, ..., n)``; half ``2k`` and
        ``2k+1`` are the two halves of block k.

        Examples
        --------
        >>> KLTCoder(2, 8, group_size=10).halves(25)    # the last block holds 15 tokens
        (0, 5, 10, 17, 25)
        """
        n_blocks = max(1, n // self.group_size)
        starts = [k * self.group_size for k in range(n_blocks)] + [n]
        out = [0]
        for a, b in zip(starts[:-1], starts[1:]):
            out += [a + (b - a) // 2, b]
        return tuple(out)

    @staticmethod
    def _half_groups(bounds: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The halves by length, to code each length's halves as one stack: ``[(hs,
        tokens)]``, ``hs`` the halves' indices and ``tokens (len(hs), length)`` their token
        positions; at most four lengths (a block's two halves, the last block's two)."""
        starts, sizes = np.asarray(bounds[:-1]), np.diff(bounds)
        return [(hs, starts[hs, None] + np.arange(size))
                for size in np.unique(sizes) for hs in [np.flatnonzero(sizes == size)]]

    @staticmethod
    def _take(side: tuple[np.ndarray, ...], hs: np.ndarray) -> tuple[np.ndarray, ...]:
        """The side information ``(basis, mean, sigma, alloc)`` of halves ``hs``."""
        basis, mean, sigma, alloc = side
        return basis[..., hs, :, :], mean[..., hs, :], sigma[..., hs, :], alloc[..., hs, :]

    def _side_bits(self) -> int:
        return _FP16_BITS * (self.rank * self.dim + self.dim + self.rank) + 8 * self.rank

    # ------------------------------------------------------------------ fit
    def _fit(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """Side information fitted on one half's tokens ``y (*batch, m, d)`` (float64)."""
        basis, mean, sigma, alloc = self._fit_halves(y[..., None, :, :], np.zeros(1, np.intp))
        return basis[..., 0, :, :], mean[..., 0, :], sigma[..., 0, :], alloc[..., 0, :]

    def _fit_halves(self, y: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, ...]:
        """Side information fitted on a stack of halves' tokens ``y (*batch, H, m, d)``
        (float64), each half ``y[..., h, :, :]`` fitted as if alone: every step is per
        matrix (batched BLAS and LAPACK), and the choice between the Gram and the
        covariance route is made per half (over the batch, as a call of that half alone).
        ``steps (H,)``: the order in which a fit one half at a time reaches them; a range
        error names the first half out of range in that order."""
        mean = y.mean(axis=-2)
        c = y - mean[..., None, :]
        m, d = y.shape[-2], y.shape[-1]
        self._check_side_range(mean, c, steps)
        ok = np.zeros(y.shape[-3], dtype=bool)          # halves taking the Gram route
        if self.rank < m < d:
            # fewer tokens than dimensions: the m × m Gram matrix c cᵀ has the covariance's
            # nonzero eigenvalues (times m), and uᵢ ↦ cᵀuᵢ/sᵢ maps its eigenvectors onto the
            # covariance's axes (the SVD of c), in O(m²d + m³) instead of the d × d
            # covariance's O(md² + d³): ≈ 4× faster at d = 1024, m = 512. Only when the data
            # span all ``rank`` kept axes: an axis of (numerically) zero variance is
            # arbitrary, and there the eigendecomposition's choice is kept
            g = c @ np.swapaxes(c, -1, -2)
            ev, u = np.linalg.eigh(g)                                # ascending
            ev, u = ev[..., ::-1][..., :self.rank], u[..., ::-1][..., :self.rank]
            ok = np.all(ev[..., -1] > ev[..., 0] * 1e-8, axis=tuple(range(ev.ndim - 2)))
        parts = []          # (halves, (mu, frob, lam, basis)) of each route
        if ok.any():
            sel = slice(None) if ok.all() else ok
            g, ev, u, cg = g[..., sel, :, :], ev[..., sel, :], u[..., sel, :, :], c[..., sel, :, :]
            parts.append((sel, (np.trace(g, axis1=-2, axis2=-1) / (m * d),   # tr(cᵀc) = tr(ccᵀ)
                                np.sum(g ** 2, axis=(-2, -1)) / m ** 2,      # ‖cᵀc‖² = ‖ccᵀ‖²
                                ev / m,
                                (np.swapaxes(u, -1, -2) @ cg) / np.sqrt(ev)[..., None])))
        if not ok.all():
            sel = slice(None) if not ok.any() else ~ok
            cc = c[..., sel, :, :]
            cov = np.swapaxes(cc, -1, -2) @ cc / m
            lam, vec = np.linalg.eigh(cov)                          # ascending
            parts.append((sel, (np.trace(cov, axis1=-2, axis2=-1) / d, np.sum(cov ** 2, axis=(-2, -1)),
                                lam[..., ::-1][..., :self.rank],
                                np.swapaxes(vec[..., ::-1][..., :self.rank], -1, -2))))
        mu, frob, lam, basis = parts[0][1] if len(parts) == 1 else _merge(parts, ok)
        # Ledoit–Wolf shrinkage toward (tr S/d)·I (J. Multivariate Anal. 88, 2004, Lemma
        # 3.2-3.4, norm ‖A‖² = tr(AAᵀ)/d): the sample's spread of eigenvalues overstates the
        # axes' variances on other tokens (for white keys at m = 4d: 0.25..2.25 instead of 1)
        delta = np.maximum(frob / d - mu ** 2, 0.0)
        beta = (np.sum(np.sum(c ** 2, axis=-1) ** 2, axis=-1) / m - frob) / (m * d)
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(delta > 0, np.clip(beta / delta, 0.0, 1.0), 1.0)[..., None]
        lam = (1 - rho) * np.clip(lam, 0.0, None) + rho * mu[..., None]
        sigma = np.sqrt(lam)
        self._check_halves(steps, ("mean of", _per_half(mean, 1)), ("scale of", _per_half(sigma, 1)))
        sigma16 = sigma.astype(np.float16)
        alloc = water_fill_bits(sigma16.astype(np.float64) ** 2, self.code_bits)
        return basis.astype(np.float16), mean.astype(np.float16), sigma16, alloc

    def _check_side_range(self, mean: np.ndarray, c: np.ndarray, steps: np.ndarray) -> None:
        """The float16 range checks of `_fit_halves`, made before any product of the tokens
        ``c`` (centred, ``(*batch, H, m, d)``) can overflow: the shrunk largest scale is at
        least ``max|c| / sqrt(m·d)`` (a token's ``c cᵀ/m`` is below the covariance, whose
        largest eigenvalue and trace/d both bound it), so beyond that bound the fit would
        be refused anyway."""
        m, d = c.shape[-2], c.shape[-1]
        self._check_halves(steps, ("mean of", _per_half(mean, 1)),
                           ("scale of at least", _per_half(c, 2) / math.sqrt(m * d)))

    def _check_halves(self, steps: np.ndarray, *checks: tuple[str, np.ndarray]) -> None:
        """Raise for the first half (by ``steps``) whose value of a check is beyond float16
        (or not finite: a mean that overflowed to inf), the first check it fails."""
        bad = np.stack([~(v <= _FP16_MAX) for _, v in checks])       # (checks, H)
        if bad.any():
            h = np.flatnonzero(bad.any(axis=0))
            h = h[np.argmin(steps[h])]
            what, v = checks[int(np.argmax(bad[:, h]))]
            _raise_beyond_fp16(self.name, what, float(v[h]))

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 and the float16 mean and scales `_fit` checks: a group's mean and scales
        are at most its largest centred norm, at most twice its largest token norm (a
        bound per token: the group's other tokens are not known yet in a cache).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.quant.klt import KLTCoder
        >>> KLTCoder(2, 4).storable_limits(np.array([[3.0, 4.0, 0.0, 0.0]]))[1]
        ("vector norms (klt's float16 mean and scales: a bound sufficient for any block)", 32752.0, 5.0)
        """
        x = np.asarray(x)
        if not x.size:
            return []
        with np.errstate(over="ignore"):   # beyond float32 (or its squares): inf, refused
            x32 = x.astype(np.float32)
            norms = np.sqrt(np.einsum("...i,...i->...", x32, x32))
        return float32_limits(x) + [("vector norms (klt's float16 mean and scales: a bound sufficient for any "
                                     "block)", _FP16_MAX / 2, float(norms.max()))]

    def _check(self, x: np.ndarray) -> np.ndarray:
        x = as_float_array(x, self.name, min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"{self.name} must have last axis of length {self.dim}; "
                             f"received {_describe(x)}")
        if x.shape[-2] < 2:
            raise ValueError(f"{self.name} must hold at least 2 tokens for klt (each half of the cache "
                             f"calibrates the other); received {_describe(x)}")
        # C order (no copy when it is): the calibration's products round by layout, and a
        # last-bit change in a half's statistics can recode every token of the other half
        return np.ascontiguousarray(x)

    def _code_half(self, x: np.ndarray, side: tuple[np.ndarray, ...]) -> np.ndarray:
        """Codes ``(*batch, m, rank)`` (uint8) of tokens ``x`` with one half's side information."""
        basis, alloc = _as_held(side[0]), side[3]
        mean, sigma = (s.astype(np.float64) for s in side[1:3])
        y = (x - mean[..., None, :]) @ np.swapaxes(basis, -1, -2)          # (*batch, m, rank)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(sigma[..., None, :] > 0, y / np.where(sigma > 0, sigma, 1.0)[..., None, :], 0.0)
        codes = np.zeros(z.shape, dtype=np.uint8)
        b = np.broadcast_to(alloc[..., None, :], z.shape)
        for bits in range(1, MAX_AXIS_BITS + 1):
            sel = b == bits
            if sel.any():
                codes[sel] = lloyd_max_codebook(bits)._encode(np.ascontiguousarray(z[sel]))
        return codes

    def _decode_half(self, codes: np.ndarray, side: tuple[np.ndarray, ...]) -> np.ndarray:
        basis, mean, sigma, alloc = side
        y = np.zeros(codes.shape)
        b = np.broadcast_to(alloc[..., None, :], codes.shape)
        for bits in range(1, MAX_AXIS_BITS + 1):
            sel = b == bits
            if sel.any():
                y[sel] = lloyd_max_codebook(bits).centroids[codes[sel]]
        y *= sigma.astype(np.float64)[..., None, :]
        return mean.astype(np.float64)[..., None, :] + y @ _as_held(basis)

    # ------------------------------------------------------------------ packing
    def _positions(self, alloc: np.ndarray) -> np.ndarray:
        """Stream positions ``(*batch, B)`` into each vector's (rank·8) bit slots."""
        used = np.arange(MAX_AXIS_BITS) < alloc[..., None]            # (*batch, rank, 8)
        flat = used.reshape(*alloc.shape[:-1], -1)
        return np.argsort(~flat, axis=-1, kind="stable")[..., :self.code_bits]

    def _pack(self, codes: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        slots = (codes[..., None] >> np.arange(MAX_AXIS_BITS, dtype=np.uint8)) & np.uint8(1)
        slots = slots.reshape(*codes.shape[:-1], -1)                     # (*batch, m, rank·8)
        pos = np.broadcast_to(self._positions(alloc)[..., None, :], (*codes.shape[:-1], self.code_bits))
        return np.packbits(np.take_along_axis(slots, pos, axis=-1), axis=-1, bitorder="little")

    def _unpack(self, packed: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        stream = np.unpackbits(packed, axis=-1, count=self.code_bits, bitorder="little")
        slots = np.zeros((*packed.shape[:-1], self.rank * MAX_AXIS_BITS), dtype=np.uint8)
        pos = np.broadcast_to(self._positions(alloc)[..., None, :], stream.shape)
        np.put_along_axis(slots, pos, stream, axis=-1)
        slots = slots.reshape(*packed.shape[:-1], self.rank, MAX_AXIS_BITS)
        return np.sum(slots << np.arange(MAX_AXIS_BITS, dtype=np.uint8), axis=-1, dtype=np.uint8)

    # ------------------------------------------------------------------ protocol
    def _sides(self, x: np.ndarray) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
        """Halves' bounds and side information ``(basis, mean, sigma, alloc)``, stacked over
        the halves (axis -3 of the basis, -2 of the others): half h's fitted on half h ^ 1.
        The halves of one length are fitted as one stack, not in a loop over blocks."""
        bounds = self.halves(x.shape[-2])
        batch, n_halves = x.shape[:-2], len(bounds) - 1
        basis = np.swapaxes(np.empty((*batch, n_halves, self.dim, self.rank), np.float16), -1, -2)
        mean = np.empty((*batch, n_halves, self.dim), np.float16)
        sigma = np.empty((*batch, n_halves, self.rank), np.float16)
        alloc = np.empty((*batch, n_halves, self.rank), np.uint8)
        tiny = np.empty((*batch, n_halves), bool)
        for hs, tokens in self._half_groups(bounds):
            calib = x[..., tokens, :]                 # (*batch, len(hs), length, d)
            b, mu, sg, al = self._fit_halves(calib, hs ^ 1)
            to = hs ^ 1                               # the halves these tokens calibrate
            basis[..., to, :, :], mean[..., to, :], sigma[..., to, :], alloc[..., to, :] = b, mu, sg, al
            # calibration tokens that vary, yet every float16 scale fitted on them is subnormal
            tiny[..., to] = (sg.max(axis=-1) < _FP16_NORMAL) & np.any(np.ptp(calib, axis=-2) > 0, axis=-1)
        if tiny.any():
            warnings.warn(
                f"x: {int(tiny.sum())} of {tiny.size} calibration halves have every scale below "
                f"float16's smallest normal ({_FP16_NORMAL:.3g}): klt stores its scales in "
                "float16, so those axes lose their precision (below ~3e-8 they decode to the "
                "mean); rescale x if these values matter", UserWarning, stacklevel=3)
        return bounds, (basis, mean, sigma, alloc)

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> KLTCodes:
        """Codes of every token, each half with the statistics of its partner half."""
        x = self._check(x)
        x64 = x.astype(np.float64)
        bounds, side = self._sides(x64)
        packed = np.empty((*x.shape[:-1], -(-self.code_bits // 8)), np.uint8)
        for hs, tokens in self._half_groups(bounds):
            s = self._take(side, hs)
            packed[..., tokens, :] = self._pack(self._code_half(x64[..., tokens, :], s), s[3])
        return KLTCodes(packed, *side, bounds, x.dtype)

    def decode(self, codes: KLTCodes) -> Float[np.ndarray, "*batch n d"]:
        """``μ + Σ uᵢ σᵢ c(codeᵢ)`` per half, in the dtype that was encoded."""
        if not isinstance(codes, KLTCodes):
            raise TypeError(f"codes must be KLTCodes from KLTCoder.encode; received {_describe(codes)}")
        if codes.basis.shape[-2:] != (self.rank, self.dim) or codes.packed.shape[-1] != -(-self.code_bits // 8):
            raise ValueError(f"codes must come from a KLTCoder with rank={self.rank}, dim={self.dim} "
                             f"and {self.code_bits} code bits per vector (this coder); received a "
                             f"basis {codes.basis.shape[-2:]} and {codes.packed.shape[-1]} bytes per vector")
        side = (codes.basis, codes.mean, codes.sigma, codes.alloc)
        out = np.empty((*codes.packed.shape[:-1], self.dim))
        for hs, tokens in self._half_groups(codes.bounds):
            s = self._take(side, hs)
            out[..., tokens, :] = self._decode_half(self._unpack(codes.packed[..., tokens, :], s[3]), s)
        return out.astype(codes.dtype)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))`` bit for bit, without the packing."""
        x = self._check(x)
        x64 = x.astype(np.float64)
        bounds, side = self._sides(x64)
        out = np.empty(x64.shape)
        for hs, tokens in self._half_groups(bounds):
            s = self._take(side, hs)
            out[..., tokens, :] = self._decode_half(self._code_half(x64[..., tokens, :], s), s)
        return out.astype(x.dtype)

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Code bits, and two halves' side information per block (module docstring)."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        halves = 2 * max(1, n_tokens // self.group_size)
        return {"codes": float(self.code_bits * n_tokens), "side": float(halves * self._side_bits())}

    def describe(self) -> dict[str, Any]:
        """Budget, rank, block size and the code bits per vector."""
        return {"coder": "klt", "bits": self.bits, "rank": self.rank,
                "group_size": self.group_size, "code_bits": self.code_bits}
