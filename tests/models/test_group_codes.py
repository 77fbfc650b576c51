"""kivi and qjl caches read attention from their codes (kvstats.models.group_codes).

References: the model-attention path of the same cache (``attention="model"``), whose
decoded copy is the numpy coders' own decode (:mod:`kvstats.quant.uniform`,
:mod:`kvstats.quant.qjl_keys`), and plain float64 attention over it.
"""

import numpy as np
import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.attention_hook import CodedKV
from kvstats.models.code_attention import code_attention
from kvstats.models.group_codes import unpack_float
from kvstats.quant.packing import pack_codes
from _attention_reference import dense_attention as _dense, random_kv as _kv

GROUPED = [
    pytest.param("kivi", 2, {"group_size": 8}, id="kivi2-g8"),
    pytest.param("kivi", 3, {"group_size": 8}, id="kivi3-g8"),   # codes across byte boundaries
    pytest.param("kivi", 4, {"group_size": 12}, id="kivi4-g12"),  # value channel groups 12, 12, ..., 4
    pytest.param("qjl", 2, {"group_size": 8}, id="qjl2"),
    # outlier_m 44: the outlier sketch's own scale and a sign row of 5.5 bytes
    pytest.param("qjl", 3, {"group_size": 8, "n_outliers": 4, "outlier_m": 44, "value_group_size": 32},
                 id="qjl3-outliers"),
    pytest.param("qjl", 2, {"group_size": 8, "n_outliers": 2, "sketch": "srht"}, id="qjl2-srht"),
]


@pytest.mark.parametrize("bits", range(1, 9))
def test_unpacking_inverts_numpy_packing(bits):
    c = np.random.default_rng(bits).integers(0, 2 ** bits, (2, 3, 61), dtype=np.uint8)
    got = unpack_float(torch.from_numpy(pack_codes(c, bits)), bits, 61)
    assert torch.equal(got, torch.from_numpy(c).float())


@pytest.mark.parametrize("window,per_head", [(0, True), (3, True), (2, False)])
@pytest.mark.parametrize("name,bits,params", GROUPED)
def test_grouped_code_attention_equals_attention_over_the_decoded_cache(name, bits, params, window, per_head):
    # GQA (6 query heads on 3 KV heads), batch 2, a prefill of 27 tokens then decode steps
    # that fill two more groups; every read is compared with float64 attention over the
    # numpy decode kept by the model path of the same cache (same seed, same codes).
    B, H, d, n_rep = 2, 3, 64, 2
    k, v, q = _kv(B, H, 45, d, seed=1)
    codes = QuantizedCache(name, bits, seed=5, window=window, per_head=per_head, **params)
    model = QuantizedCache(name, bits, seed=5, window=window, per_head=per_head, attention="model", **params)
    assert codes.attention == "codes" and not codes.keep_decoded and model.keep_decoded
    steps = [(0, 27)] + [(t, t + 1) for t in range(27, 45)]
    for lo, hi in steps:
        handle, _ = codes.update(k[:, :, lo:hi], v[:, :, lo:hi], layer_idx=0)
        K_hat, V_hat = model.update(k[:, :, lo:hi], v[:, :, lo:hi], layer_idx=0)
        assert isinstance(handle, CodedKV)
        layer = handle.layer
        # the decode of the held codes (a prefill's keys and values) is the model path's
        # numpy decode: bit for bit for KIVI and for a first chunk (qjl's numpy decode of
        # one chunk; later chunks: the model path decoded them one by one, BLAS rounding)
        Kc, Vc = layer.dequantized()
        tol = 0 if name == "kivi" or lo == 0 else 1e-5
        torch.testing.assert_close(Kc, K_hat, rtol=0, atol=tol)
        torch.testing.assert_close(Vc, V_hat, rtol=0, atol=0)
        Q = hi - lo
        padded = torch.zeros(B, 1, Q, hi)
        padded[1, :, :, 0] = torch.finfo(torch.float32).min
        later = torch.arange(hi)[None, :] > torch.arange(hi - Q, hi)[:, None]
        padded = padded.masked_fill(later, torch.finfo(torch.float32).min)
        for mask in (padded, padded == 0):
            got = code_attention(q[:, :, lo:hi], layer, mask, d ** -0.5, n_rep)
            torch.testing.assert_close(got.double(), _dense(q[:, :, lo:hi], K_hat, V_hat, padded, n_rep),
                                       rtol=1e-4, atol=2e-5)
    group = params["group_size"]
    assert layer.n_coded == (45 - window) // group * group and layer.get_seq_length() == 45


