"""The store cannot be fooled: damaged cells are recomputed, results pair with their manifest,
one sweep per folder (lock, stale outputs removed), kill -9 and resume, unguarded scripts.

Every fault ends with the per-trial table equal, bit for bit, to an uninterrupted run, or
with a clear refusal. Each guard was checked by mutation once: dropping the content hash
check from ``check_cell`` fails the "edited" cases, dropping the ``run`` comparison from
``load_result`` fails the pairing test, taking no lock fails the lock test.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.cli import main
from kvstats.results import load_result
from kvstats.sweep import run_sweep, store
from kvstats.sweep.store import SweepLockedError, lock_dir

ROOT = Path(__file__).resolve().parents[2]
TINY = {"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8], "n_trials": 6, "chunk_size": 4, "seed": 11}
OTHER = {**TINY, "seed": 12, "budgets": [3, 4]}


def _toml(cfg: dict) -> str:
    """The TOML text of a flat config of scalars, lists and scheme/distribution names."""
    lines = ["[sweep]"]
    for key, value in cfg.items():
        if key not in ("schemes", "distributions"):
            lines.append(f"{key} = {json.dumps(value)}")
    lines += [f'[[schemes]]\nname = "{s}"' for s in cfg["schemes"]]
    lines += [f'[[distributions]]\nname = "{d}"' for d in cfg["distributions"]]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def reference():
    return run_sweep(TINY, executor="serial", progress=False).frame


def _env():
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


# ---------------------------------------------------------------- damaged cells
def _damage(path: Path, how: str, other: Path) -> None:
    """Damage one stored cell file in place, keeping it a well-formed file where it can."""
    if how == "other_cell":  # another cell's file copied over this one's
        path.write_bytes(other.read_bytes())
    elif how == "truncated":  # cut mid-file (a torn copy)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if how == "short":  # a valid file with 4 of 6 rows, metadata kept
            table = table.slice(0, 4)
        elif how == "edited":  # one number changed, metadata kept
            kl = table.column("kl").to_numpy().copy()
            kl[2] *= 1.5
            table = table.set_column(table.schema.get_field_index("kl"), "kl", pa.array(kl))
        elif how == "no_metadata":  # what an older kvstats or another program writes
            table = table.replace_schema_metadata({})
        pq.write_table(table, path)
    else:
        lines = path.read_text().splitlines(keepends=True)
        if how == "short":  # the last two rows dropped: still valid CSV
            lines = lines[:-2]
        elif how == "edited":  # one decimal of one float changed
            row = lines[3]
            i = row.index(".") + 1
            lines[3] = row[:i] + ("2" if row[i] != "2" else "3") + row[i + 1:]
        elif how == "no_metadata":
            lines = lines[1:]
        path.write_text("".join(lines))


DAMAGES = ("other_cell", "short", "truncated", "edited", "no_metadata")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_damaged_cells_are_recomputed(same_bits, tmp_path, fmt, reference, monkeypatch, capfd):
    if fmt == "csv":
        monkeypatch.setattr(store, "_has_parquet", lambda: False)
    run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    cells = sorted((tmp_path / "cells").iterdir())
    assert len(cells) == 6 and {p.suffix for p in cells} == {f".{fmt}"}
    for path, how in zip(cells, DAMAGES):
        _damage(path, how, cells[-1])
    capfd.readouterr()
    again = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    err = capfd.readouterr().err
    status = {c["id"]: c for c in again.manifest["cells"]}
    for path in cells[:5]:
        assert status[path.stem]["status"] == "recomputed", (path, status[path.stem])
        assert f"cell {path.stem}" in err
    assert err.count("recomputing it") == 5
    assert status[cells[5].stem]["status"] == "resumed"
    assert again.manifest["n_computed"] == 5   # a recomputed cell was computed
    same_bits(again.frame, reference)
    same_bits(load_result(tmp_path).frame, reference)
    # the repaired store is trusted again: nothing recomputed
    assert run_sweep(TINY, out=tmp_path, executor="serial", progress=False).manifest["n_computed"] == 0


def _metadata(path: Path, raw: bytes) -> None:
    """Replace the kvstats record of a parquet cell with ``raw``, its rows kept."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"kvstats": raw}), path)


