"""A sweep's guard against user code edited while it runs: the helper modules too, and workers.

1. ``kvstats.plugins._check_unchanged`` refused a sweep whose plugin file, or the file of a
   registered scheme's or distribution's functions, changed since the process imported it,
   but not one whose helper module changed (``my_plugin.py`` importing ``my_helpers.py``
   beside it), though the cell ids hash the helpers too
   (``kvstats.sweep.plan.user_code_digest``): the process ran the old helper and stored its
   numbers under the new helper's ids. It now checks the set of files the ids hash, with
   their digests as imported (the plugin's record, the registration's pins).
2. A spawn or forkserver worker imports the plugin (or the module of a script's scheme)
   afresh from disk: a file edited after the sweep's process checked it was computed with
   the new code under the ids of the old. A worker now refuses, with an error naming the
   file and both SHA-256s that fails the sweep, comparing with the manifest's record
   (``user_code``) that the payload carries.

Each edit below is made at a fixed point of the run (after the import, or between the
parent's check and the workers' first task, by wrapping the runner's ``worker_payload``),
so every test is deterministic.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import multiprocessing
import re
import sys

import pytest

import kvstats
from kvstats.plugins import PluginError
from kvstats.sweep import run as sweep_run
from kvstats.user_imports import file_sha256

pytestmark = pytest.mark.usefixtures("user_registries")

_HELPER = "SHIFT = 0.0\n"

# {name}: the names' prefix; {helper}: the helper module; the scheme's build imports a second
# helper lazily ({helper}_lazy), found from the import statement before it ever runs
_PLUGIN = '''
import kvstats
from kvstats.quant.uniform import UniformTokenCoder

import {helper}


def build(bits, dim, params, key_rng, value_rng, draws):
    from {helper}_lazy import GROUP
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def bits_of(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


def shifted(n_trials, n_keys, dim, rng, params):
    return {helper}.SHIFT + rng.standard_normal((n_trials, n_keys, dim))


kvstats.register_scheme(kvstats.define_scheme("{name}_mm", build, bits_of, summary="min-max"))
kvstats.register_distribution("{name}_shifted", shifted)
'''

_GRID = {"budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 6, "chunk_size": 3, "comparisons": []}


@pytest.fixture
def folder(import_folder):
    """A folder for the files; sys.path and the modules imported from it
    restored after (tests/conftest.py's ``import_folder``)."""
    return import_folder("p21")


def _files(folder, stem: str, name: str) -> dict[str, object]:
    """The plugin (or script module) ``stem``.py, its helper ``stem``_help.py and the lazy one."""
    helper = f"{stem}_help"
    (folder / f"{helper}.py").write_text(_HELPER)
    (folder / f"{helper}_lazy.py").write_text("GROUP = 1\n")
    (folder / f"{stem}.py").write_text(_PLUGIN.format(name=name, helper=helper))
    return {"module": folder / f"{stem}.py", "helper": folder / f"{helper}.py",
            "lazy": folder / f"{helper}_lazy.py"}


def _edit(path) -> None:
    path.write_text(path.read_text() + "# edited\n")


def _edit_after_payload(monkeypatch, path, seen: list, text: str | None = None) -> None:
    """Edit ``path`` (append a comment, or write ``text``) once the sweep's process has
    checked its user code and made the workers' payload, before any task starts: the
    window a worker's import falls in. ``seen`` gets the file's SHA-256 before and after."""
    original = sweep_run.worker_payload

    def payload_then_edit(config):
        payload = original(config)
        seen.append(file_sha256(str(path)))
        path.write_text(text) if text is not None else _edit(path)
        seen.append(file_sha256(str(path)))
        return payload

    monkeypatch.setattr(sweep_run, "worker_payload", payload_then_edit)


# --------------------------------------------------------------------------- 1
@pytest.mark.parametrize("which", ["helper", "lazy"])
def test_a_sweep_refuses_a_plugin_whose_helper_changed_since_the_import(folder, which):
    files = _files(folder, "p21a_plug", "p21a")
    cfg = {**_GRID, "plugins": [str(files["module"])], "schemes": ["p21a_mm", "KQV"],
           "distributions": ["p21a_shifted"]}
    out = folder / "out"
    kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    cells = sorted(p.name for p in (out / "cells").iterdir())
    text = files[which].read_text()
    _edit(files[which])
    # was: the sweep ran (the old helper's numbers stored under the ids of the edited one)
    with pytest.raises(PluginError, match=r"user code changed since this process imported it: .*"
                       rf"'{re.escape(str(files[which]))}' \(SHA-256 \w{{12}}, now \w{{12}}\)"):
        kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    assert sorted(p.name for p in (out / "cells").iterdir()) == cells   # refused before any cell
    files[which].write_text(text)   # undone: the sweep runs, and resumes every cell
    again = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}


