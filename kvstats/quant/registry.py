"""The scheme registry: every scheme by name, and scheme-name parsing.

Every fact about a scheme lives in its :class:`SchemeDef` entry
(:mod:`kvstats.quant.schemedef`) of :data:`REGISTRY`: the coders it gives each side (its
builder), its allowed parameters and budget range, whether its budget is fixed by its own
parameters, whether it is randomized, groups tokens or couples the trials of a call,
whether it exports to the GPU path, its expected stored bits per coordinate and the
closed form of its key error where one exists. The sweep, the quantized transformers
cache, the GPU path, the report and the tests ask the registry, never a name; a new
built-in scheme is one entry of :mod:`kvstats.quant.builtin_schemes` plus its coder
(docs/design.md).

A researcher's own scheme joins the table without an edit there: :func:`define_scheme`
builds its entry, :func:`register_scheme` validates and adds it (:data:`REGISTRY` is a
live view of the built-ins and the registered schemes; :data:`SCHEMES` stays the
built-in names; both in :mod:`kvstats.quant.register`), :func:`kvstats.quant.contract.check_scheme` holds it to the contract the
built-ins pass, and a sweep config's ``[sweep] plugins`` imports the module that
registers it (:mod:`kvstats.plugins`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kvstats._checks import did_you_mean
from kvstats.quant.builtin_schemes import ENTRIES
from kvstats.quant.catalog import NAMES
from kvstats.quant.schemedef import Builder, SchemeDef

__all__ = ["SchemeDef", "Builder", "REGISTRY", "BUILTIN", "SCHEMES", "scheme_def", "parse_scheme_name",
           "resolved_scheme", "coded_scheme"]

_MIXED_NAME = re.compile(r"^K([1-8])V([1-8])$")


# --------------------------------------------------------------------------- name parsing
def scheme_def(name: str) -> SchemeDef:
    """The :class:`SchemeDef` of a registry name or of ``"K{a}V{b}"`` (a, b in 1..8: mixed).

    An unknown name is a ValueError listing the names, with a near miss
    (:func:`kvstats._checks.did_you_mean`) or the range of a ``K{a}V{b}`` name out of 1..8.

    Parameters
    ----------
    name : str
        A built-in or registered scheme name, or ``"K{a}V{b}"``.

    Returns
    -------
    SchemeDef
        The registry's entry (``mixed``'s for a ``K{a}V{b}`` name; its bits are added to
        the params by :func:`parse_scheme_name`).

    Examples
    --------
    >>> from kvstats import scheme_def
    >>> scheme_def("K4V2").name, scheme_def("kivi").token_group_param
    ('mixed', 'group_size')
    >>> scheme_def("k4v2")
    Traceback (most recent call last):
    ...
    ValueError: scheme name must be one of [...] or 'K{a}V{b}' (e.g. 'K4V2'); received 'k4v2' (did you mean 'K4V2'?)
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a scheme name string; received {name!r}")
    if _MIXED_NAME.match(name):
        return REGISTRY["mixed"]
    if name in REGISTRY:
        return REGISTRY[name]
    if re.fullmatch(r"K\d+V\d+", name, flags=re.IGNORECASE) and not _MIXED_NAME.match(name.upper()):
        hint = " (mixed precision K{a}V{b} takes a and b in 1..8)"
    elif _MIXED_NAME.match(name.upper()):
        hint = f" (did you mean {name.upper()!r}?)"
    else:
        hint = did_you_mean(name, REGISTRY) or (
            "; a scheme of your own must be registered in this process first (kvstats.register_scheme, "
            "or a module named in a sweep config's [sweep] plugins)")
    raise ValueError(unknown_scheme(name) + hint)


def unknown_scheme(received: Any) -> str:
    """The one wording of a name the registry does not hold: the names allowed and what was
    received (the sweep's config says it of a non-string name too).

    Examples
    --------
    >>> unknown_scheme(3)[:36]
    "scheme name must be one of ['KV', 'K"
    """
    return (f"scheme name must be one of {list(REGISTRY)} or 'K{{a}}V{{b}}' (e.g. 'K4V2'); "
            f"received {received!r}")


def parse_scheme_name(name: str, params: Mapping[str, Any]) -> tuple[SchemeDef, dict[str, Any]]:
    """``(SchemeDef, params)`` for a name; ``"K{a}V{b}"`` adds ``key_bits=a, value_bits=b``;
    each number is written as its parameter's declared type (:meth:`SchemeDef.canonical`:
    ``scale=1`` is ``scale=1.0``; a fractional number for an integer parameter is a
    ValueError naming it).

    Examples
    --------
    >>> d, p = parse_scheme_name("K4V2", {"rotation": "haar"})
    >>> d.name, p
    ('mixed', {'rotation': 'haar', 'key_bits': 4, 'value_bits': 2})
    >>> parse_scheme_name("fp8_e4m3", {"scale": 1})[1]
    {'scale': 1.0}
    """
    sdef = scheme_def(name)
    params = sdef.canonical(params)
    mixed = _MIXED_NAME.match(name)
    if mixed:
        key_bits, value_bits = int(mixed[1]), int(mixed[2])
        if params.get("key_bits", key_bits) != key_bits or params.get("value_bits", value_bits) != value_bits:
            raise ValueError(f"name {name!r} fixes key_bits={key_bits}, value_bits={value_bits}; "
                             f"received params {params}")
        params.update(key_bits=key_bits, value_bits=value_bits)
    return sdef, params


