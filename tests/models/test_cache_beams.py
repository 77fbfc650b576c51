"""Batch rows of a QuantizedCache: beam search's reorder_cache, batch_repeat_interleave,
batch_select_indices. Each sequence's codes are its own, so the cache of selected rows is
the cache those sequences would have built alone; schemes coded in numpy arrays refuse."""

import sys

import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import code_attention
from kvstats.models.peers import held_bytes

CASES = [("KQV", 4, {}), ("QKQV", 3, {"window": 2}), ("KQV", 4, {"keep_decoded": True}),
         ("KQV", 4, {"attention": "model"}), ("kivi", 2, {"group_size": 4, "window": 1}),
         ("qjl", 3, {"group_size": 4, "n_outliers": 2})]


def _kv(b, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 2, n, 64, generator=g), torch.randn(b, 2, n, 64, generator=g)


@pytest.mark.parametrize("name,bits,params", CASES)
@pytest.mark.parametrize("how", ["reorder", "repeat", "select", "select-mask"])
def test_selected_rows_are_the_cache_of_those_rows(name, bits, params, how):
    # a prefill and decode steps on 3 rows, then rows selected; the same rows coded from
    # the start in another cache: the same codes, tails and attention, after more steps
    k, v = _kv(3, 16, seed=0)
    a = QuantizedCache(name, bits, seed=4, **params)
    a.update(k[:, :, :11], v[:, :, :11], layer_idx=0)
    for t in range(11, 13):
        a.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    rows = {"reorder": [2, 0, 0, 1], "repeat": [0, 0, 1, 1, 2, 2], "select": [2, 0],
            "select-mask": [0, 2]}[how]
    if how == "reorder":
        a.reorder_cache(torch.tensor(rows))
    elif how == "repeat":
        a.batch_repeat_interleave(2)
    elif how == "select":
        a.batch_select_indices(torch.tensor(rows))
    else:
        a.batch_select_indices(torch.tensor([True, False, True]))
    b = QuantizedCache(name, bits, seed=4, **params)
    b.update(k[rows, :, :11], v[rows, :, :11], layer_idx=0)
    for t in range(11, 13):
        b.update(k[rows, :, t:t + 1], v[rows, :, t:t + 1], layer_idx=0)
    kn, vn = _kv(len(rows), 4, seed=1)
    for t in range(4):
        a.update(kn[:, :, t:t + 1], vn[:, :, t:t + 1], layer_idx=0)
        b.update(kn[:, :, t:t + 1], vn[:, :, t:t + 1], layer_idx=0)
    la, lb = a.layers[0], b.layers[0]
    for n, buf in lb.store.items():
        assert torch.equal(la.store[n].view(), buf.view()), n
    for n, buf in lb.decoded.items():
        assert torch.equal(la.decoded[n].view(), buf.view()), n
    assert torch.equal(la.tail_keys, lb.tail_keys) and a.get_seq_length() == b.get_seq_length() == 17
    if a.attention == "codes":
        q = torch.randn(len(rows), 4, 1, 64, generator=torch.Generator().manual_seed(2))
        assert torch.equal(code_attention(q, la, None, 0.125, 2), code_attention(q, lb, None, 0.125, 2))
    rep = a.memory_report()
    assert held_bytes(a) == rep["held_bytes"] + rep["fixed_bytes"]
    assert rep["stored_bytes"] == b.memory_report()["stored_bytes"]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("kivi", 2, {"group_size": 4})])
def test_beam_search_reads_codes_as_the_decoded_path(attn, name, bits, params):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _tiny_llama import tiny_llama

    model = tiny_llama(vocab=97, hidden=96, layers=2, heads=6, kv_heads=2, head_dim=32, max_positions=128,
                       attn=attn, seed=0)
    ids = torch.randint(2, 97, (2, 8), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0

    def run(**kw):
        cache = QuantizedCache(name, bits, seed=1, **params, **kw)
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=mask, cache=cache, max_new_tokens=6, num_beams=3,
                                 num_return_sequences=2, do_sample=False, pad_token_id=0,
                                 output_scores=True, return_dict_in_generate=True)
        return out, cache

    (codes, c1), (decoded, _) = run(), run(attention="model")
    assert torch.equal(codes.sequences, decoded.sequences)
    torch.testing.assert_close(codes.sequences_scores, decoded.sequences_scores, rtol=0, atol=1e-5)
    rep = c1.memory_report()
    assert held_bytes(c1) == rep["held_bytes"] + rep["fixed_bytes"]


