"""The entries of a sweep config: :class:`SchemeSpec`, :class:`DistributionSpec`, and how
a ``[[schemes]]`` or ``[[distributions]]`` entry is read and checked.

:class:`~kvstats.sweep.config.SweepConfig` reads each entry here, so that every entry's
message names its key, what is allowed and what was received; the small integer checks
the config's lists share are here too.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from kvstats._checks import check_int, did_you_mean
from kvstats.data.register import distribution_names
from kvstats.data.synthetic import _resolve
from kvstats.quant.registry import coded_scheme, resolved_scheme, scheme_def, unknown_scheme
from kvstats.quant.schemedef import as_declared_type
from kvstats.results import REAL, _user_stacklevel
from kvstats.sweep.plan import _canonical, _fmt_params
from kvstats.sweep.sources import _real_params

__all__ = ["SchemeSpec", "DistributionSpec", "parse_scheme", "parse_distributions", "MIN_KEYS"]

#: Arguments of :func:`kvstats.make_scheme` the sweep sets itself, which scheme params
#: must therefore not carry (with where each comes from).
_SWEEP_SET = {"name": "the entry's 'name'", "bits": "from 'budgets'", "dim": "from 'dims'",
              "seed": "from 'seed', per cell and chunk", "draws": "one draw per trial"}

# the end of an unknown distribution name without a near miss (registry.scheme_def says
# the same of schemes): where a name of the user's own comes from
_OWN_HINT = ("; a distribution of your own must be registered in this process first "
             "(kvstats.register_distribution, or a module named in [sweep] plugins)")

# where TOML puts a key written below a table header (said of an entry's unknown keys)
_TOML_NOTE = (": in TOML a key written below a [[schemes]] or [[distributions]] header belongs to that "
              "entry; put sweep settings above the first header or under [sweep]")

# a parameter whose allowed range is the same at every (d, N): checked as the entry is read
_ANY_SHAPE = {"heavy_tailed": "nu", "outlier_channels": "offset"}

#: Fewest keys a case may have: the per-trial profile reports recall@5
#: (:func:`kvstats.error_profile`, ``k = 5``).
MIN_KEYS = 5


def _check_params(params: Any, name: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a table/dict of parameters; received {params!r}")
    out = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be strings; received {key!r}")
        if isinstance(value, np.generic) and value.dtype.kind in "biufU":
            # a value taken from numpy (np.arange, an array of names) is its Python value: a
            # np.str_ kept would label the scheme "norm_dtype=np.str_('float32')", another
            # cell id than the same config read from TOML or from its manifest
            value = value.item()
        if not isinstance(value, (int, float, str, bool)):
            raise TypeError(f"{name}[{key!r}] must be a number, string or boolean; received {value!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class SchemeSpec:
    """One scheme of a sweep: a registry name, its settings, and a display label.

    ``label`` (default: the name, or ``name[k=v,...]`` with settings) is what reports and
    the ``scheme`` column show, so two settings of one scheme can be compared.
    ``budgets`` overrides the sweep's budgets for this scheme (``None``: the sweep's).
    Schemes whose budget their own parameters fix (registry ``fixed_budget``: mixed
    precision ``"K4V2"``, ``identity``) run once per case with ``budget`` = their nominal
    bits per coordinate.

    Examples
    --------
    >>> SchemeSpec("kivi", {"group_size": 64}).display(), SchemeSpec("K4V2").fixed_budget
    ('kivi[group_size=64]', True)
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    budgets: tuple[int, ...] | None = None

    @property
    def fixed_budget(self) -> bool:
        """Whether the scheme's own parameters fix its budget (the registry's ``fixed_budget``).

        Examples
        --------
        >>> SchemeSpec("KQV").fixed_budget, SchemeSpec("identity").fixed_budget
        (False, True)
        """
        return scheme_def(self.name).fixed_budget

    def display(self) -> str:
        """The label reports and the ``scheme`` column show.

        Examples
        --------
        >>> SchemeSpec("QKQV", {"sketch": "orthogonal"}).display(), SchemeSpec("KQV", label="mine").display()
        ("QKQV[sketch='orthogonal']", 'mine')
        """
        if self.label:
            return self.label
        return self.name if not self.params else f"{self.name}[{_fmt_params(self.params)}]"


