"""One layer of :class:`~kvstats.models.QuantizedCache`: the codes store and its tail.

A layer holds the scheme's codes of its oldest tokens and a full-precision tail of the
newest (the cache's ``window``, plus an incomplete token group of kivi/qjl/klt, counted
by ``uncoded_tokens`` and announced once per cache by :class:`UncodedTokensWarning`). Three storage
modes share the tail, the grouping, the sliding-window drop, crop and the batch-row
selection of beam search: torch buffers of per-vector codes written by
:class:`~kvstats.models.code_attention.SideCoder`, torch buffers of the token groups that
kivi's/qjl's numpy coders store (:mod:`kvstats.models.group_codes`), and the numpy
``SchemeCodes`` of the numpy-only schemes (one per coded chunk, held in growing buffers:
:class:`~kvstats.models.growing_buffer.CodeChunks`). The adapter to
transformers' ``Cache`` is :mod:`kvstats.models.cache`, the byte accounting
:mod:`kvstats.models.cache_memory`.
"""

from __future__ import annotations

import math
import warnings

from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers.cache_utils import DynamicLayer

from kvstats._checks import check_int
from kvstats.models.attention_hook import CodedKV
from kvstats.models.cache_memory import _LayerMemory
from kvstats.models.code_attention import SideCoder
from kvstats.models.growing_buffer import CodeChunks, GrowingBuffer
from kvstats.models.group_codes import make_sides
from kvstats.quant.coder import float32_limits, storable_limits

if TYPE_CHECKING:
    from kvstats.models.cache import QuantizedCache


class UncodedTokensWarning(UserWarning):
    """A :class:`~kvstats.models.QuantizedCache` was read for attention while a layer held
    more tokens in full precision beyond its ``window`` than coded: the scheme codes whole
    groups of tokens (kivi, qjl: ``group_size``, 32 by default; klt: its block, 1024 by
    default) and the newest, incomplete group stays uncoded until it fills. A prompt
    shorter than ``window`` plus one group is not quantized at all. Issued once per cache;
    ``memory_report()["uncoded_tokens"]`` counts those tokens whether or not it warns.

    Examples
    --------
    >>> import warnings, torch
    >>> from kvstats.models.cache import QuantizedCache, UncodedTokensWarning
    >>> cache = QuantizedCache("kivi", 2)                 # groups of 32 tokens
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = cache.update(torch.randn(1, 2, 20, 64), torch.randn(1, 2, 20, 64), layer_idx=0)
    >>> [w.category.__name__ for w in caught], cache.memory_report()["uncoded_tokens"]
    (['UncodedTokensWarning'], 20)
    """


