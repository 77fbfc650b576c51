"""The contract and the sweep's preflight refuse the user-scheme lies referee T3 found.

F1: codes keeping each vector's min/max as Python lists (``.tolist()``) passed the bits
contract (``nbytes`` cannot see Python numbers) and a sweep recorded 3.0 bits where 4.0
were stored. F2/F4: a scheme coupling the trials of a call (its per-trial numbers changed
with chunk_size), one mixing the tokens of a call while claiming per-vector, and one
using its rng while declaring ``randomized=False`` ran silently: the preflight ran only
the bits clauses and a same-seed check. Each lie is a one-line change of an honest
per-vector min-max coder (examples/own_scheme.py's), which passes everything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kvstats.quant import contract
from kvstats.quant.contract_bits import check_stored_bytes
from kvstats.quant.contract_harness import SchemeContractError
from kvstats.quant.packing import pack_codes, unpack_codes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.sweep import check_grid

pytestmark = pytest.mark.usefixtures("user_registries")


@dataclass(frozen=True, eq=False)
class _Codes:
    packed: np.ndarray
    low: np.ndarray | list      # a list in mode "list"/"intlist": stored, invisible to nbytes
    high: np.ndarray | list
    shape: tuple                # metadata: Python ints, as many at every size of one ndim
    bits: int

    @property
    def nbytes(self):
        return int(self.packed.nbytes + sum(np.asarray(x).nbytes for x in (self.low, self.high)
                                           if isinstance(x, np.ndarray)))


class _MinMax:
    """Per-vector min-max coder (n·d code bits, two float32 per vector); ``mode`` makes it
    lie: "list"/"intlist" keep min/max as Python floats/ints, "trials" takes one min/max
    per call, "tokens" one per trial (over its tokens), "rng" adds a dither drawn from
    its rng."""

    def __init__(self, bits, dim, mode, rng):
        self.bits, self.dim, self.mode, self.nominal_bits = bits, dim, mode, float(bits)
        self.shift = rng.standard_normal(dim) if mode == "rng" else np.zeros(dim)

    def encode(self, x):
        x = np.asarray(x, dtype=np.float64) + self.shift
        axes = {"trials": None, "tokens": (-2, -1)}.get(self.mode, -1)
        low = np.broadcast_to(x.min(axis=axes, keepdims=True), x.shape[:-1] + (1,))[..., 0]
        high = np.broadcast_to(x.max(axis=axes, keepdims=True), x.shape[:-1] + (1,))[..., 0]
        if self.mode == "intlist":
            low, high = np.floor(low), np.ceil(high)
        low, high = low.astype(np.float32), high.astype(np.float32)
        step = (high.astype(np.float64) - low)[..., None] / (2 ** self.bits - 1)
        q = np.where(step > 0, np.rint((x - low[..., None]) / np.where(step > 0, step, 1.0)), 0)
        packed = pack_codes(np.clip(q, 0, 2 ** self.bits - 1).astype(np.uint8), self.bits)
        if self.mode == "list":
            low, high = low.tolist(), high.tolist()
        elif self.mode == "intlist":
            low, high = low.astype(int).tolist(), high.astype(int).tolist()
        return _Codes(packed, low, high, tuple(x.shape), self.bits)

    def decode(self, codes):
        low, high = (np.asarray(v, dtype=np.float64)[..., None] for v in (codes.low, codes.high))
        q = unpack_codes(codes.packed, self.bits, self.dim)
        return low + q * (high - low) / (2 ** self.bits - 1) - self.shift

    def roundtrip(self, x):
        return self.decode(self.encode(x)).astype(np.asarray(x).dtype)

    def stored_bits(self, n_tokens):   # the lists lie consistently: min/max not accounted
        hidden = self.mode in ("list", "intlist")
        return {"codes": float(self.bits * self.dim * n_tokens), "min_max": 0.0 if hidden else 64.0 * n_tokens}

    def describe(self):
        return {"coder": f"minmax-{self.mode}"}


def _bits(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 64)
    return side, side


def _code_bits(bits, dim, n_tokens, params):   # what a list-keeping coder declares
    side = n_tokens * bits * dim
    return side, side


def _scheme(name, mode, **declared):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, _MinMax(bits, dim, mode, key_rng), _MinMax(bits, dim, mode, value_rng)
    bits = _code_bits if mode in ("list", "intlist") else _bits
    return define_scheme(name, build, bits, summary=f"min-max, {mode}", **declared)


def _grid(scheme):
    return {"schemes": [scheme, "KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [64],
            "n_keys": [128], "n_trials": 4, "report": {"comparisons": []}}


def test_the_honest_coder_passes_the_contract_and_the_preflight():
    # the lies below are refused for their lie, not for something the base coder does
    with registered_scheme(_scheme("honest", "plain")):
        assert set(contract.check_scheme("honest").values()) == {"ok"}
        assert len(check_grid(_grid("honest"))) == 2


@pytest.mark.parametrize("mode, kind", [("list", "float"), ("intlist", "int")])
def test_codes_keeping_per_vector_data_as_python_numbers_fail_the_stored_bytes_clause(mode, kind):
    # 2 x 40 vectors: 80 Python numbers in 'low', one per vector, set by the values coded
    with registered_scheme(_scheme("pylist", mode)):
        codes = contract._build("pylist", 3, 96, {}).quantize(*contract.awkward_kv((80, 96), np.float32, 0))
        assert type(codes.key.low[0]).__name__ == kind
        with pytest.raises(SchemeContractError, match=r"scheme 'pylist' .*the key codes hold 80 Python "
                                                      r"numbers in field 'low' that change with the values "
                                                      r"coded.*keep it in numpy arrays"):
            check_stored_bytes("pylist")


def test_python_numbers_set_by_the_shape_and_settings_are_metadata():
    from kvstats.quant.contract_bits import _python_numbers

    # the shape tuple and bit width: the same for any values of one shape, and more of
    # them at another shape (as klt's group bounds grow with N: built-ins hold such)
    coder = _MinMax(3, 16, "plain", np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((2, 40, 16))
    assert _python_numbers(coder.encode(x)) == _python_numbers(coder.encode(-3 * x)) == {
        "shape": [2, 40, 16], "bits": [3]}
    listed = _python_numbers(_MinMax(3, 16, "list", np.random.default_rng(0)).encode(x))
    assert len(listed["low"]) == len(listed["high"]) == 80
    assert listed["low"] == x.min(-1).astype(np.float32).ravel().tolist()


def test_the_preflight_refuses_codes_hiding_per_vector_data_in_python_lists():
    # the referee's listscale: the sweep recorded the accounted bits, not the stored ones
    with registered_scheme(_scheme("pylist", "list")):
        with pytest.raises(SchemeContractError, match=r"the key codes hold 80 Python numbers in field 'low'"
                                                      r".*a sweep would record the declared bits"):
            check_grid(_grid("pylist"))


@pytest.mark.parametrize("mode, declared, says", [
    ("trials", {}, r"K of trial 0 decodes differently when coded with the other trials.*depend on "
                   r"chunk_size; a scheme of your own cannot declare couples_trials"),
    ("tokens", {}, r"K of token 0 decodes differently when the other tokens of the call change.*"
                   r"declare define_scheme's token_group_param"),
    ("rng", {}, r"another seed changes the codes, but the entry says randomized=False.*declare "
                r"define_scheme's randomized as the coders behave"),
    ("plain", {"randomized": True}, r"another seed does not change the codes, but the entry says "
                                    r"randomized=True"),
])
def test_the_preflight_refuses_coupled_trials_tokens_and_a_false_randomized(mode, declared, says):
    with registered_scheme(_scheme("liar", mode, **declared)):
        with pytest.raises(SchemeContractError, match=r"scheme 'liar' .*" + says + r".*"
                                                      r"kvstats\.check_scheme\('liar'\) runs the whole"):
            check_grid(_grid("liar"))


def test_declared_couplings_and_randomness_pass_the_preflight():
    # the same coders, declared as they behave: tokens of a trial share min/max (a group
    # parameter), the dither is the scheme's randomness
    with registered_scheme(_scheme("grouped", "tokens", params=("group",), defaults={"group": 128},
                                   token_group_param="group")):
        assert len(check_grid(_grid("grouped"))) == 2
    with registered_scheme(_scheme("dithered", "rng", randomized=True)):
        assert len(check_grid(_grid("dithered"))) == 2


def test_the_preflight_runs_the_clauses_on_user_schemes_only(monkeypatch):
    calls = []
    for clause in ("check_independent_trials", "check_independent_tokens", "check_seeds"):
        real = getattr(contract, clause)
        monkeypatch.setattr(contract, clause, lambda name, params=None, dim=64, _real=real, _c=clause:
                            (calls.append((_c, name, dim)), _real(name, params, dim=dim))[1])
    with registered_scheme(_scheme("honest", "plain")):
        check_grid({**_grid("honest"), "dims": [96, 64]})
    # once each, at the grid's smallest d; KQV (a built-in) is the test suite's to hold
    assert sorted(calls) == [("check_independent_tokens", "honest", 64),
                             ("check_independent_trials", "honest", 64), ("check_seeds", "honest", 64)]
