"""The sweep runner: config validation, stable seeds, pairing, resume, executors, manifest."""

import concurrent.futures as cf
import json

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats import sweep as sw
from kvstats.sweep import SweepConfig, plan, run, run_sweep, work

TINY = {"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [32], "n_trials": 6, "chunk_size": 4, "seed": 11}


def _metrics(frame):
    return frame.drop(columns=[]).reset_index(drop=True)


# ---------------------------------------------------------------- config
def test_config_parsing_and_grid():
    cfg = SweepConfig.from_dict({
        "sweep": {"budgets": [2, 4], "dims": [16, 32], "n_keys": [8], "n_trials": 5},
        "schemes": [{"name": "KQV"}, {"name": "QKQV", "params": {"sketch": "orthogonal"},
                                      "label": "QKQV-orth"}, "K4V2"],
        "distributions": [{"name": "heavy_tailed", "params": [{"nu": 1.5}, {"nu": 3.0}]}],
        "report": {"alpha": 0.01, "comparisons": [["KQV", "QKQV-orth"]]}})
    # 2 param sets x 2 dims x (2 budgets x 2 schemes + 1 fixed-budget scheme)
    assert len(cfg.cells()) == 2 * 2 * 5
    assert cfg.comparisons == (("KQV", "QKQV-orth"),) and cfg.report == {"alpha": 0.01}
    assert SweepConfig.from_dict(cfg.to_dict()) == cfg
    ids = [cfg.cell_id(c) for c in cfg.cells()]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("bad, match", [
    ({"schemes": ["KVQ"]}, r"scheme name must be one of \['KV', 'KQV'"),
    ({"distributions": ["cauchy"]}, r"distribution name must be one of \['gaussian'"),
    ({"budgets": [0, 2]}, r"budgets must be an integer in \[1, 8\]"),
    ({"n_trials": 1}, r"n_trials must be an integer in \[2"),
    ({"schemes": ["KQV", "KQV"]}, "distinct labels"),
    ({"trials": 5}, r"unknown config key\(s\) \['trials'\]"),
    ({"comparisons": [["KQV"]]}, r"list of \(scheme_a, scheme_b\) pairs"),
])
def test_config_errors_are_clear(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SweepConfig.from_dict({**TINY, **bad})


def test_toml_round_trip(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[sweep]\nbudgets = [3]\ndims = [16]\nn_keys = [8]\nn_trials = 4\nseed = 2\n'
                 '[[schemes]]\nname = "KQV"\n[[distributions]]\nname = "low_rank"\n'
                 'params = {rank = 2}\n')
    cfg = SweepConfig.from_toml(p)
    assert cfg.distributions[0].params == {"rank": 2} and cfg.seed == 2
    (tmp_path / "bad.toml").write_text("budgets = [")
    with pytest.raises(ValueError, match="not valid TOML"):
        SweepConfig.from_toml(tmp_path / "bad.toml")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SweepConfig.from_toml(tmp_path / "missing.toml")


def test_derived_seeds_are_stable_known_values():
    # SHA-256 based: the same on every machine and process (Python's hash() is salted).
    a = plan._derive_seed(0, "data", "case")
    assert a == plan._derive_seed(0, "data", "case")
    assert a != plan._derive_seed(1, "data", "case") and a != plan._derive_seed(0, "data", "case2")
    assert plan._stable_words("x")[0] == int.from_bytes(
        bytes.fromhex("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")[:4], "little")


# ---------------------------------------------------------------- results
@pytest.fixture(scope="module")
def tiny():
    return run_sweep(TINY, executor="serial", progress=False)


def test_frame_columns_and_shape(tiny):
    f = tiny.frame
    assert len(f) == 3 * 2 * 6
    for col in sw.CELL_COLUMNS + ("snr_k", "phi_k", "snr_t", "kl", "recall_at_5", "argmax_shift",
                                   "ip_var"):
        assert col in f.columns
    assert sorted(f.trial.unique()) == list(range(6))
    kqv = f[(f.scheme == "KQV") & (f.budget == 3)]
    b = kvstats.make_scheme("KQV", 3, 16).bits_per_coord(32)
    assert kqv.bits_total.iloc[0] == pytest.approx(b.total) and kqv.bits_nominal.iloc[0] == 3
    assert np.isfinite(f[["snr_k", "phi_k", "kl"]].to_numpy()).all()


def test_cells_independent_of_grid_and_order(same_bits, tiny):
    """A cell's numbers depend only on its key and the root seed, not on the other cells."""
    other = {**TINY, "schemes": ["QKQV", "KQV"], "budgets": [3]}
    g = run_sweep(other, executor="serial", progress=False).frame
    for scheme in ("KQV", "QKQV"):
        a = tiny.frame[(tiny.frame.scheme == scheme) & (tiny.frame.budget == 3)].reset_index(drop=True)
        b = g[g.scheme == scheme].reset_index(drop=True)
        same_bits(a, b)


def test_schemes_of_a_case_see_the_same_trials(monkeypatch):
    """Paired design: the data seed depends on the case (and chunk) only."""
    seen = []
    real = work.sample

    def spy(*args, seed, **kw):
        seen.append((args, seed))
        return real(*args, seed=seed, **kw)

    monkeypatch.setattr(work, "sample", spy)
    run_sweep(TINY, executor="serial", progress=False)
    # 2 budgets x 3 schemes, 2 chunks (6 trials, chunk 4): each chunk is drawn once, for all cells
    assert len(seen) == 2
    by_chunk = {}
    for args, seed in seen:
        by_chunk.setdefault(args[1], set()).add(seed)  # args[1] = trials in the chunk
    assert all(len(s) == 1 for s in by_chunk.values()) and len(by_chunk) == 2


def test_chunks_hold_independent_trials(tiny):
    kv = tiny.frame[(tiny.frame.scheme == "KV") & (tiny.frame.budget == 2)]
    assert kv.snr_k.nunique() == len(kv)  # no chunk repeats another's trials


def test_resume_recomputes_only_missing_cells(same_bits, tmp_path, monkeypatch):
    first = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert first.manifest["n_computed"] == 6
    cells = sorted((tmp_path / "cells").iterdir())
    assert len(cells) == 6
    for path in cells[:2]:
        path.unlink()
    calls = []
    real = work.make_scheme

    def counting(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(work, "make_scheme", counting)
    second = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert second.manifest["n_computed"] == 2
    assert len(calls) == 2 * 2  # 2 cells x 2 chunks, nothing else recomputed
    same_bits(first.frame, second.frame)
    statuses = [c["status"] for c in second.manifest["cells"]]
    assert statuses.count("resumed") == 4
    # resume=False recomputes everything
    calls.clear()
    run_sweep(TINY, out=tmp_path, executor="serial", progress=False, resume=False)
    assert len(calls) == 6 * 2


def test_manifest_and_files(same_bits, tmp_path, tiny):
    res = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    man = json.loads((tmp_path / "manifest.json").read_text())
    for key in ("config", "seed", "versions", "git", "started", "finished", "host", "cells"):
        assert key in man
    assert man["versions"]["numpy"] == np.__version__
    assert SweepConfig.from_dict(man["config"]) == SweepConfig.from_dict(TINY)
    loaded = sw.load_result(tmp_path)
    same_bits(loaded.frame, res.frame)
    same_bits(res.frame, tiny.frame)
    with pytest.raises(FileNotFoundError, match="no finished sweep"):
        sw.load_result(tmp_path / "cells")


def test_executors_agree(same_bits, tiny):
    with cf.ThreadPoolExecutor(2) as pool:
        threads = run_sweep(TINY, executor=pool, progress=False)
    procs = run_sweep(TINY, executor=None, workers=2, progress=False)
    same_bits(threads.frame, tiny.frame)
    same_bits(procs.frame, tiny.frame)
    assert procs.manifest["executor"].startswith("ProcessPoolExecutor")
    with pytest.raises(TypeError, match="executor must be"):
        run_sweep(TINY, executor="threads", progress=False)


def test_dask_local_cluster_executor(same_bits, tiny):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        res = run_sweep(TINY, executor=client.get_executor(), progress=False)
    same_bits(res.frame, tiny.frame)


def test_fixed_budget_schemes(tmp_path):
    cfg = {**TINY, "schemes": ["K4V2", "K2V4", "KQV"], "budgets": [3], "comparisons": []}
    f = run_sweep(cfg, executor="serial", progress=False).frame
    assert set(f[f.scheme == "K4V2"].budget) == {3.0}
    assert set(f[f.scheme == "KQV"].budget) == {3.0}


def test_theory_beside_measurement_on_gaussian_keys():
    """Measured key SNR and q·k error-variance inflation agree with the closed forms.

    Reference: the Lloyd–Max distortion of the sphere-coordinate density
    (kvstats.quant.codebook) and the QJL variance ((π/2)‖q‖²‖r‖² − (q·r)²)/m; see
    kvstats.report.theory_table. Gaussian keys, d = 64, 40 trials of 128 keys.
    Tolerances: 0.3 dB for the SNR (the mean of per-key dB exceeds the dB of the mean
    error by a Jensen gap of ~0.1 dB), 20% for the variance ratios (their bootstrap CIs
    at this size are about ±8%).
    """
    from kvstats.report import theory_table

    cfg = {"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3, 4], "distributions": ["gaussian"],
           "dims": [64], "n_keys": [128], "n_trials": 40, "seed": 5}
    t = theory_table(run_sweep(cfg, executor="serial", progress=False).frame, n_resamples=199)
    snr = t[t.quantity == "k_snr_db"]
    assert len(snr) == 9
    assert (snr.measured - snr.predicted).abs().max() < 0.3
    for q in ("ip_var_ratio_same_budget", "ip_var_ratio_residual"):
        rows = t[t.quantity == q]
        assert len(rows) >= 2
        assert ((rows.measured / rows.predicted - 1).abs() < 0.2).all(), rows


def test_results_do_not_depend_on_how_cases_are_split_into_tasks(same_bits, monkeypatch):
    cfg = {**TINY, "n_trials": 10, "chunk_size": 3}  # 4 chunks, the last one short
    monkeypatch.setattr(plan, "_TARGET_TASKS", 1)   # the case in one task (the default splits it)
    assert len(plan._tasks(SweepConfig.from_dict(cfg), [(c, "x") for c in SweepConfig.from_dict(cfg).cells()])) == 1
    whole = run_sweep(cfg, executor="serial", progress=False).frame
    monkeypatch.setattr(plan, "_TARGET_TASKS", 64)  # one task per chunk
    tasks = plan._tasks(SweepConfig.from_dict(cfg), [(c, "x") for c in SweepConfig.from_dict(cfg).cells()])
    assert [(t.first, t.stop) for t in tasks] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    split = run_sweep(cfg, executor="serial", progress=False).frame
    same_bits(whole, split)
    assert split.groupby("cell_id").trial.apply(list).map(lambda t: t == list(range(10))).all()


def test_cells_split_over_tasks_are_written_only_when_complete(same_bits, tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "_TARGET_TASKS", 64)
    real = run._compute_task
    done = []

    def fail_on_second_task(task, emit=None):
        if done:
            raise KeyboardInterrupt  # the sweep is interrupted after the first chunk
        done.append(task)
        return real(task, emit)

    monkeypatch.setattr(run, "_compute_task", fail_on_second_task)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    # every cell still misses its second chunk: no cell file, the first chunks kept as parts
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["parts"]
    assert len(list((tmp_path / "cells" / "parts").iterdir())) == 6
    monkeypatch.setattr(run, "_compute_task", real)
    resumed = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert resumed.manifest["n_computed"] == 6
    same_bits(resumed.frame, run_sweep(TINY, executor="serial", progress=False).frame)