@pytest.mark.parametrize("name,bits,params", GROUPED)
def test_grouped_cache_holds_its_codes_and_nothing_decoded(name, bits, params):
    # The stored bytes are the numpy codes' bytes (packed codes, fp16 scales/zeros or sign
    # bits, norms and outlier indices) and the tail; the buffers grow by whole groups,
    # so nothing else is held; the model path's decoded copy is what the codes path drops.
    k, v, _ = _kv(1, 3, 60, 64, seed=2)
    codes = QuantizedCache(name, bits, seed=3, window=4, **params)
    model = QuantizedCache(name, bits, seed=3, window=4, attention="model", **params)
    for c in (codes, model):
        c.update(k[:, :, :30], v[:, :, :30], layer_idx=0)
        for t in range(30, 60):
            c.update(k[:, :, t:t + 1], v[:, :, t:t + 1], layer_idx=0)
    rc, rm = codes.memory_report(), model.memory_report()
    layer = model.layers[0]
    # the numpy codes of the same tokens, coded at once (same grouping: whole groups)
    scheme_stored = layer.scheme.quantize(k[:, :, :layer.n_coded].numpy(), v[:, :, :layer.n_coded].numpy())
    assert rc["code_bytes"] == scheme_stored.nbytes
    assert rc["held_bytes"] == rc["stored_bytes"] and rc["decoded_copy_bytes"] == 0
    assert rc["attention"] == "codes" and rm["attention"] == "decoded copy"
    copy = 2 * 4 * 3 * 64 * layer.n_coded  # float32 K and V of the coded tokens (+ buffer slack)
    assert copy <= rm["decoded_copy_bytes"] <= 1.5 * copy
    assert rm["stored_bytes"] == rc["stored_bytes"]


def test_a_changed_code_moves_the_attention():
    # The scores and the output are read from the held buffers: change one stored byte of
    # the key codes, of a key scale, of the value codes: the output changes each time.
    k, v, q = _kv(1, 3, 40, 64, seed=4)
    cache = QuantizedCache("kivi", 2, seed=0, group_size=8)
    cache.update(k, v, layer_idx=0)
    layer = cache.layers[0]
    before = code_attention(q[:, :, -1:], layer, None, 0.125, 2)
    for name in ("k_codes", "k_scale", "v_codes"):
        buf = layer.store[name].view()
        saved = buf.clone()
        buf[:, :, 0] = buf[:, :, 0] + (1 if buf.dtype == torch.uint8 else 0.5)
        after = code_attention(q[:, :, -1:], layer, None, 0.125, 2)
        assert (after - before).abs().max() > 1e-6, name
        buf.copy_(saved)


@pytest.mark.parametrize("name,params", [("kivi", {"group_size": 4}), ("qjl", {"group_size": 4})])
def test_greedy_generation_reads_grouped_codes(name, params):
    # Inside a tiny Llama (eager and sdpa): the codes path and the model path agree to
    # float32 rounding at every step and give the same tokens here.
    from test_code_attention import _tiny_llama

    prompt = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(3))
    for attn in ("eager", "sdpa"):
        model = _tiny_llama(attn)

        def run(**kw):
            cache = QuantizedCache(name, 4, seed=1, window=2, **params, **kw)
            with torch.inference_mode():
                out = model.generate(prompt, attention_mask=torch.ones_like(prompt), cache=cache,
                                     max_new_tokens=10, do_sample=False, pad_token_id=0,
                                     output_scores=True, return_dict_in_generate=True)
            return out, cache

        (a, ca), (b, cb) = run(), run(attention="model")
        assert ca.memory_report()["attention_fn"] == "codes" and cb.memory_report()["attention_fn"] == "model"
        assert torch.equal(a.sequences, b.sequences)
        for x, y in zip(a.scores, b.scores):
            torch.testing.assert_close(x, y, rtol=0, atol=1e-4)


def test_unpacking_refuses_bad_bits_and_too_few_bytes():
    packed = torch.from_numpy(pack_codes(np.arange(8, dtype=np.uint8)[None], 3))  # (1, 3)
    for bits in (0, 9):
        with pytest.raises(ValueError, match=rf"bits must be an integer in \[1, 8\]; received {bits}"):
            unpack_float(packed, bits, 8)
    with pytest.raises(ValueError, match=r"packed must hold at least 4 bytes .*9 codes of 3 bits.*received 3"):
        unpack_float(packed, 3, 9)
    assert unpack_float(packed, 3, 8).tolist() == [list(range(8))]


