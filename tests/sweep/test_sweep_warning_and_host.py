"""Two small records of a sweep (critic_sweep20 #6, #7): the "not a whole number of
texts" warning of a real case points at the user's call and comes once per config, not
once per grid built from it; the manifest records the CPUs the process may run on beside
the machine's."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from kvstats.sweep import SweepConfig, run_sweep

ROOT = Path(__file__).resolve().parents[2]


def _capture(tmp_path):
    # 3 texts x 2 layers x 2 KV heads: 4 trials a text
    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 2, 2, 8, 4)).astype(np.float32)
    q = rng.standard_normal((3, 2, 2, 8, 4)).astype(np.float32)
    path = tmp_path / "c.npz"
    np.savez(path, K=K, V=K, q=q, meta=json.dumps({}))
    return path


def test_partial_text_warning_points_at_the_caller_once_per_config(tmp_path):
    config = SweepConfig.from_dict({"schemes": ["KQV"], "budgets": [3], "dims": [4], "n_keys": [8],
                                    "n_trials": 6, "comparisons": [],
                                    "distributions": [{"name": "real", "params": {"path": str(_capture(tmp_path))}}]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")   # no once-per-place filter: the count is the code's
        config.cells()
        config.cells()
        run_sweep(config, executor="serial", progress=False)
    texts = [w for w in caught if "not a whole number of texts" in str(w.message)]
    assert len(texts) == 1, [str(w.message) for w in caught]
    assert texts[0].filename == __file__


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_manifest_records_the_cpus_the_process_may_use():
    # in a child limited to one CPU (taskset's way): the pool's size, not the machine's
    script = ("import os, json\n"
              "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
              "from kvstats.sweep import SweepConfig, run_sweep\n"
              "r = run_sweep({'schemes': ['KQV'], 'budgets': [3], 'dims': [4], 'n_keys': [8], "
              "'n_trials': 2, 'comparisons': [], 'distributions': ['gaussian']}, executor='serial', "
              "progress=False)\n"
              "print(json.dumps(r.manifest['host']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout.splitlines()[-1])
    assert host["cpus_usable"] == 1 and host["cpus"] == os.cpu_count()
