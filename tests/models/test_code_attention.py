"""Attention read from the codes: equal to attention over the decoded cache, inside a model.

No download: the model tests use a tiny random Llama built from ``LlamaConfig``.
"""

import warnings

import numpy as np
import pytest
import torch

import kvstats
from kvstats.models import QuantizedCache
from kvstats.models.attention_hook import CodedKV
from kvstats.models.code_attention import code_attention
from kvstats.models.peers import held_bytes
from kvstats.quant.registry import REGISTRY, parse_scheme_name
from _attention_reference import dense_attention as _dense, random_kv as _kv
from _tiny_llama import tiny_llama


def _reading_schemes():
    """Every per-vector scheme of the registry with a GPU export, at a mid budget."""
    out = []
    for name, sdef in REGISTRY.items():
        params = dict(sdef.example_params)
        _, parsed = parse_scheme_name(name, dict(params))
        if not sdef.gpu or sdef.token_group(parsed) != 1:
            continue
        bits = None if sdef.fixed_budget else min(max(sdef.min_bits, 3), sdef.max_bits)
        out.append(pytest.param(name, bits, params, id=name))
    return out


READING = _reading_schemes()


def test_the_registry_has_reading_schemes():
    assert len(READING) >= 5


@pytest.mark.parametrize("window,per_head", [(0, True), (3, True), (0, False)])
@pytest.mark.parametrize("name,bits,params", READING)
def test_code_attention_equals_attention_over_the_decoded_cache(name, bits, params, window, per_head):
    # GQA (6 query heads on 3 KV heads), batch 2, a prefill of 9 tokens then 3 decode
    # steps, with and without a full-precision window; each read is compared with plain
    # attention over what a decoded cache would hold (the layer's dequantized K, V).
    B, H, d, n_rep = 2, 3, 64, 2
    k, v, q = _kv(B, H, 12, d, seed=1)
    cache = QuantizedCache(name, bits, seed=5, window=window, per_head=per_head, **params)
    assert cache.reads_codes and not cache.keep_decoded
    layer = None
    for lo, hi in ((0, 9), (9, 10), (10, 11), (11, 12)):
        handle, _ = cache.update(k[:, :, lo:hi], v[:, :, lo:hi], layer_idx=0)
        assert isinstance(handle, CodedKV)
        layer = handle.layer
        Q = hi - lo
        causal = _causal(Q, hi)
        padded = causal.expand(B, 1, Q, hi).clone()
        padded[1, :, :, 0] = torch.finfo(torch.float32).min  # sequence 1 has a padded first token
        K_hat, V_hat = layer.dequantized()
        # additive float mask (eager), bool mask (sdpa), no mask (causal implied)
        for mask, ref_mask in ((padded, padded), (padded == 0, padded), (None, causal)):
            ref = _dense(q[:, :, lo:hi], K_hat, V_hat, ref_mask, n_rep)
            got = code_attention(q[:, :, lo:hi], layer, mask, d ** -0.5, n_rep)
            torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=2e-5)
    assert layer.n_coded == 12 - window and layer.get_seq_length() == 12


def _causal(Q, L):
    """Additive causal mask (Q, L): query i sits at position L − Q + i."""
    later = torch.arange(L)[None, :] > torch.arange(L - Q, L)[:, None]
    return torch.where(later, torch.finfo(torch.float32).min, 0.0)


@pytest.mark.parametrize("name,bits,params", READING)
def test_torch_codes_are_the_numpy_scheme_codes(name, bits, params):
    # Head h of layer l is the scheme make_scheme(..., seed=SeedSequence([seed, l, h])):
    # the torch coder reproduces its numpy roundtrip (to float32 rounding) and its bytes.
    k, v, _ = _kv(1, 3, 40, 64, seed=2)
    cache = QuantizedCache(name, bits, seed=9, **params)
    cache.update(k, v, layer_idx=0)
    cache.update(k, v, layer_idx=1)
    layer = cache.layers[1]
    K_hat, V_hat = layer.dequantized()
    stored = 0
    for h in range(3):
        seed = np.random.SeedSequence([9, 1, h]) if not cache.deterministic else np.random.SeedSequence([9, 1])
        scheme = kvstats.make_scheme(name, bits, 64, seed=seed, **params)
        Kn, Vn = scheme.roundtrip(k[0, h].numpy(), v[0, h].numpy())
        np.testing.assert_allclose(K_hat[0, h].numpy(), Kn, rtol=0, atol=2e-5 * np.abs(Kn).max())
        np.testing.assert_allclose(V_hat[0, h].numpy(), Vn, rtol=0, atol=2e-5 * np.abs(Vn).max())
        stored += scheme.quantize(k[0, h].numpy(), v[0, h].numpy()).nbytes
    assert layer.code_nbytes() == stored


