"""Covariance spectra of the keys and values the toolkit codes: what the Shannon bound needs.

The distortion–rate bound of :mod:`kvstats.rate_distortion` needs, per source, the
eigenvalues of the covariance of a coded vector and its mean square ``E‖x‖²`` (the
signal of the SNR; a known mean costs no bits). This module gives both

- **analytically** for the synthetic distributions of :mod:`kvstats.data.synthetic`,
  from the generator's definition, *conditional on a trial*: the low-rank basis and the
  outlier channels are drawn once per trial and shared by its keys, so within a trial the
  keys have the covariance below (averaged over trials the covariance would be
  isotropic, which is not what a coder of one cache faces);
- **measured** for a captured real cache, per (layer, KV head), from the keys of all
  captured texts pooled (:func:`capture_spectra`), and from any sample
  (:func:`measured_spectrum`).

=====================  =====================================================================
distribution           covariance eigenvalues (scale s), mean square ``E‖x‖²``
=====================  =====================================================================
gaussian               ``s²`` (d times); ``s² d``
heavy_tailed           ``s² ν/(ν−2)`` (d times) for ν > 2; *undefined* for ν ≤ 2 (infinite
                       variance: no bound is given)
low_rank               ``s² (v + noise²)`` (r times) and ``s² noise²`` (d − r times);
                       ``s² (r v + d noise²)``; ``v = d/r`` (``energy="total"``) or 1
outlier_channels       ``s² m²`` (c times) and ``s²`` (d − c times); ``s² (d − c + c m² (1 +
                       offset²))`` (the channel bias ``± s m offset`` is a per-trial mean)
focused                approximate: ``s²`` except the ``min(n_q, d)`` query directions, which
                       share the focus keys' mean excess variance equally (see
                       :func:`synthetic_spectrum`); *undefined* for d ≤ 2
=====================  =====================================================================

For a non-Gaussian source (heavy-tailed, outlier channels, real keys) the bound computed
from these numbers is the bound of a *Gaussian* source of the same covariance, the
hardest source of that covariance: a scheme can beat it on such data (a negative gap),
which says it exploits the non-Gaussian shape.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_choice, check_int
from kvstats.data.synthetic import DISTRIBUTIONS, _resolve

__all__ = ["Spectrum", "synthetic_spectrum", "measured_spectrum", "capture_spectra"]


@dataclass(frozen=True)
class Spectrum:
    """Covariance eigenvalues and mean square of a coded vector, per trial or for all trials.

    Attributes
    ----------
    eigenvalues : ndarray ``(d,)`` or ``(n_trials, d)``, or None
        Covariance eigenvalues, descending (one row per trial when they differ between
        trials, as for the (layer, head) of a real capture's trials); None when the
        covariance does not exist (heavy tails with ν ≤ 2).
    mean_square : ndarray ``()`` or ``(n_trials,)``
        ``E‖x‖²`` (trace of the covariance plus the squared norm of the mean; +inf when
        the variance is infinite).
    exact : bool
        The numbers follow from the generator's definition exactly (False: an
        approximation, or an estimate from samples).
    note : str
        How they were obtained, and what the bound computed from them means.

    Examples
    --------
    >>> s = synthetic_spectrum("low_rank", 16, rank=2, noise=0.5)
    >>> s.eigenvalues[:3].tolist(), float(s.mean_square)
    ([8.25, 8.25, 0.25], 20.0)
    """

    eigenvalues: np.ndarray | None
    mean_square: np.ndarray
    exact: bool
    note: str

    @property
    def defined(self) -> bool:
        """Whether a covariance exists (and so a Gaussian bound)."""
        return self.eigenvalues is not None

    def bound_snr_db(self, rate: float) -> np.ndarray:
        """The water-filling SNR bound (dB) at ``rate`` bits per coordinate, per trial row.

        The signal is ``mean_square`` (a known mean is free); see
        :func:`kvstats.rate_distortion.bound_snr_db`.

        Examples
        --------
        >>> round(float(synthetic_spectrum("gaussian", 64).bound_snr_db(2.0)), 3)
        12.041
        """
        from kvstats.rate_distortion import bound_snr_db

        if self.eigenvalues is None:
            raise ValueError(f"this spectrum has no covariance ({self.note}); no Gaussian bound exists")
        return bound_snr_db(self.eigenvalues, rate, self.mean_square)


# synthetic_spectrum's n_keys when not given (only ``focused`` depends on it)
_N_KEYS = 1024


def _params_of(params: Mapping[str, Any] | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of the distribution's parameters; received "
                        f"{_describe(params)}")
    twice = sorted(set(params or {}) & set(extra))
    if twice:   # which one was meant is not ours to guess
        raise ValueError(f"each parameter must be given once, in params or as a keyword; received "
                         f"{', '.join(f'{k}={params[k]!r} in params and {k}={extra[k]!r}' for k in twice)}")
    return {**dict(params or {}), **extra}


def synthetic_spectrum(distribution: str, dim: int, params: Mapping[str, Any] | None = None, *,
                       n_keys: int = _N_KEYS, n_queries: int = 1, **kwargs: Any) -> Spectrum:
    """Covariance eigenvalues and ``E‖x‖²`` of one synthetic trial's vectors, from the definition.

    Parameters
    ----------
    distribution : str
        One of :data:`kvstats.data.synthetic.DISTRIBUTIONS` (values use the same
        constructions, except ``focused``, which only keys have).
    dim : int
        Dimension d.
    params : mapping, optional
        The distribution's parameters (defaults as :func:`kvstats.sample`); keyword
        arguments are added to them (a parameter in both is a ValueError).
    n_keys, n_queries : int
        N and the queries per trial: only ``focused`` depends on them.

    Returns
    -------
    Spectrum
        Eigenvalues ``(d,)``, descending; ``mean_square`` a 0-d array.

    Notes
    -----
    ``focused``: the keys are ``N(0, s² I)`` except, per query ``j``, ``n_focus`` keys
    whose component along the query direction q̂ⱼ is set to ``αⱼ = Lⱼ√d/‖qⱼ‖`` with
    ``Lⱼ = c + s²‖qⱼ‖²/(2d)``, ``c = log t − log(1 − n_focus·t) + log(N − n_focus)``
    (``t`` the strength; their orthogonal part stays Gaussian: :func:`kvstats.sample`). Within a trial the
    keys' covariance is ``s² I + f Σⱼ (αⱼ² − s²) q̂ⱼq̂ⱼᵀ − μμᵀ`` (``f = n_focus/N``,
    ``μ = f Σⱼ αⱼ q̂ⱼ`` their mean): it changes from trial to trial with the queries.
    With ``‖q‖² ~ χ²_d``, ``E[α²] = c² d/(d − 2) + c s² + s⁴/4``, so the mean square
    ``E‖k‖² = s² d + n_q f (E[α²] − s²)`` and the mean over trials of the covariance's
    trace are exact. The eigenvalues give the ``k = min(n_q, d)`` query directions equal
    shares of that trace beyond ``s²`` per axis, ``s² + (n_q/k)((f − f²) E[α²] − f s²)``
    each, and ``s²`` to the other ``d − k``: that split is the approximation (``exact``
    False). In a trial the directions' variances differ (‖q‖ varies; queries that are not
    orthogonal spread them), and the bound of this mean spectrum lies below the mean of
    the trials' own bounds by that spread's Jensen term, checked at rates 1 to 4: under
    0.001 dB for ``n_q = 1`` (d = 64), 0.03 dB at d = 16, ``n_q = 4``, 0.06 dB at
    d = ``n_q`` = 16, 0.6 dB at d = 4, ``n_q`` = 8. For d ≤ 2, ``E[d/‖q‖²]`` is infinite
    and so is the focus keys' mean square: eigenvalues None, ``mean_square`` inf. Along
    q̂ the keys are not Gaussian (a two-point mixture), so the bound is that of the
    Gaussian of equal covariance.

    Examples
    --------
    >>> synthetic_spectrum("outlier_channels", 8, n_channels=2, magnitude=3.0).eigenvalues.tolist()
    [9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    >>> s = synthetic_spectrum("heavy_tailed", 8, nu=1.5)
    >>> s.defined, float(s.mean_square)
    (False, inf)
    >>> float(synthetic_spectrum("heavy_tailed", 8, nu=4.0).eigenvalues[0])
    2.0
    """
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    d = check_int(dim, "dim", low=1)
    N = check_int(n_keys, "n_keys", low=1)
    n_q = check_int(n_queries, "n_queries", low=1)
    keys_note = " (synthetic_spectrum's default n_keys)" if N == _N_KEYS else ""
    p = _resolve(distribution, _params_of(params, kwargs), d, n_q, N, what="parameter(s)",
                 keys_note=keys_note)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            spec = _synthetic_spectrum(distribution, d, N, n_q, p)
        finite = spec.eigenvalues is None or bool(np.isfinite(spec.eigenvalues).all()
                                                  and np.isfinite(spec.mean_square))
    except OverflowError:                        # a Python float (e.g. scale**2) overflowed
        finite = False
    if not finite:
        raise ValueError(f"parameter(s) of {distribution!r} must give a covariance within the "
                         f"float64 range; received {p} (lower scale or magnitude)")
    return spec


def _synthetic_spectrum(distribution: str, d: int, N: int, n_q: int, p: dict[str, Any]) -> Spectrum:
    """`synthetic_spectrum` from the resolved parameters (unchecked for overflow)."""
    s2 = p["scale"] ** 2
    if distribution == "gaussian":
        lam = np.full(d, s2)
        return Spectrum(lam, np.asarray(s2 * d), True, f"N(0, {s2:g}·I): exact")
    if distribution == "heavy_tailed":
        nu = p["nu"]
        if nu <= 2:
            return Spectrum(None, np.asarray(np.inf), True,
                            f"Student-t coordinates with nu = {nu:g} <= 2 have infinite variance: "
                            "no covariance, no Gaussian bound")
        v = s2 * nu / (nu - 2)
        return Spectrum(np.full(d, v), np.asarray(v * d), True,
                        f"i.i.d. Student-t coordinates, variance {v:.4g} each: the bound is that of "
                        "a Gaussian of equal variance (a t source is easier to code)")
    if distribution == "low_rank":
        r, nz2 = p["rank"], p["noise"] ** 2
        v = d / r if p["energy"] == "total" else 1.0   # per direction (synthetic.sample)
        lam = np.r_[np.full(r, s2 * (v + nz2)), np.full(d - r, s2 * nz2)]
        return Spectrum(lam, np.asarray(s2 * (r * v + d * nz2)), True,
                        f"rank {r} of variance {s2 * (v + nz2):.4g} plus isotropic noise "
                        f"{s2 * nz2:.4g} (per trial; the basis is drawn per trial): exact, Gaussian")
    if distribution == "outlier_channels":
        c, m2, off = p["n_channels"], p["magnitude"] ** 2, p["offset"]
        lam = np.sort(np.r_[np.full(c, s2 * m2), np.full(d - c, s2)])[::-1].copy()  # m < 1: last
        ms = s2 * (d - c + c * m2 * (1 + off ** 2))
        return Spectrum(lam, np.asarray(ms), True,
                        f"{c} channels of variance {s2 * m2:.4g}"
                        + (f" and mean ±{math.sqrt(s2 * m2) * off:.4g}" if off else "")
                        + f", {d - c} of variance {s2:g} (per trial): exact, Gaussian given the channels")
    # focused: s²·I raised along the query directions (see Notes)
    nf, st = p["n_focus"], p["strength"]
    f = nf / N
    c = math.log(st) - math.log1p(-nf * st) + math.log(N - nf)   # L = c + s²‖q‖²/2d
    # α² = L²·d/‖q‖² with ‖q‖² ~ χ²_d: E[d/‖q‖²] = d/(d − 2), infinite for d ≤ 2
    inv = d / (d - 2) if d > 2 else math.inf
    alpha2 = (c * c * inv if c else 0.0) + c * s2 + s2 * s2 / 4
    if math.isinf(alpha2):
        return Spectrum(None, np.asarray(np.inf), True,
                        f"focused keys at d = {d} <= 2: E[d/‖q‖²] is infinite, so is the focus "
                        "keys' mean square: no covariance, no Gaussian bound")
    k = min(n_q, d)
    # E[trace of the within-trial covariance] beyond s²·d, shared equally by the k directions
    along = s2 + n_q / k * ((f - f * f) * alpha2 - f * s2)
    lam = np.sort(np.r_[np.full(k, along), np.full(d - k, s2)])[::-1].copy()
    ms = s2 * d + n_q * f * (alpha2 - s2)
    return Spectrum(lam, np.asarray(ms), False,
                    f"s²·I except the {k} query direction(s), variance {along:.4g} each: the "
                    "mean over trials of the within-trial covariance's trace split equally "
                    "(approximate: see synthetic_spectrum)")


def measured_spectrum(x: Float[np.ndarray, "*groups n d"]) -> Spectrum:
    """Sample covariance eigenvalues and mean square of each group of vectors.

    Parameters
    ----------
    x : array ``(*groups, n, d)``
        ``n ≥ 2`` vectors per group (float32 is promoted to float64).

    Returns
    -------
    Spectrum
        ``eigenvalues (*groups, d)`` (descending; the covariance centred on the group's
        mean, divided by ``n − 1``), ``mean_square (*groups,)`` (the mean of ``‖x‖²``);
        ``exact`` False (an estimate).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.5], [0.0, -0.5]])
    >>> s = measured_spectrum(x)
    >>> s.eigenvalues.round(4).tolist(), float(s.mean_square)
    ([0.6667, 0.1667], 0.625)
    """
    # C order whatever the layout: numpy's sums and products round in memory order, so a
    # Fortran-ordered x would give other last bits
    a = np.ascontiguousarray(as_float_array(x, "x", min_ndim=2), dtype=np.float64)
    n = a.shape[-2]
    if n < 2:
        raise ValueError(f"x must hold at least 2 vectors per group (axis -2) to estimate a "
                         f"covariance; received shape {a.shape}")
    c = a - a.mean(axis=-2, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):      # refused just below, naming x
        cov = np.swapaxes(c, -1, -2) @ c / (n - 1)
        ms = np.einsum("...nd,...nd->...", a, a) / n
    if not (np.isfinite(cov).all() and np.isfinite(ms).all()):
        raise ValueError(f"x must have squares within the float64 range (|x| below about 1e154) "
                         f"to estimate a covariance; received values up to {np.abs(a).max():.3g}: "
                         "rescale x")
    lam = np.clip(np.linalg.eigvalsh(cov)[..., ::-1], 0.0, None)  # rounding: tiny negatives
    return Spectrum(np.ascontiguousarray(lam), ms, False,
                    f"sample covariance of {n} vectors per group: the bound is that of a Gaussian "
                    "with this covariance")


def capture_spectra(path: str | os.PathLike, layer: int | Sequence[int] | None = None,
                    head: int | Sequence[int] | None = None) -> tuple[Spectrum, Spectrum]:
    """Key and value spectra of a captured cache, per trial as :func:`~kvstats.data.real.load_trials` orders them.

    The covariance of each (layer, KV head) is measured on the keys (values) of *all*
    the capture's texts pooled (``n_texts · N`` vectors); every trial (text, layer, head)
    gets the spectrum of its (layer, head).

    Parameters
    ----------
    path : path
        A capture file (:mod:`kvstats.data.capture_format`).
    layer, head : int or sequence of int, optional
        The selection, as for :func:`~kvstats.data.real.load_trials`.

    Returns
    -------
    (Spectrum, Spectrum)
        Keys, values: ``eigenvalues (n_trials, d)``, ``mean_square (n_trials,)`` with
        trial ``t`` the C-order index over (text, layer, head) of the selection.

    Examples
    --------
    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "c.npz")
    >>> rng = np.random.default_rng(0)
    >>> K = rng.standard_normal((2, 3, 2, 16, 8)).astype(np.float32)
    >>> np.savez(p, K=K, V=K, q=K.repeat(2, axis=2), meta=json.dumps({}))
    >>> k, v = capture_spectra(p, layer=[0, 2])
    >>> k.eigenvalues.shape, k.mean_square.shape
    ((8, 8), (8,))
    """
    from kvstats.data.capture_format import read_capture
    from kvstats.data.real import _capture_path, _layer_slots, _native, _select

    # memory maps: only the selected layers and heads are read (a capture can be GBs)
    K, V, _, meta = read_capture(_capture_path(path), mapped=True)
    n_texts, n_layers, n_kv, n_tok, d = K.shape
    layers = _layer_slots(meta, layer, n_layers, path)[0]   # stored slots of the model layers
    heads = _select(head, "head", n_kv)
    if n_texts * n_tok < 2:
        raise ValueError(f"path must be a capture with at least 2 key vectors per (layer, head) "
                         f"(n_texts · N) to estimate a covariance; {os.fspath(path)!r} holds "
                         f"{n_texts} text(s) of N = {n_tok}")
    out = []
    for X in (K, V):
        sel = _native(X[:, layers][:, :, heads])                 # (texts, L, H, N, d)
        pooled = np.moveaxis(sel, 0, 2).reshape(len(layers), len(heads), n_texts * n_tok, -1)
        s = measured_spectrum(pooled)                            # (L, H, d), (L, H)
        lam = np.broadcast_to(s.eigenvalues, (n_texts,) + s.eigenvalues.shape)
        ms = np.broadcast_to(s.mean_square, (n_texts,) + s.mean_square.shape)
        out.append(Spectrum(lam.reshape(-1, lam.shape[-1]).copy(), ms.reshape(-1).copy(), False,
                            f"sample covariance per (layer, head) over {n_texts} texts x {n_tok} "
                            "tokens: the bound of a Gaussian with this covariance"))
    return out[0], out[1]
