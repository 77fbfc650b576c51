"""kvstats.sweep.replay: any stored trial of a sweep, drawn and coded again, bit for bit.

The small sweep below has schemes with rotations and sketches (KQV, QKQV with an
orthogonal sketch, qjl), a fixed-budget one (K4V2), two distributions and 7 trials in
chunks of 3 (3 + 3 + 1: a short last chunk), so a replay that puts a trial in the wrong
chunk, at the wrong row of its chunk or under the wrong scheme draw changes its row.
"""

import json
import os

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.sweep import SweepConfig, chunk_span, data_seed, replay_trials, run_sweep, scheme_seed
from kvstats.sweep.plan import Cell

CONFIG = {"schemes": ["KV", "KQV", {"name": "QKQV", "params": {"sketch": "orthogonal"}}, "qjl", "K4V2"],
          "budgets": [2, 3], "dims": [16], "n_keys": [8], "n_trials": 7, "chunk_size": 3,
          "n_queries": 2, "seed": 5, "comparisons": [],
          "distributions": [{"name": "heavy_tailed", "params": {"nu": 1.05}},
                            {"name": "low_rank", "params": {"rank": 2}}]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("replay") / "sweep"
    run_sweep(CONFIG, out=out, executor="serial", progress=False)
    return out


def test_every_trial_of_every_cell_replays_bit_for_bit(sweep):
    stored = kvstats.load_result(sweep).frame
    cells = stored.groupby("cell_id")
    assert cells.ngroups == 2 * (4 * 2 + 1)
    order = [6, 0, 3, 5, 1, 4, 2]   # all chunks, the short last one first, out of order
    for cid, rows in cells:
        r = replay_trials(sweep, cell_id=cid, trials=order)
        want = rows.set_index("trial", drop=False).loc[order].reset_index(drop=True)
        pd.testing.assert_frame_equal(r.profile(), want, check_exact=True)
        # the cell named as the table names it is the same cell
        named = replay_trials(sweep, scheme=rows["scheme"].iloc[0], bits=rows["budget"].iloc[0],
                              distribution=rows["distribution"].iloc[0], params=rows["params"].iloc[0],
                              dim=16, n_keys=8, trials=order)
        assert named.cell_id == cid
        pd.testing.assert_frame_equal(r.stored(), want, check_exact=True)


def test_data_scheme_and_roundtrip_are_the_sweeps(sweep):
    cfg = SweepConfig.from_dict(CONFIG)
    r = replay_trials(sweep, scheme="QKQV[sketch='orthogonal']", bits=3, params="nu=1.05", trials=[4, 6])
    assert r.chunk_size == 3 and [r.chunk_of(t) for t in r.trials] == [1, 2]
    # chunk b is kvstats.sample at the case's data seed of b; trial 4 is its row 1
    drawn = kvstats.sample("heavy_tailed", 3, 8, 16, seed=data_seed(5, r.cell, 1), n_queries=2, nu=1.05)
    np.testing.assert_array_equal(r.data.K[0], drawn.K[1])
    np.testing.assert_array_equal(r.data.q[0], drawn.q[1])
    # ... which every scheme of the case sees
    kv = replay_trials(cfg, scheme="KV", bits=2, distribution="heavy_tailed", trials=[4])
    np.testing.assert_array_equal(kv.data.V, r.data.V[:1])
    # the scheme instance: one draw per trial of the chunk, at the cell's scheme seed of b
    scheme, i = r.scheme(6)
    assert scheme.draws == (1,) and i == 0       # the last chunk holds trial 6 alone
    want = kvstats.make_scheme("QKQV", 3, 16, seed=scheme_seed(5, r.cell, 1), draws=3, sketch="orthogonal")
    K_hat, _ = want.roundtrip(drawn.K, drawn.V)
    np.testing.assert_array_equal(r.roundtrip()[0][0], K_hat[1])
    K6, V6 = scheme.roundtrip(r.chunk_data(2).K, r.chunk_data(2).V)
    np.testing.assert_array_equal(r.roundtrip()[1][1], V6[0])
    prof = kvstats.error_profile(r.data, *r.roundtrip())
    np.testing.assert_array_equal(prof["kl"], r.profile()["kl"])


def test_the_seeds_are_those_of_stored_sweeps():
    # Reference values: plan._derive_seed at commit d85d00c (before data_seed and scheme_seed
    # existed); a change here changes the numbers of every stored sweep.
    cell = Cell("heavy_tailed", {"nu": 1.5}, 128, 256, 3, kvstats.sweep.SchemeSpec("KQV"))
    assert data_seed(20261129, cell, 2) == 14197130628202564950
    assert scheme_seed(20261129, cell, 2) == 5811650151155196430
    # a numpy chunk index is the int it equals (json would hash np.int64 as its text)
    assert data_seed(20261129, cell, np.int64(2)) == data_seed(20261129, cell, 2)
    assert scheme_seed(np.uint32(20261129), cell, np.int32(2)) == scheme_seed(20261129, cell, 2)
    assert chunk_span(7, 3, 2) == (6, 1)


@pytest.mark.parametrize("kwargs,err,match", [
    ({"scheme": "QKVQ", "trials": 0}, ValueError,
     r"scheme must be one of \['K4V2', 'KQV', 'KV', \"QKQV\[sketch='orthogonal'\]\", 'qjl'\] .*"
     r"received 'QKVQ'"),
    ({"scheme": "kqv", "trials": 0}, ValueError, r"did you mean 'KQV'"),
    ({"scheme": "KQV", "bits": 4, "trials": 0}, ValueError,
     r"bits must be one of \[2.0, 3.0\] \(the 'budget' values .* scheme='KQV'\); received 4"),
    ({"scheme": "K4V2", "bits": 2, "trials": 0}, ValueError, r"bits must be one of \[3.0\]"),
    ({"distribution": "gauss", "trials": 0}, ValueError,
     r"distribution must be one of \['heavy_tailed', 'low_rank'\]; received 'gauss'|"
     r"distribution must be one of \['heavy_tailed', 'low_rank'\] .*received 'gauss'"),
    ({"params": "nu=1.5", "trials": 0}, ValueError, r"params must be one of \['nu=1.05', 'rank=2'\]"),
    ({"dim": 32, "trials": 0}, ValueError, r"dim must be one of \[16\]"),
    ({"cell_id": "abc", "trials": 0}, ValueError, r"cell_id must be one of \['"),
    ({"scheme": "KQV", "trials": 0}, ValueError,
     r"must name one cell; 4 cells .*give bits \(one of \[2.0, 3.0\]\); distribution"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": 7}, ValueError,
     r"trials must be trial numbers in \[0, 6\] \(the sweep ran n_trials=7 per cell\); received 7"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": [1, 1]}, ValueError, "must not repeat"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": []}, ValueError, "at least one"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": "1"}, TypeError, "trials must be"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": 1.0}, TypeError, "trials must be"),
    ({"scheme": "KQV", "bits": 2, "params": "rank=2", "trials": [True]}, TypeError, "trials must be"),
    ({"scheme": 3, "trials": 0}, TypeError, "scheme must be a string"),
    ({"bits": "2", "trials": 0}, TypeError, "bits must be a number"),
    ({"params": 1.5, "trials": 0}, TypeError, "params must be"),
])
def test_bad_selectors(kwargs, err, match):
    with pytest.raises(err, match=match):
        replay_trials(CONFIG, **kwargs)


