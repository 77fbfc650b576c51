"""load_result reads the results file its manifest names, not the first suffix present.

A folder can hold both results.parquet and results.csv (one copied in, or left by another
run or another machine with/without pyarrow); the manifest's "results" record says which
one is this sweep's. Before the fix load_result took results.parquet whenever it existed.
"""

import json

import pandas as pd
import pytest

from kvstats.results import load_result, read_table
from kvstats.sweep import run_sweep, store

CFG = {"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"],
       "dims": [16], "n_keys": [8], "n_trials": 4, "seed": 5}


def test_the_named_csv_is_read_beside_a_stale_parquet(tmp_path, monkeypatch):
    other = tmp_path / "other"
    run_sweep({**CFG, "seed": 6}, out=other, executor="serial", progress=False)   # parquet
    out = tmp_path / "out"
    monkeypatch.setattr(store, "_has_parquet", lambda: False)    # this sweep writes CSV
    res = run_sweep(CFG, out=out, executor="serial", progress=False)
    assert res.manifest["results"]["file"] == "results.csv"
    (out / "results.parquet").write_bytes((other / "results.parquet").read_bytes())
    loaded = load_result(out)
    pd.testing.assert_frame_equal(loaded.frame, read_table(out / "results.csv"))
    assert loaded.frame["kl"].tolist() == res.frame["kl"].tolist()


def test_a_missing_named_file_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_has_parquet", lambda: False)
    out = tmp_path / "out"
    run_sweep(CFG, out=out, executor="serial", progress=False)
    (out / "results.csv").rename(out / "results.parquet")     # the named file is gone
    with pytest.raises(FileNotFoundError, match=r"names the results file 'results\.csv'"):
        load_result(out)
    man = json.loads((out / "manifest.json").read_text())
    man["results"]["file"] = "../elsewhere.csv"
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ValueError, match=r"must be one of \['results\.parquet', 'results\.csv'\]"):
        load_result(out)


def test_a_manifest_naming_no_file_falls_back_to_the_suffix_order(tmp_path):
    out = tmp_path / "out"
    res = run_sweep(CFG, out=out, executor="serial", progress=False)
    man = json.loads((out / "manifest.json").read_text())
    del man["results"]                      # the first layout: no record, no file named
    man["kvstats_sweep"] = 1
    (out / "manifest.json").write_text(json.dumps(man))
    assert load_result(out).frame["kl"].tolist() == res.frame["kl"].tolist()


def test_replay_reads_the_named_csv_beside_a_stale_parquet(tmp_path, monkeypatch):
    from kvstats.sweep.replay import replay_trials
    other = tmp_path / "other"
    run_sweep({**CFG, "seed": 6}, out=other, executor="serial", progress=False)   # parquet
    out = tmp_path / "out"
    monkeypatch.setattr(store, "_has_parquet", lambda: False)
    run_sweep(CFG, out=out, executor="serial", progress=False)
    (out / "results.parquet").write_bytes((other / "results.parquet").read_bytes())
    r = replay_trials(out, trials=[1, 2])
    stored = r.stored()
    assert stored["kl"].tolist() == r.profile()["kl"].tolist()


def test_a_corrupt_manifest_is_named_when_replay_reads_the_stored_rows(tmp_path):
    from kvstats.sweep.replay import replay_trials
    out = tmp_path / "out"
    run_sweep(CFG, out=out, executor="serial", progress=False)
    r = replay_trials(out, trials=[1])
    (out / "manifest.json").write_text('{"results": ')       # truncated after the replay's read
    with pytest.raises(ValueError, match=r"manifest .*manifest\.json' is not valid JSON"):
        r.stored()
