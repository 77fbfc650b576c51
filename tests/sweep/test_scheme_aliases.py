"""Two registry names of one scheme are one scheme in a sweep (kvstats/sweep/specs.py,
``_check_distinct_schemes``): what is compared is the builder (``SchemeDef.build``) and
the parameters it is handed, the defaults filled in, not the registry name.

``QKQV`` and ``turboquant_prod`` are one builder with the same defaults (a documented
alias, kvstats/quant/builtin_schemes.py); a sweep listing both would run one scheme twice,
under two scheme seeds, and compare it with itself. It is refused with a message naming
both entries, from a TOML file, a dict or ``SweepConfig`` itself, before any folder is
touched; the alias with another setting is another scheme and runs, under the cell ids
stores already hold. One builder under other defaults (a user's scheme reusing a
built-in's builder) is one scheme only where the filled parameters agree; a user's
scheme with its own builder is never taken for a built-in.

The only built-in names sharing a builder are QKQV and turboquant_prod (pinned below: a
new alias shows here). Two builders code alike where an entry declares it
(``SchemeDef.codes_as``, read by ``kvstats.quant.registry.coded_scheme``): ``KV`` is
``turboquant_mse`` with ``rotation="identity"`` at every budget, refused beside it
whatever the budgets (one scheme); ``K{a}V{a}`` is ``turboquant_mse`` at budget a only, a
cell-level duplicate, refused where the other runs at a (its own ``budgets``, or the
sweep's) with a message naming both entries and the budget, and accepted beside it at
other budgets. Every declaration is checked here by coding both with one seed to the same
bits, over the settings they take (a declaration that does not hold fails it).

Mutants tried: the registry names compared, as before (the alias is accepted: the refusal tests
fail), the builder left out of the key (a user's own builder with QKQV's parameters is
refused), the filled parameters left out (the alias with another sketch is refused), the
builders' functions compared without their bound formats (q4_0 and q4_1 refused).
For codes_as: no declarations (KV, K4V4 beside turboquant_mse accepted: the refusal and
pinned-table tests fail), mixed declared for unequal sides too (K4V2 as turboquant_mse at
4: the coding test fails), KV declared with the rotation left as given (hadamard: the
coding test fails), the budget ignored in the cell check (K4V4 beside turboquant_mse at
[2, 3] refused: the allowed tests fail), the entry's own budgets ignored for the sweep's
(the own-budgets tests fail).
"""

import numpy as np
import pytest

import kvstats
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.registry import BUILTIN, coded_scheme
from kvstats.sweep import SchemeSpec, SweepConfig, load_config, run_sweep
from kvstats.sweep.specs import _check_distinct_schemes

GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [32], "n_keys": [8], "n_trials": 4,
        "report": {"comparisons": []}}
ALIAS = ("(QKQV and turboquant_prod: one builder, the same parameters with the defaults filled in: "
         "norm_dtype='float16',rotation='hadamard',sketch='gaussian'); keep one (with both "
         "entries' budgets, if they differ), or give each a label and the two disjoint budgets (two operating points)")
QKQV = BUILTIN["QKQV"]


