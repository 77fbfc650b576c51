"""The transformers peer caches (kvstats.models.peers) and the generic byte count.

No download: a tiny random Llama (LlamaConfig: 2 layers, 2 KV heads, head_dim 64, as in
test_quality_determinism.py) and a character tokenizer. Expected byte counts are worked
out from the layouts transformers 5.x documents (quanto: int4/int2 codes packed in uint8,
a float32 scale and shift per group of 64 values; fp8: one byte per value and one float32
scale per layer and side).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from kvstats.models import QuantizedCache, kl_quality  # noqa: E402
from _tiny_llama import CharTokenizer, tiny_llama  # noqa: E402

from kvstats.models.peers import (PEERS, fp16_bytes_per_token, held_bytes, is_peer,  # noqa: E402
                                  make_peer_cache, memory_held)

HAS_QUANTO = importlib.util.find_spec("optimum.quanto") is not None
needs_quanto = pytest.mark.skipif(not HAS_QUANTO, reason="optimum-quanto not installed")
VOCAB, LAYERS, KV_HEADS, DIM = 512, 2, 2, 64


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=VOCAB, hidden=64, layers=LAYERS, heads=4, kv_heads=KV_HEADS, head_dim=DIM,
                       max_positions=512)
    return model, CharTokenizer(VOCAB)


TEXTS = ["The quick brown fox jumps over the lazy dog. " * 2, "Pack my box with five dozen jugs."]


def _fill(cache, n_prefill, n_steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    for layer in range(LAYERS):
        cache.update(torch.randn(1, KV_HEADS, n_prefill, DIM, generator=g),
                     torch.randn(1, KV_HEADS, n_prefill, DIM, generator=g), layer_idx=layer)
        for _ in range(n_steps):
            cache.update(torch.randn(1, KV_HEADS, 1, DIM, generator=g),
                         torch.randn(1, KV_HEADS, 1, DIM, generator=g), layer_idx=layer)
    return n_prefill + n_steps


# ------------------------------------------------------------------ the generic walk
def test_held_bytes_counts_each_storage_once():
    t = torch.zeros(4, 8)                       # 128 bytes
    a = np.zeros(10)                            # 80 bytes
    obj = {"t": t, "views": [t[1:], t.T], "a": a[2:], "again": (a,), "f": torch.zeros(3, dtype=torch.float16)}
    assert held_bytes(obj) == 128 + 80 + 6
    # objects' attributes and slots are entered; cycles do not loop
    class Slotted:
        __slots__ = ("x", "me")

    s = Slotted()
    s.x, s.me = torch.zeros(5, dtype=torch.uint8), s
    assert held_bytes([s, s]) == 5
    assert held_bytes(torch.empty(0)) == 0
    # an array over a tensor's memory counts as its storage, also at an offset (base: a view)
    assert held_bytes([t, t[1:].numpy(), t.numpy()]) == 128 and held_bytes([t[2:].numpy(), t]) == 128
    # tensors held as dict keys and in sets count too
    assert held_bytes({t: "k"}) == 128 and held_bytes({t, torch.zeros(2)}) == 128 + 8


def test_fp8_peer_bytes_are_one_per_value_plus_the_scales(tiny):
    model, _ = tiny
    cache = make_peer_cache("hf:fp8", model.config)
    n = _fill(cache, 5, 7)
    expected = LAYERS * 2 * (KV_HEADS * n * DIM * 1 + 4)  # e4m3 codes + a float32 scale, K and V
    assert held_bytes(cache) == expected
    rep = memory_held(cache, model.config)
    assert rep["seq_length"] == n and rep["held_bytes_per_token"] == expected / n
    assert rep["fp16_bytes_per_token"] == fp16_bytes_per_token(model.config) == LAYERS * 2 * KV_HEADS * DIM * 2


@needs_quanto
@pytest.mark.parametrize("name,bits", [("hf:quanto-int4", 4), ("hf:quanto-int2", 2)])
@pytest.mark.parametrize("residual", [0, 4])
def test_quanto_peer_bytes_are_packed_codes_scales_shifts_and_the_residual(tiny, name, bits, residual):
    # The QTensor's own (wrapper) storage is as large as a float32 tensor: the walk must
    # count the packed codes it wraps instead, or int4 would read as 32 bits.
    model, _ = tiny
    cache = make_peer_cache(name, model.config, residual_length=residual)
    n = _fill(cache, 5, 10)
    layer = cache.layers[0]
    raw = layer.keys.shape[-2] if layer.keys.dim() == 4 else 0
    coded = n - raw
    assert (raw == 0) == (residual == 0)
    # quanto packs 8 // bits rows of (head, token) vectors into one byte row, padding the last
    packed_rows = -(-KV_HEADS * coded // (8 // bits))
    per_side = packed_rows * DIM + KV_HEADS * coded * 2 * 4 + KV_HEADS * raw * DIM * 4
    assert held_bytes(cache) == LAYERS * 2 * per_side
    assert held_bytes(cache) < layer._quantized_keys.untyped_storage().nbytes() * LAYERS * 2


@pytest.mark.parametrize("name,bits,window,keep", [("KQV", 4, 0, None), ("QKQV", 3, 5, None),
                                                   ("K4V2", None, 0, None), ("KQV", 4, 0, True),
                                                   ("kivi", 2, 4, None), ("identity", None, 0, None),
                                                   ("qjl", 3, 0, None)])  # an array and a tensor share S
def test_the_walk_equals_kvstats_memory_report(name, bits, window, keep):
    cache = QuantizedCache(name, bits, seed=0, window=window, keep_decoded=keep)
    _fill(cache, 40, 6)
    rep = cache.memory_report()
    assert held_bytes(cache) == rep["held_bytes"] + rep["fixed_bytes"]


@pytest.mark.parametrize("dim", [80, 96])
@pytest.mark.parametrize("name,bits", [("KQV", 4), ("QKQV", 3), ("K4V2", None)])
def test_the_walk_equals_the_report_when_the_hadamard_pads(name, bits, dim):
    # a head dimension that is not a power of two pads to d_pad: the coders' first d rows of
    # H_dpad were a slice keeping the whole matrix alive, which the report did not count
    # (24,576 bytes short at d = 80)
    cache = QuantizedCache(name, bits, seed=0)
    g = torch.Generator().manual_seed(0)
    for layer in range(2):
        cache.update(*torch.randn(2, 1, 2, 9, dim, generator=g), layer_idx=layer)
        cache.update(*torch.randn(2, 1, 2, 1, dim, generator=g), layer_idx=layer)
    rep = cache.memory_report()
    assert held_bytes(cache) == rep["held_bytes"] + rep["fixed_bytes"]


def _fill_batch(cache, batch, n_prefill, n_steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    for layer in range(LAYERS):
        for n in (n_prefill, *[1] * n_steps):
            cache.update(*torch.randn(2, batch, KV_HEADS, n, DIM, generator=g), layer_idx=layer)
    return n_prefill + n_steps


@pytest.mark.parametrize("name", ["hf:fp8", pytest.param("hf:quanto-int4", marks=needs_quanto), "KQV"])
def test_memory_held_counts_the_tokens_of_every_sequence(tiny, name):
    # held bytes grow with the batch; per token means per token of one sequence (as
    # memory_report and fp16_bytes_per_token count). Before, held / seq_length put a batch
    # of 2 at twice the bytes per token (fp8: 256.4 for 128.4), its ratio to fp16 at 2x.
    model, _ = tiny
    reps = {}
    for batch in (1, 2):
        cache = (make_peer_cache(name, model.config) if is_peer(name) else QuantizedCache(name, 4, seed=0))
        n = _fill_batch(cache, batch, 5, 7)
        rep = reps[batch] = memory_held(cache, model.config)
        assert rep["batch"] == batch and rep["seq_length"] == n
        assert rep["held_bytes"] == held_bytes(cache)
        assert rep["held_bytes_per_token"] == rep["held_bytes"] / (batch * n)
        assert rep["held_ratio_to_fp16"] == rep["held_bytes_per_token"] / fp16_bytes_per_token(model.config)
        if name == "hf:fp8":             # e4m3 codes of every sequence + one float32 scale per layer and side
            assert rep["held_bytes"] == LAYERS * 2 * (batch * KV_HEADS * n * DIM + 4)
        elif name == "hf:quanto-int4":   # 4-bit codes (2 per byte) + float32 scale and shift per 64 values
            assert rep["held_bytes"] == LAYERS * 2 * batch * KV_HEADS * n * (DIM // 2 + 2 * 4)
        else:                            # kvstats' own count of what grows with the batch, and the fixed
            mr = cache.memory_report()
            assert rep["held_bytes"] == mr["held_bytes"] + mr["fixed_bytes"]
            assert rep["held_bytes"] - mr["fixed_bytes"] == mr["held_bytes_per_token"] * batch * n
    # held = fixed + batch·n·g: per token g + fixed/(batch·n), so 2·(batch 2) − (batch 1) = g
    g = (reps[2]["held_bytes"] - reps[1]["held_bytes"]) / reps[1]["seq_length"]
    assert 2 * reps[2]["held_bytes_per_token"] - reps[1]["held_bytes_per_token"] == pytest.approx(g, rel=1e-12)


def test_memory_held_needs_key_states_to_read_the_batch_from(tiny):
    class Opaque:
        layers = [object()]

        def get_seq_length(self):
            return 3

    with pytest.raises(ValueError, match="cannot tell how many sequences the Opaque holds"):
        memory_held(Opaque(), tiny[0].config)


# ------------------------------------------------------------------ names and errors
def test_names_and_bad_input(tiny, monkeypatch):
    model, tok = tiny
    assert set(PEERS) == {"hf:quanto-int4", "hf:quanto-int2", "hf:fp8"}
    assert is_peer("hf:anything") and not is_peer("KQV") and not is_peer(None)
    with pytest.raises(ValueError, match=r"name must be one of the peers .*'hf:quanto-int8'"):
        make_peer_cache("hf:quanto-int8", model.config)
    with pytest.raises(ValueError, match="hf:fp8 peer takes no parameters.*residual_length=8"):
        make_peer_cache("hf:fp8", model.config, residual_length=8)
    with pytest.raises(ValueError, match=r"must be among .*received \['nbits'\]"):
        make_peer_cache("hf:quanto-int4", model.config, nbits=8)
    with pytest.raises(ValueError, match="residual_length"):
        make_peer_cache("hf:quanto-int4", model.config, residual_length=-1)
    with pytest.raises(ValueError, match="mode must be 'decode'.*raw states"):
        kl_quality(model, tok, TEXTS[:1], "hf:fp8")
    with pytest.raises(ValueError, match="bits must be None for the transformers peer"):
        kl_quality(model, tok, TEXTS[:1], "hf:fp8", 8, mode="decode")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("optimum") else real_find_spec(name, *a))
    with pytest.raises(ValueError, match=r"needs optimum-quanto.*kvstats\[peers\]"):
        kl_quality(model, tok, TEXTS[:1], [("KQV", 4), ("hf:quanto-int4", None)], mode="decode")


# ------------------------------------------------------------------ in kl_quality
def _direct_log_probs(model, ids, cache, prefill):
    """transformers' own cache driven by hand, token by token after ``prefill`` tokens."""
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = [model(input_ids=x[:, :prefill], cache=cache, use_cache=cache is not None).logits[0]]
        for t in range(prefill, len(ids)):
            out.append(model(input_ids=x[:, t:t + 1], cache=cache, use_cache=True).logits[0])
    return torch.log_softmax(torch.cat(out).double(), -1)


