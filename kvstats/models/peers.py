"""The KV caches transformers users run today, as peers of :class:`~kvstats.models.QuantizedCache`.

A *peer* is named like a scheme, with the prefix ``hf:``, and is accepted wherever
:func:`~kvstats.models.kl_quality` accepts a scheme name:

- ``"hf:quanto-int4"``, ``"hf:quanto-int2"``: ``transformers.QuantizedCache(backend="quanto",
  nbits=4 or 2)`` (optimum-quanto; the ``peers`` extra). Asymmetric integer codes with a
  float scale and shift (the model's dtype) per group of ``q_group_size`` = 64 values;
  with transformers' default ``axis_key = axis_value = 0`` and a head dimension of 64 a
  group is one token's vector of one head. The newest ``residual_length`` tokens (their
  default 128) are kept in full precision; when the residual fills, *the whole cache* is
  dequantized and quantized again with the new tokens.
- ``"hf:fp8"``: ``transformers.QuantizedCache(backend="fp8")``: E4M3 values with one float32
  scale per layer for the keys and one for the values (all heads), set from the amax of
  the *first* update (the prefill) and frozen: later tokens beyond 448·scale are clamped.

Two things make them differ from kvstats' cache, and both matter for a fair comparison:
their first ``update`` (the prefill) quantizes the states but returns the raw ones, so a
one-pass prefill attends full-precision states (KL exactly 0): they must be run token by
token (``mode="decode"``) after a one-token prefill (a longer prefill chunk is exact,
which :func:`~kvstats.models.kl_quality` refuses beside kvstats schemes); and quanto's
decode step attends the current token's raw key and value (transformers 5.x returns the
new states unquantized beside the dequantized cache), while fp8's codes it first (with
the frozen scale), as kvstats' cache does.

Memory is measured the same way for every cache: :func:`held_bytes` walks the object
generically and sums the bytes of every tensor (and numpy array) it holds, each storage
once; for a tensor subclass that wraps others (quanto's packed ``QTensor``) the wrapped
tensors are counted. For kvstats' cache it equals ``memory_report()``'s
``held_bytes + fixed_bytes`` (tests/models/test_peers.py).
"""

from __future__ import annotations

import importlib.util
import types

import numpy as np

from kvstats._checks import check_int

PEERS = {"hf:quanto-int4": ("quanto", 4), "hf:quanto-int2": ("quanto", 2), "hf:fp8": ("fp8", None)}
"""Peer name -> (transformers backend, nbits)."""

QUANTO_PARAMS = ("q_group_size", "axis_key", "axis_value")
"""Keyword parameters a quanto peer accepts besides its residual length (transformers' names)."""


def is_peer(name: object) -> bool:
    """Whether ``name`` names a transformers peer cache (``"hf:..."``), known or not.

    Examples
    --------
    >>> from kvstats.models.peers import is_peer
    >>> is_peer("hf:fp8"), is_peer("KQV")
    (True, False)
    """
    return isinstance(name, str) and name.startswith("hf:")