def resolved_scheme(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A scheme's identity: its registry name and its parameters with the defaults filled in.

    Two spellings of one scheme resolve alike: a parameter left out and the same one set
    to its default (``QKQV`` and ``QKQV`` with ``sketch="gaussian"``), ``"K4V2"`` and
    ``mixed`` with ``key_bits=4, value_bits=2``, ``3`` and ``3.0``, ``norm_dtype``
    ``"half"`` and ``"float16"``. Filled are the entry's ``defaults``
    (:meth:`SchemeDef.filled`), a user scheme's those its ``define_scheme(defaults=...)``
    declares; a default that depends on the bits or d (qjl's ``m = n·d``,
    ``value_bits``, ``value_group_size``) is the builder's alone: such a parameter counts
    as given or left out.

    Examples
    --------
    >>> resolved_scheme("QKQV", {}) == resolved_scheme("QKQV", {"sketch": "gaussian"})
    True
    >>> resolved_scheme("K4V2", {})
    ('mixed', {'key_bits': 4, 'norm_dtype': 'float16', 'rotation': 'hadamard', 'value_bits': 2})
    """
    sdef, params = parse_scheme_name(name, params)
    return sdef.name, _written_one_way(sdef, sdef.filled(params))


def coded_scheme(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any], int | None]:
    """What a scheme's cells code as: the entry whose builder makes its coders, that entry's
    parameters with the defaults filled in, and the budget where the two coincide.

    :func:`resolved_scheme` of the scheme itself, with budget None, unless its entry
    declares another that codes as it (:meth:`SchemeDef.codes_as`): ``KV`` is
    ``turboquant_mse`` with ``rotation="identity"`` at every budget, ``K4V4`` is
    ``turboquant_mse`` at budget 4. Two sweep entries whose cells code alike at a budget
    both run would be one scheme under two scheme seeds (``kvstats/sweep/specs.py``
    refuses them).

    Examples
    --------
    >>> coded_scheme("KV", {})
    ('turboquant_mse', {'norm_dtype': 'float16', 'rotation': 'identity'}, None)
    >>> coded_scheme("K3V3", {"rotation": "haar"})
    ('turboquant_mse', {'norm_dtype': 'float16', 'rotation': 'haar'}, 3)
    >>> coded_scheme("K4V2", {})
    ('mixed', {'key_bits': 4, 'norm_dtype': 'float16', 'rotation': 'hadamard', 'value_bits': 2}, None)
    """
    sdef, params = parse_scheme_name(name, params)
    other = sdef.codes_as(params)
    if other is None:
        return sdef.name, _written_one_way(sdef, sdef.filled(params)), None
    other_name, other_params, bits = other
    odef = REGISTRY[other_name]
    return odef.name, _written_one_way(odef, odef.filled(other_params)), (None if bits is None
                                                                         else _same_value("", bits))


def _written_one_way(sdef: SchemeDef, full: Mapping[str, Any]) -> dict[str, Any]:
    # numbers as their declared types (scale 1.0), those of no declared type as _same_value's
    full = sdef.canonical(full)
    return {k: full[k] if sdef._declared(k) else _same_value(k, full[k]) for k in sorted(full)}


def _same_value(key: str, value: Any) -> Any:
    """``value`` written one way: a whole float as the int it equals, a dtype by its name."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if key == "norm_dtype":
        try:
            import numpy as np

            return np.dtype(value).name
        except TypeError:
            return value   # not a dtype: make_scheme says so
    return value


# --------------------------------------------------------------------------- the tables
_ENTRY = {d.name: d for d in ENTRIES}
#: The built-in entries (a constant), in the catalog's order (kvstats.quant.catalog): a
#: catalog name without an entry is a KeyError here, an entry without one in its _entry.
BUILTIN: Mapping[str, SchemeDef] = MappingProxyType({name: _ENTRY[name] for name in NAMES})
# built-ins first, then user schemes in the order registered (register_scheme)
_TABLE: dict[str, SchemeDef] = dict(BUILTIN)
#: Every scheme known to this process: a live read-only view (the built-ins, then the user
#: schemes of :func:`register_scheme`, which appear and disappear with their registration).
REGISTRY: Mapping[str, SchemeDef] = MappingProxyType(_TABLE)
#: The built-in scheme names (a constant; :func:`scheme_names` adds the user schemes).
SCHEMES = tuple(BUILTIN)
# user scheme name -> the plugin that registered it (None: registered by a script)
_ORIGIN: dict[str, str | None] = {}
