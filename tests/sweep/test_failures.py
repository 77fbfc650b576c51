"""How a sweep fails: a cell whose code raises, a disk that fills, a folder that cannot be
written. Each ends with an error that names what failed (one line on the command line, exit
2), finished cells kept and no temporary file left, and a resume that gives the
uninterrupted sweep's frame bit for bit.
"""

import errno
import json
import re
import textwrap

import pytest

from kvstats.cli import main
from kvstats.data.register import registered_distribution
from kvstats.results import load_result
from kvstats.sweep import pool, run, run_sweep, store

# every test leaves the registries and plugins as found (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("user_registries")

GRID = {"schemes": ["KV", "KQV"], "budgets": [2, 3], "dims": [16], "n_keys": [8], "n_trials": 6,
        "chunk_size": 4, "seed": 7, "comparisons": []}

# A distribution that passes the sweep's two-trial check before any compute and fails on
# its chunks of 4: a failure only the compute meets.
PLUGIN = textwrap.dedent('''
    import kvstats

    def sampler(n_trials, n_keys, dim, rng, params):
        if n_trials > 2:
            raise ValueError("sampler broke")
        return rng.standard_normal((n_trials, n_keys, dim))

    kvstats.register_distribution("fails_late", sampler)
''')


def _kept_parts(out) -> tuple[str, str]:
    """Where the note says the sweep's work is kept, and its tail: the finished chunks of
    unfinished cells in cells/parts are counted when there are any (kvstats.sweep.run._kept)."""
    folder = out / "cells" / "parts"
    parts = [p.name.split("-")[0] for p in folder.iterdir()] if folder.is_dir() else []
    if not parts:
        return str(out / "cells"), ""
    return (f"{out / 'cells'} (and {len(parts)} finished chunk(s) of {len(set(parts))} unfinished "
            f"cell(s) in {folder})", " (their missing chunks)")


@pytest.mark.parametrize("executor, workers", [("serial", None), ("process", 2)])
def test_a_cell_that_raises_names_its_case_and_the_finished_cells_resume(tmp_path, same_bits,
                                                                         executor, workers):
    """The failing case's error names it (in a worker process too: the message travels
    back with the exception); the cells finished before are kept and resumed."""
    plugin = tmp_path / "fails.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out"
    cfg = {**GRID, "distributions": ["gaussian", "fails_late"], "plugins": [str(plugin)]}
    with pytest.raises(ValueError) as info:
        run_sweep(cfg, out=out, executor=executor, workers=workers, progress=False)
    assert re.fullmatch(r"sampler broke \[case: fails_late\(-\), d=16, N=8, trials [04]\.\.[35]\]",
                        str(info.value)), str(info.value)
    # the cell files (cells/parts holds the chunks of the unfinished ones: kvstats.sweep.parts)
    kept = sorted(p.stem for p in (out / "cells").iterdir() if p.is_file())
    where, rest = _kept_parts(out)
    assert info.value.__notes__ == [f"[{len(kept)} of 8 cells finished, kept in {where}: rerun "
                                    "with resume (kvstats sweep --resume; run_sweep's default) to "
                                    f"compute only the other {8 - len(kept)}{rest}]"]
    assert not [p for p in (out / "cells").iterdir() if p.suffix == ".tmp"]
    if executor == "serial":   # the gaussian case runs first: its 4 cells are written
        assert len(kept) == 4
    good = {**GRID, "distributions": ["gaussian"]}
    res = run_sweep(good, out=out, executor="serial", progress=False)
    status = {c["id"]: c["status"] for c in res.manifest["cells"]}
    assert sorted(i for i, s in status.items() if s == "resumed") == kept
    same_bits(res.frame, run_sweep(good, executor="serial", progress=False).frame)


