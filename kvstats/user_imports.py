"""The user code a module depends on: the modules it imports that are the user's own.

A sweep's cell ids hash the source of the user code that computes them
(:func:`kvstats.sweep.plan.user_code_digest`), and a plugin (:mod:`kvstats.plugins`) may
import helper modules of its own: :func:`user_imports` finds those, statically (import
statements, a function's lazy import included, and the module's namespace), following the
user's modules only, so every process finds the same files whatever it imported first.
:func:`function_imports` does it for a scheme's or distribution's functions, also those
typed where there is no file to read (a notebook, ``python -c``): their modules are the
ones their global names refer to. :func:`is_user_file` is the rule (a ``.py`` file outside the standard library,
site-packages/dist-packages and kvstats), :func:`file_sha256` the hash recorded beside it.

A registered scheme or distribution is pinned when registered (``_pin``): the files the
cell ids hash for its functions (``_code_files``), with their SHA-256 then, which a sweep
checks the files against (``kvstats.plugins._check_unchanged``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "is_user_file", "user_imports", "function_imports"]


def file_sha256(path: str | None) -> str | None:
    """The SHA-256 (hex) of the file at ``path``; None when there is no such file.

    Examples
    --------
    >>> file_sha256("no/such/file.py") is None
    True
    """
    if path is None or not os.path.isfile(path):
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()



@lru_cache(maxsize=1)
def _system_dirs() -> tuple[str, ...]:
    """Folders whose modules are not user code: the interpreter's standard library (also the
    base interpreter's, under a virtual environment), site-packages, kvstats itself."""
    dirs = set()
    for paths in (sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix,
                                                                   "platbase": sys.base_exec_prefix})):
        dirs.update(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:   # pragma: no cover - some embedded interpreters lack it
        pass
    dirs.add(site.getusersitepackages())
    here = Path(__file__).resolve().parent            # kvstats/
    dirs.update([str(here), str(here.parent / "kvstats_gpu")])
    return tuple(sorted({os.path.realpath(d) for d in dirs if d}))


def is_user_file(path: str | None) -> bool:
    """Whether ``path`` is a Python source file of the user's (see :func:`user_imports`)."""
    if not isinstance(path, str) or not path.endswith(".py") or not os.path.isfile(path):
        return False
    real = os.path.realpath(path)
    if {"site-packages", "dist-packages"} & set(Path(real).parts):
        return False
    return not any(real == d or real.startswith(d + os.sep) for d in _system_dirs())


@lru_cache(maxsize=512)
def _import_statements(path: str, sha: str) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """Every import statement of the file (at any depth: a function's lazy import too), as
    (level, module, imported names); cached by the file's content hash."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", tuple(a.name for a in node.names)))
    return tuple(found)


def _module_file(name: str) -> str | None:
    """The source file of module ``name``: the imported module's, else where the import
    system would find it, without importing anything (a lazy import not yet run)."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return file if isinstance(file, str) else None
    path, spec = None, None
    parts = name.split(".")
    for i, part in enumerate(parts):
        if i and path is None:   # below a module that is no package: ``from m import name``
            return None
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, path)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec.origin if spec is not None and spec.has_location else None


def _candidates(package: str, statements: Iterable[tuple[int, str, tuple[str, ...]]]) -> set[str]:
    """Module names an import statement may load: ``import a.b`` -> a, a.b; ``from a import
    b`` -> a, a.b (b may be a submodule); relative ones resolved against ``package``."""
    names = set()
    for level, module, imported in statements:
        if level:
            try:
                module = importlib.util.resolve_name("." * level + module, package)
            except (ImportError, ValueError):   # a relative import outside a package
                continue
        pieces = module.split(".")
        names.update(".".join(pieces[:i]) for i in range(1, len(pieces) + 1))
        names.update(f"{module}.{n}" for n in imported if n != "*")
    return {n for n in names if n}