FOREIGN = {   # what lies at a cell's name -> the start of the reason it is recomputed
    "empty": "cannot be read as a table (truncated, or not a cell file): ArrowInvalid: ",
    "text": "cannot be read as a table (truncated, or not a cell file): ArrowInvalid: ",
    "record not JSON": "cannot be read as a table (truncated, or not a cell file): JSONDecodeError: ",
    "record a JSON list": "carries a metadata record that is not kvstats' (a JSON list)",
    "record a JSON string": "carries a metadata record that is not kvstats' (a JSON str)",
}


def test_a_foreign_or_corrupt_file_in_the_place_of_a_cell_is_recomputed(same_bits, tmp_path, reference,
                                                                         capfd):
    """Whatever lies at a cell's name (an empty or text file, a parquet file whose record is
    not kvstats' JSON object): the resumed sweep says in one line why it recomputes that
    cell, and gives the uninterrupted sweep's frame; never a traceback."""
    run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    paths = sorted((tmp_path / "cells").iterdir())
    for path, how in zip(paths, FOREIGN):
        if how == "empty":
            path.write_bytes(b"")
        elif how == "text":
            path.write_text("trial,kl\n0,0.5\n")
        else:
            _metadata(path, {"record not JSON": b"{nope", "record a JSON list": b"[1, 2]",
                             "record a JSON string": b'"cell"'}[how])
    capfd.readouterr()
    res = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    cells = {c["id"]: c for c in res.manifest["cells"]}
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "recomputing it" in ln]
    assert len(lines) == len(FOREIGN)
    for path, reason in zip(paths, FOREIGN.values()):
        cell = cells[path.stem]
        assert cell["status"] == "recomputed" and cell["reason"].startswith(reason), cell
        assert str(tmp_path) not in cell["reason"]   # the line names the cell, not its path again
        (line,) = [ln for ln in lines if ln.startswith(f"kvstats sweep: cell {path.stem} (")]
        assert reason in line, line
    assert cells[paths[-1].stem]["status"] == "resumed"
    same_bits(res.frame, reference)


def test_a_cell_with_rows_of_another_cell_is_not_reused(same_bits, tmp_path, reference):
    """Metadata copied with the file name changed: the rows still say which cell they are."""
    run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    a, b = sorted((tmp_path / "cells").iterdir())[:2]
    b.write_bytes(a.read_bytes())
    meta = json.loads(__import__("pyarrow.parquet").parquet.read_schema(b).metadata[b"kvstats"])
    assert meta["cell_id"] == a.stem
    res = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert {c["id"]: c["status"] for c in res.manifest["cells"]}[b.stem] == "recomputed"
    same_bits(res.frame, reference)


