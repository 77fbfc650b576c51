"""A copied cache (copy.deepcopy, pickle) codes and reads as the original would.

transformers' way to reuse a prompt's cache is ``copy.deepcopy(prompt_cache)`` per
continuation. The compiled encoder kept raw pointers to a coder's rotation signs and
sketch on the coder; a copy carried them, so once the original was freed the copy coded
new tokens from freed memory (wrong sign bits, silently).
"""

import copy
import gc
import pickle

import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import code_attention
from kvstats.models.peers import held_bytes


def _kv(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 2, n, 64, generator=g), torch.randn(1, 2, n, 64, generator=g)


def _filled(name, bits, k, v):
    cache = QuantizedCache(name, bits, seed=3)
    cache.update(k[:, :, :8], v[:, :, :8], layer_idx=0)     # a short prefill: the C encoder
    cache.update(k[:, :, 8:9], v[:, :, 8:9], layer_idx=0)   # and a decode step
    return cache


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("name,bits", [("QKQV", 4), ("KQV", 3), ("KV", 5)])
def test_a_copy_of_a_cache_outlives_the_original(how, name, bits):
    k, v = _kv(14)
    ref = _filled(name, bits, k, v)
    orig = _filled(name, bits, k, v)
    dup = copy.deepcopy(orig) if how == "deepcopy" else pickle.loads(pickle.dumps(orig))
    del orig
    gc.collect()
    junk = [torch.full((64, 64), 1e3) for _ in range(300)]  # take the freed memory  # noqa: F841
    for cache in (ref, dup):
        for t in range(9, 14):
            cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    for n, buf in ref.layers[0].store.items():
        assert torch.equal(buf.view(), dup.layers[0].store[n].view()), n
    q = torch.randn(1, 4, 1, 64, generator=torch.Generator().manual_seed(1))
    assert torch.equal(code_attention(q, dup.layers[0], None, 0.125, 2),
                       code_attention(q, ref.layers[0], None, 0.125, 2))
    # every byte the copy holds is in its report (a pickle does not keep the storage the
    # layers' coders share, so its fixed bytes may exceed the original's)
    rep = dup.memory_report()
    assert held_bytes(dup) == rep["held_bytes"] + rep["fixed_bytes"]
    if how == "deepcopy":
        assert rep == ref.memory_report()


def test_a_copy_holds_no_pointers_into_the_original():
    # straight after the copy (before any new token) its report is the walk of what it holds
    k, v = _kv(9)
    orig = _filled("QKQV", 4, k, v)
    from kvstats.models.lut_kernel import kernel

    if kernel() is not None:  # the compiled encoder ran, and kept its pointers on the coders
        assert any(hasattr(c, "_lut_static") for c in (orig.layers[0].key_coder, orig.layers[0].value_coder))
    for dup in (copy.deepcopy(orig), pickle.loads(pickle.dumps(orig))):
        assert not any(hasattr(c, "_lut_static") for c in (dup.layers[0].key_coder, dup.layers[0].value_coder))
        rep = dup.memory_report()
        assert held_bytes(dup) == rep["held_bytes"] + rep["fixed_bytes"]


def test_the_compiled_encoder_follows_a_coders_tensors():
    # its pointers are retaken when a coder's tensors are no longer those they were taken
    # from (here the sketch replaced by its negative after a decode step): the compiled
    # encoder then codes with the new sketch, as the torch encoder does
    from kvstats.models.lut_kernel import kernel

    kern = kernel()
    if kern is None:
        pytest.skip("no C compiler here: the compiled encoder is not used")
    k, v = _kv(9)
    cache = _filled("QKQV", 4, k, v)
    coder = cache.layers[0].value_coder
    x = torch.randn(1, 2, 1, 64, generator=torch.Generator().manual_seed(5))
    before = kern.encode(coder, x)
    coder.sketch = -coder.sketch
    got, want = kern.encode(coder, x), coder.encode(x, fused=False)
    assert all(torch.equal(got[n], want[n]) for n in want)
    assert not torch.equal(got["signs"], before["signs"])


@pytest.mark.parametrize("params", [{}, {"n_outliers": 4}])
def test_a_copy_of_a_qjl_cache_holds_its_sketches_once(params):
    # The reader's Sᵀ is a view of the numpy coder's S: a copy (deepcopy, pickle) carries S
    # once and rebuilds the view over the copy, so its fixed bytes are the original's, and
    # it scores as the original does
    k, v = _kv(20)
    orig = QuantizedCache("qjl", 3, seed=3, group_size=8, **params)
    orig.update(k[:, :, :16], v[:, :, :16], layer_idx=0)
    for dup in (copy.deepcopy(orig), pickle.loads(pickle.dumps(orig))):
        lay, side = dup.layers[0], dup.layers[0].key_side
        coder = lay.scheme.key_coder
        sketches = [coder.sketch] + ([coder.outlier_sketch] if params else [])
        for s, st in zip(sketches, side.fixed_tensors()):
            assert st.data_ptr() == s.dense.ctypes.data
            assert s.dense.ctypes.data != orig.layers[0].scheme.key_coder.sketch.dense.ctypes.data
        assert dup.fixed_nbytes() == orig.fixed_nbytes()
        rep = dup.memory_report()
        assert held_bytes(dup) == rep["held_bytes"] + rep["fixed_bytes"]
        q = torch.randn(1, 2, 1, 64, generator=torch.Generator().manual_seed(1))
        assert torch.equal(side.scores(q), orig.layers[0].key_side.scores(q))
