"""An outside referee's (RN) findings on QuantizedCache.

F1: token-grouped schemes (kivi, qjl, klt's block of 1024) hold their newest, incomplete
group uncoded: memory_report counts it, and a named warning says so once per cache where
that group outweighs the coded tokens (never for the deliberate window). F2: attention="model", keep_decoded=False decodes the held codes
in one call per read, bit for bit the per-chunk decode. F3: memory_report's held + fixed
bytes equal an independent object-graph walk (gc.get_referents) for every scheme.
"""

from __future__ import annotations

import gc
import types
import warnings

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.cache import UncodedTokensWarning
from kvstats.models.cache_memory import _object_bytes
from kvstats.models.peers import held_bytes
from kvstats.quant.registry import REGISTRY


def _fill(cache, prefill=20, steps=5, layers=2, heads=2, dim=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    for n in [prefill] + [1] * steps:
        for layer in range(layers):
            cache.update(torch.randn(1, heads, n, dim, generator=g), torch.randn(1, heads, n, dim, generator=g),
                         layer_idx=layer)
    return cache


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, UncodedTokensWarning)]


# ---- F1: uncoded tokens of an unfilled group -------------------------------------------

def test_klt_below_its_block_counts_every_token_uncoded_and_warns_once():
    # RN's reproducer: klt's block is 1024 tokens, so 600 tokens are held, uncoded, in float
    cache = QuantizedCache("klt", 4)
    got = _caught(lambda: _fill(cache, prefill=600, steps=3))
    assert len(got) == 1                                    # once per cache, not per layer or step
    assert "1024" in str(got[0].message) and "uncoded_tokens" in str(got[0].message)
    rep = cache.memory_report()
    assert rep["uncoded_tokens"] == 2 * 603 and rep["uncoded_share"] == 1.0
    assert all(layer.n_coded == 0 for layer in cache.layers)
    # a second cache warns again (once per cache)
    assert len(_caught(lambda: _fill(QuantizedCache("klt", 4), prefill=600, steps=0))) == 1


def test_a_filled_klt_block_is_coded_and_only_the_rest_counted():
    cache = QuantizedCache("klt", 4, group_size=8)
    got = _caught(lambda: _fill(cache, prefill=20, steps=0, layers=1))   # 16 coded, 4 uncoded
    rep = cache.memory_report()
    assert (cache.layers[0].n_coded, rep["uncoded_tokens"], rep["uncoded_share"]) == (16, 4, 0.2)
    assert got == []                   # counted, but the coded tokens outweigh the open group


def test_the_warning_comes_where_the_open_group_outweighs_the_coded_tokens():
    # kivi, groups of 32: 40 tokens code 32 and hold 8 (quiet); 20 tokens code none (warns)
    cache = QuantizedCache("kivi", 2)
    assert _caught(lambda: _fill(cache, prefill=40, steps=0, layers=1)) == []
    assert cache.memory_report()["uncoded_tokens"] == 8
    cache = QuantizedCache("kivi", 2)
    assert len(_caught(lambda: _fill(cache, prefill=20, steps=0, layers=1))) == 1
    assert cache.memory_report()["uncoded_tokens"] == 20


def test_the_window_asked_for_is_not_uncoded_and_does_not_warn():
    # per-vector scheme with a window: the tail is the window, nothing to warn about
    cache = QuantizedCache("KQV", 4, window=5)
    assert _caught(lambda: _fill(cache)) == []
    assert cache.memory_report()["uncoded_tokens"] == 0
    # kivi, groups of 32, window 32: 64 tokens leave exactly the window uncoded
    cache = QuantizedCache("kivi", 2, window=32)
    assert _caught(lambda: _fill(cache, prefill=64, steps=0, layers=1)) == []
    assert cache.memory_report()["uncoded_tokens"] == 0 and cache.layers[0].n_coded == 32
    # one token more opens a group beyond the window: counted (1 against 32 coded: no warning)
    got = _caught(lambda: cache.update(torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64), layer_idx=0))
    assert got == [] and cache.memory_report()["uncoded_tokens"] == 1


def test_the_docs_name_every_scheme_that_keeps_an_uncoded_group():
    doc = QuantizedCache.__doc__
    window_doc = doc[doc.index("window : int"):doc.index("per_head : bool")]
    for name in ("kivi", "qjl", "klt", "1024"):
        assert name in window_doc
    import kvstats.models.cache as cache_module

    assert "klt" in cache_module.__doc__ and "uncoded_tokens" in cache_module.__doc__


# ---- F2: one decode call per read ------------------------------------------------------