@pytest.mark.parametrize("name,bits,params", [p for p in GROUPED if p.id.startswith("qjl")])
def test_qjl_side_decode_is_the_numpy_decode(name, bits, params):
    # QJLKeySide.decode (the cache reads the numpy decode instead; this is the torch
    # side's own): each part's c·‖k‖·Sᵀσ on its channels, the outlier part on each group's
    # outlier channels, equal to the numpy coder's decode to float32 rounding.
    k, v, _ = _kv(2, 3, 24, 64, seed=9)
    cache = QuantizedCache(name, bits, seed=1, **params)
    cache.update(k, v, layer_idx=0)
    layer = cache.layers[0]
    side = layer.key_side
    want = layer.scheme.key_coder.decode(side.numpy_codes(layer.scheme.key_coder))
    got = side.decode()
    assert got.shape == (2, 3, 24, 64)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("per_head", [True, False])
def test_grouped_codes_are_the_numpy_scheme_with_one_draw_per_head(per_head):
    # Layer l of a qjl cache is make_scheme(..., seed=SeedSequence([seed, l]),
    # draws=(n_kv_heads,)): an independent sketch per KV head (per_head=False: one shared,
    # draws=()); the held codes decode to that scheme's roundtrip of the same keys.
    import kvstats

    k, v, _ = _kv(1, 3, 16, 64, seed=12)
    cache = QuantizedCache("qjl", 2, seed=4, per_head=per_head, group_size=8)
    cache.update(k, v, layer_idx=0)
    cache.update(k, v, layer_idx=1)
    draws = (3,) if per_head else ()
    scheme = kvstats.make_scheme("qjl", 2, 64, seed=np.random.SeedSequence([4, 1]), draws=draws, group_size=8)
    K_hat, V_hat = cache.layers[1].dequantized()
    Kn, Vn = scheme.roundtrip(k.numpy(), v.numpy())
    np.testing.assert_allclose(K_hat.numpy(), Kn, rtol=0, atol=1e-5 * np.abs(Kn).max())
    np.testing.assert_allclose(V_hat.numpy(), Vn, rtol=0, atol=1e-5 * np.abs(Vn).max())
    st = cache.layers[1].key_side.st
    assert st.shape[0] == (3 if per_head else 1)
    if per_head:
        assert (st[0] - st[1]).abs().max() > 0.1  # the heads' sketches differ


def test_a_scheme_registered_with_kivis_coders_under_another_name_reads_its_codes():
    # which path reads a scheme is a fact about its coders, not its name: kivi's SchemeDef
    # under a new name is grouped, reads attention from its codes and equals kivi there
    import dataclasses

    from kvstats.quant.register import registered_scheme
    from kvstats.quant.registry import BUILTIN

    k, v, q = _kv(1, 2, 20, 64, seed=3)
    with registered_scheme(dataclasses.replace(BUILTIN["kivi"], name="kivi_copy")):
        copy = QuantizedCache("kivi_copy", 2, seed=5, group_size=8)
        assert copy.grouped and copy.attention == "codes"
        handle, _ = copy.update(k, v, layer_idx=0)
    same = QuantizedCache("kivi", 2, seed=5, group_size=8)
    ref, _ = same.update(k, v, layer_idx=0)
    for a, b in zip(handle.layer.dequantized(), ref.layer.dequantized()):
        assert torch.equal(a, b)


# --- qjl key scores by the compiled byte-table loop (LUTKernel.sign_scores) ----------------

def _loop():
    from kvstats.models.lut_kernel import kernel

    k = kernel()
    if k is None:
        pytest.skip("no C compiler: the torch path is the only one")
    return k


