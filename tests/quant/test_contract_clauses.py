"""Each clause of kvstats.quant.contract catches the fault it is there for.

The built-ins pass every clause (tests/quant/test_registry_contract.py), so that suite
cannot tell a clause that checks from one that checks nothing; tests/test_plugins.py
breaks roundtrip, broadcast, expected_bits, stored_bytes, seeds and lossy. Here a scheme
broken in one more way each (or, for what only the Scheme wrapper does, the wrapper
patched) must fail zero_vectors, describe, error_decreases, key_theory, bad_input and
export, and the roundtrip clause's dtype and finiteness checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

import kvstats
from kvstats.quant import schemes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.uniform import UniformTokenCoder

# the contract's awkward rows underflow float16 on purpose (tested elsewhere)
pytestmark = pytest.mark.filterwarnings("ignore:.*below float16:UserWarning")


def _bits(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 32)   # UniformTokenCoder at group = dim: codes, fp16 scale, zero
    return side, side


class _Offset(UniformTokenCoder):
    def decode(self, codes):            # a zero vector decodes to 1e-3, consistently
        return super().decode(codes) + np.asarray(1e-3, super().decode(codes).dtype)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


class _Nameless(UniformTokenCoder):
    def describe(self):                 # says its settings but not what kind of coder it is
        return {"bits": self.bits}


class _Float64(UniformTokenCoder):
    def decode(self, codes):            # float64 whatever the input
        return super().decode(codes).astype(np.float64)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


class _NaN(UniformTokenCoder):
    def decode(self, codes):            # a NaN where a zero vector was
        out = super().decode(codes)
        return np.where(np.all(out == 0, axis=-1, keepdims=True), np.nan, out)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def _side(coder, bits_of=lambda b: b):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, UniformTokenCoder(bits, dim, dim), coder(bits_of(bits), dim, dim)
    return build


def _account(sdef):
    with registered_scheme(sdef):
        account = kvstats.check_scheme(sdef.name, raise_on_failure=False)
    return {clause: message for clause, message in account.items() if message != "ok"}


@pytest.mark.parametrize("coder,clause,text", [
    (_Offset, "zero_vectors", "zero K and V do not decode to zero"),
    (_Nameless, "describe", "the value coder's describe() must be a dict whose 'coder' names its kind"),
    (_NaN, "roundtrip", "V decoded with NaN/inf values"),
])
def test_a_coder_broken_in_one_way_fails_its_clause(coder, clause, text):
    failed = _account(define_scheme("broken", _side(coder), _bits, summary="one broken side"))
    assert clause in failed and text in failed[clause], failed


def test_nan_output_is_reported_as_nan_not_as_drift_or_coupling():
    # a NaN is unequal to itself: compared as numbers, a NaN decode read as a roundtrip
    # that drifts under draws (broadcast) or a trial coupled to the others
    failed = _account(define_scheme("broken", _side(_NaN), _bits, summary="one broken side"))
    assert "V decoded with NaN/inf values" in failed["broadcast"], failed
    assert "independent_trials" not in failed, failed


def test_a_float64_coder_is_cast_to_the_inputs_dtype_by_the_scheme():
    # the Scheme casts what a coder decodes to K's dtype in roundtrip and dequantize alike,
    # so a coder returning float64 for float32 input passes (and a sweep's float32 stays so)
    failed = _account(define_scheme("wide", _side(_Float64), _bits, summary="float64 out"))
    assert failed == {}
    with registered_scheme(define_scheme("wide", _side(_Float64), _bits, summary="float64 out")):
        scheme = kvstats.make_scheme("wide", 3, 16)
        K = np.ones((4, 16), np.float32)
        decoded = scheme.dequantize(scheme.quantize(K, K))
        assert scheme.roundtrip(K, K)[1].dtype == decoded[1].dtype == np.float32


def test_a_budget_that_buys_nothing_fails_error_decreases():
    # neither side uses more than 2 bits, whatever the budget
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, UniformTokenCoder(min(bits, 2), dim, dim), UniformTokenCoder(min(bits, 2), dim, dim)

    def bits_of(bits, dim, n_tokens, params):
        return _bits(min(bits, 2), dim, n_tokens, params)

    failed = _account(define_scheme("capped", build, bits_of, summary="capped"))
    assert "error_decreases" in failed and "does not fall with each extra bit" in failed["error_decreases"]


def test_a_wrong_key_theory_fails_key_theory():
    # uniform min-max keys are not TurboQuant-mse keys: the closed form does not predict them
    failed = _account(define_scheme("claims_mse", _side(UniformTokenCoder), _bits, summary="x",
                                    key_theory="mse"))
    assert "key_theory" in failed and "closed form predicts" in failed["key_theory"], failed


def test_bad_input_and_export_clauses_check_the_scheme_wrapper(monkeypatch):
    sdef = define_scheme("plain", _side(UniformTokenCoder), _bits, summary="x")
    assert _account(sdef) == {}
    # a wrapper that stopped checking its arrays, and one whose export stopped refusing
    monkeypatch.setattr(schemes.Scheme, "_check_kv",
                        lambda self, K, V: (np.asarray(K, float), np.asarray(V, float)))
    monkeypatch.setattr(schemes.Scheme, "export", lambda self: None)
    failed = _account(sdef)
    assert "quantize accepts bad input" in failed["bad_input"]
    assert "export() without gpu must raise ValueError" in failed["export"]


# ------------------------------------------------------------------ faults a sweep would not see
class _InPlace(UniformTokenCoder):
    def encode(self, x):                # scales the caller's array after coding it
        codes = super().encode(x)
        np.multiply(x, 0.5, out=x)
        return codes

    def roundtrip(self, x):
        return self.decode(self.encode(x))


class _Coupled(UniformTokenCoder):
    def encode(self, x):                # clips at half the largest magnitude of the whole call
        top = float(np.abs(x).max()) / 2
        return super().encode(np.clip(x, -top, top))

    def roundtrip(self, x):
        return self.decode(self.encode(x))


class _Stateful(UniformTokenCoder):
    def encode(self, x):                # a shift kept in the coder, not in the codes
        self._shift = float(np.mean(x))
        return super().encode(x - self._shift)

    def decode(self, codes):
        out = super().decode(codes)
        return out + np.asarray(self._shift, out.dtype)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


@dataclass(frozen=True, eq=False)
class _WithExtra:
    inner: object
    extra: np.ndarray                   # held (a copy of the input) but not counted

    @property
    def nbytes(self):
        return self.inner.nbytes


class _Undercounted(UniformTokenCoder):
    def encode(self, x):
        return _WithExtra(super().encode(x), np.array(x, dtype=np.float16))

    def decode(self, codes):
        return super().decode(codes.inner)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


@pytest.mark.parametrize("coder,clause,text", [
    (_InPlace, "roundtrip", "quantize or roundtrip modified its input V in place"),
    (_Coupled, "independent_trials", "V of trial 0 decodes differently when coded with the other trials"),
    (_Stateful, "roundtrip", "dequantize of codes changed after another quantize call"),
    # d = 96, N = 101, 1 bit: 12 code bytes and two float16 per vector (1616), the
    # uncounted float16 copy 101·96·2 = 19392 more
    (_Undercounted, "stored_bytes", "the value codes hold arrays of 21008 bytes, their nbytes says 1616"),
])
def test_a_coder_that_fools_the_bit_for_bit_checks_fails_its_clause(coder, clause, text):
    # each gives roundtrip == dequantize(quantize()) and honest stored_bits, yet a sweep's
    # numbers would be wrong: the reference changed under it, a trial depends on the
    # others coded with it, a decode reads what no cache stores
    failed = _account(define_scheme("sly", _side(coder), _bits, summary="one sly side"))
    assert clause in failed and text in failed[clause], failed


def test_an_entry_that_says_it_couples_trials_must_couple_them():
    # the built-ins' scale="tensor" settings couple by design (SchemeDef.couples_trials);
    # an entry claiming so for a per-trial coder is caught as a randomized claim is
    honest = define_scheme("plain", _side(UniformTokenCoder), _bits, summary="x")
    failed = _account(dataclasses.replace(honest, _couples=lambda params: True))
    assert "says its settings couple the trials" in failed["independent_trials"], failed
    assert kvstats.quant.registry.scheme_def("fp8_e4m3").couples_trials({"scale": "tensor"})


@dataclass(frozen=True, eq=False)
class _WithCoder:
    inner: object
    coder: object                       # a reference to the coder: not stored, not counted

    @property
    def nbytes(self):
        return self.inner.nbytes


class _RefersToItsCoder(UniformTokenCoder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.table = np.zeros(4096)     # the coder's own arrays are not the codes'

    def encode(self, x):
        return _WithCoder(super().encode(x), self)

    def decode(self, codes):
        return super().decode(codes.inner)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def test_codes_that_refer_to_their_coder_pass_stored_bytes():
    assert _account(define_scheme("ref", _side(_RefersToItsCoder), _bits, summary="x")) == {}


class _SharedAcrossTokens(UniformTokenCoder):
    def encode(self, x):                # one min and max per 8 tokens, not per vector
        x = np.asarray(x)
        shape = x.shape
        grouped = x.reshape(*shape[:-2], shape[-2] // 8, 8 * shape[-1]) if shape[-2] % 8 == 0 else None
        if grouped is None:
            return super().encode(x)
        codes = UniformTokenCoder(self.bits, 8 * shape[-1], 8 * shape[-1]).encode(grouped)
        return codes

    def decode(self, codes):
        if codes.shape[-1] == self.dim:
            return super().decode(codes)
        out = UniformTokenCoder(self.bits, codes.shape[-1], codes.shape[-1]).decode(codes)
        return out.reshape(*out.shape[:-2], out.shape[-2] * 8, self.dim)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def test_a_scheme_sharing_statistics_across_tokens_is_told_of_token_group_param():
    failed = _account(define_scheme("grouped", _side(_SharedAcrossTokens), _bits, summary="x"))
    assert "define_scheme's token_group_param" in failed.get("zero_vectors", ""), failed