@pytest.mark.parametrize("name,bits,params", [p for p in READING if p.id in ("KQV", "QKQV", "mixed")])
def test_a_head_dimension_that_is_not_a_power_of_two(name, bits, params):
    # d = 80 (as Phi-2's heads): the Hadamard rotation pads to 128 coded coordinates. The
    # torch coder reproduces the numpy scheme's roundtrip there too, and attention read
    # from the codes (both paths) equals attention over the decoded cache.
    from kvstats.models.lut_kernel import kernel

    d = 80
    k, v, q = _kv(2, 3, 13, d, seed=3)
    cache = QuantizedCache(name, bits, seed=9, window=2, **params)
    cache.update(k[:, :, :12], v[:, :, :12], layer_idx=0)
    handle, _ = cache.update(k[:, :, 12:], v[:, :, 12:], layer_idx=0)
    layer = handle.layer
    assert layer.key_coder.dim_padded == 128 and layer.n_coded == 11
    K_hat, V_hat = layer.dequantized()
    for h in range(3):
        scheme = kvstats.make_scheme(name, bits, d, seed=np.random.SeedSequence([9, 0, h]), **params)
        Kn, Vn = scheme.roundtrip(k[1, h, :11].numpy(), v[1, h, :11].numpy())
        np.testing.assert_allclose(K_hat[1, h, :11].numpy(), Kn, rtol=0, atol=2e-5 * np.abs(Kn).max())
        np.testing.assert_allclose(V_hat[1, h, :11].numpy(), Vn, rtol=0, atol=2e-5 * np.abs(Vn).max())
    ref = _dense(q[:, :, 12:], K_hat, V_hat, None, 2)
    for fused in [False] + ([None] if kernel() is not None else []):
        got = code_attention(q[:, :, 12:], layer, None, d ** -0.5, 2, fused=fused)
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=2e-5)


def _tiny_llama(attn="eager", seed=0):
    return tiny_llama(vocab=97, hidden=96, layers=2, heads=6, kv_heads=2, head_dim=32, max_positions=128,
                      attn=attn, seed=seed)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name,bits,window", [("KQV", 4, 0), ("QKQV", 3, 2), ("K4V2", None, 0)])
def test_greedy_generation_reads_codes_and_matches_the_decoded_copy(attn, name, bits, window):
    # Codes vs the decoded copy of the looked-up values (keep_decoded=True): the same
    # arithmetic on the same numbers, so the same logits bit for bit at every step. Codes
    # vs the model's own attention over decoded K/V (attention="model"): equal to float32
    # rounding (on this tiny model, no code flips: the same tokens).
    model = _tiny_llama(attn)
    prompt = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(3))

    def run(**kw):
        cache = QuantizedCache(name, bits, seed=1, window=window, **kw)
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), cache=cache,
                                 max_new_tokens=12, do_sample=False, pad_token_id=0,
                                 output_scores=True, return_dict_in_generate=True)
        return out, cache

    codes, c1 = run()
    copy, c2 = run(keep_decoded=True)
    model_attn, c3 = run(attention="model")
    r1, r2, r3 = c1.memory_report(), c2.memory_report(), c3.memory_report()
    assert (r1["attention"], r2["attention"], r3["attention"]) == ("codes", "decoded copy", "decoded copy")
    assert (r1["attention_fn"], r2["attention_fn"], r3["attention_fn"]) == ("codes", "codes", "model")
    assert r1["decoded_copy_bytes"] == 0 < r2["decoded_copy_bytes"]
    assert torch.equal(codes.sequences, copy.sequences)
    assert all(torch.equal(a, b) for a, b in zip(codes.scores, copy.scores))
    assert torch.equal(codes.sequences, model_attn.sequences)
    for a, b in zip(codes.scores, model_attn.scores):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
    assert c1.get_seq_length() == codes.sequences.shape[1] - 1