@pytest.mark.parametrize("params", [
    pytest.param({}, id="m192"),
    pytest.param({"m": 44, "sketch": "srht"}, id="m44-srht"),   # 5.5 bytes per token: a partial last byte
    pytest.param({"m": 256, "group_size": 8}, id="m256"),       # the benchmark's m: 32 bytes, 4 chains of loads
])
def test_qjl_byte_table_scores_are_the_numpy_estimator(params):
    # The loop and the torch path against QJLKeyQuantizer.scores on the same codes, queries
    # with distinct coordinates: a bit or byte read in another order, or another scale
    # (sketch.scale, the float16 norm), moves the scores by far more than the tolerance.
    import kvstats
    from kvstats.models.group_codes import make_sides

    _loop()
    scheme = kvstats.make_scheme("qjl", 3, 64, seed=2, **{"group_size": 8, **params})
    keys, _ = make_sides(scheme)
    K, V = np.random.default_rng(3).standard_normal((2, 2, 3, 40, 64), dtype=np.float32)
    codes = scheme.quantize(K, V)
    keys.append(codes.key)
    q = torch.randn(2, 3, 4, 64, generator=torch.Generator().manual_seed(4))
    want = scheme.key_coder.scores(q.numpy(), codes.key)
    tol = 1e-5 * np.abs(want).max()
    fused, torch_path = keys.scores(q, fused=True), keys.scores(q, fused=False)
    assert fused.shape == (2, 3, 4, 40)
    np.testing.assert_allclose(fused.numpy(), want, rtol=0, atol=tol)
    np.testing.assert_allclose(torch_path.numpy(), want, rtol=0, atol=tol)
    assert torch.equal(keys.scores(q), fused)  # the default on the CPU without outliers


def test_sign_scores_reads_little_endian_bits_of_strided_tokens():
    # A direct reference: σ = 2·bit − 1 with bit i at byte i // 8, bit i % 8 (numpy's
    # bitorder="little"), token rows in a larger buffer (capacity 9 > n = 7), m = 21 (a
    # partial last byte whose padding bits must count 0), float16 norms times the scale.
    k = _loop()
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, (4, 9, 21)).astype(np.uint8)
    bits[..., 21 - 1] = 1
    packed = np.packbits(bits, axis=-1, bitorder="little")
    packed[..., -1] |= 0xE0                                   # set padding bits: must not count
    sq = torch.from_numpy(rng.standard_normal((4, 3, 21)).astype(np.float32))
    norms = torch.from_numpy(rng.uniform(0.5, 2, (4, 9)).astype(np.float16))
    got = k.sign_scores(sq, torch.from_numpy(packed), 7, norms, 0.3)
    sigma = torch.from_numpy(2.0 * bits[:, :7] - 1).float()
    want = 0.3 * (sq @ sigma.mT) * norms[:, None, :7].float()
    assert got.shape == (4, 3, 7)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert k.sign_scores(sq, torch.from_numpy(packed), 0, norms, 0.3).shape == (4, 3, 0)


def test_sign_scores_refuses_arrays_it_would_read_past():
    k = _loop()
    sq, signs, norms = torch.randn(2, 3, 16), torch.zeros(2, 5, 2, dtype=torch.uint8), torch.ones(2, 5).half()
    cases = [
        ((sq, signs[..., :1], 5, norms, 1.0), r"signs must be uint8 \(2, >= 5, 2\).*received torch.uint8 \(2, 5, 1\)"),
        ((sq, signs, 6, norms, 1.0), r"signs must be uint8 \(2, >= 6, 2\).*received torch.uint8 \(2, 5, 2\)"),
        ((sq, signs, 5, norms.float(), 1.0), r"norms must be float16 \(2, >= 5\).*received torch.float32"),
        ((sq, signs[:1], 5, norms, 1.0), r"signs must be uint8 \(2, >= 5, 2\).*received torch.uint8 \(1, 5, 2\)"),
        ((sq[0], signs, 5, norms, 1.0), r"sq must be a real floating-point \(BH, G, m\).*received torch.float32 \(3, 16\)"),
        ((sq, signs, -1, norms, 1.0), r"n must be an integer >= 0.*received -1"),
        ((sq, signs, 5, norms, float("nan")), r"scale must be a finite real number; received nan"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            k.sign_scores(*args)


def test_qjl_fused_scores_are_refused_where_the_loop_does_not_apply():
    import kvstats
    from kvstats.models.group_codes import make_sides

    _loop()
    scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
    keys, _ = make_sides(scheme)
    keys.append(scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 8, 64), dtype=np.float32)).key)
    with pytest.raises(ValueError, match="fused must be None or False here"):
        keys.scores(torch.randn(1, 2, 1, 64), fused=True)
    with pytest.raises(ValueError, match="fused must be None, True or False; received 'yes'"):
        keys.scores(torch.randn(1, 2, 1, 64), fused="yes")



