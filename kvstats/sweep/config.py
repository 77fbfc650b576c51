"""The configuration of a sweep: its file format, its validation, and the specs it holds.

A sweep is configured by a TOML file (docs/usage.md) or the equivalent dict: an optional
``[sweep]`` table of scalars and lists, ``[[schemes]]``, ``[[distributions]]`` and an
optional ``[report]`` table. :class:`SweepConfig` validates it once, up front, with
messages naming the key, what is allowed and what was received; everything downstream
(:mod:`kvstats.sweep.plan`, the runner, the report) reads a valid config.
"""
# Each entry of [[schemes]] and [[distributions]] is read in kvstats.sweep.specs; here, the
# file, its top-level keys and the checks across entries.

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kvstats._checks import _describe, check_choice, did_you_mean
from kvstats.data.synthetic import GENERATORS
from kvstats.plugins import load_plugins, resolve_plugin
from kvstats.results import DEFAULT_COMPARISONS, check_comparisons
from kvstats.sweep.plan import Cell, _canonical, _fmt_params, cell_id, chunk_for, grid
from kvstats.sweep.sources import _resolve_real
from kvstats.sweep.specs import (_TOML_NOTE, MIN_KEYS, DistributionSpec, SchemeSpec, _as_list,
                                 _check_distinct_cases, _check_distinct_schemes, _check_sweep_budgets,
                                 _declared_types, _floats_as_defaults, _int, _int_tuple, _warn_not_compared,
                                 parse_distributions, parse_scheme)

__all__ = ["SweepConfig", "SchemeSpec", "DistributionSpec", "load_config"]

# frame_digest hashes every numeric column, the trial numbers too, as float64: beyond
# 2**53 two trials would hash alike (and the task split's float bounds lose the count)
_MAX_TRIALS = 2 ** 53

# a label's characters the report cannot show: line and other control characters (a
# Markdown table row, heading or list item would break: referee RM) ...
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# ... and, in a scheme's label, what tables/crossovers.csv's winners column is split at
_WINNERS_SEP = "; "


def _check_labels(schemes: list[str], dists: Iterable[DistributionSpec]) -> None:
    """Refuse a scheme or distribution label holding a control character (newline, tab,
    …), or a scheme label holding ``"; "`` (crossovers.csv's ``winners`` splits there); no
    built-in scheme's default label holds either (tests/sweep/test_label_rule_rm.py).

    Examples
    --------
    >>> _check_labels(["KV:fp16", "a|b"], [])
    >>> _check_labels(["x\\ny"], [])
    Traceback (most recent call last):
    ...
    ValueError: [[schemes]] label 'x\\ny' must hold no control character (newline, tab, ...: the report's tables, headings and lists show a label on one line); received 'x\\ny'
    """
    named = [("[[schemes]]", lab) for lab in schemes] + [
        ("[[distributions]]", f"{d.name}({_fmt_params(d.params)})") for d in dists]
    for table, label in named:
        if _CONTROL.search(label):
            raise ValueError(f"{table} label {label!r} must hold no control character (newline, "
                             "tab, ...: the report's tables, headings and lists show a label on one "
                             f"line); received {label!r}")
    for label in schemes:
        if _WINNERS_SEP in label:
            raise ValueError(f"[[schemes]] label {label!r} must not hold {_WINNERS_SEP!r} "
                             "(tables/crossovers.csv lists the winners by budget split at it); give "
                             f"the scheme a 'label' without it; received {label!r}")


