"""QuantizedCache referee R1 (findings 1-4): numpy codes held without per-step Python objects,
states checked finite at the update that brings them, code_attention's mask, scaling and
query checked, the Hadamard rows built without keeping H_n alive. No model needed."""

import gc
import sys
import types

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import _hadamard_rows, code_attention, hadamard

# ---------------------------------------------------------------- finding 1: held bytes

_NOT_WALKED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
               types.CodeType, type(None), bool, str, np.dtype)


def _reachable(root) -> tuple[int, int]:
    """(bytes of every array/tensor memory reachable from ``root``, each block once by its
    address; ``sys.getsizeof`` of every reachable Python object, array data excluded):
    an independent walk (``gc.get_referents``), not the cache's own accounting."""
    seen, stack, objects, memory = set(), [root], 0, {}
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _NOT_WALKED) or (type(o) is int and -5 <= o <= 256):
            continue
        seen.add(id(o))
        if isinstance(o, torch.Tensor):
            st = o.untyped_storage()
            memory[st.data_ptr()] = max(memory.get(st.data_ptr(), 0), st.nbytes())
            objects += sys.getsizeof(o)
            continue
        if isinstance(o, np.ndarray):
            base = o
            while isinstance(base.base, np.ndarray):
                base = base.base
            if isinstance(base.base, torch.Tensor):
                stack.append(base.base)
            else:
                memory[base.ctypes.data] = max(memory.get(base.ctypes.data, 0), base.nbytes)
            objects += sys.getsizeof(o) - (o.nbytes if o.flags.owndata else 0)
            if o.base is not None:
                stack.append(o.base)
            continue
        objects += sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return sum(memory.values()), objects


def _uncounted(cache) -> int:
    """Reachable bytes (arrays and objects) that memory_report does not count."""
    arrays, objects = _reachable(cache.layers)
    rep = cache.memory_report()
    return arrays + objects - rep["held_bytes"] - rep["fixed_bytes"]


@pytest.mark.parametrize("name,bits,params", [
    ("q4_0", None, {}), ("nvfp4", None, {}), ("fp8_e4m3", None, {}), ("identity", None, {}),
    ("KQV", 4, {"rotation": "haar"}), ("QKQV", 3, {"rotation": "haar", "keep_decoded": False}),
    # chunks of varying layout (klt: a 16-token prefill block, then blocks of 4) are held as objects
    ("klt", 3, {"group_size": 4})])
