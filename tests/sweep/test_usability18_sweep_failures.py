"""A sweep that fails: what its error advises, and what it leaves of an earlier sweep.

A norm overflow is the data's (the sweep is seeded): its error names the sweep config's
spelling of the fix and does not advise rerunning as it is. A sweep refused before any
compute (a cell's file name taken by a folder) leaves an earlier sweep's results in place.
"""

import numpy as np
import pytest

from kvstats.data.register import registered_distribution
from kvstats.sweep import check_grid, run_sweep

pytestmark = pytest.mark.usefixtures("user_registries")

GRID = {"schemes": ["KQV"], "budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 4,
        "chunk_size": 4, "seed": 7, "comparisons": []}


def _huge(n_trials, n_keys, dim, rng, params):
    return 1e5 * rng.standard_normal((n_trials, n_keys, dim))   # norms ~4e5 > 65504


def test_a_norm_overflow_names_the_toml_fix_and_does_not_advise_a_plain_rerun(tmp_path):
    out = tmp_path / "out"
    with registered_distribution("huge", _huge):
        with pytest.raises(ValueError) as info:
            run_sweep({**GRID, "distributions": ["gaussian", "huge"]}, out=out, executor="serial",
                      progress=False)
    assert 'params = {norm_dtype = "float32"}' in str(info.value), str(info.value)
    assert "norm_dtype=np.float32" in str(info.value)    # the Python spelling stays
    (note,) = info.value.__notes__
    assert note.startswith(f"[1 of 2 cells finished, kept in {out / 'cells'}; the same sweep fails "
                           "the same way"), note
    assert "compute only the other" not in note


def test_an_error_of_the_code_still_advises_a_resume(tmp_path):
    def broken(n_trials, n_keys, dim, rng, params):
        if n_trials > 2:   # passes the sweep's two-trial check
            raise ZeroDivisionError("sampler broke")
        return rng.standard_normal((n_trials, n_keys, dim))

    with registered_distribution("broken", broken):
        with pytest.raises(ZeroDivisionError) as info:
            run_sweep({**GRID, "distributions": ["gaussian", "broken"]}, out=tmp_path / "out",
                      executor="serial", progress=False)
    assert info.value.__notes__[-1].endswith("rerun with resume (kvstats sweep --resume; "
                                             "run_sweep's default) to compute only the other 1]")


def test_a_sweep_refused_before_any_compute_keeps_the_earlier_sweep(tmp_path):
    out = tmp_path / "out"
    run_sweep({**GRID, "distributions": ["gaussian"]}, out=out, executor="serial", progress=False)
    before = sorted(p.name for p in out.iterdir())
    assert "manifest.json" in before
    other = {**GRID, "distributions": ["gaussian"], "seed": 8}
    ((_, cid),) = check_grid(other)
    (out / "cells" / f"{cid}.parquet").mkdir()   # the new cell's file name taken by a folder
    with pytest.raises(IsADirectoryError):
        run_sweep(other, out=out, executor="serial", progress=False)
    assert sorted(p.name for p in out.iterdir()) == before


def test_the_overflow_error_keeps_its_class_through_a_cell_name_and_a_pickle():
    # a worker process names the cell (_naming) and pickles the error back: the sweep's note
    # tells an overflow by its class (kvstats.quant.coder.NormOverflowError), not its wording
    import pickle

    from kvstats.quant.coder import NormOverflowError
    from kvstats.sweep.work import _naming
    named = pickle.loads(pickle.dumps(_naming(NormOverflowError("K has a vector norm of 1e5"), "[cell: c]")))
    assert type(named) is NormOverflowError and str(named).endswith("[cell: c]")
