"""A finished sweep's plugins, found again after a move: :func:`relocate_plugins`.

A sweep's config keeps each plugin file at the absolute path it had; ``kvstats report
--plugins PATH`` (and ``hypothesis_report(dir, ..., plugins=[PATH])``, and
:func:`kvstats.results.load_result`, which calls :func:`relocate_plugins` first) load the
copy named in its place, or check that the recorded plugin this process will import is
the version the sweep ran. :func:`relocated` says which copy stood in (the report's
header names it). The loading itself is :mod:`kvstats.plugins`' (both are also
importable from there).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kvstats.plugins import _CURRENT, _LOADED, PluginError, _forget, _import, _is_file, _key, _sha256

__all__ = ["relocate_plugins", "relocated"]

# recorded plugin entry -> {"file", "sha256"} of the copy this process loaded in its place,
# and "imports": {recorded helper file: its SHA-256 now} for its helpers edited since
_RELOCATED: dict[str, dict[str, Any]] = {}


def relocated(plugin: str) -> dict[str, Any] | None:
    """The copy loaded in place of the recorded plugin ``plugin`` (:func:`relocate_plugins`):
    ``{"file", "sha256"}``, else None. A plugin whose helper modules (the user modules it
    imports, recorded beside it) were edited since the sweep also has ``"imports"``:
    ``{recorded helper file: its SHA-256 now}``, for those helpers only.

    Examples
    --------
    >>> relocated("/nowhere/my_schemes.py") is None
    True
    """
    found = _RELOCATED.get(plugin)
    if found is None:
        return None
    return {k: dict(v) if isinstance(v, dict) else v for k, v in found.items()}


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
    FileNotFoundError, ValueError
        ``paths`` are given but ``source`` holds no sweep (:func:`kvstats.results.load_result`'s
        error: a missing folder is named as such, not as a plugin matching nothing).

    Examples
    --------
    >>> relocate_plugins({"config": {}})      # a sweep without plugins: nothing to do
    []
    """
    from kvstats.results import _user_stacklevel   # the warning points at the user's call

    given = [os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(p)))) for p in paths]
    manifest, where = _manifest_of(source)
    if given and not isinstance(manifest.get("config"), Mapping) and not isinstance(source, Mapping):
        from kvstats.results import load_result
        load_result(source)   # no sweep there (a typo in DIR?): its error, not --plugins'
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    refs = [r for r in (config.get("plugins") or []) if isinstance(r, str)]
    code = manifest.get("user_code") if isinstance(manifest.get("user_code"), Mapping) else {}
    records = {r.get("plugin"): r for r in (code.get("plugins") or []) if isinstance(r, Mapping)}
    files = [ref for ref in refs if _is_file(ref)]
    done = []
    for path in given:
        if not os.path.isfile(path):
            raise PluginError(f"--plugins: file {path!r} does not exist")
        sha = _sha256(path) or ""
        ref = _match(path, sha, files, records, [d["plugin"] for d in done], where)
        want = (records.get(ref) or {}).get("sha256")
        if _key(ref) in _LOADED:
            if _key(_LOADED[_key(ref)].get("file")) != _key(path):
                raise PluginError(f"--plugins: plugin {ref!r} of {where} is already imported in this "
                                  f"process from {_LOADED[_key(ref)].get('file')!r}; start a new process to "
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
        if _key(ref) not in _LOADED and not os.path.isfile(ref):
            want = (records.get(ref) or {}).get("sha256")
            raise PluginError(f"{where} used the plugin file {ref!r}"
                              + (f" (SHA-256 {want[:12]})" if want else "")
                              + ", which is not there any more: name its copy with `kvstats report "
                              "DIR --plugins PATH` (Python: hypothesis_report(dir, ..., plugins=[PATH]), "
                              "or kvstats.plugins.relocate_plugins(dir, [PATH]) before load_result)")
    given_for = {d["plugin"] for d in done}
    for ref in refs:
        if ref not in given_for and ref not in _RELOCATED:
            _check_version(ref, records.get(ref) or {}, where)
    return done


def _check_version(ref: str, record: Mapping[str, Any], where: str) -> None:
    """The recorded plugin ``ref`` as this process will import it (from its recorded path, a
    module by name): a module that cannot be found is a PluginError saying how a module
    plugin is found; another version than the recorded one (``record``'s SHA-256), of its
    file or of a helper module it imports (``record``'s ``imports``), a warning, and the
    report's header says so (:func:`relocated`), as for a copy given with ``--plugins``."""
    from kvstats.results import _user_stacklevel

    want = record.get("sha256")
    helpers = _edited_imports(ref, record)
    if _key(ref) in _LOADED:   # imported already: the version this process runs is the one it read
        file, sha = _LOADED[_key(ref)].get("file"), _LOADED[_key(ref)].get("sha256")
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
    stored = ("the report shows the stored numbers, which that version computed, with the names "
              "and facts of this one")
    for helper, now in helpers.items():
        old = next(str(i.get("sha256")) for i in record["imports"] if i.get("file") == helper)
        warnings.warn(f"helper module {helper!r} of plugin {ref!r} is not the version {where} ran: "
                      f"it has SHA-256 {now[:12]}, the sweep ran SHA-256 {old[:12]}; {stored}",
                      UserWarning, stacklevel=_user_stacklevel())
    edited = bool(want) and sha is not None and sha != want
    if edited:
        warnings.warn(f"plugin {ref!r} is not the version {where} ran: {file!r} has SHA-256 {sha[:12]}, "
                      f"the sweep ran SHA-256 {want[:12]}; {stored}",
                      UserWarning, stacklevel=_user_stacklevel())
    if edited or helpers:
        _RELOCATED[ref] = {"file": str(file), "sha256": sha if edited else want,
                           **({"imports": helpers} if helpers else {})}


def _edited_imports(ref: str, record: Mapping[str, Any]) -> dict[str, str]:
    """The helper modules recorded for the plugin ``ref`` (``record``'s ``imports``) whose
    SHA-256 differs now: as this process imported them, else as their files are now (a
    helper that is gone is the import's error to report): ``{recorded file: SHA-256 now}``."""
    loaded = {i.get("file"): i.get("sha256") for i in (_LOADED.get(_key(ref)) or {}).get("imports") or []}
    edited = {}
    for entry in record.get("imports") or []:
        file, want = (entry.get("file"), entry.get("sha256")) if isinstance(entry, Mapping) else (None, None)
        if not isinstance(file, str) or not want:
            continue
        now = loaded.get(file) if _key(ref) in _LOADED else _sha256(file) if os.path.isfile(file) else None
        if now and now != want:
            edited[file] = now
    return edited


def _match(path: str, sha: str, files: list[str], records: Mapping[str, Any], taken: list[str],
           where: str) -> str:
    """The recorded plugin file ``path`` stands for: same SHA-256, else same file name; of
    several, the one whose path ends as ``path`` does in the most folders (``a/schemes.py``
    and ``b/schemes.py`` moved together, both edited)."""
    free = [ref for ref in files if ref not in taken]
    same = [ref for ref in free if (records.get(ref) or {}).get("sha256") == sha]
    if not same:
        same = [ref for ref in free if os.path.basename(ref) == os.path.basename(path)]
    shared = {ref: _common_tail(ref, path) for ref in same}
    best = [ref for ref in same if shared[ref] == max(shared.values(), default=0)]
    if len(best) == 1:
        return best[0]
    if not free:
        raise PluginError(f"--plugins: {where} has no plugin file (left) for {path!r} to replace "
                          f"(its plugin files: {files})")
    raise PluginError(f"--plugins: {path!r} matches {'none' if not same else 'several'} of the plugin "
                      f"files {where} used ({free}) by SHA-256 or by file name and folders; give the "
                      "copy the recorded file's name (and, for files of one name, its folder's)")


def _common_tail(a: str, b: str) -> int:
    """How many trailing path components ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(reversed(Path(a).parts), reversed(Path(b).parts)):
        if x != y:
            break
        n += 1
    return n


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
    _LOADED[_key(ref)] = {**record, "plugin": ref}
    _RELOCATED[ref] = {"file": path, "sha256": sha}
