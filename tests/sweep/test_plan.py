"""The plan of a sweep: which cells a config makes and how many trials a chunk holds.

Both guards were found missing by mutation: ignoring a scheme's own ``budgets``, and
sizing automatic chunks by N·d instead of max(N, d)·d, passed every other sweep test.
"""

from kvstats.sweep import SweepConfig, plan


def test_a_schemes_budgets_override_the_sweeps():
    cfg = SweepConfig.from_dict({
        "schemes": ["KV", {"name": "KQV", "budgets": [2, 4]}, "K4V2"],
        "budgets": [3], "distributions": ["gaussian"], "dims": [16], "n_keys": [8], "n_trials": 4})
    got = [(c.scheme.display(), c.budget) for c in cfg.cells()]
    # KV at the sweep's budgets, KQV at its own, a fixed-budget scheme once (its bits are its
    # own; budgets of its own are refused: tests/sweep/test_reproducibility.py)
    assert got == [("KV", 3), ("KQV", 2), ("KQV", 4), ("K4V2", None)]
    assert SweepConfig.from_dict(cfg.to_dict()).cells() == cfg.cells()


def test_automatic_chunks_are_the_documented_function_of_n_and_d():
    """chunk = min(n_trials, max(1, 2**24 // (max(N, d)·d))) (config docstring)."""
    cfg = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"], "n_trials": 10**6})
    assert plan._AUTO_CHUNK_ENTRIES == 2**24
    # (N, d) -> 2**24 // (max(N, d)·d), worked by hand
    for (n, d), chunk in {(1024, 128): 128, (8, 256): 256, (256, 256): 256, (64, 128): 1024,
                          (2**20, 64): 1, (2**25, 1): 1}.items():
        assert cfg.chunk_for(n, d) == chunk, (n, d)
    small = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"], "n_trials": 7})
    assert small.chunk_for(8, 16) == 7  # never more than the trials
    fixed = SweepConfig.from_dict({"schemes": ["KQV"], "distributions": ["gaussian"], "n_trials": 7,
                                   "chunk_size": 3})
    assert fixed.chunk_for(1024, 128) == 3 and fixed.chunk_for(8, 256) == 3


BASE = {"schemes": ["KQV"], "budgets": [3], "distributions": [{"name": "heavy_tailed", "params": {"nu": 3.0}}],
        "dims": [16], "n_keys": [8], "n_trials": 4, "chunk_size": 2, "seed": 1, "comparisons": []}
# every setting that changes a cell's numbers or its rows, changed
CHANGED = {"seed": 2, "n_trials": 5, "n_queries": 2, "chunk_size": 4, "dtype": "float32", "generator": 2,
           "budgets": [4], "dims": [32], "n_keys": [16],
           "schemes": [{"name": "KQV", "params": {"norm_dtype": "float32"}}],
           "distributions": [{"name": "heavy_tailed", "params": {"nu": 4.0}}],
           "label": [{"name": "KQV", "label": "mine"}]}


def test_a_resume_under_a_changed_config_reuses_no_cell_it_changes(tmp_path):
    """A resumed sweep never mixes in cells computed under another config: each setting that
    changes a cell's numbers (or its rows' labels) gives its cell another id, and a resume
    reuses a stored cell by id (and key) only; the report's settings change no id."""
    import shutil

    from kvstats.sweep import run_sweep

    def ids(cfg):
        config = SweepConfig.from_dict(cfg)
        return [config.cell_id(c) for c in config.cells()]

    (base_id,) = ids(BASE)
    for key, value in CHANGED.items():
        (changed,) = ids({**BASE, ("schemes" if key == "label" else key): value})
        assert changed != base_id, key
    assert ids({**BASE, "report": {"alpha": 0.01, "bootstrap_resamples": 99}}) == [base_id]
    # end to end: a stored cell is resumed under the report's change, not under n_queries'
    base = tmp_path / "base"
    run_sweep(BASE, out=base, executor="serial", progress=False)
    for key, value, want in [("report", {"alpha": 0.01}, "resumed"), ("n_queries", 2, "computed")]:
        shutil.copytree(base, tmp_path / key)
        res = run_sweep({**BASE, key: value}, out=tmp_path / key, executor="serial", progress=False)
        assert [c["status"] for c in res.manifest["cells"]] == [want], key
