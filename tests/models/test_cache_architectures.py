"""The code-reading cache on the decoder architectures of transformers 5.x (tiny random
models): decode steps read from the codes give the scores of the model's own attention
over the decoded cache, or a clear error. docs/real_model.md ("Other architectures")
cites this file; tests/models/test_code_attention.py keeps six of them in the fast suite.
Bloom and MPT, which compute attention in their own code (eager only), are checked with
``attention="model"``: the lossless identity scheme gives DynamicCache's scores, and KQV's
decoded states are exactly what the model attends.
"""

import pytest
import torch
from transformers import DynamicCache

from kvstats.models import QuantizedCache

pytestmark = pytest.mark.slow

READ = ["Qwen2", "Qwen3", "Qwen3Moe", "Phi", "Phi3", "Gemma", "Gemma3Text", "Granite", "Olmo2", "Olmo3",
        "StableLm", "Cohere", "Cohere2", "Mistral", "Ministral", "Starcoder2", "GPTNeoX", "SmolLM3", "Glm",
        "Ernie4_5", "Exaone4", "Apertus", "Arcee"]


def _model(arch, attn):
    import transformers

    cfg_cls = getattr(transformers, f"{arch}Config")
    model_cls = getattr(transformers, f"{arch.removesuffix('Text')}ForCausalLM")
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=64, pad_token_id=0,
                  attn_implementation=attn)
    return model_cls(cfg).eval()


def _scores(model, cache):
    ids = torch.randint(2, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, cache=cache, max_new_tokens=5, do_sample=False,
                             pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    return torch.stack(out.scores)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", READ)
def test_decode_steps_read_from_codes_match_the_models_attention(arch, attn):
    model = _model(arch, attn)
    codes = _scores(model, QuantizedCache("KQV", 4, seed=1))
    decoded = _scores(model, QuantizedCache("KQV", 4, seed=1, attention="model"))
    torch.testing.assert_close(codes, decoded, rtol=0, atol=1e-5)


@pytest.mark.parametrize("arch,error,match", [
    ("Gemma2", ValueError, "softcap is not supported.*attention='model'"),
    ("GptOss", ValueError, "s_aux is not supported.*attention='model'"),
    ("Bloom", TypeError, "handle on its codes.*attention='model'"),
    ("Mpt", TypeError, "handle on its codes.*attention='model'"),
    ("Qwen3Next", NotImplementedError, "attention layers only.*DynamicCache")])
def test_what_the_code_reading_attention_cannot_do_is_refused(arch, error, match):
    model = _model(arch, "eager")
    with pytest.raises(error, match=match):
        _scores(model, QuantizedCache("KQV", 4, seed=1))


def test_a_hybrid_models_config_is_refused_when_the_cache_is_built():
    # given model.config, the layers whose cache holds recurrent/convolution states are
    # known before any forward pass
    model = _model("Qwen3Next", "eager")
    types = model.config.layer_types
    linear = [i for i, t in enumerate(types) if t == "linear_attention"]
    assert linear
    with pytest.raises(ValueError, match=rf"'qwen3_next' has layers of type 'linear_attention' \(layers "
                                         rf"\{linear}\).*DynamicCache\(config=model.config\)"):
        QuantizedCache("KQV", 4, config=model.config)


def test_a_config_with_layer_types_not_yet_registered_is_refused(monkeypatch):
    # DeepSeek-V4's compressed layer types are registered in transformers' mapping when
    # its modeling module is imported: before that the cache took them for keys-and-values
    # layers (DynamicCache(config) fails there with a KeyError), after it refused them.
    # Removing them from the mapping stands in for "not imported yet".
    from transformers import cache_utils
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

    config = DeepseekV4Config(num_hidden_layers=4, vocab_size=97, hidden_size=64)
    for t in ("compressed_sparse_attention", "heavily_compressed_attention"):
        monkeypatch.delitem(cache_utils.DYNAMIC_LAYER_TYPE_MAPPING, t, raising=False)
    with pytest.raises(ValueError, match=r"'deepseek_v4' has layers of type 'compressed_sparse_attention', "
                                         r"'heavily_compressed_attention', registered when .* imported"):
        QuantizedCache("KQV", 4, config=config)
    with pytest.raises(KeyError):
        DynamicCache(config=config)
    monkeypatch.undo()
    import transformers.models.deepseek_v4.modeling_deepseek_v4  # noqa: F401  (registers them)

    with pytest.raises(ValueError, match=r"attention layers only.*'deepseek_v4'.*'compressed_sparse_attention'"):
        QuantizedCache("KQV", 4, config=config)


class _Replay(DynamicCache):
    """A DynamicCache fed, at every update, the given states at the updated positions
    instead of the model's: the model's own attention over those states."""

    def __init__(self, states):
        super().__init__()
        self.states = states

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        a = self.get_seq_length(layer_idx) if layer_idx < len(self.layers) else 0
        K, V = self.states[layer_idx]
        b = a + key_states.shape[-2]
        return super().update(K[..., a:b, :], V[..., a:b, :], layer_idx, *args, **kwargs)


def _decode_logits(model, cache, steps=5):
    """Prefill a left-padded batch of 2, then greedy steps one token at a time, driven by
    hand: transformers 5.24's generate() with a cache passed in re-feeds MPT the whole
    sequence at every step (its DynamicCache ends with 9 + 10 + ... + 13 = 55 positions and
    the scores differ from generate(use_cache=False) by 0.34), so generate cannot be the
    harness for MPT."""
    ids = torch.randint(2, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0
    out, x = [], ids
    with torch.inference_mode():
        for _ in range(steps):
            logits = model(input_ids=x, attention_mask=mask, cache=cache, use_cache=cache is not None).logits
            out.append(logits[:, -1])
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(nxt)], 1)
            x = nxt if cache is not None else torch.cat([x, nxt], 1)
    return torch.stack(out)


@pytest.mark.parametrize("arch", ["Bloom", "Mpt"])
def test_bloom_and_mpt_attend_the_decoded_cache_with_attention_model(arch):
    model = _model(arch, "eager")                  # neither has an sdpa implementation
    full = _decode_logits(model, None)             # no cache: the whole sequence every step
    dynamic = _decode_logits(model, DynamicCache())
    torch.testing.assert_close(dynamic, full, rtol=0, atol=1e-5)     # the harness itself
    lossless = QuantizedCache("identity", None, attention="model")
    torch.testing.assert_close(_decode_logits(model, lossless), dynamic, rtol=0, atol=1e-5)
    assert lossless.get_seq_length() == 9 + 4
    for keep in (True, False):                     # a kept decoded copy, or decoded on read
        cache = QuantizedCache("KQV", 4, seed=1, attention="model", keep_decoded=keep)
        coded = _decode_logits(model, cache)
        assert cache.get_seq_length() == 9 + 4
        # the model's own attention over the cache's decoded keys and values (each token
        # coded before it is attended) gives these scores bit for bit ...
        states = [(lay.keys.clone(), lay.values.clone()) for lay in cache.layers]
        assert torch.equal(_decode_logits(model, _Replay(states)), coded)
        # ... and those states are the 4-bit codes' (not the raw states): the scores move
        assert (coded - dynamic).abs().max() > 1e-3