@pytest.mark.parametrize("fault, reason", [
    ("rows of another cell", "holds rows of another cell"),
    ("trials out of order", "does not hold trials 0..5 in order"),
    ("a trial twice", "does not hold trials 0..5 in order"),
    ("a metric of a later version missing",
     "lacks the column(s) ['ip_slope'] of this version's schema"),
    ("the trial column missing", "lacks the column(s) ['trial'] of this version's schema"),  # named once
])
def test_rows_are_checked_even_under_a_consistent_record(tmp_path, reference, fault, reason):
    """A file whose metadata record was written for its (wrong) rows, so the record, the row
    count and the content hash all agree: only the checks of the rows can refuse it."""
    cid = reference["cell_id"].iloc[0]
    cell = reference[reference["cell_id"] == cid].reset_index(drop=True)
    other = reference[reference["cell_id"] != cid]["cell_id"].iloc[0]
    bad = {"rows of another cell": lambda f: f.assign(cell_id=other),
           "trials out of order": lambda f: f.iloc[::-1].reset_index(drop=True),
           "a trial twice": lambda f: f.assign(trial=[0, 1, 2, 3, 4, 4]),
           "a metric of a later version missing": lambda f: f.drop(columns="ip_slope"),
           "the trial column missing": lambda f: f.drop(columns="trial")}[fault](cell)
    assert store.load_cell(tmp_path, cid, key="k", n_trials=len(cell)) == (None, None)  # no file
    store.write_cell(tmp_path, cid, cell, key="k", config="c")
    assert store.load_cell(tmp_path, cid, key="k", n_trials=len(cell))[1] is None  # the good file
    store.write_cell(tmp_path, cid, bad, key="k", config="c")
    assert store.load_cell(tmp_path, cid, key="k", n_trials=len(cell)) == (None, reason)
    # the key is checked beside the id (same id, another cell key)
    store.write_cell(tmp_path, cid, cell, key="k", config="c")
    assert store.load_cell(tmp_path, cid, key="k2", n_trials=len(cell))[1].startswith("is the file of another cell")


def test_clearing_removes_the_manifest_first(tmp_path):
    """An interrupted sweep must not leave the earlier sweep's manifest beside its own cells
    and results: the manifest goes before anything else."""
    run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    removed = store.clear_outputs(tmp_path, set())
    assert removed[0] == "manifest.json" and not (tmp_path / "manifest.json").exists()
    assert "results.parquet" in removed and not (tmp_path / "results.parquet").exists()


def test_a_csv_cell_holding_a_nan_of_another_bit_pattern_is_reused(tmp_path, monkeypatch):
    """x86's inf − inf is a NaN with the sign bit set; CSV writes it "NaN" and reads back
    numpy's NaN. The content hash makes NaNs one bit pattern, or such a cell would fail
    its check (and be recomputed) on every resume."""
    from kvstats.metrics.profile import PROFILE_COLUMNS
    from kvstats.results import CELL_COLUMNS, frame_digest

    monkeypatch.setattr(store, "_has_parquet", lambda: False)
    neg_nan = np.array([0xFFF8000000000000], dtype=np.uint64).view(np.float64)[0]
    assert np.isnan(neg_nan) and np.signbit(neg_nan)
    cell = pd.DataFrame({c: [0, 0] for c in CELL_COLUMNS + PROFILE_COLUMNS}).assign(
        trial=[0, 1], cell_id="c1", kl=[0.5, neg_nan])
    assert frame_digest(cell) == frame_digest(cell.assign(kl=[0.5, np.nan]))
    store.write_cell(tmp_path, "c1", cell, key="k", config="c")
    frame, reason = store.load_cell(tmp_path, "c1", key="k", n_trials=2)
    assert reason is None and np.isnan(frame["kl"].iloc[1])