@pytest.mark.parametrize("name,bits,params", READING)
def test_reading_the_decoded_copy_is_bit_identical_to_reading_the_codes(name, bits, params):
    # For every reading scheme, through the compiled loops and the torch gathers: attention
    # over the kept copy of the looked-up values equals attention over the codes exactly
    # (GQA, batch 2, a window, decode steps). Then the copy is changed: the output moves,
    # so the copy really is what is read.
    from kvstats.models.lut_kernel import kernel

    k, v, q = _kv(2, 3, 26, 64, seed=8)
    a = QuantizedCache(name, bits, seed=4, window=2, **params)
    b = QuantizedCache(name, bits, seed=4, window=2, keep_decoded=True, **params)
    for c in (a, b):
        c.update(k[:, :, :20], v[:, :, :20], layer_idx=0)
        for t in range(20, 26):
            c.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    la, lb = a.layers[0], b.layers[0]
    paths = [False] + ([None] if kernel() is not None else [])
    for fused in paths:
        for Q in (1, 2):
            x = code_attention(q[:, :, -Q:], la, None, 0.125, 2, fused=fused)
            y = code_attention(q[:, :, -Q:], lb, None, 0.125, 2, fused=fused)
            assert torch.equal(x, y), (fused, Q, (x - y).abs().max())
    for name_, buf in lb.decoded.items():
        buf.view()[:, :, 3] *= 1.5
    for fused in paths:
        x = code_attention(q[:, :, -1:], la, None, 0.125, 2, fused=fused)
        y = code_attention(q[:, :, -1:], lb, None, 0.125, 2, fused=fused)
        assert (x - y).abs().max() > 1e-4


def test_plain_attention_is_unchanged_by_the_wrapper():
    # The wrapped eager/sdpa functions pass ordinary tensors through untouched.
    from transformers import AttentionInterface, DynamicCache

    from kvstats.models.attention_hook import install

    ids = torch.randint(0, 97, (1, 10), generator=torch.Generator().manual_seed(4))
    for attn in ("eager", "sdpa"):
        model = _tiny_llama(attn)
        saved = dict(AttentionInterface._global_mapping)
        try:
            AttentionInterface._global_mapping.pop("eager", None)
            AttentionInterface._global_mapping["sdpa"] = getattr(saved["sdpa"], "__wrapped__", saved["sdpa"])
            with torch.inference_mode():
                before = model(ids, cache=DynamicCache(config=model.config)).logits
            assert not getattr(AttentionInterface._global_mapping["sdpa"], "_kvstats_wrapped", False)
            install()
            assert AttentionInterface._global_mapping[attn]._kvstats_wrapped
            with torch.inference_mode():
                after = model(ids, cache=DynamicCache(config=model.config)).logits
        finally:
            AttentionInterface._global_mapping.clear()
            AttentionInterface._global_mapping.update(saved)
        assert torch.equal(before, after)


def test_a_handle_outside_the_wrapped_attention_explains_itself():
    cache = QuantizedCache("KQV", 3)
    handle, _ = cache.update(*_kv(1, 3, 4, 64, seed=0)[:2], layer_idx=0)
    with pytest.raises(TypeError, match="attention='model'"):
        handle.shape
    model = _tiny_llama("eager")
    with torch.inference_mode():
        out = model(torch.tensor([[1, 2, 3]]), cache=QuantizedCache("KQV", 3))
    assert torch.isfinite(out.logits).all()


def _loops():
    from kvstats.models.lut_kernel import kernel

    k = kernel()
    if k is None:
        pytest.skip("no C compiler here: the torch path is the only one")
    return k


@pytest.mark.parametrize("name,bits,params", READING)
def test_compiled_loops_equal_the_torch_path(name, bits, params):
    # The C look-ups/encoder (decode steps) against the torch gathers/ops: same codes and
    # norms (float16 rounding included, over norms from float16 subnormals to 6e4), same
    # attention to float32 summation order.
    _loops()
    k, v, q = _kv(2, 3, 30, 64, seed=6)
    cache = QuantizedCache(name, bits, seed=2, window=1, **params)
    cache.update(k[:, :, :29], v[:, :, :29], layer_idx=0)
    cache.update(k[:, :, 29:], v[:, :, 29:], layer_idx=0)
    layer = cache.layers[0]
    for Q in (1, 3):
        fused = code_attention(q[:, :, -Q:], layer, None, 0.125, 2, fused=True)
        plain = code_attention(q[:, :, -Q:], layer, None, 0.125, 2, fused=False)
        torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 16, 64, generator=g) * torch.logspace(-8, 3.7, 16)[None, None, :, None]
    for coder in (layer.key_coder, layer.value_coder):
        a, b = coder.encode(x, fused=True), coder.encode(x, fused=False)
        assert a.keys() == b.keys()
        for part in a:
            same = (a[part] == b[part]).float().mean().item()
            # a code may move across a boundary with the summation order (rare)
            assert same >= (0.99 if part in ("codes", "signs") else 1.0), (part, same)


def test_compiled_encoder_refuses_float16_overflow():
    _loops()
    cache = QuantizedCache("KQV", 4)
    cache.update(*_kv(1, 3, 2, 64, seed=0)[:2], layer_idx=0)
    big = torch.full((1, 3, 1, 64), 9000.0)  # norm 72 000 > 65 504
    for fused in (True, False):
        with pytest.raises(ValueError, match="norm_dtype=np.float32"):
            cache.layers[0].key_coder.encode(big, fused=fused)


