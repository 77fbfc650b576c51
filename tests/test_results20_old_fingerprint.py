"""A results folder written before an int for a float parameter was read as that float
(nu = 3 recorded as 3, read as 3.0 since 2026-12-03) still loads: its manifest's config as
recorded has the fingerprint its results carry."""

import hashlib
import json

import kvstats
from kvstats.results import load_result


def _digest(config: dict) -> str:
    # the manifest's fingerprint of a config dict as kvstats has always written it
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def test_a_folder_recorded_with_an_int_float_parameter_still_loads(tmp_path, monkeypatch):
    from kvstats.sweep import store

    monkeypatch.setattr(store, "_has_parquet", lambda: False)      # CSV: its metadata line is editable
    out = tmp_path / "old"
    kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 3,
                       "distributions": [{"name": "heavy_tailed", "params": {"nu": 3.0}}]},
                      out=out, executor="serial", progress=False)
    # as an older kvstats wrote it: nu = 3 in the config, the fingerprint of that config
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["config"]["distributions"][0]["params"]["nu"] = 3
    fp = _digest(manifest["config"])
    manifest["config_fingerprint"] = manifest["results"]["config"] = fp
    (out / "manifest.json").write_text(json.dumps(manifest))
    first, rest = (out / "results.csv").read_text().split("\n", 1)
    meta = json.loads(first[len("#kvstats "):])
    meta["config"] = fp
    (out / "results.csv").write_text("#kvstats " + json.dumps(meta) + "\n" + rest)
    res = load_result(out)         # was: "the manifest's record was written for another config"
    assert len(res.frame) == 3 and res.config.distributions[0].params["nu"] == 3.0
