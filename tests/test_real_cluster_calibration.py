"""experiments/real_cluster_calibration.py: its vectorised signed-rank test and its table.

The script is loaded from its file (experiments/ is not a package). The capture here is a
small fake one (18 texts x 2 layers x 2 KV heads, N = 16, d = 8, a random text effect on
the keys), so the run takes well under a second.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import wilcoxon_signed_rank

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "real_cluster_calibration.py"


@pytest.fixture(scope="module")
def calib():
    spec = importlib.util.spec_from_file_location("real_cluster_calibration", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _band(n: int, level: float) -> tuple[int, int]:
    """Central 99.9% binomial band of the rejection count of a level-``level`` test."""
    return int(stats.binom.ppf(0.0005, n, level)), int(stats.binom.isf(0.0005, n, level))


@pytest.mark.parametrize("n", [1, 2, 9, 26, 49, 50, 120])
def test_signed_rank_pvalues_are_kvstats_wilcoxon_signed_rank(calib, n):
    # Reference: kvstats.stats.wilcoxon_signed_rank (method "auto"), itself checked against
    # R's wilcox.test in tests/stats. Rows with ties and zeros (rounded values), rows of
    # only zeros, rows with one zero and continuous rows: both the exact and the normal path.
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, 30, n, 2))
    x[:10], y[:10] = np.round(2 * x[:10]) / 2, np.round(2 * y[:10]) / 2
    x[10:13] = y[10:13]
    x[13:16, 0] = y[13:16, 0]
    x[16:20] += 0.8                                   # small p-values too
    got = calib.signed_rank_pvalues(x, y, axis=1)
    assert got.shape == (30, 2)
    ref = np.array([[wilcoxon_signed_rank(x[i, :, j], y[i, :, j]).pvalue for j in range(2)]
                    for i in range(30)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_signed_rank_pvalues_axis_and_shape(calib):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 4, 5, 26))
    np.testing.assert_array_equal(calib.signed_rank_pvalues(x, y, axis=2),
                                  calib.signed_rank_pvalues(np.moveaxis(x, 2, 1),
                                                            np.moveaxis(y, 2, 1), axis=1))


def test_signed_rank_pvalues_calibrated_and_powerful(calib):
    # Null: symmetric differences, 2,000 rows each of 26 continuous pairs (exact path) and of
    # 300 pairs with values on {0, 1/3, 2/3, 1} (normal path, ties and zeros, as argmax shift
    # on trials). Rejections at 0.05 inside the 99.9% band of the level. The exact test's
    # attainable level at 26 pairs is 0.0493 (2·P(V ≤ 98) of the untied distribution).
    rng = np.random.default_rng(2026)
    lo, hi = _band(2000, 0.05)
    x, y = rng.standard_normal((2, 2000, 26))
    assert lo <= int((calib.signed_rank_pvalues(x, y) <= 0.05).sum()) <= hi
    u, v = rng.integers(0, 4, size=(2, 2000, 300)) / 3
    assert lo <= int((calib.signed_rank_pvalues(u, v) <= 0.05).sum()) <= hi
    # Power: a shift of 0.6 sd of the difference at 26 pairs (about 0.78 for a t test)
    shifted = calib.signed_rank_pvalues(x[:400] + 0.6 * np.sqrt(2), y[:400])
    assert (shifted <= 0.05).mean() > 0.6


def _fake_capture(path: Path) -> Path:
    rng = np.random.default_rng(7)
    texts, layers, heads, group, n, d = 18, 2, 2, 2, 16, 8
    K = rng.standard_normal((texts, layers, heads, n, d)).astype(np.float32)
    K += rng.standard_normal((texts, 1, 1, 1, d)).astype(np.float32)     # a text effect
    V = rng.standard_normal((texts, layers, heads, n, d)).astype(np.float32)
    q = rng.standard_normal((texts, layers, heads * group, n, d)).astype(np.float32)
    np.savez(path, K=K, V=V, q=q, meta=json.dumps({"model": "fake", "group_size": group}))
    return path


# Rejections (of 60 replicates) of the Mann–Whitney columns, from the script at commit
# 68cc091 (before the signed-rank columns) on _fake_capture, run with
# --layers all --draws 4 --replicates 60 --seed 3: the paired columns must not move them.
_MW_REJECTIONS = {
    "split: trials": [1, 4, 0, 1, 6, 5, 13, 1, 5],
    "split: texts": [0, 0, 0, 1, 5, 3, 4, 2, 9],
    "shared: trials": [2, 2, 2, 2, 1, 1, 0, 1, 4],
    "shared: texts": [2, 2, 1, 2, 2, 3, 0, 1, 6],
}


def test_table_keeps_the_mann_whitney_columns_and_adds_signed_rank(calib, tmp_path, capsys):
    cap = _fake_capture(tmp_path / "cap.npz")
    table = calib.main(["--capture", str(cap), "--layers", "all", "--draws", "4",
                        "--replicates", "60", "--seed", "3"])
    out = capsys.readouterr().out
    assert "| shared, signed-rank: trials | shared, signed-rank: texts |" in out
    assert list(table.columns[-2:]) == ["shared, signed-rank: trials", "shared, signed-rank: texts"]
    for col, counts in _MW_REJECTIONS.items():
        np.testing.assert_array_equal(np.rint(table[col].to_numpy() * 60), counts, err_msg=col)
    for unit in ("trials", "texts"):
        rates = table[f"shared, signed-rank: {unit}"].to_numpy()
        assert np.all((rates >= 0) & (rates <= 1))
