"""experiments/real_stats.py reads the capture mapped: q is never loaded (referee RE4 F3).

q holds most of a capture (SmolLM2: 9 query heads against 3 KV heads) and the script uses
only K and V. Reference for "loaded": tracemalloc, which counts numpy's array allocations
but not a memory map's pages; the capture's q is 8 MiB against K and V's 16 KiB each (their
float64 copies 32 KiB). The CRC-32 check of the mapped read stays on: a damaged q is refused
(zipfile's "Bad CRC-32", as an unmapped read gives).
"""

import runpy
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvstats.data.capture_format import write_capture
from test_real_stats import fake_model

ROOT = Path(__file__).resolve().parents[1]


def _capture(path):
    rng = np.random.default_rng(3)
    K = rng.standard_normal((2, 1, 2, 64, 16)).astype(np.float32)
    q = rng.standard_normal((2, 1, 2 * 512, 64, 16)).astype(np.float32)   # 8 MiB
    write_capture(path, K, K, q, {"source": "another model"})
    return K, q


def _run(path, out, monkeypatch):
    import kvstats.models

    monkeypatch.setattr(kvstats.models, "load_model", lambda: (fake_model(1, 2, 16), None))
    monkeypatch.setattr(sys, "argv", ["real_stats.py", "--capture", str(path), "--out", str(out)])
    runpy.run_path(str(ROOT / "experiments" / "real_stats.py"), run_name="__main__")


def test_q_is_never_loaded(tmp_path, monkeypatch):
    p = tmp_path / "cap.npz"
    K, q = _capture(p)
    _run(p, tmp_path / "warm", monkeypatch)   # imports (modules' own memory) before measuring
    tracemalloc.start()
    try:
        _run(p, tmp_path / "res", monkeypatch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < q.nbytes / 4, (peak, q.nbytes)    # reading q whole allocates q.nbytes
    stats = pd.read_csv(tmp_path / "res" / "stats_layer_head.csv")
    row = stats[(stats.tensor == "K") & (stats["head"] == 1)].iloc[0]
    assert row.mean_sq_norm == pytest.approx(float((K[:, 0, 1].astype(np.float64) ** 2).sum(-1).mean()),
                                             rel=1e-12)


def test_damaged_q_is_still_refused(tmp_path, monkeypatch):
    p = tmp_path / "cap.npz"
    _capture(p)
    with zipfile.ZipFile(p) as zf:
        info = zf.getinfo("q.npy")
    end = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size
    with open(p, "r+b") as fh:
        fh.seek(end - 8)
        fh.write(np.float32(1e30).tobytes())
    with pytest.raises(ValueError, match="Bad CRC-32 for file 'q.npy'"):
        _run(p, tmp_path / "res", monkeypatch)
