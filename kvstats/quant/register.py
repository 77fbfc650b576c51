"""Schemes of your own: define, validate and register a :class:`~kvstats.quant.registry.SchemeDef`.

A researcher compares their own quantizer against the built-ins without editing
kvstats: :func:`define_scheme` builds the entry (two coders of the
:class:`~kvstats.quant.coder.Coder` protocol and the expected-bits formula written from
the scheme's definition), :func:`register_scheme` validates every field (a message
naming it) and adds it to :data:`~kvstats.quant.registry.REGISTRY`, after which
``make_scheme``, ``parse_scheme_name``, sweep configs, ``compare_schemes`` and the report
treat it as a built-in. :func:`kvstats.quant.contract.check_scheme` holds it to the
contract the built-ins pass; :mod:`kvstats.plugins` imports the module that registers it
in every process a sweep uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

from kvstats.plugins import USER_NAME, _misfit_call, similar_name
from kvstats.quant.builtin_schemes import _all_coords
from kvstats.quant.registry import _ORIGIN, _TABLE, BUILTIN, REGISTRY, SCHEMES, Builder, SchemeDef
from kvstats.quant.schemedef import _GROUP_SIZE, _codes_as_no_other

__all__ = ["scheme_names", "user_schemes", "define_scheme", "register_scheme", "unregister_scheme",
           "registered_scheme"]

#: Arguments of make_scheme (and settings the sweep sets) a scheme's params must not use.
_RESERVED_PARAMS = frozenset({"name", "bits", "dim", "seed", "draws"})


def scheme_names() -> tuple[str, ...]:
    """Every scheme name known to this process: :data:`SCHEMES` then the registered ones.

    Examples
    --------
    >>> scheme_names()[:3], len(scheme_names()) >= len(SCHEMES)
    (('KV', 'KQV', 'QKQV'), True)
    """
    return tuple(_TABLE)


def user_schemes() -> dict[str, str | None]:
    """The registered (non built-in) schemes: name -> the plugin that registered it (None:
    registered by a script's own :func:`register_scheme` call).

    Examples
    --------
    >>> user_schemes()
    {}
    """
    return {name: _ORIGIN[name] for name in _TABLE if name not in BUILTIN}


def _constant(value: bool) -> Callable[[Mapping[str, Any]], bool]:
    return partial(_const_bool, bool(value))


def _const_bool(value: bool, params: Mapping[str, Any]) -> bool:
    return value


def define_scheme(name: str, build: Builder, expected_bits: Callable[..., tuple[float, float]], *,
                  summary: str, params: Iterable[str] = (), min_bits: int = 1, max_bits: int = 8,
                  fixed_budget: bool = False, randomized: bool | Callable[[Mapping[str, Any]], bool] = False,
                  token_group_param: str | None = None, token_group_default: int = _GROUP_SIZE,
                  coded_dim: Callable[[int, Mapping[str, Any]], int] | None = None,
                  example_params: Mapping[str, Any] | None = None,
                  key_theory: str | None = None, defaults: Mapping[str, Any] | None = None,
                  codes_as: Callable[[Mapping[str, Any]], tuple[str, dict[str, Any], int | None] | None]
                  | None = None, key_rotated: bool | Callable[[Mapping[str, Any]], bool] = False
                  ) -> SchemeDef:
    """A :class:`SchemeDef` for a scheme of your own (then :func:`register_scheme` it).

    Parameters
    ----------
    name : str
        The scheme's name: a letter, then letters, digits, ``_ . + -``; not a built-in
        (:data:`SCHEMES`) nor a ``K{a}V{b}`` name.
    build : callable
        ``build(bits, dim, params, key_rng, value_rng, draws) -> (bits, key_coder,
        value_coder)``: two :class:`~kvstats.quant.coder.Coder` objects (one per side) and
        the budget to record: ``bits`` itself (another is a ValueError from
        ``make_scheme``), or for a fixed-budget scheme its own budget or None.
        ``bits`` is already checked against ``min_bits..max_bits``; ``params`` holds the
        keyword settings given (a subset of ``params``) with ``defaults`` filled in for
        those left out (a parameter without a declared default may be missing: use your
        default for it);
        ``key_rng``/``value_rng`` are numpy Generators for each side's randomness;
        ``draws`` is the batch shape of independent draws of it (``()``: one draw).
    expected_bits : callable
        ``expected_bits(bits, dim, n_tokens, params) -> (key_bits, value_bits)``: total
        bits stored for ``n_tokens`` vectors of one head, per side, written from your
        scheme's definition (codes and every scale, norm, offset), not from the coders:
        :func:`kvstats.quant.contract.check_scheme` holds the coders' ``stored_bits``
        against it.
    summary : str
        One line (``kvstats schemes`` and reports show it; a line break is refused).
    params : iterable of str
        The keyword settings :func:`kvstats.make_scheme` accepts for it.
    min_bits, max_bits : int
        Allowed budgets n (integers in 1..8; unused when ``fixed_budget``).
    fixed_budget : bool
        The budget is fixed by the scheme itself: ``make_scheme`` takes ``bits=None`` or
        the budget ``build`` returns (another is a ValueError); where it returns None,
        ``bits=None`` or the coders' common ``nominal_bits``.
    randomized : bool or callable
        Whether it has random components (a callable ``params -> bool`` if that depends
        on its settings); the contract checks that another seed gives other codes
        exactly when it is.
    token_group_param, token_group_default : str or None, int
        The parameter giving the number of tokens that share stored statistics, and
        its default where ``defaults`` declares none (per-vector schemes: None; the
        contract then holds each token of a call to decode as when coded alone).
    coded_dim : callable, optional
        ``coded_dim(dim, params) -> int``, the coordinates the codes spend their bits on
        (default: ``dim``).
    example_params : mapping, optional
        Settings of a minimal instance (required for parameters without a default).
    key_theory : {None, "mse", "prod"}
        Only for keys coded as TurboQuant-mse/-prod are: the closed form of the key error.
    key_rotated : bool or callable
        Whether the key side codes randomly rotated keys (a callable ``params -> bool`` if
        that depends on its settings). With a ``key_theory``, the theory table then
        predicts the key error on every distribution, not only isotropic Gaussian keys,
        and pairs an "mse" scheme with the "prod" ones for the variance ratios; the
        contract checks that the rotation spreads channel outliers. Default False.
    defaults : mapping, optional
        The constant value a parameter left out takes (keys among ``params``). Declared, it makes a sweep config's ``{name = "mine"}`` and
        ``{name = "mine", params = {p = <its default>}}`` one scheme (refused as a
        duplicate, :func:`kvstats.quant.registry.resolved_scheme`), and ``expected_bits``,
        ``randomized``, ``coded_dim`` and the token group read the parameters with it filled
        in, and so does ``build``; a default that depends on the bits or d stays the
        build's own. A sweep's cell ids hash them (a changed default recomputes the
        cells on ``resume``).
    codes_as : callable, optional
        ``codes_as(params) -> (name, its params, budget) or None`` (``params`` with
        ``defaults`` filled in): another registered scheme that codes as this one, as the
        built-ins declare theirs (:meth:`~kvstats.quant.registry.SchemeDef.codes_as`): given
        one seed, its builder makes the same coders with the same draws. ``budget`` is None
        (they coincide at every budget both take) or, for a ``fixed_budget`` scheme, the
        budget it fixes. A sweep config then refuses the two side by side where they code
        the same cells; :func:`kvstats.quant.contract.check_scheme` codes both with one seed
        and fails a declaration that is not true. It changes which configs a sweep accepts,
        not any number, so cell ids do not hash it. Default: none.

    Returns
    -------
    SchemeDef
        Not registered yet: pass it to :func:`register_scheme` (which validates it).

    Examples
    --------
    >>> from kvstats import define_scheme
    >>> from kvstats.quant.uniform import UniformTokenCoder
    >>> def build(bits, dim, params, key_rng, value_rng, draws):
    ...     return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)
    >>> def bits_of(bits, dim, n_tokens, params):   # codes + an fp16 scale and zero per vector
    ...     side = n_tokens * (bits * dim + 2 * 16)
    ...     return side, side
    >>> sdef = define_scheme("minmax", build, bits_of, summary="per-token min-max uniform")
    >>> sdef.expected_bits(4, 64, 10)
    4.5

    A parameter with a default, written once (``group_size``: coordinates per fp16 scale
    and zero):

    >>> DEFAULTS = {"group_size": 16}
    >>> def build(bits, dim, params, key_rng, value_rng, draws):   # params: the defaults filled in
    ...     group = params["group_size"]
    ...     return bits, UniformTokenCoder(bits, dim, group), UniformTokenCoder(bits, dim, group)
    >>> def bits_of(bits, dim, n_tokens, params):                  # here too
    ...     return (n_tokens * (bits * dim + 2 * 16 * -(-dim // params["group_size"])),) * 2
    >>> sdef = define_scheme("grouped", build, bits_of, summary="per-token min-max uniform in groups",
    ...                      params=["group_size"], defaults=DEFAULTS)
    >>> sdef.expected_bits(4, 64, 10), sdef.expected_bits(4, 64, 10, group_size=64)
    (6.0, 4.5)

    A scheme that codes as a registered one (here TurboQuant-mse without a rotation,
    through its builder) says so:

    >>> from kvstats.quant.registry import scheme_def
    >>> tq = scheme_def("turboquant_mse")
    >>> def build(bits, dim, params, key_rng, value_rng, draws):
    ...     return tq.build(bits, dim, {**tq.defaults, "rotation": "identity"}, key_rng, value_rng, draws)
    >>> def bits_of(bits, dim, n_tokens, params):
    ...     return tq._bits(bits, dim, n_tokens, {**tq.defaults, "rotation": "identity"})
    >>> def as_tq(params):
    ...     return "turboquant_mse", {"rotation": "identity"}, None
    >>> sdef = define_scheme("plain_tq", build, bits_of, summary="TurboQuant-mse unrotated",
    ...                      codes_as=as_tq)
    >>> sdef.codes_as({})
    ('turboquant_mse', {'rotation': 'identity'}, None)
    """
    if not isinstance(params, (str, bytes)) and isinstance(params, Iterable):
        params = frozenset(params)
    if isinstance(randomized, bool):
        randomized = _constant(randomized)
    if isinstance(key_rotated, bool):
        key_rotated = _constant(key_rotated)
    if defaults is None or isinstance(defaults, Mapping):   # else register_scheme says what is wrong
        defaults = dict(defaults or {})   # a copy (a dict: a script's registration is pickled)
    return SchemeDef(name=name, summary=summary, params=params, min_bits=min_bits, max_bits=max_bits,
                     fixed_budget=fixed_budget, token_group_param=token_group_param, gpu=False,
                     key_theory=key_theory, build=build, _randomized=randomized,
                     _bits=expected_bits,
                     _coded=_all_coords if coded_dim is None else coded_dim,
                     example_params=dict(example_params or {}),
                     token_group_default=token_group_default, defaults=defaults,
                     _codes_as=_codes_as_no_other if codes_as is None else codes_as,
                     _key_rotated=key_rotated)


def _check_def(sdef: SchemeDef) -> None:
    """Every field of a scheme about to be registered, with a message naming it."""
    if not isinstance(sdef, SchemeDef):
        raise TypeError(f"scheme must be a SchemeDef (build one with kvstats.quant.registry."
                        f"define_scheme); received {type(sdef).__name__}")
    name = sdef.name
    if not isinstance(name, str):
        raise TypeError(f"SchemeDef field 'name' must be a str; received {name!r}")
    if name in BUILTIN or re.fullmatch(r"K\d+V\d+", name, flags=re.IGNORECASE):
        raise ValueError(f"SchemeDef field 'name' {name!r} clashes with a built-in scheme name "
                         f"({list(SCHEMES)} and 'K{{a}}V{{b}}'); choose another name")
    if name in _TABLE:
        by = _ORIGIN.get(name)
        raise ValueError(f"SchemeDef field 'name' {name!r} is already registered"
                         f"{f' (by plugin {by})' if by else ''}; unregister_scheme({name!r}) first "
                         "or choose another name")
    if not USER_NAME.match(name):
        raise ValueError(f"SchemeDef field 'name' must start with a letter and hold only letters, "
                         f"digits and _ . + -; received {name!r}")
    other = similar_name(name, _TABLE)
    if other is not None:
        raise ValueError(f"SchemeDef field 'name' {name!r} differs from the scheme {other!r} only by "
                         "case or punctuation (their report figures would share file names); "
                         "choose another name")
    if not isinstance(sdef.summary, str) or not sdef.summary.strip():
        raise TypeError(f"SchemeDef field 'summary' must be a non-empty str (one line); "
                        f"received {sdef.summary!r}")
    if len(sdef.summary.strip().splitlines()) > 1:
        raise ValueError(f"SchemeDef field 'summary' must be one line (tables and reports show "
                         f"it on one); received {sdef.summary!r}")
    if not isinstance(sdef.params, frozenset) or not all(isinstance(p, str) for p in sdef.params):
        raise TypeError(f"SchemeDef field 'params' must be a frozenset of str; received {sdef.params!r}")
    reserved = sorted(sdef.params & _RESERVED_PARAMS)
    if reserved:
        raise ValueError(f"SchemeDef field 'params' must not contain {reserved} (make_scheme's own "
                         f"arguments); received {sorted(sdef.params)}")
    for fname in ("min_bits", "max_bits"):
        value = getattr(sdef, fname)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"SchemeDef field {fname!r} must be an int; received {value!r}")
        if not 1 <= value <= 8:
            raise ValueError(f"SchemeDef field {fname!r} must be in [1, 8] (the budgets a sweep "
                             f"takes); received {value}")
    if sdef.min_bits > sdef.max_bits:
        raise ValueError(f"SchemeDef field 'min_bits' must be <= 'max_bits'; received "
                         f"{sdef.min_bits} > {sdef.max_bits}")
    for fname in ("fixed_budget", "gpu"):
        if not isinstance(getattr(sdef, fname), bool):
            raise TypeError(f"SchemeDef field {fname!r} must be True or False; "
                            f"received {getattr(sdef, fname)!r}")
    if sdef.gpu:
        raise ValueError("SchemeDef field 'gpu' must be False for a user scheme (the GPU path "
                         "runs only the built-in MSE/prod coders); received True")
    tgp = sdef.token_group_param
    if tgp is not None and (not isinstance(tgp, str) or tgp not in sdef.params):
        raise ValueError(f"SchemeDef field 'token_group_param' must be None or one of params "
                         f"{sorted(sdef.params)}; received {tgp!r}")
    if sdef.key_theory not in (None, "mse", "prod"):
        raise ValueError(f"SchemeDef field 'key_theory' must be one of [None, 'mse', 'prod']; "
                         f"received {sdef.key_theory!r}")
    # the fields by define_scheme's argument names (the dataclass field in parentheses)
    for fname, arg, what, n_args in (
            ("build", "build", "(bits, dim, params, key_rng, value_rng, draws)", 6),
            ("_randomized", "randomized", "(params) -> bool", 1),
            ("_bits", "expected_bits", "(bits, dim, n_tokens, params)", 4),
            ("_coded", "coded_dim", "(dim, params) -> int", 2),
            ("_codes_as", "codes_as", "(params) -> (name, params, budget) or None", 1),
            ("_key_rotated", "key_rotated", "(params) -> bool", 1)):
        field = repr(arg) if arg == fname else f"{arg!r} ({fname!r})"
        if not callable(getattr(sdef, fname)):
            raise TypeError(f"SchemeDef field {field} must be a callable {arg}{what}; "
                            f"received {getattr(sdef, fname)!r}")
        misfit = _misfit_call(getattr(sdef, fname), n_args)
        if misfit:   # else Python's bare arity error, at the first make_scheme or check
            raise TypeError(f"SchemeDef field {field} must take the {n_args} arguments {arg}{what}; "
                            f"received {misfit}")
    if not isinstance(sdef.example_params, Mapping):
        raise TypeError(f"SchemeDef field 'example_params' must be a mapping; "
                        f"received {sdef.example_params!r}")
    extra = sorted(set(sdef.example_params) - sdef.params)
    if extra:
        raise ValueError(f"SchemeDef field 'example_params' may set only params {sorted(sdef.params)}; "
                         f"received {extra}")
    if not isinstance(sdef.defaults, Mapping):
        raise TypeError(f"SchemeDef field 'defaults' must be a mapping; received {sdef.defaults!r}")
    extra = sorted(set(sdef.defaults) - sdef.params, key=str)
    if extra:
        raise ValueError(f"SchemeDef field 'defaults' may set only params {sorted(sdef.params)}; "
                         f"received {extra}")
    tgd = sdef.token_group_default
    if isinstance(tgd, bool) or not isinstance(tgd, int) or tgd < 1:
        raise ValueError(f"SchemeDef field 'token_group_default' must be an int >= 1; received {tgd!r}")
    _check_facts(sdef)


def _check_facts(sdef: SchemeDef) -> None:
    """The facts other modules ask of the entry (the theory table, the cache), asked once
    of a minimal instance, ``example_params`` with ``defaults`` filled in: a fact that
    fails there fails now, naming the field, not in a later report."""
    for arg, ask in (("randomized", lambda p: sdef.randomized(p)),
                     ("key_rotated", lambda p: sdef.key_rotated(p)),
                     ("token_group_param", lambda p: sdef.token_group(p)),
                     ("coded_dim", lambda p: sdef.coded_dim(64, p))):
        try:
            value = ask(dict(sdef.example_params))
        except Exception as exc:  # noqa: BLE001 - the scheme's own code: say which field
            raise ValueError(f"SchemeDef field {arg!r} fails for example_params "
                             f"{dict(sdef.example_params)} (with defaults {dict(sdef.defaults)}): "
                             f"{type(exc).__name__}: {exc}; give every parameter without a "
                             f"default in example_params") from exc
        if arg == "coded_dim" and value < 1:
            raise ValueError(f"SchemeDef field 'coded_dim' must return a positive int; "
                             f"received {value} for d = 64 and example_params")


def register_scheme(scheme: SchemeDef) -> SchemeDef:
    """Register a scheme of your own: after this, :func:`kvstats.make_scheme`,
    :func:`parse_scheme_name`, sweep configs, :func:`kvstats.compare_schemes` and the report
    treat it as a built-in.

    The definition is validated here (every field, with a message naming it); its
    behaviour is checked by :func:`kvstats.quant.contract.check_scheme`, the contract
    the built-ins pass. A registration lasts for the process (a sweep's worker processes
    get it: see docs/usage.md, "Your own scheme or distribution"); a sweep config's
    ``[sweep] plugins`` imports a module that registers, in every process that needs it.

    Parameters
    ----------
    scheme : SchemeDef
        Made by :func:`define_scheme` (or a ``SchemeDef`` written out).

    Returns
    -------
    SchemeDef
        ``scheme``; or the registered one when ``scheme`` is it made again by the same,
        unchanged file run as another module (functions of the same names there): a
        plugin that a script also imports by its module name runs twice, and its second
        registration is a no-op.

    Raises
    ------
    ValueError
        A name already used (a built-in, a ``K{a}V{b}`` name, an earlier registration
        other than the above) or a field out of range, naming the field.
    TypeError
        A field of the wrong type, naming the field.

    Examples
    --------
    >>> from kvstats import define_scheme, register_scheme, unregister_scheme
    >>> from kvstats.quant.uniform import UniformTokenCoder
    >>> def build(bits, dim, params, key_rng, value_rng, draws):
    ...     return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)
    >>> def bits_of(bits, dim, n_tokens, params):
    ...     return (n_tokens * (bits * dim + 32),) * 2
    >>> sdef = register_scheme(define_scheme("minmax", build, bits_of, summary="min-max"))
    >>> import kvstats
    >>> kvstats.make_scheme("minmax", 4, 64).bits_per_coord(8).total
    4.5
    >>> register_scheme(define_scheme("KQV", build, bits_of, summary="mine"))
    Traceback (most recent call last):
    ...
    ValueError: SchemeDef field 'name' 'KQV' clashes with a built-in scheme name ([...] and 'K{a}V{b}'); choose another name
    >>> unregister_scheme("minmax")
    """
    from kvstats.plugins import _pin, _rerun, current_plugin

    name = getattr(scheme, "name", None)
    if isinstance(scheme, SchemeDef) and isinstance(name, str) and name in _TABLE and name not in BUILTIN \
            and _rerun(_TABLE[name], scheme, ("build", "_bits")):
        return _TABLE[name]   # the same unchanged file ran as another module (a plugin imported by name)
    _check_def(scheme)
    _TABLE[scheme.name] = scheme
    _ORIGIN[scheme.name] = current_plugin()
    _pin(scheme, (scheme.build, scheme._bits))   # what it runs: a sweep refuses it once they change
    return scheme


def unregister_scheme(name: str) -> None:
    """Remove a registered scheme (a built-in cannot be removed).

    Parameters
    ----------
    name : str
        A scheme registered with :func:`register_scheme`.

    Raises
    ------
    ValueError
        ``name`` is not a registered user scheme (the message lists them; a built-in is
        said to be one that cannot be unregistered).

    Examples
    --------
    >>> from kvstats import unregister_scheme
    >>> unregister_scheme("KQV")
    Traceback (most recent call last):
    ...
    ValueError: name must be a registered user scheme ([]); received 'KQV' (a built-in cannot be unregistered)
    """
    if not isinstance(name, str) or name in BUILTIN or name not in _TABLE:
        why = " (a built-in cannot be unregistered)" if name in BUILTIN else ""
        raise ValueError(f"name must be a registered user scheme ({list(user_schemes())}); "
                         f"received {name!r}{why}")
    from kvstats.plugins import _PINS

    _PINS.pop(id(_TABLE.pop(name)), None)
    _ORIGIN.pop(name, None)


@contextmanager
def registered_scheme(scheme: SchemeDef) -> Iterator[SchemeDef]:
    """Register ``scheme`` for the ``with`` block only (tests, notebooks).

    Examples
    --------
    >>> from kvstats.quant.coder import IdentityCoder
    >>> def build(bits, dim, params, key_rng, value_rng, draws):
    ...     return None, IdentityCoder(dim), IdentityCoder(dim)
    >>> sdef = define_scheme("copy", build, lambda b, d, n, p: (32 * n * d,) * 2,
    ...                      summary="stores K and V", fixed_budget=True)
    >>> with registered_scheme(sdef):
    ...     "copy" in REGISTRY
    True
    >>> "copy" in REGISTRY
    False
    """
    register_scheme(scheme)
    try:
        yield scheme
    finally:
        if _TABLE.get(scheme.name) is scheme:
            unregister_scheme(scheme.name)
