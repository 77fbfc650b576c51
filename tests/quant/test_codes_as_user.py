"""A user's scheme declares that it codes as another (``define_scheme(codes_as=...)``,
the form of the built-ins' ``SchemeDef.codes_as``), and the contract holds every
declaration true (``kvstats.quant.contract.check_codes_as``, a clause of ``check_scheme``).

A declaration is what a sweep config reads to refuse two entries that code the same cells
(``kvstats.quant.registry.coded_scheme``, ``kvstats/sweep/specs.py``): a user's wrapper of
TurboQuant-mse's builder, declared so, is refused beside ``turboquant_mse`` as the
built-in ``KV`` is. The clause codes one seed's K, V through both to the same bits (decoded
arrays, stored bits, the budget a fixed-budget entry records) and names both schemes and
the first budget where they differ; the built-ins' declarations pass it.

Mutants tried (each fails a test here): define_scheme dropping the declaration (the
refusal and false-declaration tests), the clause returning at once (false declarations
pass), comparing only the first budget (the liar from budget 3 passes), the stored-bits
comparison dropped, the values' comparison dropped, the recorded-budget check dropped,
no common budget passing, the clause left out of CHECKS, the declaration's form unchecked
(the bad-form cases), register_scheme not checking that it is callable.
"""

from __future__ import annotations

import pytest

import kvstats
from kvstats.quant import contract
from kvstats.quant.register import define_scheme, register_scheme, registered_scheme
from kvstats.quant.registry import BUILTIN, coded_scheme, scheme_def
from kvstats.sweep import SweepConfig

pytestmark = pytest.mark.filterwarnings("ignore:.*below float16:UserWarning")

TQ = scheme_def("turboquant_mse")
UNROTATED = {**TQ.defaults, "rotation": "identity"}
GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [32], "n_keys": [8], "n_trials": 4,
        "report": {"comparisons": []}}


def _unrotated_build(bits, dim, params, key_rng, value_rng, draws):   # turboquant_mse, no rotation
    return TQ.build(bits, dim, UNROTATED, key_rng, value_rng, draws)


def _unrotated_bits(bits, dim, n_tokens, params):
    return TQ._bits(bits, dim, n_tokens, UNROTATED)


def _as_unrotated_tq(params):
    return "turboquant_mse", {"rotation": "identity"}, None


def _declaring(value):
    return lambda params: value


def _unrotated(name="plain_tq", build=_unrotated_build, codes_as=_as_unrotated_tq, **more):
    return define_scheme(name, build, _unrotated_bits, summary="TurboQuant-mse without a rotation",
                         key_theory="mse", codes_as=codes_as, **more)


def _failures(sdef):
    with registered_scheme(sdef):
        account = kvstats.check_scheme(sdef.name, raise_on_failure=False)
    return {clause: message for clause, message in account.items() if message != "ok"}


# --------------------------------------------------------------------------- built-ins
def _declaring_builtins():
    """Every built-in instance that declares a coding-as, under a few settings."""
    yield from (("KV", p) for p in ({}, {"norm_dtype": "float32"}))
    yield from ((f"K{a}V{a}", {}) for a in range(1, 9))
    yield from (("K3V3", {"rotation": r}) for r in ("haar", "identity"))
    yield "mixed", {"key_bits": 2, "value_bits": 2, "norm_dtype": "float32"}


@pytest.mark.parametrize("name, params", list(_declaring_builtins()), ids=str)
def test_every_built_in_declaration_passes_the_clause(name, params):
    assert coded_scheme(name, params)[0] == "turboquant_mse"   # a declaration is there to check
    contract.check_codes_as(name, params)


def test_the_clause_passes_every_built_in_entry_with_its_example_params():
    for name, sdef in BUILTIN.items():
        contract.check_codes_as(name, dict(sdef.example_params))   # none declared: nothing to check
    assert kvstats.check_scheme("KV")["codes_as"] == "ok"


