"""The contract's clauses added or sharpened after referee R4 (F3, F4, F8, F2's key_rotated).

- F4 ``independent_tokens``: a per-vector scheme whose codes share a statistic over the
  tokens of a call (a per-channel absmax, as KIVI's keys but undeclared) passed every
  clause, since a zero row still decoded to zero; a cache coding tokens as they arrive
  would run another scheme. Every built-in passes the clause (with its example settings
  and a variant); fp8/nvfp4's per-head scale is declared (``couples_tokens``) and must
  show.
- F8 ``expected_bits`` at d = 36 (n·d not byte-aligned): a coder counting whole packed
  bytes in ``stored_bits`` against ``bits·d`` in ``expected_bits`` agreed at every d the
  clause tried (64, 96, 128).
- F3: the nominal bits are compared with the budget asked for, not the one recorded.
- ``key_rotated``: a false claim (unrotated keys) is caught on outlier channels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kvstats import check_scheme
from kvstats.quant import contract
from kvstats.quant.packing import pack_codes, packed_size, unpack_codes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.registry import BUILTIN, scheme_def
from kvstats.quant.uniform import UniformTokenCoder
from test_registry_contract import CASES, IDS, variant

pytestmark = [pytest.mark.filterwarnings("ignore:.*below float16:UserWarning"),
              pytest.mark.filterwarnings("ignore:.*vector norms are below float16:UserWarning")]


def _side(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


# ------------------------------------------------------------------ F4: tokens of a call
@dataclass(frozen=True)
class _ChanCodes:
    q: np.ndarray
    s: np.ndarray

    @property
    def nbytes(self):
        return self.q.nbytes + self.s.nbytes


class _PerChannel(UniformTokenCoder):
    """Symmetric 8-bit per-channel absmax over every token of the call (undeclared)."""

    def encode(self, x):
        s = (np.abs(x).max(axis=-2, keepdims=True) / 127).astype(np.float16)
        safe = np.where(s > 0, s.astype(x.dtype), 1)
        return _ChanCodes(np.clip(np.rint(x / safe), -127, 127).astype(np.int8), s)

    def decode(self, codes):
        return codes.q * codes.s.astype(np.float64)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def _build_chan(bits, dim, params, key_rng, value_rng, draws):
    return bits, _PerChannel(8, dim, dim), _PerChannel(8, dim, dim)


def test_a_statistic_over_the_tokens_of_a_call_is_caught():
    sdef = define_scheme("chan", _build_chan, lambda b, d, n, p: (8 * n * d + 16 * d,) * 2,
                         summary="per-channel absmax", min_bits=8, max_bits=8)
    with registered_scheme(sdef):
        account = check_scheme("chan", raise_on_failure=False)
    failed = {clause for clause, said in account.items() if said != "ok"}
    # only the new clause sees it (a zero row still decodes to zero)
    assert "independent_tokens" in failed and "zero_vectors" not in failed, account
    assert "decodes differently when the other tokens of the call change" in account["independent_tokens"]


def test_a_token_group_exempts_a_scheme_from_the_clause():
    sdef = define_scheme("chan", _build_chan, lambda b, d, n, p: (8 * n * d + 16 * d,) * 2,
                         summary="per-channel absmax", min_bits=8, max_bits=8, params=["group"],
                         token_group_param="group", defaults={"group": 64})
    with registered_scheme(sdef):
        contract.check_independent_tokens("chan")


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_every_builtin_passes_independent_tokens(name, params):
    for p in (params, variant(name, params)):
        contract.check_independent_tokens(name, p)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2", "nvfp4"])
def test_a_declared_per_head_scale_shows_and_a_static_one_is_per_token(name):
    sdef = scheme_def(name)
    assert sdef.couples_tokens({}) and sdef.couples_tokens({"scale": "tensor"})
    contract.check_independent_tokens(name)   # the declaration holds: some token changes
    if name != "nvfp4":
        assert not sdef.couples_tokens({"scale": 0.5})
        contract.check_independent_tokens(name, {"scale": 0.5})
    assert [n for n, d in BUILTIN.items() if d.couples_tokens(d.example_params)] == [
        "fp8_e4m3", "fp8_e5m2", "nvfp4"]


def test_a_false_couples_tokens_declaration_is_caught(monkeypatch):
    import dataclasses

    from kvstats.quant import registry

    liar = dataclasses.replace(scheme_def("q8_0"), _couples_tokens=lambda p: True)
    monkeypatch.setitem(registry._TABLE, "q8_0", liar)
    with pytest.raises(contract.SchemeContractError, match=r"says the tokens of a call share a "
                                                           r"statistic \(couples_tokens\), but"):
        contract.check_independent_tokens("q8_0")


# ------------------------------------------------------------------ F8: d with n·d not byte-aligned
@dataclass(frozen=True)
class _Packed:
    packed: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def nbytes(self):
        return self.packed.nbytes + self.low.nbytes + self.high.nbytes


class _ByteCounter:
    """examples/own_scheme.py's minmax before the fix: stored_bits counts whole packed bytes."""

    def __init__(self, bits, dim):
        self.bits, self.dim, self.nominal_bits = bits, dim, float(bits)

    def encode(self, x):
        lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
        step = np.where(hi > lo, (hi - lo) / (2 ** self.bits - 1), 1.0)
        q = np.clip(np.rint((x - lo) / step), 0, 2 ** self.bits - 1).astype(np.uint8)
        return _Packed(pack_codes(q, self.bits), lo.astype(np.float32), hi.astype(np.float32))

    def decode(self, c):
        lo, hi = c.low.astype(np.float64), c.high.astype(np.float64)
        step = np.where(hi > lo, (hi - lo) / (2 ** self.bits - 1), 1.0)
        return lo + unpack_codes(c.packed, self.bits, self.dim) * step

    def roundtrip(self, x):
        return self.decode(self.encode(x))

    def stored_bits(self, n):
        return {"codes": 8 * packed_size(self.dim, self.bits) * n, "min_max": 64 * n}

    def describe(self):
        return {"coder": "bytes"}