@pytest.mark.parametrize("name", [pytest.param(n, marks=needs_quanto) if "quanto" in n else n
                                  for n in ("hf:quanto-int4", "hf:fp8")])
def test_kl_quality_runs_the_peer_as_transformers_does(tiny, name):
    from transformers.cache_utils import QuantizedCache as HF

    model, tok = tiny
    prefill = 4
    df = kl_quality(model, tok, TEXTS[:1], name, mode="decode", prefill_tokens=prefill)
    ids = tok(TEXTS[0])["input_ids"]
    kw = dict(nbits=4, residual_length=0) if "quanto" in name else {}
    ref = _direct_log_probs(model, ids, None, len(ids))
    quant = _direct_log_probs(model, ids, HF("quanto" if "quanto" in name else "fp8", model.config, **kw), prefill)
    kl = (ref.exp() * (ref - quant)).sum(-1).clamp_min(0)[:-1].numpy()
    np.testing.assert_allclose(df.kl.to_numpy(), kl, rtol=1e-9, atol=1e-12)
    # the prefill attends raw states (0 up to the rounding of a shorter pass); token by
    # token the codes are read
    assert np.all(df.kl.to_numpy()[:prefill] < 1e-12) and np.all(df.kl.to_numpy()[prefill:] > 1e-6)
    # why kl_quality refuses mode="prefill" for a peer: one pass over the whole text is the
    # full-precision model, bit for bit
    one_pass = _direct_log_probs(model, ids, HF("quanto" if "quanto" in name else "fp8", model.config, **kw),
                                 len(ids))
    assert torch.equal(one_pass, ref)
    mem = df.attrs["memory"][f"{name}:None"]
    assert mem[0] == mem[2] and mem[1] == fp16_bytes_per_token(model.config)