def test_the_built_in_names_sharing_a_builder_are_the_alias_pair_and_code_alike():
    groups: dict = {}
    for name, sdef in BUILTIN.items():
        groups.setdefault(id(sdef.build), []).append(name)
    assert [g for g in groups.values() if len(g) > 1] == [["QKQV", "turboquant_prod"]]
    assert dict(QKQV.defaults) == dict(BUILTIN["turboquant_prod"].defaults)
    K, V = np.random.default_rng(0).standard_normal((2, 16, 32))
    a, b = (kvstats.make_scheme(n, 3, 32, seed=7).roundtrip(K, V) for n in ("QKQV", "turboquant_prod"))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_a_toml_config_listing_the_alias_pair_is_refused(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('budgets = [3]\ndistributions = ["gaussian"]\n'
                    '[[schemes]]\nname = "QKQV"\n'
                    '[[schemes]]\nname = "turboquant_prod"\nlabel = "tq"\nbudgets = [2, 4]\n')
    with pytest.raises(ValueError) as exc:
        load_config(path)
    assert str(exc.value) == f"schemes: 'QKQV' and 'tq' are the same scheme {ALIAS}"


@pytest.mark.parametrize("schemes, first, second", [
    (["turboquant_prod", "QKQV"], "turboquant_prod", "QKQV"),
    (["QKQV", {"name": "turboquant_prod", "params": {"rotation": "hadamard"}}],
     "QKQV", "turboquant_prod[rotation='hadamard']"),
])
def test_the_python_api_refuses_the_alias_pair_before_the_folder(tmp_path, schemes, first, second):
    said = f"schemes: {first!r} and {second!r} are the same scheme"
    with pytest.raises(ValueError) as exc:
        SweepConfig(schemes=tuple(SchemeSpec(s) if isinstance(s, str) else SchemeSpec(**s)
                                  for s in schemes), distributions=("gaussian",))
    assert str(exc.value).startswith(said)
    out = tmp_path / "out"
    with pytest.raises(ValueError) as exc:
        run_sweep({**GRID, "schemes": schemes}, out=out, executor="serial", progress=False)
    assert str(exc.value).startswith(said) and not out.exists()


def test_the_alias_with_another_setting_runs_under_the_ids_stores_hold(tmp_path):
    """Ids computed at d43b8d0, before the alias was refused (the cell key is unchanged)."""
    cfg = {**GRID, "schemes": ["QKQV", {"name": "turboquant_prod", "params": {"sketch": "orthogonal"}}]}
    config = SweepConfig.from_dict(cfg)
    assert [config.cell_id(c) for c in config.cells()] == ["169056ac5490e6254baa", "35cac4d239d9e743dbcd"]
    result = run_sweep(cfg, out=tmp_path, executor="serial", progress=False)
    assert sorted(result.frame["scheme"].unique()) == ["QKQV", "turboquant_prod[sketch='orthogonal']"]


def test_every_other_built_in_is_a_scheme_of_its_own():
    """One sweep of every built-in but the alias (the formats' builders share a function,
    each with its format bound) is accepted."""
    names = ["K4V2" if n == "mixed" else n for n in BUILTIN if n != "turboquant_prod"]
    assert len(SweepConfig.from_dict({**GRID, "schemes": names}).schemes) == len(BUILTIN) - 1


def _user_scheme(name, build, defaults):
    return define_scheme(name, build, QKQV._bits, summary="a user's prod scheme", params=QKQV.params,
                         min_bits=2, randomized=True, defaults=defaults)


def _own_build(bits, dim, params, key_rng, value_rng, draws):
    return QKQV.build(bits, dim, params, key_rng, value_rng, draws)


def test_a_user_scheme_with_its_own_builder_is_not_taken_for_a_built_in():
    """Its own builder (here coding as QKQV does, with QKQV's defaults) is its own scheme."""
    with registered_scheme(_user_scheme("my_prod", _own_build, dict(QKQV.defaults))):
        config = SweepConfig.from_dict({**GRID, "schemes": ["QKQV", "my_prod"]})
    assert [s.name for s in config.schemes] == ["QKQV", "my_prod"]


def test_one_builder_under_other_defaults_is_one_scheme_only_where_the_filled_parameters_agree():
    defaults = {**QKQV.defaults, "sketch": "orthogonal"}
    with registered_scheme(_user_scheme("ortho_prod", QKQV.build, defaults)):
        SweepConfig.from_dict({**GRID, "schemes": ["QKQV", "ortho_prod"]})   # two schemes
        with pytest.raises(ValueError) as exc:
            SweepConfig.from_dict({**GRID, "schemes": [
                {"name": "QKQV", "params": {"sketch": "orthogonal"}}, "ortho_prod"]})
    assert str(exc.value).startswith(
        "schemes: \"QKQV[sketch='orthogonal']\" and 'ortho_prod' are the same scheme (QKQV and "
        "ortho_prod: one builder, the same parameters with the defaults filled in: "
        "norm_dtype='float16',rotation='hadamard',sketch='orthogonal')")


# --------------------------------------------------------------------------- codes_as
#: The settings each declaration is coded under: every budget, every rotation, both norm
#: dtypes, equal and unequal mixed sides (d = 48 pads the Hadamard rotation).
_SETTINGS = {"rotation": ("hadamard", "haar", "identity"), "norm_dtype": ("float16", "float32")}
_MIXED_SIDES = [(a, a) for a in range(1, 9)] + [(4, 2), (2, 4), (1, 8)]


def _instances():
    """(name, budget, params) of every built-in under the settings above."""
    for name, sdef in BUILTIN.items():
        settings = [{}]
        for key, values in _SETTINGS.items():
            if key in sdef.params:
                settings = [{**s, key: v} for s in settings for v in values]
        if name == "mixed":
            yield from ((name, None, {**s, "key_bits": a, "value_bits": b}) for s in settings
                        for a, b in _MIXED_SIDES)
        elif not sdef.fixed_budget:
            yield from ((name, bits, s) for s in settings
                        for bits in range(sdef.min_bits, sdef.max_bits + 1))


def _bits_of(arrays):
    return [np.ascontiguousarray(a).view(np.uint64) for a in arrays]


def test_the_entries_coding_as_another_are_kv_and_equal_sided_mixed():
    """Which built-ins are declared to code as another (a new declaration shows here, and
    must then pass the coding test below)."""
    declared = {(name, bits, tuple(sorted(p.items()))): BUILTIN[name].codes_as(p)
                for name, bits, p in _instances() if BUILTIN[name].codes_as(p) is not None}
    assert {name for name, _, _ in declared} == {"KV", "mixed"}
    assert all(dict(p)["key_bits"] == dict(p)["value_bits"] for n, _, p in declared if n == "mixed")
    assert sum(n == "mixed" for n, _, _ in declared) == 8 * 6     # every a, every setting
    assert {target for target, _, _ in declared.values()} == {"turboquant_mse"}


@pytest.mark.parametrize("name, bits, params", [i for i in _instances() if BUILTIN[i[0]].codes_as(i[2])],
                         ids=lambda v: str(v))
def test_every_declared_coding_as_codes_alike(name, bits, params):
    """One seed, the same bits: decoded keys and values equal bit for bit, and the same
    expected stored bits; the entry named is run at budgets and declares none itself."""
    target, target_params, at = BUILTIN[name].codes_as(params)
    tdef = BUILTIN[target]
    assert not tdef.fixed_budget and tdef.codes_as(target_params) is None
    at = bits if at is None else at
    K, V = np.random.default_rng(0).standard_normal((2, 2, 64, 48)) * np.linspace(0.2, 3, 48)
    ours = kvstats.make_scheme(name, bits, 48, seed=7, **params).roundtrip(K, V)
    theirs = kvstats.make_scheme(target, at, 48, seed=7, **target_params).roundtrip(K, V)
    for a, b in zip(_bits_of(ours), _bits_of(theirs)):
        np.testing.assert_array_equal(a, b)
    assert BUILTIN[name].expected_bits(bits, 48, 64, **params) == \
        tdef.expected_bits(at, 48, 64, **target_params)


def test_coded_scheme_reads_the_declarations_with_the_defaults_filled_in():
    tq = {"norm_dtype": "float16", "rotation": "hadamard"}
    kv = coded_scheme("KV", {"norm_dtype": "half"})
    assert kv == ("turboquant_mse", {**tq, "rotation": "identity"}, None)
    assert coded_scheme("K4V4", {}) == coded_scheme("mixed", {"key_bits": 4.0, "value_bits": 4}) \
        == ("turboquant_mse", tq, 4)
    assert coded_scheme("turboquant_mse", {}) == ("turboquant_mse", tq, None)
    assert coded_scheme("K4V2", {})[0] == "mixed" and coded_scheme("QKQV", {})[0] == "QKQV"


SAME_KV = ("schemes: 'KV' and \"turboquant_mse[rotation='identity']\" are the same scheme (KV codes as "
           "turboquant_mse with the defaults filled in: norm_dtype='float16',rotation='identity'); keep one "
           "(with both entries' budgets, if they differ), or give each a label and the two disjoint budgets (two operating points)")


def _cells_said(first, second, budget, rotation="hadamard", who="K4V4 codes"):
    return (f"schemes: {first!r} and {second!r} code the same cells at budget {budget} ({who} as "
            f"turboquant_mse at budget {budget}, with the defaults filled in: norm_dtype='float16',"
            f"rotation={rotation!r}): one scheme under two scheme seeds, compared with itself; ")


def test_a_toml_config_listing_kv_and_its_turboquant_mse_is_refused_whatever_the_budgets(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('budgets = [3]\ndistributions = ["gaussian"]\n[[schemes]]\nname = "KV"\nbudgets = [2]\n'
                    '[[schemes]]\nname = "turboquant_mse"\nparams = {rotation = "identity"}\nbudgets = [5]\n')
    with pytest.raises(ValueError) as exc:
        load_config(path)
    assert str(exc.value) == SAME_KV


def test_a_toml_config_running_k4v4_and_turboquant_mse_at_4_is_refused_naming_the_budget(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('budgets = [2]\ndistributions = ["gaussian"]\n[[schemes]]\nname = "turboquant_mse"\n'
                    'budgets = [3, 4]\n[[schemes]]\nname = "K4V4"\n')
    with pytest.raises(ValueError) as exc:
        load_config(path)
    assert str(exc.value) == (_cells_said("turboquant_mse", "K4V4", 4)
                              + "keep one, or run 'turboquant_mse' at budgets without 4")


@pytest.mark.parametrize("schemes, said", [
    (["KV", {"name": "turboquant_mse", "params": {"rotation": "identity"}}], SAME_KV),
    (["K4V4", {"name": "turboquant_mse", "budgets": [4]}],
     _cells_said("K4V4", "turboquant_mse", 4) + "keep one, or run 'turboquant_mse' at budgets without 4"),
    ([{"name": "KV", "budgets": [2, 3]}, {"name": "K3V3", "params": {"rotation": "identity"}}],
     _cells_said("KV", "K3V3[rotation='identity']", 3, "identity", "KV and K3V3 code")
     + "keep one, or run 'KV' at budgets without 3"),
    ([{"name": "mixed", "label": "m", "params": {"key_bits": 2.0, "value_bits": 2, "rotation": "haar"}},
      {"name": "turboquant_mse", "params": {"rotation": "haar"}, "budgets": [2]}],
     _cells_said("m", "turboquant_mse[rotation='haar']", 2, "haar", "mixed codes")
     + "keep one, or run \"turboquant_mse[rotation='haar']\" at budgets without 2"),
])
def test_the_python_api_refuses_cells_coded_alike_before_the_folder(tmp_path, schemes, said):
    with pytest.raises(ValueError) as exc:
        SweepConfig.from_dict({**GRID, "schemes": schemes})
    assert str(exc.value) == said
    out = tmp_path / "out"
    with pytest.raises(ValueError) as exc:
        run_sweep({**GRID, "schemes": schemes}, out=out, executor="serial", progress=False)
    assert str(exc.value) == said and not out.exists()


@pytest.mark.parametrize("schemes", [
    ["K4V4", {"name": "turboquant_mse", "budgets": [2, 3]}],
    ["K4V4", "turboquant_mse"],                                  # the sweep's budgets: [3]
    ["K3V3", "K4V4", {"name": "turboquant_mse", "budgets": [2, 5]}],
    ["KV", "turboquant_mse", "K5V5", {"name": "K2V2", "params": {"rotation": "identity"}}],
    [{"name": "KV", "budgets": [2, 4]}, {"name": "K3V3", "params": {"rotation": "identity"}}],
])
def test_entries_coding_alike_at_budgets_not_both_run_are_accepted(schemes):
    assert len(SweepConfig.from_dict({**GRID, "schemes": schemes}).schemes) == len(schemes)


def _ids(schemes):
    config = SweepConfig.from_dict({**GRID, "schemes": schemes})
    return [config.cell_id(c) for c in config.cells()]


def test_k4v4_beside_turboquant_mse_runs_under_the_cell_ids_each_has_alone(tmp_path):
    """Accepted beside each other at other budgets, each keeps the ids it has alone."""
    tq = {"name": "turboquant_mse", "budgets": [2, 3]}
    assert _ids(["K4V4", tq]) == _ids(["K4V4"]) + _ids([tq])
    result = run_sweep({**GRID, "schemes": ["K4V4", tq]}, out=tmp_path, executor="serial", progress=False)
    assert sorted(result.frame["scheme"].unique()) == ["K4V4", "turboquant_mse"]


@pytest.mark.parametrize("budgets, refused", [((2, 3), False), ((3, 4), True), (None, False)])
def test_the_sweeps_budgets_decide_for_an_entry_without_its_own(budgets, refused):
    """``_check_distinct_schemes`` given the sweep's budgets (None: not known, not checked)."""
    specs = [SchemeSpec("K4V4"), SchemeSpec("turboquant_mse")]
    if not refused:
        _check_distinct_schemes(specs, budgets)
        return
    with pytest.raises(ValueError) as exc:
        _check_distinct_schemes(specs, budgets)
    assert str(exc.value) == (_cells_said("K4V4", "turboquant_mse", 4)
                              + "keep one, or run 'turboquant_mse' at budgets without 4")


def test_a_config_running_k4v4_and_turboquant_mse_at_the_sweeps_budget_4_is_refused():
    with pytest.raises(ValueError, match="code the same cells at budget 4"):
        SweepConfig.from_dict({**GRID, "budgets": [3, 4], "schemes": ["K4V4", "turboquant_mse"]})
    SweepConfig.from_dict({**GRID, "budgets": [2, 3], "schemes": ["K4V4", "turboquant_mse"]})
