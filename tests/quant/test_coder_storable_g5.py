"""Each coder's ``storable_limits`` agrees with its own ``encode``.

The limits a cache checks before holding a state (kvstats/models/cache_layer.py) are
stated by the coders themselves (kvstats/quant/coder.py's protocol): for every built-in
scheme's coders (the registry, every budget the contract builds) and a few patterns of
vectors, the states scaled to just inside the first limit they meet (1 − 1e-3) encode
and decode finite, and for at least one pattern the states just outside it (1 + 1e-3)
are refused by ``encode`` (or would decode non-finite). Reference values: the formats'
largest finite numbers (float16 65504, float32 3.40282e38, numpy.finfo) and the per-token
bounds the coders document (1-bit uniform: 65504 / 2; klt: 65504 / 2, at most twice
conservative, hence its slack below).
"""

import warnings

import numpy as np
import pytest
import torch

from kvstats.quant.coder import IdentityCoder, float32_limits, norm_limits, storable_limits
from kvstats.quant.contract_harness import budgets
from kvstats.quant.registry import SCHEMES, scheme_def
from kvstats.quant.schemes import make_scheme

DIM, N = 64, 64
EPS = 1e-3
# klt bounds a group's float16 mean and scales by twice a token's norm (a sufficient bound:
# the group's other tokens are not known when a cache checks one): exceeded by 2x, refused
SLACK = {"klt": 2.0}


def _patterns():
    """(name, x0 (2, N, DIM) float64): a spike (one coordinate), its negative (a block's
    minimum), opposite values in one group of tokens and of channels (1-bit max − min),
    every token the same spike (klt's mean) and Gaussian states."""
    spike = np.zeros((2, N, DIM))
    spike[:, 0, 0] = 1.0
    opposite = spike.copy()
    opposite[:, 0, 1] = -1.0
    opposite[:, 1, 0] = -1.0
    constant = np.zeros((2, N, DIM))
    constant[..., 0] = 1.0
    gauss = np.random.default_rng(5).standard_normal((2, N, DIM))
    return [("spike", spike), ("negative spike", -spike), ("opposite", opposite), ("constant", constant),
            ("gaussian", gauss)]


def _first_limit(coder, x0):
    """The factor c at which x0 · c meets the first of the coder's limits."""
    return min(limit / value for _, limit, value in storable_limits(coder, x0) if value > 0)


def _encodes(coder, x):
    """Whether encode stores x (float32, as a cache hands it) and decodes it finite."""
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    try:
        out = coder.decode(coder.encode(x32))
    except ValueError:
        return False
    return bool(np.isfinite(out).all())


def _cases():
    for name in SCHEMES:
        params = dict(scheme_def(name).example_params)
        for bits in budgets(name):
            yield pytest.param(name, bits, params, id=f"{name}-{bits}")


@pytest.mark.parametrize("name, bits, params", list(_cases()))
def test_storable_limits_agree_with_encode(name, bits, params):
    scheme = make_scheme(name, bits, DIM, seed=3, **params)
    for side, coder in (("key", scheme.key_coder), ("value", scheme.value_coder)):
        # every built-in coder states its ranges (a new one without the method fails here)
        assert callable(getattr(type(coder), "storable_limits", None)), (name, side, type(coder).__name__)
        tight = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for label, x0 in _patterns():
                c = _first_limit(coder, x0)
                inside = x0 * (c * (1 - EPS))
                assert all(v <= lim for _, lim, v in storable_limits(coder, inside.astype(np.float32))), (
                    name, side, label)
                assert _encodes(coder, inside), f"{name} {side} {label}: within its limits, refused by encode"
                outside = x0 * (c * SLACK.get(name, 1.0) * (1 + EPS))
                tight.append(not _encodes(coder, outside))
        assert any(tight), f"{name} {side}: no pattern just beyond its limits is refused by encode"


def test_limits_name_the_format_and_the_value():
    # the wording the cache's messages quote (tests/models/test_cache_unstorable_g1.py)
    x = np.zeros((1, 64))
    x[0, 0] = 7e4
    kivi = make_scheme("kivi", 1, 64)
    assert storable_limits(kivi.key_coder, x) == [
        ("values of magnitude", float(np.finfo(np.float32).max), 7e4),
        ("values of magnitude (float16 zero and scale, 1 bit: a bound sufficient for any group)", 65504.0 / 2, 7e4)]
    q41 = make_scheme("q4_1", None, 64).key_coder.storable_limits(-x)
    assert [w for w, _, _ in q41][1:] == ["block minima of magnitude (q4_1's float16 minimum)",
                                          "block scales (q4_1's float16 scale)"]
    assert q41[1][2] == 7e4 and q41[2][2] == float(np.float16(7e4 / 15))
    mse = make_scheme("KQV", 4, 64).key_coder.storable_limits(x.astype(np.float32))
    assert mse[1] == ("vector norms (stored as float16)", 65504.0, 7e4)


def test_torch_side_coder_limits_agree_with_its_encode():
    from kvstats.models.code_attention import SideCoder

    scheme = make_scheme("KQV", 4, DIM, seed=0)
    for ex, numpy_coder in ((scheme.export().key, scheme.key_coder), (scheme.export().value, scheme.value_coder)):
        coder = SideCoder([ex])
        x = torch.zeros(1, 2, 3, DIM)
        x[0, 1, 2, 0] = 65504.0
        lim = coder.storable_limits(x)
        assert lim == storable_limits(numpy_coder, x.numpy())[:2]   # float32, float16 norms
        assert all(v <= limit for _, limit, v in lim)
        assert torch.isfinite(coder.decode(coder.encode(x, fused=False))).all()
        x[0, 1, 2, 0] = 65600.0     # float16 rounds this norm to inf
        assert lim[1][1] < coder.storable_limits(x)[1][2]
        with pytest.raises(ValueError, match="norm"):
            coder.encode(x, fused=False)


def test_default_for_a_coder_without_the_method():
    class Plain:   # a user's coder written before the method
        pass

    x = np.array([[1.0, -1e39]])
    assert storable_limits(Plain(), x) == float32_limits(x) == IdentityCoder(2).storable_limits(x)
    assert storable_limits(Plain(), np.zeros((0, 2))) == []
    assert norm_limits(torch.tensor([3.0, 7e4]), "float16") == [("vector norms (stored as float16)", 65504.0, 7e4)]
    with pytest.raises(ValueError, match="norm_dtype must be one of float16, float32, float64; received int8"):
        norm_limits(np.array([1.0]), np.int8)