@needs_quanto
def test_budget_and_residual_matter_and_held_bytes_are_reported(tiny):
    from kvstats.models import summarize_quality

    model, tok = tiny
    configs = [("hf:quanto-int4", None), ("hf:quanto-int2", None), ("KQV", 4)]
    df = kl_quality(model, tok, TEXTS, configs, mode="decode", prefill_tokens=1)
    s = summarize_quality(df).set_index("scheme")
    assert s.loc["hf:quanto-int2", "mean_kl"] > s.loc["hf:quanto-int4", "mean_kl"] > 0
    # int4: 4 bits + a float32 scale and shift per 64 values = 5 bits of a 16-bit fp16 cache
    assert s.loc["hf:quanto-int4", "held_bytes_per_token"] == pytest.approx(
        fp16_bytes_per_token(model.config) * 5 / 16)
    # kvstats' cache holds its stored codes and, besides, fixed rotations and codebooks
    assert s.loc["KQV", "held_bytes_per_token"] > s.loc["KQV", "bytes_per_token"]
    assert s.loc["KQV", "fixed_bytes"] > 0 and s.loc["hf:quanto-int4", "fixed_bytes"] == 0
    # a residual as long as the text keeps everything but the first token in full precision
    long = kl_quality(model, tok, TEXTS, "hf:quanto-int4", mode="decode", prefill_tokens=1, window=512)
    assert long.kl.mean() < df[df.scheme == "hf:quanto-int4"].kl.mean()
    assert long.attrs["bytes_per_token"] > fp16_bytes_per_token(model.config)  # float32 residual


def test_fp16_baseline_takes_v_head_dim_for_the_values():
    # a config whose values are narrower than its keys (DeepSeek-style v_head_dim):
    # 2 bytes x layers x KV heads x (K dim + V dim)
    from transformers import LlamaConfig

    config = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         hidden_size=256, head_dim=64)
    assert fp16_bytes_per_token(config) == 2 * 2 * 2 * (64 + 64)
    config.v_head_dim = 32
    assert fp16_bytes_per_token(config) == 2 * 2 * 2 * (64 + 32)
