"""The sweep's preflight refuses a user scheme whose decode returns the wrong shape or
non-finite values (referee T2, F1).

The preflight already round-trips one tiny draw through two seed-0 builds of each user
scheme, but compared the two with NaN counted equal and never looked at the shape: a
decode dropping a coordinate, or returning NaN, passed it, and the sweep stopped
mid-compute with a traceback after clearing the output folder (a sampler doing the same
was refused before anything was touched).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kvstats.quant.packing import pack_codes, unpack_codes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.sweep import check_grid

pytestmark = pytest.mark.usefixtures("user_registries")


@dataclass(frozen=True, eq=False)
class _Codes:
    packed: np.ndarray

    @property
    def nbytes(self):
        return int(self.packed.nbytes)


class _Uniform:
    """Uniform ``bits``-bit codes of each coordinate clipped to [-4, 4) (no overhead but
    the codes), whose decode ``fault`` makes wrong: "short" drops the last coordinate,
    "nan" returns NaN for the first vector, "" nothing."""

    def __init__(self, bits, dim, fault):
        self.bits, self.dim, self.fault, self.nominal_bits = bits, dim, fault, float(bits)

    def encode(self, x):
        levels = 2 ** self.bits
        q = np.clip(np.floor((np.asarray(x, np.float64) + 4) / 8 * levels), 0, levels - 1)
        return _Codes(pack_codes(q.astype(np.uint8), self.bits))

    def decode(self, codes):
        out = (unpack_codes(codes.packed, self.bits, self.dim) + 0.5) / 2 ** self.bits * 8 - 4
        if self.fault == "short":
            return out[..., :-1]
        if self.fault == "nan":
            out[..., 0, :] = np.nan
        return out

    def roundtrip(self, x):
        return self.decode(self.encode(x)).astype(np.asarray(x).dtype)

    def stored_bits(self, n_tokens):
        return {"codes": float(self.bits * self.dim * n_tokens)}

    def describe(self):
        return {"coder": f"uniform-{self.fault}"}


def _scheme(name, fault):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, _Uniform(bits, dim, fault), _Uniform(bits, dim, "")
    return define_scheme(name, build, lambda bits, dim, n, params: (n * bits * dim,) * 2,
                         summary=f"uniform, {fault or 'honest'}")


def _grid(scheme):
    return {"schemes": [scheme, "KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
            "n_keys": [32], "n_trials": 4, "report": {"comparisons": []}}


def test_an_honest_decode_passes_the_preflight():
    with registered_scheme(_scheme("uniform", "")):
        assert len(check_grid(_grid("uniform"))) == 2


@pytest.mark.parametrize("fault, said", [("short", r"returns shape \(1, \d+, 15\)"),
                                         ("nan", r"returns 16 non-finite values")])
def test_a_decode_of_the_wrong_shape_or_non_finite_is_refused_before_any_compute(fault, said):
    with registered_scheme(_scheme("badround", fault)):
        with pytest.raises(ValueError, match=r"scheme 'badround' at n=3, d=16: its roundtrip of \(1, \d+, 16\) finite "
                                             rf"keys {said}; a scheme's decode must return finite vectors"):
            check_grid(_grid("badround"))