# --------------------------------------------------------------------------- a true declaration
def test_a_user_scheme_coding_as_turboquant_mse_passes_and_is_refused_beside_it_in_a_sweep():
    with registered_scheme(_unrotated()):
        assert set(kvstats.check_scheme("plain_tq").values()) == {"ok"}
        with pytest.raises(ValueError) as exc:
            SweepConfig.from_dict({**GRID, "schemes": [
                "plain_tq", {"name": "turboquant_mse", "params": {"rotation": "identity"}}]})
        # KV is the same built-in scheme, so it is refused beside plain_tq too
        with pytest.raises(ValueError, match="'KV' and 'plain_tq' are the same scheme"):
            SweepConfig.from_dict({**GRID, "schemes": ["KV", "plain_tq"]})
        # with a rotation, turboquant_mse codes other cells
        SweepConfig.from_dict({**GRID, "schemes": ["plain_tq", "turboquant_mse"]})
    assert str(exc.value) == (
        "schemes: 'plain_tq' and \"turboquant_mse[rotation='identity']\" are the same scheme (plain_tq "
        "codes as turboquant_mse with the defaults filled in: norm_dtype='float16',rotation='identity'); "
        "keep one (with both entries' budgets, if they differ), or give each a label and the two disjoint budgets (two operating points)")


def test_undeclared_the_same_wrapper_is_a_scheme_of_its_own():
    with registered_scheme(_unrotated(codes_as=None)):
        config = SweepConfig.from_dict({**GRID, "schemes": [
            "plain_tq", {"name": "turboquant_mse", "params": {"rotation": "identity"}}]})
    assert len(config.schemes) == 2


def _tq_at_4(bits, dim, params, key_rng, value_rng, draws):   # fixed budget: turboquant_mse at 4
    return TQ.build(4, dim, dict(TQ.defaults), key_rng, value_rng, draws)


def _tq_at_4_bits(bits, dim, n_tokens, params):
    return TQ._bits(4, dim, n_tokens, dict(TQ.defaults))


def _as_tq_at_4(params):
    return "turboquant_mse", {}, 4


def test_a_fixed_budget_user_scheme_is_refused_only_where_turboquant_mse_runs_at_its_budget():
    sdef = define_scheme("tq4", _tq_at_4, _tq_at_4_bits, summary="TurboQuant-mse at 4 bits",
                         fixed_budget=True, randomized=True, key_theory=None, codes_as=_as_tq_at_4)
    with registered_scheme(sdef):
        assert kvstats.check_scheme("tq4")["codes_as"] == "ok"
        SweepConfig.from_dict({**GRID, "schemes": ["tq4", {"name": "turboquant_mse", "budgets": [2, 3]}]})
        with pytest.raises(ValueError, match=r"^schemes: 'tq4' and 'turboquant_mse' code the same cells "
                                             r"at budget 4 \(tq4 codes as turboquant_mse at budget 4"):
            SweepConfig.from_dict({**GRID, "schemes": ["tq4", {"name": "turboquant_mse", "budgets": [4]}]})


# --------------------------------------------------------------------------- false declarations
def _rotated_from_3(bits):
    """turboquant_mse's parameters of the liar below: no rotation below 3 bits, one from 3 on."""
    return UNROTATED if bits < 3 else dict(TQ.defaults)


def _liar_build(bits, dim, params, key_rng, value_rng, draws):
    return TQ.build(bits, dim, _rotated_from_3(bits), key_rng, value_rng, draws)


def _liar_bits(bits, dim, n_tokens, params):
    return TQ._bits(bits, dim, n_tokens, _rotated_from_3(bits))


def _liar():
    return define_scheme("tq_liar", _liar_build, _liar_bits, summary="rotated from 3 bits on",
                         codes_as=_as_unrotated_tq)


def test_a_false_declaration_fails_check_scheme_naming_both_schemes_and_the_first_budget():
    failed = _failures(_liar())
    # budgets checked: 1, 3, 8; true at 1, false from 3 (the other clauses check at 1 or hold)
    assert list(failed) == ["codes_as"]
    assert failed["codes_as"].startswith(
        "scheme 'tq_liar' (bits=3, d=128, draws=(), params {}): declares it codes as 'turboquant_mse' "
        "with params {'rotation': 'identity'}, but at budget 3 the two code K to other bits (")
    with registered_scheme(_liar()):
        with pytest.raises(contract.SchemeContractError, match=r"(?s)breaks 1 clause.*- codes_as: "):
            kvstats.check_scheme("tq_liar")


def _haar_values(bits, dim, params, key_rng, value_rng, draws):
    """Keys as turboquant_mse without a rotation, values with a Haar one (the same bits stored)."""
    haar = TQ.build(bits, dim, {**UNROTATED, "rotation": "haar"}, key_rng, value_rng, draws)[2]
    return bits, _unrotated_build(bits, dim, params, key_rng, value_rng, draws)[1], haar


def test_a_declaration_false_for_the_values_only_fails_the_clause():
    with registered_scheme(_unrotated("haar_values", build=_haar_values, randomized=True)):
        with pytest.raises(contract.SchemeContractError,
                           match=r"but at budget 1 the two code V to other bits \("):
            contract.check_codes_as("haar_values")


