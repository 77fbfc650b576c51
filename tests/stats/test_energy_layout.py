"""The energy statistic does not depend on the memory layout of its inputs: the pooled
standardisation sums column-major whatever it is given (before, C- and Fortran-ordered
copies of the same samples gave other last bits: 0.009419205747566828 vs ...568604)."""

import numpy as np
import pytest

from kvstats.stats import energy_distance, energy_test


@pytest.mark.parametrize("paired", [False, True])
def test_c_fortran_and_strided_inputs_give_identical_bits(paired):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6)) * [1, 10, 0.1, 3, 1e3, 1]
    Y = X + 0.1 * rng.standard_normal(X.shape)
    wide = np.zeros((50, 12))
    wide[:, ::2] = X
    layouts = [(X, Y), (np.asfortranarray(X), np.asfortranarray(Y)), (wide[:, ::2], Y.T.copy().T)]
    stats = {energy_distance(a, b, standardize=True).statistic for a, b in layouts}
    assert len(stats) == 1
    tests = [energy_test(a, b, n_resamples=99, seed=3, standardize=True, paired=paired) for a, b in layouts]
    assert len({(t.statistic, t.pvalue) for t in tests}) == 1