_NUMPY_CODED = [("identity", None, {}), ("q8_0", None, {}), ("q4_0", None, {}), ("q4_1", None, {}),
                ("q5_0", None, {}), ("q5_1", None, {}), ("fp8_e4m3", None, {}), ("fp8_e5m2", None, {"scale": 2.0}),
                ("mxfp4", None, {}), ("nvfp4", None, {}), ("KQV", 4, {"rotation": "haar"}),
                ("mixed", None, {"key_bits": 4, "value_bits": 2, "rotation": "haar"}), ("klt", 4, {"group_size": 8})]


@pytest.mark.filterwarnings("ignore::kvstats.models.cache_layer.UncodedTokensWarning")
@pytest.mark.parametrize("name,bits,params", _NUMPY_CODED, ids=[f"{n}-{p}" for n, _, p in _NUMPY_CODED])
def test_decode_on_read_is_bit_identical_to_the_per_chunk_decode_and_to_the_kept_copy(name, bits, params):
    on_read = _fill(QuantizedCache(name, bits, attention="model", keep_decoded=False, **params),
                    prefill=16, steps=30, layers=1)
    kept = _fill(QuantizedCache(name, bits, attention="model", keep_decoded=True, **params),
                 prefill=16, steps=30, layers=1)
    layer = on_read.layers[0]
    per_chunk = [layer._decode_numpy(c) for c in layer.chunks]   # the decode before the fix
    tail = (layer.tail_keys, layer.tail_values)
    for side in (0, 1):
        want = torch.cat([*(p[side] for p in per_chunk), tail[side]], dim=-2)
        assert torch.equal(layer.dequantized()[side], want)
        assert torch.equal(kept.layers[0].dequantized()[side], want)


@pytest.mark.parametrize("name,params,calls", [("q4_0", {}, 1), ("identity", {}, 1), ("mxfp4", {}, 1),
                                               ("fp8_e4m3", {"scale": 2.0}, 1),
                                               ("fp8_e4m3", {}, 31)])        # a scale per decode step
def test_a_read_decodes_the_held_codes_in_one_call(name, params, calls):
    cache = _fill(QuantizedCache(name, None, attention="model", keep_decoded=False, **params),
                  prefill=16, steps=30, layers=1)
    layer = cache.layers[0]
    assert len(layer.chunks) == 31
    scheme, n = layer.scheme, []
    original = scheme.dequantize
    scheme.dequantize = lambda codes: (n.append(1), original(codes))[1]
    layer.dequantized()
    assert len(n) == calls                                  # before: one call per chunk, 31


# ---- F3: memory_report against an object-graph walk ------------------------------------

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, str, bytes, int, float)


def _walk(root) -> int:
    """Bytes of every tensor storage and owning numpy array reachable through
    gc.get_referents (independent of kvstats' own walkers), each memory block once."""
    seen, blocks, stack = set(), {}, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            s = obj.untyped_storage()
            blocks[(s.data_ptr(), obj.device.type)] = s.nbytes()
        elif isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if isinstance(base.base, torch.Tensor):
                s = base.base.untyped_storage()
                blocks[(s.data_ptr(), "cpu")] = s.nbytes()
            else:
                blocks[(base.ctypes.data, "cpu")] = max(blocks.get((base.ctypes.data, "cpu"), 0), base.nbytes)
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
        else:
            stack.extend(gc.get_referents(obj))
    return sum(blocks.values())


_FIXED = {"identity", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "fp8_e4m3", "fp8_e5m2", "mxfp4", "nvfp4"}
_ALL = ([(n, None if n in _FIXED | {"mixed"} else 2, {"key_bits": 4, "value_bits": 2} if n == "mixed" else {})
         for n in REGISTRY]
        + [("K4V2", None, {}), ("klt", 4, {"group_size": 8}), ("KQV", 4, {"rotation": "haar"}),
           ("KQV", 4, {"attention": "model"}), ("KQV", 4, {"keep_decoded": True}),
           ("kivi", 2, {"attention": "model"}), ("qjl", 3, {"attention": "model", "n_outliers": 4}),
           ("q4_0", None, {"keep_decoded": False})])


@pytest.mark.filterwarnings("ignore::kvstats.models.cache_layer.UncodedTokensWarning")
@pytest.mark.parametrize("name,bits,params", _ALL, ids=[f"{n}-{p}" for n, _, p in _ALL])
def test_memory_report_is_every_byte_an_object_graph_walk_finds(name, bits, params):
    cache = _fill(QuantizedCache(name, bits, **params))
    rep = cache.memory_report()
    # chunks held as objects (klt's) add their Python objects' sys.getsizeof (documented);
    # the walk counts array memory only
    objects = sum(_object_bytes(lay.chunks.objects, set()) for lay in cache.layers
                  if lay.chunks.objects is not None)
    walked = _walk(cache)
    assert rep["held_bytes"] + rep["fixed_bytes"] - objects == walked   # before: 16 B/layer short
    assert held_bytes(cache) == walked
