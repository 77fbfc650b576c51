"""The ``generator`` config key: the data-generator version of the sweep's synthetic trials.

Generator 1 (the default) must leave stored results reproducible (same cell ids, same
numbers); generator 2 draws other numbers, so its cells must get other ids (a store of
version-1 results is never resumed as version 2).
"""

import numpy as np
import pytest

import kvstats
from kvstats.sweep import SweepConfig, data_seed, replay_trials, run_sweep, scheme_seed

BASE = dict(schemes=["KQV"], budgets=[3], distributions=["gaussian"], dims=[32], n_keys=[16],
            n_trials=4, dtype="float32", seed=3)


def test_generator_key_ids_and_data():
    c1, c2 = SweepConfig.from_dict(BASE), SweepConfig.from_dict({**BASE, "generator": 2})
    assert c1.generator == 1 and SweepConfig.from_dict(c2.to_dict()).generator == 2
    assert "generator" not in c1.to_dict()  # fingerprints of earlier configs unchanged
    cell = c1.cells()[0]
    assert c1.cell_id(cell) == SweepConfig.from_dict({**BASE, "generator": 1}).cell_id(cell)
    assert c1.cell_id(cell) != c2.cell_id(cell)
    f1 = run_sweep(c1, executor="serial", progress=False).frame
    f2 = run_sweep(c2, executor="serial", progress=False).frame
    assert not np.array_equal(f1["kl"].to_numpy(), f2["kl"].to_numpy())
    # the runner's trials are kvstats.sample(..., generator=2) with the chunk's data seed
    t = kvstats.sample("gaussian", 4, 16, 32, seed=data_seed(c2.seed, cell, 0), dtype=np.float32,
                       generator=2)
    scheme = kvstats.make_scheme("KQV", 3, 32, seed=scheme_seed(c2.seed, cell, 0), draws=4)
    prof = kvstats.error_profile(t, *scheme.roundtrip(t.K, t.V))
    np.testing.assert_array_equal(prof["kl"].to_numpy(), f2.sort_values("trial")["kl"].to_numpy())
    # ... and replay_trials draws them so under each config
    for cfg, frame in ((c1, f1), (c2, f2)):
        r = replay_trials(cfg, scheme="KQV", trials=[3, 0])
        assert r.data.dtype == np.float32
        np.testing.assert_array_equal(r.profile()["kl"], frame.set_index("trial").loc[[3, 0], "kl"])
    np.testing.assert_array_equal(replay_trials(c2, scheme="KQV", trials=[0, 1, 2, 3]).data.K, t.K)


@pytest.mark.parametrize("bad,err", [(3, ValueError), (0, ValueError), (True, TypeError),
                                     ("2", TypeError)])
def test_generator_key_validation(bad, err):
    with pytest.raises(err, match="generator must be"):
        SweepConfig.from_dict({**BASE, "generator": bad})