def test_compiled_encoder_rounds_norms_to_nearest_even():
    # Norms exactly halfway between two float16 values (one non-zero coordinate, whose
    # square and square root are exact in float32): the C encoder must round them as
    # torch's .to(float16) does (to the even neighbour), in the normal and the subnormal
    # range; random inputs almost never land on a tie.
    _loops()
    ties = [1 + 2 ** -11, 1 + 3 * 2 ** -11, 2049.0, 2051.0, 3 * 2 ** -25, 2 ** -25, 5 * 2 ** -25]
    even = [1.0, 1 + 2 ** -9, 2048.0, 2052.0, 2 ** -23, 0.0, 2 ** -23]
    x = torch.zeros(1, 1, len(ties), 64)
    x[0, 0, :, 5] = torch.tensor(ties)
    coder = QuantizedCache("KV", 4).update(*_kv(1, 1, 1, 64, seed=0)[:2], layer_idx=0)[0].layer.key_coder
    fused = coder.encode(x, fused=True)["norms"][0, 0]
    plain = coder.encode(x, fused=False)["norms"][0, 0]
    assert plain.tolist() == even  # the reference: torch's round-to-nearest-even
    assert fused.tolist() == even


def test_bad_shapes_are_value_errors_naming_the_argument():
    # A query or a block of vectors whose head dimension or head count does not match the
    # layer: a ValueError naming the argument (the compiled encoder used to code a wrong
    # dimension silently, the torch paths raised bare shape errors).
    from kvstats.models.lut_kernel import kernel

    handle, _ = QuantizedCache("KQV", 4).update(*_kv(1, 2, 5, 64, seed=0)[:2], layer_idx=0)
    layer = handle.layer
    with pytest.raises(ValueError, match=r"query must be .*\(B, Hq, Q, 64\).*received.*\(1, 4, 1, 32\)"):
        code_attention(torch.randn(1, 4, 1, 32), layer, None, 0.125, 2)
    with pytest.raises(ValueError, match=r"query must be .*received.*\(4, 1, 64\)"):
        code_attention(torch.randn(4, 1, 64), layer, None, 0.125, 2)
    with pytest.raises(ValueError, match=r"n_rep must be .*query heads per KV head.*2 KV heads.*received n_rep=3"):
        code_attention(torch.randn(1, 4, 1, 64), layer, None, 0.125, 3)
    with pytest.raises(ValueError, match=r"n_rep must be .*received n_rep=2 with 5 query heads"):
        code_attention(torch.randn(1, 5, 1, 64), layer, None, 0.125, 2)
    for fused in [False] + ([True] if kernel() is not None else []):
        with pytest.raises(ValueError, match=r"x must have head dimension 64.*received.*\(1, 2, 3, 32\)"):
            layer.key_coder.encode(torch.randn(1, 2, 3, 32), fused=fused)
    if kernel() is not None:
        with pytest.raises(ValueError, match=r"x must be .*\(B, H, n, 64\).*received.*\(2, 3, 32\)"):
            kernel().encode(layer.key_coder, torch.randn(2, 3, 32))


def _numpy_parts(side_codes) -> dict:
    """The numpy coder's stored parts under the torch store's names."""
    if hasattr(side_codes, "residual"):  # TurboQuant-prod: mse codes + QJL residual
        return {"codes": side_codes.mse.codes, "norms": side_codes.mse.norms,
                "signs": side_codes.residual.signs, "rnorms": side_codes.residual.norms}
    return {"codes": side_codes.codes, "norms": side_codes.norms}


@pytest.mark.parametrize("name,bits,params", READING)
def test_zero_vectors_and_the_largest_float16_norm_code_as_numpy_does(name, bits, params):
    # Exact cases the random tests never reach, through the torch coder (a prefill of 20
    # tokens) and the compiled one (decode steps): a zero vector (its coordinates sit on
    # the codebook's middle boundary: code "strictly above the boundaries below it"; its
    # zero residual's signs +1; no 1/0) stores byte for byte what the numpy coder stores,
    # and a vector of norm exactly 65504 (float16's largest) is coded, not refused.
    H, n = 3, 24
    k, v, _ = _kv(1, H, n, 64, seed=11)
    for x in (k, v):
        x[:, :, 3:6] = 0.0
        x[:, :, 20:22] = 0.0
        x[:, :, 7] = 0.0
        x[:, :, 7, 5] = 65504.0
    cache = QuantizedCache(name, bits, seed=9, **params)
    cache.update(k[:, :, :20], v[:, :, :20], layer_idx=0)
    for t in range(20, n):
        cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    layer = cache.layers[0]
    exact = [3, 4, 5, 7, 20, 21]
    for h in range(H):
        seed = np.random.SeedSequence([9, 0, h]) if not cache.deterministic else np.random.SeedSequence([9, 0])
        scheme = kvstats.make_scheme(name, bits, 64, seed=seed, **params)
        codes = scheme.quantize(k[0, h, exact].numpy(), v[0, h, exact].numpy())
        for side, side_codes in (("k", codes.key), ("v", codes.value)):
            for part, want in _numpy_parts(side_codes).items():
                got = layer.store[f"{side}_{part}"].view()[0, h, exact].numpy()
                np.testing.assert_array_equal(got, want, err_msg=f"{side}_{part}, head {h}")
    assert float(layer.store["k_norms"].view()[0, 0, 7]) == 65504.0


