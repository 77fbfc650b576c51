"""QuantizedCache on a model that runs its middle layers in loops (transformers' Dory,
tiny random models): the loops share the recurrent layers' keys and values.

``recurrent_kv_cache_mode="per_loop"``: each loop past the first writes to copies of the
recurrent layers, cache layers after the model's own. Given the config, the cache makes
a copy of a sliding-window layer drop its old tokens as that layer does (the model sizes
one mask per layer type from the first such layer): checked against the same cache
without the config, which keeps every token (the mask hides the old ones), and against
the model's own attention over the decoded states (``DynamicCache(config)`` replaying
them). ``"last_loop"``: the earlier loops read the last loop's held states, cut to the
window, under the mask of a cache holding just the window; a QuantizedCache holds a few
tokens more before a drop, so that mode is refused with sliding-window layers in the
recurrent section, and works without them. transformers 5.25 reads that past through the
model's DoryPastReader, which wraps its own layer types only: refused there altogether.
"""

import pytest
import torch
import transformers

from kvstats.models import QuantizedCache
from kvstats.models.cache import _reads_past_through_wrapper

from test_cache_shared_kv import VOCAB, _decode_logits, _Replay

pytestmark = pytest.mark.slow

W = 4


def _model(mode, layer_types, attn="eager"):
    """Six layers: two input layers, two recurrent ones run three times, two output ones."""
    torch.manual_seed(0)
    config = transformers.DoryConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, sliding_window=W, layer_types=layer_types,
        n_input_layers=2, n_output_layers=2, n_recurrent_loops=3, recurrent_kv_cache_mode=mode, pad_token_id=0,
        attn_implementation=attn)
    return transformers.DoryForCausalLM(config).eval()


MIXED = ["sliding_attention", "full_attention"] * 3
MODES = [pytest.param({}, id="codes"), pytest.param({"attention": "model"}, id="model")]


def _check_against_references(model, cache, mode, steps):
    got = _decode_logits(model, cache, steps)
    keeping = QuantizedCache("KQV", 4, seed=1, **mode)
    torch.testing.assert_close(_decode_logits(model, keeping, steps), got, rtol=0, atol=1e-5)
    states = {i: (lay.keys.clone(), lay.values.clone()) for i, lay in enumerate(keeping.layers)}
    replayed = _decode_logits(model, _Replay(states, model.config), steps)
    torch.testing.assert_close(got, replayed, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_per_loop_copies_of_sliding_layers_drop_as_the_layers_they_copy(attn, mode):
    model, steps = _model("per_loop", MIXED, attn), 20
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config, **mode)
    _check_against_references(model, cache, mode, steps)
    # layers 6-9: the second and third loops' copies of recurrent layers 2 (sliding) and 3
    assert [lay.sliding_window for lay in cache.layers] == [W, None] * 5
    assert all(lay.n_dropped > 0 for lay in cache.layers[::2])
    assert cache.get_max_length(8) == W


LAST_LOOP_ALLOWED = ["sliding_attention", "sliding_attention", "full_attention", "full_attention",
                     "sliding_attention", "full_attention"]


@pytest.mark.skipif(_reads_past_through_wrapper(), reason="this transformers reads the past through DoryPastReader")
@pytest.mark.parametrize("mode", MODES)
def test_last_loop_mode_works_without_sliding_recurrent_layers_and_is_refused_with_them(mode):
    model = _model("last_loop", LAST_LOOP_ALLOWED)
    cache = QuantizedCache("KQV", 4, seed=1, config=model.config, **mode)
    _check_against_references(model, cache, mode, 20)
    assert len(cache.layers) == 6 and cache.layers[0].n_dropped > 0
    with pytest.raises(ValueError, match=r"recurrent_kv_cache_mode='last_loop' with sliding-window layers in the "
                                         r"recurrent section \(layers \[2\]\).*'per_loop'"):
        QuantizedCache("KQV", 4, config=_model("last_loop", MIXED).config, **mode)


@pytest.mark.skipif(not _reads_past_through_wrapper(), reason="this transformers reads each layer's keys and values")
@pytest.mark.parametrize("mode", MODES)
def test_last_loop_mode_is_refused_where_the_model_reads_its_past_through_its_own_wrapper(mode):
    # transformers 5.25's Dory wraps the recurrent layers in DoryPastReader, which takes its own
    # layer types only; a lazily built cache's earlier loops write copies instead (a size error
    # inside the model at three loops, another attention at two)
    for types in (LAST_LOOP_ALLOWED, MIXED):
        with pytest.raises(ValueError, match=r"recurrent_kv_cache_mode='last_loop' with transformers .*"
                                             r"DoryPastReader.*'per_loop'"):
            QuantizedCache("KQV", 4, config=_model("last_loop", types).config, **mode)
    # the refusal is for that mode only: per_loop with the same layers builds
    QuantizedCache("KQV", 4, config=_model("per_loop", LAST_LOOP_ALLOWED).config, **mode)
