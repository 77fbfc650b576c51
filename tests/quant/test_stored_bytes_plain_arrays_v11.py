"""The stored-bytes clause and numpy arrays hidden in plain objects below the codes.

Commit a7221d9 found Python numbers that change with the values coded one object down
(a ``SimpleNamespace`` field of the codes); the same per-vector min/max kept as float32
ARRAYS there (reproducer /tmp/v8/nested_arr.py) still passed the contract and the
preflight: ``_held_nbytes`` does not walk plain objects (so that a coder or a shared
codebook the codes refer to is not counted), and ``nbytes`` did not count them. Arrays
found there that change with the values coded are now stored data ``nbytes`` must count;
arrays the same for both inputs (a rotation's signs the codes refer to) are not.
"""

from __future__ import annotations

import types
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
    meta: object     # a plain object: the per-vector min/max, or the shared signs
    counted: int     # bytes of `meta` that nbytes counts

    @property
    def nbytes(self):
        return int(self.packed.nbytes + self.counted)


class _Slotted:
    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


# where a coder keeps each vector's float32 min/max, one or two plain objects down
_HOLDERS = {
    "namespace": (lambda lo, hi: types.SimpleNamespace(lo=lo, hi=hi), lambda m: m),
    "slots": (_Slotted, lambda m: m),
    "deep": (lambda lo, hi: types.SimpleNamespace(inner=types.SimpleNamespace(lo=lo, hi=hi)),
             lambda m: m.inner),
}


class _MinMax:
    """Per-vector min-max coder after random sign flips (n·d code bits, two float32 per
    vector). ``holder`` (a key of _HOLDERS) says where min/max are kept; ``counts``:
    whether nbytes (and stored_bits) count them; ``holder`` None keeps only the shared
    signs in the plain object (min/max then in the object as well, counted)."""

    def __init__(self, bits, dim, holder, counts, rng):
        self.bits, self.dim, self.holder, self.counts = bits, dim, holder, counts
        self.nominal_bits = float(bits)
        # per scheme, not per vector (fixed by d: the scheme is not randomized)
        self.signs = np.where(np.random.default_rng(dim).random(dim) < 0.5, -1.0, 1.0)

    def encode(self, x):
        y = np.asarray(x, dtype=np.float64) * self.signs
        low, high = y.min(-1).astype(np.float32), y.max(-1).astype(np.float32)
        step = (high.astype(np.float64) - low)[..., None] / (2**self.bits - 1)
        q = np.where(step > 0, np.rint((y - low[..., None]) / np.where(step > 0, step, 1.0)), 0)
        packed = pack_codes(np.clip(q, 0, 2**self.bits - 1).astype(np.uint8), self.bits)
        if self.holder is None:   # the signs referred to, min/max as stored data, counted
            meta = types.SimpleNamespace(signs=self.signs, lo=low, hi=high)
        else:
            meta = _HOLDERS[self.holder][0](low, high)
        return _Codes(packed, meta, low.nbytes + high.nbytes if self.counts else 0)

    def decode(self, codes):
        held = codes.meta if self.holder is None else _HOLDERS[self.holder][1](codes.meta)
        lo, hi = (np.asarray(v, dtype=np.float64)[..., None] for v in (held.lo, held.hi))
        q = unpack_codes(codes.packed, self.bits, self.dim)
        return (lo + q * (hi - lo) / (2**self.bits - 1)) * self.signs

    def roundtrip(self, x):
        return self.decode(self.encode(x)).astype(np.asarray(x).dtype)

    def stored_bits(self, n_tokens):
        return {"codes": float(self.bits * self.dim * n_tokens),
                "min_max": 64.0 * n_tokens if self.counts else 0.0}

    def describe(self):
        return {"coder": f"minmax-{self.holder}-{self.counts}"}


def _scheme(name, holder, counts):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, *(_MinMax(bits, dim, holder, counts, rng) for rng in (key_rng, value_rng))

    def expected(bits, dim, n_tokens, params):
        side = n_tokens * (bits * dim + (64 if counts else 0))
        return side, side
    return define_scheme(name, build, expected, summary="min-max after sign flips")


