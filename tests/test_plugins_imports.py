"""The user modules a plugin imports enter the ids of the cells its code computes.

A plugin ``my_schemes.py`` that imports ``my_helpers.py`` from its own folder: the helper
is found (``kvstats.user_imports.user_imports``: import statements and the module namespace,
followed through user modules only), recorded in the manifest with its SHA-256, named in
the report's header, and hashed into the cell ids (``kvstats.sweep.plan.user_code_digest``),
so ``--resume`` recomputes the plugin's cells after an edit of the helper and reuses the
built-in ones. The ids are the same in every process, whatever it imported first and
whatever its ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kvstats
from kvstats import plugins
from kvstats.sweep import SchemeSpec
from kvstats.sweep.plan import Cell, user_code_digest
from kvstats.user_imports import is_user_file, user_imports

pytestmark = pytest.mark.usefixtures("user_registries")

HELPER = textwrap.dedent('''
    import math                     # the standard library: not user code

    import numpy as np              # an installed package: not user code

    from h1dep_inner import OFFSET  # a user module imported by the helper itself

    SCALE = 1.0

    def shift(x, by):
        return SCALE * (x + by + OFFSET) + 0.0 * math.pi
''')

INNER = "OFFSET = 0.0\n"

PLUGIN = textwrap.dedent('''
    from h1dep_helpers import SCALE, shift
    from kvstats.data.register import register_distribution
    from kvstats.quant.register import define_scheme, register_scheme
    from kvstats.quant.uniform import UniformTokenCoder

    def build(bits, dim, params, key_rng, value_rng, draws):
        from h1dep_lazy import GROUP     # a lazy import, in the function that uses it
        return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

    def stored(bits, dim, n_tokens, params):
        side = n_tokens * (bits * dim + 32)
        return side, side

    def shifted(n_trials, n_keys, dim, rng, params):
        return shift(rng.standard_normal((n_trials, n_keys, dim)), params["shift"])

    register_scheme(define_scheme("dep_minmax", build, stored, summary="per-token min-max"))
    register_distribution("dep_shifted", shifted, {"shift": 1.0})
''')

MODULES = ("h1dep_helpers", "h1dep_inner", "h1dep_lazy")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A plugin folder: my_schemes.py, its helper, the helper's helper, a lazy import;
    sys.path and sys.modules restored afterwards (the plugin's folder goes on the path)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    (tmp_path / "my_schemes.py").write_text(PLUGIN)
    (tmp_path / "h1dep_helpers.py").write_text(HELPER)
    (tmp_path / "h1dep_inner.py").write_text(INNER)
    (tmp_path / "h1dep_lazy.py").write_text("GROUP = 1\n")
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def _config(folder: Path, trials: int = 6) -> Path:
    text = ('[sweep]\nplugins = ["my_schemes.py"]\nbudgets = [3]\ndims = [16]\nn_keys = [32]\n'
            f'n_trials = {trials}\nchunk_size = 3\nschemes = ["dep_minmax", "KQV"]\n'
            'distributions = [{ name = "dep_shifted", params = { shift = 2.0 } }, "gaussian"]\n'
            'comparisons = [["dep_minmax", "KQV"]]\n')
    path = folder / "sweep.toml"
    path.write_text(text)
    return path


def _cells():
    return (Cell("gaussian", {}, 16, 32, 3, SchemeSpec("dep_minmax")),
            Cell("dep_shifted", {"shift": 1.0}, 16, 32, 3, SchemeSpec("KQV")),
            Cell("gaussian", {}, 16, 32, 3, SchemeSpec("KQV")))


def test_the_helpers_a_plugin_imports_are_found_recorded_and_hashed(folder):
    ref = str(folder / "my_schemes.py")
    plugins.load_plugins([ref])
    record = plugins.plugin_records([ref])[0]
    # the helper, the helper's own user import and the lazy import; not math, numpy, kvstats
    assert [(i["module"], Path(i["file"]).name) for i in record["imports"]] == [
        ("h1dep_helpers", "h1dep_helpers.py"), ("h1dep_inner", "h1dep_inner.py"),
        ("h1dep_lazy", "h1dep_lazy.py")]
    assert all(len(i["sha256"]) == 64 for i in record["imports"])
    scheme_cell, dist_cell, builtin = _cells()
    before = user_code_digest(scheme_cell), user_code_digest(dist_cell)
    assert None not in before and user_code_digest(builtin) is None
    for name in MODULES:   # an edit of any of them changes both digests
        path = folder / f"{name}.py"
        text = path.read_text()
        path.write_text(text + "\n# edited\n")
        after = user_code_digest(scheme_cell), user_code_digest(dist_cell)
        assert after[0] != before[0] and after[1] != before[1], name
        path.write_text(text)
        assert (user_code_digest(scheme_cell), user_code_digest(dist_cell)) == before


def test_a_plugin_without_user_imports_keeps_its_ids(tmp_path):
    """The digest of a plugin that imports no user module is what it was before the
    imports were hashed: its earlier sweeps still resume (reference: the source bytes
    alone, as kvstats.sweep.plan hashed them before 2026-12-02)."""
    import hashlib

    body = PLUGIN.replace("from h1dep_helpers import SCALE, shift\n", "").replace(
        "        from h1dep_lazy import GROUP     # a lazy import, in the function that uses it\n", "")
    body = body.replace("return shift(rng.standard_normal((n_trials, n_keys, dim)), params[\"shift\"])",
                        "return params[\"shift\"] + rng.standard_normal((n_trials, n_keys, dim))")
    body = body.replace("dep_", "plain_")
    path = tmp_path / "plain.py"
    path.write_text(body)
    plugins.load_plugins([str(path)])
    assert "imports" not in plugins.plugin_records([str(path)])[0]
    source = path.read_bytes()
    expected = hashlib.sha256(source + source).hexdigest()   # build's file, expected_bits' file
    assert user_code_digest(Cell("gaussian", {}, 16, 32, 3, SchemeSpec("plain_minmax"))) == expected


def test_resume_recomputes_the_plugin_cells_after_a_helper_edit(folder, capsys):
    path = _config(folder)
    out = folder / "out"
    first = kvstats.run_sweep(path, out, executor="serial", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    imports = manifest["user_code"]["plugins"][0]["imports"]
    assert [Path(i["file"]).name for i in imports] == ["h1dep_helpers.py", "h1dep_inner.py",
                                                       "h1dep_lazy.py"]
    # the report's header names them, with their hashes
    kvstats.hypothesis_report(first, folder / "rep", figures=False, energy_resamples=19,
                              bootstrap_resamples=99)
    header = (folder / "rep" / "report.md").read_text()
    for i in imports:
        assert f"{i['file']} (SHA-256 {i['sha256'][:12]})" in header
    again = kvstats.run_sweep(path, out, executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}
    inner = folder / "h1dep_inner.py"   # two imports away from the plugin
    inner.write_text("OFFSET = 0.0  # edited, same numbers\n")
    # this process runs the helper it imported: refused, its ids would hash the edited one
    with pytest.raises(plugins.PluginError, match=r"changed since this process imported it: .*h1dep_inner.py"):
        kvstats.run_sweep(path, out, executor="serial", progress=False)
    # a new process, which imports the edited helper, resumes
    root = Path(kvstats.__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", "import sys, kvstats; kvstats.run_sweep(sys.argv[1], "
                           "sys.argv[2], executor='serial', progress=False)", str(path), str(out)],
                          env={**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1"},
                          capture_output=True, text=True, cwd=str(root), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    edited = kvstats.load_result(out)
    status = {(c["key"]["scheme"], c["key"]["case"]["distribution"]): c["status"]
              for c in edited.manifest["cells"]}
    assert status[("KQV", "gaussian")] == "resumed"
    assert {s for (scheme, dist), s in status.items()
            if scheme == "dep_minmax" or dist == "dep_shifted"} == {"computed"}
    assert edited.frame.drop(columns="cell_id").equals(first.frame.drop(columns="cell_id"))



def test_replay_after_a_helper_edit_names_the_helper(folder):
    # the replayed cell's id holds the helper's digest: the refusal names the file that changed
    from kvstats.sweep.replay import replay_trials

    out = folder / "out"
    kvstats.run_sweep(_config(folder), out, executor="serial", progress=False)
    (folder / "h1dep_inner.py").write_text("OFFSET = 0.0  # edited\n")
    with pytest.raises(ValueError, match=r"the user code file\(s\) \[.*h1dep_inner.py'\] changed since"):
        replay_trials(out, scheme="KQV", distribution="dep_shifted", trials=[0])

SCRIPT = textwrap.dedent('''
    import json, sys
    folder, order = sys.argv[1], sys.argv[2]
    if order == "helper-first":          # the script imported the helper (and the plugin) itself
        sys.path.insert(0, folder)
        import h1dep_helpers, my_schemes
    from kvstats import plugins
    from kvstats.sweep import SweepConfig
    config = SweepConfig.from_toml(folder + "/sweep.toml")
    print(json.dumps([config.cell_id(c) for c in config.cells()]))
''')


def test_cell_ids_are_the_same_in_every_process(folder):
    """Fresh interpreters with other hash seeds, one importing the helper and the plugin
    itself first, give the ids of this process (the ids hash contents, in sorted order)."""
    from kvstats.sweep import SweepConfig

    path = _config(folder)
    config = SweepConfig.from_toml(path)
    here = [config.cell_id(c) for c in config.cells()]
    script = folder / "ids.py"
    script.write_text(SCRIPT)
    root = Path(kvstats.__file__).resolve().parent.parent
    for seed, order in (("0", "plain"), ("12345", "helper-first"), ("random", "plain")):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root),
               "OPENBLAS_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, str(script), str(folder), order], env=env,
                              capture_output=True, text=True, cwd=str(root), check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.splitlines()[-1]) == here, (seed, order)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_fresh_worker_imports_the_helper_beside_the_plugin(folder, method):
    """The plugin's folder is on the module search path in every process: a spawn or
    forkserver worker (a fresh interpreter) imports the plugin and its helper, and
    computes the same rows."""
    import concurrent.futures as cf
    import multiprocessing

    path = _config(folder)
    serial = kvstats.run_sweep(path, executor="serial", progress=False)
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
        pooled = kvstats.run_sweep(path, executor=pool, progress=False)
    assert pooled.frame.equals(serial.frame)
    assert sys.path.count(str(folder)) == 1   # appended once, not per load


def test_user_imports_leaves_out_the_interpreter_installed_packages_and_kvstats():
    assert user_imports(["json", "numpy", "kvstats.sweep.plan"]) == []
    assert not is_user_file(json.__file__)
    assert not is_user_file(kvstats.__file__)
    assert is_user_file(__file__)   # the tests are user code
