"""A user scheme built on kivi's or qjl's coders declares a token group the cache codes in
whole; the grouped reads need whole key groups (referee T6 F1): a group that is not a
multiple of the key coder's ``group_size`` is refused at construction, not by a
RuntimeError on the first read after a forward pass's update."""

import pytest
import torch

from kvstats import define_scheme, register_scheme, unregister_scheme
from kvstats.models import QuantizedCache
from kvstats.models.code_attention import code_attention
from kvstats.quant.qjl_keys import QJLKeyQuantizer
from kvstats.quant.uniform import KIVIKeyCoder, KIVIValueCoder, UniformTokenCoder


def _kivi(bits, dim, params, key_rng, value_rng, draws):
    return bits, KIVIKeyCoder(bits, dim, group_size=8, residual=0), KIVIValueCoder(bits, dim, group_size=32, residual=0)


def _qjl(bits, dim, params, key_rng, value_rng, draws):
    key = QJLKeyQuantizer(dim, 2 * dim, n_outliers=2, group_size=8, seed=key_rng, draws=draws)
    return bits, key, UniformTokenCoder(bits, dim, group_size=32)


def _bits(bits, dim, n, params):
    return n * bits * dim, n * bits * dim


@pytest.fixture
def user_scheme():
    names = []

    def register(name, build, **kw):
        register_scheme(define_scheme(name, build, _bits, summary="kivi/qjl-like", **kw))
        names.append(name)

    yield register
    for name in names:
        unregister_scheme(name)


@pytest.mark.parametrize("build", [_kivi, _qjl], ids=["kivi", "qjl"])
@pytest.mark.parametrize("attention", [None, "model"])
@pytest.mark.parametrize("declared", [{}, {"params": ["gs"], "token_group_param": "gs", "token_group_default": 4}])
def test_token_group_not_a_multiple_is_refused(user_scheme, build, attention, declared):
    user_scheme("v5user", build, **declared)
    group = declared.get("token_group_default", 1)
    with pytest.raises(ValueError, match=rf"'v5user' declares a token group of {group} .*group_size=8"):
        QuantizedCache("v5user", 2, attention=attention)


@pytest.mark.parametrize("build", [_kivi, _qjl], ids=["kivi", "qjl"])
def test_token_group_a_multiple_reads_its_codes(user_scheme, build):
    """Declared 16 for key groups of 8: accepted, and the code-reading attention equals
    softmax attention over the decoded cache (37 + 5 tokens: whole groups and a tail)."""
    user_scheme("v5user", build, params=["gs"], token_group_param="gs", token_group_default=16)
    cache = QuantizedCache("v5user", 3, seed=0)
    assert cache.grouped and cache.attention == "codes" and cache.token_group == 16
    torch.manual_seed(0)
    cache.update(torch.randn(1, 3, 37, 64), torch.randn(1, 3, 37, 64), layer_idx=0)
    for _ in range(5):
        cache.update(torch.randn(1, 3, 1, 64), torch.randn(1, 3, 1, 64), layer_idx=0)
    layer = cache.layers[0]
    assert layer.n_coded == 32
    K, V = layer.dequantized()
    q = torch.randn(1, 9, 1, 64)
    out = code_attention(q, layer, None, None, 3)
    Kr, Vr = K.repeat_interleave(3, 1), V.repeat_interleave(3, 1)
    ref = (torch.softmax(q @ Kr.transpose(-1, -2) / 8, -1) @ Vr).transpose(1, 2)
    assert torch.allclose(out, ref, atol=1e-5)


def test_builtins_are_accepted():
    for name, kw in (("kivi", {"group_size": 8}), ("qjl", {"group_size": 8})):
        cache = QuantizedCache(name, 3, **kw)
        assert cache.grouped and cache.token_group == 8
