"""The plan of a sweep: its cells, their keys and ids, the seeds, chunks and tasks.

Every random number of a cell comes from seeds derived from the root seed and a stable
SHA-256 hash of the cell's key (never Python's ``hash()``, which is salted per process):

- the **data** seed of chunk ``b`` depends on the case key and ``b`` only, so every scheme
  and budget of a case sees the same trials (paired comparisons);
- the **scheme** seed of chunk ``b`` depends on the full cell key and ``b``, so each
  chunk (and, with ``draws=T``, each trial) gets an independent draw of the scheme's
  randomness;
- the **cell id** hashes the cell key with every setting that changes its numbers,
  the chunk size included (the data of a chunk depends on where chunks start).

:func:`data_seed`, :func:`scheme_seed` and :func:`chunk_span` are the one definition of
how chunk ``b`` of a cell is seeded: the runner (:mod:`kvstats.sweep.work`) and
:func:`kvstats.sweep.replay_trials` both call them, so a replayed trial is the stored one.

The functions here take a :class:`~kvstats.sweep.config.SweepConfig` but only read its
fields; the config's ``cells``, ``chunk_for`` and ``cell_id`` methods call them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from kvstats._checks import check_int
from kvstats.user_imports import function_imports
from kvstats.results import REAL
from kvstats.sweep.sources import _capture_info, _real_case, _real_selection

if TYPE_CHECKING:
    from kvstats.sweep.config import SchemeSpec, SweepConfig

# Target number of float64 entries per chunk-sized array for automatic chunking: 2**24
# entries = 128 MiB per array. The largest per-trial arrays are the data (N × d: K, V,
# K̂, V̂, codes) and each draw's rotation or sketch (m × d with m = d), hence max(N, d)·d.
_AUTO_CHUNK_ENTRIES = 2 ** 24
# A case's chunks are split over about this many tasks in all (at least one chunk per
# task), so that a few cases still keep a pool of workers busy and the progress bar
# moves; results do not depend on the split (every chunk's data and scheme seeds come
# from the case/cell key and the chunk index).
_TARGET_TASKS = 64


def _fmt_params(params: Mapping[str, Any]) -> str:
    """Stable, human-readable rendering of a parameter dict: ``"nu=1.5,rank=8"`` or ``"-"``."""
    if not params:
        return "-"
    return ",".join(f"{k}={params[k]!r}" if isinstance(params[k], str) else f"{k}={params[k]}"
                    for k in sorted(params))


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Cell:
    """One grid point. ``key`` is the stable text the seeds and the id are derived from.

    ``source`` is the content fingerprint of a real capture (None for synthetic data); it
    is part of the case key only when set, so synthetic keys are those of earlier versions.
    A real case's key holds the fingerprint instead of the capture's path: the same
    capture gives the same seeds, draws and cell ids wherever it lies.

    Examples
    --------
    >>> from kvstats.sweep import SchemeSpec
    >>> c = Cell("heavy_tailed", {"nu": 1.5}, 64, 128, 3, SchemeSpec("KQV"))
    >>> c.case_key()
    '{"dim":64,"distribution":"heavy_tailed","n_keys":128,"params":{"nu":1.5}}'
    >>> c.params_label(), c.key() == Cell("heavy_tailed", {"nu": 1.5}, 64, 128, 4, SchemeSpec("KQV")).key()
    ('nu=1.5', False)
    """

    distribution: str
    params: dict[str, Any]
    dim: int
    n_keys: int
    budget: float | None
    scheme: SchemeSpec
    source: str | None = None

    def case_key(self) -> str:
        """The case's stable text: all cells of a case share their data seeds."""
        params = self.params
        if self.source is not None:  # the data are the capture's content, not its location
            params = {k: v for k, v in params.items() if k != "path"}
        case = {"distribution": self.distribution, "params": params,
                "dim": self.dim, "n_keys": self.n_keys}
        if self.source is not None:
            case["capture"] = self.source
        return _canonical(case)

    def params_label(self) -> str:
        """The ``params`` column: ``k=v,...``; a real capture shows as ``file@fingerprint``
        (its full path is in the manifest; the cell key holds the fingerprint), so tables
        and figure names do not carry a machine-specific directory."""
        if self.source is None:
            return _fmt_params(self.params)
        return _fmt_params({**self.params, "path": f"{os.path.basename(self.params['path'])}@{self.source[:8]}"})

    def scheme_at(self) -> str:
        """The scheme and its budget, for messages: ``'KQV' at n=3``; a fixed-budget scheme
        (``budget`` None: ``q4_0``, ``K4V2``, ``identity``) has no n to name: ``'q4_0'``.

        Examples
        --------
        >>> from kvstats.sweep import SchemeSpec
        >>> Cell("gaussian", {}, 64, 128, 3, SchemeSpec("KQV")).scheme_at()
        "'KQV' at n=3"
        >>> Cell("gaussian", {}, 64, 128, None, SchemeSpec("q4_0")).describe()
        "'q4_0', gaussian(-), d=64, N=128"
        """
        name = repr(self.scheme.display())
        return name if self.budget is None else f"{name} at n={self.budget:g}"

    def describe(self) -> str:
        """The cell in words, for messages: :meth:`scheme_at` and :meth:`describe_case`."""
        return f"{self.scheme_at()}, {self.describe_case()}"

    def describe_case(self) -> str:
        """The cell's case in words, for messages: ``gaussian(-), d=64, N=128``."""
        return f"{self.distribution}({self.params_label()}), d={self.dim}, N={self.n_keys}"

    def key(self) -> str:
        """The cell's stable text: its case, budget and scheme (name, settings, label)."""
        return _canonical({"case": json.loads(self.case_key()), "budget": self.budget,
                           "scheme": self.scheme.name, "scheme_params": self.scheme.params,
                           "label": self.scheme.display()})


