"""A config built with numpy values is the config written with the Python ones.

Found by a referee pass (2026-12-02): parameters taken from numpy (``np.arange``,
``np.linspace``, an array of names) were refused or kept as numpy scalars:
``{"rank": np.int64(3)}`` and ``{"nu": np.float32(1.5)}`` were a TypeError saying the value
"must be a number" (np.float64, a float subclass, passed), and ``{"norm_dtype":
np.str_("float32")}`` passed but labelled the scheme ``KQV[norm_dtype=np.str_('float32')]``:
another cell id than the same config written in TOML, and a ``scheme`` column that the
config read back from the manifest (plain strings) no longer names.
"""

import numpy as np
import pytest

import kvstats
from kvstats.sweep import SweepConfig

BASE = {"budgets": [2], "dims": [16], "n_keys": [8], "n_trials": 4, "comparisons": []}


def _pair(**numpy_values):
    """The config with numpy scalars, and the same config with their Python values."""
    def build(values):
        return {**BASE, "schemes": [{"name": "KQV", "params": {"norm_dtype": values["norm_dtype"]}}],
                "distributions": [{"name": "low_rank", "params": {"rank": values["rank"]}},
                                  {"name": "heavy_tailed", "params": {"nu": values["nu"]}}]}
    return build(numpy_values), build({k: v.item() for k, v in numpy_values.items()})


NUMPY = dict(norm_dtype=np.str_("float32"), rank=np.int64(3), nu=np.float32(1.5))


def test_numpy_scalars_are_taken_as_their_python_values():
    with_numpy, plain = _pair(**NUMPY)
    a, b = SweepConfig.from_dict(with_numpy), SweepConfig.from_dict(plain)
    assert a == b
    assert [s.display() for s in a.schemes] == ["KQV[norm_dtype='float32']"]
    assert [a.cell_id(c) for c in a.cells()] == [b.cell_id(c) for c in b.cells()]
    for d in a.distributions:
        assert all(type(v) in (int, float, str, bool) for v in d.params.values()), d


def test_a_numpy_bool_is_a_bool_and_a_numpy_array_is_still_refused():
    from kvstats.sweep.specs import _check_params

    got = _check_params({"flag": np.bool_(True), "n": np.uint8(7), "name": np.str_("x")}, "params")
    assert got == {"flag": True, "n": 7, "name": "x"}
    assert [type(v) for v in got.values()] == [bool, int, str]
    with pytest.raises(TypeError, match=r"params\['rank'\] must be a number, string or boolean"):
        SweepConfig.from_dict({**BASE, "schemes": ["KQV"], "distributions": [
            {"name": "low_rank", "params": {"rank": np.array([3, 4])}}]})


def test_a_sweep_of_numpy_values_reads_back_with_the_labels_of_its_rows(tmp_path):
    with_numpy, plain = _pair(**NUMPY)
    res = kvstats.run_sweep(with_numpy, out=tmp_path / "a", executor="serial", progress=False)
    back = kvstats.load_result(tmp_path / "a")
    labels = {s.display() for s in back.config.schemes}
    assert set(res.frame["scheme"]) == labels == {"KQV[norm_dtype='float32']"}
    # the same sweep written with Python values resumes every cell of it
    again = kvstats.run_sweep(plain, out=tmp_path / "a", executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}
