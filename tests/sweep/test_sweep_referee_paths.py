"""The output folder given as something that is not a path is named as such.

Found by a referee pass (2026-12-02): ``run_sweep(cfg, out=3)`` and ``load_result(None)``
raised pathlib's "expected str, bytes or os.PathLike object, not int", naming no argument
(and ``run_sweep``'s only after the grid's check had drawn every case).
"""

import pytest

import kvstats
from kvstats.results import load_result
from kvstats.sweep import run

CFG = {"schemes": ["KQV"], "budgets": [2], "distributions": ["gaussian"], "dims": [16], "n_keys": [8],
       "n_trials": 4, "comparisons": []}


@pytest.mark.parametrize("out", [3, b"/tmp/x", ["a"]])
def test_run_sweep_names_a_bad_out_before_the_grid_is_checked(monkeypatch, out):
    monkeypatch.setattr(run, "check_grid", lambda config: pytest.fail("the grid was checked"))
    with pytest.raises(TypeError, match=r"^out must be a folder path \(str or os.PathLike\) or None; "
                                        rf"received {out!r}$".replace("[", r"\[").replace("]", r"\]")):
        kvstats.run_sweep(CFG, out=out, executor="serial", progress=False)


@pytest.mark.parametrize("out", [None, 3, b"/tmp/x"])
def test_load_result_names_a_bad_out(out):
    with pytest.raises(TypeError, match=r"^out must be a folder path \(str or os.PathLike\); "
                                        rf"received {out!r}$"):
        load_result(out)
