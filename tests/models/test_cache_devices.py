"""QuantizedCache under transformers' and accelerate's device moves.

A model dispatched over devices by accelerate (``device_map=...``) moves every input of a
dispatched module to that module's device, the states a KV-sharing model (Gemma3n,
Gemma 4) hands from a producer layer to its reusing layers included: transformers'
``KVSharingDict.to`` calls ``.to(device)`` on each of them — on the codes path a
:class:`~kvstats.models.attention_hook.CodedKV` handle, which answered with a TypeError
naming the attention implementation. Here the model is dispatched with every module on
the CPU and the hooks forced (no accelerator needed), which makes the same calls: the
logits must be those of the undispatched model. A layer's ``offload``/``prefetch``
(transformers' layer offloading) must move nothing, without decoding the layer. A coder's
fixed state (rotation, codebook, sketch) moved or cast is refused before anything is
coded with it, and the growing buffers stay on their tokens' device.
"""

import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.code_attention import code_attention

from test_cache_shared_kv import ARCHS, _decode_logits, _model

pytestmark = pytest.mark.slow

MODES = [pytest.param({}, id="codes"), pytest.param({"keep_decoded": True}, id="codes-decoded-copy"),
         pytest.param({"attention": "model"}, id="model")]


def _dispatched(model):
    """The model with accelerate's hooks on every top-level module and decoder layer, all
    on the CPU (``force_hooks``: a single device would otherwise get none)."""
    from accelerate import dispatch_model

    body = model.model
    device_map = {f"model.{name}": "cpu" for name, _ in body.named_children() if name != "layers"}
    device_map.update({f"model.layers.{i}": "cpu" for i in range(len(body.layers))})
    device_map["lm_head"] = "cpu"
    return dispatch_model(model, device_map=device_map, force_hooks=True,
                          skip_keys=model._skip_keys_device_placement)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("arch", ARCHS)
def test_a_kv_sharing_model_dispatched_by_accelerate_gives_the_undispatched_logits(arch, mode):
    pytest.importorskip("accelerate")
    model = _model(arch, "eager", window=4)  # the sliding producer drops tokens as well
    plain = _decode_logits(model, QuantizedCache("KQV", 4, seed=1, config=model.config, **mode), 12)
    dispatched = _dispatched(model)
    assert hasattr(dispatched.model.layers[0], "_hf_hook")
    got = _decode_logits(dispatched, QuantizedCache("KQV", 4, seed=1, config=model.config, **mode), 12)
    assert torch.equal(got, plain)


def _handle():
    k = torch.randn(1, 2, 5, 64, generator=torch.Generator().manual_seed(0))
    return QuantizedCache("KQV", 4).update(k, k.clone(), layer_idx=0)[0]


def test_a_handle_moves_to_its_own_device_and_dtype_only():
    handle = _handle()
    for args, kwargs in [(("cpu",), {"non_blocking": True}), ((torch.device("cpu"),), {}),
                         ((torch.float32,), {}), ((), {"device": "cpu", "dtype": torch.float32}),
                         ((torch.zeros(1),), {})]:
        assert handle.to(*args, **kwargs) is handle
    with pytest.raises(ValueError, match=r"device must be the CPU .*received meta"):
        handle.to("meta")
    with pytest.raises(ValueError, match=r"dtype must be the cached states' torch.float32 .*received "
                                         r"torch.float16.*attention='model'"):
        handle.to("cpu", torch.float16)


@pytest.mark.parametrize("name,bits,params", [("KQV", 4, {}), ("kivi", 2, {"group_size": 4}),
                                              ("KQV", 3, {"rotation": "haar"})],
                         ids=["codes", "grouped", "model"])