def test_growing_buffer_slack_and_copies_stay_small():
    # One token at a time up to 3000: unused capacity below max(step, n/32) tokens at every
    # step (~3 % of a long sequence), and the buffer is reallocated (copied) O(log n) times
    # past n = 32·step rather than every step tokens.
    from kvstats.models.code_attention import GrowingBuffer

    b, moves, last = GrowingBuffer(), 0, None
    for n in range(1, 3001):
        b.append(torch.full((1, 2, 1, 3), float(n)))
        slack = b.capacity - b.n
        assert slack <= max(b.step, b.n // 32), (n, slack)
        if b.buf.data_ptr() != last:
            moves, last = moves + 1, b.buf.data_ptr()
    assert b.view()[0, 1, :, 0].tolist() == [float(n) for n in range(1, 3001)]  # nothing lost in the copies
    # 32 growths of 16 tokens to n = 512, then x(1 + 1/32) each: 512 * 1.03125**58 ~ 3000,
    # ~91 allocations in all (every 16 tokens throughout would be 188)
    assert moves <= 95
    assert b.nbytes(held=False) == 3000 * 2 * 3 * 4 and b.nbytes() == b.capacity * 2 * 3 * 4


def test_decode_steps_read_the_codes_and_a_prefill_the_model_attention(monkeypatch):
    # Inside generate: every one-query step of every layer goes to code_attention (with the
    # model's scaling), a prefill chunk never does (it runs the model's own function on a
    # transient decode).
    import kvstats.models.attention_hook as hook

    calls = []
    real = hook.code_attention

    def spy(query, layer, mask, scaling, n_rep, **kw):
        calls.append((query.shape[2], layer.layer_idx, scaling, n_rep))
        return real(query, layer, mask, scaling, n_rep, **kw)

    monkeypatch.setattr(hook, "code_attention", spy)
    model = _tiny_llama("sdpa")
    prompt = torch.randint(0, 97, (1, 9), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        model(prompt, cache=QuantizedCache("KQV", 4))
        assert calls == []
        model.generate(prompt, attention_mask=torch.ones_like(prompt), cache=QuantizedCache("KQV", 4),
                       max_new_tokens=4, do_sample=False, pad_token_id=0)
    # 3 decode steps (the 4th token is never fed back) x 2 layers, 6 query heads on 2 KV heads
    assert calls == [(1, layer, 32 ** -0.5, 3) for _ in range(3) for layer in (0, 1)]


def test_the_wrapper_passes_the_models_scaling_and_refuses_what_it_cannot_do():
    from transformers import AttentionInterface

    handle, _ = QuantizedCache("KQV", 4).update(*_kv(1, 2, 6, 64, seed=1)[:2], layer_idx=0)
    q = torch.randn(1, 4, 1, 64, generator=torch.Generator().manual_seed(2))
    for name in ("eager", "sdpa"):
        fn = AttentionInterface._global_mapping[name]
        out, _ = fn(None, q, handle, handle, None, scaling=0.3, dropout=0.0)
        assert torch.equal(out, code_attention(q, handle.layer, None, 0.3, 2))
        out, _ = fn(None, q, handle, handle, None)  # no scaling given: 1/sqrt(d)
        assert torch.equal(out, code_attention(q, handle.layer, None, 64 ** -0.5, 2))
        with pytest.raises(ValueError, match="dropout must be 0"):
            fn(None, q, handle, handle, None, dropout=0.1)
        for name_ in ("softcap", "sinks", "s_aux"):
            with pytest.raises(ValueError, match=f"{name_} is not supported.*attention='model'"):
                fn(None, q, handle, handle, None, **{name_: 4.0})
        # positional arguments in each function's own order: eager (scaling, dropout),
        # sdpa (dropout, scaling); the eager one was read as a dropout of 0.3
        args = (0.3, 0.0) if name == "eager" else (0.0, 0.3)
        out, _ = fn(None, q, handle, handle, None, *args)
        assert torch.equal(out, code_attention(q, handle.layer, None, 0.3, 2))
        with pytest.raises(ValueError, match="dropout must be 0"):
            fn(None, q, handle, handle, None, *((0.3, 0.1) if name == "eager" else (0.1,)))


def _widths():
    """KV@b codes both sides with b-bit centroids (b = 1..8); QKQV@b with (b−1)-bit
    centroids and sign bits: every code width the loops unpack (whole codes per byte, the
    3-bit pair table, 5–7-bit words), each side."""
    return [pytest.param("KV", b, id=f"KV{b}") for b in range(1, 9)] + \
        [pytest.param("QKQV", b, id=f"QKQV{b}") for b in range(2, 9)]


@pytest.mark.parametrize("name,bits", _widths())
def test_every_code_width_and_the_window_boundary(name, bits):
    # READING above takes one budget per scheme; the unpacking differs by width. A window
    # of 10 over a 9-token prefill: nothing coded, then the step that fills the window,
    # then the first step whose oldest token leaves it (the buffers' first allocation is
    # a decode step's), then more: each read equals attention over the decoded cache.
    from kvstats.models.lut_kernel import kernel

    k, v, q = _kv(2, 2, 14, 64, seed=20 + bits)
    cache = QuantizedCache(name, bits, seed=2, window=10)
    cache.update(k[:, :, :9], v[:, :, :9], layer_idx=0)
    coded = []
    for t in range(9, 14):
        handle, _ = cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
        layer = handle.layer
        coded.append(layer.n_coded)
        K_hat, V_hat = layer.dequantized()
        ref = _dense(q[:, :, t:t + 1], K_hat, V_hat, None, 2)
        for fused in [False] + ([None] if kernel() is not None else []):
            got = code_attention(q[:, :, t:t + 1], layer, None, 0.125, 2, fused=fused)
            torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=2e-5)
    assert coded == [0, 1, 2, 3, 4]
    assert not torch.equal(K_hat[:, :, :4], k[:, :, :4]) and torch.equal(K_hat[:, :, 4:], k[:, :, 4:14])


def _left_padded(batch_ids, pad):
    """(ids, mask) with the first ``pad[b]`` tokens of row b padding."""
    ids, mask = batch_ids.clone(), torch.ones_like(batch_ids)
    for b, n in enumerate(pad):
        ids[b, :n], mask[b, :n] = 0, 0
    return ids, mask


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("kivi", 2, {"group_size": 4}),
                                              ("qjl", 3, {"group_size": 4})])
