"""The quantized cache on models whose last layers reuse an earlier layer's keys and values
(transformers' ``num_kv_shared_layers``: Gemma3n, Gemma 4 and Gemma 4 unified, tiny random
models).

A reusing layer never updates the cache: it attends what the last non-reusing layer of its
type (its producer) got back from ``update`` — on the codes path a handle on the
producer's codes, read with the reusing layer's own queries. Checked here: decode steps
give the logits of the model's own attention over the cache's decoded states (a
``DynamicCache(config=...)`` replaying them), both attention paths, sliding-window drops
included; the cache holds, and its memory report counts, each producer's states once; and
a consumer outside the model that indexes the shared states (Gemma 4's assistant drafting)
is refused on the codes path with a message that names the way out. MistralLarge4, which
shares a compressed latent between layers, is refused (by its config, or by the latent's
shape).
"""

import pytest
import torch
import transformers
from transformers import DynamicCache

from kvstats.models import QuantizedCache

pytestmark = pytest.mark.slow

VOCAB = 97
ARCHS = ["Gemma3n", "Gemma4", "Gemma4Unified"]


def _model(arch, attn, window):
    """Four layers (sliding, full, sliding, full), the last two reusing the first two's
    states; Gemma 4's (and Gemma 4 unified's) full-attention layers have their own head
    dimension (32) and keys that double as values (``attention_k_eq_v``)."""
    gemma4 = dict(global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1)
    own = {"Gemma3n": dict(laurel_rank=4, altup_num_inputs=2), "Gemma4": gemma4, "Gemma4Unified": gemma4}[arch]
    torch.manual_seed(0)
    config = getattr(transformers, f"{arch}TextConfig")(
        vocab_size=VOCAB, vocab_size_per_layer_input=VOCAB, hidden_size=64, hidden_size_per_layer_input=8,
        intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=64, layer_types=["sliding_attention", "full_attention"] * 2,
        sliding_window=window, num_kv_shared_layers=2, pad_token_id=0, attn_implementation=attn, **own)
    model = getattr(transformers, f"{arch}ForCausalLM")(config).eval()
    assert config.kv_sharing_modes == ["store", "store", "reuse", "reuse"]
    return model


def _prompt():
    ids = torch.randint(2, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0       # a left-padded row
    return ids, mask


def _decode_logits(model, cache, steps):
    """Prefill, then greedy steps one token at a time: each step's last-position logits."""
    x, mask = _prompt()
    out = []
    with torch.inference_mode():
        for _ in range(steps):
            logits = model(input_ids=x, attention_mask=mask, cache=cache, use_cache=True).logits[:, -1]
            out.append(logits)
            x = logits.argmax(-1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(x)], 1)
    return torch.stack(out)


class _Replay(DynamicCache):
    """transformers' own cache fed, at every update, the given states at the updated
    positions instead of the model's: the model's attention over those states."""

    def __init__(self, states, config):
        super().__init__(config=config)
        self.states = states

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        a = self.get_seq_length(layer_idx)
        K, V = self.states[layer_idx]
        b = a + key_states.shape[-2]
        return super().update(K[..., a:b, :], V[..., a:b, :], layer_idx, *args, **kwargs)


MODES = [pytest.param(dict(), id="codes"), pytest.param(dict(keep_decoded=True), id="codes-decoded-copy"),
         pytest.param(dict(attention="model"), id="model"),
         pytest.param(dict(attention="model", keep_decoded=False), id="model-decoded-on-read")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ARCHS)
def test_reusing_layers_attend_the_producers_decoded_states(arch, attn, mode):
    # a sliding window of 4 over 9 + 19 tokens: the sliding producer drops coded tokens
    steps, model = 20, _model(arch, attn, window=4)
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config, **mode)
    coded = _decode_logits(model, cache, steps)
    assert cache.memory_report()["dropped_tokens"] > 0
    # The states to replay: the same codes (per-token, seeded per layer and head) from a
    # cache that drops nothing, decoded, read after the run.
    keeping = QuantizedCache("KQV", 4, seed=1, **mode)
    torch.testing.assert_close(_decode_logits(model, keeping, steps), coded, rtol=0, atol=1e-5)
    states = {i: (lay.keys.clone(), lay.values.clone()) for i, lay in enumerate(keeping.layers)}
    assert sorted(states) == [0, 1] and states[0][0].shape[-2] == 9 + steps - 1
    replayed = _decode_logits(model, _Replay(states, model.config), steps)
    torch.testing.assert_close(coded, replayed, rtol=0, atol=1e-5)
    # and those states are the 4-bit codes' (not the model's raw states): the logits move
    dynamic = _decode_logits(model, DynamicCache(config=model.config), steps)
    assert (coded - dynamic).abs().max() > 1e-3


