"""A scheme parameter given as an int and as a float of one value (fp8 ``scale = 1`` and
``scale = 1.0``, kivi ``group_size = 64`` and ``64.0``) is one setting: one recorded
``Scheme.params``, one sweep label, cell id and config fingerprint. Before, each
spelling was its own cell id and label, so a sweep recomputed a cell it held and a
report showed one scheme as two. Numbers are written as the parameter's declared type
(``SchemeDef.param_types``; a float default declares float); a fractional number for an
integer parameter is a ValueError naming it; a bool stays a bool. Cell ids of params
given in their canonical type are pinned to the ids the code gave before the change
(computed at 7b922fe), so stored sweeps keep their cells.
"""

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.quant.register import define_scheme
from kvstats.quant.registry import coded_scheme, resolved_scheme, scheme_def
from kvstats.results import config_fingerprint
from kvstats.sweep import SweepConfig, run_sweep

BASE = {"budgets": [3], "dims": [8], "n_keys": [8], "n_trials": 4, "comparisons": []}
TOML = ('[sweep]\nbudgets = [3]\ndims = [8]\nn_keys = [8]\nn_trials = 4\ncomparisons = []\n'
        '[[schemes]]\nname = "fp8_e4m3"\nparams = {{scale = {scale}}}\n'
        '[[schemes]]\nname = "kivi"\nparams = {{group_size = {group}, residual = 0}}\n'
        '[[distributions]]\nname = "gaussian"\n')


def _toml(tmp_path, scale, group):
    path = tmp_path / f"c_{scale}_{group}.toml"
    path.write_text(TOML.format(scale=scale, group=group))
    return SweepConfig.from_toml(path)


def test_make_scheme_records_one_setting_for_int_and_float():
    rng = np.random.default_rng(0)
    k, v = rng.standard_normal((2, 3, 16, 8))
    as_int, as_float = (kvstats.make_scheme("fp8_e4m3", None, 8, scale=s) for s in (1, 1.0))
    assert as_int.params == as_float.params == {"scale": 1.0}
    assert type(as_int.params["scale"]) is float
    assert as_int.describe() == as_float.describe()
    for a, b in zip(as_int.roundtrip(k, v), as_float.roundtrip(k, v)):
        np.testing.assert_array_equal(a, b)
    # an integer parameter given as a whole float is that integer
    kivi = kvstats.make_scheme("kivi", 3, 8, group_size=4.0, residual=0.0)
    assert kivi.params == {"group_size": 4, "residual": 0}
    assert all(type(x) is int for x in kivi.params.values())
    assert kivi.describe() == kvstats.make_scheme("kivi", 3, 8, group_size=4, residual=0).describe()


def test_toml_int_and_float_give_one_sweep(tmp_path):
    written = [_toml(tmp_path, "1", "4"), _toml(tmp_path, "1.0", "4.0")]
    from_python = SweepConfig.from_dict({**BASE, "distributions": ["gaussian"], "schemes": [
        {"name": "fp8_e4m3", "params": {"scale": np.float32(1.0)}},
        {"name": "kivi", "params": {"group_size": np.int64(4), "residual": 0}}]})
    ref = written[0]
    labels = ["fp8_e4m3[scale=1.0]", "kivi[group_size=4,residual=0]"]
    for cfg in (*written, from_python):
        assert [s.display() for s in cfg.schemes] == labels
        assert config_fingerprint(cfg) == config_fingerprint(ref)
        assert [cfg.cell_id(c) for c in cfg.cells()] == [ref.cell_id(c) for c in ref.cells()]
        # the manifest's config reads back to itself
        assert SweepConfig.from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()
    # one cell, one set of numbers (floats compared as bit patterns)
    a, b = (run_sweep(cfg, executor="serial", progress=False).frame for cfg in written)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for col in a.columns[a.dtypes.map(lambda t: t.kind == "f")]:
        assert np.array_equal(*(f[col].to_numpy().view(f"i{f[col].dtype.itemsize}") for f in (a, b))), col


def test_within_one_sweep_the_two_spellings_are_one_scheme_twice():
    # the message shows the entries as written
    with pytest.raises(ValueError, match=r"'fp8_e4m3\[scale=1\]' and 'fp8_e4m3\[scale=1.0\]' are the same"):
        SweepConfig.from_dict({**BASE, "distributions": ["gaussian"], "schemes": [
            {"name": "fp8_e4m3", "params": {"scale": 1}}, {"name": "fp8_e4m3", "params": {"scale": 1.0}}]})


@pytest.mark.parametrize("name, params, bad", [
    ("kivi", {"group_size": 2.5}, "group_size"), ("kivi", {"residual": float("nan")}, "residual"),
    ("qjl", {"m": 16.25}, "m"), ("K4V2", {"rotation": "haar", "key_bits": 4.5}, "key_bits"),
    ("klt", {"rank": float("inf")}, "rank")])
def test_a_fractional_number_for_an_int_parameter_is_a_value_error_naming_it(name, params, bad):
    with pytest.raises(ValueError, match=rf"^{bad} must be an integer .*declared type is int.*received"):
        kvstats.make_scheme(name, None if scheme_def(name).fixed_budget else 3, 8, **params)
    with pytest.raises(ValueError, match=rf"^scheme '{name}' param {bad} must be an integer"):
        SweepConfig.from_dict({**BASE, "distributions": ["gaussian"],
                               "schemes": [{"name": name, "params": params}]})