def test_a_left_padded_batch_reads_its_mask_as_the_decoded_path(attn, name, bits, params):
    # Batch 2, row 1 left-padded by 4 tokens: each decode step's scores equal those of the
    # model's own attention over the decoded cache (attention="model", the transformers
    # mask applied by the model), and row 1's equal a run of that row alone (no padding):
    # the padded keys, coded like the others, get no weight.
    model = _tiny_llama(attn)
    ids, mask = _left_padded(torch.randint(2, 97, (2, 11), generator=torch.Generator().manual_seed(6)), [0, 4])

    def run(ids, mask, **kw):
        cache = QuantizedCache(name, bits, seed=1, **params, **kw)
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=mask, cache=cache, max_new_tokens=8, do_sample=False,
                                 pad_token_id=0, output_scores=True, return_dict_in_generate=True)
        rep = cache.memory_report()  # every byte the cache holds after generate, by the generic walk
        assert held_bytes(cache) == rep["held_bytes"] + rep["fixed_bytes"]
        return torch.stack(out.scores), out.sequences

    codes, seq = run(ids, mask)
    decoded, seq_model = run(ids, mask, attention="model")
    alone, _ = run(ids[1:, 4:], mask[1:, 4:])
    assert torch.equal(seq, seq_model)
    torch.testing.assert_close(codes, decoded, rtol=0, atol=1e-4)
    torch.testing.assert_close(codes[:, 1:], alone, rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_reads_codes_in_float32_and_returns_its_dtype(dtype):
    # The code-reading attention computes in float32 and returns the query's dtype; the
    # greedy tokens equal those of the model's own half-precision attention over the
    # decoded cache, and a decode step's output is at least as close to float64 attention
    # over the same decoded K/V as the model path's half-precision arithmetic allows.
    model = _tiny_llama("eager").to(dtype)
    prompt = torch.randint(0, 97, (1, 10), generator=torch.Generator().manual_seed(7))
    outs = {}
    for attention in ("codes", "model"):
        cache = QuantizedCache("KQV", 4, seed=1, window=2, attention=attention)
        with torch.inference_mode():
            outs[attention] = model.generate(prompt, attention_mask=torch.ones_like(prompt), cache=cache,
                                             max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(outs["codes"], outs["model"])
    cache = QuantizedCache("KQV", 4, seed=1, window=2)
    k, v, q = (x.to(dtype) for x in _kv(1, 2, 9, 32, seed=9))
    handle, _ = cache.update(k, v, layer_idx=0)
    assert handle.layer.tail_keys.dtype == dtype
    got = code_attention(q[:, :, -1:], handle.layer, None, 32 ** -0.5, 2)
    K_hat, V_hat = handle.layer.dequantized()
    ref = _dense(q[:, :, -1:], K_hat, V_hat, None, 2)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, rtol=0, atol=float(torch.finfo(dtype).eps) * 4)


def test_a_mask_per_query_head_and_the_attention_weights():
    # A float mask per query head (B, Hq, 1, L) (GQA: head h·n_rep + g reads KV head h),
    # against the dense reference; weights=True returns the probabilities (B, Hq, Q, L);
    # a mask of another shape is a ValueError naming attention_mask.
    k, v, q = _kv(2, 3, 10, 64, seed=11)
    handle, _ = QuantizedCache("QKQV", 3, seed=0, window=2).update(k, v, layer_idx=0)
    layer = handle.layer
    g = torch.Generator().manual_seed(1)
    mask = torch.randn(2, 6, 1, 10, generator=g) * 3
    mask[0, 4, 0, 7] = torch.finfo(torch.float32).min
    K_hat, V_hat = layer.dequantized()
    ref = _dense(q[:, :, -1:], K_hat, V_hat, mask, 2)
    out, w = code_attention(q[:, :, -1:], layer, mask, 0.125, 2, weights=True)
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=2e-5)
    Kr = K_hat.repeat_interleave(2, 1).double()
    p = torch.softmax(q[:, :, -1:].double() @ Kr.transpose(-1, -2) / 8 + mask.double(), -1)
    torch.testing.assert_close(w.double(), p, rtol=1e-4, atol=1e-6)
    assert w[0, 4, 0, 7] == 0
    for bad in (mask[:, :3], mask[..., :9], mask[0]):
        with pytest.raises(ValueError, match=r"attention_mask must be \(B, 1 or Hq, Q, >= L\)"):
            code_attention(q[:, :, -1:], layer, bad, 0.125, 2)


