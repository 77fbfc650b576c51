"""The results/plugins referee's findings (critic_plugins20), each a test that failed before.

1. A plugin (or the file of a script's registered scheme) edited while the process runs:
   the process runs the code it imported, while the cell ids hash the file as it is now,
   so a sweep stored the old code's numbers under the new code's ids. A sweep now refuses.
2. CSV results: a label that looks like a number, a bool or a missing value round trips.
3. A script importing its plugin by module name after the config loaded it.
4. Relocating two edited plugins of one file name.
5. One plugin file spelled two ways (a symlink).
6. A plugin listed twice; 7. config_fingerprint of a dict; 8. a newer manifest layout.
"""

import importlib
import json
import os
import sys

import pytest

import kvstats
from kvstats import plugins
from kvstats.plugins import PluginError, load_plugins, relocate_plugins
from kvstats.data import register as dist_register
from kvstats.quant import registry
from kvstats.results import config_fingerprint, load_result

pytestmark = pytest.mark.usefixtures("user_registries")

_PLUGIN = '''
import numpy as np
import kvstats
from kvstats.quant.uniform import UniformTokenCoder

SHIFT = 0.0

def build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

def bits_of(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2

def shifted(n_trials, n_keys, dim, rng, params):
    return SHIFT + rng.standard_normal((n_trials, n_keys, dim))

kvstats.register_scheme(kvstats.define_scheme("{name}_mm", build, bits_of, summary="min-max"))
kvstats.register_distribution("{name}_shifted", shifted)
'''

_GRID = {"budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 4, "comparisons": []}


@pytest.fixture
def folder(import_folder):
    """A folder for plugin files; sys.path and the modules imported from it
    restored after (tests/conftest.py's ``import_folder``)."""
    return import_folder("pf20_")


def _plugin(folder, stem="pf20_plug", name="pf20"):
    path = folder / f"{stem}.py"
    path.write_text(_PLUGIN.replace("{name}", name))
    return path


# --------------------------------------------------------------------------- 1
def test_a_sweep_refuses_a_plugin_edited_since_this_process_imported_it(folder):
    path = _plugin(folder)
    cfg = {**_GRID, "plugins": [str(path)], "schemes": ["pf20_mm"], "distributions": ["gaussian"]}
    out = folder / "out"
    kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    cells = sorted(p.name for p in (out / "cells").iterdir())
    path.write_text(path.read_text().replace("SHIFT = 0.0", "SHIFT = 1.0"))
    with pytest.raises(PluginError, match=r"user code changed since this process imported it: "
                       rf"'{path}' \(SHA-256 \w{{12}}, now \w{{12}}\).*start a new process"):
        kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    # refused before anything in the folder was touched: the old cells are still there
    assert sorted(p.name for p in (out / "cells").iterdir()) == cells
    # undone, the sweep runs (and resumes what the code it runs computed)
    path.write_text(path.read_text().replace("SHIFT = 1.0", "SHIFT = 0.0"))
    again = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}


@pytest.mark.parametrize("stem, schemes, distributions", [
    ("pf20_script", ["pf20s_mm"], ["gaussian"]),      # a scheme: its build's file is pinned
    ("pf20_dist", ["KQV"], ["pf20d_shifted"]),        # a distribution: its sampler's file
])
def test_a_sweep_refuses_a_scripts_registration_whose_file_changed(folder, stem, schemes, distributions):
    # a module the script imports itself (no plugin): its registration records its file
    _plugin(folder, stem, "pf20s" if stem == "pf20_script" else "pf20d")
    sys.path.insert(0, str(folder))
    importlib.import_module(stem)
    cfg = {**_GRID, "schemes": schemes, "distributions": distributions}
    kvstats.run_sweep(cfg, executor="serial", progress=False)
    path = folder / f"{stem}.py"
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(PluginError, match=rf"changed since this process imported it: '.*{stem}.py'"):
        kvstats.run_sweep(cfg, executor="serial", progress=False)


# --------------------------------------------------------------------------- 2
def test_csv_labels_that_look_like_numbers_bools_or_nan_round_trip(tmp_path, monkeypatch):
    from kvstats.sweep import store

    monkeypatch.setattr(store, "_has_parquet", lambda: False)
    labels = ["123", "True", "nan", "1e3"]
    schemes = [{"name": n, "label": lab} for n, lab in zip(["KQV", "QKQV", "KV", "K4V2"], labels)]
    cfg = {**_GRID, "schemes": schemes, "distributions": ["gaussian"], "n_trials": 3}
    out = tmp_path / "out"
    first = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    assert (out / "results.csv").is_file()
    loaded = load_result(out)   # was: the content hash differs (labels read as numbers)
    assert sorted(loaded.frame["scheme"].unique()) == sorted(labels)
    assert loaded.frame["scheme"].map(type).eq(str).all()
    assert loaded.frame.equals(first.frame)
    # the cells too: a resume reuses them (were recomputed on every resume)
    again = kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}


# --------------------------------------------------------------------------- 3
def test_a_script_imports_its_plugin_after_the_config_loaded_it(folder):
    path = _plugin(folder)
    config = kvstats.sweep.SweepConfig.from_dict({**_GRID, "plugins": [str(path)], "schemes": ["pf20_mm"],
                                                  "distributions": ["gaussian"]})
    registered = registry._TABLE["pf20_mm"]
    distribution = dist_register._USER["pf20_shifted"]
    sys.path.insert(0, str(folder))
    module = importlib.import_module("pf20_plug")   # was: 'pf20_mm' is already registered
    # the plugin's registrations stand (workers import the plugin for them)
    assert registry._TABLE["pf20_mm"] is registered and registry._ORIGIN["pf20_mm"] == str(path)
    assert dist_register._USER["pf20_shifted"] is distribution
    assert module.build is not registered.build
    assert len(kvstats.run_sweep(config, executor="serial", progress=False).frame) == 4