@pytest.mark.parametrize("attention", ["codes", "model"])
@pytest.mark.parametrize("arch", ARCHS)
def test_each_producers_states_are_held_and_counted_once(arch, attention):
    model = _model(arch, "eager", window=512)       # no drops: transformers' cache holds every token
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config, attention=attention)
    dynamic = DynamicCache(config=model.config)
    ids, mask = _prompt()
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask, cache=cache)
        model(input_ids=ids, attention_mask=mask, cache=dynamic)
    producers = [i for i, m in enumerate(model.config.kv_sharing_modes) if m != "reuse"]
    assert [i for i, lay in enumerate(cache.layers) if lay.is_initialized] == producers
    # what transformers' cache of the same model holds per token, at 2 bytes a number
    tokens = ids.numel()
    fp16 = sum(2 * (lay.keys.numel() + lay.values.numel()) for lay in dynamic.layers
               if getattr(lay, "keys", None) is not None and lay.keys.numel()) / tokens
    report = cache.memory_report()
    assert report["fp16_bytes_per_token"] == fp16
    assert report["seq_length"] == ids.shape[1]
    # stored bytes: each producer's codes once (one layer's bytes, for its head shape)
    alone = 0
    for i in producers:
        solo = QuantizedCache("KQV", 4, seed=1, attention=attention)
        k = torch.randn(*cache.layers[i].tail_keys.shape[:2], ids.shape[1], cache.layers[i].tail_keys.shape[-1])
        solo.update(k, k.clone(), layer_idx=0)
        alone += solo.nbytes()
    assert report["stored_bytes"] == alone


def _assistant(target, arch):
    """A tiny Gemma 4 (or Gemma 4 unified) drafter over the target's shared states (every
    layer reuses them)."""
    torch.manual_seed(2)
    text = getattr(transformers, f"{arch}TextConfig")(
        vocab_size=VOCAB, vocab_size_per_layer_input=0, hidden_size=32, hidden_size_per_layer_input=0,
        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        global_head_dim=32, max_position_embeddings=64, layer_types=["sliding_attention", "full_attention"],
        sliding_window=target.config.sliding_window, num_kv_shared_layers=2, pad_token_id=0,
        attn_implementation="eager")
    config = getattr(transformers, f"{arch}AssistantConfig")(text_config=text, backbone_hidden_size=64)
    assistant = getattr(transformers, f"{arch}AssistantForCausalLM")(config).eval()
    assistant.generation_config.num_assistant_tokens = 3
    return assistant


@pytest.mark.parametrize("arch", ["Gemma4", "Gemma4Unified"])
def test_gemma4_assisted_drafting_reads_decoded_states_and_is_refused_on_the_codes_path(arch):
    target = _model(arch, "eager", window=512)
    assistant = _assistant(target, arch)
    ids = _prompt()[0][:1]

    def generate(cache, **kw):
        with torch.inference_mode():
            return target.generate(ids, cache=cache, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                                   pad_token_id=0, **kw)

    # attention="model": the drafter reads the decoded states; greedy assisted decoding
    # verifies every draft, so it emits the tokens of plain greedy decoding with the cache
    plain = generate(QuantizedCache("KQV", 4, seed=1, config=target.config, attention="model"))
    assisted = generate(QuantizedCache("KQV", 4, seed=1, config=target.config, attention="model"),
                        assistant_model=assistant)
    assert torch.equal(assisted, plain)
    with pytest.raises(TypeError, match="handle on its codes.*indexed.*attention='model'"):
        generate(QuantizedCache("KQV", 4, seed=1, config=target.config), assistant_model=assistant)


def test_mistral_large4_is_refused_with_and_without_its_config():
    # Its layers share a latent (kv_source_layers) and cache it compressed, beside a rope key,
    # with a sparse-attention indexer's keys: neither is keys and values a scheme codes.
    from transformers.models.mistral_large4.configuration_mistral_large4 import MistralLarge4TextConfig
    from transformers.models.mistral_large4.modeling_mistral_large4 import MistralLarge4TextModel

    torch.manual_seed(0)
    config = MistralLarge4TextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, kv_lora_rank=32,
        qk_rope_head_dim=16, v_head_dim=16, qk_nope_head_dim=16, index_topk=8, index_head_dim=16, index_n_heads=2,
        max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        kv_source_layers=[0, 0, 2, 2], no_rope_layers=[1] * 4, indexer_types=["full", "shared"] * 2,
        pad_token_id=0, attn_implementation="eager")
    assert config.kv_sharing_modes == ["store", "reuse", "store", "reuse"]
    with pytest.raises(ValueError, match=r"'mistral_large4_text' has layers of type 'indexed_attention' "
                                         r"\(layers \[0, 2\]\).*DynamicCache\(config=model.config\)"):
        QuantizedCache("KQV", 4, config=config)
    model = MistralLarge4TextModel(config).eval()
    ids = _prompt()[0]
    with torch.inference_mode():
        model(input_ids=ids, cache=DynamicCache(config=config))       # the model itself runs
        for attention in ("codes", "model"):
            with pytest.raises(ValueError, match=r"values \(2, 1, 9, 16\).*compressed latent.*DynamicCache"):
                model(input_ids=ids, cache=QuantizedCache("KQV", 4, attention=attention))
