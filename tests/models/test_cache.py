"""QuantizedCache: codes, chunking, window, token groups, memory (no model needed)."""

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache


def _kv(n, seed=0, heads=3, d=64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, heads, n, d, generator=g), torch.randn(1, heads, n, d, generator=g)


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("QKQV", 3), ("KV", 2), ("K4V2", None)])
def test_chunks_are_coded_with_the_same_randomness(name, bits):
    # Keys arriving in chunks (prefill, then decode steps) must decode exactly as if the
    # whole sequence had been coded at once: one rotation/sketch per layer and head.
    k, v = _kv(15)
    whole = QuantizedCache(name, bits, seed=7)
    whole.update(k, v, layer_idx=0)
    K1, V1 = whole.layers[0].dequantized()
    parts = QuantizedCache(name, bits, seed=7)
    parts.update(k[:, :, :10], v[:, :, :10], layer_idx=0)
    parts.update(k[:, :, 10:11], v[:, :, 10:11], layer_idx=0)
    parts.update(k[:, :, 11:], v[:, :, 11:], layer_idx=0)
    K2, V2 = parts.layers[0].dequantized()
    # Same codes; the float32 decode may differ in the last bits (vectorised fwht over
    # differently sized arrays, BLAS-dependent), so a tolerance of a few float32 ulps:
    # values reach |x| ~ 4, whose ulp is 4.8e-7 (1.2e-6 = 2.5 ulps seen with OpenBLAS).
    torch.testing.assert_close(K1, K2, rtol=5e-7, atol=1e-6)
    torch.testing.assert_close(V1, V2, rtol=5e-7, atol=1e-6)
    assert parts.get_seq_length() == 15 and parts.nbytes() == whole.nbytes()
    # ... and the codes really are lossy and, for randomized schemes, layer-specific
    # (per-layer seeds).
    assert not torch.equal(K1, k)
    if name != "KV":
        whole.update(k, v, layer_idx=1)
        K_other, _ = whole.layers[1].dequantized()
        assert (K_other - K1).abs().max() > 1e-3


@pytest.mark.parametrize("name,bits", [("KQV", 3), ("kivi", 2)])
def test_keep_decoded_copy_does_not_change_results(name, bits):
    # attention="model": the decoded copy handed to the model's attention holds exactly
    # what decoding the stored codes gives (codes path: the same torch codes; numpy-coded
    # schemes: the same numpy codes).
    k, v = _kv(70)
    a = QuantizedCache(name, bits, seed=1, keep_decoded=True, attention="model")
    b = QuantizedCache(name, bits, seed=1, keep_decoded=False, attention="model")
    for sl in (slice(0, 40), slice(40, 41), slice(41, 70)):
        Ka, Va = a.update(k[:, :, sl], v[:, :, sl], layer_idx=0)
        Kb, Vb = b.update(k[:, :, sl], v[:, :, sl], layer_idx=0)
    # same codes; the copy was decoded chunk by chunk, b in one call (BLAS rounding)
    torch.testing.assert_close(Ka, Kb, rtol=5e-7, atol=1e-6)
    torch.testing.assert_close(Va, Vb, rtol=5e-7, atol=1e-6)
    ra, rb = a.memory_report(), b.memory_report()
    copy = 2 * 4 * a.layers[0].n_coded * 3 * 64  # float32 K and V of the coded tokens
    assert ra["attention"] == "decoded copy" and copy <= ra["decoded_copy_bytes"] <= 1.5 * copy
    assert rb["attention"] == "decoded on read" and ra["attention_fn"] == rb["attention_fn"] == "model"
    assert ra["stored_bytes"] == rb["stored_bytes"] and rb["decoded_copy_bytes"] == 0


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("QKQV", 3), ("K4V2", None)])
def test_the_code_reading_copy_holds_the_looked_up_values(name, bits):
    # attention="codes" with keep_decoded=True: the copy holds, under the store's names,
    # exactly the centroid / sign values of the stored codes (rotated space), token for
    # token, over a prefill and decode steps; the codes are those of the copy-less cache.
    k, v = _kv(40)
    a = QuantizedCache(name, bits, seed=3, keep_decoded=True)
    b = QuantizedCache(name, bits, seed=3)
    for c in (a, b):
        c.update(k[:, :, :30], v[:, :, :30], layer_idx=0)
        for t in range(30, 40):
            c.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    la, lb = a.layers[0], b.layers[0]
    assert a.attention == "codes" and set(la.decoded) == {n for n in la.store if n.endswith(("codes", "signs"))}
    for name_, buf in la.decoded.items():
        coder = la.key_coder if name_.startswith("k") else la.value_coder
        codes = la.store[name_].view()
        want = coder.signs_of(codes) if name_.endswith("signs") else coder.centroids_of(codes)
        assert torch.equal(buf.view(), want)
        assert torch.equal(codes, lb.store[name_].view())
    assert a.memory_report()["attention"] == "decoded copy" and a.memory_report()["attention_fn"] == "codes"


