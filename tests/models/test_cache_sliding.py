"""QuantizedCache on sliding-window layers (``config=model.config``): tokens the window no
longer reaches are dropped, the model's attention is unchanged and memory stops growing.

The reference is the same cache without the config, which keeps every token and lets the
model's sliding-window mask hide the old ones (tiny random models built from configs)."""

import pytest
import torch
import transformers

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import code_attention
from kvstats.models.peers import held_bytes

W = 6  # the models' sliding window
SLACK = 16  # tokens beyond W - 1 held before a drop: max(16, W // 32)


def _model(attn, arch="Mistral", **extra):
    cfg = getattr(transformers, f"{arch}Config")(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=128, pad_token_id=0, attn_implementation=attn,
        sliding_window=W, **extra)
    torch.manual_seed(0)
    return getattr(transformers, f"{arch}ForCausalLM")(cfg).eval()


def _generate(model, cache, new=30):
    ids = torch.randint(2, 97, (1, 9), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        # min_new_tokens: a random model may emit its end token on some codes, not others
        out = model.generate(ids, cache=cache, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0,
                             output_scores=True, return_dict_in_generate=True)
    return out.sequences, torch.stack(out.scores)


def _held(layer):
    return layer.n_coded + layer.tail_keys.shape[-2]


@pytest.mark.parametrize("attn,name,bits,params", [
    ("eager", "KQV", 4, {}), ("sdpa", "KQV", 4, {}), ("sdpa", "KQV", 4, {"window": 3}),
    ("eager", "KQV", 4, {"keep_decoded": True}), ("eager", "KQV", 4, {"attention": "model"}),
    ("sdpa", "KQV", 4, {"attention": "model"}), ("eager", "kivi", 2, {"group_size": 4}),
    ("sdpa", "qjl", 3, {"group_size": 4}), ("eager", "KQV", 3, {"rotation": "haar"})])
def test_dropping_tokens_beyond_the_window_changes_no_output(attn, name, bits, params):
    model = _model(attn)
    ref = QuantizedCache(name, bits, seed=1, **params)
    cache = QuantizedCache(name, bits, seed=1, config=model.config, **params)
    seq_ref, scores_ref = _generate(model, ref)
    seq, scores = _generate(model, cache)
    assert torch.equal(seq, seq_ref)
    torch.testing.assert_close(scores, scores_ref, rtol=0, atol=1e-5)
    assert cache.get_seq_length() == ref.get_seq_length() == 38
    for layer, full in zip(cache.layers, ref.layers):
        assert layer.is_sliding and layer.n_dropped > 0
        assert W - 1 <= _held(layer) <= W - 1 + SLACK + 4 and _held(full) == 38


def test_memory_stops_growing_and_is_what_the_cache_holds():
    model = _model("eager")
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config)
    tok = torch.tensor([[5, 7, 11]])
    held = []
    with torch.inference_mode():
        for _ in range(90):
            tok = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
            rep = cache.memory_report()
            held.append(rep["held_bytes"])
            assert held_bytes(cache.layers) == rep["held_bytes"] + rep["fixed_bytes"]
    assert cache.get_seq_length() == 92
    assert max(held[30:]) == max(held[:30])  # bounded from the first drop on
    assert max(_held(layer) for layer in cache.layers) <= W - 1 + SLACK


def test_only_the_sliding_layers_drop_tokens():
    model = _model("sdpa", "Qwen2", use_sliding_window=True, layer_types=["full_attention", "sliding_attention"])
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config)
    ref = QuantizedCache("KQV", 4, seed=1)
    seq, scores = _generate(model, cache)
    seq_ref, scores_ref = _generate(model, ref)
    assert torch.equal(seq, seq_ref)
    torch.testing.assert_close(scores, scores_ref, rtol=0, atol=1e-5)
    assert [layer.is_sliding for layer in cache.layers] == [False, True]
    assert _held(cache.layers[0]) == 38 and _held(cache.layers[1]) <= W - 1 + SLACK


def test_code_attention_without_a_mask_keeps_to_the_window():
    # a decode step with no mask (sdpa's causal shortcut) must not read held tokens that
    # the window excludes: the same as softmax attention over the last W tokens
    model = _model("eager")
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config)
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(1, 2, 20, 16, generator=g), torch.randn(1, 2, 20, 16, generator=g)
    cache.update(k[:, :, :19], v[:, :, :19], layer_idx=0)
    handle, _ = cache.update(k[:, :, 19:], v[:, :, 19:], layer_idx=0)
    layer = handle.layer
    assert _held(layer) == 20 - layer.n_dropped and _held(layer) > W  # held tokens the window hides
    q = torch.randn(1, 4, 1, 16, generator=g)
    out = code_attention(q, layer, None, 0.25, n_rep=2)
    K, V = (x[:, :, -W:].repeat_interleave(2, 1) for x in layer.dequantized())
    ref = (torch.softmax(q @ K.transpose(-1, -2) * 0.25, -1) @ V).transpose(1, 2)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)


def test_a_crop_into_dropped_tokens_is_refused():
    model = _model("eager")
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config)
    _generate(model, cache, new=25)
    layer = cache.layers[0]
    layer.crop(-(_held(layer) - (W - 1)))  # what the window still holds back: allowed
    with pytest.raises(NotImplementedError, match="sliding-window layer"):
        layer.crop(-1)


def test_a_config_that_is_not_a_models_is_refused():
    with pytest.raises(TypeError, match="config must be a transformers model config"):
        QuantizedCache("KQV", 4, config={"sliding_window": 4})


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("kivi", 2, {"group_size": 4}),
                                              ("KQV", 3, {"rotation": "haar"})])
def test_a_prefill_in_chunks_after_drops_reads_the_same_tokens(name, bits, params):
    # chunks of several tokens after a drop: the model's attention over the held span (the
    # mask sized by get_mask_sizes) is the attention over every token with the window's mask
    model = _model("sdpa")
    ids = torch.randint(2, 97, (1, 60), generator=torch.Generator().manual_seed(3))
    logits = []
    for config in (None, model.config):
        cache = QuantizedCache(name, bits, seed=1, config=config, **params)
        with torch.inference_mode():
            logits.append(torch.cat([model(input_ids=ids[:, a:b], cache=cache, use_cache=True).logits
                                     for a, b in [(0, 10), (10, 30), (30, 31), (31, 45), (45, 60)]], 1))
        assert (cache.layers[0].n_dropped > 0) == (config is not None)
    torch.testing.assert_close(logits[1], logits[0], rtol=0, atol=1e-5)


def test_max_length_is_transformers_for_every_layer():
    """get_max_length as transformers' DynamicCache(config=...) gives it: the window for a
    sliding layer (DynamicSlidingWindowLayer), -1 for a full-attention layer and no layer."""
    model = _model("sdpa", "Qwen2", use_sliding_window=True, layer_types=["full_attention", "sliding_attention"])
    ref = transformers.DynamicCache(config=model.config)
    caches = [QuantizedCache("KQV", 4, seed=1, config=model.config),
              QuantizedCache("kivi", 2, seed=1, config=model.config, group_size=4), ref]
    ids = torch.randint(2, 97, (1, 9), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for cache in caches:
            model(input_ids=ids, cache=cache, use_cache=True)
    expected = [ref.get_max_length(i) for i in range(3)]
    assert expected == [-1, W, -1] and ref.get_max_length() == W
    for cache in caches[:2]:
        assert [cache.get_max_length(i) for i in range(3)] == expected and cache.get_max_length() == W
