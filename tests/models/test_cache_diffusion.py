"""QuantizedCache on DiffusionGemma (transformers' block-diffusion Gemma; tiny random model):
its encoder writes the prompt's keys and values to the cache, its decoder reads them,
read-only, from each cache layer's ``keys``/``values`` beside the canvas's own.

Of a sliding-window layer transformers' ``DynamicCache(config)`` holds the last ``W − 1``
tokens, and the decoder attends to whatever it holds; a QuantizedCache holds a few more
before a drop (a whole prefill until its next update), and its layers' ``keys``/``values``
are the last ``W − 1`` held ones. Checked: the logits are those of the model over the
same decoded states in ``DynamicCache(config)`` (replayed), prompt longer than the window,
both attention paths, over a prompt and a committed block.
"""

import pytest
import torch

from kvstats.models import QuantizedCache

from test_cache_shared_kv import VOCAB, _Replay

pytestmark = pytest.mark.slow

W = 4


def _model():
    from transformers.models.diffusion_gemma import configuration_diffusion_gemma, modeling_diffusion_gemma

    torch.manual_seed(0)
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, global_head_dim=16, max_position_embeddings=64, sliding_window=W,
                layer_types=["sliding_attention", "full_attention"], pad_token_id=0, num_experts=2, top_k_experts=1,
                moe_intermediate_size=32)
    config = configuration_diffusion_gemma.DiffusionGemmaConfig(text_config=text)
    config._attn_implementation = config.text_config._attn_implementation = "eager"
    return modeling_diffusion_gemma.DiffusionGemmaForBlockDiffusion(config).eval()


def _blocks(model, cache):
    """A 24-token prompt with a 6-token canvas, then that canvas committed with a new one:
    the decoder's logits of each."""
    g = torch.Generator().manual_seed(1)
    prompt, canvas, nxt = (torch.randint(2, VOCAB, (1, n), generator=g) for n in (24, 6, 6))
    with torch.inference_mode():
        first = model(input_ids=prompt, decoder_input_ids=canvas, cache=cache).logits
        second = model(input_ids=canvas, decoder_input_ids=nxt, cache=cache).logits
    return torch.stack([first, second])


@pytest.mark.parametrize("mode", [{}, {"attention": "model"}], ids=["codes", "model"])
def test_the_decoder_reads_what_transformers_sliding_cache_would_hold(mode):
    model = _model()
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config, **mode)
    got = _blocks(model, cache)
    assert cache.layers[0].is_sliding and cache.layers[0].n_dropped > 0
    keeping = QuantizedCache("KQV", 4, seed=1, **mode)   # the same codes, every token kept
    _blocks(model, keeping)
    states = {i: (lay.keys.clone(), lay.values.clone()) for i, lay in enumerate(keeping.layers)}
    replayed = _blocks(model, _Replay(states, model.config))
    torch.testing.assert_close(got, replayed, rtol=0, atol=1e-5)
    # the decoder does read the prompt: a window the cache does not apply changes its logits
    assert (_blocks(model, keeping) - got).abs().max() > 1e-3