def _filled(name, k, v):
    cache = QuantizedCache(name, 3, seed=0, group_size=8)
    cache.update(k, v, layer_idx=0)
    return cache.layers[0]


def test_code_attention_passes_fused_to_the_grouped_sides(monkeypatch):
    # fused=False reached neither side (qjl's keys used the byte-table loop regardless);
    # kivi's keys and both schemes' values now have loops too: True gives the torch path's
    # numbers, False runs none of the loops.
    from kvstats.models.lut_kernel import LUTKernel

    _loop()
    k, v, q = _kv(1, 3, 40, 64, seed=4)
    qjl, kivi = _filled("qjl", k, v), _filled("kivi", k, v)
    for layer in (qjl, kivi):
        torch.testing.assert_close(code_attention(q[:, :, -1:], layer, None, 0.125, 2, fused=True),
                                   code_attention(q[:, :, -1:], layer, None, 0.125, 2, fused=False),
                                   atol=1e-5, rtol=1e-5)

    def loop_called(*args, **kwargs):
        raise AssertionError("a compiled loop ran")

    for name in ("sign_scores", "group_scores", "token_accumulate"):
        monkeypatch.setattr(LUTKernel, name, loop_called)
    for layer in (qjl, kivi):
        code_attention(q[:, :, -1:], layer, None, 0.125, 2, fused=False)
        with pytest.raises(AssertionError, match="compiled loop ran"):
            code_attention(q[:, :, -1:], layer, None, 0.125, 2)


# --- kivi's keys and the per-token values by compiled loops (group_scores, token_accumulate) --