def test_decode_steps_add_no_uncounted_memory(name, bits, params):
    # R1 finding 1: numpy-coded schemes kept one SchemeCodes per update, a dozen Python
    # objects per layer and decode step (q4_0 1.2 KB, Haar KQV 2.6 KB, uncounted, against
    # 0.5 KB of codes). Now the part of the reachable memory that held_bytes + fixed_bytes
    # leaves out must not grow with the sequence: over 80 decode steps, at most a constant
    # (Python ints past 256 in the buffers' counters: 28 B each).
    torch.manual_seed(0)
    cache = QuantizedCache(name, bits, **params)
    cache.update(torch.randn(1, 4, 16, 64), torch.randn(1, 4, 16, 64), layer_idx=0)
    first = None
    for t in range(100):
        cache.update(torch.randn(1, 4, 1, 64), torch.randn(1, 4, 1, 64), layer_idx=0)
        if t == 19:
            _uncounted(cache)  # once first: reading vars() creates an object's __dict__ once
            first = _uncounted(cache)
    growth = _uncounted(cache) - first
    # before the fix: 80 × (0.8 to 2.6 KB) = 68 to 210 KB
    assert growth <= 1024, growth
    chunks = cache.layers[0].chunks
    assert (chunks.objects is not None) == (name == "klt")
    assert len(chunks) == (1 + 100 // 4 if name == "klt" else 101)


_NUMPY_SCHEMES = [("identity", None, {}), ("q4_1", None, {}), ("q5_0", None, {}), ("fp8_e5m2", None, {"scale": 2.0}),
                  ("mxfp4", None, {}), ("nvfp4", None, {}), ("KQV", 4, {"rotation": "haar"}),
                  ("turboquant_prod", 3, {"rotation": "haar"}), ("K4V2", None, {"rotation": "haar"}),
                  ("klt", 3, {"group_size": 4}), ("klt", 2, {"group_size": 2})]


@pytest.mark.parametrize("name,bits,params", _NUMPY_SCHEMES)
@pytest.mark.parametrize("keep", [True, False])
def test_numpy_chunks_decode_as_the_scheme_s_own_codes(name, bits, params, keep):
    # The chunks rebuilt from the buffers are the arrays the scheme returned: the layer's
    # decode is, bit for bit, each block's own quantize → dequantize with the layer's scheme
    # (a decoded copy or a decode on read alike), and code_bytes is their nbytes summed.
    g = torch.Generator().manual_seed(3)
    k, v = torch.randn(2, 3, 40, 64, generator=g), torch.randn(2, 3, 40, 64, generator=g)
    cache = QuantizedCache(name, bits, window=1, keep_decoded=keep, **params)
    blocks = [slice(0, 12)] + [slice(t, t + 1) for t in range(12, 40)]
    for sl in blocks:
        K, V = cache.update(k[:, :, sl], v[:, :, sl], layer_idx=0)
    lay = cache.layers[0]
    step = lay.owner.token_group
    want_k, want_v, nbytes, done = [], [], 0, 0
    for n in lay.chunks.sizes().tolist():  # the blocks the layer coded, oldest first
        ref = lay.scheme.quantize(k[:, :, done:done + n].numpy(), v[:, :, done:done + n].numpy())
        a, b = lay.scheme.dequantize(ref)
        want_k.append(a), want_v.append(b)
        nbytes, done = nbytes + ref.nbytes, done + n
    assert done == lay.n_coded and done % step == 0 and done >= 40 - 1 - step
    K_hat, V_hat = lay.dequantized()
    assert torch.equal(K_hat[:, :, :done], torch.from_numpy(np.concatenate(want_k, axis=2)))
    assert torch.equal(V_hat[:, :, :done], torch.from_numpy(np.concatenate(want_v, axis=2)))
    assert torch.equal(K, K_hat) and torch.equal(V, V_hat)
    assert cache.memory_report()["code_bytes"] == nbytes


def test_a_failed_coding_step_rolls_the_chunks_back(monkeypatch):
    # Coding is all or nothing: a failure after the codes were appended (here the decoded
    # copy's decode) leaves the chunks as they were, and the next steps code as a cache
    # that never saw the failed one.
    from kvstats.models.cache_layer import _CodesLayer

    g = torch.Generator().manual_seed(5)
    k, v = torch.randn(1, 2, 30, 32, generator=g), torch.randn(1, 2, 30, 32, generator=g)
    a, b = QuantizedCache("nvfp4"), QuantizedCache("nvfp4")
    for c in (a, b):
        c.update(k[:, :, :10], v[:, :, :10], layer_idx=0)
    real = _CodesLayer._decode_numpy

    def fail(self, codes):
        raise MemoryError("no room")

    monkeypatch.setattr(_CodesLayer, "_decode_numpy", fail)
    with pytest.raises(MemoryError):
        a.update(k[:, :, 10:11], v[:, :, 10:11], layer_idx=0)
    monkeypatch.setattr(_CodesLayer, "_decode_numpy", real)
    la = a.layers[0]
    assert len(la.chunks) == 1 and la.n_coded == 10 and all(
        buf.n == (10 if t else 1) for buf, t in zip(la.chunks.buffers, la.chunks.tokens))
    for t in range(10, 30):
        a.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
        b.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    for x, y in zip(la.dequantized(), b.layers[0].dequantized()):
        assert torch.equal(x, y)
    assert a.memory_report()["code_bytes"] == b.memory_report()["code_bytes"]


def test_chunks_drop_whole_chunks_and_switch_to_objects_once():
    # CodeChunks on its own: drop keeps the newest chunks (per-chunk arrays too), and a
    # chunk of another layout turns the held ones into objects with the same arrays.
    import kvstats
    from kvstats.models.growing_buffer import CodeChunks

    rng = np.random.default_rng(0)
    fp8 = kvstats.make_scheme("fp8_e4m3", None, 16)
    x = rng.standard_normal((1, 2, 9, 16)).astype(np.float32)
    chunks, blocks = CodeChunks(), [(0, 4), (4, 5), (5, 6), (6, 9)]
    for s, e in blocks:
        chunks.append(fp8.quantize(x[:, :, s:e], x[:, :, s:e]), (1, 2, e - s, 16))
    scales = [c.key.scale.copy() for c in chunks]
    chunks.drop(2)
    assert chunks.sizes().tolist() == [1, 3] and chunks.objects is None
    for got, want, (s, e) in zip(chunks, scales[2:], blocks[2:]):
        assert np.array_equal(got.key.scale, want) and got.shape == (1, 2, e - s, 16)
        assert np.array_equal(fp8.dequantize(got)[0], fp8.roundtrip(x[:, :, s:e], x[:, :, s:e])[0])
        assert not got.key.codes.flags.writeable
    with pytest.raises(ValueError, match=r"n_chunks must be an integer in \[0, 2\]; received 3"):
        chunks.truncate(3)
    with pytest.raises(TypeError, match=r"n_chunks must be an integer in \[0, 2\]; received 1.0"):
        chunks.drop(1.0)
    static = kvstats.make_scheme("fp8_e4m3", None, 16, scale=2.0)    # a per-chunk scale of shape ()
    chunks = CodeChunks()
    for s, e in blocks:
        chunks.append(static.quantize(x[:, :, s:e], x[:, :, s:e]), (1, 2, e - s, 16))
    assert [c.value.scale.shape for c in chunks] == [()] * 4 and chunks.objects is None
    klt = kvstats.make_scheme("klt", 3, 16, group_size=2, draws=(2,))
    y = rng.standard_normal((1, 2, 8, 16)).astype(np.float32)
    chunks = CodeChunks()
    for s, e in ((0, 2), (2, 4), (4, 8)):     # the third block has four halves: objects from then on
        chunks.append(klt.quantize(y[:, :, s:e], y[:, :, s:e]), (1, 2, e - s, 16))
    assert chunks.objects is not None and chunks.buffers == [] and chunks.sizes().tolist() == [2, 2, 4]
    for got, (s, e) in zip(chunks, ((0, 2), (2, 4), (4, 8))):
        assert np.array_equal(klt.dequantize(got)[0], klt.roundtrip(y[:, :, s:e], y[:, :, s:e])[0])
    assert chunks.nbytes() > chunks.nbytes(held=False) == sum(c.nbytes for c in chunks)
    with pytest.raises(ValueError, match=r"shape must be the block's \(B, H, n, d\)"):
        chunks.append(klt.quantize(y[:, :, :2], y[:, :, :2]), (2, 16))


# ---------------------------------------------------------------- finding 2: finite states

@pytest.mark.parametrize("name,bits,params,side", [
    ("KQV", 4, {"window": 2}, 0), ("KQV", 4, {"window": 2, "norm_dtype": "float32"}, 1),
    ("kivi", 2, {"group_size": 4, "window": 4}, 0), ("qjl", 3, {"group_size": 4}, 1), ("q4_0", None, {"window": 3}, 0)])
def test_non_finite_states_are_refused_by_the_update_that_brings_them(name, bits, params, side):
    # R1 finding 2: a NaN/inf token was held in the full-precision tail (window, open
    # group), attention read NaN silently, and a later, valid update was refused naming
    # the coder's argument ("x", "K") with wrong advice. Now the update that brings it
    # fails, naming key_states / value_states, and the cache is unchanged.
    cache = QuantizedCache(name, bits, **params)
    cache.update(torch.randn(1, 2, 3, 64), torch.randn(1, 2, 3, 64), layer_idx=0)
    for bad in (float("nan"), float("inf")):
        k, v = torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64)
        (k, v)[side][0, 1, 0, 5] = bad
        arg = ("key_states", "value_states")[side]
        with pytest.raises(ValueError, match=rf"^{arg} must be finite; received 1 NaN/inf value\(s\)"):
            cache.update(k, v, layer_idx=0)
        assert cache.get_seq_length() == 3
    for _ in range(6):  # valid steps go on
        cache.update(torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64), layer_idx=0)
    assert cache.get_seq_length() == 9


