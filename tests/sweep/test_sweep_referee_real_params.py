"""A real source's layer and head from numpy, and a folder given as its capture.

Found by a referee pass (2026-12-02): ``layer = np.int64(1)`` was refused as "must be a
non-negative int ... received np.int64(1)" (a list of them was taken), and a folder given
as ``path`` was said not to exist.
"""

import json

import numpy as np
import pytest

from kvstats.sweep import SweepConfig

BASE = {"schemes": ["KQV"], "budgets": [3], "dims": [8], "n_keys": [16], "n_trials": 2, "comparisons": []}


@pytest.fixture
def capture(tmp_path):
    path = tmp_path / "cap.npz"
    x = np.ones((2, 4, 1, 16, 8), np.float32)   # (texts, layers, KV heads, N, d)
    np.savez(path, K=x, V=x, q=np.ones((2, 4, 3, 16, 8), np.float32), meta=json.dumps({}))
    return path


def test_a_numpy_integer_layer_or_head_is_its_int(capture):
    def cfg(**sel):
        return SweepConfig.from_dict({**BASE, "distributions": [
            {"name": "real", "params": {"path": str(capture), **sel}}]})
    a, b = cfg(layer=np.int64(1), head=np.uint8(0)), cfg(layer=1, head=0)
    assert a == b and a.cells() == b.cells()
    assert type(a.distributions[0].params["layer"]) is int


def test_a_folder_as_the_capture_path_is_called_a_folder(capture):
    cfg = SweepConfig.from_dict({**BASE, "distributions": [
        {"name": "real", "params": {"path": str(capture.parent)}}]})
    with pytest.raises(IsADirectoryError, match=r"params 'path' must be an existing capture file "
                                                r"\(.*\); '.*' is a folder$"):
        cfg.cells()