def _grid(scheme):
    return {"schemes": [scheme, "KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [64],
            "n_keys": [64], "n_trials": 4, "report": {"comparisons": []}}


def test_plain_arrays_are_those_held_nbytes_does_not_walk():
    from kvstats.quant.contract_bits import _plain_arrays   # here: the old code had none
    lo, signs = np.arange(3, dtype=np.float32), np.ones(4)
    codes = _Codes(np.zeros(2, np.uint8), types.SimpleNamespace(lo=lo, inner=_Slotted(signs, None)), 0)
    found = _plain_arrays(codes)
    assert set(found) == {"meta.lo", "meta.inner.lo"}
    assert found["meta.lo"][0] is lo and found["meta.inner.lo"][0] is signs
    # arrays held_nbytes counts (fields, lists, dicts, nested codes) are not listed; a cycle ends
    ring = types.SimpleNamespace(a=np.zeros(1))
    ring.me = ring
    assert _plain_arrays({"packed": [np.zeros(3)], "codes": codes, "x": 1.5}).keys() == found.keys()
    assert set(_plain_arrays({"m": ring})) == {"a"}


@pytest.mark.parametrize("holder", sorted(_HOLDERS))
def test_arrays_hidden_in_plain_objects_are_refused_by_the_contract_and_the_preflight(holder):
    # /tmp/v8/nested_arr.py: float32 min/max in a SimpleNamespace, not in nbytes, passed both
    field = "meta.inner.lo" if holder == "deep" else "meta.lo"
    says = (rf"the key codes hold arrays of \d+ bytes \(with '{field}' \(404 bytes\), "
            rf"'{field[:-2]}hi' \(404 bytes\) in plain objects below them: arrays that change with "
            r"the values coded.*their nbytes says \d+")
    with registered_scheme(_scheme("hider", holder, counts=False)):
        with pytest.raises(SchemeContractError, match=r"scheme 'hider' .*" + says):
            check_stored_bytes("hider", exact=False)
        with pytest.raises(SchemeContractError, match=says):
            check_grid(_grid("hider"))


@pytest.mark.parametrize("holder", sorted(_HOLDERS))
def test_arrays_in_plain_objects_that_nbytes_counts_pass(holder):
    with registered_scheme(_scheme("counter", holder, counts=True)):
        check_stored_bytes("counter")


def test_a_shared_array_referred_to_from_a_plain_object_is_not_stored_data():
    # the signs are per scheme: the same for every input, so not counted, yet min/max are
    with registered_scheme(_scheme("signs", None, counts=True)):
        assert set(contract.check_scheme("signs", raise_on_failure=False).values()) == {"ok"}
        assert len(check_grid(_grid("signs"))) == 2


def test_arrays_drawn_per_call_in_a_plain_object_are_named_as_per_call():
    class Dither(_MinMax):
        def encode(self, x):
            codes = super().encode(x)
            return _Codes(codes.packed, types.SimpleNamespace(lo=codes.meta.lo, hi=codes.meta.hi,
                                                              noise=np.random.default_rng().random(3)),
                          codes.counted)

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, Dither(bits, dim, None, True, key_rng), Dither(bits, dim, None, True, value_rng)

    sdef = define_scheme("dither", build, lambda b, d, n, p: (n * (b * d + 64),) * 2, summary="x")
    with registered_scheme(sdef):
        with pytest.raises(SchemeContractError, match=r"arrays in field 'meta.noise' \(in a plain object "
                           r"below them\) that differ when one input .* its codes change from call to call"):
            check_stored_bytes("dither", exact=False)


def test_a_plain_object_viewing_arrays_nbytes_counts_adds_nothing():
    # min/max held (and counted) as a field, and viewed again from a plain object: counted once
    @dataclass(frozen=True, eq=False)
    class Both:
        packed: np.ndarray
        minmax: np.ndarray
        meta: object

        @property
        def nbytes(self):
            return int(self.packed.nbytes + self.minmax.nbytes)

    class Viewer(_MinMax):
        def encode(self, x):
            codes = super().encode(x)
            minmax = np.stack([codes.meta.lo, codes.meta.hi])
            return Both(codes.packed, minmax, types.SimpleNamespace(lo=minmax[0], hi=minmax[1]))

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, Viewer(bits, dim, None, True, key_rng), Viewer(bits, dim, None, True, value_rng)

    with registered_scheme(define_scheme("viewer", build, lambda b, d, n, p: (n * (b * d + 64),) * 2,
                                         summary="x")):
        check_stored_bytes("viewer")