def test_offload_and_prefetch_move_nothing_and_decode_nothing(name, bits, params):
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(1, 2, 12, 64, generator=g), torch.randn(1, 2, 12, 64, generator=g)
    cache, twin = (QuantizedCache(name, bits, seed=2, window=2, **params) for _ in range(2))
    for c in (cache, twin):
        c.update(k[:, :, :9], v[:, :, :9], layer_idx=0)
    layer = cache.layers[0]
    before = cache.memory_report()

    def no_decode():
        raise AssertionError("offload/prefetch decoded the layer")

    layer.dequantized = no_decode
    cache.offload(0)
    layer.prefetch()
    del layer.dequantized
    assert cache.memory_report() == before
    for c in (cache, twin):
        c.update(k[:, :, 9:], v[:, :, 9:], layer_idx=0)
    for a, b in zip(cache.layers[0].dequantized(), twin.layers[0].dequantized()):
        assert torch.equal(a, b)
    if cache.attention == "codes":
        q = torch.randn(1, 4, 1, 64, generator=g)
        assert torch.equal(code_attention(q, cache.layers[0], None, 0.125, 2),
                           code_attention(q, twin.layers[0], None, 0.125, 2))


def test_offloading_a_layer_off_the_cpu_is_refused():
    cache = QuantizedCache("KQV", 3, rotation="haar")
    cache.update(torch.randn(1, 2, 4, 64), torch.randn(1, 2, 4, 64), layer_idx=0)
    cache.layers[0].device = torch.device("meta")   # stands in for an accelerator (attention="model")
    with pytest.raises(NotImplementedError, match="does not offload layers held on meta"):
        cache.offload(0)


@pytest.mark.parametrize("to", [torch.float64, "meta"], ids=["float64", "meta"])
@pytest.mark.parametrize("name", ["signs", "hd", "centroids", "boundaries", "sketch"])
@pytest.mark.parametrize("tokens", [1, 20], ids=["decode-step", "prefill"])
def test_a_coders_fixed_state_moved_or_cast_is_refused(name, to, tokens):
    # a decode step codes in the compiled encoder (when built), which read a cast tensor's
    # memory as float32 (wrong codes, silently) and a meta one's null pointer (a crash); a
    # prefill block codes with torch ops, which cast or failed with a dtype mismatch
    g = torch.Generator().manual_seed(0)
    k = torch.randn(1, 2, 9 + tokens, 64, generator=g)
    cache = QuantizedCache("QKQV", 4)
    cache.update(k[:, :, :9], k[:, :, :9].clone(), layer_idx=0)
    layer = cache.layers[0]
    held = {n: b.view().clone() for n, b in layer.store.items()}
    coder = layer.key_coder
    setattr(coder, name, getattr(coder, name).to(to))
    with pytest.raises(ValueError, match=rf"the coder's {name} must be a float32 CPU tensor of shape"):
        cache.update(k[:, :, 9:], k[:, :, 9:].clone(), layer_idx=0)
    assert all(torch.equal(b.view(), held[n]) for n, b in layer.store.items())  # nothing was kept


def test_a_growing_buffer_grows_on_its_tokens_device():
    # a decoded copy of a model on an accelerator (attention="model") was allocated on the
    # CPU and then concatenated with the tail on the model's device ("meta" stands in)
    from kvstats.models.code_attention import GrowingBuffer

    buf = GrowingBuffer()
    buf.append(torch.empty(1, 2, 5, 3, device="meta"))
    buf.append(torch.empty(1, 2, 30, 3, device="meta"))     # grown past its first allocation
    assert buf.buf.device.type == "meta" and buf.view().shape == (1, 2, 35, 3)
    with pytest.raises(ValueError, match=r"device meta; received .* on cpu"):
        buf.append(torch.zeros(1, 2, 1, 3))
    cpu = GrowingBuffer()
    cpu.append(torch.zeros(1, 2, 1, 3))
    cpu.reserve(1, 2, 40, (3,), torch.float32)                # the compiled encoder's call: where it is
    assert cpu.buf.device.type == "cpu" and cpu.capacity == 41
