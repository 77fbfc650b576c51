"""Fixtures shared by every test directory."""

from __future__ import annotations

import importlib.util
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
