import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from kvstats_gpu import bench


def _runbook(args, timeout, **kwargs):
    """``subprocess.run(["bash", "experiments/gpu_runbook.sh", *args], ...)`` in a session of its
    own: where the test's ``timeout`` expires, every process of that session is killed, not
    only bash (each ``timeout`` of the runbook puts itself and its step into a process group
    of its own, so killing bash's group would leave them running)."""
    proc = subprocess.Popen(["bash", "experiments/gpu_runbook.sh", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()   # bash first, so that it starts no further step
        for _ in range(100):   # then the rest, until none is left (a dying parent may fork)
            alive = _in_session(proc.pid)
            if not alive:
                break
            for pid in alive:
                try:
                    os.kill(pid, 9)
                except OSError:   # gone meanwhile
                    pass
            time.sleep(0.05)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _in_session(sid: int) -> list[int]:
    """The live pids of session ``sid`` (Linux /proc: field 6 of /proc/PID/stat, zombies left
    out; none elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()   # after the command name
        except (OSError, IndexError):   # gone meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_peak_bandwidth_table():
    assert bench.peak_bandwidth("NVIDIA H200") == 4.8e12  # NVIDIA H200 data sheet: 4.8 TB/s
    assert bench.peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert bench.peak_bandwidth("cpu") is None


def test_cpu_run_reports_consistent_figures():
    rows = bench.run([512], [("KQV", 4)], n_kv_heads=2, group=2, dim=64, reps=1)
    (row,) = rows
    assert row["tokens"] == 512 and row["scheme"] == "KQV@4"
    # 64-dim KQV at 4 bits per KV head: K 32+2, V 24+2 + 8+2 bytes, vs 2*2*64 in fp16
    assert row["cache_bytes_per_token"] == 2 * (34 + 36)
    assert row["ratio_to_fp16"] == pytest.approx(140 / 512)
    assert row["quant_ms"] > 0 and row["dense_bf16_ms"] > 0
    assert row["quant_GBps"] == pytest.approx(512 * 140 / (row["quant_ms"] * 1e-3) / 1e9)
    # dense bf16 reads K and V (2 heads x 512 tokens x 64 dims x 2 bytes each) and the 4 query heads
    assert row["dense_GBps"] == pytest.approx((2 * 2 * 512 * 64 * 2 + 4 * 64 * 2) / (row["dense_bf16_ms"] * 1e-3) / 1e9)
    assert row["speedup_vs_dense"] == pytest.approx(row["dense_bf16_ms"] / row["quant_ms"])
    if row["platform"] == "cpu":
        assert row["quant_frac_peak"] is None and row["path"].startswith("jnp reference")
        assert row["quant_copies"] == row["dense_copies"] == row["quant_burst"] == row["dense_burst"] == 1
    table = bench._fmt(rows)
    assert table.splitlines()[0].startswith("| tokens | scheme | path | quant_ms")


def test_docstring_examples():
    # tests/test_docstrings.py skips this module (a command-line entry point); its examples run here
    import doctest
    result = doctest.testmod(bench, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0


def test_command_line_refuses_bad_schemes_and_a_missing_gpu(capsys):
    for bad in ("KQV4", "KQV:x", ":4", "kivi:4", "KQV"):  # KQV needs BITS; kivi has no GPU export
        with pytest.raises(SystemExit) as exc:
            bench.main(["--schemes", bad])
        assert exc.value.code == 2
        assert "error:" in capsys.readouterr().err
    assert bench.parse_scheme_arg("K4V2") == ("K4V2", None)
    if jax.default_backend() != "gpu":
        assert bench.main(["--require-gpu"]) == 2
        assert "NO GPU" in capsys.readouterr().err


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the behaviour without a GPU")
def test_runbook_stops_without_a_gpu_and_pytest_refuses_to_skip(tmp_path):
    # Off a GPU (or on one whose CUDA plugin failed to load: jax falls back to the CPU) the
    # runbook must not report success: the gpu tests would all skip and the bench would
    # time CPU code. It stops after the environment step with exit status 3, and
    # KVSTATS_REQUIRE_GPU=1 (which it sets for pytest on a GPU) turns skips into an error.
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    env.pop("RUNBOOK_ALLOW_CPU", None)
    res = _runbook([str(tmp_path / "out")], 300, cwd=root, env=env)
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-2000:]
    assert "not 'gpu'" in res.stdout and "import kvstats_gpu.bench ok" in res.stdout
    assert not (tmp_path / "out" / "pytest_gpu.txt").exists()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                          "tests/gpu/test_gpu_device.py"], cwd=root, capture_output=True, text=True, timeout=300,
                         env={**env, "KVSTATS_REQUIRE_GPU": "1"})
    assert res.returncode == pytest.ExitCode.USAGE_ERROR and "KVSTATS_REQUIRE_GPU=1" in res.stdout + res.stderr


def test_rows_are_printed_and_saved_as_they_are_measured(tmp_path, monkeypatch, capsys):
    # the runbook caps the bench with `timeout`: what was measured before the cap must survive
    seen = []
    rows = bench.run([256, 512], [("KQV", 4)], n_kv_heads=1, group=2, dim=64, reps=1, on_row=seen.append)
    assert seen == rows and [r["tokens"] for r in rows] == [256, 512]

    class Killed(Exception):
        pass

    def run_then_killed(tokens, schemes, *args, on_row=None):
        on_row(rows[0])
        raise Killed  # as if the time limit struck during the second measurement

    monkeypatch.setattr(bench, "correctness_check", lambda note, impl: {f"{impl}_err": 0.0})
    monkeypatch.setattr(bench, "run", run_then_killed)
    out = tmp_path / "bench.json"
    with pytest.raises(Killed):
        bench.main(["--impl", "mosaic", "--json", str(out), "--quick"])
    saved = json.loads(out.read_text())
    assert saved["complete"] is False and saved["rows"] == [json.loads(json.dumps(rows[0]))]
    assert saved["correctness"] == {"mosaic_err": 0.0}
    assert "measured 256 tokens, KQV@4" in capsys.readouterr().out


_BLOCKER = '''import importlib.abc, os, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in os.environ.get("BLOCK_IMPORTS", "").split():
            raise ImportError(f"{name} blocked by the test")
sys.meta_path.insert(0, _Block())
'''


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the behaviour without a GPU")
def test_runbook_preflight_goes_on_without_one_backend_and_stops_without_both(tmp_path):
    # a device image whose jax lacks one Pallas GPU backend still gets the other's tests and
    # timings; without both (or without kvstats_gpu) there is nothing to run: exit 4
    root = Path(__file__).parents[2]
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_BLOCKER)
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tmp_path / "site")}
    env.pop("RUNBOOK_ALLOW_CPU", None)
    for blocked, code, said in (("jax.experimental.pallas.triton", 3, "going on without Triton"),
                                ("absl jax.experimental.pallas.triton", 4, "exit 4")):
        res = _runbook([str(tmp_path / "out")], 300, cwd=root, env={**env, "BLOCK_IMPORTS": blocked})
        assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
        assert said in res.stdout and "blocked by the test" in res.stdout


_ABORT_MOSAIC_BENCH = '''import os
argv = open("/proc/self/cmdline", "rb").read().split(b"\\0")  # sys.argv is not set yet here
if b"kvstats_gpu.bench" in argv and b"mosaic" in argv:
    os.abort()  # as a fatal error in a compiler would: no Python exception, no output files
'''


def _dry_run(tmp_path, sitecustomize, timeout=900, **env_vars):
    """The runbook's CPU dry run (``--dry-run``) into tmp_path/out, with a sitecustomize
    standing in for a device failure; returns the finished process and the output folder."""
    root = Path(__file__).parents[2]
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(sitecustomize)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tmp_path / "site"),
           "JAX_DISABLE_MOST_OPTIMIZATIONS": "1", **env_vars}  # as cpu_compiles_unoptimized: 2x faster
    env.pop("RUNBOOK_ALLOW_CPU", None)
    res = _runbook(["--dry-run", str(out)], timeout, cwd=root, env=env)
    return res, out


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="a CPU dry run of the runbook")
def test_runbook_dry_run_end_to_end_and_backends_in_their_own_processes(tmp_path):
    # The whole runbook as the device runs it (both steps, every file, the summary), on the
    # CPU. A backend whose compile aborts the process must not take the other backend's
    # figures with it: one bench process per backend, each saving its own files, and the
    # exit status and summary report the failure. (In the tests step a test whose compile
    # aborts takes only its xdist worker.)
    res, out = _dry_run(tmp_path, _ABORT_MOSAIC_BENCH, BENCH_IMPLS="mosaic reference")
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert "bench mosaic: exit 134," in summary and "bench reference: exit 0," in summary, summary
    assert not (out / "bench_mosaic.json").exists()
    saved = json.loads((out / "bench_reference.json").read_text())
    assert saved["complete"] is True and len(saved["rows"]) == 1 and saved["failed"] == {}
    assert "measured 2048 tokens, KQV@4" in (out / "bench_reference.txt").read_text()
    assert "    measured 2048 tokens, KQV@4" in summary  # the bench's lines reach the summary
    # the tests step: one pytest run of both backends over xdist workers, collecting each
    # backend's eight gpu tests (test_gpu_device's three, test_gpu_device_h4's five compiled
    # cases; skipped off a GPU); then the benches, one process per backend
    assert "tests: exit 0," in summary and "16 skipped" in summary, summary
    for impl in ("mosaic", "triton"):
        assert f"    {impl}: 0 passed, 0 failed, 0 errors, 8 skipped" in summary, summary
    steps = [line.split(":")[0] for line in summary.splitlines() if line.startswith(("tests", "bench "))]
    assert steps == ["tests", "bench mosaic", "bench reference"], summary
    log = (out / "pytest_gpu.txt").read_text()
    assert "-n 2 --dist load" in log and "test_compiled_decode_attention_at_32k_tokens[triton-KQV-4]" in log
    assert "test_decode_over_a_partly_filled_cache[triton-compiled-KQV4-d64]" in log
    assert summary.rstrip().splitlines()[-1].startswith("runbook: steps tests bench: NOT all passed")
    assert res.stdout.endswith(summary)  # printed whole once more, last: the tail of a cut-off log has it
    assert sorted(p.name for p in out.iterdir()) == ["bench_mosaic.txt", "bench_reference.json",
                                                      "bench_reference.txt", "env.txt", "pytest_gpu.txt",
                                                      "summary.txt"]


_HANG_MOSAIC_BENCH = _ABORT_MOSAIC_BENCH.replace("os.abort()  # as a fatal error in a compiler would: no Python "
                                                 "exception, no output files",
                                                 "import time; time.sleep(3600)  # a compile that never ends")


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="a CPU dry run of the runbook")
def test_runbook_deadline_caps_steps_and_skips_what_cannot_start(tmp_path):
    # One slow step cannot eat the device call: each step gets at most what the deadline
    # leaves (less the summary's reserve), and a step with too little left is skipped and
    # reported, so the summary is written before the caller's own timeout.
    # 75 s: the environment step (two Python processes importing jax) may take up to 40 s on a
    # loaded machine and still leave the hanging step the 20 s it needs to be started
    res, out = _dry_run(tmp_path, _HANG_MOSAIC_BENCH, timeout=200, RUNBOOK_DEADLINE="75", STEPS="bench",
                        BENCH_IMPLS="mosaic reference")
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert "bench mosaic: exit 124 (TIMED OUT)" in summary, summary
    assert "bench reference: SKIPPED" in summary and "before the 75 s deadline" in summary
    assert not (out / "bench_reference.txt").exists() and not (out / "pytest_gpu.txt").exists()
    last = summary.rstrip().splitlines()[-1]
    assert last.startswith("runbook: steps bench: NOT all passed")
    assert int(last.split(", ")[-1].split(" s")[0]) <= 75  # the script's own seconds


def test_timed_rows_are_checked_against_the_reference(tmp_path, monkeypatch, capsys):
    # On a GPU each timed row also compares the timed step's output with the jnp reference
    # on the same cache, at the timed shape. Here "GPU" rows run the kernel in the
    # interpreter (the kernels' own dispatch still sees the CPU).
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    monkeypatch.setattr(bench, "L2_FLUSH_BYTES", 3 * 256 * 134)  # 3 copies of this 256-token cache
    monkeypatch.setattr(bench, "BURST", 4)
    monkeypatch.setattr(bench, "BURST_SECONDS", 1e9)  # no cut however slow the interpreter
    (row,) = bench.run([256], [("KQV", 4)], n_kv_heads=1, group=2, dim=128, reps=1, impls=("mosaic",))
    assert row["path"] == "mosaic" and row["agrees_with_reference"] is True
    assert 0 <= row["rel_err_vs_reference"] < 1e-5  # float32 end to end: ~1e-6
    assert row["quant_copies"] == 3 and row["dense_copies"] == 1 and row["quant_burst"] == row["dense_burst"] == 4
    # the timed outputs themselves are checked (the last burst's, over every copy), not one
    # recomputed on the first copy: a step wrong on one copy of its inputs (here that copy's
    # value norms 1% off) is a mismatch
    real_copies = bench.input_copies

    for factor in (1.01, np.nan):  # and a NaN on that copy is not lost among the good ones
        def last_copy_off(args, nbytes, gpu=True):
            sets = real_copies(args, nbytes, gpu)
            if len(args) == 2:  # (q, cache); the dense sets are (q, K, V)
                q, cache = sets[-1]
                sets[-1] = (q, cache._replace(v_norms=cache.v_norms * factor))
            return sets

        monkeypatch.setattr(bench, "input_copies", last_copy_off)
        (row,) = bench.run([256], [("KQV", 4)], n_kv_heads=1, group=2, dim=128, reps=1, impls=("mosaic",))
        assert row["agrees_with_reference"] is False
        assert row["rel_err_vs_reference"] == pytest.approx(factor - 1, rel=0.1, nan_ok=True)
    monkeypatch.setattr(bench, "input_copies", real_copies)
    # A kernel 1% off on outputs of size ~1e-4 (as a 128k-token step's are ~1e-3): a
    # mismatch, reported, saved and exit status 1. (An absolute bound of 5e-5 passed it.)
    # The kernel's output is stood in for by the reference's, checked equal above: one
    # interpreter compile fewer.
    real = bench.decode_attention

    def small(q, cache, spec, params, impl="auto", **kw):
        out = 1e-3 * real(q, cache, spec, params, impl="reference")
        return out if impl == "reference" else 1.01 * out

    monkeypatch.setattr(bench, "decode_attention", small)
    monkeypatch.setattr(bench, "correctness_check", lambda note, impl: {f"{impl}_err": 0.0})
    out = tmp_path / "bench.json"
    assert bench.main(["--impl", "mosaic", "--tokens", "256", "--kv-heads", "1", "--group", "2", "--reps", "1",
                       "--schemes", "KQV:4", "--json", str(out)]) == 1
    saved = json.loads(out.read_text())
    assert saved["rows"][0]["agrees_with_reference"] is False
    assert saved["rows"][0]["rel_err_vs_reference"] == pytest.approx(1e-2, rel=1e-3)
    assert list(saved["failed"]) == ["mosaic@256"] and saved["complete"] is True
    # the verdict within the first 400 characters of its row: what the runbook's summary keeps
    row_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("measured 256"))
    assert "[MISMATCH: ||out - reference|| / ||reference|| 1.00e-02 > 0.0001]" in row_line[:400], row_line


def test_time_step_cycles_through_the_copies_and_enqueues_bursts(monkeypatch):
    # every copy of the inputs is read in turn (none stays in a cache between two steps),
    # `burst` calls are enqueued before one wait, and the waited-for latency is timed apart
    monkeypatch.setattr(bench, "BURST_SECONDS", 1e9)
    seen = []

    def fn(x):
        seen.append(int(x[0]))
        return jax.numpy.asarray(x)

    sets = [(np.full(2, i),) for i in range(3)]
    t = bench.time_step(fn, sets, reps=2, burst=4)
    warm, waited, bursts = seen[:4], seen[4:6], seen[6:]
    assert warm == [0, 1, 2, 0] and waited == [0, 1] and bursts == [0, 1, 2, 0, 1, 2, 0, 1]
    assert set(t) == {"step", "enqueue", "latency", "burst"} and t["burst"] == 4 and t["enqueue"] <= t["step"]
    # a slow step gets a shorter burst (bounded time; nothing to overlap at milliseconds)
    monkeypatch.setattr(bench, "BURST_SECONDS", 0.0)
    assert bench.time_step(fn, sets, reps=2, burst=4)["burst"] == 1
    assert bench.n_copies(bench.L2_FLUSH_BYTES // 2) == 2 and bench.n_copies(bench.L2_FLUSH_BYTES) == 1
    assert bench.n_copies(bench.L2_FLUSH_BYTES // 2, gpu=False) == 1


def test_lowering_probe_imports_as_docs_gpu_md_runs_it():
    # docs/gpu.md quotes `PYTHONPATH=. python tests/gpu/_lowering_probe.py` (from the repository
    # root; pytest's own sys.path is not there); loaded without running its main
    root = Path(__file__).parents[2]
    code = "import runpy; m = runpy.run_path('tests/gpu/_lowering_probe.py', run_name='probe'); print(callable(m['main']))"
    res = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": ".", "JAX_PLATFORMS": "cpu"})
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr[-2000:]


def _with_marker(marker: str) -> list[int]:
    """The pids of processes whose environment holds ``marker`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:   # gone, or not ours to read
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_runbook_past_the_tests_timeout_leaves_no_process_behind(tmp_path):
    # a hung step (here the environment step's Python) runs under the runbook's `timeout`;
    # when the test's own timeout expires first, that whole tree must go, not only bash
    root = Path(__file__).parents[2]
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 120\n")
    fake.chmod(0o755)
    marker = f"KVSTATS_RUNBOOK_TEST_{os.getpid()}_{tmp_path.name}"
    env = {**os.environ, "PYTHON": str(fake), "JAX_PLATFORMS": "cpu", marker: "1"}
    with pytest.raises(subprocess.TimeoutExpired):
        _runbook([str(tmp_path / "out")], 3, cwd=root, env=env)
    left = _with_marker(marker)
    assert not left, f"processes left behind: {left}"
