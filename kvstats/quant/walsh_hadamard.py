"""The Walsh--Hadamard transform: Sylvester's matrix and its fast transform.

:func:`hadamard` is the dense matrix ``H_d``, :func:`fwht` the product ``x @ H_d`` in
O(d log d): one BLAS product with ``H_b`` on runs of b coordinates, then butterflies across
the runs, cut into cache-sized pieces whose rows start where OpenBLAS rounds alike, so a
chunked transform equals one over the whole array bit for bit (`_fwht_rows`). The
randomized Hadamard rotation (:mod:`kvstats.quant.rotation`), the QJL and SRHT sketches
and the MSE kernels use it; how fast each piece is: docs/benchmarks.md.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import linalg

from kvstats._checks import as_float_array, check_int

__all__ = ["fwht", "hadamard", "next_pow2"]

#: Columns of the dense first stage of `fwht` (one BLAS product with ``H_128``).
_FWHT_BLOCK = 128
#: Chunked callers cut the rows of the fwht's dense BLAS stage at multiples of this
#: (see `_fwht_rows`).
_BLAS_ROWS = 96


def next_pow2(d: int) -> int:
    """Smallest power of two ``>= d`` (``d >= 1``).

    Examples
    --------
    >>> next_pow2(96), next_pow2(128), next_pow2(1)
    (128, 128, 1)
    """
    d = check_int(d, "d", low=1)
    return 1 << (d - 1).bit_length()


def _check_pow2(d: int, name: str) -> None:
    if d < 1 or d & (d - 1):
        raise ValueError(f"{name} must be a power of two; received {d}")


def hadamard(d: int) -> np.ndarray:
    """Dense Sylvester Hadamard matrix of order ``d`` (a power of two), entries +-1.

    ``H[i, j] = (-1)^popcount(i & j)``; it is symmetric and ``H @ H = d * I``.

    Parameters
    ----------
    d : int
        Order, a power of two.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d, d)``.

    Examples
    --------
    >>> hadamard(2)
    array([[ 1.,  1.],
           [ 1., -1.]])
    """
    d = check_int(d, "d", low=1)
    _check_pow2(d, "d")
    return linalg.hadamard(d, dtype=np.float64)  # Sylvester's construction, as fwht's


@lru_cache(maxsize=32)
def _hadamard_cached(d: int, dtype: str) -> np.ndarray:
    h = hadamard(d).astype(dtype)
    h.setflags(write=False)
    return h


def fwht(x: Any, block: int = _FWHT_BLOCK) -> np.ndarray:
    """Unnormalised fast Walsh--Hadamard transform along the last axis.

    ``fwht(x) == x @ hadamard(d)`` (up to floating-point rounding), vectorised over all
    leading axes. Sylvester's ``H_d`` is the Kronecker product ``H_{d/b} (x) H_b``, so
    the transform is a dense product with ``H_b`` on contiguous blocks of
    ``b = min(block, d)`` coordinates (one BLAS call) followed by the iterative butterfly
    stages ``h = b, 2b, ..., d/2``. ``block=1`` is the pure O(d log d) butterfly; the
    default fuses the first ``log2(128)`` stages because numpy's strided small-``h``
    butterflies are several times slower than one BLAS product with ``H_128``.

    Parameters
    ----------
    x : array_like, shape (..., d)
        ``d`` must be a power of two. float32 stays float32; other dtypes become float64.
    block : int
        Power of two, the size of the dense first stage (see above).

    Returns
    -------
    numpy.ndarray
        Transformed array, same shape, float32 or float64 (a new array). An entry beyond
        that dtype's range is a ValueError naming ``x`` (never inf).

    Examples
    --------
    >>> fwht([1.0, 0.0, 0.0, 0.0])
    array([1., 1., 1., 1.])
    >>> fwht([1.0, 2.0], block=1)
    array([ 3., -1.])
    """
    x = as_float_array(x, "x", min_ndim=1)
    _check_pow2(x.shape[-1], "x.shape[-1]")
    block = check_int(block, "block", low=1)
    _check_pow2(block, "block")
    with np.errstate(over="ignore", invalid="ignore"):      # refused just below
        out = _fwht(x, block)
    if not np.isfinite(out).all():
        # unnormalised: entries reach d·max|x|, beyond the float range near its top
        raise ValueError(f"x must be small enough for its unnormalised transform (entries up to "
                         f"d·max|x|) to stay within the {out.dtype} range; received max |x| = "
                         f"{float(np.abs(x).max()):.4g} at d = {x.shape[-1]}")
    return out


def _fwht_rows(d: int) -> int:
    """Rows per vector of length ``d`` that the dense BLAS stage of `_fwht` multiplies.

    OpenBLAS rounds a row of a product by its position in the call (its micro-kernels
    take rows in groups of 6, 8, 16, ... with a different lane order per group
    position), so a chunked transform equals the transform of the whole array bit for
    bit only when every chunk starts at a multiple of the group size: chunked callers
    cut at multiples of ``_BLAS_ROWS = 96`` rows (lcm of 32 and 3). Checked on OpenBLAS
    0.3.31's Haswell kernels: chunks of 96k rows equal one call, chunks of 4096 do not.
    """
    return max(1, d // _FWHT_BLOCK)


def _fwht(x: np.ndarray, block: int = _FWHT_BLOCK) -> np.ndarray:
    """`fwht` without validation.

    A dense product with ``H_b`` (b = min(block, d)) on each run of b coordinates, then
    radix-2 butterflies across the runs. When butterflies follow (d > b), the rows go
    through both stages in cache-sized pieces of a multiple of ``_BLAS_ROWS`` product
    rows (`_butterfly_rows`): the butterflies then run on data still in the core's cache,
    and the numbers equal one product over every row bit for bit (`_fwht_rows`).
    """
    d = x.shape[-1]
    b = min(block, d)
    if b == d or x.size <= _FWHT_PIECE:
        return _fwht_piece(x, b)
    y = np.empty(x.shape, x.dtype)
    xf, yf = x.reshape(-1, d), y.reshape(-1, d)
    step = _butterfly_rows(d, b)
    for a in range(0, xf.shape[0], step):
        _fwht_piece(xf[a:a + step], b, out=yf[a:a + step])
    return y


#: Values per piece of a blocked `_fwht` (256 KB of float32: the piece stays in L2).
_FWHT_PIECE = 1 << 16


def _butterfly_rows(d: int, b: int) -> int:
    """Vectors per piece of a blocked `_fwht` of length-d vectors: about `_FWHT_PIECE`
    values, a multiple of ``_BLAS_ROWS`` rows of the width-b product."""
    unit = _BLAS_ROWS // math.gcd(d // b, _BLAS_ROWS)
    return unit * max(1, _FWHT_PIECE // (unit * d))


def _fwht_piece(x: np.ndarray, b: int, out: np.ndarray | None = None) -> np.ndarray:
    """Both stages of `_fwht` on ``x`` in one go (into ``out``, C-contiguous, if given)."""
    d = x.shape[-1]
    if b > 1:
        y = np.matmul(x.reshape(-1, b), _hadamard_cached(b, x.dtype.char),
                      out=None if out is None else out.reshape(-1, b)).reshape(x.shape)
    elif out is None:
        y = np.array(x, copy=True, order="C")
    else:
        out[...] = x
        y = out
    flat = y.reshape(-1, d)
    n_blocks = d // b
    if n_blocks >= 4 and flat.shape[0] * b >= _BUTTERFLY_CONTIGUOUS:
        _butterflies_by_block(flat, b)
        return y
    h = b
    while h < d:
        # pairs (j, j + h) inside blocks of 2h: (a, b) -> (a + b, a - b), in place
        v = flat.reshape(flat.shape[0], d // (2 * h), 2, h)
        lo = v[:, :, 0, :]
        hi = v[:, :, 1, :]
        diff = lo - hi
        lo += hi
        hi[...] = diff
        h *= 2
    return y


#: Values per block (rows x b) from which `_butterflies_by_block` pays for its two copies.
_BUTTERFLY_CONTIGUOUS = 1024


def _butterflies_by_block(flat: np.ndarray, b: int) -> None:
    """The butterfly stages of `_fwht_piece` on ``flat`` ``(rows, d)``, in place, with
    every stage on contiguous memory.

    Across runs of b coordinates the stages pair run k with run k + m (m = 1, 2, 4, ...)
    of the same row: (lo, hi) -> (lo + hi, lo - hi). In the rows' layout these are
    strided views (runs of b values, one per row), on which numpy's ufuncs run several
    times slower than on contiguous data; here the runs are first copied run-major,
    ``(d / b, rows, b)``, where run k of every row is one contiguous array, the stages
    alternate between two such buffers, and the result is copied back. Each value gets
    the same additions and subtractions in the same order, so the numbers are those of
    the in-place stages bit for bit.
    """
    rows, d = flat.shape
    n_blocks = d // b
    src = np.empty((n_blocks, rows, b), flat.dtype)
    dst = np.empty_like(src)
    by_row = flat.reshape(rows, n_blocks, b).transpose(1, 0, 2)  # a view of flat, run-major
    np.copyto(src, by_row)
    m = 1
    while m < n_blocks:
        s = src.reshape(n_blocks // (2 * m), 2, m * rows * b)
        t = dst.reshape(s.shape)
        np.add(s[:, 0], s[:, 1], out=t[:, 0])
        np.subtract(s[:, 0], s[:, 1], out=t[:, 1])
        src, dst = dst, src
        m *= 2
    np.copyto(by_row, src)
