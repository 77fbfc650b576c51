"""A pool sweep killed with kill -9 leaves no process behind: its workers end (and with
them the forkserver they keep alive) instead of waiting for tasks forever or blocking on a
result nobody reads, holding memory and the caller's stdout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Run in a child process made a subreaper (Linux prctl PR_SET_CHILD_SUBREAPER): the
# killed sweep's orphans become its children whatever this machine's init does with
# orphans, and it reaps them as they end. It starts a 2-worker CLI sweep, kills it with
# SIGKILL once both workers are computing, then waits (30 s at most) for every process
# the sweep had started to end, prints those left and kills them (none of them outlives
# the test either way).
_WATCH = r"""
import ctypes, json, os, signal, subprocess, sys, time

def processes():
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    state, ppid = fh.read().rsplit(")", 1)[1].split()[:2]
            except OSError:
                continue
            out[int(entry)] = (state, int(ppid))
    return out

def descendants(root):
    table, found = processes(), [root]
    for pid in found:
        found += [child for child, (_, ppid) in table.items() if ppid == pid]
    return found[1:]

def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass

if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:   # PR_SET_CHILD_SUBREAPER
    print(json.dumps({"skip": "prctl(PR_SET_CHILD_SUBREAPER) failed"}))
    sys.exit()
config, out = sys.argv[1:3]
sweep = subprocess.Popen([sys.executable, "-m", "kvstats.cli", "sweep", "--config", config, "--out", out,
                          "--workers", "2", "--no-progress", "--no-report"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 120
# resource tracker + forkserver + its 2 workers
while len(descendants(sweep.pid)) < 4 and sweep.poll() is None and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(2)   # the workers import kvstats and start their tasks
started = descendants(sweep.pid)
running = sweep.poll() is None
os.kill(sweep.pid, signal.SIGKILL)
sweep.wait()
deadline = time.monotonic() + 30
while True:
    reap()
    table = processes()
    left = [pid for pid in started if pid in table and table[pid][0] != "Z"]
    if not left or time.monotonic() > deadline:
        break
    time.sleep(0.1)
for pid in left:
    os.kill(pid, signal.SIGKILL)
reap()
print(json.dumps({"running": running, "started": len(started), "left": len(left)}))
"""

# each task computes for far longer than the test waits: the sweep is killed mid-task
_CONFIG = """[sweep]
budgets = [2, 3, 4]
dims = [64]
n_keys = [1024]
n_trials = 20000
comparisons = []
[[schemes]]
name = "KV"
[[schemes]]
name = "KQV"
[[distributions]]
name = "gaussian"
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, uses prctl")
def test_workers_end_when_the_sweep_is_killed(tmp_path):
    config = tmp_path / "k.toml"
    config.write_text(_CONFIG)
    done = subprocess.run([sys.executable, "-c", _WATCH, str(config), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    if "skip" in report:
        pytest.skip(report["skip"])
    assert report["running"] and report["started"] >= 4, report   # killed mid-sweep, pool up
    assert report["left"] == 0, report
