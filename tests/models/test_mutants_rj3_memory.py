"""memory_report counts that mutants changed unseen (referee RJ3 F6).

The expected values are hand counts from the cache's shapes (a batch of 2 stores twice one
sequence's bytes; a sliding layer holds its sequence less its dropped tokens) or an
independent walk of the object graph (``gc.get_referents``), not the cache's own accounting.
m-fp16-kk (V's shape counted as K's in fp16_bytes_per_token) is not tested: the cache refuses
values whose heads or head dimension differ from the keys' (checked below), so K's and V's
shapes are always equal and the mutant is equivalent.
"""

import pytest
import torch
import transformers

from kvstats.models import QuantizedCache

# the independent object-graph walk of the cache memory tests (gc.get_referents)
from test_cache_memory21 import _reachable  # noqa: E402


def _kqv(batch):
    torch.manual_seed(0)
    cache = QuantizedCache("KQV", 4, window=4)   # 3 heads of 64: 6 coded tokens, 4 in the tail
    cache.update(torch.randn(batch, 3, 10, 64), torch.randn(batch, 3, 10, 64), layer_idx=0)
    return cache


@pytest.mark.parametrize("batch", [1, 2])
def test_per_token_bytes_are_per_sequence_of_the_batch(batch):
    """m-tokens-batch: per token of one sequence, whatever the batch. Hand count per sequence:
    6 tokens x 3 heads x (34 + 36) bytes of K and V codes + 4 tokens x 3 x 64 x 2 sides x 4
    bytes of float32 tail = 7404 bytes over 10 tokens; the batch stores it ``batch`` times."""
    rep = _kqv(batch).memory_report()
    assert rep["stored_bytes"] == batch * (6 * 3 * (34 + 36) + 4 * 3 * 64 * 2 * 4)
    assert rep["bytes_per_token"] == pytest.approx(740.4, rel=1e-12)
    assert rep["ratio_to_fp16"] == pytest.approx(740.4 / (2 * 3 * 64 * 2), rel=1e-12)


def test_held_to_stored_is_held_over_stored(sliding_kivi):
    """m-held-swap: held bytes (with the buffers' unused capacity) over stored bytes, so at
    least 1 (the documented direction)."""
    rep = sliding_kivi.memory_report()
    assert rep["held_bytes"] > rep["stored_bytes"]       # slack: the ratio is not 1 either way
    assert rep["held_to_stored"] == pytest.approx(rep["held_bytes"] / rep["stored_bytes"], rel=1e-12)
    assert rep["held_to_stored"] > 1


def _two_layers(name, bits, **params):
    torch.manual_seed(0)
    cache = QuantizedCache(name, bits, **params)
    for layer in (0, 1):
        cache.update(torch.randn(1, 3, 16, 64), torch.randn(1, 3, 16, 64), layer_idx=layer)
    for _ in range(5):
        for layer in (0, 1):
            cache.update(torch.randn(1, 3, 1, 64), torch.randn(1, 3, 1, 64), layer_idx=layer)
    return cache


@pytest.mark.parametrize("name,bits,params", [
    ("KQV", 4, {}), ("KQV", 4, {"keep_decoded": True}), ("QKQV", 3, {"rotation": "haar"}),
    ("q4_0", None, {}), ("kivi", 2, {"group_size": 4}), ("qjl", 3, {"group_size": 4})])
def test_held_and_fixed_bytes_are_the_memory_the_layers_reach(name, bits, params):
    """m-arr-dedup, m-storage-view, m-seedseq: held_bytes + fixed_bytes is the memory of
    every array and tensor the layers reference, each block once (two layers share the
    Hadamard matrix and codebooks), as an independent gc walk finds it."""
    cache = _two_layers(name, bits, **params)
    _reachable(cache.layers)      # once first: reading vars() creates an object's __dict__ once
    rep = cache.memory_report()
    assert rep["held_bytes"] + rep["fixed_bytes"] == _reachable(cache.layers)[0]


def test_decoded_copy_bytes_are_what_keeping_it_adds():
    """m-decoded: the same cache (seed, states) with and without a decoded copy differs in
    held bytes by exactly the copy."""
    kept, not_kept = _two_layers("KQV", 4, keep_decoded=True), _two_layers("KQV", 4)
    a, b = kept.memory_report(), not_kept.memory_report()
    assert a["decoded_copy_bytes"] > 0 and b["decoded_copy_bytes"] == 0
    assert a["decoded_copy_bytes"] == a["held_bytes"] - b["held_bytes"]


@pytest.fixture
def sliding_kivi():
    cfg = transformers.MistralConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=6)
    torch.manual_seed(0)
    cache = QuantizedCache("kivi", 2, seed=1, config=cfg, group_size=4)
    cache.update(torch.randn(1, 2, 9, 16), torch.randn(1, 2, 9, 16), layer_idx=0)
    for _ in range(30):
        cache.update(torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16), layer_idx=0)
    return cache


def test_uncoded_share_counts_only_the_tokens_the_sliding_layer_holds(sliding_kivi):
    """m-heldtok-dropped: a sliding-window layer (window 6) after 39 tokens has dropped
    most; kivi's unfilled group of 4 leaves tokens uncoded. The share's denominator is
    the tokens held: the sequence less the dropped ones (hand count from get_seq_length)."""
    cache = sliding_kivi
    rep = cache.memory_report()
    held = cache.get_seq_length() - rep["dropped_tokens"]
    assert cache.get_seq_length() == 39 and rep["dropped_tokens"] > 0 and rep["uncoded_tokens"] > 0
    assert held < 39
    assert rep["uncoded_share"] == pytest.approx(rep["uncoded_tokens"] / held, rel=1e-12)
    assert 0 < rep["uncoded_share"] <= 1


def test_chunks_held_as_objects_count_their_arrays_once():
    """m-obj-owndata: klt's chunks are Python objects over numpy arrays; their held bytes are
    the arrays' memory once plus the objects' headers, as an independent gc walk counts them
    (the mutant counts an owning array's data a second time, in its object size)."""
    torch.manual_seed(0)
    cache = QuantizedCache("klt", 3, group_size=4)
    cache.update(torch.randn(1, 4, 16, 64), torch.randn(1, 4, 16, 64), layer_idx=0)
    for _ in range(12):
        cache.update(torch.randn(1, 4, 1, 64), torch.randn(1, 4, 1, 64), layer_idx=0)
    chunks = cache.layers[0].chunks
    assert chunks.objects is not None
    _reachable(chunks.objects)   # once first: reading vars() creates an object's __dict__ once
    assert chunks.nbytes() == sum(_reachable(chunks.objects)) + chunks.sizes_buf.nbytes()


def test_values_must_have_the_keys_shape():
    """Why m-fp16-kk is equivalent: V with another head dimension is refused."""
    cache = QuantizedCache("KQV", 4)
    with pytest.raises(ValueError, match="value_states must have"):
        cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 32), layer_idx=0)