def test_the_plugin_imported_again_after_an_edit_is_still_refused(folder):
    path = _plugin(folder)
    load_plugins([str(path)])
    path.write_text(path.read_text() + "# edited\n")
    sys.path.insert(0, str(folder))
    with pytest.raises(ValueError, match="'pf20_mm' is already registered"):
        importlib.import_module("pf20_plug")


# --------------------------------------------------------------------------- 4
def test_two_edited_plugins_of_one_file_name_are_relocated_by_their_folders(tmp_path):
    old, new = tmp_path / "x", tmp_path / "y"
    for sub, name in (("a", "pf20a"), ("b", "pf20b")):
        (old / sub).mkdir(parents=True)
        (old / sub / "schemes.py").write_text(_PLUGIN.replace("{name}", name))
    files = [str(old / "a" / "schemes.py"), str(old / "b" / "schemes.py")]
    code = [{"plugin": f, "kind": "file", "file": f, "sha256": plugins._sha256(f)} for f in files]
    manifest = {"config": {"plugins": files}, "user_code": {"plugins": code}}
    old.rename(new)
    for sub in ("a", "b"):
        with open(new / sub / "schemes.py", "a") as fh:
            fh.write("# edited\n")
    given = [str(new / "b" / "schemes.py"), str(new / "a" / "schemes.py")]
    with pytest.warns(UserWarning, match="is not the file the sweep ran"):
        done = relocate_plugins(manifest, given)   # was: matches several ... (no input could work)
    assert [(d["plugin"], d["file"]) for d in done] == [(files[1], given[0]), (files[0], given[1])]
    assert registry._ORIGIN["pf20a_mm"] == files[0] and registry._ORIGIN["pf20b_mm"] == files[1]


# --------------------------------------------------------------------------- 5
def test_a_plugin_spelled_through_a_symlink_is_the_file_the_script_imported(folder):
    real = folder / "real"
    real.mkdir()
    _plugin(real)
    (folder / "link").symlink_to(real)
    sys.path.insert(0, str(real))
    importlib.import_module("pf20_plug")   # the script imports it, then the config names it
    ref = str(folder / "link" / "pf20_plug.py")
    config = kvstats.sweep.SweepConfig.from_dict({**_GRID, "plugins": [ref], "schemes": ["pf20_mm"],
                                                  "distributions": ["pf20_shifted"]})
    assert registry._ORIGIN["pf20_mm"] == ref            # was: 'pf20_mm' is already registered
    assert plugins.plugin_records(config.plugins)[0]["module"] == "pf20_plug"
    # the other spelling is the same plugin, imported once
    load_plugins([str(real / "pf20_plug.py")])
    assert plugins._LOADED[os.path.realpath(ref)]["plugin"] == ref


# --------------------------------------------------------------------------- 6, 7, 8
def test_a_plugin_listed_twice_is_refused(folder):
    path = _plugin(folder)
    (folder / "sub").mkdir()
    (folder / "link").symlink_to(folder)
    with pytest.raises(PluginError, match=r"must name each plugin once; received '.*pf20_plug.py' and "
                       r"'.*pf20_plug.py', which are one file"):
        load_plugins(["pf20_plug.py", "sub/../pf20_plug.py"], folder)   # was: kept twice
    with pytest.raises(PluginError, match=r"received '.*/pf20_plug.py' and '.*/link/pf20_plug.py'"):
        load_plugins(["pf20_plug.py", "link/pf20_plug.py"], folder)
    with pytest.raises(PluginError, match="which are one module"):
        load_plugins(["json", "json"])
    assert not plugins._LOADED.get(os.path.realpath(path))


def test_the_fingerprint_of_a_config_dict_is_its_manifests(tmp_path):
    cfg = {**_GRID, "schemes": ["KQV"], "distributions": ["gaussian"]}
    result = kvstats.run_sweep(cfg, out=tmp_path / "out", executor="serial", progress=False)
    assert config_fingerprint(cfg) == result.manifest["config_fingerprint"]   # was: the raw dict's
    with pytest.raises(TypeError, match="config must be a SweepConfig or a config dict; received list"):
        config_fingerprint([cfg])


def test_a_manifest_of_a_newer_layout_is_refused(tmp_path):
    from kvstats.sweep.store import MANIFEST_VERSION
    from kvstats.results import _MANIFEST_LAYOUT

    assert _MANIFEST_LAYOUT == MANIFEST_VERSION   # what load_result reads is what the runner writes
    out = tmp_path / "out"
    kvstats.run_sweep({**_GRID, "schemes": ["KQV"], "distributions": ["gaussian"]}, out=out,
                      executor="serial", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["kvstats_sweep"] = 3
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"has the layout 'kvstats_sweep' 3, newer than this kvstats "
                       r"reads \(layouts up to 2\)"):
        load_result(out)


def test_a_results_csv_reads_its_recorded_text_columns_as_text(tmp_path, monkeypatch):
    # write_result records the column dtypes: a text column beyond the sweep's usual four
    # (here "note") stays text however its values look
    import pandas as pd

    from kvstats.results import read_table_meta
    from kvstats.sweep import store

    monkeypatch.setattr(store, "_has_parquet", lambda: False)
    frame = pd.DataFrame({"scheme": ["KQV", "KV"], "note": ["123", "nan"], "kl": [0.5, float("nan")]})
    store.write_result(tmp_path, frame, {"config_fingerprint": "f"})
    back, meta = read_table_meta(tmp_path / "results.csv")
    assert back["note"].tolist() == ["123", "nan"] and back["kl"].isna().tolist() == [False, True]
