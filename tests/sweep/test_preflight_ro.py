"""The sweep's preflight holds user code to what the sweep trusts it for (referee RO).

F1: a user scheme whose coders account fewer bits than ``expected_bits`` declares (or
whose codes hold more bytes than both claim) ran, and the report showed it beating the
Gaussian distortion-rate limit; the preflight must refuse it, by the contract's own clauses,
before any compute. F2: a scheme or sampler not drawing from the rng it is given ran,
and two identical sweeps differed; the preflight must refuse it naming the entry.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.contract_harness import SchemeContractError
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.uniform import UniformTokenCoder
from kvstats.sweep import check_grid

pytestmark = pytest.mark.usefixtures("user_registries")


class _Wrap:
    """A UniformTokenCoder whose accounting is halved ("liar") or whose decode adds noise
    from a generator of its own ("nondet")."""

    nominal_bits = property(lambda self: self.inner.nominal_bits)

    def __init__(self, inner, mode):
        self.inner, self.mode, self._rng = inner, mode, np.random.default_rng()

    def encode(self, x):
        return self.inner.encode(x)

    def decode(self, codes):
        y = self.inner.decode(codes)
        return y + 1e-3 * self._rng.standard_normal(y.shape) if self.mode == "nondet" else y

    def roundtrip(self, x):
        return self.decode(self.encode(x))

    def stored_bits(self, n):
        return {k: v / (2 if self.mode == "liar" else 1) for k, v in self.inner.stored_bits(n).items()}

    def describe(self):
        return self.inner.describe()


def _honest_bits(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 32)   # UniformTokenCoder: codes, a float16 scale and zero
    return side, side


def _halved_bits(bits, dim, n_tokens, params):
    return tuple(s / 2 for s in _honest_bits(bits, dim, n_tokens, params))


def _scheme(name, mode, expected_bits=_honest_bits):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, _Wrap(UniformTokenCoder(bits, dim, dim), mode), _Wrap(UniformTokenCoder(bits, dim, dim), mode)
    return define_scheme(name, build, expected_bits, summary=f"{mode} coder")


def _grid(scheme, distribution="gaussian"):
    return {"schemes": [scheme, "KQV"] if scheme != "KQV" else ["KQV"], "budgets": [3],
            "distributions": [distribution], "dims": [64], "n_keys": [128], "n_trials": 4,
            "report": {"comparisons": []}}


def test_a_user_scheme_storing_other_bits_than_it_declares_is_refused_before_compute(tmp_path):
    # the referee's liar2: stored_bits halved, expected_bits honest
    with registered_scheme(_scheme("liar2", "liar")):
        with pytest.raises(SchemeContractError, match=r"scheme 'liar2' .*the coders store 0\.75 bits per "
                                                      r"coordinate \(stored_bits\), expected_bits says 1\.5"):
            kvstats.run_sweep(_grid("liar2"), tmp_path / "out", executor="serial", progress=False)
    assert not (tmp_path / "out" / "cells").exists()   # nothing computed


def test_a_user_scheme_whose_codes_hold_more_than_both_claims_is_refused():
    # both functions lie alike: only the codes' bytes show it (check_stored_bytes's clause)
    with registered_scheme(_scheme("bad_liar", "liar", _halved_bits)):
        with pytest.raises(SchemeContractError, match=r"scheme 'bad_liar' .*the codes hold 25856 bits for "
                                                      r"12928 accounted"):
            check_grid(_grid("bad_liar"))


def test_an_honest_user_scheme_passes_and_a_nondeterministic_one_is_refused():
    with registered_scheme(_scheme("honest", "plain")):
        assert len(check_grid(_grid("honest"))) == 2
    with registered_scheme(_scheme("bad_nondet", "nondet")):
        with pytest.raises(ValueError, match=r"scheme 'bad_nondet' at n=3, d=64: the same seed gives "
                                             r"other codes"):
            check_grid(_grid("bad_nondet"))


def _global_sampler(n_trials, n_keys, dim, rng, params):
    return np.random.standard_normal((n_trials, n_keys, dim))   # not the rng it is given


def _own_sampler(n_trials, n_keys, dim, rng, params):
    return rng.standard_normal((n_trials, n_keys, dim))


def test_a_sampler_not_drawing_from_its_rng_is_refused_naming_the_distribution():
    kvstats.register_distribution("d-global", _global_sampler, {}, summary="np.random")
    kvstats.register_distribution("d-own", _own_sampler, {}, summary="its rng")
    with pytest.raises(ValueError, match=r"distribution 'd-global' params - at d=64, N=128: the same "
                                         r"seed gives other keys"):
        check_grid(_grid("KQV", "d-global"))
    assert len(check_grid(_grid("KQV", "d-own"))) == 1


def _broadcast_sampler(n_trials, n_keys, dim, rng, params):
    return np.broadcast_to(rng.standard_normal((1, n_keys, dim)), (n_trials, n_keys, dim))


def _repeat_sampler(n_trials, n_keys, dim, rng, params):
    return np.repeat(rng.standard_normal((1, n_keys, dim)), n_trials, axis=0)


@pytest.mark.parametrize("sampler", [_broadcast_sampler, _repeat_sampler])
def test_a_sampler_giving_every_trial_one_draw_is_refused(sampler):
    # the trial is the tests' unit: n copies of one draw made every sign test "significant"
    kvstats.register_distribution("d-one", sampler, {}, summary="one draw")
    with pytest.raises(ValueError, match=r"distribution 'd-one' params - at d=64, N=128: trials 0 and 1 "
                                         r"of one draw have the same keys"):
        check_grid(_grid("KQV", "d-one"))
