"""Failures while a plugin is imported (referee RO, findings F4 to F6).

F4: a plugin calling ``sys.exit`` (or a top-level ``argparse`` parse) at import ended the
calling sweep with rc 0 and no message; it must be a PluginError naming the file.
F5: a KeyboardInterrupt during the import left the plugin's registrations behind, so the
rerun failed with "already registered"; they must be forgotten, the interrupt propagated.
F6: an import error named the plugin but no line; it must name the innermost user line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import kvstats
from kvstats.plugins import PluginError, load_plugins

pytestmark = pytest.mark.usefixtures("user_registries")

_SAMPLER = ("import kvstats\n"
            "def samp(n_trials, n_keys, dim, rng, params):\n"
            "    return rng.standard_normal((n_trials, n_keys, dim))\n"
            "kvstats.register_distribution({name!r}, samp, {{}}, summary='x')\n")


def _plugin(folder, name, body):
    path = folder / f"{name}.py"
    path.write_text(_SAMPLER.format(name=name) + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("body,code", [("import sys\nsys.exit()\n", "None"),
                                       ("import sys\nsys.exit(3)\n", "3"),
                                       ("import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n",
                                        "2")])
def test_a_plugin_exiting_at_import_is_a_plugin_error_naming_the_file(tmp_path, body, code, capsys):
    path = _plugin(tmp_path, "p_exits", body)
    with pytest.raises(PluginError) as info:
        load_plugins([str(path)])
    text = str(info.value)
    assert f"importing file {str(path)!r} exited (SystemExit {code})" in text
    assert f"(at {path}:" in text and "if __name__ == \"__main__\":" in text
    assert "p_exits" not in kvstats.data.register.distribution_names()   # its registration forgotten


def test_a_plugin_exiting_at_import_does_not_end_the_sweeps_process(tmp_path):
    # the referee's case end to end: run_sweep from a script ended it with rc 0, silently
    path = _plugin(tmp_path, "p_exit0", "import sys\nsys.exit()\n")
    script = ("import kvstats\n"
              f"kvstats.run_sweep({{'plugins': [{str(path)!r}], 'schemes': ['KQV'], 'budgets': [3], "
              "'distributions': ['gaussian'], 'dims': [16], 'n_keys': [8], 'n_trials': 2}, "
              "executor='serial', progress=False)\n"
              "print('not reached')\n")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(kvstats.__file__))}  # this kvstats
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 1 and "not reached" not in run.stdout
    assert "PluginError" in run.stderr and "exited (SystemExit None)" in run.stderr


def test_an_interrupted_plugin_import_forgets_its_registrations_and_propagates(tmp_path):
    path = _plugin(tmp_path, "p_kbi", "raise KeyboardInterrupt   # Ctrl-C during a slow import\n")
    with pytest.raises(KeyboardInterrupt):
        load_plugins([str(path)])
    assert "p_kbi" not in kvstats.data.register.distribution_names()
    # the rerun after the interruption (the file now imports) works, not "already registered"
    path.write_text(_SAMPLER.format(name="p_kbi"))
    assert load_plugins([str(path)]) == (str(path),)
    assert "p_kbi" in kvstats.data.register.distribution_names()


def test_an_import_error_names_the_innermost_user_line(tmp_path):
    (tmp_path / "ro_helper_mod.py").write_text("def f():\n    x = 1\n    return x / 0\n")
    path = _plugin(tmp_path, "p_raise", "import ro_helper_mod\nro_helper_mod.f()\n")
    try:
        with pytest.raises(PluginError) as info:
            load_plugins([str(path)])
    finally:
        sys.modules.pop("ro_helper_mod", None)
        sys.path.remove(str(tmp_path))
    text = str(info.value)
    # the helper's line 3 (where it failed), not the plugin's line that called it
    assert text.endswith(f"failed: ZeroDivisionError: division by zero (at {tmp_path / 'ro_helper_mod.py'}:3)")
    direct = _plugin(tmp_path, "p_raise2", "y = 1\nz = 1 / 0\n")
    with pytest.raises(PluginError, match=rf"failed: ZeroDivisionError: division by zero \(at {direct}:6\)$"):
        load_plugins([str(direct)])