def code_version() -> dict[str, str]:
    """What computes a cell beside its config: kvstats' own source and the numeric libraries.

    Read once per process, when this module is imported: the code a process runs is what
    it imported, not what the files hold after an edit made while it runs (a notebook's
    kernel, a long sweep).

    ``kvstats_source`` is the SHA-256 of every ``kvstats/**/*.py`` file (path and bytes,
    in path order), so an edit of the code (committed or not, whatever the version number
    says) is seen; ``numpy`` and ``scipy`` are their versions (numpy's generators keep no
    stream across versions). Not in the cell id (the ids of stored results stay theirs):
    the cell's metadata records it, and a resumed cell must have been computed by the same
    (:func:`kvstats.sweep.store.check_cell`), else a resumed sweep would mix the numbers of
    two versions of the code under the manifest's one. Conservative: an edit that changes
    no number (a report's wording) recomputes the cells too. The CPU and the BLAS, which
    may change last bits only, are not in it: :mod:`kvstats.sweep.numeric_env` records
    them, and a resume of cells computed elsewhere warns instead of recomputing.

    Examples
    --------
    >>> v = code_version()
    >>> sorted(v), len(v["kvstats_source"])
    (['kvstats_source', 'numpy', 'scipy'], 64)
    """
    return dict(_code_version())


@functools.lru_cache(maxsize=1)
def _code_version() -> tuple[tuple[str, str], ...]:
    import scipy

    root = Path(__file__).resolve().parents[1]   # the kvstats package
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return (("kvstats_source", digest.hexdigest()), ("numpy", np.__version__), ("scipy", scipy.__version__))


_code_version()   # at import (~10 ms): the source this process loaded