@pytest.mark.parametrize("grid", [{"schemes": ["p21b_mm"], "distributions": ["gaussian"]},
                                  {"schemes": ["KQV"], "distributions": ["p21b_shifted"]}])
def test_a_sweep_refuses_a_script_registration_whose_helper_changed(folder, grid):
    # a module the script imports itself (no plugin): its registrations pin its helpers
    files = _files(folder, "p21b_mod", "p21b")
    sys.path.insert(0, str(folder))
    importlib.import_module("p21b_mod")
    cfg = {**_GRID, **grid}
    kvstats.run_sweep(cfg, executor="serial", progress=False)
    _edit(files["helper"])
    with pytest.raises(PluginError, match=rf"changed since this process imported it: '.*p21b_mod_help.py'"):
        kvstats.run_sweep(cfg, executor="serial", progress=False)


def test_the_manifest_records_the_helpers_as_imported(folder, monkeypatch):
    """The manifest's record of a plugin's imports is the code the sweep ran (the record
    the workers check against), not the files as they were when the sweep ended (was)."""
    files = _files(folder, "p21c_plug", "p21c")
    cfg = {**_GRID, "plugins": [str(files["module"])], "schemes": ["p21c_mm"], "distributions": ["gaussian"]}
    seen: list = []
    _edit_after_payload(monkeypatch, files["helper"], seen)
    res = kvstats.run_sweep(cfg, executor="serial", progress=False)   # this process: the old code
    imports = {i["file"]: i["sha256"] for i in res.manifest["user_code"]["plugins"][0]["imports"]}
    assert imports[str(files["helper"])] == seen[0] != seen[1]


# --------------------------------------------------------------------------- 2
def _refused(err, path, seen) -> None:
    """The worker's error names the file and both SHA-256s (the checked one, its own)."""
    assert re.search(rf"'{re.escape(str(path))}' has SHA-256 {seen[0]} there and {seen[1]} here",
                     str(err.value)), str(err.value)


@pytest.mark.parametrize("which, pool", [("module", "spawn"), ("helper", "spawn"), ("helper", "default")])
def test_a_worker_refuses_a_plugin_edited_after_the_sweep_checked_it(folder, monkeypatch, which, pool):
    files = _files(folder, "p21d_plug", "p21d")
    cfg = {**_GRID, "plugins": [str(files["module"])], "schemes": ["p21d_mm", "KQV"],
           "distributions": ["p21d_shifted", "gaussian"]}
    seen: list = []
    _edit_after_payload(monkeypatch, files[which], seen)
    # was: the workers computed with the edited file under the ids of the checked one
    with pytest.raises(PluginError, match="imported user code other than the sweep's process checked") as err:
        if pool == "spawn":
            with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as executor:
                kvstats.run_sweep(cfg, executor=executor, progress=False)
        else:   # the default pool: forkserver workers
            kvstats.run_sweep(cfg, workers=2, progress=False)
    _refused(err, files[which], seen)


def test_a_worker_refuses_a_script_module_edited_after_the_sweep_checked_it(folder, monkeypatch):
    # the script's own registration reaches a spawn worker by reference: the worker imports
    # its module from disk
    files = _files(folder, "p21e_mod", "p21e")
    sys.path.insert(0, str(folder))
    importlib.import_module("p21e_mod")
    cfg = {**_GRID, "schemes": ["p21e_mm", "KQV"], "distributions": ["gaussian", "heavy_tailed"]}
    seen: list = []
    _edit_after_payload(monkeypatch, files["module"], seen)
    with pytest.raises(PluginError, match="imported user code other than the sweep's process checked") as err:
        with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as executor:
            kvstats.run_sweep(cfg, executor=executor, progress=False)
    _refused(err, files["module"], seen)


# JAX warns at any fork once another test of this worker imported it; the forked workers
# here run only kvstats' numpy code, never JAX
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_fork_workers_run_the_checked_code_and_are_not_refused(folder, monkeypatch):
    """A fork worker inherits the code the sweep's process checked: an edit after the check
    does not reach it, and the sweep runs with the checked code's numbers (a check that
    refused every edit would fail here)."""
    files = _files(folder, "p21f_plug", "p21f")
    cfg = {**_GRID, "plugins": [str(files["module"])], "schemes": ["p21f_mm", "KQV"],
           "distributions": ["p21f_shifted", "gaussian"]}
    serial = kvstats.run_sweep(cfg, executor="serial", progress=False)
    seen: list = []
    _edit_after_payload(monkeypatch, files["helper"], seen, "SHIFT = 5.0\n")   # other numbers
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as executor:
        pooled = kvstats.run_sweep(cfg, executor=executor, progress=False)
    assert seen[0] != seen[1] and pooled.frame.equals(serial.frame)