def make_peer_cache(name: str, config, *, residual_length: int = 0, **params):
    """A fresh transformers cache for the peer ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`PEERS`.
    config : transformers.PretrainedConfig
        The model's configuration (transformers sizes the cache's layers from it).
    residual_length : int
        Newest tokens the quanto peers keep in full precision (transformers' default is
        128; 0 quantizes every token on arrival). The fp8 peer has none: must be 0.
    **params
        For quanto: ``q_group_size``, ``axis_key``, ``axis_value`` (transformers' defaults
        64, 0, 0 when absent). The fp8 peer takes none.

    Returns
    -------
    transformers.cache_utils.QuantizedCache

    Raises
    ------
    ValueError
        Unknown name, parameters the peer does not take, or optimum-quanto not installed
        for a quanto peer.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig
    >>> from kvstats.models.peers import make_peer_cache, held_bytes
    >>> cfg = LlamaConfig(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    ...                   hidden_size=64)
    >>> cache = make_peer_cache("hf:fp8", cfg)
    >>> _ = cache.update(torch.randn(1, 2, 10, 32), torch.randn(1, 2, 10, 32), layer_idx=0)
    >>> held_bytes(cache)     # 2 x 640 fp8 values + 2 float32 scales
    1288
    """
    if name not in PEERS:
        raise ValueError(f"name must be one of the peers {sorted(PEERS)}; received {name!r}")
    backend, nbits = PEERS[name]
    residual_length = check_int(residual_length, "residual_length", low=0)
    from transformers.cache_utils import QuantizedCache as HFQuantizedCache

    if backend == "fp8":
        if residual_length != 0 or params:
            extra = ([f"residual_length={residual_length}"] if residual_length else []) + sorted(params)
            raise ValueError(f"the hf:fp8 peer takes no parameters (one frozen per-tensor scale, no "
                             f"residual; window must be 0); received {extra}")
        return HFQuantizedCache("fp8", config)
    unknown = sorted(set(params) - set(QUANTO_PARAMS))
    if unknown:
        raise ValueError(f"parameters of {name} must be among {list(QUANTO_PARAMS)}; received {unknown}")
    if importlib.util.find_spec("optimum.quanto") is None:
        raise ValueError(f"the {name} peer needs optimum-quanto, which is not installed: "
                         "pip install 'kvstats[peers]' (or optimum-quanto>=0.2.5)")
    return HFQuantizedCache("quanto", config, nbits=nbits, residual_length=residual_length, **params)


def fp16_bytes_per_token(config) -> float:
    """What an fp16 cache of the model's layers and KV heads stores per token (K and V).

    V's head dimension is the config's ``v_head_dim`` where it has one (models whose
    values are narrower or wider than their keys), else K's.

    Examples
    --------
    >>> from transformers import LlamaConfig
    >>> from kvstats.models.peers import fp16_bytes_per_token
    >>> fp16_bytes_per_token(LlamaConfig(num_hidden_layers=30, num_attention_heads=9,
    ...                                  num_key_value_heads=3, hidden_size=576))
    23040.0
    """
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    v_dim = getattr(config, "v_head_dim", None) or dim
    return float(2 * config.num_hidden_layers * heads * (dim + v_dim))


_OPAQUE = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType,
           types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def held_bytes(obj: object) -> int:
    """Bytes of every tensor and numpy array reachable from ``obj``, each storage once.

    A generic walk: containers (dict, list, tuple, set), objects' ``__dict__`` and
    ``__slots__``, a numpy ``SeedSequence``'s pool (a built scheme's seed); a torch
    tensor counts its whole untyped storage (a view keeps it alive),
    a tensor subclass that wraps others (``__tensor_flatten__``: quanto's ``QTensor``, its
    ``PackedTensor``) counts the tensors it wraps, a numpy array its owning base (a tensor
    and an array on the same memory count once). Modules,
    classes, functions and bound methods are not entered (a bound method's object is the
    cache itself, or not held).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from kvstats.models.peers import held_bytes
    >>> t = torch.zeros(4, 8)                          # 128 bytes
    >>> held_bytes({"a": t, "view": t[:2], "x": [np.zeros(3)]})
    152
    >>> a = np.zeros(4, np.float32)                    # 16 bytes, shared with a tensor
    >>> held_bytes({"a": a, "t": torch.from_numpy(a)}), held_bytes({"t": torch.from_numpy(a), "a": a})
    (16, 16)
    >>> held_bytes([t, t[1:].numpy()])                 # an array over a tensor view: its storage
    128
    """
    return _walk(obj, set())


