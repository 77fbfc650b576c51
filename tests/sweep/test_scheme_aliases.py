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
new alias shows here). Schemes of different builders that code alike for some settings
(KV and turboquant_mse with rotation='identity'; K{a}V{a} and turboquant_mse at budget a)
are not detected: the builder is what the check compares.

Mutants tried: the registry names compared, as before (the alias is accepted: the refusal tests
fail), the builder left out of the key (a user's own builder with QKQV's parameters is
refused), the filled parameters left out (the alias with another sketch is refused), the
builders' functions compared without their bound formats (q4_0 and q4_1 refused).
"""

import numpy as np
import pytest

import kvstats
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.registry import BUILTIN
from kvstats.sweep import SchemeSpec, SweepConfig, load_config, run_sweep

GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [32], "n_keys": [8], "n_trials": 4,
        "report": {"comparisons": []}}
ALIAS = ("(QKQV and turboquant_prod: one builder, the same parameters with the defaults filled in: "
         "norm_dtype='float16',rotation='hadamard',sketch='gaussian'); keep one (with both "
         "entries' budgets, if they differ)")
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