def test_eager_output_attentions_in_decode_steps():
    # transformers' eager attention returns its probabilities (output_attentions=True
    # collects them); the code-reading decode step returned None, so the attentions of a
    # decode step were silently missing. Now they are those of the decoded path.
    model = _tiny_llama("eager")
    ids = torch.randint(2, 97, (1, 8), generator=torch.Generator().manual_seed(8))
    got = {}
    for attention in ("codes", "model"):
        cache = QuantizedCache("KQV", 4, seed=1, attention=attention)
        with torch.inference_mode():
            model(ids[:, :7], cache=cache)
            got[attention] = model(ids[:, 7:], cache=cache, output_attentions=True).attentions
    assert len(got["codes"]) == len(got["model"]) == 2
    for a, b in zip(got["codes"], got["model"]):
        assert a.shape == b.shape == (1, 6, 1, 8)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_a_position_bias_is_refused_not_ignored():
    # Models that add a per-head bias to the scores through the attention interface
    # (Inkling's relative positions, passed as position_bias) would be read without it.
    from transformers import AttentionInterface

    handle, _ = QuantizedCache("KQV", 4).update(*_kv(1, 2, 6, 64, seed=1)[:2], layer_idx=0)
    q = torch.randn(1, 4, 1, 64)
    for name in ("eager", "sdpa"):
        fn = AttentionInterface._global_mapping[name]
        with pytest.raises(ValueError, match="position_bias is not supported.*attention='model'"):
            fn(None, q, handle, handle, None, position_bias=torch.zeros(1, 4, 1, 6))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_sliding_window_model_reads_codes_through_its_mask(attn):
    # Mistral passes sliding_window to the attention function, which eager and sdpa ignore:
    # the window is in the mask transformers builds (over this cache's full-length layers,
    # as for DynamicCache's sliding layers: identity through the model's attention equals
    # DynamicCache). The code-reading attention applies that mask, so it was refused for
    # nothing; now a window of 4 over 16 tokens (batch 2, one row left-padded) gives the
    # decoded path's scores.
    from transformers import DynamicCache, MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=97, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                        num_attention_heads=6, num_key_value_heads=2, head_dim=32, max_position_embeddings=64,
                        sliding_window=4, attn_implementation=attn)
    model = MistralForCausalLM(cfg).eval()
    ids, mask = _left_padded(torch.randint(2, 97, (2, 10), generator=torch.Generator().manual_seed(1)), [0, 3])

    def run(cache):
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=mask, cache=cache, max_new_tokens=6, do_sample=False,
                                 pad_token_id=0, output_scores=True, return_dict_in_generate=True)
        return torch.stack(out.scores)

    torch.testing.assert_close(run(QuantizedCache("identity", None, attention="model")),
                               run(DynamicCache(config=cfg)), rtol=0, atol=1e-5)
    for name, bits, params in (("KQV", 4, {}), ("kivi", 2, {"group_size": 2})):
        codes = run(QuantizedCache(name, bits, seed=1, **params))
        decoded = run(QuantizedCache(name, bits, seed=1, attention="model", **params))
        torch.testing.assert_close(codes, decoded, rtol=0, atol=1e-4)