# ---------------------------------------------------------------- results + manifest
def test_results_and_manifest_cannot_be_paired_across_sweeps(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    run_sweep(TINY, out=a, executor="serial", progress=False)
    run_sweep(OTHER, out=b, executor="serial", progress=False)
    good = (a / "results.parquet").read_bytes()
    (a / "results.parquet").write_bytes((b / "results.parquet").read_bytes())
    with pytest.raises(ValueError, match="do not belong together: .*another config"):
        load_result(a)
    assert main(["report", str(a), "--no-figures"]) == 2
    assert "do not belong together" in capsys.readouterr().err
    # the same config run twice: the results of one run beside the manifest of the other
    (a / "results.parquet").write_bytes(good)
    man = (a / "manifest.json").read_text()
    run_sweep(TINY, out=a, executor="serial", progress=False)
    (a / "manifest.json").write_text(man)
    with pytest.raises(ValueError, match="different runs"):
        load_result(a)
    # torn results, truncated manifest: errors naming the file
    run_sweep(TINY, out=a, executor="serial", progress=False)
    data = (a / "results.parquet").read_bytes()
    (a / "results.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"results\.parquet' cannot be read"):
        load_result(a)
    (a / "manifest.json").write_text(man[:100])
    with pytest.raises(ValueError, match=r"manifest '.*manifest\.json' is not valid JSON"):
        load_result(a)


def test_stale_outputs_of_another_sweep_are_removed(tmp_path, capfd):
    run_sweep(OTHER, out=tmp_path, executor="serial", progress=False)
    for name in ("figures/old.png", "figures/old.svg", "tables/summary.csv", "report.md",
                 "cells/.x.parquet.0123.tmp", ".manifest.json.99.tmp"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("old")
    # the earlier report's tables and figures are removed as its record names them (a figure
    # of yours beside them stays: tests/sweep/test_folder_ownership_rm.py)
    old = hashlib.sha256(b"old").hexdigest()
    (tmp_path / "report_files.json").write_text(json.dumps({"kvstats_report_files": 1, "files": {
        rel: old for rel in ("figures/old.png", "figures/old.svg", "tables/summary.csv")}}))
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "figures" / "mine.pdf").write_text("mine")
    old_cells = {p.name for p in (tmp_path / "cells").iterdir() if not p.name.startswith(".")}
    capfd.readouterr()
    res = run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert "removed" in capfd.readouterr().err
    left = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}
    assert left == ({"notes.txt", "figures", "figures/mine.pdf", ".kvstats.lock", "manifest.json",
                     "results.parquet", "cells"} | {f"cells/{c['id']}.parquet" for c in res.manifest["cells"]})
    assert not old_cells & {p.name for p in (tmp_path / "cells").iterdir()}


def test_a_folder_that_holds_no_sweep_is_not_cleared(tmp_path):
    """`--out docs` by mistake must not delete the figures kvstats did not write: the sweep
    refuses such a folder (tests/sweep/test_out_folder.py), and clearing, called on it
    anyway, removes nothing."""
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "diagram.png").write_text("theirs")
    (tmp_path / "report.md").write_text("theirs")
    with pytest.raises(ValueError, match="nothing kvstats wrote"):
        run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert store.clear_outputs(tmp_path, set()) == []
    assert (tmp_path / "figures" / "diagram.png").read_text() == "theirs"
    assert (tmp_path / "report.md").read_text() == "theirs"