def test_coder_norm_errors_advise_float32_only_where_it_helps():
    # SideCoder.encode (and the compiled encoder) on its own: NaN input is named as such;
    # float32 norms are advised for norms beyond float16 only, not beyond float32.
    from kvstats.models.lut_kernel import kernel

    fp16 = QuantizedCache("KQV", 4).update(torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64),
                                          layer_idx=0)[0].layer.key_coder
    fp32 = QuantizedCache("KQV", 4, norm_dtype="float32").update(
        torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64), layer_idx=0)[0].layer.key_coder
    nan = torch.randn(1, 1, 2, 64)
    nan[0, 0, 1, 3] = float("nan")
    fused = [False] + ([True] if kernel() is not None else [])
    for coder in (fp16, fp32):
        for f in fused if coder is fp16 else [False]:
            with pytest.raises(ValueError, match=r"^x must be finite; received 1 NaN/inf") as info:
                coder.encode(nan, fused=f)
            assert "norm_dtype" not in str(info.value)
    for f in fused:
        with pytest.raises(ValueError, match=r"range of norm_dtype=float16 \(max 65504; largest norm 72000\); "
                                             r"use norm_dtype=np.float32$"):
            fp16.encode(torch.full((1, 1, 1, 64), 9000.0), fused=f)
    with pytest.raises(ValueError, match=r"range of norm_dtype=float32 \(max 3.40282e\+38; largest norm inf\)$"):
        fp32.encode(torch.full((1, 1, 1, 64), 3e19), fused=False)    # finite, its norm overflows float32


