"""The runner writes the reconstructions of MSE/Prod schemes into arrays reused across the
cells and chunks of a task (kvstats.sweep.work._roundtrip): the per-trial tables must
equal those of plain ``Scheme.roundtrip`` bit for bit, for every kind of scheme."""

import numpy as np
import pandas as pd

import kvstats.sweep.work as work
from kvstats.sweep import SweepConfig, run_sweep

CONFIG = dict(schemes=["KV", "KQV", "QKQV", "kivi", "turboquant_mse"], budgets=[3, 5],
              distributions=["gaussian", {"name": "heavy_tailed", "params": {"nu": 3.0}}],
              dims=[32], n_keys=[24], n_trials=10, chunk_size=4, dtype="float32", seed=5)


def test_reused_buffers_give_the_plain_roundtrip_tables(monkeypatch):
    cfg = SweepConfig.from_dict(CONFIG)
    calls = []
    plain_roundtrip = work._roundtrip

    def spy(scheme, K, V, buffers):
        out = plain_roundtrip(scheme, K, V, buffers)
        calls.append(any(o is b for o in out for b in buffers.values()))
        return out

    monkeypatch.setattr(work, "_roundtrip", spy)
    fast = run_sweep(cfg, executor="serial", progress=False).frame
    assert any(calls) and not all(calls)  # buffers used for MSE/Prod schemes only
    # every scheme through Scheme.roundtrip: no coder declares roundtrip_writes_out
    from kvstats.quant.mse import MSEQuantizer
    from kvstats.quant.prod import ProdQuantizer

    monkeypatch.setattr(MSEQuantizer, "roundtrip_writes_out", False)
    monkeypatch.setattr(ProdQuantizer, "roundtrip_writes_out", False)
    plain = run_sweep(cfg, executor="serial", progress=False).frame
    key = ["cell_id", "trial"]
    pd.testing.assert_frame_equal(fast.sort_values(key).reset_index(drop=True),
                                  plain.sort_values(key).reset_index(drop=True))
    assert np.isfinite(fast["kl"]).all()