class _CountsAByte:
    """A coder that decodes as the one it wraps but says it stores 8 more bits per vector."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def stored_bits(self, n_tokens):
        return {**self.inner.stored_bits(n_tokens), "tag": 8 * n_tokens}


def _tagged_build(bits, dim, params, key_rng, value_rng, draws):
    bits, key, value = _unrotated_build(bits, dim, params, key_rng, value_rng, draws)
    return bits, _CountsAByte(key), value


def test_a_declaration_storing_other_bits_fails_the_clause():
    with registered_scheme(_unrotated("tagged_tq", build=_tagged_build)):
        with pytest.raises(contract.SchemeContractError,
                           match=r"at budget 1 the two store other bits for N=1"):
            contract.check_codes_as("tagged_tq")


def _records_3(bits, dim, params, key_rng, value_rng, draws):
    return 3, *_tq_at_4(bits, dim, params, key_rng, value_rng, draws)[1:]


def test_a_fixed_budget_entry_recording_another_budget_fails_the_clause():
    sdef = define_scheme("tq4_as_3", _records_3, _tq_at_4_bits, summary="records 3, codes at 4",
                         fixed_budget=True, randomized=True, codes_as=_as_tq_at_4)
    with registered_scheme(sdef):
        with pytest.raises(contract.SchemeContractError,
                           match=r"declares it codes as 'turboquant_mse' with params \{\} at budget 4, "
                                 r"but records budget 3"):
            contract.check_codes_as("tq4_as_3")


def test_a_declaration_at_every_budget_of_a_scheme_sharing_none_fails_the_clause():
    sdef = _unrotated("one_bit", codes_as=_declaring(("KQV", {}, None)), max_bits=1)   # KQV: 2..8
    with registered_scheme(sdef):
        with pytest.raises(contract.SchemeContractError,
                           match=r"declares it codes as 'KQV' with params \{\} at every budget both "
                                 r"take, but they take none in common \('KQV': 2..8\)"):
            contract.check_codes_as("one_bit")


# --------------------------------------------------------------------------- the form
def test_register_scheme_refuses_a_declaration_that_is_not_callable():
    with pytest.raises(TypeError, match=r"SchemeDef field 'codes_as' \('_codes_as'\) must be a callable"):
        register_scheme(_unrotated(codes_as=("turboquant_mse", {}, None)))


@pytest.mark.parametrize("declared, fixed, said", [
    ("turboquant_mse", False, "a tuple of three"),
    (("turbo", {}, None), False, "its name one of the other registered schemes ['KV', "),
    (("bad_form", {}, None), False, "its name one of the other registered schemes ['KV', "),
    (("mixed", {}, None), False, "its name a scheme run at budgets ('mixed' is fixed_budget)"),
    (("turboquant_mse", ["rotation"], None), False, "its params a mapping of 'turboquant_mse'"),
    (("KV", {}, None), False, "its name a scheme declaring no codes_as itself ('KV' declares one)"),
    (("turboquant_mse", {}, 4), False, "its budget None (a scheme run at budgets"),
    (("turboquant_mse", {}, None), True, "its budget the one its own parameters fix"),
    (("turboquant_mse", {}, 9), True, "its budget an integer in [1, 8]"),
    (("turboquant_mse", {}, 2.5), True, "its budget an integer in [1, 8]"),
    (("turboquant_mse", {}, True), True, "its budget an integer in [1, 8]"),
])
def test_a_declaration_of_another_form_is_a_value_error_naming_the_scheme(declared, fixed, said):
    sdef = _unrotated("bad_form", codes_as=_declaring(declared), fixed_budget=fixed)
    with registered_scheme(sdef):
        with pytest.raises(ValueError) as exc:
            coded_scheme("bad_form", {})
    assert _failures(sdef)["codes_as"] == f"scheme 'bad_form' raised ValueError: {exc.value}"
    assert str(exc.value).startswith("scheme 'bad_form': codes_as must return None or (name, params, "
                                     f"budget), {said}")
    assert str(exc.value).endswith(f"; received {declared!r}")


def test_the_declaration_changes_no_cell_id():
    """It decides which configs a sweep accepts, not any number a cell computes."""
    ids = []
    for codes_as in (None, _as_unrotated_tq):
        with registered_scheme(_unrotated(codes_as=codes_as)):
            config = SweepConfig.from_dict({**GRID, "schemes": ["plain_tq"]})
            ids.append([config.cell_id(c) for c in config.cells()])
    assert ids[0] == ids[1]