def test_numpy_coded_schemes_refuse_row_selection():
    k, v = _kv(2, 5, seed=0)
    for name, bits, params in (("q4_0", None, {}), ("identity", None, {}), ("KQV", 4, {"rotation": "haar"})):
        cache = QuantizedCache(name, bits, **params)
        cache.update(k, v, layer_idx=0)
        with pytest.raises(NotImplementedError, match=f"beam search reordering for '{name}'.*numpy arrays"):
            cache.reorder_cache(torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"repeats must be an integer in \[1, inf\]; received 0"):
        cache = QuantizedCache("KQV", 4)
        cache.update(k, v, layer_idx=0)
        cache.batch_repeat_interleave(0)


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("QKQV", 3, {"keep_decoded": True}),
                                              ("K4V2", None, {"attention": "model"})])
def test_a_cropped_cache_is_the_cache_of_the_kept_tokens(name, bits, params):
    # window 0, per-vector codes: cropping r tokens gives the cache that never saw them
    k, v = _kv(2, 20, seed=5)
    a = QuantizedCache(name, bits, seed=4, **params)
    b = QuantizedCache(name, bits, seed=4, **params)
    assert a.is_croppable
    a.update(k[:, :, :12], v[:, :, :12], layer_idx=0)
    b.update(k[:, :, :12], v[:, :, :12], layer_idx=0)
    for t in range(12, 16):
        a.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    a.crop(0)
    a.crop(-4)
    assert a.get_seq_length() == 12
    for t in range(16, 20):  # both go on with the same new tokens
        a.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
        b.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    la, lb = a.layers[0], b.layers[0]
    for n, buf in lb.store.items():
        assert torch.equal(la.store[n].view(), buf.view()), n
    for n, buf in lb.decoded.items():
        assert torch.equal(la.decoded[n].view(), buf.view()), n
    assert a.memory_report()["stored_bytes"] == b.memory_report()["stored_bytes"]
    with pytest.raises(ValueError, match=r"tokens_to_remove must be an integer in \[-inf, 0\]; received 3"):
        a.crop(3)
    with pytest.raises(ValueError, match="tokens_to_remove must remove at most the 16 cached tokens; received -17"):
        a.crop(-17)


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {"window": 2}), ("kivi", 2, {"group_size": 4}),
                                              ("qjl", 3, {"group_size": 4}), ("q4_0", None, {})])
def test_what_cannot_be_cropped_says_why(name, bits, params):
    cache = QuantizedCache(name, bits, **params)
    cache.update(*_kv(1, 9, seed=0), layer_idx=0)
    assert not cache.is_croppable
    with pytest.raises(NotImplementedError, match=f"can be cropped only with window=0.*received '{name}'"):
        cache.crop(-1)
    # crop(0), transformers' "back to the minimal working size", removes nothing: allowed
    before = [t.clone() for t in cache.layers[0].dequantized()]
    cache.crop(0)
    assert cache.get_seq_length() == 9
    assert all(torch.equal(a, b) for a, b in zip(cache.layers[0].dequantized(), before))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_assisted_decoding_reads_codes_as_the_decoded_path(attn):
    # a draft model proposes tokens, the target verifies them and its cache is cropped
    # back to the accepted ones; the target reads its codes (several queries per
    # verification step: the model's own attention over the transient decode)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _tiny_llama import tiny_llama

    model = tiny_llama(vocab=97, hidden=96, layers=2, heads=6, kv_heads=2, head_dim=32, max_positions=128,
                       attn=attn, seed=0)
    draft = tiny_llama(vocab=97, hidden=48, layers=1, heads=3, kv_heads=1, head_dim=16, max_positions=128,
                       attn=attn, seed=1)
    ids = torch.randint(2, 97, (1, 8), generator=torch.Generator().manual_seed(3))

    def run(assisted, **kw):
        cache = QuantizedCache("KQV", 4, seed=1, **kw)
        extra = {"assistant_model": draft} if assisted else {}
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), cache=cache, max_new_tokens=10,
                                 do_sample=False, pad_token_id=0, **extra)
        return out, cache

    plain, _ = run(False)
    codes, c1 = run(True)
    decoded, _ = run(True, attention="model")
    assert torch.equal(codes, decoded) and torch.equal(codes, plain)
    rep = c1.memory_report()
    assert held_bytes(c1) == rep["held_bytes"] + rep["fixed_bytes"]
    assert c1.get_seq_length() == codes.shape[1] - 1