class _CodesLayer(_LayerMemory, DynamicLayer):
    """One layer of :class:`QuantizedCache`: codes + a full-precision tail."""

    def __init__(self, owner: QuantizedCache, layer_idx: int):
        self.tail_keys = self.tail_values = None  # the full-precision tail (what the layer holds in floats)
        super().__init__()
        self.owner, self.layer_idx = owner, layer_idx
        self.n_heads = 0
        self.n_coded = 0                        # coded tokens held (the oldest held tokens)
        # a sliding-window layer (the model's config): tokens W or more positions back are
        # never attended again and are dropped (n_dropped), as transformers' own
        # DynamicSlidingWindowLayer does; its masks are sized by get_mask_sizes
        self.sliding_window = owner.sliding_windows.get(layer_idx)
        self.is_sliding = self.sliding_window is not None
        self.n_dropped = 0
        self._least_limits: dict[int, float] = {}   # coder id -> its smallest storable limit
        self.scheme = None                      # numpy Scheme (numpy-coded schemes)
        self.chunks = CodeChunks()              # their SchemeCodes, one per coded chunk
        self.key_coder: SideCoder | None = None  # torch coders (code-reading schemes)
        self.value_coder: SideCoder | None = None
        self.key_side = self.value_side = None   # kivi/qjl code-reading sides (group_codes)
        self.store: dict[str, GrowingBuffer] = {}
        # the decoded copy, when kept: {"k", "v"} (decoded K/V for the model's attention) or,
        # read by the code-reading attention, the looked-up values under the store's names
        # {"k_codes", "v_codes"[, "k_signs", "v_signs"]} (rotated/sketched space, float32)
        self.decoded: dict[str, GrowingBuffer] = {}
        self._half: bool | None = None          # float16 norms on both sides (the C loops' format)
        self._sides: dict[str, dict[str, GrowingBuffer]] = {}

    def _check_states(self, key_states, value_states) -> tuple[float, float]:
        """Refuse states the layer cannot hold: not 4-D float, not finite, no sequence or
        head, values shaped or typed unlike the keys, or (after the first update) another
        dtype, batch, head count or head dimension — which the growing code buffers would
        otherwise take in place (and the compiled encoder write past their rows).

        Returns each side's largest magnitude (0 for a meta or empty tensor): the one
        reduction that finds a NaN/inf also bounds every stored quantity (:meth:`_check_range`)."""
        for name, t in (("key_states", key_states), ("value_states", value_states)):
            if not isinstance(t, torch.Tensor) or t.ndim != 4 or not t.is_floating_point():
                got = (f"{t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor)
                       else type(t).__name__)
                raise ValueError(f"{name} must be a floating-point tensor (batch, heads, tokens, dim); "
                                 f"received {got}")
        tops = []
        for name, t in (("key_states", key_states), ("value_states", value_states)):
            # now, not steps later: a window (or kivi's/qjl's open group) held the token in
            # full precision, attention read NaN silently, and a later valid update was
            # refused naming the coder's argument (a meta tensor has no values to check)
            top = 0.0 if t.device.type == "meta" or not t.numel() else float(t.detach().abs().amax())
            tops.append(top)
            if not math.isfinite(top):   # amax passes a NaN on, as it does an inf
                bad = int((~torch.isfinite(t)).sum())
                raise ValueError(f"{name} must be finite; received {bad} NaN/inf value(s) in a tensor of "
                                 f"shape {tuple(t.shape)} and dtype {t.dtype}")
        if not (key_states.shape[0] and key_states.shape[1]):
            # no sequence or no head to code: batch 0 was held as an empty cache, heads 0
            # failed inside the coders' construction with a TypeError about their exports
            raise ValueError(f"key_states must have at least one sequence and one head (batch, heads, "
                             f"tokens, dim); received shape {tuple(key_states.shape)}")
        if value_states.shape != key_states.shape:
            # one scheme codes both sides at one head dimension
            raise ValueError("value_states must have the batch, heads, tokens and head dimension of "
                             f"key_states (batch, heads, tokens, dim); received keys {tuple(key_states.shape)}, "
                             f"values {tuple(value_states.shape)} (models whose values have another head "
                             f"dimension, or that cache a compressed latent and a rope key, as MLA attention "
                             f"does, are not supported: use transformers' DynamicCache)")
        # one dtype for both sides and every update: torch.cat with the tail (and the decoded
        # parts) promoted mixed dtypes silently, so the states returned changed dtype
        held_dtype = self.tail_keys.dtype if self.is_initialized else key_states.dtype
        if key_states.dtype != held_dtype or value_states.dtype != held_dtype:
            raise ValueError("key_states and value_states must have one dtype"
                             + (f", this layer's {held_dtype}" if self.is_initialized else "")
                             + f"; received keys {key_states.dtype}, values {value_states.dtype}")
        if self.is_initialized:
            held = (self.tail_keys.shape[0], self.tail_keys.shape[1], self.tail_keys.shape[3])
            got = (key_states.shape[0], key_states.shape[1], key_states.shape[3])
            if got != held:
                raise ValueError(f"key_states must have this layer's (batch, heads, dim) = {held}; received "
                                 f"{got} (shape {tuple(key_states.shape)}): a cache holds one batch of "
                                 f"sequences (reset() it, or use a new cache, for another batch)")
        return tops[0], tops[1]

    def _check_range(self, key_states, value_states, tops: tuple[float, float]) -> None:
        """Refuse finite states the scheme's format cannot store, at the update that brings
        them (beside the finiteness check of :meth:`_check_states`, after the coders exist):
        in a window or an open token group they were held, then refused steps later by a
        valid update, naming the coder's argument. Each coder states its own ranges
        (``storable_limits``, kvstats/quant/coder.py) of what it codes: the torch coders
        the tensor, the numpy ones the float32 array the cache hands them (a float64 value
        beyond float32 is named first, as it is)."""
        torch_side = self.key_coder is not None
        coders = (self.key_coder, self.value_coder) if torch_side else (self.scheme.key_coder,
                                                                          self.scheme.value_coder)
        for name, t, coder, top in (("key_states", key_states, coders[0], tops[0]),
                                    ("value_states", value_states, coders[1], tops[1])):
            if t.device.type == "meta" or not t.numel():
                continue
            # every value a coder states is at most max|x|·√d (coder.py): below its smallest
            # limit (a constant of the coder; a 0.1% margin for float32 rounding of the norms)
            # nothing can fail, and the rules (tens of µs a side) are skipped
            if top * math.sqrt(t.shape[-1]) <= 0.999 * self._least_limit(coder, t, torch_side):
                continue
            x = t.detach()
            limits = (storable_limits(coder, x) if torch_side else
                      float32_limits(x) + storable_limits(coder, x.to("cpu", torch.float32).numpy()))
            for what, limit, value in limits:
                if not value <= limit:
                    raise ValueError(
                        f"{name} must have {what} at most {limit:.6g} for layer {self.layer_idx}'s "
                        f"{self.owner.scheme_name!r} codes; received {value:.6g} (nothing was cached: "
                        f"rescale the states, or choose a wider format)")

    def _least_limit(self, coder, t, torch_side: bool) -> float:
        """The smallest limit of ``coder``'s storable ranges (read once per coder, on a zero
        state of ``t``'s head dimension)."""
        least = self._least_limits.get(id(coder))
        if least is None:
            probe = torch.zeros(1, 1, 1, t.shape[-1], dtype=torch.float32)
            limits = storable_limits(coder, probe if torch_side else probe.numpy())
            least = self._least_limits[id(coder)] = min((limit for _, limit, _ in limits),
                                                         default=float(torch.finfo(torch.float32).max))
        return least

    # transformers' generic code reads a layer's ``keys``/``values`` as all the cached
    # states: an encoder-decoder model's cross-attention reuses them that way after its
    # first step, DiffusionGemma's decoder reads its encoder's prompt states so. Here they
    # are the decoded keys and values (a transient, as :meth:`dequantized`), never the
    # tail alone, which cross-attention read silently; of a sliding-window layer the last
    # ``W − 1`` held tokens, what transformers' DynamicSlidingWindowLayer holds (this one
    # holds a few more before a drop, and a whole prefill until the next update).
    @property
    def keys(self) -> torch.Tensor | None:
        return self._states(0)

    def _states(self, side: int) -> torch.Tensor | None:
        if not self.is_initialized:
            return None
        states = self.dequantized()[side]
        return states[..., -(self.sliding_window - 1):, :] if self.is_sliding else states

    @keys.setter
    def keys(self, value) -> None:
        self._set_states("keys", value)

    @property
    def values(self) -> torch.Tensor | None:
        return self._states(1)

    @values.setter
    def values(self, value) -> None:
        self._set_states("values", value)

    def _set_states(self, name: str, value) -> None:
        # transformers' layer classes set them to None (construction, reset); nothing else may
        if value is not None:
            raise TypeError(f"a QuantizedCache layer's {name} are decoded from its codes and cannot be "
                            f"assigned (offloading and other in-place edits are not supported); received "
                            f"{type(value).__name__}")
        setattr(self, f"tail_{name}", None)

    # transformers' layer offloading (a Cache built with offloading=True moves each layer's
    # keys and values to the CPU after its update and back before the next; a QuantizedCache
    # is not built so, but cache.offload(i) calls it): the generic versions read ``keys``, a
    # decode of the whole layer, to assign or compare it
    def offload(self) -> None:
        """Move the layer's data to the CPU: nothing to move when it is there (the code-reading
        paths always; the model path for a model on the CPU); a layer on another device is
        refused (NotImplementedError)."""
        if self.is_initialized and self.device.type != "cpu":
            raise NotImplementedError(f"QuantizedCache does not offload layers held on {self.device} (its "
                                      f"codes, tail and decoded copy stay where the model runs)")

    def prefetch(self) -> None:
        """Move offloaded data back to the layer's device: nothing to move (:meth:`offload`
        moves nothing)."""

    def lazy_initialization(self, key_states, value_states):
        owner = self.owner
        torch_codes = owner.reads_codes and (not owner.grouped or owner.attention == "codes")
        if key_states.device.type != "cpu" and torch_codes:
            # the torch coders, buffers and loops live on the CPU (kvstats_gpu is the GPU path);
            # the numpy-coded ones move each block to the CPU and back
            raise ValueError(f"key_states must be on the CPU for {owner.scheme_name!r}'s torch codes; received "
                             f"device {key_states.device}: run the model on the CPU"
                             + (", or use attention='model'" if owner.grouped else ""))
        self.device = key_states.device
        batch, self.n_heads, _, dim = key_states.shape
        if batch > 1 and owner.per_call:
            # one call codes every row: a sequence's codes would depend on the others'
            raise ValueError(f"QuantizedCache({owner.scheme_name!r}, ...) with params "
                             f"{owner.scheme_params} shares one scale across an encode call, so the "
                             f"rows of a batch would share it; received a batch of {batch}: run one "
                             f"sequence at a time or use {owner.per_call}")
        # an empty tail of its own (never a view that keeps the prefill's K/V alive)
        self.tail_keys = key_states.new_empty((batch, self.n_heads, 0, dim))
        self.tail_values = value_states.new_empty((batch, self.n_heads, 0, value_states.shape[-1]))
        independent = owner.per_head and not owner.deterministic
        if owner.reads_codes and owner.grouped:
            # numpy coders code each whole group once; the torch sides hold what they store
            draws = (self.n_heads,) if independent else ()
            self.scheme = owner._make(dim, np.random.SeedSequence([owner.seed, self.layer_idx]), draws)
            if hasattr(self.scheme.key_coder, "hold_sketches_as"):
                # qjl: the numpy coder codes float32 blocks only (_code_block), whose products
                # cast its sketch to float32: held so, the same bits at half its float64 bytes
                self.scheme.key_coder.hold_sketches_as(np.float32)
            self.key_side, self.value_side = make_sides(self.scheme)
            self.store = {f"k_{n}": b for n, b in self.key_side.store.items()}
            self.store.update({f"v_{n}": b for n, b in self.value_side.store.items()})
        elif owner.reads_codes:
            if independent:
                seeds = [np.random.SeedSequence([owner.seed, self.layer_idx, h]) for h in range(self.n_heads)]
            else:
                seeds = [np.random.SeedSequence([owner.seed, self.layer_idx])]
            exports = [owner._make(dim, s, ()).export() for s in seeds]
            self.key_coder = SideCoder([e.key for e in exports])
            self.value_coder = SideCoder([e.value for e in exports])
            names = ["codes", "norms"]
            self.store = {f"k_{n}": GrowingBuffer() for n in names + (["signs", "rnorms"]
                                                                    if self.key_coder.coder == "prod" else [])}
            self.store.update({f"v_{n}": GrowingBuffer() for n in names + (["signs", "rnorms"]
                                                                         if self.value_coder.coder == "prod" else [])})
        else:
            draws = (self.n_heads,) if independent else ()
            self.scheme = owner._make(dim, np.random.SeedSequence([owner.seed, self.layer_idx]), draws)
            for coder in (self.scheme.key_coder, self.scheme.value_coder):
                if hasattr(coder, "hold_matrices_as"):
                    # Haar rotations, prod sketches: this path codes float32 blocks only
                    # (_code_block), whose products cast them to float32: the same bits
                    coder.hold_matrices_as(np.float32)
        # each side's buffers under the coder's part names ("codes", "norms", ...)
        self._sides = {side: {n[2:]: b for n, b in self.store.items() if n.startswith(side + "_")}
                       for side in ("k", "v")}
        if owner.keep_decoded and owner.attention == "codes":
            self.decoded = {n: GrowingBuffer() for n in self.store if n.endswith(("_codes", "_signs"))}
        elif owner.keep_decoded:
            self.decoded = {"k": GrowingBuffer(), "v": GrowingBuffer()}
        self.is_initialized = True

    def _kernel(self):
        """The compiled loops when this layer can use them (float16 norms), else None."""
        from kvstats.models.lut_kernel import kernel

        if self._half is None:  # once per layer: the coders do not change
            self._half = self.key_coder.norm_dtype == torch.float16 and self.value_coder.norm_dtype == torch.float16
        return kernel() if self._half else None

    @property
    def reads_codes(self) -> bool:
        return self.key_coder is not None or self.key_side is not None

    def _decode_numpy(self, codes):
        K_hat, V_hat = self.scheme.dequantize(codes)
        dtype = self.tail_keys.dtype
        return (torch.from_numpy(np.ascontiguousarray(K_hat)).to(self.device, dtype),
                torch.from_numpy(np.ascontiguousarray(V_hat)).to(self.device, dtype))

    def _code(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Code a block of tokens (all heads at once) and keep what the mode keeps: all of
        it or, when coding fails (a norm beyond float16 on one side), nothing."""
        buffers = (*self.store.values(), *self.decoded.values())
        marks, chunks = [b.n for b in buffers], len(self.chunks)
        try:
            self._code_block(k, v)
        except BaseException:
            # the keys may be appended when the values fail: rolled back, or the two sides'
            # buffers would stay out of step (misaligned tokens, miscounted bytes)
            for b, n in zip(buffers, marks):
                b.n = n
            self.chunks.truncate(chunks)
            raise
        self.n_coded += k.shape[-2]

    def _code_block(self, k: torch.Tensor, v: torch.Tensor) -> None:
        if self.key_side is not None:
            codes = self.scheme.quantize(k.detach().to("cpu", torch.float32).numpy(),
                                         v.detach().to("cpu", torch.float32).numpy())
            self.key_side.append(codes.key)
            self.value_side.append(codes.value)
            if self.decoded:  # attention="model": the numpy decode, as the model path always gave
                k_hat, v_hat = self._decode_numpy(codes)
                self.decoded["k"].append(k_hat)
                self.decoded["v"].append(v_hat)
        elif self.reads_codes:
            n0 = self.n_coded
            kern = self._kernel() if k.shape[-2] <= 16 else None
            for side, coder, x in (("k", self.key_coder, k), ("v", self.value_coder, v)):
                into = self._sides[side]
                if kern is not None:  # a decode step: one C call per side, straight into the buffers
                    kern.encode(coder, x.detach().to(torch.float32), into=into)
                else:
                    for name, t in coder.encode(x.detach().to(torch.float32), fused=False).items():
                        into[name].append(t)
            # the decoded copy, when kept, from the stored codes of the new tokens (both
            # attention paths then read the same codes)
            new = {n: b.view()[:, :, n0:] for n, b in self.store.items()} if self.decoded else {}
            for name, buf in self.decoded.items():
                if name in ("k", "v"):
                    coder, side = ((self.key_coder, self.tail_keys) if name == "k"
                                   else (self.value_coder, self.tail_values))
                    parts = {n[2:]: t for n, t in new.items() if n.startswith(name + "_")}
                    buf.append(coder.decode(parts).to(side.dtype))
                else:
                    coder = self.key_coder if name.startswith("k") else self.value_coder
                    buf.append(coder.signs_of(new[name]) if name.endswith("_signs") else coder.centroids_of(new[name]))
        else:
            codes = self.scheme.quantize(k.detach().to("cpu", torch.float32).numpy(),
                                         v.detach().to("cpu", torch.float32).numpy())
            self.chunks.append(codes, tuple(k.shape))
            if self.decoded:
                k_hat, v_hat = self._decode_numpy(codes)
                self.decoded["k"].append(k_hat)
                self.decoded["v"].append(v_hat)

    def update(self, key_states, value_states, *args, **kwargs):
        tops = self._check_states(key_states, value_states)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            try:
                self._check_range(key_states, value_states, tops)
            except ValueError:
                self.__init__(self.owner, self.layer_idx)  # refused: the layer as it was, empty
                raise
        else:
            self._check_range(key_states, value_states, tops)
        self._drop(self._to_drop())  # what get_mask_sizes told the model's mask
        if self.tail_keys.shape[-2]:
            tail_k = torch.cat([self.tail_keys, key_states], dim=-2)
            tail_v = torch.cat([self.tail_values, value_states], dim=-2)
        else:
            tail_k, tail_v = key_states, value_states
        group = self.owner.token_group
        n_code = max(0, tail_k.shape[-2] - self.owner.window) // group * group
        if n_code:
            self._code(tail_k[..., :n_code, :], tail_v[..., :n_code, :])
        # clone: the tail is a few tokens; a view would keep the whole chunk's storage alive
        self.tail_keys, self.tail_values = tail_k[..., n_code:, :].clone(), tail_v[..., n_code:, :].clone()
        # warn where the open group outweighs the coded tokens (klt below its block), not per kivi group
        if not self.owner.warned_uncoded and self.uncoded_tokens() > self.n_coded:
            self._warn_uncoded()
        if self.owner.attention == "codes":
            handle = CodedKV(self)
            return handle, handle
        return self.dequantized()

    def uncoded_tokens(self) -> int:
        """Tokens held in full precision beyond the ``window`` asked for: the newest,
        incomplete token group of a token-grouped scheme (0 for per-vector schemes)."""
        return max(0, self.tail_keys.shape[-2] - self.owner.window) if self.is_initialized else 0

    def _warn_uncoded(self) -> None:
        # no counts in the text: the default filter then shows it once, not per fresh cache
        owner = self.owner
        owner.warned_uncoded = True
        warnings.warn(
            f"QuantizedCache({owner.scheme_name!r}, {owner.bits}) is read for attention while layers hold "
            f"tokens uncoded beyond window={owner.window}: the scheme codes whole groups of "
            f"{owner.token_group} tokens and the newest, incomplete group stays in full precision "
            f"(a sequence shorter than {owner.window + owner.token_group} tokens is not quantized at "
            f"all); memory_report()['uncoded_tokens'] counts them (a smaller group_size codes more)",
            UncodedTokensWarning, stacklevel=3)

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's keys and values as a decoded cache would hold them: decoded codes,
        then the tail (the decoded copy when kept, else decoded now)."""
        if not self.is_initialized:
            raise ValueError("the layer is empty: nothing has been cached yet")
        if "k" in self.decoded:
            parts_k = [self.decoded["k"].view()] if self.n_coded else []
            parts_v = [self.decoded["v"].view()] if self.n_coded else []
        elif self.key_side is not None:
            if not self.n_coded:
                parts_k = []
            elif hasattr(self.key_side, "numpy_codes"):  # qjl: the numpy decode, as the model path
                k_hat = self.scheme.key_coder.decode(self.key_side.numpy_codes(self.scheme.key_coder))
                parts_k = [torch.from_numpy(np.ascontiguousarray(k_hat)).to(self.device, self.tail_keys.dtype)]
            else:  # KIVI: the torch decode is the numpy decode (z + s·x, each exact in float32)
                parts_k = [self.key_side.decode().to(self.device, self.tail_keys.dtype)]
            # (the sides' buffers hold numpy's codes on the CPU; the model may run elsewhere)
            parts_v = [self.value_side.decode().to(self.device, self.tail_values.dtype)] if self.n_coded else []
        elif self.reads_codes:
            parts_k, parts_v = [], []
            if self.n_coded:
                kp = {n[2:]: b.view() for n, b in self.store.items() if n.startswith("k_")}
                vp = {n[2:]: b.view() for n, b in self.store.items() if n.startswith("v_")}
                parts_k = [self.key_coder.decode(kp).to(self.tail_keys.dtype)]
                parts_v = [self.value_coder.decode(vp).to(self.tail_values.dtype)]
        else:
            # one decode call per run of chunks (not per decode step: that was quadratic in
            # the steps), bit for bit the per-chunk decode; a rotation's matrix product rounds
            # by its row count (BLAS blocking), so Haar-rotated codes decode chunk by chunk
            coders = (self.scheme.key_coder, self.scheme.value_coder)
            merged = not any(hasattr(c, "hold_matrices_as") for c in coders)
            decoded = [self._decode_numpy(c) for c in (self.chunks.runs() if merged else self.chunks)]
            parts_k, parts_v = [k for k, _ in decoded], [v for _, v in decoded]
        if not parts_k:
            return self.tail_keys, self.tail_values
        return (torch.cat([*parts_k, self.tail_keys], dim=-2), torch.cat([*parts_v, self.tail_values], dim=-2))

    def get_seq_length(self) -> int:
        """Tokens of the sequence so far (a sliding-window layer holds only the last ones)."""
        if not self.is_initialized:
            return 0
        return self.n_dropped + self.n_coded + self.tail_keys.shape[-2]

    def get_max_length(self) -> int:
        """The most tokens the layer's attention reads: the sliding window (as transformers'
        ``DynamicSlidingWindowLayer``), or -1 (no bound) for a full-attention layer."""
        return -1 if self.sliding_window is None else self.sliding_window

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """``(kv_length, kv_offset)`` of the keys the next update's attention reads: the held
        tokens (after the drop that update makes first) and the new ones, from position
        ``kv_offset`` on. transformers sizes the layer's attention mask by them; the mask's
        window hides any held token beyond a sliding window (whole groups and chunks are
        dropped, hence a few)."""
        if not self.is_initialized:
            return query_length, 0
        drop = self._to_drop()
        return self.n_coded + self.tail_keys.shape[-2] - drop + query_length, self.n_dropped + drop

    def _to_drop(self) -> int:
        """How many of the oldest coded tokens the next update drops: those beyond the
        last ``sliding_window − 1`` tokens (what any later query can attend), once they
        are ``max(16, W/32)`` or more (a move of the held codes amortised over as many
        steps), in whole token groups (kivi, qjl) or whole numpy-coded chunks."""
        if self.sliding_window is None or not self.is_initialized:
            return 0
        window = self.sliding_window
        excess = self.n_coded + self.tail_keys.shape[-2] - (window - 1)
        if excess < max(16, window // 32):
            return 0
        n = min(excess, self.n_coded)
        if len(self.chunks):  # numpy codes: whole chunks (a chunk's codes are one SchemeCodes)
            ends = np.cumsum(self.chunks.sizes())
            return int(ends[ends <= n][-1]) if (ends <= n).any() else 0
        return n // self.owner.token_group * self.owner.token_group

    def _drop(self, n: int) -> None:
        """Forget the oldest ``n`` coded tokens (``_to_drop``'s count)."""
        if not n:
            return
        if self.key_side is not None:
            self.key_side.drop(n, self.owner.token_group)
            self.value_side.drop(n, self.owner.token_group)
        elif len(self.chunks):
            self.chunks.drop(int(np.searchsorted(np.cumsum(self.chunks.sizes()), n)) + 1)
        else:
            for buf in self.store.values():
                buf.drop(n)
        for buf in self.decoded.values():
            buf.drop(n)
        self.n_coded -= n
        self.n_dropped += n

    def reset(self) -> None:
        super().reset()
        self._half, self._sides = None, {}
        self.scheme = self.key_coder = self.value_coder = self.key_side = self.value_side = None
        self.chunks, self.n_coded, self.n_dropped, self.store, self.decoded = CodeChunks(), 0, 0, {}, {}

    @property
    def is_croppable(self) -> bool:
        """Whether :meth:`crop` can restore an earlier state exactly: per-vector codes in torch
        buffers and no window (each token's codes are its own; a window's tokens, once
        coded, or a group's statistics cannot be taken back)."""
        owner = self.owner
        return owner.reads_codes and not owner.grouped and owner.window == 0

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the newest ``-tokens_to_remove`` tokens (a negative count, as transformers'
        layers; assisted decoding's rollback). ``crop(0)`` (transformers' "back to the
        minimal working size") and a crop of a layer that holds nothing change nothing, on
        any layer."""
        owner = self.owner
        n = check_int(tokens_to_remove, "tokens_to_remove", high=0)
        if n == 0 or not self.is_initialized:
            return
        if not self.is_croppable:
            raise NotImplementedError(
                f"QuantizedCache can be cropped only with window=0 and a per-vector scheme coded in torch "
                f"buffers (KV, KQV, QKQV, turboquant, K{{a}}V{{b}}); received {owner.scheme_name!r} with "
                f"window={owner.window}: its coded tokens cannot be split or restored to full precision")
        if -n > self.n_coded:
            raise ValueError(f"tokens_to_remove must remove at most the {self.n_coded} cached tokens; "
                             f"received {tokens_to_remove}")
        if self.n_dropped and self.n_coded + n < self.sliding_window - 1:
            # the tokens that would come back into the window were dropped
            raise NotImplementedError(
                f"QuantizedCache cannot crop {-n} tokens from this sliding-window layer: it holds "
                f"{self.n_coded} of the {self.get_seq_length()} tokens and its window needs the last "
                f"{self.sliding_window - 1}")
        for buf in (*self.store.values(), *self.decoded.values()):
            buf.n += n
        self.n_coded += n

    # Batch rows (beam search): every sequence's codes are its own (per-vector codes, and
    # the token groups of kivi/qjl are per row), so selecting rows of every buffer is the
    # cache of the selected sequences.
    def _select_rows(self, index: torch.Tensor, what: str) -> None:
        if not self.is_initialized:
            return
        if len(self.chunks) or (self.scheme is not None and self.key_side is None):
            raise NotImplementedError(f"QuantizedCache does not support {what} for {self.owner.scheme_name!r}, "
                                      f"whose codes are numpy arrays (schemes without a code-reading path); "
                                      f"the code-reading schemes (KV, KQV, QKQV, turboquant, K{{a}}V{{b}}, kivi, "
                                      f"qjl) support it")
        batch = self.tail_keys.shape[0]
        if index.ndim != 1 or index.dtype.is_floating_point or index.dtype.is_complex or (
                index.numel() and not (0 <= int(index.min()) and int(index.max()) < batch)):
            # torch would truncate floats, and fail on a bad row deep inside index_select
            raise ValueError(f"{what} needs a 1-D integer tensor of batch rows in [0, {batch}); "
                             f"received dtype {index.dtype}, shape {tuple(index.shape)}"
                             + (f", values in [{index.min().item()}, {index.max().item()}]"
                                if index.numel() else ""))
        index = index.to(torch.int64)
        # each buffer where it is (numpy-coded groups on the CPU, a decoded copy with the model)
        for buf in (*self.store.values(), *self.decoded.values()):
            if buf.buf is not None:
                buf.buf = buf.buf.index_select(0, index.to(buf.buf.device))
        self.tail_keys = self.tail_keys.index_select(0, index.to(self.tail_keys.device))
        self.tail_values = self.tail_values.index_select(0, index.to(self.tail_values.device))

    def reorder_cache(self, beam_idx) -> None:
        """Keep batch rows ``beam_idx`` (beam search's reordering)."""
        self._select_rows(torch.as_tensor(beam_idx), "beam search reordering")

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat each batch row ``repeats`` times (in place, as transformers' layers)."""
        if self.is_initialized:
            rows = torch.arange(self.tail_keys.shape[0]).repeat_interleave(check_int(repeats, "repeats", low=1))
            self._select_rows(rows, "batch expansion")

    def batch_select_indices(self, indices) -> None:
        """Keep the batch rows ``indices`` (integer positions or a boolean mask)."""
        index = torch.as_tensor(indices)
        if index.dtype == torch.bool:
            if self.is_initialized and index.shape != self.tail_keys.shape[:1]:
                raise ValueError(f"indices as a boolean mask must have one entry per batch row, "
                                 f"shape ({self.tail_keys.shape[0]},); received shape {tuple(index.shape)}")
            index = index.nonzero().flatten()
        self._select_rows(index, "batch selection")
