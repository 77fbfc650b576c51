"""Lloyd--Max scalar codebooks (Lloyd 1957/1982; Max 1960).

(Over ~450 lines as one idea: the solver, its densities' integrals, the Codebook; half docs.)

For ``b`` bits, the ``L = 2**b`` centroids ``c_0 < ... < c_{L-1}`` and ``L - 1``
boundaries that minimise ``E[(X - Q(X))^2]`` satisfy Lloyd's two conditions:
boundaries are midpoints of adjacent centroids and each centroid is the conditional
mean of its cell. Densities offered:

``"gaussian"``
    N(0, 1). Cell probabilities and partial moments in closed form with Phi and phi.
``"beta"``
    One coordinate of a uniform point on the sphere S^{dim-1}: ``f(x) = Gamma(dim/2) /
    (sqrt(pi) Gamma((dim-1)/2)) (1 - x^2)^((dim-3)/2)`` on [-1, 1], i.e. ``(X + 1)/2 ~
    Beta((dim-1)/2, (dim-1)/2)``; variance ``1/dim``, and ``sqrt(dim) X`` tends to N(0, 1).
    The CDF is the regularised incomplete beta function and the partial first moment is
    ``int_a^b x f = C/(dim-1) [(1-a^2)^((dim-1)/2) - (1-b^2)^((dim-1)/2)]``. ``dim = 2``
    (the arcsine density, unbounded at +-1) is handled by the same formulas.
``"empirical"``
    The empirical distribution of a sample (`empirical_codebook`).

The fixed point is solved with closed-form cell integrals (no Monte-Carlo, no quadrature):
from the symmetric high-resolution (companding) solution, Newton steps on Lloyd's map
``c -> T(c)`` (its Jacobian is tridiagonal) with plain Lloyd steps as the safeguard, until
one Lloyd step moves no centroid by more than ``1e-12`` times the largest centroid
magnitude (typically 4-7 iterations; at most 500). For very large ``dim`` (above ~1e4)
rounding in the incomplete beta function can put the floor of that change between 1e-12
and 1e-9; the iteration then stops when the change stops decreasing, and a
``RuntimeWarning`` is raised only if the change is above 1e-9. ``Codebook.mse`` of those
centroids is within ~1e-12 relative of mpmath at every dim and bits (Gauss--Legendre on
the inner cells; M2 − 2c·M1 + c²P was off by 5e-8 at dim 1024, 2e-6 at 2^16). Both
densities are symmetric and log-concave for ``dim >= 3`` (so the Lloyd--Max quantizer is
unique, Fleischer 1964, and symmetric); only the negative half is iterated, with the
boundary 0 fixed, which also keeps every cell probability free of cancellation. For
``dim = 2`` (the arcsine density, not log-concave) Lloyd's conditions have other, worse
solutions; the symmetric one returned is the best a multi-start search finds at 1-3 bits
(tests/quant/test_codebook.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from jaxtyping import Float, UInt8
from numpy.typing import ArrayLike, DTypeLike
from scipy import linalg, special

from kvstats._checks import _describe, as_float_array, check_choice, check_int, check_real
from kvstats.qjl_theory import _gamma_half_ratio

__all__ = ["Codebook", "DISTRIBUTIONS", "empirical_codebook", "lloyd_max_codebook",
           "lloyd_step"]

DISTRIBUTIONS = ("gaussian", "beta")
TOL = 1e-12
_CHUNK = 1 << 16  # values per cache-sized chunk in Codebook.encode
TOL_FLOOR = 1e-9  # accepted when rounding in the cell integrals stops the iteration earlier
MAX_ITER = 500
_GL_X, _GL_W = np.polynomial.legendre.leggauss(48)  # for Codebook.mse's inner cells


@dataclass(frozen=True, eq=False)
class Codebook:
    """A scalar quantizer: ``2**bits`` increasing centroids and their cell boundaries.

    Attributes
    ----------
    bits : int
    centroids : numpy.ndarray
        float64, shape ``(2**bits,)``, increasing.
    boundaries : numpy.ndarray
        float64, shape ``(2**bits - 1,)``; cell ``i`` is ``(boundaries[i-1], boundaries[i]]``.
    mse : float
        ``E[(X - Q(X))^2]`` per coordinate for the density the codebook was built for
        (times ``scale**2`` after `scaled`).
    distribution : str
        "gaussian", "beta" or "empirical".
    dim : int or None
        Sphere dimension for "beta".
    scale : float
        The codebook is for ``scale * X`` with X the named density (1 unless `scaled`).
    iterations : int
        Iterations the solver used.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.codebook import lloyd_max_codebook
    >>> cb = lloyd_max_codebook(2)            # N(0, 1), Max (1960): MSE 0.1175
    >>> cb.centroids.round(4), round(cb.mse, 4)
    (array([-1.5104, -0.4528,  0.4528,  1.5104]), 0.1175)
    >>> codes = cb.encode(np.array([-2.0, 0.1, 1.0]))
    >>> codes, cb.decode(codes).round(4)
    (array([0, 2, 3], dtype=uint8), array([-1.5104,  0.4528,  1.5104]))
    """

    bits: int
    centroids: np.ndarray
    boundaries: np.ndarray
    mse: float
    distribution: str
    dim: int | None = None
    scale: float = 1.0
    iterations: int = 0

    def encode(self, x: Float[ArrayLike, "*shape"]) -> UInt8[np.ndarray, "*shape"]:
        """Cell index of each value (uint8): ``#{k : boundaries[k] < x}``, ties to the lower cell.

        Equal to ``np.searchsorted(boundaries, x)`` (the plain reference, kept as
        `encode_reference`) but several times faster: up to 15 boundaries it counts
        comparisons; beyond, it looks up a uniform grid over the boundaries whose step is
        at most half the smallest gap, so each value needs one index computation, three
        table gathers and two exact comparisons with the true boundaries. float32 ``x`` is
        compared with the boundaries rounded *down* to float32, exact as ``x > b`` is, so a
        value codes alike as float32 and float64 (no copy to float64).

        Examples
        --------
        >>> from kvstats import lloyd_max_codebook
        >>> lloyd_max_codebook(1).encode([-0.3, 0.0, 2.0])
        array([0, 0, 1], dtype=uint8)
        """
        x = as_float_array(x, "x")
        return self._encode(x)

    def encode_reference(self, x: Float[ArrayLike, "*shape"]) -> UInt8[np.ndarray, "*shape"]:
        """`encode` by ``np.searchsorted`` on the boundaries (reference for tests).

        Examples
        --------
        >>> from kvstats import lloyd_max_codebook
        >>> cb, y = lloyd_max_codebook(3), [k / 20 for k in range(-60, 61)]
        >>> cb.encode(y).tolist() == cb.encode_reference(y).tolist()
        True
        """
        x = as_float_array(x, "x")
        return np.searchsorted(_down(self.boundaries, x.dtype), x).astype(np.uint8)

    def _encode(self, x: np.ndarray) -> np.ndarray:
        """`encode` without validation; ``x`` float32 or float64. Works on chunks of
        ``_CHUNK`` values so that the repeated passes over a chunk (one per boundary, or the
        grid lookups) stay in cache: ~3x faster than whole-array passes for 2**20+ values."""
        flat = np.ascontiguousarray(x).reshape(-1)
        out = np.empty(flat.size, dtype=np.uint8)
        b, grid = self._as(x.dtype)
        if b.size > 15 and grid is None:
            out[...] = np.searchsorted(b, flat)
            return out.reshape(x.shape)
        tmp = np.empty(min(_CHUNK, flat.size), dtype=np.bool_)
        buckets = self._buckets32 if grid is not None and flat.dtype == np.float32 else None
        if buckets is not None:
            rec = np.empty(min(_CHUNK, flat.size), dtype=np.uint64)
        for start in range(0, flat.size, _CHUNK):  # loop over chunks, vectorised inside
            xs = flat[start:start + _CHUNK]
            cs = out[start:start + _CHUNK]
            ts = tmp[: xs.size]
            if buckets is not None:
                self._encode_buckets(xs, cs, ts, rec[: xs.size], buckets)
            elif grid is None:
                cs[...] = 0
                for bk in b:  # <= 15 boundaries: count comparisons
                    np.greater(xs, bk, out=ts)
                    cs += ts.view(np.uint8)
            else:
                self._encode_grid(xs, cs, ts, grid)
        return out.reshape(x.shape)

    @staticmethod
    def _encode_grid(x: np.ndarray, out: np.ndarray, tmp: np.ndarray, grid) -> None:
        lo, inv_step, base, below, above = grid
        idx = np.subtract(x, x.dtype.type(lo))
        idx *= x.dtype.type(inv_step)
        np.clip(idx, 0, base.size - 1, out=idx)
        idx = idx.astype(np.intp)  # intp indices with mode="clip": numpy's fastest gather
        # base = (#boundaries below the grid edge) - 1, mod 256; +1 from `below` undoes it
        np.take(base, idx, mode="clip", out=out)
        np.greater(x, np.take(below, idx, mode="clip"), out=tmp)
        out += tmp.view(np.uint8)
        np.greater(x, np.take(above, idx, mode="clip"), out=tmp)
        out += tmp.view(np.uint8)

    @staticmethod
    def _encode_buckets(x: np.ndarray, out: np.ndarray, tmp: np.ndarray, rec: np.ndarray,
                        table: np.ndarray) -> None:
        # one gather of (threshold, base) by the top 16 bits of each float32 (little
        # endian: the odd uint16 of each value), then one comparison
        np.take(table, x.view(np.uint16)[1::2], mode="clip", out=rec)
        pair = rec.view(np.float32).reshape(-1, 2)
        np.greater(x, pair[:, 0], out=tmp)
        np.add(rec.view(np.uint32).reshape(-1, 2)[:, 1], tmp, out=out, casting="unsafe")

    @cached_property
    def _buckets32(self) -> np.ndarray | None:
        """A table of the codes of float32 input by the top 16 bits of its bit pattern
        (sign, exponent, 7 mantissa bits), or None where it cannot be exact.

        The floats sharing those bits form an interval [lo, hi]; the code, the number of
        boundaries (rounded down to float32) below x, is monotone in x, so when it rises by at
        most one across the interval it is ``code(lo) + (x > t)`` with t the boundary
        crossed there (+inf when none). Entry = (t as float32, code(lo) as uint32) packed
        in a uint64. Exact for every finite float32 (tests compare against the boundary
        count); built only when no interval holds two boundaries (else None: the grid
        is used). Used for more than 15 boundaries (5+ bits), where it replaces the
        grid's three gathers by one.
        """
        b = _down(self.boundaries, np.float32)
        top = np.arange(1 << 16, dtype=np.uint32)
        first, last = (top << 16).view(np.float32), ((top << 16) | 0xFFFF).view(np.float32)
        negative = top >= 0x8000  # bit patterns of negative floats run downwards in value
        lo, hi = np.where(negative, last, first), np.where(negative, first, last)
        finite = np.isfinite(lo) & np.isfinite(hi)
        c_lo = np.searchsorted(b, np.where(finite, lo, 0), side="left")
        c_hi = np.searchsorted(b, np.where(finite, hi, 0), side="left")
        if np.any(c_hi - c_lo > 1):
            return None
        thr = np.full(top.size, np.inf, dtype=np.float32)
        crossed = c_hi > c_lo
        thr[crossed] = b[c_lo[crossed]]
        table = np.empty(top.size, dtype=[("thr", "<f4"), ("base", "<u4")])
        table["thr"], table["base"] = thr, c_lo
        table = table.view(np.uint64)
        table.setflags(write=False)
        return table

    @cached_property
    def _in_dtype(self) -> dict:
        """Cache of `_as` by dtype."""
        return {}

    def _as(self, dtype: np.dtype) -> tuple:
        """The boundaries and `_grid`'s tables (None for <= 15 boundaries or no grid) in
        ``dtype``, each rounded down (`_down`)."""
        dtype = np.dtype(dtype)
        if dtype not in self._in_dtype:
            g = self._grid if self.boundaries.size > 15 else None
            grid = None if g is None else (*g[:3], _down(g[3], dtype), _down(g[4], dtype))
            self._in_dtype[dtype] = _down(self.boundaries, dtype), grid
        return self._in_dtype[dtype]

    @cached_property
    def _grid(self):
        """Lookup tables of the grid used by `encode` (None if the grid would be too fine)."""
        b = self.boundaries
        if b.size < 2:
            return None
        gap = float(np.min(np.diff(b)))
        if gap <= 0 or not np.isfinite(gap):
            return None
        step = gap / 2
        n_cells = int(np.floor((b[-1] - b[0]) / step)) + 2
        if n_cells > 1 << 16:
            return None
        edges = b[0] + step * np.arange(n_cells)
        cnt = np.searchsorted(b, edges, side="left")  # boundaries strictly below each edge
        padded = np.concatenate([[-np.inf], b, [np.inf]])
        base = ((cnt - 1) % 256).astype(np.uint8)
        return b[0], 1.0 / step, base, padded[cnt], padded[cnt + 1]

    def decode(self, codes: UInt8[ArrayLike, "*shape"], dtype: DTypeLike = np.float64) -> Float[np.ndarray, "*shape"]:
        """Centroid of each code, as ``dtype`` (float64 by default).

        Examples
        --------
        >>> from kvstats import lloyd_max_codebook
        >>> lloyd_max_codebook(1).decode([0, 1]).round(4)
        array([-0.7979,  0.7979])
        """
        codes = np.asarray(codes)
        if codes.dtype.kind not in "ui":
            raise TypeError(f"codes must be an integer array; received {_describe(codes)}")
        if codes.size and (codes.min() < 0 or codes.max() >= self.centroids.size):
            raise ValueError(f"codes must be in [0, {self.centroids.size - 1}]; received values "
                             f"in [{codes.min()}, {codes.max()}]")
        return self.centroids.astype(dtype)[codes]

    def scaled(self, s: float) -> "Codebook":
        """The codebook for the density of ``s * X`` (``s > 0``): centroids, boundaries times s.

        Examples
        --------
        >>> from kvstats import lloyd_max_codebook
        >>> round(lloyd_max_codebook(2).scaled(0.5).mse / lloyd_max_codebook(2).mse, 12)
        0.25
        """
        s = check_real(s, "s", low=0.0, low_open=True)
        return Codebook(self.bits, self.centroids * s, self.boundaries * s, self.mse * s * s,
                        self.distribution, self.dim, self.scale * s, self.iterations)


def _down(b: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """float64 boundaries ``b`` as ``dtype``, each the largest value of ``dtype`` <= it, so
    that ``x > result`` exactly when ``x > b`` for every ``x`` of ``dtype``."""
    out = b.astype(dtype)
    if out.dtype != b.dtype:
        up = out.astype(b.dtype) > b
        out[up] = np.nextafter(out[up], out.dtype.type(-np.inf))
    return out


# --- cell integrals (P, M1) = (∫f, ∫x·f) over cells [a, b], a < b <= 0 (P: no cancellation) ---

def _gauss_moments(a: np.ndarray, b: np.ndarray, dim: int | None):
    return special.ndtr(b) - special.ndtr(a), _gauss_pdf(a, dim) - _gauss_pdf(b, dim)  # phi(-inf) = 0


def _gauss_pdf(x: np.ndarray, dim: int | None) -> np.ndarray:
    return np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def _beta_logc(dim: float) -> float:
    return special.gammaln(dim / 2) - 0.5 * np.log(np.pi) - special.gammaln((dim - 1) / 2)


def _beta_cdf(x: np.ndarray, dim: float) -> np.ndarray:
    return special.betainc((dim - 1) / 2, (dim - 1) / 2, np.clip((1 + x) / 2, 0.0, 1.0))


def _beta_moments(a: np.ndarray, b: np.ndarray, dim: int):
    p = _beta_cdf(b, dim) - _beta_cdf(a, dim)
    k = (dim - 1) / 2
    # g(x) = (1 - x^2)^k; g(a) - g(b) = g(b) * expm1(k * log1p((b^2 - a^2)/(1 - b^2))),
    # written with (b - a)(b + a) so that narrow cells keep full relative precision
    with np.errstate(divide="ignore"):
        log_gb = k * np.log1p(-b * b)
        # the first cell starts at a = -1 where the ratio is exactly -1 (rounding may overshoot)
        ratio = k * np.log1p(np.maximum((b - a) * (b + a) / (1 - b * b), -1.0))
    return p, np.exp(_beta_logc(dim) + log_gb) / (dim - 1) * np.expm1(ratio)


def _beta_pdf(x: np.ndarray, dim: int) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.exp(_beta_logc(dim) + (dim - 3) / 2 * np.log1p(-x * x))


_DENSITIES = {"gaussian": (_gauss_moments, _gauss_pdf, -np.inf),
              "beta": (_beta_moments, _beta_pdf, -1.0)}


def _cells(c: np.ndarray, lo: float) -> tuple[np.ndarray, np.ndarray]:
    """Cells of the negative half: [lo, t_0], [t_0, t_1], ..., [t_{K-2}, 0]."""
    t = 0.5 * (c[:-1] + c[1:])
    return np.concatenate([[lo], t]), np.concatenate([t, [0.0]])


def lloyd_step(c: np.ndarray, distribution: str, dim: int | None = None) -> np.ndarray:
    """One plain Lloyd step on the negative-half centroids (the reference iteration).

    Parameters
    ----------
    c : numpy.ndarray
        The ``2**(bits-1)`` negative centroids, 1-D, strictly increasing, inside the
        support (``(-1, 0)`` for "beta").
    distribution : {"gaussian", "beta"}
    dim : int or None
        Required (``>= 2``) for "beta"; must be None for "gaussian".

    Returns
    -------
    numpy.ndarray
        Conditional means of the cells bounded by the midpoints of ``c`` (and 0).

    Examples
    --------
    >>> cb = lloyd_max_codebook(2)
    >>> half = cb.centroids[:2]
    >>> bool(np.allclose(lloyd_step(half, "gaussian"), half, rtol=1e-12))
    True
    """
    distribution = check_choice(distribution, "distribution", DISTRIBUTIONS)
    dim = _check_dim(distribution, dim)
    c = as_float_array(c, "c", min_ndim=1).astype(np.float64)
    lo = _DENSITIES[distribution][2]
    if c.ndim != 1 or np.any(np.diff(c) <= 0) or c[0] <= lo or c[-1] >= 0:
        raise ValueError(f"c must be the 1-D strictly increasing negative centroids, inside "
                         f"({lo}, 0); received {_describe(c)} with values in "
                         f"[{c.min():.6g}, {c.max():.6g}]")
    return _lloyd_step(c, distribution, dim)


def _lloyd_step(c: np.ndarray, distribution: str, dim: int | None) -> np.ndarray:
    """`lloyd_step` without validation."""
    moments, _, lo = _DENSITIES[distribution]
    a, b = _cells(np.asarray(c, dtype=np.float64), lo)
    p, m1 = moments(a, b, dim)
    return m1 / p


def _mse_half(c: np.ndarray, distribution: str, dim: int | None) -> float:
    """2·Σ ∫(x − c_i)² f over the negative half's cells, to ~1e-12 (mpmath; tests/test_theory_j2
    .py): the outer cell from moments free of cancellation there, inner ones by Gauss--Legendre."""
    a, b = _cells(c, _DENSITIES[distribution][2])
    t = b[0]  # the outer cell is (lo, t]
    if distribution == "gaussian":
        pdf, p, m1 = _gauss_pdf, special.ndtr(t), -_gauss_pdf(t, dim)
        m2 = p + t * m1
    else:  # C = Γ(dim/2)/(√π Γ((dim−1)/2)) to ~1e-16 (gammaln's difference: 4e-11 at 2^16)
        logc = np.log(_gamma_half_ratio((dim - 1) / 2) / np.sqrt(np.pi))
        pdf = lambda x, _: np.exp(logc + (dim - 3) / 2 * np.log1p(-x * x))  # noqa: E731
        cg = np.exp(logc + (dim - 1) / 2 * np.log1p(-t * t))  # C·(1 − t²)^((dim−1)/2)
        p, m1 = _beta_cdf(t, dim), -cg / (dim - 1)
        m2 = (p - t * cg) / dim  # by parts; P − (dim−1)/dim·P_{dim+2} lost up to 6 digits
    h = 0.5 * (b[1:] - a[1:])[:, None]  # inner cells: f smooth there, 48 nodes reach rounding
    x = 0.5 * (a[1:] + b[1:])[:, None] + h * _GL_X
    inner = np.sum(h * _GL_W * (x - c[1:, None]) ** 2 * pdf(x, dim))
    return float(2.0 * (m2 - 2 * c[0] * m1 + c[0] ** 2 * p + inner))  # 2x: the mirror half


def _initial(bits: int, distribution: str, dim: int | None) -> np.ndarray:
    """High-resolution (Panter--Dite) start: centroids at the quantiles of f^(1/3)."""
    L = 2 ** bits
    u = (np.arange(L // 2) + 0.5) / L
    if distribution == "gaussian":
        return np.sqrt(3.0) * special.ndtri(u)  # f^(1/3) is N(0, 3)
    alpha = (dim - 3) / 6 + 1  # f^(1/3) ~ (1 - x^2)^((dim-3)/6): Beta(alpha, alpha) on [-1,1]
    return 2 * special.betaincinv(alpha, alpha, u) - 1


def _solve(bits: int, distribution: str, dim: int | None):
    moments, pdf, lo = _DENSITIES[distribution]
    c = _initial(bits, distribution, dim)
    K = c.size
    if K == 1:  # one cell per half: the centroid is the half's conditional mean
        return _lloyd_step(c, distribution, dim), 1, 0.0
    best_c, best_r, stall = c, np.inf, 0
    for it in range(1, MAX_ITER + 1):
        a, b = _cells(c, lo)
        p, m1 = moments(a, b, dim)
        tc = m1 / p
        step = tc - c
        # convergence: one Lloyd step moves no centroid by more than TOL * max|c|
        resid = np.max(np.abs(step)) / np.max(np.abs(c))
        if resid < best_r:
            best_c, best_r, stall = c, resid, 0
        else:
            stall += 1
        if resid <= TOL or stall >= 10:  # converged, or at the floating-point floor
            break
        # Jacobian of T: dT_i/da_i = f(a)(T_i - a)/P_i, dT_i/db_i = f(b)(b - T_i)/P_i, and
        # each interior boundary is the midpoint of its two centroids
        fb = pdf(b[:-1], dim)  # interior boundaries t_0..t_{K-2}
        da = np.zeros(K)
        db = np.zeros(K)
        db[:-1] = fb * (b[:-1] - tc[:-1]) / p[:-1]
        da[1:] = fb * (tc[1:] - a[1:]) / p[1:]
        # banded form of (I - J): diagonals upper, main, lower
        ab = np.zeros((3, K))
        ab[0, 1:] = -0.5 * db[:-1]
        ab[1] = 1.0 - 0.5 * (da + db)
        ab[2, :-1] = -0.5 * da[1:]
        try:
            newton = c + linalg.solve_banded((1, 1), ab, step)
        except (linalg.LinAlgError, ValueError):
            newton = None
        ok = (newton is not None and np.all(np.isfinite(newton)) and np.all(np.diff(newton) > 0)
              and newton[0] > lo and newton[-1] < 0)
        c = newton if ok else tc  # safeguard: a plain Lloyd step
    return best_c, it, best_r


@lru_cache(maxsize=None)
def _codebook_cached(bits: int, distribution: str, dim: int | None) -> Codebook:
    half, iterations, resid = _solve(bits, distribution, dim)
    if resid > TOL_FLOOR:
        warnings.warn(f"Lloyd-Max iteration for bits={bits}, distribution={distribution!r}, "
                      f"dim={dim} stopped at relative centroid change {resid:.2e} after "
                      f"{iterations} iterations (target {TOL}, accepted up to {TOL_FLOOR})",
                      RuntimeWarning, stacklevel=3)
    centroids = np.concatenate([half, -half[::-1]])
    boundaries = 0.5 * (centroids[:-1] + centroids[1:])
    boundaries[len(half) - 1] = 0.0  # exact symmetry
    mse = _mse_half(half, distribution, dim)
    for arr in (centroids, boundaries):
        arr.setflags(write=False)
    return Codebook(bits, centroids, boundaries, mse, distribution, dim, 1.0, iterations)


def lloyd_max_codebook(bits: int, distribution: str = "gaussian", dim: int | None = None) -> Codebook:
    """The Lloyd--Max (MSE-optimal) scalar codebook for a density, solved exactly and cached.

    Parameters
    ----------
    bits : int
        1..8 (``2**bits`` centroids).
    distribution : {"gaussian", "beta"}
        "gaussian": N(0, 1). "beta": one coordinate of a uniform point on S^{dim-1}
        (support [-1, 1], variance ``1/dim``; centroids are O(1/sqrt(dim))).
    dim : int or None
        Required (2 ≤ dim ≤ :data:`MAX_BETA_DIM` = 65,536) for "beta"; must be None for
        "gaussian".

    Returns
    -------
    Codebook
        ``.mse`` is the per-coordinate MSE for the density as given. Repeated calls
        return the same (read-only) object.

    Examples
    --------
    >>> from kvstats import lloyd_max_codebook
    >>> round(lloyd_max_codebook(2).mse, 4)
    0.1175
    >>> round(128 * lloyd_max_codebook(3, "beta", dim=128).mse, 3)
    0.034
    """
    bits = check_int(bits, "bits", low=1, high=8)
    distribution = check_choice(distribution, "distribution", DISTRIBUTIONS)
    return _codebook_cached(bits, distribution, _check_dim(distribution, dim))


#: The largest sphere dimension whose "beta" codebook is solved: measured, dim·MSE follows
#: its 1 − O(1/dim) approach to the Gaussian value to ~1e-6 up to 2^16 at every bit width,
#: and departs from it (by 4e-5 at 8 bits) at 2^18 (tests/quant/test_codebook_dim_bound.py).
MAX_BETA_DIM = 1 << 16


def _check_dim(distribution: str, dim: int | None) -> int | None:
    """``dim`` checked against ``distribution``: an int >= 2 for "beta", None for "gaussian"."""
    if distribution == "beta":
        if dim is None:
            raise ValueError("dim is required for distribution='beta' (an integer >= 2); "
                             "received None")
        dim = check_int(dim, "dim", low=2)
        if dim > MAX_BETA_DIM:
            raise ValueError(f"dim must be at most {MAX_BETA_DIM} for distribution='beta' (beyond it the "
                             "solved integrals lose accuracy: dim·MSE off by ~1e-4 at 8 bits by 2^20); "
                             "the sphere coordinate times sqrt(dim) tends to N(0, 1) there, so use "
                             f"distribution='gaussian' scaled by 1/sqrt(dim); received {dim}")
        return dim
    if dim is not None:
        raise ValueError(f"dim must be None for distribution='gaussian'; received {_describe(dim)}")
    return None


def empirical_codebook(sample: Float[ArrayLike, "n"], bits: int, max_iter: int = 10_000) -> Codebook:
    """Lloyd--Max codebook for the empirical distribution of a 1-D sample (exact Lloyd).

    The sample is sorted once; each Lloyd step finds the cells with ``searchsorted`` and
    their sums with prefix sums, so a step costs O(2**bits log n). Lloyd on a finite
    sample reaches its fixed point in finitely many steps: iteration stops when no point
    changes cell. Starts from the sample quantiles ``(i + 1/2)/2**bits``. A cell that
    becomes empty keeps its centroid.

    Parameters
    ----------
    sample : array_like
        Values (flattened); finite; at least ``2**bits`` distinct values.
    bits : int
        1..8.
    max_iter : int
        Iteration cap (a ``RuntimeWarning`` if reached).

    Returns
    -------
    Codebook
        ``distribution="empirical"``; ``.mse`` is the sample mean of ``(x - Q(x))**2``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import empirical_codebook
    >>> cb = empirical_codebook(np.random.default_rng(0).standard_normal(20_000), 2)
    >>> abs(cb.mse - 0.1175) < 0.01
    True
    """
    bits = check_int(bits, "bits", low=1, high=8)
    max_iter = check_int(max_iter, "max_iter", low=1)
    x = np.sort(as_float_array(sample, "sample").astype(np.float64).ravel())
    L = 2 ** bits
    n_unique = np.count_nonzero(np.diff(x)) + 1
    if n_unique < L:
        raise ValueError(f"sample must have at least 2**bits = {L} distinct values; "
                         f"received {n_unique}")
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    c = np.quantile(x, (np.arange(L) + 0.5) / L)
    if np.any(np.diff(c) <= 0):  # ties in the sample: quantiles of the distinct values
        c = np.quantile(np.unique(x), (np.arange(L) + 0.5) / L)
    idx_old = None
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        t = 0.5 * (c[:-1] + c[1:])
        idx = np.searchsorted(x, t, side="right")  # cell i holds x[idx[i-1]:idx[i]]
        if idx_old is not None and np.array_equal(idx, idx_old):
            converged = True
            break
        idx_old = idx
        edges = np.concatenate([[0], idx, [x.size]])
        counts = np.diff(edges)
        sums = s1[edges[1:]] - s1[edges[:-1]]
        c = np.where(counts > 0, sums / np.maximum(counts, 1), c)
    if not converged:
        warnings.warn(f"empirical Lloyd iteration did not reach a fixed point in {max_iter} "
                      "iterations", RuntimeWarning, stacklevel=2)
    boundaries = 0.5 * (c[:-1] + c[1:])
    codes = np.searchsorted(boundaries, x)
    mse = float(np.mean((x - c[codes]) ** 2))
    return Codebook(bits, c.copy(), boundaries, mse, "empirical", None, 1.0, it)
