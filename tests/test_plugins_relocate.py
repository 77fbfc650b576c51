"""`kvstats report --plugins PATH`: the report of a plugin sweep whose plugin file moved.

The manifest's config keeps each plugin at the absolute path it had; ``load_result``
imports it from there. After a move, ``--plugins`` (``hypothesis_report(dir,
plugins=[...])``, ``kvstats.plugins.relocate_plugins``) names the file where it is now: it
is matched to the recorded plugin by SHA-256, else by file name, imported in its place,
checked against the recorded hash (another version: a warning naming both files and
hashes, and the report's header says so), and the report is written. A recorded plugin
that is gone, with no copy named, is an error naming the recorded path and the option.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import kvstats
from kvstats import plugins
from kvstats.cli import main
from kvstats.quant import registry

# the plugin of tests/test_plugins.py, its sweep config, and forgetting it as a new process would
from test_plugins import _config, _forget_plugins

pytestmark = pytest.mark.usefixtures("user_registries")


@pytest.fixture
def moved(tmp_path):
    """A finished plugin sweep whose plugin then moved to another folder."""
    (tmp_path / "sweep").mkdir()
    path = _config(tmp_path / "sweep")
    out = tmp_path / "out"
    kvstats.run_sweep(path, out, executor="serial", progress=False)
    recorded = tmp_path / "sweep" / "plug.py"
    copy = tmp_path / "elsewhere" / "plug.py"
    copy.parent.mkdir()
    shutil.move(recorded, copy)
    _forget_plugins()
    return out, recorded, copy


def test_a_missing_plugin_is_named_with_the_option_that_fixes_it(moved, capsys):
    out, recorded, _ = moved
    assert main(["report", str(out), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert f"plugin file {str(recorded)!r}" in err and "--plugins PATH" in err
    assert "is not there any more" in err and "SHA-256" in err
    # load_result alone (Python) names the same, and the Python fix: relocate_plugins
    with pytest.raises(plugins.PluginError) as caught:
        kvstats.load_result(out)
    message = str(caught.value)
    assert f"the sweep in {str(out)!r} used the plugin file {str(recorded)!r} (SHA-256 " in message
    assert "`kvstats report DIR --plugins PATH`" in message
    assert "kvstats.plugins.relocate_plugins(dir, [PATH]) before load_result" in message
    # which works: the copy named, the result loads
    plugins.relocate_plugins(out, [moved[2]])
    assert kvstats.load_result(out).config.plugins == (str(recorded),)


def test_the_report_reads_the_plugin_from_where_it_is_now(moved, capsys):
    out, recorded, copy = moved
    copy = copy.rename(copy.parent / "plug_copy.py")   # another name, the same content: by hash
    assert main(["report", str(out), "--no-figures", "--plugins", str(copy)]) == 0
    assert "warning" not in capsys.readouterr().err      # the same file: nothing to warn of
    header = (out / "report.md").read_text()
    assert f"scheme plug_minmax: plugin {recorded}" in header
    assert f"this report read it from {copy}" in header and "another version" not in header
    # the config, and so its fingerprint, are the sweep's: the recorded path
    assert kvstats.load_result(out).config.plugins == (str(recorded),)


def test_another_version_of_the_plugin_is_a_warning_naming_both(moved, capsys):
    out, recorded, copy = moved
    sha_recorded = plugins._sha256(str(copy))
    renamed = copy.parent / "plug_v2.py"     # other content and name: given as the only copy
    renamed.write_text(copy.read_text().replace("per-token min-max", "per-token min-max, v2"))
    sha_new = plugins._sha256(str(renamed))
    copy.unlink()
    # matched by neither hash nor name: refused, naming the recorded plugins
    assert main(["report", str(out), "--no-figures", "--plugins", str(renamed)]) == 2
    assert f"matches none of the plugin files the sweep in {str(out)!r} used" in capsys.readouterr().err
    _forget_plugins()
    edited = copy.parent / "plug.py"
    renamed.rename(edited)
    assert main(["report", str(out), "--no-figures", "--plugins", str(edited)]) == 0
    err = capsys.readouterr().err
    assert "kvstats report: warning:" in err
    for text in (str(edited), sha_new[:12], str(recorded), sha_recorded[:12]):
        assert text in err
    header = (out / "report.md").read_text()
    assert f"another version (SHA-256 {sha_new[:12]})" in header


def test_hypothesis_report_takes_the_copy_too(moved, tmp_path):
    out, recorded, copy = moved
    rep = kvstats.hypothesis_report(out, tmp_path / "rep", figures=False, energy_resamples=19,
                                    bootstrap_resamples=99, plugins=[copy])
    assert Path(rep.files["markdown"]).is_file()
    assert plugins.relocated(str(recorded)) == {"file": str(copy), "sha256": plugins._sha256(str(copy))}
    with pytest.raises(ValueError, match="plugins applies to a sweep directory"):
        kvstats.hypothesis_report(kvstats.load_result(out), tmp_path / "rep", plugins=[copy])


def test_bad_copies_are_refused(moved, tmp_path, capsys):
    out, recorded, copy = moved
    assert main(["report", str(out), "--plugins", str(tmp_path / "nope.py")]) == 2
    assert "--plugins: file" in capsys.readouterr().err
    broken = tmp_path / "broken" / "plug.py"
    broken.parent.mkdir()
    broken.write_text(copy.read_text() + "\nraise RuntimeError('broken copy')\n")   # after registering
    assert main(["report", str(out), "--plugins", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: broken copy" in err and str(broken) in err
    assert "plug_minmax" not in registry._TABLE       # nothing left registered


def test_the_warning_points_at_the_users_call(moved, tmp_path):
    out, recorded, copy = moved
    copy.write_text(copy.read_text() + "\n# edited after the sweep\n")
    with pytest.warns(UserWarning, match="is not the file the sweep in") as caught:
        kvstats.hypothesis_report(out, tmp_path / "rep", figures=False, energy_resamples=19,
                                  bootstrap_resamples=99, plugins=[copy])
    assert caught[0].filename == __file__
    _forget_plugins()
    with pytest.warns(UserWarning):
        done = plugins.relocate_plugins(out, [copy])
    assert done[0]["recorded_file"] == str(recorded) and done[0]["sha256"] != done[0]["recorded_sha256"]
    assert kvstats.load_result(out).config.plugins == (str(recorded),)


def test_a_plugin_edited_in_place_after_the_sweep_is_a_warning(tmp_path, capsys):
    """The plugin still at its recorded path, but edited since: the report's names and
    registry facts come from the edit, so it warns and the header says so, as for a copy."""
    (tmp_path / "sweep").mkdir()
    out = tmp_path / "out"
    kvstats.run_sweep(_config(tmp_path / "sweep"), out, executor="serial", progress=False)
    plug = tmp_path / "sweep" / "plug.py"
    sha_run = plugins._sha256(str(plug))
    _forget_plugins()
    plug.write_text(plug.read_text() + "\n# edited after the sweep\n")
    try:
        assert main(["report", str(out), "--no-figures"]) == 0
        err = capsys.readouterr().err
        assert f"plugin {str(plug)!r} is not the version the sweep in {str(out)!r} ran" in err
        assert plugins._sha256(str(plug))[:12] in err and sha_run[:12] in err
        header = (out / "report.md").read_text()
        assert f"another version (SHA-256 {plugins._sha256(str(plug))[:12]})" in header
    finally:
        _forget_plugins()


def test_a_module_plugin_is_found_by_name_wherever_it_lies(tmp_path, monkeypatch):
    """A module plugin is recorded by name: after its folder moves it is found on the new
    module search path; one that cannot be found says how a module plugin is found."""
    from test_plugins import PLUGIN

    first, moved_to = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    (first / "my_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(first))
    config = {"plugins": ["my_plugin_mod"], "schemes": ["plug_minmax"], "budgets": [3],
              "distributions": ["gaussian"], "dims": [16], "n_keys": [8], "n_trials": 4, "comparisons": []}
    kvstats.run_sweep(config, tmp_path / "out", executor="serial", progress=False)
    _forget_plugins()
    sys.modules.pop("my_plugin_mod", None)
    first.rename(moved_to)
    sys.path.remove(str(first))
    try:
        with pytest.raises(plugins.PluginError, match=r"plugin module 'my_plugin_mod', which this process "
                                                      r"cannot import: .*PYTHONPATH"):
            plugins.relocate_plugins(tmp_path / "out")
        monkeypatch.syspath_prepend(str(moved_to))
        assert plugins.relocate_plugins(tmp_path / "out") == []    # the same file: no warning
        assert len(kvstats.load_result(tmp_path / "out").frame) == 4
        _forget_plugins()
        sys.modules.pop("my_plugin_mod", None)
        with open(moved_to / "my_plugin_mod.py", "a") as fh:
            fh.write("\n# edited after the sweep\n")
        with pytest.warns(UserWarning, match="plugin 'my_plugin_mod' is not the version the sweep"):
            plugins.relocate_plugins(tmp_path / "out")
        assert plugins.relocated("my_plugin_mod")["file"] == str(moved_to / "my_plugin_mod.py")
    finally:
        _forget_plugins()