def _direct_imports(name: str, file: str) -> set[str]:
    """The modules the module ``name`` (source ``file``) names: its import statements, and
    the modules of the module objects, functions, classes and objects in its namespace."""
    module = sys.modules.get(name)
    package = name if os.path.basename(file) == "__init__.py" else name.rpartition(".")[0]
    if module is not None and isinstance(getattr(module, "__package__", None), str):
        package = module.__package__
    found = _candidates(package, _import_statements(file, file_sha256(file) or ""))
    for value in list(vars(module).values()) if module is not None else ():
        if isinstance(value, type(sys)):
            found.add(value.__name__)
            continue
        owner = value if isinstance(value, type) or callable(value) else type(value)
        mod = getattr(owner, "__module__", None)
        if isinstance(mod, str):
            found.add(mod)
    return found


def user_imports(modules: Iterable[str]) -> list[dict[str, str]]:
    """The user code the modules ``modules`` depend on: every module they import,
    directly or through one another, whose source file is the user's.

    User code is a ``.py`` file outside the interpreter's standard library, outside
    ``site-packages``/``dist-packages`` and outside kvstats itself: a helper module beside
    a plugin, a package of the user's on ``PYTHONPATH``. A module's imports are read from
    its source (every ``import`` statement, a function's lazy one included) and from its
    namespace (modules, and the modules of the functions and classes it holds); installed
    packages are not followed. The answer depends on the files and ``sys.path`` only, not
    on what this process happened to import first, so that every process finds the same.

    Parameters
    ----------
    modules : iterable of str
        Names of imported modules (``sys.modules``), e.g. a plugin's module.

    Returns
    -------
    list of dict
        ``{"module", "file", "sha256"}`` per user module found, sorted by file; the
        modules given are not listed themselves.

    Examples
    --------
    >>> user_imports(["json"])          # the standard library is not user code
    []
    """
    start = [m for m in modules if isinstance(getattr(sys.modules.get(m), "__file__", None), str)]
    todo = [(m, sys.modules[m].__file__) for m in start]
    own = {os.path.realpath(f) for _, f in todo}
    seen: dict[str, str] = {}
    while todo:
        name, file = todo.pop()
        for dep in sorted(_direct_imports(name, file)):
            dep_file = _module_file(dep)
            if not is_user_file(dep_file):
                continue
            real = os.path.realpath(dep_file)
            if real in seen or real in own:
                continue
            seen[real] = dep
            todo.append((dep, dep_file))
    return [{"module": seen[f], "file": f, "sha256": file_sha256(f) or ""} for f in sorted(seen)]