# ---------------------------------------------------------------- finding 3: code_attention inputs

def test_code_attention_refuses_integer_masks_complex_queries_and_bad_scaling():
    # R1 finding 3: an int64 0/1 mask was added (a difference of 1.58 from the same mask
    # as bool), scaling=None a TypeError, a complex query cast to its real part.
    g = torch.Generator().manual_seed(0)
    handle, _ = QuantizedCache("KQV", 4).update(torch.randn(1, 2, 6, 64, generator=g),
                                                torch.randn(1, 2, 6, 64, generator=g), layer_idx=0)
    q = torch.randn(1, 2, 1, 64, generator=g)
    mask = torch.ones(1, 1, 1, 6, dtype=torch.bool)
    mask[..., :3] = False
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.complex64):
        with pytest.raises(ValueError, match=rf"attention_mask must be bool .* received dtype {dtype}"):
            code_attention(q, handle.layer, mask.to(dtype), 0.125, 1)
    additive = torch.zeros(1, 1, 1, 6).masked_fill(~mask, torch.finfo(torch.float32).min)
    assert torch.equal(code_attention(q, handle.layer, additive, 0.125, 1),
                       code_attention(q, handle.layer, mask, 0.125, 1))
    # None: 1/sqrt(d) (transformers' sdpa passes scale=None to torch so); the same numbers
    assert torch.equal(code_attention(q, handle.layer, None, None, 1), code_attention(q, handle.layer, None, 0.125, 1))
    assert torch.equal(code_attention(q, handle.layer, None, np.float32(0.125), 1),
                       code_attention(q, handle.layer, None, 0.125, 1))
    for bad in (-1.0, 0, float("nan"), float("inf"), True, "0.125", torch.tensor(0.125)):
        with pytest.raises(ValueError, match=r"scaling must be None \(1/sqrt\(d\)\) or a positive finite real"):
            code_attention(q, handle.layer, None, bad, 1)
    for dtype in (torch.complex64, torch.int32):
        with pytest.raises(ValueError, match=rf"query must be a real floating-point tensor .* received {dtype} of"):
            code_attention(q.to(dtype), handle.layer, None, 0.125, 1)


# ---------------------------------------------------------------- finding 4: Hadamard rows

def test_hadamard_rows_do_not_keep_the_full_matrix_alive():
    # R1 finding 4: the rows were a copy of hadamard(n)[:d], whose lru_cache kept the whole
    # n × n matrix alive (65,536 B at n = 128, uncounted) beside them.
    _hadamard_rows.cache_clear()
    hadamard.cache_clear()
    cache = QuantizedCache("KQV", 4)
    cache.update(torch.randn(1, 1, 2, 80), torch.randn(1, 1, 2, 80), layer_idx=0)   # d = 80, padded to 128
    assert hadamard.cache_info().currsize == 0
    rows = cache.layers[0].key_coder.hd
    assert rows.untyped_storage().nbytes() == 80 * 128 * 4 and rows is _hadamard_rows(80, 128)
    assert torch.equal(rows, hadamard(128)[:80])