@pytest.mark.parametrize("fails_at", [2, 4])
def test_an_error_type_built_otherwise_keeps_its_type_and_names_the_entry_in_a_note(fails_at):
    """A ValueError subclass whose constructor takes other arguments (json.JSONDecodeError),
    raised in the check before any compute (a two-trial draw) or in a chunk, is raised as
    it is with the entry as a note, not replaced by a TypeError about its constructor."""
    def sampler(n_trials, n_keys, dim, rng, params):
        if n_trials == fails_at:
            json.loads("{nope")
        return rng.standard_normal((n_trials, n_keys, dim))

    with registered_distribution("bad_json", sampler):
        with pytest.raises(json.JSONDecodeError) as info:
            run_sweep({**GRID, "distributions": ["bad_json"]}, executor="serial", progress=False)
    assert info.value.__notes__ == [{2: "[distribution 'bad_json' params - at d=16, N=8]",
                                     4: "[case: bad_json(-), d=16, N=8, trials 0..3]"}[fails_at]]


def _toml(path, cfg):
    lines = ["[sweep]"] + [f"{k} = {json.dumps(v)}" for k, v in cfg.items()
                           if k not in ("schemes", "distributions")]
    lines += [f'[[schemes]]\nname = "{s}"' for s in cfg["schemes"]]
    lines += [f'[[distributions]]\nname = "{d}"' for d in cfg["distributions"]]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("full_at", ["the third cell", "the results"])
