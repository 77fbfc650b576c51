"""Chunk-level checkpoints: the chunks of cells not complete yet are kept in cells/parts,
and a resume computes only the chunks its cases lack (kvstats.sweep.parts).

The grid has two cases (N = 8 and N = 12) of two cells each (KQV and QKQV at n = 3), 10
trials in chunks of 3 + 3 + 3 + 1: 4 tasks of one chunk per case, run serially in grid
order. An interrupt (a KeyboardInterrupt raised after the 6th chunk the runner is given)
leaves case N = 8 complete (its 2 cells written) and chunks 0 and 1 of case N = 12 as
parts of its 2 cells. The reference is the same sweep run uninterrupted, without a folder.
"""

from __future__ import annotations

import pytest

import kvstats
from kvstats.sweep import run as run_mod
PARTS = "parts"   # cells/parts: kvstats.sweep.parts.PARTS (not imported: the tests run on older code too)

GRID = {"seed": 5, "schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8, 12], "n_trials": 10, "chunk_size": 3, "comparisons": []}


def _counting(monkeypatch, stop_after: int | None = None) -> list[tuple[int, int]]:
    """Replace the serial path's task runner by one that records the chunks it emits as
    (N, first trial) and raises KeyboardInterrupt once ``stop_after`` chunks are emitted."""
    real = run_mod._compute_task
    seen: list[tuple[int, int]] = []

    def task(t, emit=None):
        def counted(done):
            emit(done)
            seen.append((t.cells[0][0].n_keys, done[0][1]))
            if stop_after is not None and len(seen) == stop_after:
                raise KeyboardInterrupt
        return real(t, emit=counted)

    monkeypatch.setattr(run_mod, "_compute_task", task)
    return seen


def _parts(out) -> list[str]:
    folder = out / "cells" / PARTS
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _interrupted(tmp_path, monkeypatch) -> tuple:
    """The interrupted sweep's folder and the uninterrupted reference frame."""
    reference = kvstats.run_sweep(GRID, executor="serial", progress=False).frame
    out = tmp_path / "sweep"
    with monkeypatch.context() as m:
        _counting(m, stop_after=6)
        with pytest.raises(KeyboardInterrupt):
            kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    parts = _parts(out)
    # 2 cells of case N = 12, chunks 0 and 1 each
    assert len(parts) == 4 and {p.split("-")[1].split(".")[0] for p in parts} == {"0", "1"}, parts
    return out, reference


def test_an_interrupted_sweep_resumes_from_its_parts_bit_for_bit(tmp_path, monkeypatch, same_bits, capfd):
    out, reference = _interrupted(tmp_path, monkeypatch)
    assert len(list((out / "cells").glob("*.parquet")) + list((out / "cells").glob("*.csv"))) == 2
    capfd.readouterr()
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    # only chunks 2 (trials 6..8) and 3 (trial 9) of case N = 12: 2 chunks, not 4
    assert seen == [(12, 6), (12, 9)]
    assert "resuming 4 chunk(s) of 2 unfinished cell(s)" in capfd.readouterr().err
    same_bits(res.frame, reference)
    same_bits(kvstats.load_result(out).frame, reference)
    assert not (out / "cells" / PARTS).exists()   # the complete cells' parts are gone
    assert sorted(c["status"] for c in res.manifest["cells"]) == ["computed"] * 2 + ["resumed"] * 2


def test_a_corrupted_part_is_computed_again_with_a_message(tmp_path, monkeypatch, same_bits, capfd):
    out, reference = _interrupted(tmp_path, monkeypatch)
    damaged = out / "cells" / PARTS / _parts(out)[1]   # chunk 1 of one cell
    assert damaged.stem.endswith("-1")
    damaged.write_bytes(damaged.read_bytes()[:40])
    capfd.readouterr()
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    # chunk 1 is computed again for both cells of the case (its data are drawn once for both)
    assert seen == [(12, 3), (12, 6), (12, 9)]
    err = capfd.readouterr().err
    assert f"the stored part {damaged.name} cannot be read as a table" in err
    assert "computing its chunk again" in err and "resuming 2 chunk(s) of 2 unfinished cell(s)" in err
    same_bits(res.frame, reference)


def test_parts_of_other_code_are_computed_again(tmp_path, monkeypatch, same_bits, capfd):
    out, reference = _interrupted(tmp_path, monkeypatch)
    other = {**run_mod.code_version(), "kvstats_source": "0" * 64}
    monkeypatch.setattr(run_mod, "code_version", lambda: other)
    capfd.readouterr()
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    assert sorted(seen) == [(n, s) for n in (8, 12) for s in (0, 3, 6, 9)]   # every chunk again
    assert capfd.readouterr().err.count("was computed by other code; computing its chunk again") == 4
    same_bits(res.frame, reference)


def test_parts_of_another_config_are_removed_not_reused(tmp_path, monkeypatch, same_bits):
    out, _ = _interrupted(tmp_path, monkeypatch)
    old = set(_parts(out))
    other = {**GRID, "seed": 6}   # other cell ids: the id hashes the seed
    seen = _counting(monkeypatch, stop_after=5)   # interrupted again: its own parts only
    with pytest.raises(KeyboardInterrupt):
        kvstats.run_sweep(other, out=out, executor="serial", progress=False)
    assert seen == [(8, s) for s in (0, 3, 6, 9)] + [(12, 0)]
    now = set(_parts(out))
    assert len(now) == 2 and not now & old
    # and a sweep of another chunk size (other ids too) computes every chunk of its own
    monkeypatch.undo()
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep({**other, "chunk_size": 4}, out=out, executor="serial", progress=False)
    assert len(seen) == 6 and _parts(out) == []
    same_bits(res.frame, kvstats.run_sweep({**other, "chunk_size": 4}, executor="serial",
                                           progress=False).frame)


def test_resume_false_ignores_and_removes_parts(tmp_path, monkeypatch, same_bits):
    out, reference = _interrupted(tmp_path, monkeypatch)
    seen = _counting(monkeypatch, stop_after=1)
    with pytest.raises(KeyboardInterrupt):
        kvstats.run_sweep(GRID, out=out, executor="serial", progress=False, resume=False)
    assert seen == [(8, 0)]
    # the 4 earlier parts are gone; only the new run's chunk 0 of case N = 8 is kept
    assert len(_parts(out)) == 2 and all(p.split("-")[1].startswith("0.") for p in _parts(out))
    monkeypatch.undo()
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False, resume=False)
    assert len(seen) == 8
    same_bits(res.frame, reference)