# what an incomplete config is shown, and where TOML puts a key written below a table header
_MINIMAL = 'schemes = ["KQV"] and distributions = ["gaussian"] (TOML: two lines above any [table])'


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs; :meth:`from_dict` / :meth:`from_toml` read the file format.

    Parameters
    ----------
    schemes : sequence of SchemeSpec, str or dict
        Schemes to run (``{"name": ..., "params": {...}, "label": ..., "budgets": [...]}``).
    distributions : sequence of DistributionSpec, str or dict
        Distributions; a dict's ``params`` may be a list of parameter tables (one
        distribution entry each). ``{"name": "real", "params": {"path": ..., "layer": ...,
        "head": ...}}`` reads a captured real cache (layer and head: an int or a list,
        default all; a relative path is resolved against the TOML file's directory, or
        the working directory for a dict). A real case runs at the capture's d and N,
        which must be listed in ``dims`` and ``n_keys``; its trials are the first
        ``n_trials`` of the selection (C order over text, layer, KV head; more than the
        selection holds is an error), its queries the capture's (``n_queries`` and
        ``dtype`` other than float64/float32 casting do not apply to it).
    budgets : sequence of int
        Bit budgets n per coordinate (default 2..6).
    dims, n_keys : sequence of int
        Head dimensions d and context lengths N (of the synthetic distributions; a real
        capture's own d and N must be among them).
    n_trials : int
        Independent trials per cell (each a fresh (K, V, q) and scheme draw; for a real
        source, the first ``n_trials`` captured trials with a fresh scheme draw each).
    n_queries : int
        Queries per trial sharing its keys.
    seed : int
        Root seed; every cell's seeds derive from it and the cell key.
    chunk_size : int or None
        Trials processed at once; ``None`` picks ``max(1, 2**24 // (max(N, d)·d))``
        (128 MiB per float64 array of keys or of sketches), a function of (N, d) only, so
        results stay reproducible; it does not count ``n_queries``
        (:func:`kvstats.sweep.plan.chunk_for` says what bounds the memory of the queries).
    comparisons : sequence of (str, str)
        Scheme label pairs the report compares (default KQV/QKQV, KQV/KV, QKQV/KV, whose
        pairs with a scheme not in the sweep are skipped; pairs given explicitly must name
        scheme labels of the sweep, so a typo fails here instead of dropping a comparison).
    report : dict
        Options passed to :func:`kvstats.hypothesis_report` (``alpha``, ``correction``,
        ``energy_resamples``, ``bootstrap_resamples``, ...), checked here by
        :func:`kvstats.report.options.validate_report_options`, before any compute.
    dtype : {"float64", "float32"}
        Floating type of the sampled K, V, q (float32 halves memory and time; the float32
        draw is the float64 draw rounded). Real captures are float32 and are cast to it.
    generator : {1, 2}
        Data-generator version of :func:`kvstats.sample` (1, the default: float64 draws,
        the numbers of stored results; 2: float32 drawn natively, other numbers).
    plugins : sequence of str
        Modules of user code (:mod:`kvstats.plugins`) that register schemes or
        distributions: ``.py`` files (relative to the TOML file's folder, or the working
        directory for a dict; kept as absolute paths) or importable module names. They
        are imported here, before the schemes and distributions are checked, and in
        every worker process of the sweep; the manifest records each with its file's
        SHA-256. A missing or failing plugin is a :class:`kvstats.plugins.PluginError`
        (a ValueError) naming the key and the file.

    Examples
    --------
    >>> from kvstats import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KV", "KQV"], "budgets": [3, 4],
    ...     "distributions": [{"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]}],
    ...     "dims": [64], "n_keys": [128], "n_trials": 20})
    >>> len(cfg.cells())
    8

    A captured real cache (here a tiny fake one) as a data source:

    >>> import json, os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> x = np.ones((2, 4, 1, 16, 8), np.float32)  # (texts, layers, KV heads, N, d)
    >>> np.savez(path, K=x, V=x, q=np.ones((2, 4, 3, 16, 8), np.float32), meta=json.dumps({}))
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "budgets": [3, 4], "dims": [8],
    ...     "n_keys": [16], "n_trials": 2, "distributions": [{"name": "real",
    ...     "params": [{"path": path, "layer": 0}, {"path": path, "layer": [1, 2]}]}]})
    >>> cells = cfg.cells()  # 2 layer selections x 2 budgets, at the capture's d and N
    >>> len(cells), cells[0].dim, cells[0].n_keys
    (4, 8, 16)
    """

    schemes: tuple[SchemeSpec, ...]
    distributions: tuple[DistributionSpec, ...]
    budgets: tuple[int, ...] = (2, 3, 4, 5, 6)
    dims: tuple[int, ...] = (128,)
    n_keys: tuple[int, ...] = (1024,)
    n_trials: int = 1000
    n_queries: int = 1
    seed: int = 0
    chunk_size: int | None = None
    comparisons: tuple[tuple[str, str], ...] = DEFAULT_COMPARISONS
    report: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float64"
    generator: int = 1
    plugins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # first: the plugins register the schemes and distributions checked below
        object.__setattr__(self, "plugins", load_plugins(_plugin_list(self.plugins)))
        schemes = tuple(parse_scheme(s, self.plugins) for s in _as_list(self.schemes, "schemes"))
        dists = tuple(d for entry in _as_list(self.distributions, "distributions")
                      for d in parse_distributions(entry, self.plugins))
        if not schemes:
            raise ValueError("schemes must name at least one scheme; received none")
        if not dists:
            raise ValueError("distributions must name at least one distribution; received none")
        labels = [s.display() for s in schemes]
        _check_labels(labels, dists)
        dup = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dup:
            raise ValueError(f"schemes must have distinct labels; received duplicates {dup} "
                             "(give each a 'label')")
        keys = [(d.name, _canonical(d.params)) for d in dists]
        if len(set(keys)) != len(keys):
            raise ValueError("distributions must not repeat a (name, params) pair; received "
                             f"{[f'{n}({p})' for n, p in keys]}")
        _check_distinct_cases(dists, _int_tuple(self.dims, "dims", 2, None))   # resolved per grid d
        # after the checks, whose messages show the params as written
        dists = tuple(_floats_as_defaults(d) for d in dists)
        object.__setattr__(self, "schemes", schemes)
        object.__setattr__(self, "distributions", dists)
        object.__setattr__(self, "budgets", _int_tuple(self.budgets, "budgets", 1, 8))
        _check_sweep_budgets(schemes, self.budgets)
        _check_distinct_schemes(schemes, self.budgets)   # cells: an entry at the sweep's budgets too
        # after the checks, whose messages show the params as written (as the distributions')
        object.__setattr__(self, "schemes", tuple(_declared_types(s) for s in schemes))
        object.__setattr__(self, "dims", _int_tuple(self.dims, "dims", 2, None))
        object.__setattr__(self, "n_keys", _int_tuple(self.n_keys, "n_keys", MIN_KEYS, None,
                                                      why=" (recall@5 needs at least 5 keys)"))
        object.__setattr__(self, "n_trials", _int(self.n_trials, "n_trials", 2, None))
        if self.n_trials > _MAX_TRIALS:
            raise ValueError(f"n_trials must be an integer in [2, {_MAX_TRIALS}] (trial numbers must be "
                             f"exact as float64, as the store's content hash reads them); received "
                             f"{self.n_trials}")
        object.__setattr__(self, "n_queries", _int(self.n_queries, "n_queries", 1, None))
        object.__setattr__(self, "seed", _int(self.seed, "seed", 0, None))
        if self.chunk_size is not None:
            object.__setattr__(self, "chunk_size", _int(self.chunk_size, "chunk_size", 1, None,
                                                        why=" (or leave it out: chosen from N and d)"))
        # the one pairs check (kvstats.results): form, labels of given pairs, and the
        # warning when no default pair names two schemes of the sweep (at the user's call)
        names = {lab: s.name for lab, s in zip(labels, schemes)}   # TQ3: turboquant_mse, said on a slip
        object.__setattr__(self, "comparisons", tuple(check_comparisons(self.comparisons, labels, names)))
        if not isinstance(self.report, Mapping):
            raise TypeError(f"report must be a table/dict of report options; received {self.report!r}")
        object.__setattr__(self, "report", dict(self.report))
        from kvstats.report.options import validate_report_options

        report_pairs = validate_report_options(self.report)["comparisons"]
        if report_pairs is not None and report_pairs != self.comparisons:
            check_comparisons(report_pairs, labels, names)   # a dict built in Python may keep them here
        # a pair the budgets leave uncompared would be missing from the report without a word
        _warn_not_compared(schemes, labels, self.budgets, report_pairs or self.comparisons)
        check_choice(self.dtype, "dtype", ["float64", "float32"])
        if isinstance(self.generator, bool) or not isinstance(self.generator, int):
            raise TypeError(f"generator must be one of {list(GENERATORS)}; received {_describe(self.generator)}")
        check_choice(self.generator, "generator", GENERATORS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: str | os.PathLike | None = None) -> "SweepConfig":
        """Build from a dict with the TOML layout: optional ``[sweep]`` table of scalars and
        lists, ``[[schemes]]``, ``[[distributions]]``, optional ``[report]`` (a flat dict
        with the same keys also works). ``base_dir`` resolves relative ``real`` capture
        paths (default: the working directory).

        Examples
        --------
        >>> from kvstats import SweepConfig
        >>> cfg = SweepConfig.from_dict({"sweep": {"n_trials": 50, "budgets": [3]},
        ...     "schemes": [{"name": "KQV"}], "distributions": [{"name": "gaussian"}],
        ...     "report": {"alpha": 0.01}})
        >>> cfg.n_trials, cfg.budgets, cfg.report
        (50, (3,), {'alpha': 0.01})
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"config must be a dict; received {type(data).__name__}")
        flat = dict(data)
        sweep = flat.pop("sweep", {})
        if not isinstance(sweep, Mapping):
            raise TypeError(f"config [sweep] must be a table; received {sweep!r}")
        both = sorted(set(sweep) & set(flat))
        if both:
            raise ValueError(f"config key(s) {both} given both at the top level and in [sweep]; "
                             "give each once (a top-level key would silently override [sweep])")
        flat = {**sweep, **flat}
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(flat) - allowed, key=str)
        if unknown:
            from kvstats.report.options import REPORT_OPTIONS

            # a report option written among the sweep's keys: say where it goes
            misplaced = [k for k in unknown if k in {o.name for o in REPORT_OPTIONS}]
            where = (f" ({misplaced} {'is a [report] option' if len(misplaced) == 1 else 'are [report] options'}: "
                     "put it under a [report] table)" if misplaced else "")
            # [sweep] is a table that holds some of these keys: a name the user may have meant
            raise ValueError(f"unknown config key(s) {unknown}"
                             f"{did_you_mean(unknown[0], allowed | {'sweep'})}{where}; "
                             f"allowed: {sorted(allowed | {'sweep'})}")
        for required in ("schemes", "distributions"):
            if required not in flat:
                held = [k for k in ("schemes", "distributions") for e in _as_list(flat.get(k), k)
                        if isinstance(e, Mapping) and required in e]
                raise ValueError(f"config must define {required!r}; received keys {sorted(flat, key=str)}"
                                 + (f" (a [[{held[0]}]] entry holds {required!r}{_TOML_NOTE})" if held else "")
                                 + f"; the smallest config: {_MINIMAL}")
        report = flat.get("report", {})
        if isinstance(report, Mapping) and "comparisons" in report:
            report = dict(report)
            pairs = report.pop("comparisons")
            if "comparisons" in flat and _pairs_of(flat["comparisons"]) != _pairs_of(pairs):
                raise ValueError("comparisons given both in [report] and elsewhere, with different "
                                 f"pairs; give them once (received {pairs!r} and {flat['comparisons']!r})")
            flat["comparisons"] = pairs
            flat["report"] = report
        if base_dir is not None:
            flat["distributions"] = [_resolve_real(e, base_dir) for e in _as_list(flat["distributions"],
                                                                                  "distributions")]
            if "plugins" in flat:
                flat["plugins"] = [resolve_plugin(p, base_dir) for p in _plugin_list(flat["plugins"])]
        return cls(**flat)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "SweepConfig":
        """Read a TOML config file (see docs/usage.md for the format).

        Examples
        --------
        >>> import os, tempfile
        >>> from kvstats import SweepConfig
        >>> path = os.path.join(tempfile.mkdtemp(), "c.toml")
        >>> with open(path, "w") as fh:
        ...     _ = fh.write('[sweep]\\nbudgets = [3]\\n[[schemes]]\\nname = "KQV"\\n'
        ...                  '[[distributions]]\\nname = "gaussian"\\n')
        >>> SweepConfig.from_toml(path).budgets
        (3,)
        """
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"config file {str(path)!r} is a directory; give a TOML file "
                                    "(e.g. experiments/quick.toml)")
        if not path.is_file():
            where = "" if path.is_absolute() else f" (relative to the working directory {os.getcwd()!r})"
            raise FileNotFoundError(f"config file {str(path)!r} does not exist{where}")
        try:
            raw = path.read_bytes()
            if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                # Notepad's 'Unicode' (UTF-32-LE's mark starts alike): named, not "can't decode byte 0xff"
                raise ValueError(f"config file {str(path)!r} is UTF-16 or UTF-32 text (it starts "
                                 "with that byte-order mark); save it as UTF-8")
            # utf-8-sig: a leading UTF-8 byte-order mark (Windows editors write one) is not
            # TOML, and tomllib read it as 'Invalid statement (at line 1, column 1)'
            data = tomllib.loads(raw.decode("utf-8-sig"))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"config file {str(path)!r} is not UTF-8 text: {exc}") from exc
        except OSError as exc:
            raise type(exc)(exc.errno, f"config file {str(path)!r} cannot be read: "
                                       f"{exc.strerror or exc}") from exc
        return cls.from_dict(data, base_dir=path.resolve().parent)

    def to_dict(self) -> dict[str, Any]:
        """A JSON/TOML-ready dict that :meth:`from_dict` reads back to an equal config.

        Examples
        --------
        >>> from kvstats import SweepConfig
        >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"]})
        >>> SweepConfig.from_dict(cfg.to_dict()) == cfg, cfg.to_dict()["budgets"]
        (True, [2, 3, 4, 5, 6])
        """
        return {
            "schemes": [{"name": s.name, "params": s.params, "label": s.label,
                         **({"budgets": list(s.budgets)} if s.budgets is not None else {})}
                        for s in self.schemes],
            "distributions": [{"name": d.name, "params": d.params} for d in self.distributions],
            "budgets": list(self.budgets), "dims": list(self.dims), "n_keys": list(self.n_keys),
            "n_trials": self.n_trials, "n_queries": self.n_queries, "seed": self.seed,
            "chunk_size": self.chunk_size, "comparisons": [list(p) for p in self.comparisons],
            "report": self.report, "dtype": self.dtype,
            # generator 1 (the default) and no plugins are left out: fingerprints of
            # earlier configs hold
            **({"generator": self.generator} if self.generator != 1 else {}),
            **({"plugins": list(self.plugins)} if self.plugins else {}),
        }

    # ------------------------------------------------------------------ grid
    def cells(self) -> list[Cell]:
        """Every cell of the grid, cases outermost (distribution, params, d, N).

        A real source contributes one case, at its capture's d and N; its file is read
        (header only) and checked here, so a bad capture fails before any work.

        Examples
        --------
        >>> from kvstats import SweepConfig
        >>> SweepConfig.from_dict({"schemes": ["KQV", "K4V2"], "budgets": [2, 3],
        ...     "distributions": ["gaussian"], "comparisons": []}).cells()[-1].budget is None  # K4V2: fixed
        True
        """
        return grid(self)

    def chunk_for(self, n_keys: int, dim: int) -> int:
        """Trials per chunk for a case with N keys of dimension d (:func:`kvstats.sweep.plan.chunk_for`).

        Examples
        --------
        >>> from kvstats import SweepConfig
        >>> SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"]}).chunk_for(1024, 128)
        128
        """
        return chunk_for(self, n_keys, dim)

    def cell_id(self, cell: Cell) -> str:
        """File-safe id: SHA-256 of the cell key and every setting that changes its numbers.

        Examples
        --------
        >>> from kvstats import SweepConfig
        >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"]})
        >>> ids = [cfg.cell_id(c) for c in cfg.cells()]
        >>> len(set(ids)) == len(ids) == 5
        True
        """
        return cell_id(self, cell)

def _plugin_list(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"config [sweep] plugins must be a list of strings (.py files or module "
                        f"names); received {value!r}")
    return list(value)


def _pairs_of(value: Any) -> Any:
    try:
        return [tuple(p) for p in _as_list(value, "comparisons")]
    except TypeError:
        return value


def load_config(config: SweepConfig | Mapping[str, Any] | str | os.PathLike) -> SweepConfig:
    """Accept a SweepConfig, a dict, or a path to a TOML file.

    Examples
    --------
    >>> load_config({"schemes": ["KQV"], "distributions": ["gaussian"]}).n_trials
    1000
    """
    if isinstance(config, SweepConfig):
        return config
    if isinstance(config, Mapping):
        return SweepConfig.from_dict(config)
    if isinstance(config, (str, os.PathLike)):
        return SweepConfig.from_toml(config)
    raise TypeError(f"config must be a SweepConfig, dict or TOML path; received {type(config).__name__}")
