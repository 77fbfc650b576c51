"""QuantizedCache refuses what it cannot hold: states of another batch, head count or head
dimension after the first update, values shaped unlike the keys, non-float or non-4-D
states, a kivi residual (the window plays it), and — one layer down — buffers and loops
handed arrays they would read or write past. Each used to be taken silently (a batch-2
update broadcast the batch-1 codes into both rows; after a decode step the compiled
encoder wrote past the buffers' rows: a crash or corrupted memory)."""

import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import GrowingBuffer, code_attention


def _kv(b, h, n, d=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, n, d, generator=g), torch.randn(b, h, n, d, generator=g)


def _kernel():
    from kvstats.models.lut_kernel import kernel

    k = kernel()
    if k is None:
        pytest.skip("no C compiler here: the compiled loops are not used")
    return k


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("QKQV", 3, {"attention": "model"}),
                                              ("kivi", 2, {"group_size": 4}), ("q4_0", None, {})])
@pytest.mark.parametrize("shape", [(2, 2, 1, 64), (1, 3, 1, 64), (1, 2, 1, 32), (1, 2, 9, 32)],
                         ids=["batch", "heads", "dim", "dim-in-window"])
def test_states_of_another_batch_heads_or_dim_are_refused(name, bits, params, shape):
    # a prefill and one decode step (the code buffers then have spare capacity: the case
    # that wrote past them), then states of another shape: a ValueError naming
    # key_states, and the layer as it was
    cache = QuantizedCache(name, bits, seed=0, window=8 if shape[2] == 9 else 0, **params)
    k, v = _kv(1, 2, 9)
    cache.update(k[:, :, :8], v[:, :, :8], layer_idx=0)
    cache.update(k[:, :, 8:], v[:, :, 8:], layer_idx=0)
    before = cache.memory_report()
    bad = torch.randn(shape)
    with pytest.raises(ValueError, match=r"key_states must have this layer's \(batch, heads, dim\) = \(1, 2, 64\)"):
        cache.update(bad, bad, layer_idx=0)
    assert cache.memory_report() == before and cache.get_seq_length() == 9


def test_states_that_are_not_4d_float_or_values_unlike_keys_are_refused():
    k, v = _kv(1, 2, 5)
    with pytest.raises(ValueError, match=r"key_states must be a floating-point tensor \(batch, heads, tokens, dim\); "
                                         r"received torch.float32 tensor of shape \(2, 5, 64\)"):
        QuantizedCache("KQV", 4).update(k[0], v[0], layer_idx=0)
    with pytest.raises(ValueError, match="value_states must be a floating-point tensor.*torch.int64"):
        QuantizedCache("KQV", 4).update(k, v.long(), layer_idx=0)
    with pytest.raises(ValueError, match=r"value_states must have the batch, heads, tokens.*values \(1, 2, 4, 64\)"):
        QuantizedCache("KQV", 4).update(k, v[:, :, :4], layer_idx=0)


def test_a_kivi_residual_is_refused_with_the_window_to_use():
    # The cache's window is KIVI's residual; a residual passed as a scheme parameter was
    # silently set to 0 (no full-precision tokens at all).
    with pytest.raises(ValueError, match=r"residual must be 0.*received residual=32.*window=32"):
        QuantizedCache("kivi", 2, residual=32)
    cache = QuantizedCache("kivi", 2, residual=0, window=4, group_size=4)
    cache.update(*_kv(1, 2, 10), layer_idx=0)
    assert cache.layers[0].n_coded == 4 and cache.scheme_params["residual"] == 0
    with pytest.raises(ValueError, match=r"received 'code' \(did you mean 'codes'\?\)"):
        QuantizedCache("KQV", 4, attention="code")


def test_a_growing_buffer_refuses_tokens_of_another_shape():
    b = GrowingBuffer()
    b.append(torch.zeros(1, 2, 5, 3))
    for bad in (torch.zeros(2, 2, 1, 3), torch.zeros(1, 3, 1, 3), torch.zeros(1, 2, 1, 4),
                torch.zeros(1, 2, 1, 3, dtype=torch.float16)):
        with pytest.raises(ValueError, match=r"tokens must have the buffer's \(batch, heads, ·, \*shape\)"):
            b.append(bad)
    assert b.view().shape == (1, 2, 5, 3)


def test_a_query_of_another_batch_is_refused():
    handle, _ = QuantizedCache("KQV", 4).update(*_kv(2, 2, 5), layer_idx=0)
    with pytest.raises(ValueError, match="query must have the layer's batch of 2 sequences"):
        code_attention(torch.randn(1, 4, 1, 64), handle.layer, None, 0.125, 2)


