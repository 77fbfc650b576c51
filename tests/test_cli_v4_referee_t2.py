"""Referee T2's findings F2-F5 on the command line and user code, each run as a user would.

F2. ``kvstats report DIR --plugins P`` with DIR missing (or holding no sweep) blamed
    ``--plugins`` ("has no plugin file (left) for P to replace"): DIR's own error comes first.
F3. A plugin's helper module edited after the sweep gave no warning, and nothing said the
    report read another version of it: now the warning names the helper and both SHA-256s,
    and ``kvstats.plugins.relocated(plugin)["imports"]`` holds the helper's hash now (what
    the report's header reads), as for an edit of the plugin file itself.
F4. A console that cannot encode π, − or ≥ (cp1252, ascii): ``--help`` was a traceback, and
    ``schemes`` / ``theory`` stopped half-way with rc 2; they now print, those characters
    replaced, rc 0.
F5. A sweep's plugin that raises on import now: the report said the manifest's config is
    not valid; it now says the sweep's plugin fails to import now (file, type, line kept).

The sweeps and reports run in fresh processes (``python -m kvstats.cli``), as a user's do:
a report is a new process that imports the plugin from disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvstats.cli import main
from kvstats.user_imports import file_sha256

_PLUGIN = '''
import kvstats
from kvstats.quant.uniform import UniformTokenCoder

import v4t2_helper


def build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def bits_of(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


kvstats.register_scheme(kvstats.define_scheme("v4t2_mm", build, bits_of, summary=v4t2_helper.SUMMARY))
'''

_CONFIG = '''[sweep]
seed = 3
plugins = ["v4t2_plug.py"]
budgets = [3]
dims = [16]
n_keys = [8]
n_trials = 6
[[schemes]]
name = "v4t2_mm"
[[schemes]]
name = "KQV"
[[distributions]]
name = "gaussian"
[report]
comparisons = []
figures = false
'''


def _kvstats(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``kvstats ARGS`` in a new process; ``env`` added to this one's environment."""
    return subprocess.run([sys.executable, "-m", "kvstats.cli", *args], capture_output=True,
                          encoding=env.get("PYTHONIOENCODING", "utf-8"), timeout=600,
                          env={**os.environ, **env})


@pytest.fixture
def swept(tmp_path):
    """A finished sweep (in another process) of a plugin that imports a helper beside it."""
    (tmp_path / "v4t2_helper.py").write_text('SUMMARY = "min-max, first version"\n')
    (tmp_path / "v4t2_plug.py").write_text(_PLUGIN)
    (tmp_path / "c.toml").write_text(_CONFIG)
    out = tmp_path / "out"
    proc = _kvstats("sweep", "--config", str(tmp_path / "c.toml"), "--out", str(out), "--no-report",
                    "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    return tmp_path, out


# ------------------------------------------------------------------------------- F2
def test_a_missing_dir_is_named_before_the_plugins_flag(tmp_path, capsys):
    plugin = tmp_path / "mine.py"
    plugin.write_text("X = 1\n")
    missing = tmp_path / "nothing_here"
    assert main(["report", str(missing), "--plugins", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert f"{str(missing)!r} does not exist or is not a folder" in err
    assert "--plugins" not in err and "to replace" not in err
    # a folder that holds no sweep: the same error as without --plugins
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--plugins", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert "holds no finished sweep" in err and "to replace" not in err


# ------------------------------------------------------------------------------- F3
def test_an_edited_helper_is_a_warning_and_recorded_for_the_header(swept):
    folder, out = swept
    helper = folder / "v4t2_helper.py"
    recorded = file_sha256(str(helper))
    helper.write_text('SUMMARY = "min-max, EDITED"\n')
    now = file_sha256(str(helper))
    # what the report's header reads (kvstats.plugins.relocated), in the report's process
    script = ("import json, kvstats, kvstats.plugins as p; r = kvstats.load_result(%r); "
              "print(json.dumps(p.relocated(r.config.plugins[0])))" % str(out))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"helper module {str(helper)!r} of plugin {str(folder / 'v4t2_plug.py')!r}" in proc.stderr
    assert f"SHA-256 {now[:12]}" in proc.stderr and f"SHA-256 {recorded[:12]}" in proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["imports"] == {str(helper): now}
    plugin_sha = file_sha256(str(folder / "v4t2_plug.py"))
    assert found["sha256"] == plugin_sha and found["file"] == str(folder / "v4t2_plug.py")
    # and `kvstats report` says it, once, on stderr, and still reports (rc 0)
    proc = _kvstats("report", str(out), "--no-figures")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning: helper module") == 1 and now[:12] in proc.stderr
    # the header names the helper's version it read beside the recorded one
    header = (out / "report.md").read_text()
    assert (f"{helper} (SHA-256 {recorded[:12]}; this report read another version, SHA-256 "
            f"{now[:12]})") in header, header[:3000]


def test_an_unedited_helper_gives_no_warning(swept):
    _, out = swept
    proc = _kvstats("report", str(out), "--no-figures")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr


# ------------------------------------------------------------------------------- F4
@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_a_console_without_unicode_prints_help_schemes_and_theory(encoding):
    for args in (["--help"], ["report", "--help"], ["theory", "--help"]):
        proc = _kvstats(*args, PYTHONIOENCODING=encoding)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "usage: kvstats" in proc.stdout
    proc = _kvstats("schemes", PYTHONIOENCODING=encoding)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "KQV" in proc.stdout and "QKQV" in proc.stdout
    proc = _kvstats("theory", "--dim", "128", PYTHONIOENCODING=encoding)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # the last line, with its π and −, printed ("?" in their place)
    assert "Asymptotic inflations: 2? = 6.2832" in proc.stdout


# ------------------------------------------------------------------------------- F5
def test_a_plugin_failing_to_import_now_is_not_called_an_invalid_manifest(swept):
    folder, out = swept
    plugin = folder / "v4t2_plug.py"
    plugin.write_text(plugin.read_text() + 'raise RuntimeError("now broken")\n')
    proc = _kvstats("report", str(out), "--no-figures")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"kvstats report: error: the sweep in {str(out)!r}: its plugin fails to "
                           "import now (the manifest is intact): importing file ")
    assert str(plugin) in line and "RuntimeError: now broken" in line
    assert "config is not valid" not in proc.stderr