# ---------------------------------------------------------------- one sweep per folder
_HOLD = """
import sys
from kvstats.sweep.store import lock_dir
with lock_dir(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_sweep_into_a_locked_folder_refuses(same_bits, tmp_path, capsys, reference):
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(SweepLockedError, match=rf"in use by another sweep \(pid {holder.pid} "):
            run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
        cfg = tmp_path.parent / f"{tmp_path.name}.toml"
        cfg.write_text(_toml(TINY))
        assert main(["sweep", "--config", str(cfg), "--out", str(tmp_path), "--workers", "1",
                     "--no-progress", "--no-report"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "in use by another sweep" in err
        assert sorted(p.name for p in tmp_path.iterdir()) == [".kvstats.lock"]  # nothing written
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    same_bits(run_sweep(TINY, out=tmp_path, executor="serial", progress=False).frame, reference)


def test_the_lock_is_per_thread_and_reentrant(tmp_path):
    errors = []
    with lock_dir(tmp_path), lock_dir(tmp_path):
        t = threading.Thread(target=lambda: errors.append(_try_lock(tmp_path)))
        t.start()
        t.join()
    assert errors == ["in use by another sweep in this process"]
    with lock_dir(tmp_path):  # released
        pass
    with pytest.raises(NotADirectoryError, match="is a file"):
        with lock_dir(tmp_path / ".kvstats.lock"):
            pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork start method only")
def test_a_pool_kept_across_sweeps_does_not_lock_the_folder(same_bits, tmp_path, reference):
    """A process pool the caller keeps (executor=pool) forks its workers during the first
    sweep; they outlive it with copies of its descriptors, and an flock stays until every
    copy is closed: the rerun (a resume) must not be refused as "in use by another sweep".
    In a fresh interpreter: a fork from a test process that loaded jax (other test files)
    could deadlock on jax's threads."""
    script = (
        "import concurrent.futures as cf, json, multiprocessing, sys\n"
        "from kvstats.sweep import run_sweep\n"
        "cfg, out = json.loads(sys.argv[1]), sys.argv[2]\n"
        "with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('fork')) as pool:\n"
        "    run_sweep(cfg, out=out, executor=pool, progress=False)\n"
        "    again = run_sweep(cfg, out=out, executor=pool, progress=False)\n"
        "print(sorted({c['status'] for c in again.manifest['cells']}))\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(TINY), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['resumed']"
    same_bits(load_result(tmp_path).frame, reference)


def _try_lock(path):
    try:
        with lock_dir(path):
            return "taken"
    except SweepLockedError as exc:
        return "in use by another sweep in this process" if "in this process" in str(exc) else str(exc)


def test_concurrent_sweeps_of_two_configs_into_one_folder(same_bits, tmp_path):
    """Two processes at once: each finishes or refuses clearly; the folder is one sweep."""
    out = tmp_path / "out"
    procs = []
    for name, cfg in (("a", TINY), ("b", OTHER)):
        path = tmp_path / f"{name}.toml"
        path.write_text(_toml(cfg))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "kvstats.cli", "sweep", "--config", str(path), "--out", str(out),
             "--workers", "1", "--no-progress", "--no-report"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()))
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(rc in (0, 2) for rc, _ in results), results
    assert any(rc == 0 for rc, _ in results), results
    for rc, err in results:
        if rc == 2:
            assert "in use by another sweep" in err and err.count("\n") == 1, err
    res = load_result(out)  # a matching pair, whichever finished last
    cfg = TINY if res.config.seed == TINY["seed"] else OTHER
    same_bits(res.frame, run_sweep(cfg, executor="serial", progress=False).frame)
    assert not list(out.rglob("*.tmp"))


def test_kill_9_at_random_points_then_resume(same_bits, tmp_path):
    """SIGKILL a CLI sweep twice at random points (each after some more cells are written,
    plus a random delay), then resume: the table equals an uninterrupted run bit for bit;
    nothing half-written is ever read."""
    cfg = {**TINY, "schemes": ["KV", "KQV", "QKQV", "K4V2"], "budgets": [2, 3, 4], "n_trials": 24,
           "chunk_size": 8, "dims": [16, 32], "n_keys": [32], "distributions": ["gaussian", "low_rank"]}
    path = tmp_path / "k.toml"
    path.write_text(_toml(cfg))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kvstats.cli", "sweep", "--config", str(path), "--out", str(out),
           "--workers", "1", "--no-progress", "--no-report", "--resume"]

    def n_cells():
        return len(list(out.glob("cells/*.parquet")))

    rng = np.random.default_rng(2026)
    interrupted = 0
    for target in (5, 21):  # of 40 cells, written a case (10 cells) at a time
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        while n_cells() < target and proc.poll() is None:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.02))
        interrupted += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert interrupted >= 1
    assert 0 < n_cells() < 40
    run_sweep(cfg, out=out, executor="serial", progress=False)  # the resume
    res = load_result(out)
    assert res.manifest["n_cells"] == 40
    same_bits(res.frame, run_sweep(cfg, executor="serial", progress=False).frame)
    assert not list(out.rglob("*.tmp"))


# ---------------------------------------------------------------- scripts without a main guard
_SCRIPT = """
import kvstats
res = kvstats.run_sweep({cfg!r}, workers=2, progress=False)
print(res.manifest["executor"], len(res.frame))
"""