@dataclass(frozen=True)
class DistributionSpec:
    """One data source of a sweep with one parameter set: a synthetic distribution (see
    :func:`kvstats.sample`) or ``"real"`` (``params``: ``path``, optional ``layer``, ``head``;
    see :func:`kvstats.data.real.load_trials`).

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": [
    ...     {"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]}]})
    >>> cfg.distributions[1]
    DistributionSpec(name='heavy_tailed', params={'nu': 3.0})
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)


def parse_scheme(entry: Any, plugins: tuple[str, ...] = ()) -> SchemeSpec:
    """One ``schemes`` entry (a name, a dict or a :class:`SchemeSpec`) checked against the
    registry (and the config's ``plugins``' registrations) as a :class:`SchemeSpec`.

    Examples
    --------
    >>> parse_scheme({"name": "kivi", "params": {"group_size": 64}}).display()
    'kivi[group_size=64]'
    >>> parse_scheme({"name": "KQV", "params": {"bits": 3}})
    Traceback (most recent call last):
    ...
    ValueError: scheme 'KQV[bits=3]' params must not set ['bits']: the sweep sets bits (from 'budgets'); ...
    """
    if isinstance(entry, SchemeSpec):
        # checked as its dict form: an object built in Python skips no check (budgets (3, 3)
        # were two cells of one id)
        entry = {"name": entry.name, "params": entry.params, "label": entry.label,
                 **({"budgets": entry.budgets} if entry.budgets is not None else {})}
    if isinstance(entry, str):
        spec = SchemeSpec(entry)
    elif isinstance(entry, Mapping):
        extra = sorted(set(entry) - {"name", "params", "label", "budgets"}, key=str)
        if extra or "name" not in entry:
            raise ValueError("a scheme entry must have 'name' and optionally 'params', 'label', "
                             f"'budgets'; received {dict(entry)}"
                             + _unknown_keys(extra, ("name", "params", "label", "budgets")))
        budgets = entry.get("budgets")
        label = entry.get("label", "")
        if not isinstance(label, str):
            raise TypeError(f"scheme {entry['name']!r} label must be a string; received {label!r}")
        sdef = _scheme_def(entry["name"], plugins)
        # the scheme's own range (QKQV from 2); a fixed-budget scheme's budgets are refused below
        low, high = (1, 8) if sdef.fixed_budget else (sdef.min_bits, sdef.max_bits)
        params = _check_params(entry.get("params"), f"scheme {entry['name']!r} params")
        # before the labels (name[params]) and the comparisons are formed from a typo; the
        # keys the sweep sets itself are refused below, with where they come from
        unknown = sorted(set(params) - set(sdef.params) - set(_SWEEP_SET))
        if unknown:
            raise ValueError(f"scheme {entry['name']!r} params: unknown parameter(s) {unknown}"
                             f"{did_you_mean(unknown[0], sdef.params)}; allowed: {sorted(sdef.params)}")
        try:   # here, not at the first cell: a fractional group_size (the config's types later)
            sdef.canonical(params)
        except ValueError as exc:
            raise ValueError(f"scheme {entry['name']!r} param {exc}") from None
        spec = SchemeSpec(entry["name"], params, label,
                          None if budgets is None else _int_tuple(budgets, f"scheme {entry['name']!r} budgets",
                                                                  low, high))
    else:
        raise TypeError(f"schemes entries must be names, dicts or SchemeSpec; received {entry!r}")
    sdef = _scheme_def(spec.name, plugins)
    if sdef.couples_trials(spec.params):
        # the sweep codes trials in chunks: a per-call statistic would tie each trial's
        # codes to the others of its chunk, and the numbers to the chunk size
        raise ValueError(f"scheme {spec.display()!r} params {spec.params} give one encode call "
                         "statistics shared by every trial it codes (one scale per call), so a "
                         "trial's codes would depend on the trials coded with it and the results "
                         f"on the chunk size; use a per-trial setting: {sdef.per_trial_setting(spec.params)}")
    if spec.budgets is not None and spec.fixed_budget:
        # its budgets would be ignored: the scheme runs once per case at its own bits
        raise ValueError(f"scheme {spec.display()!r} has a fixed budget (its own name or params set "
                         "its bits) and runs once per case: remove its 'budgets'; received "
                         f"budgets {list(spec.budgets)}")
    reserved = sorted(set(spec.params) & set(_SWEEP_SET))
    if reserved:
        # make_scheme would fail much later with "got multiple values for argument ..."
        raise ValueError(f"scheme {spec.display()!r} params must not set {reserved}: the sweep sets "
                         + ", ".join(f"{k} ({_SWEEP_SET[k]})" for k in reserved)
                         + f"; received params {spec.params}")
    return spec


def parse_distributions(entry: Any, plugins: tuple[str, ...] = ()) -> list[DistributionSpec]:
    """One ``distributions`` entry (a name, a dict or a :class:`DistributionSpec`) as its
    specs: one per parameter table (``params`` may be a list of them).

    Examples
    --------
    >>> parse_distributions({"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]})[1]
    DistributionSpec(name='heavy_tailed', params={'nu': 3.0})
    """
    known = distribution_names() + (REAL,)
    if isinstance(entry, DistributionSpec):
        specs = [entry if entry.name == REAL else
                 DistributionSpec(entry.name, _check_params(entry.params, f"distribution {entry.name!r} params"))]
    elif isinstance(entry, str):
        specs = [DistributionSpec(entry)]
    elif isinstance(entry, Mapping):
        extra = sorted(set(entry) - {"name", "params"}, key=str)
        if extra or "name" not in entry:
            raise ValueError("a distribution entry must have 'name' and optionally 'params' "
                             f"(a table or a list of tables); received {dict(entry)}"
                             + _unknown_keys(extra, ("name", "params")))
        params = entry.get("params")
        param_sets = params if isinstance(params, list) else [params]
        if not param_sets:
            raise ValueError(f"distribution {entry['name']!r} params must be a table or a non-empty "
                             "list of tables (one case each); received []")
        specs = [DistributionSpec(entry["name"], p if entry["name"] == REAL
                                  else _check_params(p, f"distribution {entry['name']!r} params"))
                 for p in param_sets]
    else:
        raise TypeError(f"distributions entries must be names, dicts or DistributionSpec; "
                        f"received {entry!r}")
    for spec in specs:
        if spec.name not in known:
            raise ValueError(f"distribution name must be one of {list(known)}; received "
                             f"{spec.name!r}{did_you_mean(spec.name, known) or _OWN_HINT}"
                             f"{_plugins_said(plugins)}")
        key = _ANY_SHAPE.get(spec.name)
        if key in spec.params:
            # a range that does not depend on (d, N): sample()'s own check, here rather
            # than at the grid's first draw (other parameters, e.g. rank <= d, do)
            try:
                _resolve(spec.name, {key: spec.params[key]}, MIN_KEYS, 1, MIN_KEYS,
                         what="parameter(s)")
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"distribution {spec.name!r} param {exc}") from None
    return [DistributionSpec(REAL, _real_params(s.params)) if s.name == REAL else s for s in specs]


def _scheme_def(name: Any, plugins: tuple[str, ...]) -> Any:
    """The registry entry of a config's scheme name; an unknown name's message (the
    registry's: the names, a near miss) adds what the config's plugins registered."""
    try:
        return scheme_def(name)
    except TypeError:
        raise ValueError(unknown_scheme(name)) from None
    except ValueError as exc:
        raise ValueError(f"{exc}{_plugins_said(plugins)}") from None


def _plugins_said(plugins: tuple[str, ...]) -> str:
    """``"; the config's plugins: ..."`` with what each registered (:func:`kvstats.plugins.plugin_summary`)."""
    from kvstats.plugins import plugin_summary

    lines = plugin_summary(plugins)
    return f". The config's [sweep] plugins: {'; '.join(lines)}" if lines else ""


def _unknown_keys(extra: list[Any], allowed: tuple[str, ...]) -> str:
    """``"; unknown key(s) [...] (did you mean ...?)"`` for an entry's message, or ``""``;
    a sweep setting among them (``n_trials`` written below a ``[[schemes]]`` header)
    says where TOML put it."""
    from kvstats.sweep.config import SweepConfig   # the config reads its entries here: no cycle

    if not extra:
        return ""
    settings = sorted(set(extra) & ({f.name for f in dataclasses.fields(SweepConfig)} | {"sweep"}))
    note = f" ({settings} {'is a sweep setting' if len(settings) == 1 else 'are sweep settings'}{_TOML_NOTE})"
    return f"; unknown key(s) {extra}{did_you_mean(str(extra[0]), allowed)}{note if settings else ''}"


def _number_key(value: Any) -> Any:
    """``value`` with an int and the float it equals made one (3 and 3.0 draw alike; -0.0 is 0.0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) + 0.0
    return value


def _declared_types(spec: SchemeSpec) -> SchemeSpec:
    """``spec`` with each number written as its parameter's declared type
    (:meth:`SchemeDef.canonical`): ``scale = 1`` and ``scale = 1.0`` (TOML or Python may
    write either) code alike, so they get the same cell ids, seeds and label in every
    sweep (within one sweep, the two are refused: :func:`_check_distinct_schemes`).

    Examples
    --------
    >>> _declared_types(SchemeSpec("fp8_e4m3", {"scale": 1})).display()
    'fp8_e4m3[scale=1.0]'
    """
    return dataclasses.replace(spec, params=scheme_def(spec.name).canonical(spec.params))


def _floats_as_defaults(spec: DistributionSpec) -> DistributionSpec:
    """``spec`` with an int given for a parameter whose default is a float made that float:
    ``nu = 3`` and ``nu = 3.0`` (TOML or Python may write either) draw alike, so they get
    the same cell ids, data seeds and labels in every sweep (within one sweep, the two
    are refused: :func:`_check_distinct_cases`). An int parameter (``rank``) stays an int.

    Examples
    --------
    >>> _floats_as_defaults(DistributionSpec("heavy_tailed", {"nu": 3})).params
    {'nu': 3.0}
    """
    from kvstats.data.synthetic import default_params

    if spec.name == REAL:
        return spec
    defaults = default_params(spec.name)
    # the schemes' rule (as_declared_type), float direction only: an int default does not
    # make rank = 2.0 an int here (the sampler refuses it, naming rank)
    params = {key: as_declared_type(value, float if isinstance(defaults.get(key), float) else None, key)
              for key, value in spec.params.items()}
    return DistributionSpec(spec.name, params)


def _check_distinct_cases(dists: Iterable[DistributionSpec], dims: Iterable[int] | None = None) -> None:
    """Refuse two synthetic entries that draw the same data: the same name and the same
    parameters once resolved at every ``d`` of ``dims`` as :func:`kvstats.sample` resolves
    them (defaults filled in, ``nu = 3`` as ``3.0``, ``low_rank``'s ``rank`` left out as
    ``min(8, d)``; ``heavy_tailed`` beside ``heavy_tailed`` with ``nu = 3.0``, ``low_rank``
    beside ``rank = 8`` where every d is >= 8). Their case keys differ, so they would get
    other data seeds and stand in the report as two cases of one distribution. (Two
    ``real`` entries of one capture are refused in the grid.)

    Examples
    --------
    >>> _check_distinct_cases([DistributionSpec("low_rank"), DistributionSpec("low_rank", {"rank": 8})],
    ...                       dims=[4, 64])   # rank 4 and 8 at d = 4: two cases
    >>> _check_distinct_cases([DistributionSpec("low_rank"), DistributionSpec("low_rank", {"rank": 8})],
    ...                       dims=[64])
    Traceback (most recent call last):
    ...
    ValueError: distributions: 'low_rank' with params - and with params rank=8 are the same distribution ...
    """
    dims = tuple(dims) if dims is not None else (None,)
    seen: dict[str, DistributionSpec] = {}
    for spec in dists:
        if spec.name == REAL:
            continue
        full = [_resolved_params(spec, d) for d in dims]
        key = [{k: _number_key(v) for k, v in p.items()} for p in full]
        earlier = seen.setdefault(_canonical([spec.name, key]), spec)
        if earlier is not spec:
            at = "" if dims == (None,) else f" at every d of dims {list(dims)}"
            raise ValueError(
                f"distributions: {spec.name!r} with params {_fmt_params(earlier.params)} and with "
                f"params {_fmt_params(spec.params)} are the same distribution (defaults filled in: "
                f"{_fmt_params(full[0])}){at}; keep one")


def _resolved_params(spec: DistributionSpec, dim: int | None) -> dict[str, Any]:
    """``spec``'s parameters as :func:`kvstats.sample` draws them at ``dim``; with no
    ``dim``, or params the sampler refuses (the grid's preflight names that error), the
    defaults updated with the params given."""
    from kvstats.data.synthetic import default_params

    full = {**default_params(spec.name), **spec.params}
    if dim is not None:
        try:   # the values drawn do not depend on n_queries, n_keys: those that fit any params
            full = _resolve(spec.name, spec.params, dim, 1, 2**62, what="parameter(s)")
        except (ValueError, TypeError):
            pass
    return full


def _check_sweep_budgets(schemes: Iterable[SchemeSpec], budgets: tuple[int, ...]) -> None:
    """Refuse a sweep budget outside the range of a scheme that runs at the sweep's budgets
    (no ``budgets`` of its own, no fixed budget): QKQV has no 1-bit form. The grid's check
    would refuse it too, later and without naming the key."""
    for spec in schemes:
        if spec.budgets is not None or spec.fixed_budget:
            continue
        sdef = scheme_def(spec.name)
        low, high = sdef.min_bits, sdef.max_bits
        out = [n for n in budgets if not low <= n <= high]
        if out:
            own = [n for n in budgets if low <= n <= high] or [low]
            raise ValueError(f"budgets {out} are outside scheme {spec.display()!r}'s range [{low}, {high}]: "
                             f"leave them out of the sweep's budgets, or give the entry of "
                             f"{spec.display()!r} budgets of its own (budgets = {own}); received budgets "
                             f"{list(budgets)}")


def _check_distinct_schemes(schemes: Iterable[SchemeSpec], budgets: tuple[int, ...] | None = None) -> None:
    """Refuse two entries whose cells code alike at a budget both run: they would run under
    two scheme seeds and stand in the report as two schemes compared with each other.
    (The cell key itself is unchanged: stored cells keep their ids.)

    What an entry codes as is :func:`kvstats.quant.registry.coded_scheme`: its builder
    (:attr:`SchemeDef.build`) with the defaults filled in, or the builder it declares it
    codes as (:meth:`SchemeDef.codes_as`). So one builder handed the same filled
    parameters is one scheme whatever the labels and budgets (``QKQV`` and ``QKQV`` with
    ``sketch = "gaussian"``; ``K4V2`` and ``mixed`` with ``key_bits = 4, value_bits = 2``;
    one builder's two names, ``QKQV`` and ``turboquant_prod``), and so is a declared pair
    that coincides at every budget (``KV`` and ``turboquant_mse`` with
    ``rotation = "identity"``). Where a declaration fixes the budget (``K4V4``:
    ``turboquant_mse`` at 4) the pair is refused only if the other entry runs at it: at
    its own ``budgets``, else the sweep's ``budgets`` (None: not known yet, not checked).
    Two builders are two schemes, even where they code alike (each llama.cpp format has a
    builder of its own, its format bound), unless an entry declares that it codes as
    another. Two entries of one scheme, each with its own ``label``, at disjoint budgets
    (``TQ3`` at ``[3]``, ``TQ4`` at ``[4]``: two operating points, each compared on its
    own) share no cell and are kept."""
    seen: dict[tuple[int, str], list[tuple[SchemeSpec, str, int | None]]] = {}
    for spec in schemes:
        name = resolved_scheme(spec.name, spec.params)[0]
        coded_name, coded, fixed = coded_scheme(spec.name, spec.params)
        # the builder object itself (the registry holds it: its id is stable here), which
        # need not be hashable
        key = (id(scheme_def(coded_name).build), _canonical(coded))
        for earlier, earlier_name, earlier_fixed in seen.get(key, ()):
            how = _why_same((earlier, earlier_name), (spec, name), coded_name)
            if earlier_fixed is None and fixed is None:
                # two operating points of one scheme, each labelled (TQ3 at [3], TQ4 at [4]),
                # share no cell; unlabelled, two names of one scheme are more likely a slip
                runs = [set(s.budgets or budgets or ()) for s in (earlier, spec)]
                own = not (earlier.fixed_budget or spec.fixed_budget)   # budgets of their own
                if not (own and earlier.label and spec.label) or budgets is None or runs[0] & runs[1]:
                    raise ValueError(
                        f"schemes: {earlier.display()!r} and {spec.display()!r} are the same scheme "
                        f"({how} with the defaults filled in: {_fmt_params(coded)}); keep one (with both "
                        "entries' budgets, if they differ)" + ("" if not own else ", or give the two disjoint budgets (two "
                                                               "operating points)" if earlier.label and spec.label else
                                                               ", or give each a label and the two disjoint "
                                                               "budgets (two operating points)"))
                continue
            shared = _shared_budget((earlier, earlier_fixed), (spec, fixed), budgets)
            if shared is not None:
                at, advice = shared
                raise ValueError(
                    f"schemes: {earlier.display()!r} and {spec.display()!r} code the same cells at "
                    f"budget {at} ({how} at budget {at}, with the defaults filled in: "
                    f"{_fmt_params(coded)}): one scheme under two scheme seeds, compared with "
                    f"itself; {advice}")
        seen.setdefault(key, []).append((spec, name, fixed))


def _theory_aliases(schemes: Iterable[SchemeSpec]) -> dict[str, str]:
    """Label → registry name of the entries that run a scheme at its default settings
    under a label of their own (``TQ3``), which the theory table matches as that scheme
    (:func:`kvstats.analysis.theory_table`'s ``aliases``).

    Examples
    --------
    >>> _theory_aliases([SchemeSpec("turboquant_mse", label="TQ3"), SchemeSpec("KQV"),
    ...                  SchemeSpec("KV", {"norm_dtype": "float32"}, label="KV32")])
    {'TQ3': 'turboquant_mse'}
    """
    out = {}
    for spec in schemes:
        sdef = scheme_def(spec.name)
        try:   # a scheme of one's own may require parameters: it has no default settings
            default = sdef.filled(spec.params) == sdef.filled({})
        except (TypeError, ValueError):
            default = False
        if spec.label and spec.label != sdef.name and default:
            out[spec.label] = sdef.name
    return out


#: How :func:`kvstats.analysis.scheme_pairs` compares a pair of schemes that ran in one case.
_PAIR_RULE = ("a pair is compared at each budget both ran, or across budgets only when each of "
              "the two ran at a single one (as K4V2 at 3 against K4V4 at 4)")


def _compared_budgets(budgets_a: Sequence[Any], budgets_b: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The (budget of a, budget of b) at which two schemes that ran in one case at these
    budgets are compared (:data:`_PAIR_RULE`), in a's order; [] where none.

    Examples
    --------
    >>> _compared_budgets([3], [4]), _compared_budgets([3, 4], [4, 5]), _compared_budgets([3, 4], [1, 2])
    ([(3, 4)], [(4, 4)], [])
    """
    if len(budgets_a) == 1 and len(budgets_b) == 1 and budgets_a[0] != budgets_b[0]:
        return [(budgets_a[0], budgets_b[0])]
    return [(n, n) for n in budgets_a if n in budgets_b]


def _not_compared_text(a: str, b: str, budgets_a: Sequence[Any], budgets_b: Sequence[Any], *,
                       same: bool = False, report: bool = True) -> str:
    """The warning for a pair whose two schemes share a case but no compared budget;
    ``same``: the two are entries of one scheme (no budget in common may be given them);
    ``report``: a report will name the pair under Not compared.

    Examples
    --------
    >>> _not_compared_text("TQ", "kivi", [3, 4], [1.0, 2.0])[:65]
    'no comparison of TQ and kivi: TQ runs at n = 3, 4 and kivi at n ='
    >>> _not_compared_text("A", "B", [4], [2, 3], same=True, report=False)[-62:]
    'give each a single budget (A at [4], B at [3]) to compare them'
    """
    ns = lambda values: ", ".join(f"{v:g}" for v in values)   # noqa: E731
    head = (f"no comparison of {a} and {b}: {a} runs at n = {ns(budgets_a)} and {b} at n = "
            f"{ns(budgets_b)}, no budget in common, and {_PAIR_RULE}; so this pair gets no test"
            # the sweep warns before any report, also under --no-report: a report made later names it too
            + (" (a report of these results names it under Not compared). " if report else ". "))
    if same:   # one scheme twice: a budget in common is refused (compared with itself)
        return (head + f"{a} and {b} are entries of one scheme, which may not share a budget: "
                f"give each a single budget ({a} at [{max(budgets_a):g}], {b} at [{max(budgets_b):g}]) to compare them")
    return (head + "Give the two a budget in common, or split a scheme into "
            "single-budget entries (one scheme may be given twice, each entry with its own label "
            "and disjoint budgets, e.g. TQ3 at [3] and TQ4 at [4]) and name each pair; see "
            "docs/usage.md, \"Equal n is not equal storage\"")


def _warn_not_compared(schemes: Sequence[SchemeSpec], labels: Sequence[str],
                       budgets: tuple[int, ...], pairs: Iterable[Sequence[str]]) -> None:
    """One warning per pair of ``pairs`` that the sweep's budgets leave uncompared; a pair
    with a fixed-budget scheme (its budget known only once run) is left to the report."""
    runs = {lab: list(s.budgets or budgets) for lab, s in zip(labels, schemes) if not s.fixed_budget}
    # one scheme twice (the builder and settings _check_distinct_schemes compares)
    names = {lab: (lambda c: (c[0], _canonical(c[1])))(coded_scheme(s.name, s.params)) for lab, s in zip(labels, schemes)}
    for a, b in pairs:
        if a in runs and b in runs and not _compared_budgets(runs[a], runs[b]):
            warnings.warn(_not_compared_text(a, b, runs[a], runs[b], same=names[a] == names[b]), UserWarning,
                          stacklevel=_user_stacklevel())


def _why_same(first: tuple[SchemeSpec, str], second: tuple[SchemeSpec, str], coded_name: str) -> str:
    """Why two entries (each with its registry name) code alike, as ``coded_name``'s
    builder: the entries that declare another's coding (:meth:`SchemeDef.codes_as`) as the
    user wrote them, else one builder under one name or two."""
    build = scheme_def(coded_name).build
    declared = [spec.name for spec, name in (first, second) if scheme_def(name).build is not build]
    if declared:
        return f"{' and '.join(declared)} code{'s' if len(declared) == 1 else ''} as {coded_name}"
    (_, a), (_, b) = first, second
    return a if a == b else f"{a} and {b}: one builder, the same parameters"


def _shared_budget(first: tuple[SchemeSpec, int | None], second: tuple[SchemeSpec, int | None],
                   budgets: tuple[int, ...] | None) -> tuple[int, str] | None:
    """The budget where two entries coding as one builder, at least one at a budget its own
    parameters fix, both run, and what to do about it; None where they share none (or the
    sweep's budgets, which one runs at, are not known yet)."""
    (_, first_fixed), (_, second_fixed) = first, second
    if first_fixed is not None and second_fixed is not None:
        return (first_fixed, "keep one") if first_fixed == second_fixed else None
    (_, at), (other, _) = (first, second) if first_fixed is not None else (second, first)
    runs_at = other.budgets or budgets
    if runs_at is None or at not in runs_at:
        return None
    return at, f"keep one, or run {other.display()!r} at budgets without {at}"


def _as_list(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
        value = [value]
    return list(value)


def _int_tuple(values: Any, name: str, low: int | None, high: int | None, why: str = "") -> tuple[int, ...]:
    items = _as_list(values, name)
    if not items:
        raise ValueError(f"{name} must contain at least one integer in {_range(low, high)}; "
                         f"received {values!r}")
    out = tuple(_int(v, name, low, high, why) for v in items)
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat values; received {list(out)}")
    return out


def _range(low: int | None, high: int | None) -> str:
    return f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"


def _int(value: Any, name: str, low: int | None, high: int | None, why: str = "") -> int:
    """:func:`check_int`, its message followed by ``why`` (where the bounds come from)."""
    try:
        return check_int(value, name, low=low, high=high)
    except (TypeError, ValueError) as exc:
        if not why:
            raise
        raise type(exc)(f"{exc}{why}") from None