def _function_of(fn: Any) -> Any:
    """The plain function behind ``fn``: a partial's function, a bound method's, a callable
    object's ``__call__``; else ``fn`` (a class, a builtin)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not hasattr(fn, "__code__") and not isinstance(fn, type):
        fn = getattr(type(fn), "__call__", fn)
    return getattr(fn, "__func__", fn)


def _module_of(fn: Any) -> str | None:
    owner = fn if isinstance(fn, type) or hasattr(fn, "__code__") else type(fn)
    name = getattr(owner, "__module__", None)
    return name if isinstance(name, str) and name in sys.modules else None


def _code_names(code: Any) -> set[str]:
    """The global and attribute names a code object and its nested ones (inner functions,
    comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            names |= _code_names(const)
    return names


def _referenced_modules(fn: Any, seen: set[int]) -> set[str]:
    """The modules a function of a module without a source file refers to through its
    global names: module objects, and the modules of functions and classes; the functions
    of the same file-less module it calls are followed in turn."""
    if id(fn) in seen or not hasattr(fn, "__code__"):
        return set()
    seen.add(id(fn))
    found: set[str] = set()
    scope = getattr(fn, "__globals__", {})
    for name in sorted(_code_names(fn.__code__)):
        value = scope.get(name)
        if value is None:
            continue
        if isinstance(value, type(sys)):
            found.add(value.__name__)
            continue
        inner = _function_of(value)
        module = _module_of(inner)
        if module is not None:
            found.add(module)
        if _typed(inner, module):
            found |= _referenced_modules(inner, seen)   # typed code calling typed code
    return found


def _typed(fn: Any, module: str | None) -> bool:
    """Whether ``fn`` is a function with no source file to read (its module has none, or
    it has no module: ``exec`` in a namespace of its own)."""
    return hasattr(fn, "__code__") and (
        module is None or not isinstance(getattr(sys.modules[module], "__file__", None), str))


def function_imports(functions: Iterable[Any]) -> list[dict[str, str]]:
    """The user code ``functions`` depend on beyond the files that define them.

    For a function defined in a file: the user modules that file imports
    (:func:`user_imports`). For one with no file to read (typed in a notebook, at an
    interactive prompt or in ``python -c``): the modules its global names refer to (module
    objects, the modules of the functions and classes it uses, its inner functions' and
    the typed functions it calls followed too), themselves when they are the user's, and
    what those import. A ``functools.partial`` counts as its function, a callable object
    as its class's ``__call__``.

    Parameters
    ----------
    functions : iterable of callable
        A scheme's ``build`` and ``expected_bits``, a distribution's ``sampler``, ...

    Returns
    -------
    list of dict
        ``{"module", "file", "sha256"}`` per user module, sorted by file; the files that
        define ``functions`` are not listed.

    Examples
    --------
    >>> import json
    >>> function_imports([json.dumps])   # the standard library is not user code
    []
    """
    plain = [_function_of(fn) for fn in functions]
    defining = [m for m in map(_module_of, plain) if m is not None]
    own = {os.path.realpath(f) for m in defining
           if isinstance(f := getattr(sys.modules[m], "__file__", None), str)}
    referenced: set[str] = set()
    seen: set[int] = set()
    for fn, module in zip(plain, map(_module_of, plain)):
        if _typed(fn, module):
            referenced |= _referenced_modules(fn, seen)
    found = {d["file"]: d for d in user_imports(sorted(set(defining) | referenced))}
    for name in sorted(referenced):   # user_imports leaves out the modules it starts from
        file = getattr(sys.modules.get(name), "__file__", None)
        if is_user_file(file) and os.path.realpath(file) not in own:
            real = os.path.realpath(file)
            found.setdefault(real, {"module": name, "file": real, "sha256": file_sha256(real) or ""})
    return [found[f] for f in sorted(found) if f not in own]


# ------------------------------------------------------------ the code a registration runs
# id(registration) -> (the registration, {user file: its SHA-256 when registered}): the user
# code this process runs, which a sweep checks the files against (plugins._check_unchanged)
_PINS: dict[int, tuple[Any, dict[str, str]]] = {}


def _code_file(fn: Any) -> str | None:
    """The real path of the user file that defines ``fn`` (a partial's function, a callable
    object's class), else None (typed code, a built-in, an installed package)."""
    try:
        path = inspect.getsourcefile(_function_of(fn))
    except (TypeError, OSError):
        return None
    return os.path.realpath(path) if is_user_file(path) else None


def _code_files(functions: Iterable[Any]) -> dict[str, str]:
    """The user files a cell id hashes for ``functions`` (``kvstats.sweep.plan.user_code_digest``):
    the files that define them and what those import (:func:`function_imports`), each with
    its SHA-256 now."""
    functions = list(functions)
    files = {f: file_sha256(f) or "" for f in sorted({f for f in map(_code_file, functions) if f})}
    for dep in function_imports(functions):
        files.setdefault(dep["file"], dep["sha256"])
    return files


def _pin(registration: Any, functions: Iterable[Any]) -> None:
    """Remember the user files a registration's code runs as they are now, the helpers its
    files import included (register_scheme and register_distribution call it)."""
    _PINS[id(registration)] = (registration, _code_files(functions))


def _pinned(registration: Any) -> dict[str, str]:
    entry = _PINS.get(id(registration))
    return entry[1] if entry is not None and entry[0] is registration else {}


def _pins_now(registration: Any) -> dict[str, str]:
    """The registration's pins, with the files of the set a cell id hashes now that they
    lack (a helper found only since: a name its module gained) pinned from now on, the
    first digest seen being the best record there is of what this process runs."""
    entry = _PINS.get(id(registration))
    if entry is None or entry[0] is not registration:
        entry = _PINS[id(registration)] = (registration, {})
    functions = ((registration.sampler,) if hasattr(registration, "sampler")   # a distribution
                 else (registration.build, registration._bits))
    for file, sha in _code_files(functions).items():
        entry[1].setdefault(file, sha)
    return entry[1]
