"""QuantizedCache inside an encoder-decoder model's EncoderDecoderCache.

Cross-attention updates its cache once and afterwards reads the layer's ``keys`` and
``values`` directly (transformers' generic code for 76 encoder-decoder models). A layer's
``keys`` were its full-precision tail only — empty with window 0 — so a quantized
cross-attention cache attended nothing, silently (T5 with the lossless identity scheme:
scores off by 1.5). They are now the decoded keys and values.
"""

import pytest
import torch

from kvstats.models import QuantizedCache


def _t5(attn="eager"):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=97, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, pad_token_id=0, attn_implementation=attn)
    return transformers.T5ForConditionalGeneration(cfg).eval()


def _bart(attn="eager"):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BartConfig(vocab_size=97, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                  decoder_ffn_dim=128, max_position_embeddings=64, pad_token_id=1,
                                  attn_implementation=attn)
    return transformers.BartForConditionalGeneration(cfg).eval()


def _scores(model, cache):
    ids = torch.randint(3, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), cache=cache, max_new_tokens=5,
                             do_sample=False, output_scores=True, return_dict_in_generate=True)
    return torch.stack(out.scores)


@pytest.mark.parametrize("make", [_t5, _bart], ids=["t5", "bart"])
def test_a_lossless_cross_attention_cache_is_the_models_own(make):
    from transformers import DynamicCache, EncoderDecoderCache

    model = make()
    ref = _scores(model, None)

    def identity():
        return QuantizedCache("identity", None, attention="model")

    for cache in (EncoderDecoderCache(DynamicCache(), identity()), EncoderDecoderCache(identity(), identity())):
        torch.testing.assert_close(_scores(model, cache), ref, rtol=0, atol=1e-5)


def test_bart_reads_its_decoder_self_attention_from_codes():
    # self-attention from codes (decode steps), cross-attention in a quantized cache read
    # through its decoded keys: the same scores as the decoded path of both
    from transformers import EncoderDecoderCache

    model = _bart()
    decoded = _scores(model, EncoderDecoderCache(QuantizedCache("KQV", 4, seed=1, attention="model"),
                                                 QuantizedCache("KQV", 4, seed=2, attention="model")))
    for cross in ("model", "codes"):  # codes: the first step's cross-attention reads the codes too
        codes = _scores(model, EncoderDecoderCache(QuantizedCache("KQV", 4, seed=1),
                                                   QuantizedCache("KQV", 4, seed=2, attention=cross)))
        torch.testing.assert_close(codes, decoded, rtol=0, atol=1e-5)


def test_a_layers_keys_are_its_decoded_keys_and_cannot_be_assigned():
    k = torch.randn(1, 2, 7, 64)
    cache = QuantizedCache("KQV", 4, window=2)
    cache.update(k, k, layer_idx=0)
    layer = cache.layers[0]
    K, V = layer.dequantized()
    assert torch.equal(layer.keys, K) and torch.equal(layer.values, V) and layer.keys.shape[-2] == 7
    assert layer.tail_keys.shape[-2] == 2
    with pytest.raises(TypeError, match="keys are decoded from its codes and cannot be assigned"):
        layer.keys = torch.zeros(1)
    cache.reset()
    assert layer.keys is None and layer.tail_keys is None and cache.get_seq_length() == 0