def test_bool_and_strings_stay_as_given():
    from kvstats.quant.schemedef import as_declared_type   # here: the other tests run on older code

    assert as_declared_type(True, int, "n_outliers") is True
    assert as_declared_type(False, float, "scale") is False
    assert scheme_def("qjl").canonical({"n_outliers": True, "sketch": "srht"}) == {"n_outliers": True,
                                                                                 "sketch": "srht"}
    assert type(scheme_def("qjl").canonical({"n_outliers": True})["n_outliers"]) is bool
    assert scheme_def("fp8_e5m2").canonical({"scale": "tensor"}) == {"scale": "tensor"}
    # an int beyond the float range is not rounded to inf: the builder refuses it as given
    assert as_declared_type(10 ** 400, float, "scale") == 10 ** 400
    # a bool given for an integer parameter is still refused by the builder, not read as 1
    with pytest.raises(TypeError, match="n_outliers"):
        kvstats.make_scheme("qjl", 3, 8, n_outliers=True)


def test_declared_types_of_the_builtins_and_a_users_float_default():
    assert scheme_def("fp8_e4m3").param_types == {"scale": float}
    assert scheme_def("kivi").param_types == {"group_size": int, "residual": int}
    assert set(scheme_def("qjl").param_types) == {"m", "n_outliers", "outlier_m", "group_size",
                                                    "value_bits", "value_group_size"}
    # a user's scheme: a float default declares float; an int default declares nothing
    # (its 16.5 stays as given: the user's builder may take any number)
    user = define_scheme("canon_g3", build=lambda *a: None, expected_bits=lambda *a: (0, 0),
                         summary="test", params=["alpha", "group_size"],
                         defaults={"alpha": 0.5, "group_size": 16})
    assert user.canonical({"alpha": 1, "group_size": 16.5}) == {"alpha": 1.0, "group_size": 16.5}
    assert type(user.canonical({"alpha": 1})["alpha"]) is float


def test_scheme_identity_keeps_declared_floats():
    assert resolved_scheme("fp8_e4m3", {"scale": 2}) == ("fp8_e4m3", {"scale": 2.0})
    # written as declared, a float (2 == 2.0 in Python: the type is the test)
    assert type(resolved_scheme("fp8_e4m3", {"scale": 2.0})[1]["scale"]) is float
    assert coded_scheme("fp8_e4m3", {"scale": 2}) == coded_scheme("fp8_e4m3", {"scale": 2.0})
    assert resolved_scheme("kivi", {"group_size": 8.0})[1]["group_size"] == 8


# (label, distribution, cell id) of the config below, computed at 7b922fe (before the
# change): params given in their canonical type keep their cell ids
PINNED = [
    ('fp8_e4m3[scale=1.0]', 'heavy_tailed', '1620b12fe0862926f6f5'),
    ('fp8_e5m2[scale=0.5]', 'heavy_tailed', 'cbdf5c1870a6fb67d3d8'),
    ('fp8_e4m3', 'heavy_tailed', '6547cbbe2846194d9f3f'),
    ('kivi[group_size=4,residual=0]', 'heavy_tailed', 'feb7cae47f232ddebf6c'),
    ('qjl[m=16,n_outliers=1,outlier_m=8,value_bits=2,value_group_size=4]', 'heavy_tailed',
     '24dd3236d9e8c3e9a672'),
    ('K4V2', 'heavy_tailed', 'ad429a3a823327b12be9'),
    ("KQV[sketch='orthogonal']", 'heavy_tailed', 'c5cab59777c46845841f'),
    ('klt[group_size=8,rank=2]', 'heavy_tailed', 'a551051176bf2fbddd66'),
    ('fp8_e4m3[scale=1.0]', 'low_rank', '04c9d79cedc1c71c02ae'),
    ('fp8_e5m2[scale=0.5]', 'low_rank', 'ff49499cdeac50a4c2e5'),
    ('fp8_e4m3', 'low_rank', '895e6244aa41ba5c1b2f'),
    ('kivi[group_size=4,residual=0]', 'low_rank', 'ed8d773b662be8c051f4'),
    ('qjl[m=16,n_outliers=1,outlier_m=8,value_bits=2,value_group_size=4]', 'low_rank',
     '7117a0f04a54bd474a25'),
    ('K4V2', 'low_rank', '65fb2230186e6f91d05f'),
    ("KQV[sketch='orthogonal']", 'low_rank', '77998e97a469200db635'),
    ('klt[group_size=8,rank=2]', 'low_rank', 'c28b183d3d56b4514d7c'),
]


def test_canonical_params_keep_the_cell_ids_stored_sweeps_hold():
    cfg = SweepConfig.from_dict({**BASE, "schemes": [
        {"name": "fp8_e4m3", "params": {"scale": 1.0}}, {"name": "fp8_e5m2", "params": {"scale": 0.5}},
        "fp8_e4m3", {"name": "kivi", "params": {"group_size": 4, "residual": 0}},
        {"name": "qjl", "params": {"m": 16, "n_outliers": 1, "outlier_m": 8, "value_bits": 2,
                                   "value_group_size": 4}},
        "K4V2", {"name": "KQV", "params": {"sketch": "orthogonal"}},
        {"name": "klt", "params": {"rank": 2, "group_size": 8}}],
        "distributions": [{"name": "heavy_tailed", "params": {"nu": 3.0}},
                          {"name": "low_rank", "params": {"rank": 2, "noise": 1.0}}]})
    assert [(c.scheme.display(), c.distribution, cfg.cell_id(c)) for c in cfg.cells()] == PINNED