@pytest.mark.parametrize("arch", ["Qwen2", "Gemma3Text", "Phi", "Cohere2", "GPTNeoX", "Granite"])
def test_other_architectures_read_codes_as_their_own_attention(arch):
    # Beyond Llama: query/key norms and biases, partial rotary, Gemma's query scaling and
    # sliding layers, Cohere's interleaved windows, Granite's attention multiplier. A
    # decode step's scores equal those of the model's own eager attention over the
    # decoded cache (left-padded batch of 2).
    import transformers

    cfg_cls = getattr(transformers, f"{arch}Config")
    model_cls = getattr(transformers, f"{arch.removesuffix('Text')}ForCausalLM")
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=64, pad_token_id=0,
                  attn_implementation="eager")
    model = model_cls(cfg).eval()
    ids, mask = _left_padded(torch.randint(2, 97, (2, 9), generator=torch.Generator().manual_seed(1)), [0, 2])

    def run(**kw):
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=mask, cache=QuantizedCache("KQV", 4, seed=1, **kw),
                                 max_new_tokens=5, do_sample=False, pad_token_id=0, output_scores=True,
                                 return_dict_in_generate=True)
        return torch.stack(out.scores)

    torch.testing.assert_close(run(), run(attention="model"), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("QKQV", 3, {"window": 40}),
                                              ("kivi", 2, {"group_size": 4, "window": 2})])
def test_a_one_token_prompt_and_a_prefill_in_chunks(name, bits, params):
    # generate from a one-token prompt; a forward pass over a prompt in three chunks
    # (the later ones several queries against coded tokens) then decode steps: the logits
    # of the code-reading cache equal the decoded path's (a window larger than the prompt
    # in one case: nothing coded)
    model = _tiny_llama("sdpa")
    ids = torch.randint(2, 97, (1, 16), generator=torch.Generator().manual_seed(9))

    def run(**kw):
        cache = QuantizedCache(name, bits, seed=1, **params, **kw)
        with torch.inference_mode():
            one = model.generate(ids[:, :1], attention_mask=torch.ones_like(ids[:, :1]), max_new_tokens=5,
                                 cache=QuantizedCache(name, bits, seed=1, **params, **kw), do_sample=False,
                                 pad_token_id=0, output_scores=True, return_dict_in_generate=True)
            logits = [model(ids[:, lo:hi], cache=cache).logits for lo, hi in ((0, 5), (5, 11), (11, 13))]
            logits += [model(ids[:, t:t + 1], cache=cache).logits for t in range(13, 16)]
        return torch.stack(one.scores), torch.cat(logits, 1), cache

    (s1, l1, c1), (s2, l2, _) = run(), run(attention="model")
    torch.testing.assert_close(s1, s2, rtol=0, atol=1e-5)
    torch.testing.assert_close(l1, l2, rtol=0, atol=1e-5)
    group = params.get("group_size", 1)
    assert c1.get_seq_length() == 16 and c1.layers[0].n_coded == max(0, 16 - params.get("window", 0)) // group * group


@pytest.mark.parametrize("scheme", ["KV", "KQV"])
def test_a_transposed_prefill_codes_as_its_contiguous_copy_without_a_warning(scheme):
    # a model's key states are a transposed view (B, n, H, d) -> (B, H, n, d); unrotated (KV)
    # states kept its strides into torch.bucketize, which copied them with a UserWarning
    k = torch.randn(1, 40, 2, 64, generator=torch.Generator().manual_seed(3)).transpose(1, 2)
    view, dense = QuantizedCache(scheme, 4), QuantizedCache(scheme, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        view.update(k, k, layer_idx=0)
    dense.update(k.contiguous(), k.contiguous(), layer_idx=0)
    q = torch.randn(1, 4, 1, 64, generator=torch.Generator().manual_seed(4))
    assert torch.equal(code_attention(q, view.layers[0], None, 0.125, 2),
                       code_attention(q, dense.layers[0], None, 0.125, 2))
