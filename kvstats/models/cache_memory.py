"""Byte accounting of :class:`~kvstats.models.QuantizedCache` (its ``memory_report``).

Every byte a cache holds falls in one of two kinds: what grows with the sequence
(``held``: code buffers with their unused capacity, numpy codes, the full-precision
tail, a decoded copy) and what does not (``fixed``: rotations, codebooks, sketches,
look-up tables). ``held_bytes + fixed_bytes`` is the storage of every tensor and array
the layers reference (through kvstats objects, dataclasses, containers and a numpy
``SeedSequence``'s pool; the cache's schemes drop theirs once drawn), each memory block once: a numpy array and a torch tensor over
the same memory (``torch.from_numpy``, ``Tensor.numpy()``) count once, keyed by the
address of the storage that owns it, as :func:`kvstats.models.peers.held_bytes` does.
Python objects that grow with the sequence are counted too: numpy-coded chunks are held
in buffers, adding none per decode step, and those held as objects (klt's) add their
``sys.getsizeof`` to ``held``. The mixins here give the layer and the cache these methods.
"""

from __future__ import annotations

import dataclasses
import sys

from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from kvstats.models.cache_layer import _CodesLayer


def _tensor_bytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _storage_key(t: torch.Tensor) -> tuple:
    return ("mem", t.untyped_storage().data_ptr(), t.device.type)


def _storage_bytes(t: torch.Tensor, seen: set) -> int:
    """Bytes of the storage under ``t`` (all of it: a view keeps it alive), unless counted."""
    key = _storage_key(t)
    if key in seen:
        return 0
    seen.add(key)
    return int(t.untyped_storage().nbytes())


