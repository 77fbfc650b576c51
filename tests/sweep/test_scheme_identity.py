"""A scheme's identity is its registry name and its parameters with the defaults filled
in (kvstats.quant.registry.resolved_scheme): a sweep config naming one scheme twice
(``QKQV`` and ``QKQV`` with ``sketch = "gaussian"``, its default) is a ValueError naming
both spellings, as two labels of one name and two spellings of one distribution are;
cell ids are unchanged, so stores written before keep resuming.

Each constant default is written once, in its entry's ``SchemeDef.defaults``, which the
builder, the expected-bits formula and resolved_scheme all read. The defaults are pinned
to the values the builders used before (8ec3d14's table, from the builders' own
``params.get``), and every built-in is built with and without each of them and codes the
same data to the same bits (the builder reads the default it declares).

Mutants tried: 8ec3d14's parent (the duplicates are accepted: the config tests fail), a
wrong declared default (kivi residual 16: the pinned table fails, and the kivi refusal's
text), builders handed the parameters unfilled (each builder test fails),
resolved_scheme not filling the defaults (the spellings and refusal tests fail), the
cell key built from the resolved parameters (the pinned ids fail).
"""

import numpy as np
import pytest

import kvstats
from kvstats.quant.registry import BUILTIN, resolved_scheme
from kvstats.sweep import SweepConfig, run_sweep

GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [32], "n_keys": [8], "n_trials": 4,
        "report": {"comparisons": []}}


def _roundtrip(name, params, K, V):
    sdef = BUILTIN[name]
    scheme = kvstats.make_scheme(name, None if sdef.fixed_budget else 3, K.shape[-1], seed=7,
                                 **{**sdef.example_params, **params})
    return scheme.roundtrip(K, V)


#: The defaults the builders took before they were declared once (8ec3d14's table).
PINNED = {
    "KV": {"norm_dtype": "float16"},
    **dict.fromkeys(("KQV", "QKQV", "turboquant_prod"),
                    {"rotation": "hadamard", "sketch": "gaussian", "norm_dtype": "float16"}),
    **dict.fromkeys(("turboquant_mse", "mixed"), {"rotation": "hadamard", "norm_dtype": "float16"}),
    "qjl": {"sketch": "gaussian", "n_outliers": 0, "group_size": 32, "norm_dtype": "float16"},
    "kivi": {"group_size": 32, "residual": 32},
    **dict.fromkeys(("fp8_e4m3", "fp8_e5m2", "nvfp4"), {"scale": "head"}),
    "klt": {"group_size": 1024},
}


def test_the_declared_defaults_are_those_the_builders_took():
    assert {name: dict(d.defaults) for name, d in BUILTIN.items() if d.defaults} == PINNED


@pytest.mark.parametrize("name, key", [(n, k) for n, d in BUILTIN.items() for k in d.defaults])
def test_each_listed_default_is_the_builders(name, key):
    """Given or left out, a listed default codes alike (2,048 tokens: klt's and kivi's
    token blocks; outlier channels for qjl, whose groups only they use; d = 48 pads the
    Hadamard rotation). A wrong default in the table codes otherwise: the settings all
    change these codes (the mutants in the module docstring)."""
    rng = np.random.default_rng(0)
    dim = 64 if name in ("fp8_e4m3", "fp8_e5m2", "nvfp4", "qjl") else 48
    K, V = rng.standard_normal((2, 2048, dim)) * np.linspace(0.2, 3, dim)
    base = {"n_outliers": 2} if name == "qjl" and key != "n_outliers" else {}
    left_out = _roundtrip(name, base, K, V)
    given = _roundtrip(name, {**base, key: BUILTIN[name].defaults[key]}, K, V)
    for a, b in zip(left_out, given):
        np.testing.assert_array_equal(a, b)


def test_spellings_of_one_scheme_resolve_alike():
    qkqv = resolved_scheme("QKQV", {})
    assert qkqv == resolved_scheme("QKQV", {"sketch": "gaussian", "rotation": "hadamard"})
    assert resolved_scheme("K4V2", {}) == resolved_scheme("mixed", {"key_bits": 4, "value_bits": 2.0})
    assert resolved_scheme("KV", {"norm_dtype": "half"}) == resolved_scheme("KV", {})
    assert resolved_scheme("QKQV", {}) != resolved_scheme("QKQV", {"sketch": "orthogonal"})
    assert resolved_scheme("QKQV", {}) != resolved_scheme("turboquant_prod", {})   # two names


@pytest.mark.parametrize("first, second, said", [
    ("QKQV", {"name": "QKQV", "params": {"sketch": "gaussian"}},
     "'QKQV' and \"QKQV[sketch='gaussian']\" are the same scheme (QKQV with the defaults filled in: "
     "norm_dtype='float16',rotation='hadamard',sketch='gaussian')"),
    ("K4V2", {"name": "mixed", "params": {"key_bits": 4, "value_bits": 2}},
     "'K4V2' and 'mixed[key_bits=4,value_bits=2]' are the same scheme (mixed with the defaults "
     "filled in: key_bits=4,norm_dtype='float16',rotation='hadamard',value_bits=2)"),
    ({"name": "kivi", "label": "a", "budgets": [2, 3]}, {"name": "kivi", "label": "b", "params": {"residual": 32}},
     "'a' and 'b' are the same scheme (kivi with the defaults filled in: group_size=32,residual=32)"),
])
def test_a_config_naming_one_scheme_twice_is_refused(first, second, said):
    with pytest.raises(ValueError) as exc:
        SweepConfig.from_dict({**GRID, "schemes": [first, second]})
    fixed = "K4V2" in said   # a fixed-budget scheme has no budgets of its own to set apart
    labelled = "'a' and 'b'" in said   # both labelled already: only the budgets are to set apart
    assert str(exc.value) == (f"schemes: {said}; keep one (with both entries' budgets, if they differ)"
                              + ("" if fixed else ", or give the two disjoint budgets (two operating points)"
                                 if labelled else ", or give each a label and the two disjoint budgets (two operating points)"))


def test_distinct_settings_run_and_the_cell_ids_are_those_stores_hold(tmp_path):
    """Ids pinned from the code before scheme identity was checked (a store written then
    holds these files, and a resume finds them); a scheme with another setting is another
    scheme."""
    cfg = {**GRID, "schemes": ["QKQV", {"name": "QKQV", "params": {"sketch": "orthogonal"}}, "K4V2",
                               {"name": "KQV", "label": "mine", "params": {"norm_dtype": "float32"}}]}
    config = SweepConfig.from_dict(cfg)
    assert [config.cell_id(c) for c in config.cells()] == [
        "169056ac5490e6254baa", "ab41e15395a3dee3e4d7", "60e55b2887579f012484", "f3f8eaa42f873c582227"]
    first = run_sweep(cfg, out=tmp_path, executor="serial", progress=False)
    again = run_sweep(cfg, out=tmp_path, executor="serial", progress=False)
    stored = sorted(p.stem for p in (tmp_path / "cells").iterdir())
    assert stored == sorted(c["id"] for c in first.manifest["cells"])
    assert again.manifest["n_computed"] == 0 and again.frame.equals(first.frame)