def test_params_as_dict_and_chunk_checks(sweep):
    r = replay_trials(sweep, scheme="KQV", bits=2, params={"rank": 2}, trials=3)
    assert r.cell.params == {"rank": 2} and r.trials == (3,)
    # trials from a results column (a Series) or an array
    frame = kvstats.load_result(sweep).frame
    rows = frame[frame.cell_id == r.cell_id].iloc[[5, 2]]
    assert replay_trials(sweep, cell_id=r.cell_id, trials=rows.trial).trials == (5, 2)
    assert replay_trials(sweep, cell_id=r.cell_id, trials=np.arange(2)).trials == (0, 1)
    with pytest.raises(ValueError, match=r"chunk must be an integer in \[0, 2\]; received 3"):
        r.chunk_data(3)
    with pytest.raises(ValueError, match=r"trial must be a trial number in \[0, 6\]"):
        r.scheme(9)


def test_sources(sweep, tmp_path):
    with pytest.raises(FileNotFoundError, match="without manifest.json"):
        replay_trials(tmp_path, scheme="KV", trials=0)
    with pytest.raises(TypeError, match="source must be"):
        replay_trials(3, trials=0)
    # a config (dict, TOML) has no stored rows; a load_result result has
    r = replay_trials(CONFIG, scheme="KV", bits=2, params="rank=2", trials=[2])
    with pytest.raises(ValueError, match="source must be a sweep folder with results"):
        r.stored()
    res = replay_trials(kvstats.load_result(sweep), scheme="KV", bits=2, params="rank=2", trials=[2])
    pd.testing.assert_frame_equal(res.stored(), r.profile(), check_exact=True)
    # the manifest's config is the sweep's
    manifest = json.loads((sweep / "manifest.json").read_text())
    assert SweepConfig.from_dict(manifest["config"]) == SweepConfig.from_dict(CONFIG)