def _array_bytes(obj, seen: set) -> int:
    """Bytes of the numpy arrays (and torch tensors) reachable from ``obj`` (dataclasses,
    kvstats objects, containers), each owning array or storage counted once.

    An array is counted as the array that owns its memory; an array over a tensor's
    memory (``Tensor.numpy()``, whose base is the tensor) as that tensor's storage."""
    if isinstance(obj, np.ndarray):
        while isinstance(obj.base, np.ndarray):
            obj = obj.base
        if isinstance(obj.base, torch.Tensor):
            return _storage_bytes(obj.base, seen)
        key = ("mem", obj.ctypes.data, "cpu")
        if key in seen:
            return 0
        seen.add(key)
        return int(obj.nbytes)
    if isinstance(obj, torch.Tensor):
        return _storage_bytes(obj, seen)
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return sum(_array_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_array_bytes(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) or type(obj).__module__.startswith("kvstats."):
        return sum(_array_bytes(v, seen) for v in getattr(obj, "__dict__", {}).values())
    if isinstance(obj, np.random.SeedSequence):
        # a built scheme keeps its seed (Scheme.seed): a C object without a __dict__ whose
        # pool is an array (16 bytes), missed before
        return _array_bytes(obj.pool, seen) + _array_bytes(obj.entropy, seen)
    return 0


# constants a chunk's objects share with its scheme, not its own (small ints are cached)
_SHARED = (type(None), bool, str, type, np.dtype)


def _object_bytes(obj, seen: set) -> int:
    """Python object overhead (``sys.getsizeof``) of ``obj`` and what it reaches:
    dataclasses and kvstats objects with their ``__dict__``, containers, numbers, numpy
    array headers (the data is :func:`_array_bytes`'s); not the constants they share with
    the scheme (None, bools, strings, dtypes, classes, small ints), each object once."""
    if id(obj) in seen or isinstance(obj, _SHARED) or (type(obj) is int and -5 <= obj <= 256):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, np.ndarray):
        size -= obj.nbytes if obj.flags.owndata else 0
        return size + (0 if obj.base is None else _object_bytes(obj.base, seen))
    if isinstance(obj, torch.Tensor):
        return size
    if isinstance(obj, dict):
        return size + sum(_object_bytes(k, seen) + _object_bytes(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return size + sum(_object_bytes(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) or type(obj).__module__.startswith("kvstats."):
        return size + _object_bytes(getattr(obj, "__dict__", None), seen)
    return size


class _LayerMemory:
    """The byte counts of one :class:`~kvstats.models.cache_layer._CodesLayer`."""

    def code_nbytes(self) -> int:
        """Bytes of the stored codes of the coded tokens (no slack, no tail)."""
        if self.reads_codes:
            return sum(b.nbytes(held=False) for b in self.store.values())
        return self.chunks.nbytes(held=False)

    def tail_nbytes(self) -> int:
        return _tensor_bytes(self.tail_keys) + _tensor_bytes(self.tail_values) if self.is_initialized else 0

    def nbytes(self) -> int:
        return self.code_nbytes() + self.tail_nbytes()

    def decoded_nbytes(self) -> int:
        return sum(b.nbytes() for b in self.decoded.values())

    def held_nbytes(self) -> int:
        """Every byte that grows with the sequence: code buffers (with their slack), numpy
        codes (their buffers, or chunks held as objects with their Python objects), the
        tail, the decoded copy."""
        if self.reads_codes:
            codes = sum(b.nbytes() for b in self.store.values())
        else:
            codes = self.chunks.nbytes()
        return codes + self.tail_nbytes() + self.decoded_nbytes()

    def fixed_nbytes(self, seen: set) -> int:
        """Per-layer state that does not grow: rotations, codebooks, sketches (what ``seen``,
        shared by the layers, has not counted yet: the Hadamard matrix and codebooks are shared)."""
        if not self.reads_codes:
            return _array_bytes(self.scheme, seen) if self.scheme is not None else 0
        total = 0
        if self.key_side is not None:  # the numpy scheme (it codes new groups) and the torch sketches
            total = _array_bytes(self.scheme, seen)
            fixed = (*self.key_side.fixed_tensors(), *self.value_side.fixed_tensors())
        else:
            fixed = (*self.key_coder.fixed_tensors(), *self.value_coder.fixed_tensors())
        return total + sum(_storage_bytes(t, seen) for t in fixed)


class _CacheMemory:
    """The byte counts and ``memory_report`` of :class:`~kvstats.models.QuantizedCache`."""

    def _live(self) -> list[_CodesLayer]:
        return [lay for lay in self.layers if lay.is_initialized]

    def nbytes(self) -> int:
        """Bytes the cache stores: every layer's codes (of the coded tokens) plus its
        full-precision tail, counted in the dtype it is held in (the model's: 4 bytes per
        value for a float32 model, whatever a scheme's own definition of its window, such
        as kivi's float16 one in :mod:`kvstats.quant.uniform`).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> cache.nbytes() == 6 * 3 * (34 + 36) + 4 * 3 * 64 * 2 * 4   # K and V codes + float32 tail
        True
        """
        return sum(layer.nbytes() for layer in self._live())

    def held_nbytes(self) -> int:
        """Every byte the cache holds that grows with the sequence: code buffers with their
        unused capacity, the tail and any decoded copy (:meth:`fixed_nbytes` apart).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> cache.held_nbytes() >= cache.nbytes()
        True
        """
        return sum(layer.held_nbytes() for layer in self._live())

    def fixed_nbytes(self) -> int:
        """Per-layer state that does not grow with the sequence (rotations, codebooks, sketches).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> cache.fixed_nbytes() > 0, QuantizedCache("KQV", 4).fixed_nbytes()   # an empty cache: 0
        (True, 0)
        """
        seen: set = set()
        return sum(layer.fixed_nbytes(seen) for layer in self._live())

    def _tokens(self) -> int:
        layer = next(iter(self._live()), None)
        if layer is None:
            return 0
        return layer.get_seq_length() * layer.tail_keys.shape[0]

    def bytes_per_token(self) -> float:
        """Stored bytes per token of the sequence (all layers, K and V; per sequence of the
        batch). Sliding-window layers hold only their window: their share falls with length.

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> cache.bytes_per_token()                          # 7404 bytes over 10 tokens
        740.4
        """
        n = self._tokens()
        if n == 0:
            raise ValueError("the cache is empty: bytes_per_token needs at least one cached token")
        return self.nbytes() / n

    def fp16_bytes_per_token(self) -> float:
        """What an fp16 cache of the same layers and heads stores per token (K and V each
        with its own heads and head dimension).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> cache.fp16_bytes_per_token()                     # 2 sides × 3 heads × 64 × 2 bytes
        768.0
        """
        layers = self._live()
        if not layers:
            raise ValueError("the cache is empty: fp16_bytes_per_token needs an initialized layer")
        return float(sum(2 * (lay.tail_keys.shape[1] * lay.tail_keys.shape[-1]
                              + lay.tail_values.shape[1] * lay.tail_values.shape[-1])
                         for lay in layers))

    def memory_report(self) -> dict:
        """Every byte the cache holds, by kind, and per token.

        Keys: ``attention`` (what attention reads: "codes", "decoded copy" or "decoded on
        read"), ``attention_fn`` ("codes": the code-reading attention; "model": the model's);
        ``stored_bytes`` (= ``nbytes``: codes of the coded tokens + the tail),
        ``code_bytes``, ``tail_bytes`` (the full-precision tail, window included, in the
        dtype it is held in: ``tail_dtype``, the model's, e.g. ``"float32"``: 4 bytes per
        value, twice the fp16 reference's 2), ``decoded_copy_bytes``, ``held_bytes`` (everything
        that grows with the sequence, including unused buffer capacity and the decoded
        copy), ``fixed_bytes`` (rotations, codebooks, sketches); per cached token:
        ``bytes_per_token`` (stored), ``held_bytes_per_token``, ``fp16_bytes_per_token`` (what
        an fp16 cache holding every token stores, 2 bytes per value); ``ratio_to_fp16``
        (stored / fp16: the tail at its held dtype, so a float32 model's window counts
        twice what the same tokens cost the reference) and
        ``held_to_stored``; ``dropped_tokens`` (of the sliding-window layers, summed over
        them: held nowhere); ``uncoded_tokens`` (summed over the layers: tokens held in
        full precision beyond ``window`` because a token-grouped scheme's newest group —
        kivi's, qjl's, klt's block of 1,024 by default — has not filled; 0 for per-vector
        schemes) and ``uncoded_share`` (their share of the tokens the layers hold: 1.0
        when nothing beyond the window has been coded). Every byte is one the cache holds: ``held_bytes +
        fixed_bytes`` is the storage of every tensor and array its layers reference, plus
        the Python objects of numpy-coded chunks held as objects (klt's; the others add no
        object per decode step).

        Examples
        --------
        >>> import torch
        >>> from kvstats.models import QuantizedCache
        >>> cache = QuantizedCache("KQV", 4, window=4)         # 3 heads of 64: 6 coded tokens, 4 in the tail
        >>> _ = cache.update(torch.randn(1, 3, 10, 64), torch.randn(1, 3, 10, 64), layer_idx=0)
        >>> rep = cache.memory_report()
        >>> rep["code_bytes"], rep["tail_bytes"], rep["stored_bytes"], rep["attention"]
        (1260, 6144, 7404, 'codes')
        >>> rep["tail_dtype"], rep["tail_bytes"] == 4 * 3 * 64 * 2 * 4   # float32: 4 bytes a value
        ('float32', True)
        >>> rep["uncoded_tokens"], rep["uncoded_share"]     # per-vector: only the window is uncoded
        (0, 0.0)
        """
        n = self._tokens()
        if n == 0:
            raise ValueError("the cache is empty: memory_report needs at least one cached token")
        layers = self._live()
        stored, held = self.nbytes(), self.held_nbytes()
        fp16 = self.fp16_bytes_per_token()
        uncoded = sum(lay.uncoded_tokens() for lay in layers)
        held_tokens = sum(lay.n_coded + lay.tail_keys.shape[-2] for lay in layers)
        mode = ("decoded copy" if self.keep_decoded else "codes" if self.attention == "codes" else "decoded on read")
        return {"scheme": self.scheme_name, "bits": self.bits, "window": self.window,
                "seq_length": self.get_seq_length(), "attention": mode, "attention_fn": self.attention,
                "nbytes": stored, "stored_bytes": stored,
                "code_bytes": sum(lay.code_nbytes() for lay in layers),
                "tail_bytes": sum(lay.tail_nbytes() for lay in layers),
                # the dtype tail_bytes counts (the model's; layers hold one each)
                "tail_dtype": ", ".join(sorted({str(lay.tail_keys.dtype).removeprefix("torch.")
                                                for lay in layers})),
                "decoded_copy_bytes": sum(lay.decoded_nbytes() for lay in layers),
                "held_bytes": held, "fixed_bytes": self.fixed_nbytes(),
                "bytes_per_token": stored / n, "held_bytes_per_token": held / n,
                "fp16_bytes_per_token": fp16, "ratio_to_fp16": stored / n / fp16,
                "held_to_stored": held / stored, "dropped_tokens": sum(lay.n_dropped for lay in layers),
                "uncoded_tokens": uncoded, "uncoded_share": uncoded / held_tokens}