def test_a_script_without_main_guard_still_runs(tmp_path):
    """End to end: the default pool would break (workers re-import the script); it runs
    serially with a warning instead."""
    script = tmp_path / "s.py"
    script.write_text(_SCRIPT.format(cfg=TINY))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(),
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["serial", "36"]
    assert "outside `if __name__ ==" in proc.stderr and "runs serially" in proc.stderr


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig"], ids=["plain", "byte-order-mark"])
@pytest.mark.parametrize("source, unguarded", [
    ("probe()\n", True),
    ("def main():\n    probe()\n\nmain()\n", True),
    ("if __name__ == '__main__':\n    probe()\n", False),
    ("def main():\n    probe()\n\nif __name__ == '__main__':\n    main()\n", False),
])
def test_the_main_guard_is_found_on_the_stack(tmp_path, monkeypatch, source, unguarded, encoding):
    """The detection, in process: the script runs as __main__ from its own file (one an
    editor saved with a byte-order mark too: Python runs it, and the check read it as
    invalid syntax and passed it)."""
    import types

    from kvstats.sweep.run import _unguarded_main

    path = tmp_path / "script.py"
    path.write_text(source, encoding=encoding)
    main_module = types.ModuleType("__main__")
    main_module.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "__main__", main_module)
    found = []
    namespace = {"__name__": "__main__", "probe": lambda: found.append(_unguarded_main())}
    exec(compile(source, str(path), "exec"), namespace)
    assert len(found) == 1
    assert (found[0] is not None) == unguarded
    if unguarded:
        assert found[0].startswith(f"{path}:")


def test_concurrent_atomic_writes_of_one_file_all_succeed(tmp_path):
    """Many writers of one cell at once (threads): every write succeeds (unique temporary
    names) and the file is always one whole write, never a mix."""
    frames = [pd.DataFrame({"trial": np.arange(50), "kl": np.full(50, float(i))}) for i in range(8)]
    errors = []

    def write(frame):
        try:
            for _ in range(10):
                store._write_table(frame, tmp_path / "cell", {"n": 1})
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f,)) for f in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    from kvstats.results import read_table_meta

    frame, meta = read_table_meta(tmp_path / "cell.parquet")
    assert meta == {"n": 1} and frame["kl"].nunique() == 1 and len(frame) == 50
    assert [p.name for p in tmp_path.iterdir()] == ["cell.parquet"]


def test_a_broken_pool_says_what_happened(tmp_path, capsys):
    """A pool whose worker died: a WorkerDiedError that names the causes; the CLI prints
    it as one line with exit status 1."""
    import concurrent.futures as cf
    from concurrent.futures.process import BrokenProcessPool

    from kvstats.sweep.run import WorkerDiedError

    class Broken(cf.Executor):
        def submit(self, fn, *args, **kwargs):
            fut = cf.Future()
            fut.set_exception(BrokenProcessPool("a child process terminated abruptly"))
            return fut

    with pytest.raises(WorkerDiedError, match="died abruptly .* not guarded by `if __name__"):
        run_sweep(TINY, out=tmp_path, executor=Broken(), progress=False)
    assert not list((tmp_path / "cells").iterdir())
    # the CLI: one line, exit status 1 (not bad input)
    from kvstats.sweep import run as run_module

    def died(*args, **kwargs):
        exc = WorkerDiedError("a worker process of the sweep died abruptly (...)")
        exc.add_note("[0 of 2 cells finished, kept in ...]")
        raise exc

    cfg = tmp_path.parent / f"{tmp_path.name}.toml"
    cfg.write_text(_toml(TINY))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_module, "_run_checked", died)
        assert main(["sweep", "--config", str(cfg), "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err == ("kvstats sweep: error: a worker process of the sweep died abruptly (...) "
                   "[0 of 2 cells finished, kept in ...]\n")
