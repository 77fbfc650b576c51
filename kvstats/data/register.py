"""Key distributions of your own: register, list and remove them.

A researcher adds a key sampler ``sampler(n_trials, n_keys, dim, rng, params) -> K``
under a name (:func:`register_distribution`); :func:`kvstats.data.synthetic.sample`, sweep
configs and the report then treat the name as a built-in's, values and queries drawn as
for the built-ins. The schemes' counterpart is :mod:`kvstats.quant.register`;
:mod:`kvstats.plugins` imports the module that registers them in every process a sweep
uses.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvstats._checks import _describe
from kvstats.data.catalog import DISTRIBUTIONS, REAL
from kvstats.plugins import _misfit_call

__all__ = ["DistributionDef", "register_distribution", "unregister_distribution",
           "registered_distribution", "distribution_names", "user_distributions"]


_RESERVED = (REAL,)   # the sweep's captured-cache source


@dataclass(frozen=True)
class DistributionDef:
    """A registered key distribution: ``sampler(n_trials, n_keys, dim, rng, params) -> K``.

    ``K`` is a real array ``(n_trials, n_keys, dim)``; ``rng`` a numpy Generator (the
    keys' stream of :func:`sample`'s seed); ``params`` the defaults updated with the
    parameters given. Values and queries come from :func:`sample` as for the built-ins
    (``value_distribution``, ``n_queries``, ``dtype``). The sampler is called once per
    chunk of trials, in trial order, on the same ``rng``: a sampler that draws trial by
    trial keeps trial ``t`` the same whatever ``n_trials`` is.

    Each draw is checked: not a real ndarray is a TypeError; another shape, NaN/inf, or
    trials 0 and 1 equal (one draw broadcast, tiled or repeated over the trials: the trial
    is the tests' independent unit) a ValueError naming the distribution. A sampler that
    ignores ``rng`` (``np.random``, a generator of its own) passes these; only a sweep's
    preflight (:func:`kvstats.sweep.check_grid`) refuses it, as that takes two draws.
    """

    name: str
    sampler: Callable[..., np.ndarray] = field(compare=False)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""

    def _fill(self, g: list[np.random.Generator], n: int, N: int, d: int, p: dict, q: Any,
              dt: np.dtype) -> np.ndarray:
        x = self.sampler(n, N, d, g[0], dict(p))
        if not isinstance(x, np.ndarray) or x.dtype.kind not in "fiu":
            raise TypeError(f"distribution {self.name!r}: its sampler must return a real array of "
                            f"shape (n_trials, n_keys, dim) = {(n, N, d)}; received {_describe(x)}")
        if x.shape != (n, N, d):
            raise ValueError(f"distribution {self.name!r}: its sampler must return a real array of "
                             f"shape (n_trials, n_keys, dim) = {(n, N, d)}; received {_describe(x)}")
        if not np.isfinite(x).all():
            raise ValueError(f"distribution {self.name!r}: its sampler returned "
                             f"{int(x.size - np.isfinite(x).sum())} NaN/inf values")
        # the trial is the tests' independent unit: one draw broadcast, tiled or repeated
        # over the trials would count as n independent ones (two trials: one O(N d) compare)
        if n >= 2 and (x.strides[0] == 0 or np.array_equal(x[0], x[1])):
            raise ValueError(f"trials 0 and 1 of one draw have the same keys: the sampler of "
                             f"distribution {self.name!r} must draw each of its n_trials anew, not "
                             "repeat or broadcast one draw (the trial is the tests' independent unit)")
        return x


_USER: dict[str, DistributionDef] = {}
_DIST_ORIGIN: dict[str, str | None] = {}   # name -> the plugin that registered it


def distribution_names() -> tuple[str, ...]:
    """Every distribution :func:`~kvstats.data.synthetic.sample` knows: the built-ins
    (:data:`~kvstats.data.synthetic.DISTRIBUTIONS`), then registered ones.

    Examples
    --------
    >>> distribution_names()[:2]
    ('gaussian', 'heavy_tailed')
    """
    return DISTRIBUTIONS + tuple(_USER)


def user_distributions() -> dict[str, str | None]:
    """Registered distributions: name -> the plugin that registered it (None: a script).

    Examples
    --------
    >>> user_distributions()
    {}
    """
    return dict(_DIST_ORIGIN)


def register_distribution(name: str, sampler: Callable[..., np.ndarray],
                          defaults: Mapping[str, Any] | None = None, *, summary: str = "") -> DistributionDef:
    """Register a key distribution of your own under ``name``.

    Parameters
    ----------
    name : str
        A letter, then letters, digits, ``_ . + -``; not a built-in, not ``"real"``, not
        registered already.
    sampler : callable
        ``sampler(n_trials, n_keys, dim, rng, params) -> K`` (:class:`DistributionDef`):
        keys ``(n_trials, n_keys, dim)`` drawn from ``rng`` (a numpy Generator);
        raise a ValueError/TypeError naming a bad parameter (a sweep then fails before any
        compute, naming the entry).
    defaults : mapping, optional
        Every parameter it takes, with its default (numbers, strings or booleans: what a
        sweep config can hold); other names are refused by :func:`sample`.
    summary : str
        One line.

    Returns
    -------
    DistributionDef

    Raises
    ------
    ValueError, TypeError
        A name already used or malformed, a sampler that is not callable, defaults that
        are not a mapping of str to scalars; each naming the argument. Later, at each
        draw (:func:`~kvstats.data.synthetic.sample`): a TypeError when the sampler
        returns no real ndarray, a ValueError when it has another shape than
        ``(n_trials, n_keys, dim)``, holds NaN/inf, or gives trials 0 and 1 the same keys
        (see :class:`DistributionDef`; a sampler ignoring ``rng`` is refused by a sweep's
        preflight only).

    Examples
    --------
    >>> def shifted(n_trials, n_keys, dim, rng, params):
    ...     return params["shift"] + rng.standard_normal((n_trials, n_keys, dim))
    >>> from kvstats import register_distribution, sample, unregister_distribution
    >>> _ = register_distribution("shifted", shifted, {"shift": 1.0})
    >>> t = sample("shifted", 3, 16, 8, seed=0, shift=5.0)
    >>> t.K.shape, round(float(t.K.mean())), t.meta["params"]
    ((3, 16, 8), 5, {'shift': 5.0})
    >>> unregister_distribution("shifted")
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str; received {_describe(name)}")
    builtins = DISTRIBUTIONS
    if name in builtins or name in _RESERVED:
        raise ValueError(f"name {name!r} clashes with a built-in distribution "
                         f"({list(builtins + _RESERVED)}); choose another name")
    from kvstats.plugins import _pin, _rerun

    if name in _USER and _rerun(_USER[name], types.SimpleNamespace(sampler=sampler), ("sampler",)):
        return _USER[name]   # the same unchanged file ran as another module (a plugin imported by name)
    if name in _USER:
        by = _DIST_ORIGIN.get(name)
        raise ValueError(f"name {name!r} is already a registered distribution"
                         f"{f' (by plugin {by})' if by else ''}; unregister_distribution({name!r}) first")
    from kvstats.plugins import USER_NAME, current_plugin, similar_name

    if not USER_NAME.match(name):
        raise ValueError(f"name must start with a letter and hold only letters, digits and _ . + -; "
                         f"received {name!r}")
    other = similar_name(name, builtins + _RESERVED + tuple(_USER))
    if other is not None:
        raise ValueError(f"name {name!r} differs from the distribution {other!r} only by case or "
                         "punctuation (their report figures would share file names); choose another name")
    if not callable(sampler):
        raise TypeError(f"sampler must be a callable sampler(n_trials, n_keys, dim, rng, params); "
                        f"received {_describe(sampler)}")
    misfit = _misfit_call(sampler, 5)
    if misfit:   # else Python's bare arity error, at the first draw
        raise TypeError(f"sampler must take the 5 arguments sampler(n_trials, n_keys, dim, rng, params); "
                        f"received {misfit}")
    defaults = {} if defaults is None else defaults
    if not isinstance(defaults, Mapping):
        raise TypeError(f"defaults must be a mapping of parameter name to default; received "
                        f"{_describe(defaults)}")
    for key, value in defaults.items():
        if not isinstance(key, str) or not isinstance(value, (int, float, str, bool, type(None),
                                                              np.integer, np.floating, np.bool_)):
            raise TypeError(f"defaults must map str to a number, string, boolean or None; received "
                            f"{key!r}: {_describe(value)}")
    # numpy scalars as the Python values they equal: what a sweep config and JSON hold
    defaults = {key: value.item() if isinstance(value, np.generic) else value
                for key, value in defaults.items()}
    if not isinstance(summary, str):
        raise TypeError(f"summary must be a str; received {_describe(summary)}")
    ddef = DistributionDef(name, sampler, defaults, summary)
    _USER[name] = ddef
    _DIST_ORIGIN[name] = current_plugin()
    _pin(ddef, (sampler,))   # what it runs: a sweep refuses it once its file changes
    return ddef


def unregister_distribution(name: str) -> None:
    """Remove a registered distribution (a built-in cannot be removed).

    Parameters
    ----------
    name : str
        A distribution registered with :func:`register_distribution`.

    Raises
    ------
    ValueError
        ``name`` is not a registered distribution (the message lists them; a built-in or
        ``"real"`` is said to be one that cannot be unregistered).

    Examples
    --------
    >>> from kvstats import unregister_distribution
    >>> unregister_distribution("gaussian")
    Traceback (most recent call last):
    ...
    ValueError: name must be a registered distribution ([]); received 'gaussian' (a built-in cannot be unregistered)
    """
    if not isinstance(name, str) or name not in _USER:
        why = " (a built-in cannot be unregistered)" if name in DISTRIBUTIONS + _RESERVED else ""
        raise ValueError(f"name must be a registered distribution ({list(_USER)}); received "
                         f"{name!r}{why}")
    from kvstats.plugins import _PINS

    _PINS.pop(id(_USER.pop(name)), None)
    _DIST_ORIGIN.pop(name, None)


@contextmanager
def registered_distribution(name: str, sampler: Callable[..., np.ndarray],
                            defaults: Mapping[str, Any] | None = None, *,
                            summary: str = "") -> Iterator[DistributionDef]:
    """:func:`register_distribution` for the ``with`` block only (tests, notebooks).

    Examples
    --------
    >>> from kvstats.data.synthetic import sample
    >>> with registered_distribution("ones", lambda n, N, d, rng, p: np.ones((n, N, d))):
    ...     float(sample("ones", 1, 4, 2).K.sum())
    8.0
    >>> "ones" in distribution_names()
    False
    """
    ddef = register_distribution(name, sampler, defaults, summary=summary)
    try:
        yield ddef
    finally:
        if _USER.get(name) is ddef:
            unregister_distribution(name)
