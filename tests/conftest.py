"""Fixtures shared by every test directory."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _load_experiment(name: str) -> ModuleType:
    # experiments/ is not a package: a script is loaded from its file, fresh on each call
    path = EXPERIMENTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no experiment script {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_experiment() -> Callable[[str], ModuleType]:
    """``load_experiment("real_report")``: the module of ``experiments/real_report.py``."""
    return _load_experiment


@pytest.fixture
def user_registries():
    """Leave the registries of user schemes and distributions, and the plugins imported,
    as the test found them (no plugin module left in ``sys.modules``)."""
    import sys

    from kvstats import plugins
    from kvstats.data import register as data_register
    from kvstats.quant import registry

    tables = (registry._TABLE, registry._ORIGIN, data_register._USER, data_register._DIST_ORIGIN, plugins._LOADED)
    saved = [dict(t) for t in tables]
    modules = set(sys.modules)
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)
    for name in set(sys.modules) - modules:
        if name.startswith("kvstats_plugin_") or name == "my_plugin_mod":
            del sys.modules[name]


@pytest.fixture
def import_folder(tmp_path, monkeypatch) -> Callable[..., Path]:
    """``import_folder(prefix, on_path=False)``: ``tmp_path``, a folder for the test's
    importable files (plugins, their helpers). ``sys.path`` is restored after the test, and
    the modules imported during it whose names start with ``prefix`` are removed from
    ``sys.modules`` (one of that prefix already imported is set aside for the test), so a
    later test imports its own files afresh. ``on_path=True`` puts the folder first on
    ``sys.path`` at once (import caches invalidated: the files are new)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    prefixes: list[str] = []

    def use(prefix: str, on_path: bool = False) -> Path:
        prefixes.append(prefix)
        for name in [m for m in sys.modules if m.startswith(prefix)]:
            monkeypatch.delitem(sys.modules, name)
        if on_path:
            sys.path.insert(0, str(tmp_path))
            importlib.invalidate_caches()
        return tmp_path

    yield use
    for name in set(sys.modules) - before:
        if prefixes and name.startswith(tuple(prefixes)):
            del sys.modules[name]
