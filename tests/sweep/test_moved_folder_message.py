"""A sweep folder moved with its plugin and resumed is the same sweep.

The manifest records the plugin's absolute path, so its config fingerprint changes with a
move; resuming the moved folder said it removed files "a sweep of another config" left
there, although every cell resumed. Only a changed setting is "another config".
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import kvstats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_plugins import _config, _forget_plugins  # noqa: E402

pytestmark = pytest.mark.usefixtures("user_registries")


def _sweep(folder: Path):
    return kvstats.run_sweep(folder / "sweep.toml", folder / "out", executor="serial", progress=False)


def test_a_moved_folder_resumes_without_calling_itself_another_config(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    _config(tmp_path / "a")
    _sweep(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    _forget_plugins()
    capsys.readouterr()
    result = _sweep(tmp_path / "b")
    err = capsys.readouterr().err
    assert "another config" not in err
    assert {c["status"] for c in result.manifest["cells"]} == {"resumed"}

    # a changed setting still is another config
    path = tmp_path / "b" / "sweep.toml"
    path.write_text(path.read_text().replace("n_trials = 6", "n_trials = 9"))
    _forget_plugins()
    _sweep(tmp_path / "b")
    assert "a sweep of another config" in capsys.readouterr().err


def test_config_settings_name_plugins_by_file():
    from kvstats.sweep.store import config_settings

    assert config_settings({"plugins": ["/x/p.py", "/y/q.py"], "seed": 2}) == {"plugins": ["p.py", "q.py"], "seed": 2}
    assert config_settings({"seed": 2}) == {"seed": 2}
