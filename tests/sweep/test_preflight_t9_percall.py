"""Referee T9's F2 and F6 on the contract's and the preflight's user-scheme clauses.

F2: the rule against Python numbers in codes (``nbytes`` cannot see them) walked only
objects with an ``nbytes``: the same per-vector min/max kept as ``.tolist()`` one object
down (a ``SimpleNamespace`` field of the codes) passed the contract and the preflight,
and a sweep would have recorded the declared 3 bits for codes storing more.

F6: per-call randomness (a stochastic rounding drawing from the build's generator at
each call; a dither storing a seed drawn per call) was refused as coupled trials, a
fitted setting, or "numbers that change with the values coded". The contract asks one
build to code one input one way (roundtrip is dequantize(quantize()), a trial codes the
same whatever was coded before it), so such schemes stay refused, now for that cause and
with what to do; the remedy the message gives (one seed per draw, drawn at build time)
passes the whole contract and the preflight.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

import numpy as np
import pytest

from kvstats.quant import contract
from kvstats.quant.contract_bits import _python_numbers, check_stored_bytes
from kvstats.quant.contract_harness import SchemeContractError
from kvstats.quant.packing import pack_codes, unpack_codes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.sweep import check_grid

pytestmark = pytest.mark.usefixtures("user_registries")


@dataclass(frozen=True, eq=False)
class _Codes:
    packed: np.ndarray
    low: np.ndarray | None    # float32 per vector; None where `meta` hides them
    high: np.ndarray | None
    meta: object              # None, the hidden min/max, or a per-call seed

    @property
    def nbytes(self):   # counts the arrays held directly: what `meta` hides is not counted
        return int(self.packed.nbytes + sum(x.nbytes for x in (self.low, self.high) if x is not None))


class _Slotted:
    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


class _Plain:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


# where a lying coder keeps each vector's min/max as Python lists, one or two objects down
_HOLDERS = {
    "namespace": lambda lo, hi: types.SimpleNamespace(lo=lo, hi=hi),
    "slots": _Slotted,
    "plain": _Plain,
    "deep": lambda lo, hi: types.SimpleNamespace(inner=_Plain(lo, hi), rng=np.random.default_rng(0)),
}


class _MinMax:
    """Per-vector min-max coder (n·d code bits, two float32 per vector). ``mode``: "honest";
    a key of _HOLDERS hides min/max there as Python lists (and does not count them);
    "stochastic" rounds with uniforms drawn from its generator at each call; "seed" draws
    one seed per call, keeps it in the codes and rounds with its uniforms; "seeded" (the
    remedy) draws one seed per entry of ``draws`` at build time and rounds each call with
    the uniforms those seeds give."""

    def __init__(self, bits, dim, mode, rng, draws):
        self.bits, self.dim, self.mode, self.rng, self.nominal_bits = bits, dim, mode, rng, float(bits)
        self.seeds = rng.integers(2**63, size=draws) if mode == "seeded" else None

    def _uniforms(self, shape):
        if self.mode == "stochastic":
            return self.rng.random(shape), None
        if self.mode == "seed":
            seed = int(self.rng.integers(2**63))
            return np.random.default_rng(seed).random(shape), seed
        if self.mode == "seeded":   # a function of the build's draws and the input's (N, d)
            u = [np.random.default_rng(int(s)).random(shape[-2:]) for s in self.seeds.ravel()]
            return np.reshape(u, self.seeds.shape + shape[-2:]), None
        return 0.5, None   # round to nearest

    def encode(self, x):
        x = np.asarray(x, dtype=np.float64)
        u, seed = self._uniforms(x.shape)
        low, high = x.min(-1).astype(np.float32), x.max(-1).astype(np.float32)
        step = (high.astype(np.float64) - low)[..., None] / (2**self.bits - 1)
        q = np.floor((x - low[..., None]) / np.where(step > 0, step, 1.0) + u)
        q = np.where(step > 0, q, 0)
        low, high = (np.broadcast_to(v, q.shape[:-1]).astype(np.float32) for v in (low, high))
        packed = pack_codes(np.clip(q, 0, 2**self.bits - 1).astype(np.uint8), self.bits)
        if self.mode in _HOLDERS:
            return _Codes(packed, None, None, _HOLDERS[self.mode](low.tolist(), high.tolist()))
        return _Codes(packed, low, high, seed)

    def decode(self, codes):
        held = codes.meta.inner if self.mode == "deep" else codes.meta
        lo, hi = (held.lo, held.hi) if self.mode in _HOLDERS else (codes.low, codes.high)
        lo, hi = (np.asarray(v, dtype=np.float64)[..., None] for v in (lo, hi))
        q = unpack_codes(codes.packed, self.bits, self.dim)
        return lo + q * (hi - lo) / (2**self.bits - 1)

    def roundtrip(self, x):
        return self.decode(self.encode(x)).astype(np.asarray(x).dtype)

    def stored_bits(self, n_tokens):   # the hiding modes lie consistently: min/max not counted
        return {"codes": float(self.bits * self.dim * n_tokens),
                "min_max": 0.0 if self.mode in _HOLDERS else 64.0 * n_tokens}

    def describe(self):
        return {"coder": f"minmax-{self.mode}"}


def _scheme(name, mode):
    hides = mode in _HOLDERS

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, _MinMax(bits, dim, mode, key_rng, draws), _MinMax(bits, dim, mode, value_rng, draws)

    def expected(bits, dim, n_tokens, params):
        side = n_tokens * (bits * dim + (0 if hides else 64))
        return side, side
    return define_scheme(name, build, expected, summary=f"min-max, {mode}",
                         randomized=mode in ("stochastic", "seed", "seeded"))


def _grid(scheme):
    return {"schemes": [scheme, "KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [64],
            "n_keys": [64], "n_trials": 4, "report": {"comparisons": []}}


# ------------------------------------------------------------------ F2
def test_python_numbers_are_found_in_plain_objects_below_the_codes():
    lo, hi = [0.5, -1.0], [2.0, 3.0]
    found = {name: _python_numbers(_Codes(np.zeros(2, np.uint8), None, None, make(lo, hi)))
             for name, make in _HOLDERS.items()}
    assert found["namespace"] == found["slots"] == found["plain"] == {"meta.lo": lo, "meta.hi": hi}
    # two objects down; the generator beside them is a leaf (its state is not walked)
    assert found["deep"] == {"meta.inner.lo": lo, "meta.inner.hi": hi}
    # arrays are nbytes' to count, a class and a module are not data; a cycle ends
    ring = types.SimpleNamespace(n=7, cls=_Plain, mod=np, a=np.arange(3.0))
    ring.me = ring
    assert _python_numbers({"f": ring}) == {"n": [7]}


@pytest.mark.parametrize("holder", sorted(_HOLDERS))
def test_the_contract_and_the_preflight_refuse_numbers_hidden_one_object_down(holder):
    # the referee's nested.py: the flat liar was refused, the nested one accepted by both
    field = "meta.inner.lo" if holder == "deep" else "meta.lo"
    says = (rf"the key codes hold 80 Python numbers in field '{field}' that change with the values "
            "coded")
    with registered_scheme(_scheme("hider", holder)):
        with pytest.raises(SchemeContractError, match=r"scheme 'hider' .*" + says):
            check_stored_bytes("hider", exact=False)
        with pytest.raises(SchemeContractError, match=says + r".*a sweep would record the declared bits"):
            check_grid(_grid("hider"))


# ------------------------------------------------------------------ F6
def test_per_call_draws_are_refused_as_such_not_as_coupled_trials():
    # the referee's stoch.py: it was refused as coupling the trials of a call
    with registered_scheme(_scheme("stoch", "stochastic")):
        with pytest.raises(SchemeContractError) as refused:
            check_grid(_grid("stoch"))
        said = str(refused.value)
        assert "one build codes one draw twice differently: its codes change from call to call" in said
        assert "draw per entry of `draws`" in said
        assert "couples_trials" not in said and "not be independent" not in said
        # the whole contract names the same cause in each clause that compares two codings
        verdicts = contract.check_scheme("stoch", raise_on_failure=False)
        for clause in ("roundtrip", "broadcast", "independent_trials", "independent_tokens"):
            assert "its codes change from call to call" in verdicts[clause], (clause, verdicts[clause])
            assert "fitted" not in verdicts[clause] and "with the other" not in verdicts[clause]


def test_a_seed_drawn_per_call_is_named_as_per_call_not_as_data():
    # the referee's dither.py: "numbers that change with the values coded"; they change per call
    with registered_scheme(_scheme("dither", "seed")):
        with pytest.raises(SchemeContractError) as refused:
            check_stored_bytes("dither", exact=False)
        said = str(refused.value)
        assert "the key codes hold 1 Python numbers in field 'meta', others when one input" in said
        assert "its codes change from call to call" in said
        assert "with the values coded" not in said


def test_the_remedy_the_message_gives_passes_the_contract_and_the_preflight():
    # one seed per draw at build time: randomized, one coding per input, trials alone as in a batch
    for name, mode in (("seeded", "seeded"), ("honest", "honest")):
        with registered_scheme(_scheme(name, mode)):
            assert set(contract.check_scheme(name, raise_on_failure=False).values()) == {"ok"}
            assert len(check_grid(_grid(name))) == 2
