"""replay_trials of a path that does not exist says what a source may be.

Found by a referee pass (2026-12-02): a mistyped sweep folder, ``replay_trials("results/qiuck",
...)``, was read as a TOML config and refused as "config file 'results/qiuck' does not exist".
"""

import pytest

from kvstats.sweep import replay_trials


def test_a_missing_source_is_named_as_a_folder_or_a_config(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^source '.*qiuck' does not exist: give a sweep folder "
                                                r"\(written by `kvstats sweep`\) or a TOML config$"):
        replay_trials(tmp_path / "qiuck", trials=0)
