"""Synthetic key/value/query distributions with documented scales.

Every distribution returns independent trials of keys ``K (T, N, d)``, values
``V (T, N, d)`` and queries ``q (T, n_q, d)``. Scales are chosen so that the baseline,
``gaussian``, has ``E‖k‖² = d`` and queries ``q ~ N(0, I_d)``: the attention logits
``q·k/√d`` then have unit variance, the regime of a freshly initialised transformer.

Reproducibility. One seed gives the same bits on every machine with the same numpy and
BLAS kernels. ``low_rank`` alone goes through LAPACK/BLAS (its basis is a QR, its keys a
matrix product), whose last bits depend on the kernels OpenBLAS picks for the CPU: its
float64 draws on SkylakeX kernels differ from Haswell ones by up to 4.4e-16 of the largest |k|
(float32 output: the same bits in practice; tests/data/test_lowrank_family.py). Each random quantity
(keys, values, queries, bases, channel choices, focus positions) has its own stream
spawned from the seed, and every stream is consumed in trial order. Consequently trial
``t`` is the same whatever ``n_trials`` is: ``sample(..., n_trials=10, seed=s)`` is the
first ten trials of ``sample(..., n_trials=1000, seed=s)`` (same other arguments).

Generator versions (``generator=``; stored results name theirs, so they stay reproducible).
``1`` (the default) draws every quantity in float64 (float32 output is the float64 sample
rounded); ``2`` draws the Gaussian components of keys and values in the output dtype
(``standard_normal(dtype=...)``): same laws, other float32 numbers, the same float64 ones.
Student-t coordinates, queries, low-rank bases and channel choices are drawn as in version 1
(numpy has no float32 t, and its float32 gamma rounds small values to 0: it would cut the tail).

Distributions of your own: :func:`kvstats.data.register.register_distribution` adds a
key sampler ``sampler(n_trials, n_keys, dim, rng, params) -> K`` under a name;
:func:`sample` draws it through the same streams as a built-in (:data:`DISTRIBUTIONS`
stays the built-in names).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from jaxtyping import Float

from kvstats._checks import (_describe, as_generator, check_choice, check_int,
                             check_real)
from kvstats.data.catalog import DISTRIBUTIONS, VALUE_DISTRIBUTIONS
from kvstats.data.register import _USER, distribution_names
from kvstats.data.trials import Trials, _float_dtype

__all__ = ["DISTRIBUTIONS", "GENERATORS", "VALUE_DISTRIBUTIONS", "LOW_RANK_ENERGIES", "LOW_RANK_QUERIES",
           "sample", "default_params", "attention_entropy", "scale_for_entropy"]

# Random streams per component (keys and values each get their own block).
_N_STREAMS = 4
# Bound on the float64 elements of one array generated at once (32 MiB): the output is
# filled in chunks of trials so that 1000 x 1024 x 128 float32 samples need no float64 copy.
_CHUNK_ELEMENTS = 1 << 22

_DEFAULTS: dict[str, dict[str, Any]] = {
    "gaussian": {"scale": 1.0},
    "heavy_tailed": {"nu": 3.0, "scale": 1.0},
    "low_rank": {"rank": None, "noise": 0.1, "energy": "total", "query": "isotropic", "scale": 1.0},
    "focused": {"strength": 0.5, "n_focus": 1, "scale": 1.0},
    "outlier_channels": {"n_channels": 4, "magnitude": 10.0, "offset": 0.0, "scale": 1.0},
}

_NU_MIN = 1.05

#: ``low_rank``'s ``energy``: the signal's total energy fixed at ``d`` (variance ``d/rank``
#: per direction) or each direction's variance fixed at 1.
LOW_RANK_ENERGIES = ("total", "per_direction")
#: ``low_rank``'s ``query``: queries ``N(0, I_d)``, or inside the trial's key subspace.
LOW_RANK_QUERIES = ("isotropic", "subspace")
# Distributions whose keys are ``scale`` times a draw that does not depend on ``scale``, so
# that ``scale`` is exactly a logit scale (focused keys are built around their logits).
_SCALE_LINEAR = ("gaussian", "heavy_tailed", "low_rank", "outlier_channels")

#: Generator versions of `sample` (see the module notes): 1 draws in float64, 2 in the
#: output dtype.
GENERATORS = (1, 2)


def default_params(distribution: str) -> dict[str, Any]:
    """Return the default parameters of ``distribution`` (a copy).

    Parameters
    ----------
    distribution : str
        A name in :data:`DISTRIBUTIONS` or one registered with
        :func:`kvstats.register_distribution`.

    Returns
    -------
    dict
        Parameter name -> default value: the keyword arguments ``sample`` accepts for it.

    Examples
    --------
    >>> from kvstats.data import default_params
    >>> default_params("heavy_tailed")
    {'nu': 3.0, 'scale': 1.0}
    """
    check_choice(distribution, "distribution", distribution_names())
    return dict(_defaults(distribution))


def _defaults(distribution: str) -> Mapping[str, Any]:
    user = _USER.get(distribution)
    return _DEFAULTS[distribution] if user is None else user.defaults


def _resolve(distribution: str, params: Mapping[str, Any], dim: int, n_queries: int,
             n_keys: int, *, what: str, keys_note: str = "") -> dict[str, Any]:
    """``params`` over the distribution's defaults, checked for ``(dim, n_queries, n_keys)``.

    A message never says the caller passed a default: a default that does not fit the
    shape is named as the default (``keys_note`` follows ``n_keys`` in the messages: a
    caller whose own ``n_keys`` may be a default says so).
    """
    defaults = _defaults(distribution)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"{what} {unknown} not accepted by distribution {distribution!r}; "
                         f"allowed parameters are {sorted(defaults)}")
    p = {**defaults, **params}
    if distribution in _USER:
        return p   # the user's sampler checks its own parameters
    # a value parameter's error says so: 'scale' alone could be the keys' or the values'
    name = (lambda key: f"value_params[{key!r}]") if what == "value_params" else str
    p["scale"] = check_real(p["scale"], name("scale"), low=0.0, low_open=True)
    if distribution == "heavy_tailed":
        nu = check_real(p["nu"], name("nu"))  # one range in one message, below
        if not nu >= _NU_MIN:
            raise ValueError(f"{name('nu')} must be a finite number >= {_NU_MIN} (the mean exists "
                             f"only for nu > 1, and below {_NU_MIN} single draws reach 1e8 and "
                             f"more); received {nu}")
        p["nu"] = nu
    elif distribution == "low_rank":
        p["rank"] = min(8, dim) if p["rank"] is None else check_int(p["rank"], name("rank"), low=1,
                                                                     high=dim)
        p["noise"] = check_real(p["noise"], name("noise"), low=0.0)
        check_choice(p["energy"], name("energy"), LOW_RANK_ENERGIES)
        check_choice(p["query"], name("query"), LOW_RANK_QUERIES)
        if what == "value_params" and p["query"] != "isotropic":
            raise ValueError(f"value_params query must be 'isotropic' (values have no queries to "
                             f"place in their subspace); received {p['query']!r}")
    elif distribution == "focused":
        p["n_focus"] = nf = check_int(p["n_focus"], "n_focus", low=1)
        if nf >= n_keys:
            # the focus logit is set against the other keys' weight: none left, no logit
            if "n_focus" not in params:
                raise ValueError(f"n_keys must be >= {nf + 1} for 'focused' with its default "
                                 f"n_focus={nf} (a focus key's weight is set against the other "
                                 f"keys'); received n_keys={n_keys}{keys_note}")
            raise ValueError(f"n_focus must be < n_keys (a focus key's weight is set against "
                             f"the other keys'); received n_focus={nf}, n_keys={n_keys}{keys_note}")
        if nf * n_queries > n_keys:
            given = f"n_focus={nf}, " if "n_focus" in params else ""
            default = "" if given else f" with the default n_focus={nf}"
            raise ValueError(f"n_focus * n_queries must be <= n_keys (each query gets its own "
                             f"focus keys); received {given}n_queries={n_queries}, "
                             f"n_keys={n_keys}{keys_note}{default}")
        if "strength" not in params and not p["strength"] < 1.0 / nf:
            raise ValueError(f"strength must be given for 'focused' with n_focus={nf}: its "
                             f"default strength={p['strength']} is not < 1/n_focus (each of the "
                             f"n_focus keys gets weight strength); pass strength in (0, {1.0 / nf:g})")
        p["strength"] = check_real(p["strength"], "strength", low=0.0,
                                   high=1.0 / nf, low_open=True, high_open=True)
    elif distribution == "outlier_channels":
        if "n_channels" not in params and not p["n_channels"] <= dim:
            raise ValueError(f"dim must be >= {p['n_channels']} for {name('n_channels')} at its default "
                             f"{p['n_channels']} (outlier channels are among the dim channels); "
                             f"received dim={dim}: pass {name('n_channels')} <= {dim} or a larger dim")
        p["n_channels"] = check_int(p["n_channels"], name("n_channels"), low=1, high=dim)
        p["magnitude"] = check_real(p["magnitude"], name("magnitude"), low=0.0, low_open=True)
        # a size: each channel's sign is drawn (-x would be x's law by another name); +0.0: -0.0 as 0.0
        p["offset"] = check_real(p["offset"], f"{name('offset')} (its sign is random per channel)", low=0.0) + 0.0
    return p


# --- generators: each fills trials [0, n) of one chunk from its own streams -------------
# ``dt`` is the dtype of the Gaussian draws: float64 for generator 1, the output dtype
# for 2 (the Student-t is drawn in float64 in both versions: see _heavy_tailed).

def _scaled(scale: float, x: np.ndarray) -> np.ndarray:
    """``scale * x``; ``x`` itself for the default scale 1 (the product would be x bit for
    bit, one pass over a fresh draw later)."""
    return x if scale == 1.0 else scale * x


def _gaussian(g: list[np.random.Generator], n: int, N: int, d: int, p: dict, q: Any,
              dt: np.dtype) -> np.ndarray:
    return _scaled(p["scale"], g[0].standard_normal((n, N, d), dtype=dt))


def _heavy_tailed(g: list[np.random.Generator], n: int, N: int, d: int, p: dict,
                  q: Any, dt: np.dtype) -> np.ndarray:
    # i.i.d. coordinates: the heavy tail lives in single coordinates, which is what a
    # rotation can spread out (a multivariate t would only vary the norm). float64 in
    # every version: numpy's float32 gamma (the t's chi-square) returns 0 at a rate of
    # about 2**-24 (its uniforms' resolution), which would cut the tail the t is for.
    return _scaled(p["scale"], g[0].standard_t(p["nu"], size=(n, N, d)))


def _low_rank(g: list[np.random.Generator], n: int, N: int, d: int, p: dict, q: Any,
              dt: np.dtype) -> np.ndarray:
    r = p["rank"]
    basis, _ = np.linalg.qr(g[1].standard_normal((n, d, r)))        # (n, d, r), orthonormal
    coef = g[2].standard_normal((n, N, r), dtype=dt)                 # variance 1 per direction
    if p["energy"] == "total":
        coef = coef * np.sqrt(d / r)                                  # E‖signal‖² = d
    x = coef @ np.swapaxes(basis, -1, -2).astype(dt, copy=False)
    if p["query"] == "subspace":
        # q is a view of sample's float64 queries: they are moved into the key subspace
        # here, where the trial's basis is known; √(d/r)·BBᵀz keeps E‖q‖² = d.
        q[...] = np.sqrt(d / r) * ((q @ basis) @ np.swapaxes(basis, -1, -2))
    if p["noise"] > 0:
        x += p["noise"] * g[0].standard_normal((n, N, d), dtype=dt)
    return _scaled(p["scale"], x)


def _outlier_channels(g: list[np.random.Generator], n: int, N: int, d: int, p: dict,
                      q: Any, dt: np.dtype) -> np.ndarray:
    x = g[0].standard_normal((n, N, d), dtype=dt)
    ch = np.argsort(g[1].random((n, d)), axis=1)[:, : p["n_channels"]]       # (n, c)
    sign = np.where(g[2].random((n, p["n_channels"])) < 0.5, -1.0, 1.0)
    rows = np.arange(n)[:, None]
    sel = x[rows, :, ch]                                                     # (n, c, N)
    x[rows, :, ch] = p["magnitude"] * (sel + (p["offset"] * sign)[..., None])
    return _scaled(p["scale"], x)


def _focused(g: list[np.random.Generator], n: int, N: int, d: int, p: dict,
             q: np.ndarray, dt: np.dtype) -> np.ndarray:
    s, nf, sigma = p["strength"], p["n_focus"], p["scale"]
    n_q = q.shape[1]
    x = _scaled(sigma, g[0].standard_normal((n, N, d), dtype=dt))
    pos = np.argsort(g[1].random((n, N)), axis=1)[:, : n_q * nf].reshape(n, n_q, nf)
    qn = np.linalg.norm(q, axis=-1)                                           # (n, n_q)
    qhat = q / qn[..., None]
    # Background logits l = q·k/√d ~ N(0, σ²‖q‖²/d) given q, so E[e^l | q] = exp(σ²‖q‖²/2d).
    # n_f focus keys at logit L each get e^L / (n_f e^L + S) with S ≈ (N - n_f) E[e^l];
    # solving = s gives L below. The realised S fluctuates around its mean (relative sd
    # ≈ 1.3/√N), so E[max p] ≈ s up to a small Jensen term.
    log_s_bg = np.log(N - nf) + sigma**2 * qn**2 / (2 * d)
    L = np.log(s) - np.log1p(-nf * s) + log_s_bg                              # (n, n_q)
    rows = np.arange(n)[:, None, None]
    z = x[rows, pos]                                                          # (n, n_q, nf, d)
    qh = qhat[:, :, None, :]
    z = z - np.sum(z * qh, axis=-1, keepdims=True) * qh                      # drop q-component
    alpha = L * np.sqrt(d) / qn                                               # q·k_f/√d = L
    x[rows, pos] = z + alpha[..., None, None] * qh
    return x


_GENERATORS: dict[str, Callable[..., np.ndarray]] = {
    "gaussian": _gaussian,
    "heavy_tailed": _heavy_tailed,
    "low_rank": _low_rank,
    "focused": _focused,
    "outlier_channels": _outlier_channels,
}


def _chunk_trials(distribution: str, N: int, d: int, p: dict) -> int:
    """Trials per chunk: ``_CHUNK_ELEMENTS`` over a trial's largest array (low_rank: (d, rank))."""
    return max(1, _CHUNK_ELEMENTS // (d * max(N, p["rank"] if distribution == "low_rank" else N)))


def _check_normal(distribution: str, p: dict, d: int, dt: np.dtype, what: str) -> None:
    """Refuse parameters that put a component's typical |x| below ``dt``'s smallest normal
    (all-zero or subnormal draws: chance puts a few there, these put all)."""
    s, name = p["scale"], (lambda k: f"value_params[{k!r}]") if what == "value_params" else str
    parts = {"scale": s}     # heavy_tailed: the t's scale parameter is 1; focused: its background
    if distribution == "low_rank":   # a signal coordinate's SD is √(v·rank/d), v as documented
        parts = {"scale rank energy": s * math.sqrt(1.0 if p["energy"] == "total" else p["rank"] / d),
                 "scale noise": s * p["noise"] if p["noise"] > 0 else np.inf}
    elif distribution == "outlier_channels":
        parts["scale magnitude offset"] = s * p["magnitude"] * math.hypot(1.0, p["offset"])
    for names, typical in parts.items():     # Python floats: no overflow warning, no cast
        if typical < float(np.finfo(dt).tiny):
            given = ", ".join(f"{name(k)}={p[k]!r}" for k in names.split())
            fix = ("them" if " " in names else "it") + (", or draw float64" if dt == np.float32 else "")
            raise ValueError(f"{what} of {distribution!r} must give normal {dt} draws (typical "
                             f"|x| >= {np.finfo(dt).tiny:.3g}, the smallest normal); received "
                             f"{given}, typical |x| {typical:.3g}: all zero or subnormal (raise {fix})")


def _fill(out: np.ndarray, distribution: str, gens: list[np.random.Generator], p: dict,
          q: np.ndarray | None, generator: int, what: str) -> None:
    T, N, d = out.shape
    chunk = _chunk_trials(distribution, N, d, p)
    if distribution not in _USER:                # the user's sampler checks its own parameters
        _check_normal(distribution, p, d, out.dtype, what)
    fn = _GENERATORS[distribution] if distribution in _GENERATORS else _USER[distribution]._fill
    dt = out.dtype if generator == 2 else np.dtype(np.float64)
    f64 = ", or draw float64" if out.dtype == np.float32 else ""
    for a in range(0, T, chunk):                 # chunks of trials, not vectors
        b = min(T, a + chunk)
        try:
            # parameters that scale a draw beyond the float range: refused below, naming them
            with np.errstate(over="ignore", invalid="ignore"):
                out[a:b] = x = fn(gens, b - a, N, d, p, None if q is None else q[a:b], dt)
            finite = bool(np.isfinite(out[a:b]).all())
        except OverflowError:                    # a Python float (e.g. scale**2) overflowed
            if distribution in _USER:            # the sampler's own error: not relabelled
                raise
            finite = False
        if not finite and distribution in _USER:   # no scale of ours to lower: its values
            raise ValueError(f"distribution {distribution!r}: its sampler returned values beyond "
                             f"the {out.dtype} range (max |x| = {float(np.max(np.abs(x))):.3g}, "
                             f"largest {out.dtype} {np.finfo(out.dtype).max:.3g}"
                             + ("): draw float64" if out.dtype == np.float32 else ")"))
        if not finite:
            raise ValueError(f"{what} of {distribution!r} must give finite {out.dtype} draws; received "
                             f"parameters {p} that take them beyond the {out.dtype} range (lower "
                             f"scale, magnitude, offset or noise{f64})")


def sample(distribution: str, n_trials: int, n_keys: int, dim: int, seed: Any = 0,
           n_queries: int = 1, dtype: Any = np.float64, value_distribution: str | None = None,
           value_params: Mapping[str, Any] | None = None, generator: int = 1,
           **params: Any) -> Trials:
    """Draw independent trials of keys, values and queries from a synthetic distribution.

    Parameters
    ----------
    distribution : str
        Key distribution, one of ``DISTRIBUTIONS`` or a registered one
        (:func:`kvstats.data.register.register_distribution`; parameters in ``**params``):

        ``"gaussian"`` (``scale=1``)
            ``k ~ N(0, scale² I_d)``; ``E‖k‖² = scale² d``.
        ``"heavy_tailed"`` (``nu=3``, ``scale=1``)
            i.i.d. coordinates ``scale · t_ν`` (standard Student-t, scale parameter 1,
            *not* unit variance). Var = scale² ν/(ν−2) for ν > 2; for 1 < ν ≤ 2 the variance is
            infinite (SNR then varies wildly between trials, which is the point) and the
            mean exists. Valid ν ≥ 1.05; ν ≤ 1 (no mean) is rejected.
        ``"low_rank"`` (``rank=min(8, d)``, ``noise=0.1``, ``energy="total"``, ``query="isotropic"``, ``scale=1``)
            ``k = scale · (B c + noise · z)`` with ``B (d × rank)`` a uniformly random
            orthonormal basis drawn per trial (shared by the trial's keys),
            ``z ~ N(0, I_d)`` and ``c ~ N(0, v I_rank)``. ``energy="total"``: ``v = d/rank``,
            so the signal has ``E‖Bc‖² = d`` like ``gaussian`` whatever the rank, and
            ``E‖k‖² = scale² d (1 + noise²)``; ``"per_direction"``: ``v = 1`` (each
            direction carries the variance of one coordinate of a ``gaussian`` key),
            ``E‖k‖² = scale² (rank + noise² d)``. Covariance eigenvalues, per trial:
            ``scale² (v + noise²)`` (rank times) and ``scale² noise²`` (d − rank times).
            ``query="subspace"``: each query is ``√(d/rank) · B Bᵀ z_q`` (its isotropic draw
            projected into the trial's key subspace, ``E‖q‖² = d`` kept), so the logits
            have variance ``scale² (v + noise²)`` (``scale² (d/rank + noise²)`` for
            ``"total"``: far sharper attention than isotropic queries'
            ``scale² (rank·v + noise² d)/d``).
        ``"focused"`` (``strength=0.5``, ``n_focus=1``, ``scale=1``)
            Gaussian keys (scale ``scale``), except that each query gets ``n_focus`` keys
            of its own at random positions whose component along the query is set so
            that each receives expected attention weight ``strength`` (``E[max p] ≈
            strength``; their component orthogonal to the query stays Gaussian). Valid
            ``0 < strength < 1/n_focus`` (the default 0.5 needs ``n_focus = 1``: with
            more focus keys pass ``strength``) and ``n_focus · n_queries ≤ N``,
            ``n_focus < N``; within 0.01 when ``strength`` is well above the unfocused top
            weight (``≈ exp(σ√(2 ln N) − σ²/2)/N``, σ = ``scale``: an upper estimate, 0.040
            at N = 512, σ = 1, where Gaussian keys give 0.027), for N ≳ 200 at σ = 1.5 and
            N ≳ 100 at σ ≤ 1.25 (0.318 for 0.3 at N = 100, σ = 1.5); at larger σ the
            lognormal background sum fluctuates more and ``E[max p]`` exceeds small
            strengths (0.21 for 0.2 at σ = 2, N = 1024); with many queries the other
            queries' focus keys weigh more in the background than Gaussian keys, and
            ``E[max p]`` falls below ``strength`` (0.488 for 0.5 at ``n_queries = 64``,
            N = 512, d = 64; docs/measurement.md).
        ``"outlier_channels"`` (``n_channels=4``, ``magnitude=10``, ``offset=0``, ``scale=1``)
            Gaussian keys except ``n_channels`` channels, chosen at random per trial and
            fixed across its keys (as in real keys of deeper layers), equal to
            ``magnitude · (z ± offset)`` (sign random per channel, so ``offset ≥ 0``): a
            channel-wise scale and, with ``offset``, a channel-wise bias. ``1 ≤ n_channels ≤ d`` (the
            default 4 needs ``d ≥ 4``: for smaller ``d`` pass ``n_channels``).

        A shape too small for a parameter left at its default is a ValueError naming
        the shape and the default (never as if the default had been passed).
    n_trials, n_keys, dim : int
        ``T`` independent trials of ``N`` keys of dimension ``d``.
    seed : int, SeedSequence, Generator or None
        Source of randomness (see the module notes on reproducibility). A SeedSequence
        or Generator is advanced by each call (the streams are its next spawned
        children): passed again, it gives new, independent trials; the numbers already
        drawn from a Generator do not matter. An int gives the same trials every time.
    n_queries : int
        Queries per trial, ``q ~ N(0, I_d)`` independent of everything except that
        ``focused`` keys are built around them and ``low_rank`` with ``query="subspace"``
        moves them into the key subspace.
    dtype : float32 or float64
        Output dtype (float32 is the float64 draw rounded, for ``generator=1``).
    value_distribution : str, optional
        Distribution of the values, one of ``VALUE_DISTRIBUTIONS`` or a registered one; default ``"gaussian"``
        (standard normal, independent of the keys).
    value_params : mapping, optional
        Parameters of ``value_distribution``.
    generator : {1, 2}
        Generator version (module notes): 1 draws in float64 (the default; the numbers
        of every stored result), 2 draws the Gaussian components of keys and values in
        ``dtype`` (float32 natively, faster: docs/benchmarks.md; other numbers, same
        laws; for float64 output the same numbers as 1). Recorded in
        ``meta["generator"]``.
    **params
        Parameters of the key distribution; unknown names raise a ``ValueError`` listing
        the allowed ones.

    Returns
    -------
    Trials
        ``K (T, N, d)``, ``V (T, N, d)``, ``q (T, n_queries, d)`` and ``meta`` recording
        the distributions, the resolved parameters and the seed: an int seed as given,
        for ``seed=None`` the OS entropy drawn (an int that draws the same trials again),
        for a SeedSequence or Generator the repr of its seed sequence before the call
        (``Generator(Philox(SeedSequence(...)))`` for a Generator on a bit generator other
        than numpy's default PCG64).

    Examples
    --------
    >>> import kvstats
    >>> import numpy as np
    >>> t = kvstats.sample("heavy_tailed", n_trials=4, n_keys=32, dim=16, seed=1, nu=1.5)
    >>> t.K.shape, t.q.shape, t.meta["params"]["nu"]
    ((4, 32, 16), (4, 1, 16), 1.5)
    >>> kvstats.sample("focused", 2, 64, 16, seed=0, n_queries=3, strength=0.8).q.shape
    (2, 3, 16)
    >>> kvstats.sample("gaussian", 2, 8, 4, dtype=np.float32, generator=2).meta["generator"]
    2
    """
    check_choice(distribution, "distribution", distribution_names())
    T = check_int(n_trials, "n_trials", low=1)
    N = check_int(n_keys, "n_keys", low=1)
    d = check_int(dim, "dim", low=1)
    n_q = check_int(n_queries, "n_queries", low=1)
    dt = _float_dtype(dtype)
    if T * max(N, n_q) * d * 8 > np.iinfo(np.intp).max:   # numpy's own refusal names no argument
        raise ValueError(f"n_trials * max(n_keys, n_queries) * dim must fit one array (at most "
                         f"{np.iinfo(np.intp).max // 8} float64 elements); received n_trials={T}, "
                         f"n_keys={N}, n_queries={n_q}, dim={d}")
    vdist = "gaussian" if value_distribution is None else value_distribution
    if vdist == "focused":
        raise ValueError(f"value_distribution must be one of {list(VALUE_DISTRIBUTIONS)} "
                         "('focused' describes keys aligned with queries); received 'focused'")
    check_choice(vdist, "value_distribution", VALUE_DISTRIBUTIONS + tuple(_USER))
    if value_params is not None and not isinstance(value_params, Mapping):
        raise TypeError(f"value_params must be a mapping; received {_describe(value_params)}")
    generator = check_choice(check_int(generator, "generator"), "generator", GENERATORS)
    kp = _resolve(distribution, params, d, n_q, N, what="parameter(s)")
    vp = _resolve(vdist, dict(value_params or {}), d, n_q, N, what="value_params")

    rng = as_generator(seed)
    seed_record = _seed_record(seed, rng)          # before spawn advances the sequence
    streams = rng.spawn(2 * _N_STREAMS + 1)
    k_gens, v_gens, q_gen = streams[:_N_STREAMS], streams[_N_STREAMS:2 * _N_STREAMS], streams[-1]

    q64 = q_gen.standard_normal((T, n_q, d))
    K = np.empty((T, N, d), dtype=dt)
    V = np.empty((T, N, d), dtype=dt)
    _fill(K, distribution, k_gens, kp, q64, generator, "parameter(s)")
    _fill(V, vdist, v_gens, vp, None, generator, "value_params")
    meta = {"source": "synthetic", "distribution": distribution, "params": kp,
            "value_distribution": vdist, "value_params": vp, "n_queries": n_q,
            "seed": seed_record, "dtype": dt.name, "generator": generator}
    return Trials(K, V, q64.astype(dt), meta)


def _seed_record(seed: Any, rng: np.random.Generator) -> int | str:
    """What ``meta["seed"]`` records: a seed that draws the same trials again.

    An int as given; for ``None`` the OS entropy drawn (an int: ``sample(seed=it)`` spawns
    the same streams); for a SeedSequence or a Generator the repr of its seed sequence as
    it was before this call (the streams are its next children, whatever state the
    Generator's bits are in), to pass back as ``numpy.random.SeedSequence(...)``; for a
    Generator on another bit generator than numpy's default PCG64, that repr wrapped as
    ``Generator(Philox(SeedSequence(...)))`` (its streams use its bit generator).
    """
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    ss = rng.bit_generator.seed_seq
    entropy = getattr(ss, "entropy", None)
    if entropy is None:                       # a seedless bit generator: nothing to record
        return repr(seed)
    if seed is None:
        return int(entropy)
    record = repr(np.random.SeedSequence(entropy, spawn_key=ss.spawn_key, pool_size=ss.pool_size,
                                         n_children_spawned=ss.n_children_spawned))
    bit_generator = type(rng.bit_generator).__name__
    # streams spawned from a Generator keep its bit generator: a bare sequence would
    # replay them on PCG64 (numpy's default), other numbers for Philox, MT19937, ...
    return record if bit_generator == "PCG64" else f"Generator({bit_generator}({record}))"


def attention_entropy(q: Float[np.ndarray, "*batch n_q d"],
                      K: Float[np.ndarray, "*batch N d"]) -> Float[np.ndarray, "*batch n_q"]:
    """Entropy (nats) of the attention ``softmax(q·k/√d)`` of each query over its keys.

    The sharpness the sensitivity studies match distributions at: ``log N`` for uniform
    attention, 0 for one-hot. Computed in float64 with a stable log-sum-exp.

    Parameters
    ----------
    q : array ``(*batch, n_q, d)``
        Queries, finite.
    K : array ``(*batch, N, d)``
        Keys, finite; the batch axes broadcast against ``q``'s.

    Returns
    -------
    numpy.ndarray ``(*batch, n_q)``
        float64 entropies in nats, in ``[0, log N]``.

    Examples
    --------
    >>> import numpy as np
    >>> attention_entropy(np.zeros((1, 4)), np.ones((8, 4))).round(4)  # uniform: log 8
    array([2.0794])
    """
    from kvstats.metrics.attention import _q_k   # metrics imports data: not at the top

    q, K = (a.astype(np.float64, copy=False) for a in _q_k(q, K))
    with np.errstate(over="ignore", invalid="ignore"):      # refused just below
        logits = q @ np.swapaxes(K, -1, -2) / np.sqrt(q.shape[-1])
    if not np.isfinite(logits).all():
        raise ValueError("q and K: the logits q·k/√d exceed the float64 range; rescale q or K")
    return _entropy(logits)


def _entropy(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=-1)
    return np.log(s) - np.sum(e * z, axis=-1) / s


def scale_for_entropy(distribution: str, entropy: float, n_keys: int, dim: int, *,
                      n_trials: int = 64, n_queries: int = 1, seed: Any = 0,
                      **params: Any) -> float:
    """The ``scale`` at which ``distribution``'s attention has a given mean entropy.

    Keys of the distributions in ``_SCALE_LINEAR`` (all but ``focused``) are ``scale``
    times a draw that does not depend on it, so ``scale`` multiplies every logit
    ``q·k/√d``, and the mean entropy of ``softmax`` (:func:`attention_entropy`) over the
    trials and queries of one calibration draw falls strictly from ``log N`` (scale → 0)
    to its one-hot limit. The returned scale solves ``mean entropy = entropy`` on that
    draw (Brent's method in ``log scale``, to 1e-12 relative). Calibrate on a seed the
    evaluated trials do not use: the scale is then a fixed setting, not fitted to them.

    Parameters
    ----------
    distribution : str
        One of ``gaussian``, ``heavy_tailed``, ``low_rank``, ``outlier_channels``.
    entropy : float
        Target mean entropy in nats, in ``(0, log n_keys)``.
    n_keys, dim : int
        N and d of the draw (the entropy depends on both).
    n_trials, n_queries : int
        Size of the calibration draw (float64, generator 1).
    seed : int, SeedSequence, Generator or None
        Seed of the calibration draw.
    **params
        The distribution's other parameters (``scale`` is what is solved for).

    Returns
    -------
    float
        The ``scale`` parameter.

    Examples
    --------
    >>> s = scale_for_entropy("gaussian", 3.0, 64, 16, n_trials=8, seed=1)
    >>> t = sample("gaussian", 8, 64, 16, seed=1, scale=s)
    >>> round(float(attention_entropy(t.q, t.K).mean()), 9)
    3.0
    """
    from scipy.optimize import brentq

    check_choice(distribution, "distribution", _SCALE_LINEAR)
    if "scale" in params:
        raise ValueError(f"params must not contain 'scale' (it is what scale_for_entropy solves "
                         f"for); received scale={params['scale']!r}")
    others = sorted(set(default_params(distribution)) - {"scale"})
    unknown = sorted(set(params) - set(others))
    if unknown:   # before sample(), whose list of allowed parameters would offer scale
        raise ValueError(f"params {unknown} not accepted by scale_for_entropy for {distribution!r}; "
                         f"allowed: {others or 'none'} (scale is what it solves for)")
    N = check_int(n_keys, "n_keys", low=2)
    h = check_real(entropy, "entropy", low=0.0, high=float(np.log(N)), low_open=True, high_open=True)
    t = sample(distribution, n_trials, N, dim, seed=seed, n_queries=n_queries, **params)
    logits = t.q @ np.swapaxes(t.K, -1, -2) / np.sqrt(dim)        # at scale 1

    def gap(log_s: float) -> float:
        return float(_entropy(np.exp(log_s) * logits).mean()) - h

    lo, hi = -1.0, 1.0
    for _ in range(60):                      # widen until the target is bracketed
        if gap(lo) > 0:
            break
        lo -= 2.0
    for _ in range(60):
        if gap(hi) < 0:
            break
        hi += 2.0
    if not (gap(lo) > 0 > gap(hi)):
        raise ValueError(f"entropy must be reachable by scaling {distribution!r}'s logits: between "
                         f"{gap(hi) + h:.6g} and {gap(lo) + h:.6g} nats on this draw; received {h}")
    return float(np.exp(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12)))
