"""Plugins: modules of user code (schemes, distributions) a sweep imports in every process.

A sweep config's ``[sweep] plugins = ["my_schemes.py", "mypackage.schemes"]`` names
modules that register schemes (:func:`kvstats.quant.register.register_scheme`) or
distributions (:func:`kvstats.data.register.register_distribution`) when imported: a
``.py`` entry or one with a path separator is a file (relative: to the config's folder,
or the working directory for a dict), any other a module name. :func:`load_plugins`
imports each once per process, before the config's names are checked, and each worker
again before its first task (fork inherits the import). The manifest records
:func:`plugin_records`: each plugin's file, its SHA-256 and the user modules it imports
(:mod:`kvstats.user_imports`; the cell ids hash them too). A file plugin's folder is
appended to ``sys.path``, so it can import helper modules beside it. A moved plugin of a
finished sweep is loaded by :func:`relocate_plugins` (:mod:`kvstats.plugin_relocation`).

A plugin that is missing, fails to import or exits (``sys.exit``, argparse) while imported
is a :class:`PluginError` (a ValueError) naming the config key, the file and the user
line; what it registered before is removed (also before a KeyboardInterrupt propagates).
A process runs the code it imported: a sweep whose plugin, a registered scheme's file or
a user module either imports changed since is refused (``_check_unchanged``), as its
cell ids would hash the edited file; so is a worker importing other files (spawn).

The runner (:mod:`kvstats.sweep.run`) sends its workers :func:`worker_payload` (the
plugins, and a script's own registrations pickled by reference), which
:func:`install_worker_payload` loads there, and records :func:`user_code` in the manifest.
:data:`USER_NAME` and :func:`similar_name` are the name rules of user names.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import pickle
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

# the pins: the user files each registration runs, as registered (quant/data register them)
from kvstats.user_imports import _PINS, _code_file, _pin, _pinned, _pins_now  # noqa: F401
from kvstats.user_imports import file_sha256 as _sha256
from kvstats.user_imports import user_imports

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig

__all__ = ["PluginError", "load_plugins", "resolve_plugin", "plugin_records", "current_plugin",
           "USER_NAME", "similar_name", "user_code", "worker_payload", "install_worker_payload",
           "WorkerPayload", "user_imports", "relocate_plugins", "relocated", "plugin_summary"]

_KEY = "config [sweep] plugins"
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# plugin (_key: a file's real path) -> its manifest record (plugin, file, sha256: the file as
# imported), for the plugins this process imported
_LOADED: dict[str, dict[str, Any]] = {}
_CURRENT: list[str] = []   # the plugin being imported (registrations remember it)
#: What a sweep's worker process needs to know the grid's user code (:func:`worker_payload`):
#: the plugins, the script's own registrations pickled by reference (None: none), and the
#: manifest's record of it (:func:`user_code`), which the worker's imports must match.
WorkerPayload = tuple[tuple[str, ...], bytes | None, dict[str, Any]]


#: The names a user scheme or distribution may have: a letter, then letters, digits, ``_ . + -``.
USER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")


def similar_name(name: str, names: Iterable[str]) -> str | None:
    """The first of ``names`` equal to ``name`` up to case and punctuation, else None.

    Report figures and their files are named by a lowercase slug of the scheme and the
    case (:func:`kvstats.report.notation._slug`), so a user name that differs from a name
    in use only so (``kqv`` and ``KQV``, ``my-coder`` and ``my_coder``) would write the
    other's files: registration refuses it.

    Examples
    --------
    >>> similar_name("kqv", ["KV", "KQV"]), similar_name("my-coder", ["my_coder"])
    ('KQV', 'my_coder')
    >>> similar_name("mine", ["KQV"]) is None
    True
    """
    key = _fold(name)
    return next((n for n in names if _fold(n) == key), None)


def _fold(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _misfit_call(fn: Any, n_args: int) -> str | None:
    """Why ``fn`` cannot take ``n_args`` positional arguments (its signature), else None
    (also when Python cannot tell): registration names it, not a sweep's arity error."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):   # a builtin or C callable without a signature
        return None
    try:
        signature.bind(*range(n_args))
    except TypeError:
        return f"{getattr(fn, '__name__', type(fn).__name__)}{signature}"
    return None


class PluginError(ValueError):
    """A sweep plugin is missing, malformed or fails to import (names the key and the file)."""


