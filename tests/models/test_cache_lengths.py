"""QuantizedCache's length queries answer as transformers' ``DynamicCache`` does, before
any update included (they were ``max()`` of no layers, or the full-attention answer for a
sliding-window layer not yet built).

The reference is ``DynamicCache(config=...)`` of the same config (its layers are built
from the config up front), fed the same states; for a cache without a config, whose
layers both build on their first update, ``DynamicCache()`` after an update (before one
its ``get_max_length()`` is itself ``max()`` of no layers)."""

import pytest
import torch
import transformers
from transformers import DynamicCache

from kvstats.models import QuantizedCache

W = 4  # the sliding window of the configs that have one
SHAPE = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, max_position_embeddings=64, pad_token_id=0)


def _config(arch):
    if arch == "Llama":  # full attention only
        return transformers.LlamaConfig(num_hidden_layers=3, **SHAPE)
    if arch == "Gemma3":  # sliding and full layers
        return transformers.Gemma3TextConfig(num_hidden_layers=3, sliding_window=W,
                                             layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                             **SHAPE)
    # Gemma 4 with KV sharing: layers 2 and 3 reuse 0's and 1's states and are never updated
    return transformers.Gemma4TextConfig(num_hidden_layers=4, sliding_window=W, num_kv_shared_layers=2,
                                         layer_types=["sliding_attention", "full_attention"] * 2,
                                         vocab_size_per_layer_input=97, hidden_size_per_layer_input=8,
                                         global_head_dim=16, **SHAPE)


def _answers(cache, layers, mask_end_only=False):
    """Every length query transformers' generation and masking code asks, for the given
    layers, and the cache-wide ones. ``mask_end_only``: of ``get_mask_sizes``
    only where the masked span ends (a sliding-window layer of a QuantizedCache drops
    coded tokens in batches, so it may hold, and its mask span, more tokens than the
    window; the mask hides them)."""
    out = {"max": cache.get_max_length(), "seq": cache.get_seq_length(), "offset": cache.get_query_offset()}
    for i in layers:
        sizes = cache.get_mask_sizes(3, i)
        out[i] = (cache.get_max_length(i), cache.get_seq_length(i), sum(sizes) if mask_end_only else sizes)
    return out


def _update(cache, producers, tokens):
    g = torch.Generator().manual_seed(tokens)
    for i in producers:
        k = torch.randn(1, 2, tokens, 16, generator=g)
        cache.update(k, k.clone(), layer_idx=i)


@pytest.mark.parametrize("scheme", [("KQV", 4, {}), ("kivi", 2, {"group_size": 4}), ("KV", 4, {"attention": "model"})],
                         ids=["codes", "grouped", "model"])
@pytest.mark.parametrize("arch", ["Llama", "Gemma3", "Gemma4"])
def test_length_queries_match_dynamic_cache_before_and_after_updates(arch, scheme):
    name, bits, params = scheme
    config = _config(arch)
    n = config.num_hidden_layers
    producers = [i for i, mode in enumerate(getattr(config, "kv_sharing_modes", None) or [None] * n)
                 if mode != "reuse"]
    # the producers and a layer beyond the model's (transformers refuses mask sizes of
    # the reusing layers: it holds nothing for them)
    layers = [*producers, n]
    cache, dynamic = QuantizedCache(name, bits, config=config, **params), DynamicCache(config=config)
    assert _answers(cache, layers) == _answers(dynamic, layers)
    expected_max = W if arch != "Llama" else -1     # transformers' max over the layers
    assert cache.get_max_length() == expected_max
    # 3 tokens (within the window), then 7 more (past it: transformers' sliding layers
    # then hold W - 1 tokens, the QuantizedCache's all 10 until a batch of drops is due)
    for tokens, past_window in ((3, False), (7, True)):
        _update(cache, producers, tokens)
        _update(dynamic, producers, tokens)
        assert _answers(cache, layers, past_window) == _answers(dynamic, layers, past_window)


@pytest.mark.parametrize("params", [{}, {"attention": "model"}], ids=["codes", "model"])
def test_a_cache_without_config_is_unbounded_before_and_after_updates(params):
    cache = QuantizedCache("KQV", 4, **params)
    assert _answers(cache, range(3)) == {"max": -1, "seq": 0, "offset": 0, 0: (-1, 0, (3, 0)), 1: (-1, 0, (3, 0)),
                                  2: (-1, 0, (3, 0))}
    dynamic = DynamicCache()
    for c in (cache, dynamic):
        _update(c, [0, 1], 5)
    assert _answers(cache, range(3)) == _answers(dynamic, range(3))
    assert cache.get_max_length() == -1 and cache.get_mask_sizes(3, 1) == (8, 0)


def test_a_layer_index_must_be_a_non_negative_integer():
    with pytest.raises(ValueError, match="layer_idx must be .*received -1"):
        QuantizedCache("KQV", 4).get_max_length(-1)