def test_full_precision_window():
    k, v = _kv(10)
    cache = QuantizedCache("KV", 2, window=4)
    cache.update(k, v, layer_idx=0)
    K, V = cache.layers[0].dequantized()
    layer = cache.layers[0]
    assert layer.n_coded == 6 and cache.get_seq_length() == 10
    assert torch.equal(K[:, :, 6:], k[:, :, 6:]) and torch.equal(V[:, :, 6:], v[:, :, 6:])
    assert not torch.equal(K[:, :, :6], k[:, :, :6])
    k1, v1 = _kv(1, seed=5)
    cache.update(k1, v1, layer_idx=0)
    K, _ = layer.dequantized()
    assert layer.n_coded == 7 and K.shape[-2] == 11 and torch.equal(K[:, :, -1:], k1)


def test_token_grouped_scheme_codes_whole_groups_only():
    k, v = _kv(20)
    cache = QuantizedCache("kivi", 2, group_size=8)
    cache.update(k, v, layer_idx=0)
    K, _ = cache.layers[0].dequantized()
    assert cache.layers[0].n_coded == 16 and torch.equal(K[:, :, 16:], k[:, :, 16:])
    windowed = QuantizedCache("kivi", 2, window=4, group_size=8)
    windowed.update(k[:, :, :11], v[:, :, :11], layer_idx=0)
    assert windowed.layers[0].n_coded == 0          # 11 - 4 = 7 < one group
    windowed.update(k[:, :, 11:], v[:, :, 11:], layer_idx=0)
    assert windowed.layers[0].n_coded == 16         # 20 - 4 = 16 = two groups


def test_memory_matches_the_scheme_accounting():
    import kvstats

    n = 40
    k, v = _kv(n)
    cache = QuantizedCache("KQV", 4)
    cache.update(k, v, layer_idx=0)
    budget = kvstats.make_scheme("KQV", 4, 64).bits_per_coord(n)
    # bits per coordinate x (K and V) x coordinates per token / 8 = bytes per token
    expected = budget.total * 2 * 3 * 64 / 8
    assert cache.bytes_per_token() == pytest.approx(expected, rel=0.02)
    assert cache.fp16_bytes_per_token() == 2 * 2 * 3 * 64
    report = cache.memory_report()
    assert report["ratio_to_fp16"] < 0.3 and report["nbytes"] == cache.nbytes()


def test_values_with_another_head_shape_are_refused():
    k, v = _kv(8)
    with pytest.raises(ValueError, match="value_states must have the batch, heads, tokens and head dimension"):
        QuantizedCache("KQV", 4).update(k, v[..., :32], layer_idx=0)
    with pytest.raises(ValueError, match="value_states must have the batch, heads"):
        QuantizedCache("KQV", 4).update(k, v[:, :2], layer_idx=0)


