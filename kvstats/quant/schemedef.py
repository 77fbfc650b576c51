"""What the project knows about one scheme: :class:`SchemeDef`, the type of every entry of
:data:`kvstats.quant.registry.REGISTRY`, and :data:`Builder`, the signature of its builder.

A scheme's constant parameter defaults live in its entry's ``defaults`` alone: every
method here hands its formula the parameters with them filled in
(:meth:`SchemeDef.filled`), :func:`kvstats.make_scheme` hands them so to ``build``, and
:func:`kvstats.quant.registry.resolved_scheme` reads them to tell two spellings of one
scheme apart from two schemes.

The built-in entries are :mod:`kvstats.quant.builtin_schemes`; a researcher's own come
from :func:`kvstats.quant.register.define_scheme`.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from kvstats._checks import _describe, check_int

if TYPE_CHECKING:
    from kvstats.quant.coder import Coder

__all__ = ["SchemeDef", "Builder", "as_declared_type"]

_GROUP_SIZE = 32      # default tokens per group (kivi, qjl outliers) and kivi's window


def _per_trial(params: Mapping[str, Any]) -> str:
    return ""


def _no(params: Mapping[str, Any]) -> bool:
    return False


def _codes_as_no_other(params: Mapping[str, Any]) -> None:
    return None


def as_declared_type(value: Any, kind: type | None, name: str) -> Any:
    """``value`` as a number of the parameter's declared type ``kind`` (``int``, ``float``;
    None: as given), so that ``3`` and ``3.0`` are one setting in every cell id, label and
    manifest: an integer given for a float parameter is that float, a whole float given
    for an integer parameter that integer. Anything else is returned as given (a bool
    stays a bool, a string a string; an integer beyond the float range stays an integer:
    the builder or sampler that reads it says what is wrong with it). The one rule of
    scheme parameters (:meth:`SchemeDef.canonical`) and of distribution parameters (whose
    declared type is their default's: ``kvstats.sweep.specs``).

    Parameters
    ----------
    value : object
        The parameter as given.
    kind : {int, float, None}
        Its declared type.
    name : str
        The parameter's name, for the message.

    Returns
    -------
    object
        ``value``, a number written as ``kind``.

    Raises
    ------
    ValueError
        A number with a fractional part (or NaN, ±inf) given for an ``int`` parameter.

    Examples
    --------
    >>> from kvstats.quant.schemedef import as_declared_type
    >>> as_declared_type(1, float, "scale"), as_declared_type(64.0, int, "group_size")
    (1.0, 64)
    >>> as_declared_type(True, int, "n_outliers"), as_declared_type("head", float, "scale")
    (True, 'head')
    >>> as_declared_type(32.5, int, "group_size")
    Traceback (most recent call last):
    ...
    ValueError: group_size must be an integer (a whole number: its declared type is int); received 32.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    if kind is float and isinstance(value, numbers.Integral) and abs(value) <= sys.float_info.max:
        return float(value)
    if kind is int and not isinstance(value, numbers.Integral):
        if not float(value).is_integer():
            raise ValueError(f"{name} must be an integer (a whole number: its declared type is int); "
                             f"received {value!r}")
        return int(value)
    return value


# (bits, dim, params, key_rng, value_rng, draws) -> (recorded bits, key coder, value coder)
Builder = Callable[[int | None, int, dict, np.random.Generator, np.random.Generator, tuple[int, ...]],
                   "tuple[float | None, Coder, Coder]"]


@dataclass(frozen=True)
class SchemeDef:
    """Everything the project knows about one scheme.

    Attributes
    ----------
    name : str
        Registry name (``"K{a}V{b}"`` names resolve to ``mixed``).
    summary : str
        One line (a multi-line one is refused at registration).
    params : frozenset of str
        Keyword parameters :func:`kvstats.make_scheme` accepts for it.
    min_bits, max_bits : int
        Allowed budget n (bits per coordinate); unused when ``fixed_budget``.
    fixed_budget : bool
        The budget is fixed by the scheme itself: its parameters (``mixed``), its storage
        (``identity``) or its format (q8_0, fp8_e4m3, nvfp4, ...). ``make_scheme`` takes
        ``bits=None`` or the budget the build records (mixed: the mean of its sides; for
        one recording None, as identity, the coders' common nominal bits).
    token_group_param : str or None
        Parameter giving the number of tokens that share stored statistics (kivi, qjl);
        None for per-vector schemes.
    gpu : bool
        ``Scheme.export()`` is supported (kvstats_gpu can run it).
    key_theory : {"mse", "prod"} or None
        Closed-form family of the key side (see :meth:`key_rel_mse`).
    _key_rotated : callable
        ``params -> bool``: the key side codes randomly rotated keys (see
        :meth:`key_rotated`; default: never).
    build : callable
        ``(bits, dim, params, key_rng, value_rng, draws) -> (bits, key_coder, value_coder)``;
        ``bits`` already checked against ``min_bits..max_bits`` unless ``fixed_budget``;
        ``params`` with ``defaults`` filled in (:func:`kvstats.make_scheme` fills them, for
        a built-in and a user's scheme alike; the :class:`~kvstats.quant.schemes.Scheme`
        records the parameters as given).
    example_params : mapping
        Parameters of a minimal instance (those without a default: ``mixed`` needs
        ``key_bits`` and ``value_bits``); the contract tests build every entry with them.
    token_group_default : int
        ``token_group`` when ``token_group_param`` is neither given nor in ``defaults``
        (32).
    _couples : callable
        ``params -> str``: the per-trial setting to use instead where ``params`` couple the
        trials of one call, else "" (see :meth:`couples_trials`; default: never).
    _couples_tokens : callable
        ``params -> bool``: the tokens of one call share a statistic though no token group
        is declared (see :meth:`couples_tokens`; default: never).
    _codes_as : callable
        ``params -> (name, params, bits) or None``: another entry that codes as this one
        (see :meth:`codes_as`; default: none).
    defaults : mapping
        The value each parameter with a constant default takes when left out (those that
        depend on the bits or d, such as qjl's ``m = n·d``, are the builder's alone). The
        methods below, the expected-bits formula and the identity of a sweep's scheme
        (:func:`kvstats.quant.registry.resolved_scheme`) read the parameters with these
        filled in.
    param_types : mapping
        Parameter -> ``int`` or ``float``: the type a number given for it is written as
        (:meth:`canonical`; fp8's ``scale``, a float or a string, is ``float``). Where it
        declares none, a float default declares ``float``.
    """

    name: str
    summary: str
    params: frozenset[str]
    min_bits: int
    max_bits: int
    fixed_budget: bool
    token_group_param: str | None
    gpu: bool
    key_theory: str | None
    build: Builder = field(repr=False, compare=False)
    _randomized: Callable[[Mapping[str, Any]], bool] = field(repr=False, compare=False)
    _bits: Callable[..., tuple[float, float]] = field(repr=False, compare=False)
    _coded: Callable[[int, Mapping[str, Any]], int] = field(repr=False, compare=False)
    example_params: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    token_group_default: int = _GROUP_SIZE
    _couples: Callable[[Mapping[str, Any]], str] = field(default=_per_trial, repr=False, compare=False)
    defaults: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _codes_as: Callable[[Mapping[str, Any]], tuple[str, dict[str, Any], int | None] | None] = field(
        default=_codes_as_no_other, repr=False, compare=False)
    _key_rotated: Callable[[Mapping[str, Any]], bool] = field(default=_no, repr=False, compare=False)
    _couples_tokens: Callable[[Mapping[str, Any]], bool] = field(default=_no, repr=False, compare=False)
    param_types: Mapping[str, type] = field(default_factory=dict, repr=False, compare=False)

    def canonical(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with each number written as its declared type
        (:func:`as_declared_type`): ``scale=1`` and ``scale=1.0`` are one setting, with
        one cell id, label and manifest entry. The type is :attr:`param_types`', else
        ``float`` for a parameter whose default is a float (a user's scheme declares it
        so), else none (the value as given).

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("fp8_e4m3").canonical({"scale": 1}), scheme_def("kivi").canonical({"group_size": 64.0})
        ({'scale': 1.0}, {'group_size': 64})
        """
        return {key: as_declared_type(value, self._declared(key), key) for key, value in params.items()}

    def _declared(self, key: str) -> type | None:
        kind = self.param_types.get(key)
        if kind is None and isinstance(self.defaults.get(key), float):
            return float   # an int default declares nothing: a user's int may stand for any number
        return kind

    def filled(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with :attr:`defaults` filled in for those left out.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("kivi").filled({"residual": 0})
        {'group_size': 32, 'residual': 0}
        """
        return {**self.defaults, **params}

    def randomized(self, params: Mapping[str, Any]) -> bool:
        """Whether the scheme has random components (rotation, sketch) under ``params``.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("turboquant_mse").randomized({}), scheme_def("K4V2").randomized({"rotation": "identity"})
        (True, False)
        """
        return bool(self._randomized(self.filled(params)))

    def couples_trials(self, params: Mapping[str, Any]) -> bool:
        """Whether the slices of one encode call share stored statistics under ``params``
        (one scale per call: ``scale="tensor"``), so that a trial's codes depend on the
        trials coded with it and a sweep's numbers on its chunk size.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("fp8_e4m3").couples_trials({"scale": "tensor"}), scheme_def("fp8_e4m3").couples_trials({})
        (True, False)
        """
        return bool(self._couples(self.filled(params)))

    def per_trial_setting(self, params: Mapping[str, Any]) -> str:
        """The setting to use instead where ``params`` couple the trials of one call (see
        :meth:`couples_trials`), else "".

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("fp8_e4m3").per_trial_setting({"scale": "tensor"})
        "scale='head' (the default) or a static scale=<float>"
        >>> scheme_def("nvfp4").per_trial_setting({"scale": "tensor"})   # it takes no float scale
        "scale='head' (the default)"
        """
        return self._couples(self.filled(params))

    def couples_tokens(self, params: Mapping[str, Any]) -> bool:
        """Whether the tokens of one encode call share a statistic under ``params`` though
        the entry declares no token group (``token_group`` 1): fp8/nvfp4 ``scale="head"``
        or ``"tensor"``, one scale over every token a call codes. A token's codes then depend
        on the tokens coded with it, so a cache coding tokens as they arrive codes them
        otherwise than a sweep coding N at once (a static ``scale=<float>`` does not).

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("fp8_e5m2").couples_tokens({}), scheme_def("fp8_e5m2").couples_tokens({"scale": 2.0})
        (True, False)
        """
        return bool(self._couples_tokens(self.filled(params)))

    def key_rotated(self, params: Mapping[str, Any]) -> bool:
        """Whether the key side codes randomly rotated keys under ``params``: a
        ``key_theory`` then holds as a yardstick for keys other than isotropic Gaussian
        (their rotated coordinates are close to the sphere law), which the theory table
        reads, with :meth:`coded_dim`, to place its predictions.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("KQV").key_rotated({}), scheme_def("KV").key_rotated({})
        (True, False)
        >>> scheme_def("turboquant_mse").key_rotated({"rotation": "identity"})
        False
        """
        return bool(self._key_rotated(self.filled(params)))

    def codes_as(self, params: Mapping[str, Any]) -> tuple[str, dict[str, Any], int | None] | None:
        """Another registry entry that codes as this one under ``params``, as ``(name,
        its params, budget)``: given one seed, its builder makes the same coders with the
        same draws, so both code any data to the same bits. ``budget`` is where they
        coincide: the bits this entry's own parameters fix (``K4V4`` is ``turboquant_mse``
        at 4 bits only), or None at every budget both are given (``KV`` is
        ``turboquant_mse`` with ``rotation="identity"``). None where no other entry is
        declared to. The entry named is run at budgets (not ``fixed_budget``) and declares
        no such entry itself (another declaration is a ValueError naming this entry);
        :func:`kvstats.quant.contract.check_codes_as` codes both to hold it true.

        A sweep refuses two entries that code the same cells
        (:func:`kvstats.quant.registry.coded_scheme`): they would run under two scheme
        seeds and be compared with each other as two schemes.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("KV").codes_as({})
        ('turboquant_mse', {'norm_dtype': 'float16', 'rotation': 'identity'}, None)
        >>> scheme_def("K4V4").codes_as({"key_bits": 4, "value_bits": 4})
        ('turboquant_mse', {'rotation': 'hadamard', 'norm_dtype': 'float16'}, 4)
        >>> scheme_def("K4V2").codes_as({"key_bits": 4, "value_bits": 2}) is None
        True
        """
        declared = self._codes_as(self.filled(params))
        if declared is not None:
            self._check_codes_as(declared)
        return declared

    def _check_codes_as(self, declared: Any) -> None:
        """What :meth:`codes_as` returns, held to its form (a ValueError naming the entry)."""
        from kvstats.quant.registry import REGISTRY

        def refuse(what: str) -> NoReturn:
            raise ValueError(f"scheme {self.name!r}: codes_as must return None or (name, params, "
                             f"budget), {what}; received {declared!r}")

        if not (isinstance(declared, tuple) and len(declared) == 3):
            refuse("a tuple of three")
        target, target_params, budget = declared
        if target == self.name or not isinstance(target, str) or target not in REGISTRY:
            refuse(f"its name one of the other registered schemes {[n for n in REGISTRY if n != self.name]}")
        tdef = REGISTRY[target]
        if tdef.fixed_budget:
            refuse(f"its name a scheme run at budgets ({target!r} is fixed_budget)")
        if not isinstance(target_params, Mapping):
            refuse(f"its params a mapping of {target!r}'s settings")
        if tdef._codes_as(tdef.filled(target_params)) is not None:   # not codes_as: no cycle
            refuse(f"its name a scheme declaring no codes_as itself ({target!r} declares one)")
        if budget is None and self.fixed_budget:
            refuse("its budget the one its own parameters fix (a fixed_budget scheme), not None")
        if budget is not None and not self.fixed_budget:
            refuse("its budget None (a scheme run at budgets coincides at every budget both take)")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or budget not in range(tdef.min_bits, tdef.max_bits + 1)):
            refuse(f"its budget an integer in [{tdef.min_bits}, {tdef.max_bits}] ({target!r}'s range)")

    def token_group(self, params: Mapping[str, Any]) -> int:
        """Tokens that share stored statistics (1 = per-vector), under ``params``.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("kivi").token_group({"group_size": 16}), scheme_def("KQV").token_group({})
        (16, 1)
        """
        if self.token_group_param is None:
            return 1
        group = self.filled(params).get(self.token_group_param, self.token_group_default)
        return check_int(group, self.token_group_param, low=1)

    def coded_dim(self, dim: int, params: Mapping[str, Any]) -> int:
        """Coordinates the scheme's codes spend their bits on, for vectors of dimension ``dim``.

        ``d_pad`` (the next power of two) for a Hadamard rotation, the ``rank`` principal
        axes for klt, ``dim`` otherwise (the block formats code every coordinate; the QJL
        keys code a sketch of the ``dim`` coordinates). The theory table reads it for the
        key side of a ``key_theory`` scheme: where it differs from ``dim`` (padding), the
        closed form does not hold and no prediction is made.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("KQV").coded_dim(96, {}), scheme_def("KQV").coded_dim(96, {"rotation": "haar"})
        (128, 96)
        >>> scheme_def("q4_0").coded_dim(96, {}), scheme_def("klt").coded_dim(128, {"rank": 16})
        (96, 16)
        """
        dim = check_int(dim, "dim", low=1)
        return int(self._coded(dim, self.filled(params)))

    def key_rel_mse(self, bits: int, d_pad: int) -> float | None:
        """Predicted relative key error ``E‖k − k̂‖²/‖k‖²`` at ``bits`` with ``d_pad`` coded
        coordinates (:mod:`kvstats.theory`, default settings), None without a closed form.

        ``"mse"``: ``d_pad·D_beta(n, d_pad)``; ``"prod"``: ``d_pad·D_beta(n−1, d_pad)``
        times the Gaussian QJL reconstruction factor ``π/2 − 1/d_pad`` (m = d_pad rows).
        The scheme's default settings: ``d = d_pad`` and a Gaussian sketch (for d < d_pad
        the prod residual lives in R^d and the error of the kept coordinates differs).

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> round(scheme_def("KQV").key_rel_mse(4, 128), 4), scheme_def("kivi").key_rel_mse(4, 128)
        (0.0093, None)
        """
        if self.key_theory is None:
            return None
        from kvstats import theory

        bits = check_int(bits, "bits", low=1, high=8)
        if self.key_theory == "prod":
            if bits < 2:
                return None
            return theory.unit_vector_mse(bits - 1, d_pad) * theory.residual_inflation(d_pad)
        return theory.unit_vector_mse(bits, d_pad)

    def expected_bits(self, bits: int | None, dim: int, n_tokens: int, **params: Any) -> float:
        """Total stored bits per coordinate (K and V averaged, every overhead counted).

        Written from the definitions (docs/qjl.md, docs/theory.md), not from the coders:
        the contract tests hold ``Scheme.bits_per_coord(n_tokens).total`` against it.

        Examples
        --------
        >>> from kvstats.quant.registry import scheme_def
        >>> scheme_def("KQV").expected_bits(4, 128, 1024)  # (4·128+16 + 3·128+128+32)/128/2
        4.1875
        >>> scheme_def("K4V2").expected_bits(None, 128, 10, key_bits=4, value_bits=2)
        3.125
        """
        dim = check_int(dim, "dim", low=2)
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        pair = self._bits(bits, dim, n_tokens, self.filled(params))
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
                isinstance(b, numbers.Real) and not isinstance(b, bool) for b in pair)):
            raise TypeError(f"expected_bits of scheme {self.name!r} must return (key_bits, value_bits), "
                            f"two numbers: the bits each side stores for n_tokens vectors; received "
                            f"{_describe(pair)}")
        key, value = pair
        return (key + value) / 2 / (n_tokens * dim)