_FAILING_PLUGIN = '''
import kvstats

def short_last(n_trials, n_keys, dim, rng, params):
    if n_trials == 1:   # the last chunk (7 trials in chunks of 2 + 2 + 2 + 1)
        raise RuntimeError("fc: the last chunk fails")
    return rng.standard_normal((n_trials, n_keys, dim))

kvstats.register_distribution("fc_short_last", short_last)
'''


def test_a_pool_keeps_the_parts_of_the_tasks_that_finished(tmp_path, user_registries):
    (tmp_path / "fc_plugin.py").write_text(_FAILING_PLUGIN)
    cfg = {"seed": 1, "schemes": ["KQV", "QKQV"], "budgets": [3], "dims": [16], "n_keys": [8],
           "n_trials": 7, "chunk_size": 2, "comparisons": [], "plugins": [str(tmp_path / "fc_plugin.py")],
           "distributions": ["fc_short_last"]}
    out = tmp_path / "sweep"
    with pytest.raises(RuntimeError, match="the last chunk fails"):
        kvstats.run_sweep(cfg, out=out, workers=2, progress=False)
    parts = _parts(out)
    # one task per chunk: chunks 0..2 finished in the workers, and are kept for both cells
    assert len(parts) == 6 and sorted({p.split("-")[1].split(".")[0] for p in parts}) == ["0", "1", "2"]
    from kvstats.results import read_table_meta
    frame, meta = read_table_meta(out / "cells" / PARTS / parts[0])
    assert frame["trial"].tolist() == [meta["start"], meta["start"] + 1] and meta["kvstats_part"] == 1


def test_a_cell_whose_every_chunk_is_a_part_is_written_without_compute(tmp_path, monkeypatch, same_bits):
    """Parts of every chunk (a sweep stopped between its last part and the cell's write,
    made here by writing chunks 2 and 3 of the reference as parts): nothing is computed."""
    from kvstats.sweep.numeric_env import numeric_env
    from kvstats.sweep import check_grid
    from kvstats.sweep.parts import write_part
    from kvstats.sweep.plan import code_version

    out, reference = _interrupted(tmp_path, monkeypatch)
    for cid, rows in reference[reference["n_keys"] == 12].groupby("cell_id"):
        key = next(c.key() for c, i in check_grid(GRID) if i == cid)
        for chunk, start in ((2, 6), (3, 9)):
            part = rows[rows["trial"] >= start].iloc[:3].reset_index(drop=True)
            write_part(out / "cells", cid, chunk, part, key=key, config="x", code=code_version(),
                       env=numeric_env())
    seen = _counting(monkeypatch)
    res = kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    assert seen == [] and _parts(out) == []
    same_bits(res.frame, reference)


def test_tasks_split_the_missing_chunks_by_their_runs():
    from kvstats.sweep import SweepConfig
    from kvstats.sweep.plan import _tasks

    cfg = SweepConfig.from_dict({**GRID, "n_keys": [8], "n_trials": 20, "chunk_size": 2})
    todo = [(c, cfg.cell_id(c)) for c in cfg.cells()]
    # no chunk done: the split of earlier versions (10 chunks, one task each)
    assert [(t.first, t.stop) for t in _tasks(cfg, todo)] == [(b, b + 1) for b in range(10)]
    done = {todo[0][0].case_key(): {0, 1, 2, 5, 9}}
    assert [(t.first, t.stop) for t in _tasks(cfg, todo, done)] == [(3, 4), (4, 5), (6, 7), (7, 8), (8, 9)]
    every = {todo[0][0].case_key(): set(range(10))}
    assert _tasks(cfg, todo, every) == []