def _walk(obj: object, seen: set) -> int:
    if isinstance(obj, _OPAQUE):
        return 0
    if isinstance(obj, np.ndarray):
        while isinstance(obj.base, np.ndarray):
            obj = obj.base
        torch = _torch()
        if torch is not None and isinstance(obj.base, torch.Tensor):
            return _walk(obj.base, seen)  # Tensor.numpy() (of a view at an offset too): its storage
        # keyed by address, as a CPU tensor's storage: torch.from_numpy(a) shares a's memory
        key = ("t", obj.ctypes.data, "cpu")
        if obj.nbytes == 0 or key in seen:
            return 0
        seen.add(key)
        return int(obj.nbytes)
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if hasattr(type(obj), "__tensor_flatten__"):  # a wrapper: its own storage is not data
            if ("w", id(obj)) in seen:
                return 0
            seen.add(("w", id(obj)))
            names, _ = obj.__tensor_flatten__()
            return sum(_walk(getattr(obj, n), seen) for n in names)
        storage = obj.untyped_storage()
        key = ("t", storage.data_ptr(), obj.device.type)
        if storage.nbytes() == 0 or key in seen:
            return 0
        seen.add(key)
        return int(storage.nbytes())
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return sum(_walk(k, seen) + _walk(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sum(_walk(v, seen) for v in obj)
    if isinstance(obj, np.random.SeedSequence):  # a C object: no __dict__, its pool an array
        return _walk(obj.pool, seen) + _walk(obj.entropy, seen)
    total = sum(_walk(v, seen) for v in getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                total += _walk(getattr(obj, slot), seen)
    return total


def _torch():
    import sys

    return sys.modules.get("torch")  # no tensor can exist unless torch is imported


def _cached_sequences(cache) -> int:
    """Sequences (batch entries) a cache holds: the leading axis of its layers' 4-D key
    states ``(batch, heads, tokens, head_dim)``, read from instance attributes only
    (kvstats' layers decode ``keys`` on read): kvstats' ``tail_keys``, a transformers
    quantized layer's ``_quantized_keys`` (quanto's QTensor, or fp8's (codes, scale)
    pair), a dynamic layer's ``keys``."""
    for layer in getattr(cache, "layers", ()):
        if not getattr(layer, "is_initialized", True):
            continue
        for name in ("tail_keys", "_quantized_keys", "keys"):
            obj = getattr(layer, "__dict__", {}).get(name)
            if isinstance(obj, (tuple, list)) and obj:
                obj = obj[0]
            shape = getattr(obj, "shape", None)
            if shape is not None and len(shape) == 4:
                return int(shape[0])
    raise ValueError(f"cannot tell how many sequences the {type(cache).__name__} holds: none of its "
                     "initialized layers holds 4-D key states (batch, heads, tokens, head_dim) as "
                     "tail_keys, _quantized_keys or keys")


def memory_held(cache, config) -> dict:
    """Bytes a cache (kvstats' or a peer) holds, by the same walk, and per cached token.

    Returns ``held_bytes`` (:func:`held_bytes` of the cache object), ``seq_length``,
    ``batch`` (sequences the cache holds), ``held_bytes_per_token``
    (``held / (batch · seq_length)``: per token of one sequence, as kvstats'
    ``memory_report`` counts its tokens), ``fp16_bytes_per_token``
    (:func:`fp16_bytes_per_token`, also per token of one sequence) and
    ``held_ratio_to_fp16``. ``held_bytes`` grows with the batch; the per-token figures
    do not (but for fixed bytes, such as rotations or fp8's scales, spread over more
    tokens). Every tensor counts in the dtype it is held in: a full-precision window
    (kvstats' tail, kivi's window included; quanto's residual) in the model's dtype, 4
    bytes per value for a float32 model, against the fp16 reference's 2.

    Raises
    ------
    ValueError
        The cache is empty, or holds no 4-D key states to read the batch from.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig
    >>> from kvstats.models.peers import make_peer_cache, memory_held
    >>> cfg = LlamaConfig(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    ...                   hidden_size=64)
    >>> cache = make_peer_cache("hf:fp8", cfg)
    >>> _ = cache.update(torch.randn(2, 2, 10, 32), torch.randn(2, 2, 10, 32), layer_idx=0)
    >>> rep = memory_held(cache, cfg)     # 2 x 1,280 fp8 values + 2 float32 scales, 20 tokens
    >>> rep["batch"], rep["held_bytes"], rep["held_bytes_per_token"]
    (2, 2568, 128.4)
    """
    n = cache.get_seq_length()
    if n == 0:
        raise ValueError("the cache is empty: memory_held needs at least one cached token")
    batch = _cached_sequences(cache)
    held = held_bytes(cache)
    fp16 = fp16_bytes_per_token(config)
    tokens = batch * n
    return {"held_bytes": held, "seq_length": n, "batch": batch, "held_bytes_per_token": held / tokens,
            "fp16_bytes_per_token": fp16, "held_ratio_to_fp16": held / tokens / fp16}