def test_a_full_disk_is_one_line_and_the_sweep_resumes(tmp_path, monkeypatch, capsys, same_bits, full_at):
    """ENOSPC while a file is written (half of it on disk): exit 2 with one line naming the
    file, no temporary file left, the cells written before kept; the same command with
    --resume then finishes, computing only what is missing."""
    cfg = {**GRID, "distributions": ["gaussian"]}
    config = _toml(tmp_path / "c.toml", cfg)
    out = tmp_path / "out"
    real = store.atomic_write
    writes = []

    def filling(path, write):
        if path.parent.name == "parts":   # a chunk of a cell not complete yet (kvstats.sweep.parts)
            return real(path, write)
        writes.append(path.name)
        full = (len(writes) == 3) if full_at == "the third cell" else path.stem == "results"
        if not full:
            return real(path, write)

        def half(tmp):
            tmp.write_bytes(b"PAR1" + b"\0" * 64)
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
        return real(path, half)

    monkeypatch.setattr(store, "atomic_write", filling)
    args = ["sweep", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress",
            "--no-report"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstats sweep: error: cannot use '") and err.count("\n") == 1, err
    # what is kept and how to resume: after a cell's write, or the results' (every cell kept)
    where, rest = _kept_parts(out)
    note = (f" [2 of 4 cells finished, kept in {where}: rerun with resume (kvstats sweep "
            f"--resume; run_sweep's default) to compute only the other 2{rest}]" if full_at == "the third cell"
            else f" [all 4 cells finished, kept in {out / 'cells'}: rerun with resume (kvstats sweep "
            "--resume; run_sweep's default) to write the results from them, computing nothing]")
    assert err.rstrip().endswith(": No space left on device" + note), err
    left = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert not [n for n in left if n.endswith(".tmp")], left
    cells = [n for n in left if n.endswith(".parquet") and not n.startswith("results") and "-" not in n]
    assert len(cells) == (2 if full_at == "the third cell" else 4)
    assert "manifest.json" not in left and "results.parquet" not in left

    monkeypatch.setattr(store, "atomic_write", real)
    assert main(args + ["--resume"]) == 0
    # (the chunks resumed from cells/parts follow, when there are: "; 2 chunk(s) of ...")
    assert f"4 cells ({4 - len(cells)} computed, {len(cells)} resumed, checked" in capsys.readouterr().out
    same_bits(load_result(out).frame, run_sweep(cfg, executor="serial", progress=False).frame)


def test_an_unwritable_folder_is_refused_before_any_compute(tmp_path, monkeypatch, capsys):
    """The folder's cells/ cannot be written (simulated: tests may run as root, who writes
    everywhere): exit 2 with one line naming the folder, and no cell computed."""
    import tempfile

    config = _toml(tmp_path / "c.toml", {**GRID, "distributions": ["gaussian"]})
    real_mkstemp = tempfile.mkstemp

    def denied(*args, dir=None, **kw):
        if dir is not None and str(dir).startswith(str(tmp_path / "out")):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kw)

    computed = []
    monkeypatch.setattr(tempfile, "mkstemp", denied)
    monkeypatch.setattr(run, "_compute_task", lambda *a, **kw: computed.append(a))
    assert main(["sweep", "--config", str(config), "--out", str(tmp_path / "out"), "--workers", "1",
                 "--no-progress", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err == f"kvstats sweep: error: cannot use '{tmp_path / 'out' / 'cells'}': Permission denied\n"
    assert not computed
    assert not any(p.is_file() for p in (tmp_path / "out" / "cells").iterdir())



def test_an_unwritable_folder_keeps_an_earlier_sweeps_results(tmp_path, monkeypatch, capsys):
    """A sweep of another grid refused for an unwritable cells/ (simulated, as above) is
    refused before it clears the folder: the earlier sweep's manifest, results and cells
    stay as they were."""
    import tempfile

    out = tmp_path / "out"
    first = ["sweep", "--config", str(_toml(tmp_path / "a.toml", {**GRID, "distributions": ["gaussian"]})),
             "--out", str(out), "--workers", "1", "--no-progress", "--no-report"]
    assert main(first) == 0
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert "manifest.json" in before and "results.parquet" in before
    real_mkstemp = tempfile.mkstemp

    def denied(*args, dir=None, **kw):
        if dir is not None and str(dir).startswith(str(out / "cells")):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    other = _toml(tmp_path / "b.toml", {**GRID, "distributions": ["gaussian"], "budgets": [4]})
    capsys.readouterr()
    assert main(["sweep", "--config", str(other), *first[3:]]) == 2
    assert "Permission denied" in capsys.readouterr().err
    after = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert [p for p in after if not p.endswith(".lock")] == [p for p in before if not p.endswith(".lock")]



def test_ctrl_c_says_how_many_cells_it_keeps(tmp_path, monkeypatch, capsys):
    """Ctrl-C when the second case of a serial sweep starts: the KeyboardInterrupt carries the
    kept-cells note (run_sweep) and kvstats sweep prints it with exit 130; --resume then
    computes only the rest."""
    real = run._compute_task

    def interrupted_second(task, emit=None):
        if task.cells[0][0].distribution == "heavy_tailed":
            raise KeyboardInterrupt
        return real(task, emit=emit)

    cfg = {**GRID, "distributions": ["gaussian", "heavy_tailed"]}   # two cases, 4 cells each
    monkeypatch.setattr(run, "_compute_task", interrupted_second)
    with pytest.raises(KeyboardInterrupt) as info:
        run_sweep(cfg, tmp_path / "api", executor="serial", progress=False)
    assert info.value.__notes__ == [
        f"[4 of 8 cells finished, kept in {tmp_path / 'api' / 'cells'}: rerun with resume "
        "(kvstats sweep --resume; run_sweep's default) to compute only the other 4]"]

    config = _toml(tmp_path / "c.toml", cfg)
    args = ["sweep", "--config", str(config), "--out", str(tmp_path / "out"), "--workers", "1",
            "--no-progress", "--no-report"]
    assert main(args) == 130
    assert capsys.readouterr().err == (
        f"kvstats sweep: interrupted; 4 of 8 cells finished, kept in {tmp_path / 'out' / 'cells'}: "
        "rerun the same command with --resume to compute only the other 4\n")
    monkeypatch.setattr(run, "_compute_task", real)
    assert main(args + ["--resume"]) == 0
    assert "8 cells (4 computed, 4 resumed, checked)" in capsys.readouterr().out


# A scheme that fails on one cell (d=32, n=3) of a two-worker pool. Files in the plugin's
# folder order the tasks: the d=32 task raises once the d=16 one runs, and the d=16 and
# d=24 tasks (the latter queued in the pool, so not cancelled) finish only after the sweep
# has said that it waits for them (the test marks it): both finish after the error (or,
# killing, before the worker dies). The file ``action`` says what the failing cell does:
# raise, kill its worker once the other cases' cells are written, or nothing (the
# plugin's bytes, which the cell ids hash, stay the same).
FRAGILE = textwrap.dedent("""
    import os, signal, time
    import numpy as np
    import kvstats
    from kvstats.quant.uniform import UniformTokenCoder

    HERE = os.path.dirname(os.path.abspath(__file__))

    def wait_for(test, what):
        deadline = time.monotonic() + 120   # a safety net, not a bound the test measures
        while not test():
            if time.monotonic() > deadline:
                raise RuntimeError(f"fragile: waited 120 s for {what}")
            time.sleep(0.005)

    def marked(name):
        return os.path.exists(os.path.join(HERE, name))

    def build(bits, dim, params, key_rng, value_rng, draws):
        with open(os.path.join(HERE, "action")) as f:
            ACTION = f.read()
        if int(np.prod(draws)) > 1 and ACTION != "none":   # a chunk, not the sweep's one-draw check
            if dim == 16:
                open(os.path.join(HERE, "started"), "w").close()
            if dim in (16, 24) and ACTION == "raise":
                wait_for(lambda: marked("waiting"), "the sweep's line that it waits")
            elif dim == 32 and bits == 3:
                if ACTION == "raise":
                    wait_for(lambda: marked("started"), "the d=16 task")
                    raise ValueError("fragile broke")
                cells = os.path.join(HERE, "out", "cells")
                wait_for(lambda: len([n for n in os.listdir(cells) if n.endswith(".parquet")]) == 8,
                         "the other cases' cells")
                os.kill(os.getpid(), signal.SIGKILL)
        return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

    def bits_of(bits, dim, n_tokens, params):
        return (n_tokens * (bits * dim + 32),) * 2

    kvstats.register_scheme(kvstats.define_scheme("fragile", build, bits_of, summary="fails at d=32, n=3"))
""")


@pytest.mark.parametrize("action", ["raise", "kill"])
def test_a_failing_cell_in_the_pool_keeps_every_finished_task_and_says_how_to_resume(
        tmp_path, same_bits, capsys, action):
    """One cell of a two-worker pool raises (or kills its worker): the other cases' eight
    cells, finished after the error (or before the worker died), are written; the error
    names the failing cell (or the case its worker was computing) and says how to resume;
    the resumed sweep computes only the failed case and equals an uninterrupted one."""
    plugin = tmp_path / "fragile.py"
    plugin.write_text(FRAGILE)
    (tmp_path / "action").write_text(action)
    out = tmp_path / "out"
    cfg = {**GRID, "schemes": ["KV", "fragile"], "dims": [16, 32, 24], "distributions": ["gaussian"],
           "chunk_size": 6, "plugins": [str(plugin)]}
    said = pool._say

    def say(message):   # the line that the sweep waits: the d=24 task may finish
        said(message)
        if "waiting for the" in message:
            (tmp_path / "waiting").touch()

    error = ValueError if action == "raise" else run.WorkerDiedError
    with pytest.MonkeyPatch.context() as mp, pytest.raises(error) as info:
        mp.setattr(pool, "_say", say)
        run_sweep(cfg, out=out, workers=2, progress=False)
    text = " ".join([str(info.value), *getattr(info.value, "__notes__", ())])
    if action == "raise":
        assert str(info.value) == "fragile broke [cell: 'fragile' at n=3, gaussian(-), d=32, N=8]"
    else:
        assert "while computing the case gaussian(-), d=32, N=8, trials 0..5" in text, text
    assert f"8 of 12 cells finished, kept in {out / 'cells'}" in text, text
    assert "kvstats sweep --resume" in text, text
    kept = sorted(p.stem for p in (out / "cells").iterdir() if p.is_file())
    assert len(kept) == 8, kept
    waited = "a task failed; waiting for the 2 running task(s) to finish" in capsys.readouterr().err
    assert waited == (action == "raise")

    (tmp_path / "action").write_text("none")
    res = run_sweep(cfg, out=out, executor="serial", progress=False)
    status = {c["id"]: c["status"] for c in res.manifest["cells"]}
    assert sorted(i for i, s in status.items() if s == "resumed") == kept
    same_bits(res.frame, run_sweep(cfg, executor="serial", progress=False).frame)