def current_plugin() -> str | None:
    """The plugin being imported right now (its resolved path or module), else None.

    Examples
    --------
    >>> current_plugin() is None
    True
    """
    return _CURRENT[-1] if _CURRENT else None


def _is_file(ref: str) -> bool:
    return ref.endswith(".py") or "/" in ref or os.sep in ref


def _key(ref: str) -> str:
    """One key per plugin: a file's real path (one file spelled two ways, through a
    symlink, is one plugin), a module's name."""
    return os.path.realpath(ref) if _is_file(ref) else ref


def resolve_plugin(ref: Any, base_dir: str | os.PathLike | None = None) -> str:
    """A plugin entry made absolute: a file path resolved against ``base_dir`` (default: the
    working directory), a module name unchanged.

    Examples
    --------
    >>> resolve_plugin("mypkg.schemes"), resolve_plugin("my.py", "/data/sweeps")
    ('mypkg.schemes', '/data/sweeps/my.py')
    """
    if not isinstance(ref, str) or not ref.strip():
        raise TypeError(f"{_KEY} entries must be non-empty strings (a .py file or a module name); "
                        f"received {ref!r}")
    if _is_file(ref):
        path = Path(ref).expanduser()
        if not path.is_absolute():
            path = Path(base_dir if base_dir is not None else os.getcwd()) / path
        return os.path.normpath(str(path))
    if not _MODULE_NAME.match(ref):
        raise PluginError(f"{_KEY} entry {ref!r} is neither a .py file nor a module name "
                          "(dotted identifiers, e.g. 'mypackage.schemes')")
    return ref


def _module_name(path: str) -> str:
    # a stable name per file: functions defined there pickle by reference to it, and a
    # worker that loads the same file gets the same module name
    stem = re.sub(r"\W", "_", Path(path).stem)
    return f"kvstats_plugin_{stem}_{hashlib.sha256(_key(path).encode()).hexdigest()[:10]}"


def _forget(ref: str) -> None:
    """Remove what a failed plugin registered before it failed."""
    from kvstats.data import register as data_register
    from kvstats.quant import register, registry

    for name, origin in list(registry._ORIGIN.items()):
        if origin == ref:
            register.unregister_scheme(name)
    for name, origin in list(data_register._DIST_ORIGIN.items()):
        if origin == ref:
            data_register.unregister_distribution(name)


def _user_frame(exc: BaseException) -> str:
    """`` (at FILE:LINE)``: the innermost frame of ``exc`` in a user file (plugin, helper; a
    SyntaxError's own text names its file and line)."""
    import traceback

    from kvstats.user_imports import is_user_file

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_user_file(f.filename)]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _imported_from(path: str) -> Any:
    """The module already imported from the file ``path`` (the script imported its plugin
    itself, e.g. to check its scheme), else None."""
    real = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if (isinstance(file, str) and os.path.basename(file) == os.path.basename(real)
                and os.path.realpath(file) == real):
            return module
    return None


def _adopt(ref: str, module_name: str) -> None:
    """Registrations the module made before it was named as a plugin (imported by the
    script, so recorded as the script's) are the plugin's: workers import it for them."""
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    for name, origin in registry._ORIGIN.items():
        if origin is None and getattr(registry._TABLE[name].build, "__module__", None) == module_name:
            registry._ORIGIN[name] = ref
    for name, origin in data_register._DIST_ORIGIN.items():
        if origin is None and getattr(data_register._USER[name].sampler, "__module__", None) == module_name:
            data_register._DIST_ORIGIN[name] = ref


