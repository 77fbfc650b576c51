"""experiments/real_profile.py on a small capture: its tests take the text as the unit.

The reference is the report's own paired test (experiments/real_report.py
``kqv_qkqv_tests``, itself checked against kvstats.stats.sign_test by hand in
tests/test_real_report.py) on the per-trial rows the script writes.
"""

import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def test_profile_tests_have_the_text_as_unit(tmp_path, monkeypatch, load_experiment):
    from kvstats.data.capture_format import write_capture

    rng = np.random.default_rng(0)
    n_texts, n_layers, n_kv, group, n_keys, dim = 4, 2, 1, 2, 16, 16
    K = rng.standard_normal((n_texts, n_layers, n_kv, n_keys, dim)).astype(np.float32)
    V = rng.standard_normal(K.shape).astype(np.float32)
    q = rng.standard_normal((n_texts, n_layers, n_kv * group, n_keys, dim)).astype(np.float32)
    write_capture(tmp_path / "cap.npz", K, V, q, {"model": "toy"})
    out = tmp_path / "new" / "results"            # a folder that does not exist yet
    monkeypatch.setattr(sys, "argv", ["real_profile.py", "--capture", str(tmp_path / "cap.npz"),
                                      "--out", str(out), "--synthetic-trials", "4"])
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    runpy.run_path(str(ROOT / "experiments" / "real_profile.py"), run_name="__main__")

    tests = pd.read_csv(out / "profile_tests.csv")
    expected = load_experiment("real_report").kqv_qkqv_tests(pd.read_csv(out / "profile.csv"), "text")
    pd.testing.assert_frame_equal(tests, expected, check_dtype=False)
    assert (tests.n == n_texts).all()               # one unit per text, not per trial (8)
    assert not {"mw_p", "wilcoxon_p", "mw_p_holm"} & set(tests.columns)