def _build_bytes(bits, dim, params, key_rng, value_rng, draws):
    return bits, _ByteCounter(bits, dim), _ByteCounter(bits, dim)


def test_expected_bits_is_checked_where_n_d_is_not_byte_aligned():
    sdef = define_scheme("bytes", _build_bytes, lambda b, d, n, p: (n * (b * d + 64),) * 2, summary="s")
    with registered_scheme(sdef):
        contract.check_expected_bits("bytes", odd_dims=())   # byte-aligned d: agree
        # d = 36, 1 bit: 36 code bits held in 5 bytes, (40 + 64)/36 vs (36 + 64)/36 bits
        with pytest.raises(contract.SchemeContractError, match=r"\(bits=1, d=36, N=1, params \{\}\): the "
                                                               r"coders store 2\.888.* expected_bits says 2\.777"):
            contract.check_expected_bits("bytes")


def test_the_example_scheme_counts_code_bits_at_odd_d():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "own_scheme.py"
    spec = importlib.util.spec_from_file_location("own_scheme_contract21", path)
    module = importlib.util.module_from_spec(spec)
    from kvstats.quant import registry

    saved = dict(registry._TABLE), dict(registry._ORIGIN)
    try:
        spec.loader.exec_module(module)   # registers minmax
        coder = module.MinMaxCoder(3, 20)
        assert coder.stored_bits(3)["codes"] == 3 * 20 * 3   # 6.2 bits/coord with min and max, not 6.4
        contract.check_expected_bits("minmax", dims=(20,), n_tokens=(3,))
    finally:
        for table, before in zip((registry._TABLE, registry._ORIGIN), saved):
            table.clear()
            table.update(before)


def test_a_scheme_refusing_the_odd_d_is_not_failed_for_it():
    contract.check_expected_bits("q4_0", dims=(64,), n_tokens=(1, 31))   # d = 36 is not a multiple of 32


# ------------------------------------------------------------------ F3: nominal vs asked
def test_nominal_bits_are_compared_with_the_budget_asked_for(monkeypatch):
    # a build recording another budget would be refused by make_scheme; with that check
    # bypassed the clause itself still names it (the rows are labelled with the asked one)
    from kvstats.quant import schemes

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits + 1, UniformTokenCoder(bits + 1, dim, dim), UniformTokenCoder(bits + 1, dim, dim)

    sdef = define_scheme("plus1", build, lambda b, d, n, p: _side(b + 1, d, n, p), summary="s", max_bits=7)
    monkeypatch.setattr(schemes, "_check_recorded", lambda *a: None)
    with registered_scheme(sdef):
        with pytest.raises(contract.SchemeContractError, match=r"nominal bits 2\.0 \(the coders' "
                                                               r"nominal_bits\) differ from the budget 1"):
            contract.check_expected_bits("plus1", dims=(64,), n_tokens=(1,), odd_dims=())


# ------------------------------------------------------------------ key_rotated
def test_a_false_key_rotated_claim_is_caught():
    kv = scheme_def("KV")

    def build(bits, dim, params, key_rng, value_rng, draws):   # KV's unrotated Lloyd-Max keys
        return kv.build(bits, dim, kv.filled({}), key_rng, value_rng, draws)

    def bits_of(bits, dim, n, params):
        return kv._bits(bits, dim, n, kv.filled({}))

    for claim, fails in ((False, False), (True, True)):
        sdef = define_scheme("kvlike", build, bits_of, summary="s", min_bits=2, max_bits=4,
                             key_theory="mse", key_rotated=claim)
        with registered_scheme(sdef):
            said = check_scheme("kvlike", raise_on_failure=False)["key_theory"]
        assert (said != "ok") == fails, said
        if fails:
            assert "the entry says key_rotated, but keys with 4 outlier channels err" in said