def _import(ref: str) -> dict[str, Any]:
    if _is_file(ref):
        if not os.path.isfile(ref):
            raise PluginError(f"{_KEY}: file {ref!r} does not exist (a relative path is resolved "
                              "against the config file's folder; a finished sweep's plugin moved "
                              "since: `kvstats report DIR --plugins PATH`, in Python "
                              "kvstats.plugins.relocate_plugins(DIR, [PATH]) before load_result)")
        name = _module_name(ref)
        done = _imported_from(ref)
        # imported by the script under its own name: importing it again would register its
        # names a second time (an earlier import of ours that was forgotten runs again)
        if done is not None and done.__name__ != name:
            _adopt(ref, done.__name__)
            return _record(ref, "file", done.__name__, ref)
        # its own folder goes on the module search path, as a script's does, so that the
        # plugin can import helper modules beside it (``import my_helpers``); appended, not
        # prepended: a file there named like an installed module must not replace that
        # module for kvstats and every other import of the process
        folder = os.path.dirname(ref)
        if folder not in sys.path:
            sys.path.append(folder)
        spec = importlib.util.spec_from_file_location(name, ref)
        if spec is None or spec.loader is None:
            raise PluginError(f"{_KEY}: file {ref!r} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return _record(ref, "file", name, ref)
    module = importlib.import_module(ref)
    _adopt(ref, ref)   # a module the script imported before: its registrations are the plugin's
    return _record(ref, "module", ref, getattr(module, "__file__", None))


def _record(ref: str, kind: str, module: str, file: str | None) -> dict[str, Any]:
    """A plugin's record as it is imported: its file's and its user imports' SHA-256 (what
    this process runs: a sweep checks the files, and its workers' imports, against them);
    its registrations, pinned while it ran, get a helper's digest where they lack one."""
    imports = user_imports([module])
    for pinned in (_PINS[id(r)][1] for r in _registrations(current_plugin() or ref) if id(r) in _PINS):
        for dep in imports:
            pinned.setdefault(dep["file"], dep["sha256"])
    return {"plugin": ref, "kind": kind, "module": module, "file": file, "sha256": _sha256(file),
            "imports": imports}


def _registrations(ref: str) -> list[Any]:
    """The schemes and distributions the plugin ``ref`` registered."""
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    return ([registry._TABLE[n] for n, o in registry._ORIGIN.items() if o == ref]
            + [data_register._USER[n] for n, o in data_register._DIST_ORIGIN.items() if o == ref])


def load_plugins(plugins: Iterable[str], base_dir: str | os.PathLike | None = None) -> tuple[str, ...]:
    """Import each plugin once in this process; return the resolved entries.

    Parameters
    ----------
    plugins : iterable of str
        ``.py`` files (relative to ``base_dir``) or importable module names.
    base_dir : path, optional
        Folder relative files are resolved against (default: the working directory).

    Returns
    -------
    tuple of str
        The entries resolved (absolute paths, module names), as the config keeps them.

    Raises
    ------
    PluginError
        A missing file, a module not found, any exception or a SystemExit while importing
        (type, message and user line quoted); what the plugin registered is removed.

    Examples
    --------
    >>> load_plugins(["json"])        # any importable module: here one that registers nothing
    ('json',)
    >>> load_plugins(["no_such_plugin.py"], "/tmp")
    Traceback (most recent call last):
    ...
    kvstats.plugins.PluginError: config [sweep] plugins: file '/tmp/no_such_plugin.py' does not exist (a relative path is resolved against the config file's folder; a finished sweep's plugin moved since: `kvstats report DIR --plugins PATH`, in Python kvstats.plugins.relocate_plugins(DIR, [PATH]) before load_result)
    """
    if isinstance(plugins, str) or not isinstance(plugins, Iterable):
        raise TypeError(f"{_KEY} must be a list of strings; received {plugins!r}")
    resolved = tuple(resolve_plugin(p, base_dir) for p in plugins)
    named: dict[str, str] = {}
    for ref in resolved:   # one file named twice would be recorded twice
        if _key(ref) in named:
            raise PluginError(f"{_KEY} must name each plugin once; received {named[_key(ref)]!r} "
                              f"and {ref!r}, which are one {'file' if _is_file(ref) else 'module'}")
        named[_key(ref)] = ref
    for ref in resolved:
        if _key(ref) in _LOADED:
            continue
        _CURRENT.append(ref)
        what = f"{'file' if _is_file(ref) else 'module'} {ref!r}"
        try:
            _LOADED[_key(ref)] = _import(ref)
        except PluginError:
            _forget(ref)
            raise
        except SystemExit as exc:   # sys.exit or argparse at import: would end the sweep, rc 0
            _forget(ref)
            raise PluginError(f"{_KEY}: importing {what} exited (SystemExit {exc.code!r}) while being "
                              f"imported{_user_frame(exc)}; a plugin must not parse arguments or exit "
                              "at import: put that under `if __name__ == \"__main__\":`") from exc
        except Exception as exc:  # noqa: BLE001 - any failure of user code, quoted
            _forget(ref)
            raise PluginError(f"{_KEY}: importing {what} failed: {type(exc).__name__}: {exc}"
                              f"{_user_frame(exc)}") from exc
        except BaseException:   # Ctrl-C: no half-registered plugin left to clash with a rerun
            _forget(ref)
            raise
        finally:
            _CURRENT.pop()
    return resolved


def plugin_records(plugins: Iterable[str]) -> list[dict[str, Any]]:
    """The manifest's record of the plugins a sweep used (each loaded: :func:`load_plugins`).

    Examples
    --------
    >>> plugin_records(load_plugins(["json"]))[0]["kind"]
    'module'
    """
    records = []
    for ref in plugins:
        if _key(ref) not in _LOADED:
            continue
        record = {**_LOADED[_key(ref)], "plugin": ref}
        # the user modules the plugin imports (helpers beside it) as this process imported
        # them (_record): the cell ids hash them (user_code_digest); none: no key, as before
        imports = [dict(i) for i in record.pop("imports", None) or []]
        records.append({**record, "imports": imports} if imports else record)
    return records


def plugin_summary(plugins: Iterable[str]) -> list[str]:
    """One line per loaded plugin: the schemes and distributions it registered, or that it
    registered none, with the usual cause (``kvstats schemes --plugins`` and a config
    naming a scheme no plugin registered show it).

    A plugin registers when it is imported, so a ``register_scheme`` call inside a
    function (a script's ``main()``) or under ``if __name__ == "__main__":`` never runs
    there; a :class:`~kvstats.quant.registry.SchemeDef` the module defines at its top level
    but did not register is named.

    Examples
    --------
    >>> plugin_summary(load_plugins(["json"]))[0]
    "plugin 'json' registered no scheme or distribution: a plugin registers when it is imported, so call kvstats.register_scheme / register_distribution at its top level (a call inside a function such as main(), or under `if __name__ == '__main__':`, does not run when it is imported)"
    """
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    lines = []
    for ref in plugins:
        if _key(ref) not in _LOADED:
            continue
        schemes = sorted(n for n, o in registry._ORIGIN.items() if o and _key(o) == _key(ref))
        dists = sorted(n for n, o in data_register._DIST_ORIGIN.items() if o and _key(o) == _key(ref))
        if schemes or dists:
            parts = ([f"scheme(s) {schemes}"] if schemes else []) + ([f"distribution(s) {dists}"] if dists else [])
            lines.append(f"plugin {ref!r} registered {' and '.join(parts)}")
            continue
        module = sys.modules.get(_LOADED[_key(ref)].get("module") or "")
        unregistered = sorted(f"{value.name!r} ({attr})" for attr, value in vars(module or object()).items()
                              if isinstance(value, registry.SchemeDef)
                              and registry._TABLE.get(value.name) is not value)
        lines.append(f"plugin {ref!r} registered no scheme or distribution"
                     + (f"; it defines the scheme(s) {', '.join(unregistered)} without registering them"
                        if unregistered else "")
                     + ": a plugin registers when it is imported, so call kvstats.register_scheme / "
                       "register_distribution at its top level (a call inside a function such as "
                       "main(), or under `if __name__ == '__main__':`, does not run when it is imported)")
    return lines


# ------------------------------------------------------------ the code this process runs
def _rerun(old: Any, new: Any, fields: Iterable[str]) -> bool:
    """Whether ``new`` is ``old`` registered again by the same unchanged file run as another
    module (a plugin the script also imports by name): its functions (``fields``) have
    ``old``'s qualified names and file, another module. One module registering twice is refused."""
    pins = _pinned(old)
    if not pins or any(_sha256(f) != sha for f, sha in pins.items()):
        return False
    for field in fields:
        a, b = _unwrap(getattr(old, field)), _unwrap(getattr(new, field, None))
        if (_code_file(a) is None or _code_file(a) != _code_file(b) or a.__module__ == b.__module__
                or a.__qualname__ != getattr(b, "__qualname__", None)):
            return False
    return True


def _check_unchanged(config: SweepConfig) -> None:
    """Refuse a sweep whose user code changed on disk since this process imported it: the
    cell ids hash the files as they are now (:func:`kvstats.sweep.plan.user_code_digest`),
    and a later ``resume`` would reuse the old code's numbers under them. Checked: the
    plugins and their imports (as imported), the files of the grid's registered functions
    and the user modules they import (as registered)."""
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    records = [r for r in map(_LOADED.get, map(_key, config.plugins)) if r]
    files = {(r["file"], r["sha256"]) for r in records if r.get("file") and r.get("sha256")}
    files |= {(i["file"], i["sha256"]) for r in records for i in r.get("imports") or []}
    schemes = {registry.scheme_def(s.name) for s in config.schemes}
    defs = ([d for d in schemes if d.name not in registry.BUILTIN]
            + [data_register._USER[d.name] for d in config.distributions if d.name in data_register._USER])
    files |= {pair for d in defs for pair in _pins_now(d).items()}
    changed = [f"{file!r} (SHA-256 {sha[:12]}, now {(_sha256(file) or 'missing')[:12]})"
               for file, sha in sorted(files) if _sha256(file) != sha]
    if changed:
        raise PluginError(f"user code changed since this process imported it: {', '.join(changed)}; "
                          "this process still runs the code it imported, and the sweep would store "
                          "its numbers under the cell ids of the files as they are now: start a new "
                          "process (restart the kernel) to run the edited code, or undo the edit")


# ------------------------------------------------------------ user code in a sweep's processes
def user_code(config: SweepConfig) -> dict[str, Any]:
    """The user code a sweep uses: its plugins (file, SHA-256) and the registered schemes
    and distributions of its grid with the plugin that registered each (None: the script
    itself), and ``"script"``: the user files (module, file, SHA-256) the script's own
    registrations run, when there are any. Empty when the sweep uses only built-ins; the
    manifest's ``"user_code"``.

    Examples
    --------
    >>> from kvstats.sweep import load_config
    >>> user_code(load_config({"schemes": ["KQV"], "distributions": ["gaussian"]}))
    {}
    """
    from kvstats.data.register import user_distributions
    from kvstats.quant.register import user_schemes
    from kvstats.quant.registry import scheme_def

    schemes, dists = user_schemes(), user_distributions()
    used_s = {scheme_def(s.name).name for s in config.schemes} & set(schemes)
    used_d = {d.name for d in config.distributions} & set(dists)
    if not (config.plugins or used_s or used_d):
        return {}
    script = _script_files(config)
    return {"plugins": plugin_records(config.plugins),
            "schemes": {n: schemes[n] for n in sorted(used_s)},
            "distributions": {n: dists[n] for n in sorted(used_d)},
            **({"script": script} if script else {})}


def _script_files(config: SweepConfig) -> list[dict[str, str]]:
    """The user source files of the grid's script registrations (no plugin's): the files
    that define their functions and the user modules those import or, typed code, refer
    to (:func:`kvstats.user_imports.function_imports`), as the cell ids hash them; a
    plugin's are in its own record."""
    from kvstats.user_imports import function_imports, is_user_file

    sdefs, ddefs = _script_defs(config)
    functions = [f for d in sdefs for f in (d.build, d._bits)] + [d.sampler for d in ddefs]
    found = {d["file"]: d for d in function_imports(functions)}
    for fn in functions:
        module = sys.modules.get(getattr(_unwrap(fn), "__module__", None) or "")
        file = getattr(module, "__file__", None)
        if is_user_file(file):
            real = os.path.realpath(file)
            found.setdefault(real, {"module": module.__name__, "file": real, "sha256": _sha256(real) or ""})
    # each file as registered (pinned), which the sweep checked: what this process runs
    pins = {f: sha for d in [*sdefs, *ddefs] for f, sha in _pinned(d).items()}
    return [{**found[f], "sha256": pins.get(f, found[f]["sha256"])} for f in sorted(found)]


def _unwrap(fn: Any) -> Any:
    import functools

    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn if hasattr(fn, "__code__") or isinstance(fn, type) else type(fn)


def _script_defs(config: SweepConfig) -> tuple[list[Any], list[Any]]:
    """The user schemes and distributions of the grid that no plugin of the config registers
    (a script registered them): what a spawn worker cannot get from the plugins."""
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    keys = {_key(p) for p in config.plugins}

    def scripts(origin: str | None) -> bool:
        return origin is None or _key(origin) not in keys

    schemes = {registry.scheme_def(s.name) for s in config.schemes}
    sdefs = [d for d in schemes if d.name not in registry.BUILTIN and scripts(registry._ORIGIN.get(d.name))]
    ddefs = [data_register._USER[d.name] for d in config.distributions
             if d.name in data_register._USER and scripts(data_register._DIST_ORIGIN.get(d.name))]
    return sorted(sdefs, key=lambda d: d.name), list({d.name: d for d in ddefs}.values())


def worker_payload(config: SweepConfig) -> WorkerPayload:
    """What a worker needs to know the grid's user code: the plugins, the script's own
    registrations pickled by reference, and :func:`user_code` (the files as this process
    imported them, which :func:`install_worker_payload` checks the worker's against).

    Raises TypeError/AttributeError/``pickle.PicklingError`` when a function cannot be
    pickled by reference (a lambda, a local function): the runner then keeps the work in
    processes that have it.

    Examples
    --------
    >>> from kvstats.sweep import load_config
    >>> worker_payload(load_config({"schemes": ["KQV"], "distributions": ["gaussian"]}))
    ((), None, {})
    """
    sdefs, ddefs = _script_defs(config)
    blob = pickle.dumps((sdefs, ddefs)) if (sdefs or ddefs) else None
    return config.plugins, blob, user_code(config)


def install_worker_payload(payload: WorkerPayload) -> None:
    """In a worker: import the plugins, register the script's schemes and distributions
    that this process does not know yet (a fork worker inherits them), and check that the
    user files it runs are those the sweep's process recorded.

    A spawn or forkserver worker imports the plugins (and the script's functions' modules)
    from disk: a file edited after the sweep's process checked it would compute new code's
    numbers under the old code's ids. It raises a :class:`PluginError` naming the file and
    both SHA-256s (the sweep fails); a fork worker runs the code it inherited, the sweep's.

    Examples
    --------
    >>> install_worker_payload((("json",), None, {}))   # imports the plugins once per process
    """
    from kvstats.data import register as data_register
    from kvstats.quant import register, registry

    if not isinstance(payload, tuple) or len(payload) != 3:
        raise ValueError("payload must be worker_payload(config), a tuple (plugins, registrations, "
                         f"user_code); received {payload!r:.200}")
    plugins, blob, recorded = payload
    load_plugins(plugins)
    sdefs, ddefs = pickle.loads(blob) if blob is not None else ([], [])
    for sdef in sdefs:
        if sdef.name not in registry.REGISTRY:
            register.register_scheme(sdef)
    for ddef in ddefs:
        if ddef.name not in data_register._USER:
            data_register.register_distribution(ddef.name, ddef.sampler, ddef.defaults, summary=ddef.summary)
    defs = ([registry._TABLE[d.name] for d in sdefs if d.name in registry._TABLE]
            + [data_register._USER[d.name] for d in ddefs if d.name in data_register._USER])
    _check_as_recorded(plugins, defs, recorded or {})


def _check_as_recorded(plugins: Iterable[str], defs: list[Any], recorded: dict[str, Any]) -> None:
    """Refuse, in a worker, user files imported with other contents than the sweep's process
    ``recorded`` (:func:`user_code`): the plugins' records, the registrations' pins (by
    file, else module: an installed one may lie elsewhere), else the file now."""
    here: dict[str, str] = {}
    for record in (r for r in map(_LOADED.get, map(_key, plugins)) if r):
        for r in [record, *(record.get("imports") or [])]:
            here.update({k: r.get("sha256") for k in (r.get("file"), r.get("module")) if k and k not in here})
    here.update({f: sha for d in defs for f, sha in _pinned(d).items() if f not in here})
    there = [r for p in recorded.get("plugins") or [] for r in [p, *(p.get("imports") or [])]]
    # the script's files: only where its registrations came with the payload (else inherited)
    for r in [*there, *((recorded.get("script") or []) if defs else [])]:
        file, sha, module = r.get("file"), r.get("sha256"), r.get("module")
        mine = (here.get(file) or here.get(module) or _sha256(file)
                or _sha256(getattr(sys.modules.get(module or ""), "__file__", None)) or "missing")
        if file and sha and mine != sha:
            raise PluginError(
                f"this worker process (pid {os.getpid()}) of the sweep imported user code other than "
                f"the sweep's process checked: {file!r} has SHA-256 {sha} there and {mine} here (edited "
                "after the sweep started); its numbers would be stored under the cell ids of the "
                "code checked. Undo the edit, or run the sweep again to compute with the edited code")


def __getattr__(name: str) -> Any:
    # relocate_plugins and relocated live in kvstats.plugin_relocation, which imports this
    # module: given here on first use, so that `from kvstats.plugins import relocate_plugins`
    # works whichever of the two is imported first
    if name in ("relocate_plugins", "relocated"):
        from kvstats import plugin_relocation

        return getattr(plugin_relocation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
