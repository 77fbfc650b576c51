"""Errors a researcher meets writing a scheme or distribution of their own name what to fix.

A build, expected_bits or sampler of the wrong arity was registered and failed later with
Python's bare "takes 5 positional arguments but 6 were given"; an expected_bits returning
one number failed the contract as "cannot unpack non-iterable int object"; a setting
check_scheme was given that the scheme does not have was reported as 12 broken clauses.
"""

from __future__ import annotations

import pytest

import kvstats
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.uniform import UniformTokenCoder


@pytest.fixture(autouse=True)
def _unregister():
    yield   # a registration the test expected to be refused would leak into the next test
    if "mine" in kvstats.quant.register.user_schemes():
        kvstats.unregister_scheme("mine")
    if "mine" in kvstats.data.register.distribution_names():
        kvstats.data.register.unregister_distribution("mine")


def _build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def _bits(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 32)
    return side, side


def _build5(bits, dim, params, key_rng, value_rng):   # forgets draws
    return _build(bits, dim, params, key_rng, value_rng, ())


def _bits3(bits, dim, n_tokens):                        # forgets params
    return _bits(bits, dim, n_tokens, {})


@pytest.mark.parametrize("fields,text", [
    ({"build": _build5}, "SchemeDef field 'build' must take the 6 arguments build(bits, dim, params, "
                         "key_rng, value_rng, draws); received _build5(bits, dim, params, key_rng, value_rng)"),
    ({"expected_bits": _bits3}, "must take the 4 arguments expected_bits(bits, dim, n_tokens, params); "
                                "received _bits3(bits, dim, n_tokens)"),
    ({"randomized": lambda: True}, "'randomized' ('_randomized') must take the 1 arguments"),
])
def test_a_function_of_the_wrong_arity_is_refused_at_registration_by_its_field(fields, text):
    sdef = define_scheme("mine", **{"build": _build, "expected_bits": _bits, **fields}, summary="x")
    with pytest.raises(TypeError) as info:
        kvstats.register_scheme(sdef)
    assert text in str(info.value)
    assert "mine" not in kvstats.quant.scheme_names()


def test_functions_taking_more_or_any_arguments_are_accepted():
    sdef = define_scheme("mine", lambda *args: _build(*args), lambda b, d, n, p, extra=0: _bits(b, d, n, p),
                         summary="x")
    with registered_scheme(sdef):
        assert kvstats.make_scheme("mine", 3, 64).bits_per_coord(4).total == 3.5


def test_a_sampler_of_the_wrong_arity_is_refused_at_registration():
    def sampler(n_trials, n_keys, dim, rng):            # forgets params
        return rng.standard_normal((n_trials, n_keys, dim))

    with pytest.raises(TypeError, match=r"sampler must take the 5 arguments sampler\(n_trials, n_keys, dim, "
                                        r"rng, params\); received sampler\(n_trials, n_keys, dim, rng\)"):
        kvstats.register_distribution("mine", sampler)
    assert "mine" not in kvstats.data.register.distribution_names()


def test_expected_bits_returning_one_number_says_it_must_return_a_pair():
    sdef = define_scheme("mine", _build, lambda b, d, n, p: n * (b * d + 32), summary="x")
    with registered_scheme(sdef):
        with pytest.raises(TypeError, match=r"expected_bits of scheme 'mine' must return \(key_bits, "
                                            r"value_bits\), two numbers.*received 96"):
            sdef.expected_bits(1, 64, 1)
        account = kvstats.check_scheme("mine", raise_on_failure=False)
    assert "must return (key_bits, value_bits)" in account["expected_bits"]


def test_check_scheme_refuses_a_setting_the_scheme_does_not_have_once():
    with registered_scheme(define_scheme("mine", _build, _bits, summary="x", params=["clip"])):
        with pytest.raises(ValueError) as info:
            kvstats.check_scheme("mine", {"clpi": 1.0})
    assert not isinstance(info.value, kvstats.quant.contract.SchemeContractError)
    assert str(info.value) == "params must name settings of scheme 'mine' (['clip']); received unknown ['clpi']"