def _uniform_case(bits, BH, cap, D, rows, width, seed):
    """Integer codes (BH, cap, D) with every code value present, their pack_codes bytes, and
    float16 scale/zero (BH, rows, width) distinct per row and column (a group read from
    the wrong row or column moves the result)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2 ** bits, (BH, cap, D), dtype=np.uint8)
    x[0, 0, :min(D, 2 ** bits)] = np.arange(min(D, 2 ** bits))
    s = torch.from_numpy(rng.uniform(0.5, 2.0, (BH, rows, width)).astype(np.float16))
    z = torch.from_numpy(rng.uniform(-3, 3, (BH, rows, width)).astype(np.float16))
    return x, torch.from_numpy(pack_codes(x, bits)), s, z


@pytest.mark.parametrize("bits", range(1, 9))
def test_group_scores_read_packed_codes_per_token_group(bits):
    # Direct reference: q · (x ⊙ s[t // group] + z[t // group]) in float64, D = 21 channels
    # (a partial last word of codes), n = 13 of 16 rows (strided tokens) in groups of 4 (a
    # partial last group), 3 queries (not the loop's 8 tokens at a time).
    k = _loop()
    x, packed, s, z = _uniform_case(bits, 2, 16, 21, 4, 21, seed=bits)
    q = torch.randn(2, 3, 21, generator=torch.Generator().manual_seed(bits))
    got = k.group_scores(q, packed, 13, s, z, bits, 4)
    rows = torch.arange(13) // 4
    k_hat = torch.from_numpy(x[:, :13]).double() * s.double()[:, rows] + z.double()[:, rows]
    want = q.double() @ k_hat.mT
    assert got.shape == (2, 3, 13)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5 * float(want.abs().max()))
    assert k.group_scores(q, packed, 0, s, z, bits, 4).shape == (2, 3, 0)


@pytest.mark.parametrize("bits", range(1, 9))
def test_token_accumulate_reads_packed_codes_per_channel_group(bits):
    # Direct reference: Σ_t w_t (x_t ⊙ s_t[j // 8] + z_t[j // 8]) in float64, D = 21 in
    # channel groups 8, 8, 5, n = 7 of 9 rows.
    k = _loop()
    x, packed, s, z = _uniform_case(bits, 2, 9, 21, 9, 3, seed=10 + bits)
    w = torch.rand(2, 3, 7, generator=torch.Generator().manual_seed(bits))
    got = k.token_accumulate(w, packed, s, z, bits, 8, 21)
    cols = torch.arange(21) // 8
    v_hat = torch.from_numpy(x[:, :7]).double() * s.double()[:, :7, cols] + z.double()[:, :7, cols]
    want = w.double() @ v_hat
    assert got.shape == (2, 3, 21)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5 * float(want.abs().max()))


@pytest.mark.parametrize("bits,group,dim", [(2, 8, 64), (3, 8, 40), (4, 32, 64), (4, 12, 64), (5, 16, 24)])
def test_kivi_loops_equal_the_torch_path_and_the_numpy_decode(bits, group, dim):
    # The sides' default (the loops on the CPU) against fused=False (unpack_float and
    # matmuls) and against the numpy scheme's own decode.
    import kvstats
    from kvstats.models.group_codes import make_sides

    _loop()
    scheme = kvstats.make_scheme("kivi", bits, dim, residual=0, group_size=group)
    keys, values = make_sides(scheme)
    codes = scheme.quantize(*np.random.default_rng(bits).standard_normal((2, 2, 3, 3 * group, dim),
                                                                         dtype=np.float32))
    keys.append(codes.key)
    values.append(codes.value)
    K_hat, V_hat = (torch.from_numpy(a).double() for a in scheme.dequantize(codes))
    g = torch.Generator().manual_seed(bits)
    q, p = torch.randn(2, 3, 4, dim, generator=g), torch.softmax(torch.randn(2, 3, 4, 3 * group, generator=g), -1)
    want_s, want_v = q.double() @ K_hat.mT, p.double() @ V_hat
    for fused in (None, True, False):
        torch.testing.assert_close(keys.scores(q, fused=fused).double(), want_s, rtol=0,
                                   atol=1e-5 * float(want_s.abs().max()))
        torch.testing.assert_close(values.accumulate(p, fused=fused).double(), want_v, rtol=0,
                                   atol=1e-5 * float(want_v.abs().max()))


def test_uniform_loops_refuse_arrays_they_would_read_past():
    k = _loop()
    q, w = torch.randn(2, 3, 16), torch.rand(2, 3, 5)
    c, s, z = torch.zeros(2, 5, 8, dtype=torch.uint8), torch.ones(2, 2, 16).half(), torch.zeros(2, 2, 16).half()
    sv, zv = torch.ones(2, 5, 2).half(), torch.zeros(2, 5, 2).half()
    key_cases = [
        ((q, c[..., :7], 5, s, z, 4, 4), r"codes must be uint8 \(2, >= 5, 8\).*received torch.uint8 \(2, 5, 7\)"),
        ((q, c, 6, s, z, 4, 4), r"codes must be uint8 \(2, >= 6, 8\)"),
        ((q, c, 5, s[:, :1], z, 4, 4), r"scale must be float16 \(2, >= 2, 16\).*received torch.float16 \(2, 1, 16\)"),
        ((q, c, 5, s, z.float(), 4, 4), r"zero must be float16 \(2, >= 2, 16\).*received torch.float32"),
        ((q, c, 5, s, z, 4, 0), r"group must be an integer >= 1; received 0"),
        ((q, c, 5, s, z, 9, 4), r"bits must be an integer in \[1, 8\]; received 9"),
        ((q[0], c, 5, s, z, 4, 4), r"q must be a real floating-point \(BH, G, D\)"),
        ((q, c, -1, s, z, 4, 4), r"n must be an integer >= 0.*received -1"),
    ]
    for args, match in key_cases:
        with pytest.raises(ValueError, match=match):
            k.group_scores(*args)
    value_cases = [
        ((w, c, sv[:, :4], zv, 4, 8, 16), r"scale must be float16 \(2, >= 5, 2\).*received torch.float16 \(2, 4, 2\)"),
        ((w, c, sv, zv[..., :1], 4, 8, 16), r"zero must be float16 \(2, >= 5, 2\)"),
        ((w, c, sv, zv, 4, 8, 17), r"codes must be uint8 \(2, >= 5, 9\)"),
        ((w, c, sv, zv, 4, 8, 0), r"dim must be an integer in \[1, 4096\]; received 0"),
        ((w[:1], c, sv, zv, 4, 8, 16), r"codes must be uint8 \(1, >= 5, 8\)"),
    ]
    for args, match in value_cases:
        with pytest.raises(ValueError, match=match):
            k.token_accumulate(*args)
    # zero with strides of its own (another buffer's capacity) is read at those strides
    z2 = torch.randn(2, 4, 16).half()[:, ::2]
    torch.testing.assert_close(k.group_scores(q, c, 5, s, z2, 4, 4), k.group_scores(q, c, 5, s, z2.contiguous(), 4, 4))