def test_the_compiled_loops_refuse_arrays_they_would_read_past():
    kern = _kernel()
    k, _ = _kv(1, 2, 6)
    cache = QuantizedCache("KV", 4)
    handle, _ = cache.update(k, k, layer_idx=0)
    layer = handle.layer
    coder = layer.key_coder
    codes = layer.store["k_codes"].view().reshape(2, 6, -1)
    norms = layer.store["k_norms"].view().reshape(2, 6)
    q, w = torch.randn(2, 3, 64), torch.softmax(torch.randn(2, 3, 6), -1)
    ok = kern.scores(q, codes, 6, norms, coder.centroids, 4)
    assert ok.shape == (2, 3, 6)
    with pytest.raises(ValueError, match=r"codes must be uint8 \(2, >= 7, 32\)"):
        kern.scores(q, codes, 7, norms, coder.centroids, 4)       # more tokens than held
    with pytest.raises(ValueError, match=r"codes must be uint8 \(3, >= 6, 32\)"):
        kern.scores(torch.randn(3, 3, 64), codes, 6, norms, coder.centroids, 4)  # more rows
    with pytest.raises(ValueError, match=r"scale must be float16 \(2, >= 6\)"):
        kern.scores(q, codes, 6, norms[:1], coder.centroids, 4)
    with pytest.raises(ValueError, match=r"table must be float32 \(16,\)"):
        kern.scores(q, codes, 6, norms, coder.centroids[:8], 4)  # codes index 16 values
    with pytest.raises(ValueError, match=r"bits must be an integer in \[1, 8\]; received 9"):
        kern.accumulate(w, codes, norms, 1.0, coder.centroids, 9, 64)
    with pytest.raises(ValueError, match=r"dense must be float32 \(2, >= 6, 64\)"):
        kern.accumulate(w, codes, norms, 1.0, coder.centroids, 4, 64, dense=torch.zeros(1, 6, 64))


def test_the_compiled_encoder_refuses_buffers_of_another_batch():
    kern = _kernel()
    k, _ = _kv(1, 2, 6)
    cache = QuantizedCache("KV", 4)
    cache.update(k, k, layer_idx=0)
    cache.update(k[:, :, :1], k[:, :, :1], layer_idx=0)     # spare capacity now
    layer = cache.layers[0]
    into = layer._sides["k"]
    with pytest.raises(ValueError, match=r"tokens must have the buffer's \(batch, heads"):
        kern.encode(layer.key_coder, torch.randn(2, 2, 1, 64), into=into)
    into["norms"].append(torch.zeros(1, 2, 1, dtype=torch.float16))  # out of step with the codes
    with pytest.raises(ValueError, match="into must hold buffers of equal length and capacity"):
        kern.encode(layer.key_coder, torch.randn(1, 2, 1, 64), into=into)


