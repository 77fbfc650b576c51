"""Plugins: modules of user code (schemes, distributions) a sweep imports in every process.

A sweep config's ``[sweep] plugins = ["my_schemes.py", "mypackage.schemes"]`` names
modules that register schemes (:func:`kvstats.quant.register.register_scheme`) or
distributions (:func:`kvstats.data.register.register_distribution`) when imported. An
entry ending in ``.py`` or holding a path separator is a file (a relative path is
resolved against the config file's folder, or the working directory for a dict); any
other entry is an importable module name. :func:`load_plugins` imports each once per
process (a second call is a no-op), before the config's schemes and distributions are
checked; the sweep's workers call it again before their first task, whatever the start
method (fork inherits the import; spawn and forkserver import afresh). The manifest
records :func:`plugin_records`: each plugin with its file and the file's SHA-256, and the
user modules it imports (:func:`kvstats.user_imports.user_imports`, which the cell ids hash too), so a reader
knows the results came from user code, and which. A file plugin's folder is appended to
``sys.path``, so it can import helper modules beside it.

A finished sweep's plugin that moved is loaded from where it is now by
:func:`relocate_plugins` (``kvstats report --plugins PATH``), in place of the path the
manifest recorded.

A plugin that is missing or fails to import is a :class:`PluginError` (a ValueError)
naming the config key and the file; whatever it registered before failing is removed.

The runner (:mod:`kvstats.sweep.run`) sends its workers :func:`worker_payload` (the
plugins, and the schemes and distributions a script registered itself, pickled by
reference), which :func:`install_worker_payload` loads there, and records :func:`user_code` in the
manifest. :data:`USER_NAME` and :func:`similar_name` are the name rules of user schemes
and distributions.

Over 450 lines: every step of user code's life in a sweep (loading, finding it again
after a move, reaching the workers) shares the one record per plugin (``_LOADED``) and the
import machinery here; what a plugin imports is :mod:`kvstats.user_imports`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import pickle
import re
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvstats.user_imports import file_sha256 as _sha256
from kvstats.user_imports import user_imports

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig

__all__ = ["PluginError", "load_plugins", "resolve_plugin", "plugin_records", "current_plugin",
           "USER_NAME", "similar_name", "user_code", "worker_payload", "install_worker_payload",
           "WorkerPayload", "user_imports", "relocate_plugins", "relocated", "plugin_summary"]

_KEY = "config [sweep] plugins"
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# resolved plugin -> its manifest record (file, sha256), for the plugins this process imported
_LOADED: dict[str, dict[str, Any]] = {}
_CURRENT: list[str] = []   # the plugin being imported (registrations remember it)
#: What a sweep's worker process needs to know the grid's user code (:func:`worker_payload`):
#: the plugins, and the script's own registrations pickled by reference (None: none).
WorkerPayload = tuple[tuple[str, ...], bytes | None]


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
    return f"kvstats_plugin_{stem}_{hashlib.sha256(path.encode()).hexdigest()[:10]}"


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


def _imported_from(path: str) -> Any:
    """The module already imported from the file ``path`` (the script imported its plugin
    itself, e.g. to check its scheme), else None."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.normpath(os.path.abspath(file)) == path:
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
                              "since: `kvstats report --plugins PATH`, in Python "
                              "kvstats.plugins.relocate_plugins(DIR, [PATH]) before load_result)")
        name = _module_name(ref)
        done = _imported_from(ref)
        # imported by the script under its own name: importing it again would register its
        # names a second time (an earlier import of ours that was forgotten runs again)
        if done is not None and done.__name__ != name:
            _adopt(ref, done.__name__)
            return {"plugin": ref, "kind": "file", "module": done.__name__, "file": ref,
                    "sha256": _sha256(ref)}
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
        return {"plugin": ref, "kind": "file", "module": name, "file": ref, "sha256": _sha256(ref)}
    module = importlib.import_module(ref)
    _adopt(ref, ref)   # a module the script imported before: its registrations are the plugin's
    path = getattr(module, "__file__", None)
    return {"plugin": ref, "kind": "module", "module": ref, "file": path, "sha256": _sha256(path)}


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
        A missing file, a module that is not found, or any exception while importing
        (its type and message quoted); what the plugin registered before is removed.

    Examples
    --------
    >>> load_plugins(["json"])        # any importable module: here one that registers nothing
    ('json',)
    >>> load_plugins(["no_such_plugin.py"], "/tmp")
    Traceback (most recent call last):
    ...
    kvstats.plugins.PluginError: config [sweep] plugins: file '/tmp/no_such_plugin.py' does not exist (a relative path is resolved against the config file's folder; a finished sweep's plugin moved since: `kvstats report --plugins PATH`, in Python kvstats.plugins.relocate_plugins(DIR, [PATH]) before load_result)
    """
    if isinstance(plugins, str) or not isinstance(plugins, Iterable):
        raise TypeError(f"{_KEY} must be a list of strings; received {plugins!r}")
    resolved = tuple(resolve_plugin(p, base_dir) for p in plugins)
    for ref in resolved:
        if ref in _LOADED:
            continue
        _CURRENT.append(ref)
        try:
            _LOADED[ref] = _import(ref)
        except PluginError:
            _forget(ref)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of user code, quoted
            _forget(ref)
            what = "module" if not _is_file(ref) else "file"
            raise PluginError(f"{_KEY}: importing {what} {ref!r} failed: {type(exc).__name__}: "
                              f"{exc}") from exc
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
        if ref not in _LOADED:
            continue
        record = dict(_LOADED[ref])
        # the user modules the plugin imports (helpers beside it): their files and hashes,
        # as the cell ids hash them (kvstats.sweep.plan.user_code_digest)
        imports = user_imports([record["module"]])
        if imports:
            record["imports"] = imports
        records.append(record)
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
        if ref not in _LOADED:
            continue
        schemes = sorted(n for n, o in registry._ORIGIN.items() if o == ref)
        dists = sorted(n for n, o in data_register._DIST_ORIGIN.items() if o == ref)
        if schemes or dists:
            parts = ([f"scheme(s) {schemes}"] if schemes else []) + ([f"distribution(s) {dists}"] if dists else [])
            lines.append(f"plugin {ref!r} registered {' and '.join(parts)}")
            continue
        module = sys.modules.get(_LOADED[ref].get("module") or "")
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


# ------------------------------------------------------------ a finished sweep's plugins, moved
# recorded plugin entry -> {"file", "sha256"} of the copy this process loaded in its place
_RELOCATED: dict[str, dict[str, str]] = {}


def relocated(plugin: str) -> dict[str, str] | None:
    """The copy loaded in place of the recorded plugin ``plugin`` (:func:`relocate_plugins`):
    ``{"file", "sha256"}``, else None.

    Examples
    --------
    >>> relocated("/nowhere/my_schemes.py") is None
    True
    """
    found = _RELOCATED.get(plugin)
    return dict(found) if found is not None else None


def _manifest_of(source: str | os.PathLike | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    if isinstance(source, Mapping):
        return source, "the sweep"
    path = Path(source) / "manifest.json"

    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None   # load_result says what is wrong with it
    return (manifest if isinstance(manifest, dict) else {}), f"the sweep in {str(source)!r}"


def relocate_plugins(source: str | os.PathLike | Mapping[str, Any],
                     paths: Iterable[str | os.PathLike] = ()) -> list[dict[str, str]]:
    """Load a finished sweep's plugin files from where they are now, before its results are read.

    A sweep's config keeps each plugin file at the absolute path it had
    (:func:`kvstats.results.load_result` imports it from there to know the sweep's
    schemes and distributions). After a move, a copy to another machine or a rename, name
    the files here: each is matched to the recorded plugin with the same SHA-256, else
    with the same file name, and imported in its place (its registrations count as that
    plugin's, so the config and its fingerprint stay the sweep's). A copy whose SHA-256
    differs from the recorded one is loaded with a ``UserWarning`` naming both files and
    hashes: the report's numbers are the stored results, which the recorded code
    computed; the copy only supplies the names and the registry's facts (summary, fixed
    budget, closed forms), which the edit may have changed; the report's header says so.
    A recorded plugin no file replaces is checked the same way where this process will
    import it: a file edited in place since the sweep, or a module plugin (found by name
    on the module search path wherever it lies: after a move, put its new folder on
    ``PYTHONPATH``) of another version, is the same warning; a module that cannot be
    found is a :class:`PluginError` saying so. ``kvstats report [--plugins PATH]`` and
    ``hypothesis_report(dir, ..., plugins=[PATH])`` call it.

    Parameters
    ----------
    source : path or mapping
        The sweep folder (its ``manifest.json`` is read) or its manifest.
    paths : iterable of path
        The plugin files to use (``.py``), in any order.

    Returns
    -------
    list of dict
        Per file given: ``{"plugin", "recorded_file", "recorded_sha256", "file", "sha256"}``.

    Raises
    ------
    PluginError
        A file given is missing, matches no recorded plugin (or several), or fails to
        import; or a recorded plugin file is missing and no file given replaces it (the
        message names the recorded path and hash and the option that fixes it); or a
        recorded module plugin cannot be found.

    Examples
    --------
    >>> relocate_plugins({"config": {}})      # a sweep without plugins: nothing to do
    []
    """
    from kvstats.results import _user_stacklevel   # the warning points at the user's call

    manifest, where = _manifest_of(source)
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    refs = [r for r in (config.get("plugins") or []) if isinstance(r, str)]
    code = manifest.get("user_code") if isinstance(manifest.get("user_code"), Mapping) else {}
    records = {r.get("plugin"): r for r in (code.get("plugins") or []) if isinstance(r, Mapping)}
    files = [ref for ref in refs if _is_file(ref)]
    given = [os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(p)))) for p in paths]
    done = []
    for path in given:
        if not os.path.isfile(path):
            raise PluginError(f"--plugins: file {path!r} does not exist")
        sha = _sha256(path) or ""
        ref = _match(path, sha, files, records, [d["plugin"] for d in done], where)
        want = (records.get(ref) or {}).get("sha256")
        if ref in _LOADED:
            if _LOADED[ref].get("file") != path:
                raise PluginError(f"--plugins: plugin {ref!r} of {where} is already imported in this "
                                  f"process from {_LOADED[ref].get('file')!r}; start a new process to "
                                  f"use {path!r}")
        else:
            if want and sha != want:
                warnings.warn(f"plugin {path!r} (SHA-256 {sha[:12]}) is not the file {where} ran: "
                              f"{ref!r} (SHA-256 {want[:12]}); the report shows the stored numbers, "
                              "which that file computed, with the names and facts of this one",
                              UserWarning, stacklevel=_user_stacklevel())
            _load_copy(ref, path, sha)
        done.append({"plugin": ref, "recorded_file": ref, "recorded_sha256": want or "",
                     "file": path, "sha256": sha})
    for ref in files:
        if ref not in _LOADED and not os.path.isfile(ref):
            want = (records.get(ref) or {}).get("sha256")
            raise PluginError(f"{where} used the plugin file {ref!r}"
                              + (f" (SHA-256 {want[:12]})" if want else "")
                              + ", which is not there any more: name its copy with `kvstats report "
                              "--plugins PATH` (Python: hypothesis_report(dir, ..., plugins=[PATH]), "
                              "or kvstats.plugins.relocate_plugins(dir, [PATH]) before load_result)")
    given_for = {d["plugin"] for d in done}
    for ref in refs:
        if ref not in given_for and ref not in _RELOCATED:
            _check_version(ref, (records.get(ref) or {}).get("sha256"), where)
    return done


def _check_version(ref: str, want: str | None, where: str) -> None:
    """The recorded plugin ``ref`` as this process will import it (from its recorded path, a
    module by name): a module that cannot be found is a PluginError saying how a module
    plugin is found; another version than the recorded one a warning, and the report's
    header says so (:func:`relocated`), as for a copy given with ``--plugins``."""
    from kvstats.results import _user_stacklevel

    if ref in _LOADED:   # imported already: the version this process runs is the one it read
        file, sha = _LOADED[ref].get("file"), _LOADED[ref].get("sha256")
    elif _is_file(ref):
        file = ref
        sha = _sha256(file)
    else:
        try:
            spec = importlib.util.find_spec(ref)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise PluginError(f"{where} used the plugin module {ref!r}, which this process cannot import: "
                              "a module plugin is found by name on the module search path, wherever it "
                              "lies; put the folder that holds it on PYTHONPATH (or install it), or name "
                              "it as a .py file in the config")
        file = spec.origin if spec.has_location else None
        sha = _sha256(file)
    if not want or sha is None or sha == want:
        return
    warnings.warn(f"plugin {ref!r} is not the version {where} ran: {file!r} has SHA-256 {sha[:12]}, the "
                  f"sweep ran SHA-256 {want[:12]}; the report shows the stored numbers, which that "
                  "version computed, with the names and facts of this one",
                  UserWarning, stacklevel=_user_stacklevel())
    _RELOCATED[ref] = {"file": str(file), "sha256": sha}


def _match(path: str, sha: str, files: list[str], records: Mapping[str, Any], taken: list[str],
           where: str) -> str:
    """The recorded plugin file ``path`` stands for: same SHA-256, else same file name."""
    free = [ref for ref in files if ref not in taken]
    same = [ref for ref in free if (records.get(ref) or {}).get("sha256") == sha]
    if not same:
        same = [ref for ref in free if os.path.basename(ref) == os.path.basename(path)]
    if len(same) == 1:
        return same[0]
    if not free:
        raise PluginError(f"--plugins: {where} has no plugin file (left) for {path!r} to replace "
                          f"(its plugin files: {files})")
    raise PluginError(f"--plugins: {path!r} matches {'none' if not same else 'several'} of the plugin "
                      f"files {where} used ({free}) by SHA-256 or by file name; give the copy the "
                      "recorded file's name")


def _load_copy(ref: str, path: str, sha: str) -> None:
    """Import the file ``path`` in place of the recorded plugin ``ref``."""
    _CURRENT.append(ref)   # its registrations are the recorded plugin's
    try:
        record = _import(path)
    except Exception as exc:  # noqa: BLE001 - any failure of user code, quoted
        _forget(ref)
        if isinstance(exc, PluginError):
            raise
        raise PluginError(f"--plugins: importing file {path!r} (for {ref!r}) failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    finally:
        _CURRENT.pop()
    _LOADED[ref] = {**record, "plugin": ref}
    _RELOCATED[ref] = {"file": path, "sha256": sha}


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
    return [found[f] for f in sorted(found)]


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

    schemes = {registry.scheme_def(s.name) for s in config.schemes}
    sdefs = [d for d in schemes if d.name not in registry.BUILTIN
             and registry._ORIGIN.get(d.name) not in config.plugins]
    ddefs = [data_register._USER[d.name] for d in config.distributions
             if d.name in data_register._USER and data_register._DIST_ORIGIN.get(d.name) not in config.plugins]
    return sorted(sdefs, key=lambda d: d.name), list({d.name: d for d in ddefs}.values())


def worker_payload(config: SweepConfig) -> WorkerPayload:
    """What a worker needs to know the grid's user code: the plugins, and the script's own
    registrations pickled by reference.

    Raises TypeError/AttributeError/``pickle.PicklingError`` when a function cannot be
    pickled by reference (a lambda, a local function): the runner then keeps the work in
    processes that have it.

    Examples
    --------
    >>> from kvstats.sweep import load_config
    >>> worker_payload(load_config({"schemes": ["KQV"], "distributions": ["gaussian"]}))
    ((), None)
    """
    sdefs, ddefs = _script_defs(config)
    blob = pickle.dumps((sdefs, ddefs)) if (sdefs or ddefs) else None
    return config.plugins, blob


def install_worker_payload(payload: WorkerPayload) -> None:
    """In a worker: import the plugins, register the script's schemes and distributions
    that this process does not know yet (a fork worker inherits them).

    Examples
    --------
    >>> install_worker_payload((("json",), None))   # imports the plugins once per process
    """
    from kvstats.data import register as data_register
    from kvstats.quant import register, registry

    plugins, blob = payload
    load_plugins(plugins)
    if blob is None:
        return
    sdefs, ddefs = pickle.loads(blob)
    for sdef in sdefs:
        if sdef.name not in registry.REGISTRY:
            register.register_scheme(sdef)
    for ddef in ddefs:
        if ddef.name not in data_register._USER:
            data_register.register_distribution(ddef.name, ddef.sampler, ddef.defaults, summary=ddef.summary)
