"""The sweep's duplicate-case rule compares parameters as ``sample`` resolves them at each
grid d (referee T13, F3): ``low_rank`` beside ``rank = 8`` at d = 64, ``outlier_channels``
beside ``offset = -0.0``, and ``offset = 1`` beside ``offset = -1`` (one law: the offset's
sign is drawn per channel) passed as two cases, each with its own data seed."""

import numpy as np
import pytest

import kvstats
from kvstats.sweep import SweepConfig

BASE = {"schemes": ["KQV"], "budgets": [3], "n_keys": [32]}


def _config(dists, dims=(64,)):
    return SweepConfig.from_dict({**BASE, "dims": list(dims), "distributions": dists})


@pytest.mark.parametrize("dists, dims, match", [
    (["low_rank", {"name": "low_rank", "params": {"rank": 8}}], [64, 16],
     r"'low_rank' with params - and with params rank=8 are the same distribution \(defaults filled in: "
     r"energy='total',noise=0.1,query='isotropic',rank=8,scale=1.0\) at every d of dims \[64, 16\]"),
    (["low_rank", {"name": "low_rank", "params": {"rank": 4}}], [4],
     r"'low_rank' with params - and with params rank=4 are the same"),
    (["outlier_channels", {"name": "outlier_channels", "params": {"offset": -0.0}}], [64],
     r"'outlier_channels' with params - and with params offset=-0.0 are the same distribution"),
    (["heavy_tailed", {"name": "heavy_tailed", "params": {"nu": 3}}], [64],
     r"'heavy_tailed' with params - and with params nu=3 are the same distribution \(defaults filled "
     r"in: nu=3.0,scale=1.0\)"),
])
def test_one_law_at_every_grid_d_is_one_case(dists, dims, match):
    with pytest.raises(ValueError, match=match):
        _config(dists, dims)


def test_params_that_differ_at_some_grid_d_are_two_cases():
    # rank left out is min(8, d): 4 at d = 4 (as rank = 4) but 8 at d = 64
    cfg = _config(["low_rank", {"name": "low_rank", "params": {"rank": 4}}], dims=[4, 64])
    assert len({c.case_key() for c in cfg.cells()}) == 4


def test_a_negative_offset_is_refused_when_read_and_by_sample():
    # the sign of each outlier channel's offset is drawn: -1 draws the law of +1
    with pytest.raises(ValueError, match=r"distribution 'outlier_channels' param offset \(its sign is random "
                                         r"per channel\) must be in \[0.0, inf\); received -1.0"):
        _config([{"name": "outlier_channels", "params": [{"offset": 1.0}, {"offset": -1.0}]}])
    with pytest.raises(ValueError, match=r"offset \(its sign is random per channel\) must be in \[0.0, inf\)"):
        kvstats.sample("outlier_channels", 2, 8, 8, offset=-2.0)
    with pytest.raises(ValueError, match=r"value_params\['offset'\] \(its sign is random per channel\)"):
        kvstats.sample("gaussian", 2, 8, 8, value_distribution="outlier_channels",
                       value_params={"offset": -2.0})
    t = kvstats.sample("outlier_channels", 2, 8, 8, offset=-0.0)
    assert t.meta["params"]["offset"] == 0.0 and np.copysign(1.0, t.meta["params"]["offset"]) == 1.0
