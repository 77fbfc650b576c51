"""experiments/lowrank_claims.py: which tests of Claim 3's study pair trials, and when.

The script is loaded from its file (experiments/ is not a package). KQV and KV code the
same trials of a sweep case, so their comparison is paired (sign tests); klt against KQV
is paired only where the two sweeps drew the same trials (``shared_trials``, checked here
on tiny real sweeps).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import METRICS, compare_schemes


@pytest.fixture(scope="module")
def script(load_experiment):
    return load_experiment("lowrank_claims")


def _frame(schemes=("KQV", "KV"), n=32, seed=0, shift=0.3):
    # one low-rank case, the schemes on shared trials: a large trial effect shared by both
    # (sd 5) and, for the second scheme, kl larger by `shift` on every trial (noise sd 0.1):
    # the sign test sees the shift on (almost) every pair, Mann–Whitney drowns it in the
    # trial effect
    rng = np.random.default_rng(seed)
    shared = {m: rng.normal(0, 5, n) for m in METRICS}
    cells = []
    for i, scheme in enumerate(schemes):
        values = {m: shared[m] + rng.normal(0, 0.1, n) for m in METRICS}
        values["kl"] = values["kl"] + i * shift
        cells.append(pd.DataFrame(values).assign(
            distribution="low_rank", params="rank=2", dim=64, n_keys=128, budget=4.0, scheme=scheme,
            bits_nominal=4.0, bits_total=4.25, trial=np.arange(n), level="sharp", case="r2 Ed σ0 iso"))
    return pd.concat(cells, ignore_index=True)


def test_rotation_tests_are_paired(script):
    f = _frame()
    rot = script.rotation_tests(f)
    assert rot.attrs["pairing"] == "trial" and set(rot["test"]) == {"sign"}
    kl = rot.set_index("metric").loc["kl"]
    assert kl["significant"] and kl["winner"] == "KQV" and kl["effect"] < -0.9   # KV larger on the pairs
    # the same frame two-sample: the shift is not found (why the design matters here)
    lr = f.assign(distribution=f["level"] + "|" + f["case"])
    mw = compare_schemes(lr, [("KQV", "KV")], metrics=["kl", "phi_k"], energy=False, pairing="none")
    assert not mw.set_index(["metric", "test"]).loc[("kl", "mann_whitney"), "significant"]
    # a trial missing on one side is refused, not silently paired off
    with pytest.raises(ValueError, match="only in KV's rows"):
        script.rotation_tests(f[~((f["scheme"] == "KQV") & (f["trial"] == 3))])


def test_klt_tests_take_the_design(script):
    f = _frame(("KQV", "KV", "klt_r2"))
    main, klt = f.query("scheme != 'klt_r2'"), f.query("scheme == 'klt_r2' and trial < 16")
    main = pd.concat([main, main.query("scheme == 'KQV'").assign(budget=2.0)], ignore_index=True)
    paired = script.klt_tests(main, klt, 99, pairing="trial")
    assert paired.attrs["pairing"] == "trial" and set(paired["test"]) == {"sign"}
    assert (paired["n_a"] == 16).all()                     # the klt sweep's 16 trials
    two = script.klt_tests(main, klt, 99, pairing="none")
    assert set(two["test"]) == {"mann_whitney"}
    # the klt shift (on top of the shared trial effect) only the paired test finds
    sig = lambda t: t[t["metric"] == "kl"]["significant"].all()  # noqa: E731
    assert sig(paired) and not two[two["metric"] == "kl"]["significant"].any()


def _sweep(tmp_path, name, **over):
    cfg = {"schemes": [over.pop("scheme", "KV")], "budgets": [2], "dims": [16], "n_keys": [8],
           "n_trials": 8, "seed": 11, "dtype": "float32",
           "distributions": [{"name": "low_rank", "params": [{"rank": 2}, {"rank": 4}]}], **over}
    out = tmp_path / name
    kvstats.run_sweep(cfg, out, executor="serial", progress=False)
    return out


def test_shared_trials_regenerates_both_sweeps(script, tmp_path):
    main = _sweep(tmp_path, "main")
    # fewer trials, another scheme, another chunking whose first chunk holds them all: same data
    ok, why = script.shared_trials(main, _sweep(tmp_path, "klt", scheme="KQV", n_trials=4, chunk_size=4))
    assert ok, why
    # trials 2, 3 start a second chunk (another data seed) in this main sweep: not the same
    ok, why = script.shared_trials(_sweep(tmp_path, "main2", chunk_size=2), tmp_path / "klt")
    assert not ok and "draws other data" in why
    ok, why = script.shared_trials(main, _sweep(tmp_path, "seed", n_trials=4, seed=12))
    assert not ok and "draws other data" in why
    ok, why = script.shared_trials(main, _sweep(tmp_path, "case", n_trials=4, distributions=[
        {"name": "low_rank", "params": {"rank": 3}}]))
    assert not ok and "has no case" in why
    ok, why = script.shared_trials(_sweep(tmp_path, "few", n_trials=2), main)
    assert not ok and "8 trials per cell" in why


def test_sweep_trials_follow_the_chunks(script):
    # kvstats.sweep.plan: chunk b of a case is drawn at the data seed of (root seed, case
    # key, b); trial t is row t - b·chunk of its chunk's draw
    from kvstats.sweep import SweepConfig
    from kvstats.sweep.plan import _derive_seed

    cfg = SweepConfig.from_dict({"schemes": ["KV"], "budgets": [2], "dims": [16], "n_keys": [8],
                                 "n_trials": 6, "chunk_size": 4, "seed": 11, "dtype": "float32",
                                 "distributions": [{"name": "low_rank", "params": {"rank": 2}}]})
    cell = cfg.cells()[0]
    got = script._sweep_trials(cfg, cell, np.array([1, 4, 5]))
    draws = [kvstats.sample("low_rank", t, 8, 16, seed=_derive_seed(11, "data", cell.case_key(), b),
                            dtype=np.float32, rank=2) for b, t in ((0, 4), (1, 2))]
    for name in ("K", "V", "q"):
        want = np.concatenate([getattr(draws[0], name)[[1]], getattr(draws[1], name)[[0, 1]]])
        assert np.array_equal(got[name], want)
