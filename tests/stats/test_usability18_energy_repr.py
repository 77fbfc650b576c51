"""Printing an energy test's result shows its numbers, not its B null draws (a notebook
cell printed ~15000 characters for B = 999); the draws stay an attribute."""

import numpy as np

from kvstats.stats import energy_test


def test_the_repr_leaves_out_the_null_distribution():
    rng = np.random.default_rng(0)
    res = energy_test(rng.normal(size=(30, 6)), rng.normal(size=(30, 6)), seed=1)
    text = repr(res)
    assert "null_distribution" not in text and len(text) < 400, text
    assert f"pvalue={res.pvalue!r}" in text and "n_resamples=999" in text
    assert res.null_distribution.shape == (999,)
