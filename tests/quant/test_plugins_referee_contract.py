"""A researcher's wrong coders that the contract let through, each now refused by its clause.

Every coder here gives roundtrip == dequantize(quantize()) through the Scheme wrapper and
honest stored_bits, so the earlier clauses passed it; yet a sweep's numbers would be
wrong: the sweep calls roundtrip(x, out=buf) directly on a coder declaring
roundtrip_writes_out (a subclass of MSEQuantizer inherits it), a setting fitted at a
coder's first call makes each trial depend on the chunk coded first, draws that share
their randomness make a chunk's trials dependent, and bytes the codes hold (packed bits
as ``bytes``) are storage the byte count must see.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from kvstats.quant import contract
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.uniform import UniformTokenCoder

# the contract's awkward rows underflow float16 on purpose (tested elsewhere)
pytestmark = pytest.mark.filterwarnings("ignore:.*below float16:UserWarning")


def _uniform_bits(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 32)   # UniformTokenCoder at group = dim: codes, fp16 scale, zero
    return side, side


def _mse_bits(bits, dim, n_tokens, params):
    padded = 1 << (dim - 1).bit_length()  # the Hadamard rotation pads d to a power of two
    side = n_tokens * (bits * padded + 16)
    return side, side


def _failure(sdef, check, *args):
    with registered_scheme(sdef):
        with pytest.raises(contract.SchemeContractError) as info:
            check(sdef.name, None, *args)
    return str(info.value)


# ------------------------------------------------------------------ roundtrip(x, out=)
class _NoOut(MSEQuantizer):
    def roundtrip(self, x):             # a variant's own roundtrip, without the inherited `out`
        return self.decode(self.encode(x))


class _Float64Out(MSEQuantizer):
    def roundtrip(self, x, out=None):   # ignores out and returns float64 for float32 input
        return self.decode(self.encode(x)).astype(np.float64)


class _Unwritten(MSEQuantizer):
    def roundtrip(self, x, out=None):   # right values, but out left as it was
        return self.decode(self.encode(x))


def _mse_side(coder):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return (bits, MSEQuantizer(dim, bits, seed=key_rng, draws=draws),
                coder(dim, bits, seed=value_rng, draws=draws))
    return build


@pytest.mark.parametrize("coder,text", [
    (_NoOut, "roundtrip(x, out=buf) raised TypeError"),
    (_Float64Out, "returned array of shape (3, 200, 128) and dtype float64 where dequantize(quantize()) "
                  "gives V as float32"),
    (_Unwritten, "left out unwritten"),
])
def test_a_coder_declaring_roundtrip_writes_out_is_called_as_the_sweep_calls_it(coder, text):
    sdef = define_scheme("variant", _mse_side(coder), _mse_bits, summary="x", randomized=True, max_bits=1)
    message = _failure(sdef, contract.check_roundtrip, 128)
    assert "value coder" in message and "declares roundtrip_writes_out" in message and text in message


def test_a_subclass_that_keeps_out_passes():
    class _Kept(MSEQuantizer):          # a variant overriding encode only keeps the inherited path
        pass

    sdef = define_scheme("variant", _mse_side(_Kept), _mse_bits, summary="x", randomized=True, max_bits=1)
    with registered_scheme(sdef):
        contract.check_roundtrip("variant", None, 128)


# ------------------------------------------------------------------ state fitted at the first call
class _Lazy(UniformTokenCoder):
    clip = None

    def encode(self, x):                # clips at half the largest magnitude of its first call
        if self.clip is None:
            self.clip = float(np.abs(x).max()) / 2
        return super().encode(np.clip(x, -self.clip, self.clip))

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def _uniform(key, value):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, key(bits, dim, dim), value(bits, dim, dim)
    return build


def test_a_setting_fitted_at_the_first_call_fails_roundtrip():
    sdef = define_scheme("lazy", _uniform(UniformTokenCoder, _Lazy), _uniform_bits, summary="x", max_bits=1)
    message = _failure(sdef, contract.check_roundtrip, 64)
    assert "V codes differently in a scheme of the same seed that coded other data first" in message
    assert "K codes" not in message


# ------------------------------------------------------------------ draws that share randomness
class _SignFlip(UniformTokenCoder):
    """Random signs per coordinate, then uniform codes; ``shared`` draws one set of signs
    and broadcasts it over the draws' first axis (the shape is right, the draws are not)."""

    def __init__(self, bits, dim, rng, draws, shared):
        super().__init__(bits, dim, dim)
        drawn = (1, *draws[1:]) if (shared and draws) else draws
        self.signs = np.broadcast_to(rng.choice([-1.0, 1.0], size=(*drawn, 1, dim)), (*draws, 1, dim))

    def encode(self, x):
        x = np.asarray(x)
        return super().encode(x * self.signs.astype(x.dtype))

    def decode(self, codes):
        out = super().decode(codes)
        return out * self.signs.astype(out.dtype)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def _sign_flip(shared):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return (bits, _SignFlip(bits, dim, key_rng, draws, False),
                _SignFlip(bits, dim, value_rng, draws, shared))
    return build


def test_draws_sharing_their_randomness_fail_broadcast():
    sdef = define_scheme("flip", _sign_flip(True), _uniform_bits, summary="x", randomized=True, max_bits=1)
    message = _failure(sdef, contract.check_broadcast)
    assert "the draws of V are not independent" in message and "3 distinct decodes" in message
    honest = define_scheme("flip", _sign_flip(False), _uniform_bits, summary="x", randomized=True, max_bits=1)
    with registered_scheme(honest):
        contract.check_broadcast("flip")


# ------------------------------------------------------------------ codes held as bytes
@dataclass(frozen=True, eq=False)
class _BlobCodes:
    inner: object
    blob: bytes                         # the scales, as bytes
    counted: bool

    @property
    def nbytes(self):
        return self.inner.nbytes + (len(self.blob) if self.counted else 0)


class _Blob(UniformTokenCoder):
    counted = True

    def encode(self, x):
        codes = super().encode(x)
        return _BlobCodes(dataclasses.replace(codes, scale=codes.scale[..., :0]), codes.scale.tobytes(),
                          self.counted)

    def decode(self, codes):
        zero = codes.inner.zero
        scale = np.frombuffer(codes.blob, zero.dtype).reshape(zero.shape)
        return super().decode(dataclasses.replace(codes.inner, scale=scale))

    def roundtrip(self, x):
        return self.decode(self.encode(x))


class _HiddenBlob(UniformTokenCoder):
    def encode(self, x):                # a float16 copy of the input as bytes, counted nowhere
        return _BlobCodes(super().encode(x), np.asarray(x, np.float16).tobytes(), False)

    def decode(self, codes):
        return super().decode(codes.inner)

    def roundtrip(self, x):
        return self.decode(self.encode(x))


def test_bytes_the_codes_hold_are_counted():
    honest = define_scheme("blob", _uniform(UniformTokenCoder, _Blob), _uniform_bits, summary="x")
    with registered_scheme(honest):
        contract.check_stored_bytes("blob")
    hidden = define_scheme("blob", _uniform(UniformTokenCoder, _HiddenBlob), _uniform_bits, summary="x")
    # d = 96, N = 101, 1 bit: 12 code bytes, a float16 scale and zero per vector (1616
    # bytes), and the uncounted float16 copy 101·96·2 = 19392 more
    assert "the value codes hold arrays of 21008 bytes, their nbytes says 1616" in _failure(
        hidden, contract.check_stored_bytes)