def _stable_words(text: str) -> tuple[int, ...]:
    """Eight 32-bit words of SHA-256(text): a process-independent spawn key."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4))


def _derive_seed(root: int, *parts: Any) -> int:
    """A 64-bit integer seed from the root seed and the stable hash of ``parts``."""
    ss = np.random.SeedSequence(root, spawn_key=_stable_words(_canonical(list(parts))))
    return int(ss.generate_state(1, dtype=np.uint64)[0])


# ---------------------------------------------------------------- how chunk b is seeded
# The one definition of a chunk's seeds and trials: the runner (kvstats.sweep.work) and
# kvstats.sweep.replay both call these, so a replayed trial is the stored one.
def data_seed(root: int, cell: Cell, chunk: int) -> int:
    """The seed of the K, V, q a sweep draws for chunk ``chunk`` of ``cell``'s case.

    It hashes the root seed, the case key (:meth:`Cell.case_key`) and the chunk index
    only, so every scheme and budget of a case codes the same trials. ``chunk`` may be
    a numpy integer: it is hashed as the Python int it equals (a ``numpy.int64`` would
    otherwise hash as its text, another seed).

    Examples
    --------
    >>> from kvstats.sweep import SchemeSpec
    >>> kqv = Cell("gaussian", {}, 16, 8, 3, SchemeSpec("KQV"))
    >>> kv = Cell("gaussian", {}, 16, 8, 2, SchemeSpec("KV"))
    >>> data_seed(7, kqv, 1) == data_seed(7, kv, 1) != data_seed(7, kqv, 2)
    True
    >>> data_seed(7, kqv, np.int64(1)) == data_seed(7, kqv, 1)
    True
    """
    return _derive_seed(check_int(root, "root", low=0), "data", cell.case_key(),
                        check_int(chunk, "chunk", low=0))


def scheme_seed(root: int, cell: Cell, chunk: int) -> int:
    """The seed of the scheme draw that codes chunk ``chunk`` of ``cell``.

    It hashes the root seed, the full cell key (:meth:`Cell.key`: case, budget, scheme)
    and the chunk index: the scheme is made once per chunk with ``draws=t`` (the chunk's
    trial count), and trial ``start + i`` of the chunk is coded by draw ``i``.

    Examples
    --------
    >>> from kvstats.sweep import SchemeSpec
    >>> c3, c4 = (Cell("gaussian", {}, 16, 8, n, SchemeSpec("KQV")) for n in (3, 4))
    >>> scheme_seed(7, c3, 0) != scheme_seed(7, c4, 0), scheme_seed(7, c3, 0) != data_seed(7, c3, 0)
    (True, True)
    """
    return _derive_seed(check_int(root, "root", low=0), "scheme", cell.key(),
                        check_int(chunk, "chunk", low=0))


def chunk_span(n_trials: int, chunk_size: int, chunk: int) -> tuple[int, int]:
    """``(start, count)``: the trials ``start .. start + count - 1`` of chunk ``chunk``.

    Chunks are ``chunk_size`` trials from trial 0 on; the last holds what is left.

    Examples
    --------
    >>> chunk_span(10, 4, 0), chunk_span(10, 4, 2)
    ((0, 4), (8, 2))
    >>> chunk_span(10, 4, 3)
    Traceback (most recent call last):
    ...
    ValueError: chunk must be an integer in [0, 2]; received 3
    """
    n_trials = check_int(n_trials, "n_trials", low=1)
    chunk_size = check_int(chunk_size, "chunk_size", low=1)
    b = check_int(chunk, "chunk", low=0, high=-(-n_trials // chunk_size) - 1)
    start = b * chunk_size
    return start, min(chunk_size, n_trials - start)


def grid(config: SweepConfig) -> list[Cell]:
    """Every cell of the grid, cases outermost (distribution, params, d, N).

    A real source contributes one case, at its capture's d and N; its file is read
    (header only) and checked here, so a bad capture fails before any work.

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV", "K4V2"], "budgets": [2, 3],
    ...     "distributions": ["gaussian"], "dims": [16], "n_keys": [8, 32], "comparisons": []})
    >>> [(c.n_keys, c.scheme.name, c.budget) for c in grid(cfg)][:3]
    [(8, 'KQV', 2), (8, 'KQV', 3), (8, 'K4V2', None)]
    """
    out = []
    captures: dict[str, dict] = {}
    for dist in config.distributions:
        source = None
        cases = [(d, n) for d in config.dims for n in config.n_keys]
        if dist.name == REAL:
            source, cases = _real_case(config, dist.params)
            # the case key holds the content, not the path: one capture's bytes at two
            # paths with the same selection would be one case twice; so would layer=0 and
            # layer=[0], or no head and every head listed (the same trials, in one order)
            layers, heads = _real_selection(dist.params, _capture_info(dist.params["path"]))
            earlier = captures.setdefault(_canonical([source, layers, heads]), dist.params)
            if earlier is not dist.params:
                raise ValueError(
                    f"distributions: two 'real' entries read the same capture content "
                    f"(fingerprint {source}) with the same selection (layers {layers}, KV heads "
                    f"{heads}): {_fmt_params(earlier)} and {_fmt_params(dist.params)}; keep one")
        for d, n in cases:
            for scheme in config.schemes:
                if scheme.fixed_budget:
                    budgets: Iterable[float | None] = [None]
                else:
                    budgets = scheme.budgets or config.budgets
                for b in budgets:
                    out.append(Cell(dist.name, dist.params, d, n, b, scheme, source))
    return out


def chunk_for(config: SweepConfig, n_keys: int, dim: int) -> int:
    """Trials per chunk for a case with N keys of dimension d.

    ``config.chunk_size`` when set, else ``2**24 // (max(N, d)·d)`` (at least 1); never
    more than ``config.n_trials``.

    ``n_queries`` does not enter: the chunk is part of every cell id and of the data
    seeds, so counting it would change the ids and numbers of earlier results. The
    per-chunk reference the case's cells share (``error_profile``'s logits, their
    log-softmax and ``p V``, about ``chunk · n_queries · (3N + d_v)`` float64 values) is
    kept only up to 128 MiB (``kvstats.metrics.profile._REFERENCE_BYTES``), recomputed per
    cell past it; the profile's own working set is bounded in ``n_queries``.

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"]})
    >>> chunk_for(cfg, 1024, 128), chunk_for(cfg, 8, 256)
    (128, 256)
    """
    if config.chunk_size is not None:
        return min(config.chunk_size, config.n_trials)
    return int(min(config.n_trials, max(1, _AUTO_CHUNK_ENTRIES // (max(n_keys, dim) * dim))))


def cell_id(config: SweepConfig, cell: Cell) -> str:
    """File-safe id: SHA-256 of the cell key and every setting that changes its numbers.

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"]})
    >>> cell = grid(cfg)[0]
    >>> len(cell_id(cfg, cell)), cell_id(cfg, cell) == cell_id(cfg.__class__.from_dict(
    ...     {**cfg.to_dict(), "seed": 1}), cell)
    (20, False)
    """
    code = user_code_digest(cell)
    text = _canonical({"cell": json.loads(cell.key()), "seed": config.seed,
                       "n_trials": config.n_trials, "n_queries": config.n_queries,
                       "chunk": chunk_for(config, cell.n_keys, cell.dim), "dtype": config.dtype,
                       # generator 1 (the default) leaves the ids of earlier results unchanged
                       **({"generator": config.generator} if config.generator != 1 else {}),
                       # built-ins only: no entry, so their ids are those of earlier versions
                       **({"user_code": code} if code is not None else {})})
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def user_code_digest(cell: Cell) -> str | None:
    """SHA-256 of the source of the user code that computes ``cell`` (None: built-ins only).

    A registered scheme or distribution (:func:`kvstats.register_scheme`,
    :func:`kvstats.register_distribution`) is code the user edits between runs: the
    source files of its functions (the scheme's ``build`` and ``expected_bits``, the
    distribution's ``sampler``) enter the cell id, so ``resume`` recomputes a cell whose
    user code changed instead of reusing numbers the new code would not give. The user
    modules those functions' modules import, directly or through one another
    (:func:`kvstats.user_imports.function_imports`: a helper beside a plugin, or the
    modules a function typed in a notebook or ``python -c`` refers to; not the standard
    library, installed packages or kvstats), are hashed too, by content: an edit of any
    of them recomputes every cell of that code (conservative: the helper may not matter to
    that cell). A distribution's ``defaults`` and a scheme's (``define_scheme(defaults=...)``)
    are hashed too (they fill the parameters a cell leaves out). A function with no source
    file (typed at an interactive prompt, ``python -c``) is hashed by its bytecode, names
    and constants, its inner functions and comprehensions included, alike in every
    process, and by the values of the globals it names and of its closure cells
    (:func:`_typed_values`); a ``functools.partial`` adds its arguments, by content.

    Examples
    --------
    >>> from kvstats.sweep import SchemeSpec
    >>> user_code_digest(Cell("gaussian", {}, 64, 128, 3, SchemeSpec("KQV"))) is None
    True
    """
    from kvstats.data.register import _USER
    from kvstats.quant.registry import BUILTIN, parse_scheme_name

    # the defaults fill the parameters the cell leaves out: other defaults, other numbers
    functions, defaults = [], b""
    sdef = parse_scheme_name(cell.scheme.name, cell.scheme.params)[0]
    if sdef.name not in BUILTIN:
        functions += [sdef.build, sdef._bits]
        if sdef.defaults:   # none declared (a plugin older than them): the id as it was
            defaults += b"\x00scheme defaults\x00" + _const_text(sorted(sdef.defaults.items())).encode()
    if cell.distribution in _USER:
        ddef = _USER[cell.distribution]
        functions.append(ddef.sampler)
        defaults += _const_text(sorted(ddef.defaults.items())).encode()
    if not functions:
        return None
    digest = hashlib.sha256()
    for fn in functions:
        digest.update(_source_bytes(fn))
    digest.update(defaults)
    # the user modules that code imports (a helper beside the plugin; the modules typed
    # code refers to): their contents, in an order no process state sets; none (the
    # common case) leaves the id as it was
    imports = sorted({dep["sha256"] for dep in function_imports(functions)})
    if imports:
        digest.update(b"\x00imports\x00" + "\x00".join(imports).encode())
    return digest.hexdigest()


def _source_bytes(fn: Any, _seen: frozenset[int] = frozenset()) -> bytes:
    """The bytes of the file that defines ``fn`` (a partial's function, a callable
    object's class), else its code (:func:`_code_text`) and the values it reads
    (:func:`_typed_values`); a partial's arguments by content (:func:`_value_text`)."""
    bound = b""
    while isinstance(fn, functools.partial):
        bound += _value_text((fn.args, tuple(sorted(fn.keywords.items()))), _seen).encode()
        fn = fn.func
    path = _source_file(fn)
    if path is not None:
        with open(path, "rb") as fh:
            return bound + fh.read()
    if getattr(fn, "__code__", None) is None and hasattr(getattr(fn, "__call__", None), "__code__"):
        # a callable object of a typed class: its method's code, and its own state
        state = getattr(fn, "__dict__", None)
        return bound + _source_bytes(fn.__call__, _seen) + (_value_text(state, _seen).encode() if state else b"")
    code = getattr(fn, "__code__", None)
    return bound + (b"" if code is None else _code_text(code) + _typed_values(fn, _seen | {id(fn)}))


def _source_file(fn: Any) -> str | None:
    """The existing source file of a function or class (else of a callable object's class)."""
    import inspect

    for owner in (fn, type(fn)):
        try:
            path = inspect.getsourcefile(owner)
        except TypeError:   # a builtin, or an object that is not a function or class
            continue
        return path if path is not None and os.path.isfile(path) else None
    return None


def _code_text(code: Any) -> bytes:
    """A code object's bytecode, names and constants, nested code objects (inner functions,
    lambdas, comprehensions) included, in a form every process gives alike: no addresses,
    set constants sorted (their order follows the per-process string hash)."""
    parts = [code.co_code, repr((code.co_names, code.co_varnames, code.co_freevars)).encode()]
    for const in code.co_consts:
        parts.append(_code_text(const) if hasattr(const, "co_code") else _const_text(const).encode())
    return b"\x00".join(parts)


def _const_text(value: Any) -> str:
    """A constant's text, the same in every process (see :func:`_code_text`)."""
    if isinstance(value, (frozenset, set)):
        return "{" + ",".join(sorted(_const_text(v) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_const_text(v) for v in value) + ")"
    if value is None or value is Ellipsis or isinstance(value, (str, bytes, int, float, complex)):
        return repr(value)
    return type(value).__qualname__   # an object's repr may hold its address


def _typed_values(fn: Any, seen: frozenset[int]) -> bytes:
    """What typed code reads beyond its bytecode, by content: the values of the globals
    its names (its inner code's too) find in its namespace, and its closure cells. Modules,
    builtins and functions or classes of files are left out (their files are hashed, or an
    installed package's version pins them), so code naming only those (``np``, ``math``)
    keeps its digest."""
    names, stack = set(), [fn.__code__]
    while stack:
        code = stack.pop()
        names |= set(code.co_names)
        stack += [c for c in code.co_consts if hasattr(c, "co_code")]
    space = getattr(fn, "__globals__", None) or {}
    found = [(n, space[n]) for n in sorted(names) if n in space and not _is_reference(space[n])]
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:   # a cell not filled yet
            cells.append(Ellipsis)
    if not found and not cells:
        return b""
    where = f"typed function {getattr(fn, '__qualname__', fn)!r}"
    text = [f"{n}={_value_text(v, seen, f'{n!r} of {where}')}" for n, v in found]
    text += [f"cell={_value_text(v, seen, f'a closure cell of {where}')}" for v in cells]
    return b"\x00values\x00" + "\x00".join(text).encode()


def _is_reference(value: Any) -> bool:
    """A module, a builtin, or a function or class that is not typed code (it has a file,
    or is compiled): what a name refers to as code, which :func:`_typed_values` leaves out."""
    import types

    if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, np.ufunc)):
        return True
    if isinstance(value, types.FunctionType):
        return _source_file(value) is not None
    if not isinstance(value, type) or value.__module__ in sys.builtin_module_names:
        return isinstance(value, type)
    return isinstance(getattr(sys.modules.get(value.__module__), "__file__", None), str)


def _value_text(value: Any, seen: frozenset[int] = frozenset(), where: str = "a partial's argument") -> str:
    """A value's text by content, the same in every process: :func:`_const_text`'s where
    that is exact (so partials of those keep their ids); dicts item by item; arrays by
    dtype, shape and bytes; typed functions and classes by code; code of files by name;
    another object by the parts its pickle holds. One that cannot be pickled is its type's
    name, with a warning: the cell ids do not see its changes (docs/usage.md, "Not seen")."""
    import pickle
    import types
    import warnings

    if isinstance(value, (frozenset, set)):
        return "{" + ",".join(sorted(_value_text(v, seen, where) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_value_text(v, seen, where) for v in value) + ")"
    if value is None or value is Ellipsis or isinstance(value, (str, bytes, int, float, complex)):
        return repr(value)
    if isinstance(value, dict):
        items = sorted(f"{_value_text(k, seen, where)}:{_value_text(v, seen, where)}" for k, v in value.items())
        return "dict{" + ",".join(items) + "}"
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return f"ndarray({value.dtype.str},{value.shape},{digest})"
    if isinstance(value, np.ndarray):
        return f"ndarray(O,{value.shape},{_value_text(value.tolist(), seen, where)})"
    if isinstance(value, np.generic):
        return f"{value.dtype.str}:{value.item()!r}"
    if _is_reference(value) or id(value) in seen:
        return f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', getattr(value, '__name__', ''))}"
    if isinstance(value, (types.FunctionType, type)) or hasattr(value, "__code__"):   # typed code
        parts = [_source_bytes(value, seen | {id(value)})] if not isinstance(value, type) else [
            _source_bytes(v, seen | {id(value)}) for _, v in sorted(vars(value).items()) if callable(v)]
        return "code:" + hashlib.sha256(b"\x00".join(parts)).hexdigest()
    try:
        pickle.dumps(value, protocol=4)   # what cannot be pickled cannot reach a worker either
        # its pickle's parts by content, not its bytes: a set inside pickles in the order of
        # the per-process string hash (PYTHONHASHSEED)
        reduced = value.__reduce_ex__(4)
        if isinstance(reduced, str):   # a global pickled by name
            return f"global:{getattr(value, '__module__', None)}.{reduced}"
        parts = [list(p) if isinstance(p, Iterator) else p for p in reduced[1:]]
        return "reduce:" + _value_text((reduced[0], *parts), seen | {id(value)}, where)
    except Exception as exc:   # noqa: BLE001 - a lock, a generator, a lambda inside: any error
        warnings.warn(f"the cell ids cannot see the value of {where} (a {type(value).__qualname__}, not "
                      f"picklable: {type(exc).__name__}): a resumed sweep reuses its cells after it "
                      "changes; rerun without resume after changing it", UserWarning, stacklevel=2)
        return type(value).__qualname__


@dataclass(frozen=True)
class _Task:
    """Chunks ``[first, stop)`` of one case, for every cell of the case (all budgets and
    schemes): a chunk's trials are drawn once and every cell quantizes the same draw."""

    cells: tuple[tuple[Cell, str], ...]  # (cell, cell id)
    n_trials: int
    n_queries: int
    chunk: int
    seed: int
    first: int
    stop: int
    dtype: str = "float64"
    generator: int = 1

    def describe(self) -> str:
        """The task in words, for messages: its case and trials, ``gaussian(-), d=64,
        N=128, trials 0..249``."""
        first = chunk_span(self.n_trials, self.chunk, self.first)[0]
        start, count = chunk_span(self.n_trials, self.chunk, self.stop - 1)
        return f"{self.cells[0][0].describe_case()}, trials {first}..{start + count - 1}"


def _tasks(config: SweepConfig, todo: list[tuple[Cell, str]],
           done: Mapping[str, set[int]] | None = None) -> list[_Task]:
    """The tasks computing the cells ``todo``: each case's chunks split over a few tasks;
    ``done`` (case key -> chunks a resume has: :mod:`kvstats.sweep.parts`) leaves those out,
    each run of missing chunks split in proportion to its length."""
    groups: dict[str, list[tuple[Cell, str]]] = {}
    for cell, cid in todo:
        groups.setdefault(cell.case_key(), []).append((cell, cid))
    tasks = []
    for case, cells in groups.items():
        chunk = chunk_for(config, cells[0][0].n_keys, cells[0][0].dim)
        have = (done or {}).get(case, set())
        missing = [b for b in range(-(-config.n_trials // chunk)) if b not in have]
        runs: list[list[int]] = []   # the contiguous runs [a, b) of missing chunks
        for b in missing:
            if runs and runs[-1][1] == b:
                runs[-1][1] = b + 1
            else:
                runs.append([b, b + 1])
        # a real case is not split: every task of it would load the case's whole selection
        real = cells[0][0].distribution == REAL
        splits = 1 if real else min(len(missing), -(-_TARGET_TASKS // len(groups)))
        for a, b in runs:
            k = 1 if real else max(1, round(splits * (b - a) / len(missing)))
            bounds = np.linspace(a, b, k + 1).round().astype(int)
            tasks += [_Task(tuple(cells), config.n_trials, config.n_queries, chunk, config.seed,
                            int(lo), int(hi), config.dtype, config.generator)
                      for lo, hi in zip(bounds[:-1], bounds[1:])]
    return tasks