@pytest.mark.parametrize("n", [1, 20], ids=["decode-step", "block"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_refused_block_leaves_the_layer_as_it_was(n, keep):
    # Values whose norm is beyond float16 were refused after the keys were coded: the keys'
    # buffers used to keep the refused tokens (keys and values then out of step by n
    # tokens, the bytes miscounted). Now the coders' storable limits refuse them before
    # anything is coded, and the layer reads as a cache that never saw the refused block.
    k, v = _kv(1, 2, 10)
    ok = QuantizedCache("KQV", 4, seed=0, keep_decoded=keep)
    hit = QuantizedCache("KQV", 4, seed=0, keep_decoded=keep)
    for c in (ok, hit):
        c.update(k[:, :, :8], v[:, :, :8], layer_idx=0)
    before = hit.memory_report()
    bad_v = torch.randn(1, 2, n, 64)
    bad_v[0, 1, -1] = 1e5
    with pytest.raises(ValueError, match="value_states must have vector norms .* at most 65504.*nothing was cached"):
        hit.update(torch.randn(1, 2, n, 64), bad_v, layer_idx=0)
    layer = hit.layers[0]
    assert {b.n for b in (*layer.store.values(), *layer.decoded.values())} == {8}
    after = hit.memory_report()
    assert after["stored_bytes"] == before["stored_bytes"] and after["seq_length"] == 8
    for c in (ok, hit):
        c.update(k[:, :, 8:], v[:, :, 8:], layer_idx=0)
    q = torch.randn(1, 4, 1, 64)
    assert torch.equal(code_attention(q, hit.layers[0], None, 0.125, 2),
                       code_attention(q, ok.layers[0], None, 0.125, 2))


@pytest.mark.parametrize("name,params,hint", [("KQV", {}, False), ("QKQV", {"attention": "model"}, False),
                                              ("kivi", {"group_size": 4}, True)])
def test_states_off_the_cpu_are_refused_up_front(name, params, hint):
    # The torch coders, buffers and compiled loops are on the CPU: a model on another
    # device failed mid-forward with a device-mismatch RuntimeError. ("meta" stands in for
    # an accelerator here.)
    k = torch.empty(1, 2, 5, 64, device="meta")
    with pytest.raises(ValueError, match=r"key_states must be on the CPU.*received device meta") as err:
        QuantizedCache(name, 2, **params).update(k, k, layer_idx=0)
    assert ("attention='model'" in str(err.value)) == hint


def test_the_compiled_loops_refuse_tensors_off_the_cpu():
    # they read raw pointers: a meta (or accelerator) tensor used to crash the process
    kern = _kernel()
    k, _ = _kv(1, 2, 6)
    handle, _ = QuantizedCache("KV", 4).update(k, k, layer_idx=0)
    layer = handle.layer
    codes = layer.store["k_codes"].view().reshape(2, 6, -1)
    norms = layer.store["k_norms"].view().reshape(2, 6)
    meta = torch.empty(2, 3, 64, device="meta")
    with pytest.raises(ValueError, match="q must be a CPU tensor.*received device meta"):
        kern.scores(meta, codes, 6, norms, layer.key_coder.centroids, 4)
    with pytest.raises(ValueError, match="codes must be a CPU tensor"):
        kern.accumulate(torch.ones(2, 3, 6), codes.to("meta"), norms, 1.0, layer.key_coder.centroids, 4, 64)
    with pytest.raises(ValueError, match="x must be a CPU tensor"):
        kern.encode(layer.key_coder, torch.empty(1, 2, 1, 64, device="meta"))


@pytest.mark.parametrize("name,params", [("qjl", {"n_outliers": 80, "group_size": 4}),
                                         ("klt", {"rank": 96, "group_size": 8})])
def test_parameters_bounded_by_the_head_dimension_are_checked_against_the_models(name, params):
    # the constructor's probe scheme had a head dimension of 64, so n_outliers=80 or
    # rank=96 were refused for a 128-dimensional model; now the first update checks them
    # against the model's head dimension
    bounded = "n_outliers" if "n_outliers" in params else "rank"
    cache = QuantizedCache(name, 3, seed=0, **params)
    k, v = _kv(1, 2, 8, d=128)
    cache.update(k, v, layer_idx=0)
    assert cache.layers[0].n_coded == 8
    small = QuantizedCache(name, 3, seed=0, **params)
    with pytest.raises(ValueError, match=rf"{bounded} must be an integer in \[.*, 64\]; received {params[bounded]}"):
        small.update(*_kv(1, 2, 8), layer_idx=0)


def test_a_hybrid_models_state_layers_are_refused_by_name():
    # Qwen3-Next's linear-attention layers ask the cache for convolution and recurrent
    # states, which a cache of attention layers does not hold: an IndexError from inside
    # transformers before, a NotImplementedError that says so now (transformers 5.25 asks for
    # the recurrent state first, earlier releases for the convolution state)
    import transformers

    cfg = transformers.Qwen3NextConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, pad_token_id=0,
                                       attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Qwen3NextForCausalLM(cfg).eval()
    with torch.inference_mode(), pytest.raises(NotImplementedError,
                                               match="attention layers only.*(convolution|recurrent) state"):
        model(torch.tensor([[3, 4, 5]]), cache=QuantizedCache("KQV", 4))
    cache = QuantizedCache("KQV", 4)
    for call in (lambda: cache.update_recurrent_state(torch.zeros(1), 0), lambda: cache.get_recurrent_state(0),
                 lambda: cache.update_conv_state(torch.zeros(1), 0), lambda: cache.update_indexer(torch.zeros(1), 0)):
        with pytest.raises(NotImplementedError, match="attention layers only"):
            call()


def test_the_compiled_loops_take_other_float_dtypes_as_float32():
    # they read float32 memory: a float64 query, weights or vectors were read as garbage
    kern = _kernel()
    k, _ = _kv(1, 2, 6)
    handle, _ = QuantizedCache("KQV", 4).update(k, k, layer_idx=0)
    layer = handle.layer
    codes = layer.store["k_codes"].view().reshape(2, 6, -1)   # KQV keys: 4-bit codes
    norms = layer.store["k_norms"].view().reshape(2, 6)
    q, w = torch.randn(2, 3, 64), torch.softmax(torch.randn(2, 3, 6), -1)
    c = layer.key_coder.centroids
    assert torch.equal(kern.scores(q.double(), codes, 6, norms, c, 4), kern.scores(q, codes, 6, norms, c, 4))
    assert torch.equal(kern.accumulate(w.double(), codes, norms, 1.0, c, 4, 64),
                       kern.accumulate(w, codes, norms, 1.0, c, 4, 64))
    x = torch.randn(1, 2, 3, 64)
    a, b = kern.encode(layer.value_coder, x.double()), kern.encode(layer.value_coder, x)
    assert all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize("params", [{"draws": (2,)}, {"draws": ()}, {"dim": 64}, {"name": "KV"}])
@pytest.mark.parametrize("scheme,bits", [("KQV", 4), ("kivi", 2), ("q4_0", None)])
def test_make_schemes_own_arguments_are_refused_when_the_cache_is_built(scheme, bits, params):
    # "draws" passed the constructor's probe and failed at the first update (inside a
    # forward pass) with "make_scheme() got multiple values for keyword argument 'draws'";
    # "dim" and "name" were that TypeError at construction
    with pytest.raises(ValueError, match=rf"scheme_params must not hold \['{next(iter(params))}'\]: the cache "
                                         r"sets them"):
        QuantizedCache(scheme, bits, **params)