def test_bad_input():
    with pytest.raises(ValueError, match="name must be one of"):
        QuantizedCache("nonsense", 4)
    with pytest.raises(ValueError, match="bits must be an integer in"):
        QuantizedCache("KQV", 1)
    with pytest.raises(ValueError, match="window must be an integer in"):
        QuantizedCache("KV", 4, window=-1)
    with pytest.raises(ValueError, match="the cache is empty"):
        QuantizedCache("KV", 4).bytes_per_token()
    with pytest.raises(ValueError, match="attention must be None, 'codes' or 'model'; received 'flash'"):
        QuantizedCache("KV", 4, attention="flash")
    with pytest.raises(ValueError, match="attention='codes' needs a per-vector scheme.*'identity'"):
        QuantizedCache("identity", None, attention="codes")
    with pytest.raises(ValueError, match="'kivi' has none: use attention='model'"):
        QuantizedCache("kivi", 4, keep_decoded=True)
    cache = QuantizedCache("KV", 4, window=2)
    cache.update(*_kv(3), layer_idx=0)
    with pytest.raises(NotImplementedError, match="can be cropped only with window=0.*received 'KV' with window=2"):
        cache.crop(-1)


def _walk(obj, seen) -> int:
    """Bytes of every tensor storage and owning numpy array reachable from ``obj`` (each
    memory block once, by its address: a tensor and an array over the same memory count
    once; a view counts its whole storage, as the memory it keeps alive)."""
    import dataclasses

    if isinstance(obj, np.ndarray):
        while isinstance(obj.base, np.ndarray):
            obj = obj.base
        if isinstance(obj.base, torch.Tensor):  # Tensor.numpy(): the tensor's storage
            obj = obj.base
        elif ("mem", obj.ctypes.data) in seen:
            return 0
        else:
            seen.add(("mem", obj.ctypes.data))
            return obj.nbytes
    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        if ("mem", st.data_ptr()) in seen or st.nbytes() == 0:
            return 0
        seen.add(("mem", st.data_ptr()))
        return st.nbytes()
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return sum(_walk(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_walk(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) or type(obj).__module__.startswith("kvstats."):
        return sum(_walk(v, seen) for k, v in vars(obj).items() if k != "owner")
    return 0


@pytest.mark.parametrize("name,bits,window,keep,attn", [
    ("KQV", 4, 0, None, None), ("KQV", 4, 5, None, None), ("QKQV", 3, 0, True, None),
    ("QKQV", 3, 0, True, "model"), ("KQV", 4, 2, False, "model"), ("K4V2", None, 2, None, None),
    ("kivi", 2, 4, None, None), ("kivi", 2, 0, False, None), ("kivi", 2, 4, None, "model"),
    ("qjl", 2, 0, None, None), ("qjl", 3, 3, None, None),
    # numpy-coded schemes (codes held as numpy arrays, some of them views)
    ("KQV|haar", 3, 2, False, "model"), ("q4_0", None, 0, False, "model"), ("klt", 3, 0, None, "model")])
def test_memory_report_counts_every_byte_the_cache_holds(name, bits, window, keep, attn):
    # A prefill (whose chunk would stay alive through a view of the tail), then decode
    # steps; every tensor/array the layers reference is walked, views by their storage.
    k, v = _kv(75)
    name, _, rotation = name.partition("|")
    params = {"rotation": rotation} if rotation else {}
    cache = QuantizedCache(name, bits, seed=0, window=window, keep_decoded=keep, attention=attn, **params)
    for layer_idx in range(2):
        cache.update(k[:, :, :70], v[:, :, :70], layer_idx=layer_idx)
        for t in range(70, 75):
            cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=layer_idx)
    rep = cache.memory_report()
    assert _walk(cache.layers, set()) == rep["held_bytes"] + rep["fixed_bytes"]
    assert rep["stored_bytes"] == rep["code_bytes"] + rep["tail_bytes"]
    assert rep["tail_bytes"] == 2 * 2 * 4 * 3 * 64 * (cache.layers[0].tail_keys.shape[-2])
    if cache.reads_codes and not cache.keep_decoded:  # both attention paths hold only codes + tail
        # unused capacity: the first chunk is allocated exactly, growth adds 16 tokens
        assert rep["held_bytes"] - rep["stored_bytes"] <= rep["code_bytes"] * 16 / cache.layers[0].n_coded
        assert rep["decoded_copy_bytes"] == 0
    if cache.keep_decoded:
        assert rep["decoded_copy_bytes"] >= 2 * 2 * 4 * 3 * 64 * cache.layers[0].n_coded


@pytest.mark.parametrize("name,bits,window,attn", [("KQV", 4, 3, None), ("kivi", 2, 4, None), ("KQV", 3, 0, "model")])
def test_per_token_figures_are_per_sequence_of_the_batch(name, bits, window, attn):
    # A batch of two sequences holds twice the bytes of one, over the same tokens: the
    # per-token figures (stored, held, fp16, ratio) are those of a batch of one.
    k, v = _kv(40)
    one = QuantizedCache(name, bits, seed=0, window=window, attention=attn)
    two = QuantizedCache(name, bits, seed=0, window=window, attention=attn)
    one.update(k, v, layer_idx=0)
    two.update(torch.cat([k, k]), torch.cat([v, v]), layer_idx=0)
    r1, r2 = one.memory_report(), two.memory_report()
    assert r2["stored_bytes"] == 2 * r1["stored_bytes"] and r2["seq_length"] == r1["seq_length"] == 40
    for key in ("bytes_per_token", "held_bytes_per_token", "fp16_bytes_per_token", "ratio_to_fp16"):
        assert r2[key] == pytest.approx(r1[key], rel=1e-12), key
    assert two.bytes_per_token() == pytest.approx(one.bytes_per_token(), rel=1e-12)


def test_numpy_codes_are_counted_by_their_owning_arrays():
    # held_nbytes of numpy-coded layers walks their SchemeCodes: a view counts as the array
    # that owns its memory, once (today's coders store no views; a future one may)
    from kvstats.models.cache import _array_bytes

    a = np.zeros(10)
    assert _array_bytes([a, a[2:], {"v": a[::2]}], set()) == 80
    assert _array_bytes([a[2:]], set()) == 80 and _array_bytes([np.zeros(3, np.float16)], set()) == 6
    # a tensor and arrays over its memory (Tensor.numpy(), also of a view at an offset, whose
    # base is that view) count as the tensor's storage, once (qjl's sketch is held so)
    t = torch.zeros(4)
    assert _array_bytes([t, t.numpy(), t[1:].numpy()], set()) == 16
    assert _array_bytes([t[1:].numpy(), t], set()) == 16


@pytest.mark.parametrize("params", [{}, {"n_outliers": 4}, {"sketch": "srht"}])
def test_qjl_holds_its_sketches_once_in_float32_with_the_same_codes(params):
    # The cache's numpy qjl coder codes float32 blocks only: its dense sketches are held in
    # float32 (not float64), once (the code-reading attention's Sᵀ is a view of them), an
    # srht sketch as its signs (no materialised matrix); the codes and the decode are bit
    # for bit those of a coder holding float64 sketches.
    from kvstats.quant.schemes import make_scheme

    k, v = _kv(70)
    cache = QuantizedCache("qjl", 3, seed=5, group_size=8, **params)
    cache.update(k[:, :, :40], v[:, :, :40], layer_idx=0)
    for t in range(40, 70):
        cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    lay = cache.layers[0]
    ref = make_scheme("qjl", 3, 64, seed=np.random.SeedSequence([5, 0]), draws=(3,), group_size=8, **params)
    codes = ref.quantize(k[:, :, :64].numpy(), v[:, :, :64].numpy())
    assert torch.equal(lay.key_side.view("signs"), torch.from_numpy(codes.key.inlier.signs))
    assert torch.equal(lay.key_side.view("norms"), torch.from_numpy(codes.key.inlier.norms))
    k_hat, _ = ref.dequantize(codes)
    assert torch.equal(lay.dequantized()[0][:, :, :64], torch.from_numpy(k_hat))
    sketches = [lay.scheme.key_coder.sketch] + ([lay.scheme.key_coder.outlier_sketch] if params.get("n_outliers") else [])
    readers = lay.key_side.fixed_tensors()                                     # the float32 Sᵀ of the reader
    per = 3 * 192 * 64                                                         # heads × m × d per sketch
    assert sum(t.numel() * 4 for t in readers) == len(sketches) * per * 4
    for s, st in zip(sketches, readers):
        assert "matrix" not in vars(s) or s.dense is not None                 # srht: no float64 matrix cached
        if params.get("sketch") == "srht":
            assert s.dense is None
        else:  # a dense sketch is held once: the reader's Sᵀ is a view of the coder's float32 S
            assert s.dense.dtype == np.float32
            assert st.data_ptr() == s.dense.ctypes.data and torch.equal(st, torch.from_numpy(s.dense).mT)
    # held once: the sketches' float32 matrices (srht: the reader's, plus the coder's signs)
    srht_signs = sum(s.signs.nbytes + (0 if s.rows is None else s.rows.nbytes) for s in sketches if s.dense is None)
    assert cache.fixed_nbytes() == len(sketches) * per * 4 + srht_signs


@pytest.mark.parametrize("name,bits,sketches", [("KQV", 4, 1), ("QKQV", 3, 2), ("turboquant_mse", 4, 0)])
def test_each_further_layer_holds_only_its_own_random_state(name, bits, sketches):
    # Codebooks, their look-up tables and the sign table depend on bits and dimension only:
    # held once per cache. A further layer adds only its draws: both sides' rotation signs
    # and the value (and key) sketches, float32.
    k, v = _kv(5)
    cache = QuantizedCache(name, bits, seed=0)
    cache.update(k, v, layer_idx=0)
    one = cache.fixed_nbytes()
    cache.update(k, v, layer_idx=1)
    assert cache.fixed_nbytes() - one == 4 * 3 * 64 * (2 + 64 * sketches)


@pytest.mark.parametrize("name", ["KQV", "QKQV"])
def test_numpy_coded_layers_hold_their_matrices_in_float32_with_the_same_codes(name, monkeypatch):
    # A Haar rotation (and QKQV's dense sketch) makes the layer code with the numpy scheme,
    # on float32 blocks only: its matrices are held in float32, and the decode is bit for
    # bit that of the same cache holding them in float64 (hold_matrices_as disabled)
    from kvstats.quant.mse import MSEQuantizer
    from kvstats.quant.prod import ProdQuantizer

    k, v = _kv(50)

    def run():
        cache = QuantizedCache(name, 4, seed=5, rotation="haar")
        cache.update(k[:, :, :40], v[:, :, :40], layer_idx=0)
        for t in range(40, 50):
            cache.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
        return cache

    held = run()
    lay = held.layers[0]
    for coder in (lay.scheme.key_coder, lay.scheme.value_coder):
        prod = isinstance(coder, ProdQuantizer)       # its rotation is its MSE part's
        rotation = (coder.mse if prod else coder).rotation
        for m in (rotation.matrix(), *([coder.sketch.dense] if prod else [])):
            assert m.dtype == np.float32
    for cls in (MSEQuantizer, ProdQuantizer):
        monkeypatch.setattr(cls, "hold_matrices_as", lambda self, dtype: self)
    wide = run()
    for a, b in zip(held.layers[0].dequantized(), wide.layers[0].dequantized()):
        assert torch.equal(a, b)
    # the Haar matrices (two sides × three heads × 64 × 64) at 4 bytes instead of 8
    assert wide.fixed_nbytes() - held.fixed_nbytes() >= 2 * 3 * 64 * 64 * 4
