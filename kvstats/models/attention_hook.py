"""The hook that lets a transformers model read attention from a cache's codes.

:meth:`kvstats.models.QuantizedCache.update` returns a :class:`CodedKV` handle instead of
key/value tensors, and :func:`install` wraps transformers' ``"sdpa"`` and ``"eager"``
attention functions (the global ``AttentionInterface``) so that a handle is routed to the
code-reading attention: one query (a decode step) → :func:`kvstats.models.code_attention.
code_attention`; several (a prefill chunk) → a transient decode of the layer given to the
model's own function, whose O(Q·L·d) work dwarfs the decode and whose output is then
bit-identical to the model-attention path (``attention="model"``). Every other call goes, unchanged, to the function
transformers would have called (the registered sdpa, or the model module's own
``eager_attention_forward``). Other attention implementations (flash, flex) are not
wrapped: a handle reaching them raises a TypeError that says so.

Why wrap rather than register a new implementation name: models are loaded with
``"eager"`` or ``"sdpa"`` (``kvstats.models.load_model`` uses eager), and the cache must
work in them as passed to ``model(...)`` or ``generate`` without touching the model.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from kvstats.models.code_attention import code_attention

__all__ = ["CodedKV", "install"]


class CodedKV:
    """What the cache's ``update`` returns in code-reading mode: a handle on the layer.

    Only the wrapped ``"sdpa"``/``"eager"`` attention functions (:func:`install`) read it;
    anything else touching it gets a TypeError that explains why.

    Examples
    --------
    >>> import torch
    >>> from kvstats.models import QuantizedCache
    >>> k = v = torch.randn(1, 2, 5, 64)
    >>> handle, same = QuantizedCache("KQV", 4).update(k, v, layer_idx=0)
    >>> type(handle).__name__, handle is same, handle.layer.get_seq_length()
    ('CodedKV', True, 5)
    >>> handle.shape
    Traceback (most recent call last):
    ...
    TypeError: QuantizedCache returned a handle on its codes (attribute 'shape' was asked for): ...
    >>> handle[:, :, :3]
    Traceback (most recent call last):
    ...
    TypeError: QuantizedCache returned a handle on its codes (it was indexed, ...): ...
    >>> keys, values = handle
    Traceback (most recent call last):
    ...
    TypeError: QuantizedCache returned a handle on its codes (it was indexed, ...): ...
    """

    __slots__ = ("layer",)

    def __init__(self, layer):
        self.layer = layer

    @staticmethod
    def _refuse(what: str):
        raise TypeError(
            f"QuantizedCache returned a handle on its codes ({what}): attention is read from the codes by "
            "the wrapped 'sdpa'/'eager' attention functions only. Use a model with attn_implementation "
            "'eager' or 'sdpa', or QuantizedCache(..., attention='model').")

    def __getattr__(self, name: str):
        self._refuse(f"attribute {name!r} was asked for")

    def to(self, *args, **kwargs) -> CodedKV:
        """The handle itself, for a move that changes nothing: to the CPU (where the codes
        and the code-reading attention live) and the cached states' dtype. accelerate moves
        the states a KV-sharing model hands between its layers (transformers'
        ``KVSharingDict.to``) to each dispatched layer's device; another device or dtype is
        a ValueError that says why (``Tensor.to``'s arguments, any form).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> k = torch.randn(1, 2, 5, 64)
        >>> handle, _ = QuantizedCache("KQV", 4).update(k, k, layer_idx=0)
        >>> handle.to("cpu", non_blocking=True) is handle, handle.to(torch.float32) is handle
        (True, True)
        >>> handle.to("cuda:1")
        Traceback (most recent call last):
        ...
        ValueError: device must be the CPU for a handle on a QuantizedCache's codes ...
        """
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)  # what Module.to parses with
        held = self.layer.tail_keys
        if device is not None and device.type != held.device.type:
            raise ValueError(f"device must be the CPU for a handle on a QuantizedCache's codes (the codes and "
                             f"the code-reading attention live there); received {device}: keep the model's "
                             f"attention layers on the CPU")
        if dtype is not None and dtype != held.dtype:
            raise ValueError(f"dtype must be the cached states' {held.dtype} for a handle on a QuantizedCache's "
                             f"codes (the code-reading attention returns the query's dtype); received {dtype}: "
                             f"use QuantizedCache(..., attention='model') for decoded states")
        return self

    # Python looks it up on the type, not through __getattr__; iteration and unpacking fall
    # back to it (no __iter__: the handle is not an Iterable). What code outside the attention
    # does with states a model hands on, e.g. Gemma 4's assistant drafting slicing a
    # KV-sharing model's shared_kv_states.
    def __getitem__(self, index):
        self._refuse("it was indexed, iterated or unpacked as a tensor, by code outside the attention functions")


def _module_eager(module: torch.nn.Module) -> Callable:
    """The ``eager_attention_forward`` of the module's own modeling file (what
    ``get_interface("eager", default)`` would have returned)."""
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        from transformers.models.llama.modeling_llama import eager_attention_forward as fn
    return fn


def _wrap(previous: Callable | None, name: str) -> Callable:
    # eager returns the attention probabilities beside its output (output_attentions=True
    # collects them), sdpa returns None
    eager = name == "eager"
    # the parameters after attention_mask, in each function's order (transformers' eager
    # takes scaling first, sdpa dropout): a positional argument is read by its name
    positional = ("scaling", "dropout") if eager else ("dropout", "scaling", "is_causal")

    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        fn = previous if previous is not None else _module_eager(module)
        if isinstance(key, CodedKV) and query.shape[2] > 1:
            # A prefill chunk: its O(Q·L·d) attention dwarfs decoding the layer once, and
            # running the model's own function on the transient decode keeps the prefill
            # bit-identical to attention='model' (float rounding differences would flip
            # codes on boundaries in later layers and change the run).
            key, value = key.layer.dequantized()
        elif isinstance(key, CodedKV):
            given = {**dict(zip(positional, args)), **kwargs}
            dropout = given.get("dropout") or 0.0
            if dropout:
                raise ValueError(f"dropout must be 0 when attention is read from codes (inference only); "
                                 f"received {dropout}")
            # each changes the scores or weights in a way the code-reading loops do not apply
            # (position_bias: an additive per-head bias, e.g. Inkling's relative positions;
            # sinks, s_aux: extra softmax logits). A sliding_window needs nothing: eager and
            # sdpa take it from the mask transformers builds, which code_attention applies.
            for arg in ("softcap", "s_aux", "sinks", "position_bias"):
                got = given.get(arg)
                if got is not None:
                    got = f"a tensor of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor) else repr(got)
                    raise ValueError(f"{arg} is not supported by the code-reading attention; received "
                                     f"{got} (use QuantizedCache(..., attention='model'))")
            scaling = given.get("scaling")
            scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
            n_rep = query.shape[1] // key.layer.n_heads
            if eager:
                return code_attention(query, key.layer, attention_mask, scaling, n_rep, weights=True)
            return code_attention(query, key.layer, attention_mask, scaling, n_rep), None
        return fn(module, query, key, value, attention_mask, *args, **kwargs)

    attention._kvstats_wrapped = True
    attention.__wrapped__ = previous  # the function ordinary tensors go to (None: the model's eager)
    return attention


def install() -> None:
    """Route :class:`CodedKV` handles to :func:`code_attention` (idempotent).

    Wraps the ``"sdpa"`` and ``"eager"`` entries of transformers' global
    ``AttentionInterface``; calls with ordinary tensors go unchanged to the function that
    was registered (sdpa) or to the calling model's own eager function.

    Examples
    --------
    >>> install(); install()
    >>> from transformers import AttentionInterface
    >>> AttentionInterface._global_mapping["eager"]._kvstats_wrapped
    True
    """
    from transformers import AttentionInterface

    mapping = AttentionInterface._global_mapping
    for name in ("sdpa", "eager"):
        current = mapping.get(name)
        if not getattr(current, "_kvstats_wrapped", False):
            AttentionInterface.register(name, _wrap(current, name))
