"""load_result reads unchecked only what the first manifest layout wrote.

Found by a referee pass (2026-12-02): a manifest with neither the ``"results"`` record nor
``"kvstats_sweep"`` (not written by kvstats: every layout records its number, the first
``"kvstats_sweep": 1``) was taken for the first layout and read without pairing it with the
results file, so the results of another sweep loaded under its config.
"""

import json

import pytest

import kvstats
from kvstats.results import load_result

CFG = {"schemes": ["KQV"], "budgets": [2], "distributions": ["gaussian"], "dims": [16], "n_keys": [8],
       "n_trials": 4, "comparisons": []}


def _edit(path, **changes):
    manifest = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key)
        else:
            manifest[key] = value
    path.write_text(json.dumps(manifest))


def test_a_manifest_of_no_layout_is_paired_and_the_first_layout_is_not(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    kvstats.run_sweep(CFG, out=a, executor="serial", progress=False)
    kvstats.run_sweep({**CFG, "seed": 1}, out=b, executor="serial", progress=False)
    # b's results beside a's manifest, stripped of its record and its layout number
    (a / "results.parquet").write_bytes((b / "results.parquet").read_bytes())
    _edit(a / "manifest.json", results=None, kvstats_sweep=None)
    with pytest.raises(ValueError, match="has no 'results' record; it cannot be paired"):
        load_result(a)
    # the first layout (kvstats_sweep 1, no record) is read as documented, unchecked
    _edit(a / "manifest.json", kvstats_sweep=1)
    assert len(load_result(a).frame) == 4