def test_real_capture_cases_replay(tmp_path):
    rng = np.random.default_rng(0)
    path = os.path.join(tmp_path, "cap.npz")
    x = rng.standard_normal((3, 2, 1, 16, 8)).astype(np.float32)  # (texts, layers, KV heads, N, d)
    q = rng.standard_normal((3, 2, 2, 16, 8)).astype(np.float32)
    np.savez(path, K=x, V=x[::-1].copy(), q=q, meta=json.dumps({}))
    cfg = {"schemes": ["KQV"], "budgets": [3], "dims": [8], "n_keys": [16], "n_trials": 5,
           "chunk_size": 2, "comparisons": [], "distributions": [{"name": "real", "params": {"path": path}}]}
    out = tmp_path / "sweep"
    run_sweep(cfg, out=out, executor="serial", progress=False)
    r = replay_trials(out, scheme="KQV", trials=[4, 0, 3])
    pd.testing.assert_frame_equal(r.profile(), r.stored(), check_exact=True)
    assert r.profile()["cluster"].tolist() == [2, 0, 1]   # text of each trial (2 layers per text)
    assert r.data.meta["cluster"] == [2, 0, 1] and r.data.meta["layer"] == [0, 0, 1]
    np.testing.assert_array_equal(r.data.K[1], x[0, 0, 0])
    # the file must still be the one the sweep read
    np.savez(path, K=x * 2, V=x, q=q, meta=json.dumps({}))
    with pytest.raises(ValueError, match=r"capture .*cap.npz' holds other content \(fingerprint .*\) than "
                       r"the sweep in .* read \(fingerprint\(s\) \['"):
        replay_trials(out, scheme="KQV", trials=[0])
    # ... also when it changes after the replay was made (the runner's own check)
    np.savez(path, K=x, V=x[::-1].copy(), q=q, meta=json.dumps({}))
    r = replay_trials(out, scheme="KQV", trials=[0])
    np.savez(path, K=x * 2, V=x, q=q, meta=json.dumps({}))
    with pytest.raises(ValueError, match="changed while the sweep ran"):
        r.data


def test_usage_example_runs(tmp_path, capsys):
    # docs/usage.md "Reproduce one trial", at 40 trials in chunks of 16 (three chunks)
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    section = text[text.index("## Reproduce one trial"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    small = (code.replace('"results/replay_demo"', repr(str(tmp_path / "demo")))
             .replace('"n_trials": 300, "chunk_size": 128', '"n_trials": 40, "chunk_size": 16'))
    assert small.count(str(tmp_path)) == 1 and '"n_trials": 40' in small
    exec(compile(small, "usage.md", "exec"), {})
    assert capsys.readouterr().out.splitlines()[-1] == "True True"
