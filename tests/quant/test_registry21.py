"""What make_scheme and register_scheme hold a scheme's entry to (referee R4: F1, F3, F5-F7).

- F3: a scheme run at budgets whose build records another budget than the one asked for
  (so its rows sit at one budget while it codes at another) is refused by make_scheme;
- F5: a fixed-budget scheme whose build records None takes bits None or its coders'
  common nominal bits (identity's 32), as the built-in identity did by hand;
- F1: the facts other modules ask (randomized, key_rotated, coded_dim, the token group)
  are asked of ``example_params`` at registration, so one failing there is refused then;
- F6: each format's per-trial advice names only settings it takes (nvfp4: no float);
- F7: a summary of more than one line is refused, as its docstring says.
"""

from __future__ import annotations

import pytest

import kvstats
from kvstats.quant.coder import IdentityCoder
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.registry import scheme_def
from kvstats.quant.uniform import UniformTokenCoder


def _side(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


def _one_more(bits, dim, params, key_rng, value_rng, draws):
    b = bits + 1   # silently codes (and records) one bit more than asked
    return b, UniformTokenCoder(b, dim, dim), UniformTokenCoder(b, dim, dim)


def _copy(bits, dim, params, key_rng, value_rng, draws):
    return None, IdentityCoder(dim), IdentityCoder(dim)


def test_a_build_recording_another_budget_is_refused(user_registries):
    sdef = define_scheme("mmoff", _one_more, lambda b, d, n, p: _side(b + 1, d, n, p),
                         summary="one bit more", max_bits=7)
    with registered_scheme(sdef):
        with pytest.raises(ValueError, match=r"the build function of scheme 'mmoff' must record the "
                                             r"budget it was given \(bits=3\); it returned bits=4"):
            kvstats.make_scheme("mmoff", 3, 64)
        account = kvstats.check_scheme("mmoff", raise_on_failure=False)
    assert "must record the budget it was given" in account["expected_bits"]


def test_a_fixed_budget_recorded_as_none_takes_only_its_coders_bits(user_registries):
    sdef = define_scheme("copy", _copy, lambda b, d, n, p: (32 * n * d,) * 2, summary="stores K and V",
                         fixed_budget=True)
    with registered_scheme(sdef):
        with pytest.raises(ValueError, match=r"bits for copy must be None or 32 \(fixed by the format\); "
                                             r"received 4"):
            kvstats.make_scheme("copy", 4, 64)
        assert kvstats.make_scheme("copy", None, 64).bits is None
        assert kvstats.make_scheme("copy", 32, 64).bits is None
    # the built-in identity gets the same rule from make_scheme (its build checks nothing now)
    with pytest.raises(ValueError, match=r"bits for identity must be None or 32 \(fixed by the format\)"):
        kvstats.make_scheme("identity", 4, 64)
    assert scheme_def("identity").build(4, 8, {}, None, None, ())[0] is None


def test_every_builtin_still_builds_at_its_budgets():
    from kvstats.quant.contract import budgets
    from kvstats.quant.registry import BUILTIN

    for name, sdef in BUILTIN.items():
        for bits in budgets(name):
            scheme = kvstats.make_scheme(name, bits, 64, **sdef.example_params)
            assert scheme.bits == bits or (sdef.fixed_budget and bits is None)


def _needs_rot(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


@pytest.mark.parametrize("field,kw", [
    ("randomized", {"randomized": lambda p: p["rot"] != "identity"}),
    ("key_rotated", {"key_rotated": lambda p: p["rot"] != "identity"}),
    ("coded_dim", {"coded_dim": lambda d, p: d if p["rot"] == "identity" else 2 * d}),
])
def test_a_fact_failing_at_example_params_is_refused_at_registration(user_registries, field, kw):
    # a required parameter (no default) left out of example_params: the theory table asked
    # randomized({}) of every entry and failed with KeyError 'rot' in a later report
    sdef = define_scheme("tqrot", _needs_rot, _side, summary="s", params=["rot"], key_theory="mse", **kw)
    with pytest.raises(ValueError, match=rf"SchemeDef field '{field}' fails for example_params \{{\}} "
                                         r".*KeyError: 'rot'; give every parameter without a default"):
        kvstats.register_scheme(sdef)
    fine = define_scheme("tqrot", _needs_rot, _side, summary="s", params=["rot"], key_theory="mse",
                         example_params={"rot": "hadamard"}, **kw)
    with registered_scheme(fine):
        assert "tqrot" in kvstats.quant.scheme_names()


def test_key_rotated_is_validated_and_defaults_to_false(user_registries):
    assert define_scheme("a1", _needs_rot, _side, summary="s").key_rotated({}) is False
    assert define_scheme("a1", _needs_rot, _side, summary="s", key_rotated=True).key_rotated({}) is True
    with pytest.raises(TypeError, match=r"field 'key_rotated' \('_key_rotated'\) must take the 1 arguments"):
        kvstats.register_scheme(define_scheme("a2", _needs_rot, _side, summary="s",
                                              key_rotated=lambda a, b: True))
    assert [scheme_def(n).key_rotated({}) for n in ("KV", "KQV", "QKQV", "turboquant_mse", "kivi")] == [
        False, True, True, True, False]


def test_a_multi_line_summary_is_refused(user_registries):
    with pytest.raises(ValueError, match=r"SchemeDef field 'summary' must be one line"):
        kvstats.register_scheme(define_scheme("two", _needs_rot, _side, summary="line one\nline two"))
    kvstats.register_scheme(define_scheme("one", _needs_rot, _side, summary=" one line\n"))


@pytest.mark.parametrize("name,advice", [
    ("fp8_e4m3", "scale='head' (the default) or a static scale=<float>"),
    ("fp8_e5m2", "scale='head' (the default) or a static scale=<float>"),
    ("nvfp4", "scale='head' (the default)"),
])
def test_the_per_trial_advice_names_settings_the_format_takes(name, advice):
    sdef = scheme_def(name)
    assert sdef.per_trial_setting({"scale": "tensor"}) == advice
    kvstats.make_scheme(name, None, 64, scale="head")
    if "float" in advice:
        kvstats.make_scheme(name, None, 64, scale=2.0)
    else:
        with pytest.raises(ValueError, match="scale must be one of"):
            kvstats.make_scheme(name, None, 64, scale=2.0)
