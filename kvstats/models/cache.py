"""A transformers ``Cache`` that stores the real codes of any kvstats scheme.

(Over ~450 lines as one idea: the cache layer's three storage modes — torch codes of
per-vector schemes, torch buffers of kivi/qjl groups, numpy codes — share its tail,
grouping and byte accounting; the attention arithmetic lives in code_attention and
group_codes.)

Each layer keeps the scheme's codes (packed bits, small-integer codes, norms, scales) and
a full-precision *tail*: the most recent ``window`` tokens, plus, for schemes whose
statistics are per group of tokens (``kivi``, ``qjl``), the incomplete last group (as KIVI
keeps its residual). When the tail grows beyond that, its oldest tokens are coded, in
whole groups, with the layer's scheme, built once with a per-layer seed, so keys arriving
in later chunks are coded with the same rotation and sketch as earlier ones.

Two attention paths (``attention=``):

- **Codes** (``"codes"``, the default for per-vector schemes that export,
  ``SchemeDef.gpu`` — KV, KQV, QKQV, turboquant_mse/prod, K{a}V{b} — with their default
  Hadamard or no rotation): the layer holds only the packed codes, norms and the tail, in
  torch buffers grown in place (:class:`~kvstats.models.code_attention.GrowingBuffer`);
  new tokens are coded batched over heads and tokens (one torch call per prefill block,
  one C call per decode step), and a decode step's attention is computed from the codes
  by :func:`~kvstats.models.code_attention.code_attention` (rotated query against
  centroids, QJL term from the sign bits, output accumulated in the rotated space;
  compiled look-up loops of :mod:`kvstats.models.lut_kernel` when a C compiler is
  available). ``update`` returns a :class:`~kvstats.models.attention_hook.CodedKV` handle
  that transformers' ``"eager"``/``"sdpa"`` attention (wrapped on first use) routes
  there; a prefill chunk (several queries) is decoded transiently and given to the
  model's own attention. ``keep_decoded=True`` adds a decoded copy of the looked-up
  values (float32, rotated space) that the same loops read instead of the codes: the
  same numbers (greedy outputs identical), the look-up's cost apart. Each KV head has its
  own scheme, seeded ``SeedSequence([seed, layer, head])`` (``per_head=False``: one per
  layer, ``SeedSequence([seed, layer])``).
- **Grouped codes** (``"codes"``, the default for ``kivi`` and ``qjl``): the numpy coders
  code each whole group of tokens once (``SeedSequence([seed, layer])``, one draw per KV
  head) and the layer holds only what they store, in torch buffers grown by whole groups
  (:mod:`kvstats.models.group_codes`: packed codes, float16 scales/zeros, sign bits,
  norms, outlier indices); a decode step's attention reads them (KIVI keys: the query
  scaled by each group's scales against the integer codes, plus ``q·z_g``; values:
  ``Σ (p s) x + Σ p z`` per channel group; QJL keys: the quantizer's estimator from the
  sign bits). No decoded copy (``keep_decoded=True`` is refused: use ``attention="model"``).
- **Model** (``"model"``; the only path of schemes without a code-reading one:
  identity, a Haar rotation, deployed formats): ``update`` returns decoded keys and values to the model's
  own attention, any implementation, from a kept decoded copy (the default here) or
  decoded on every read (``keep_decoded=False``). For exportable schemes the codes are
  coded as on the codes path; attention differs from it by float32 rounding only, which
  a quantized cache can amplify (a new key on a code boundary gets another code), so
  greedy outputs may part after many steps. The numpy-coded schemes use
  ``SeedSequence([seed, layer])`` with one draw per KV head, as before.

Every copy is counted in :meth:`QuantizedCache.memory_report` and labelled.

Sliding-window layers (``config=model.config``, as transformers' ``DynamicCache`` takes
it): before each update a layer drops the oldest coded tokens that no later query can
attend (beyond the last ``sliding_window − 1``), once they number ``max(16, W/32)``, in
whole token groups or coded chunks, and tells the model's mask the held span
(``get_mask_sizes``), so attention reads the same tokens and memory stops growing.

For per-vector schemes and ``window=0`` a single forward pass over a sequence is the same
procedure as teacher-forced token-by-token decoding (every key is coded before attention
reads it in both cases); the two differ only where float32 rounding of the quantizer's
input flips a code on a boundary (``tests/models`` checks both agree).

Use it as any transformers cache: ``model(input_ids, cache=cache)`` or
``model.generate(input_ids, cache=cache)`` (transformers 5.x; the older keyword
``past_key_values=`` still works there, with a deprecation warning). Beam search (batch
rows reordered, repeated or selected in every buffer) works for the schemes whose codes
are torch buffers (the code-reading ones); cropping (assisted decoding) for the
per-vector ones with no window (a window's coded tokens cannot be restored, a token
group's statistics not split).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

from kvstats._checks import check_int, did_you_mean
from kvstats.models.attention_hook import CodedKV, install
from kvstats.models.code_attention import GrowingBuffer, SideCoder
from kvstats.models.group_codes import grouped_kind, make_sides
from kvstats.quant.registry import REGISTRY, parse_scheme_name


def _tensor_bytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _array_bytes(obj, seen: set[int]) -> int:
    """Bytes of the numpy arrays reachable from ``obj`` (dataclasses, kvstats objects,
    containers), each owning array counted once."""
    if isinstance(obj, np.ndarray):
        while isinstance(obj.base, np.ndarray):
            obj = obj.base
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        return int(obj.nbytes)
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return sum(_array_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_array_bytes(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) or type(obj).__module__.startswith("kvstats."):
        return sum(_array_bytes(v, seen) for v in getattr(obj, "__dict__", {}).values())
    return 0


class _CodesLayer(DynamicLayer):
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
        self.scheme = None                      # numpy Scheme (numpy-coded schemes)
        self.codes: list = []                   # their SchemeCodes, one per coded chunk
        self.chunk_sizes: list[int] = []        # and its tokens
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

    def _check_states(self, key_states, value_states) -> None:
        """Refuse states the layer cannot hold: not 4-D float, values shaped unlike the keys,
        or (after the first update) another batch, head count or head dimension — which
        the growing code buffers would otherwise take in place (and the compiled encoder
        write past their rows)."""
        for name, t in (("key_states", key_states), ("value_states", value_states)):
            if not isinstance(t, torch.Tensor) or t.ndim != 4 or not t.is_floating_point():
                got = (f"{t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor)
                       else type(t).__name__)
                raise ValueError(f"{name} must be a floating-point tensor (batch, heads, tokens, dim); "
                                 f"received {got}")
        if value_states.shape != key_states.shape:
            # one scheme codes both sides at one head dimension
            raise ValueError("value_states must have the batch, heads, tokens and head dimension of "
                             f"key_states (batch, heads, tokens, dim); received keys {tuple(key_states.shape)}, "
                             f"values {tuple(value_states.shape)}")
        if self.is_initialized:
            held = (self.tail_keys.shape[0], self.tail_keys.shape[1], self.tail_keys.shape[3])
            got = (key_states.shape[0], key_states.shape[1], key_states.shape[3])
            if got != held:
                raise ValueError(f"key_states must have this layer's (batch, heads, dim) = {held}; received "
                                 f"{got} (shape {tuple(key_states.shape)}): a cache holds one batch of "
                                 f"sequences (reset() it, or use a new cache, for another batch)")

    # transformers' generic code reads a layer's ``keys``/``values`` as all the cached
    # states: an encoder-decoder model's cross-attention reuses them that way after its
    # first step. Here they are the decoded keys and values (a transient, as
    # :meth:`dequantized`), never the tail alone, which cross-attention read silently.
    @property
    def keys(self) -> torch.Tensor | None:
        return self.dequantized()[0] if self.is_initialized else None

    @keys.setter
    def keys(self, value) -> None:
        self._set_states("keys", value)

    @property
    def values(self) -> torch.Tensor | None:
        return self.dequantized()[1] if self.is_initialized else None

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
        marks, chunks = [b.n for b in buffers], len(self.codes)
        try:
            self._code_block(k, v)
        except BaseException:
            # the keys may be appended when the values fail: rolled back, or the two sides'
            # buffers would stay out of step (misaligned tokens, miscounted bytes)
            for b, n in zip(buffers, marks):
                b.n = n
            del self.codes[chunks:], self.chunk_sizes[chunks:]
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
            self.codes.append(codes)
            self.chunk_sizes.append(k.shape[-2])
            if self.decoded:
                k_hat, v_hat = self._decode_numpy(codes)
                self.decoded["k"].append(k_hat)
                self.decoded["v"].append(v_hat)

    def update(self, key_states, value_states, *args, **kwargs):
        self._check_states(key_states, value_states)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
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
        self.tail_keys = tail_k[..., n_code:, :].clone()
        self.tail_values = tail_v[..., n_code:, :].clone()
        if self.owner.attention == "codes":
            handle = CodedKV(self)
            return handle, handle
        return self.dequantized()

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
                parts_k = [self.key_side.decode().to(self.tail_keys.dtype)]
            parts_v = [self.value_side.decode().to(self.tail_values.dtype)] if self.n_coded else []
        elif self.reads_codes:
            parts_k, parts_v = [], []
            if self.n_coded:
                kp = {n[2:]: b.view() for n, b in self.store.items() if n.startswith("k_")}
                vp = {n[2:]: b.view() for n, b in self.store.items() if n.startswith("v_")}
                parts_k = [self.key_coder.decode(kp).to(self.tail_keys.dtype)]
                parts_v = [self.value_coder.decode(vp).to(self.tail_values.dtype)]
        else:
            decoded = [self._decode_numpy(c) for c in self.codes]
            parts_k, parts_v = [k for k, _ in decoded], [v for _, v in decoded]
        if not parts_k:
            return self.tail_keys, self.tail_values
        return (torch.cat([*parts_k, self.tail_keys], dim=-2), torch.cat([*parts_v, self.tail_values], dim=-2))

    def get_seq_length(self) -> int:
        """Tokens of the sequence so far (a sliding-window layer holds only the last ones)."""
        if not self.is_initialized:
            return 0
        return self.n_dropped + self.n_coded + self.tail_keys.shape[-2]

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
        if self.codes:  # numpy codes: whole chunks (a chunk's codes are one SchemeCodes)
            ends = np.cumsum(self.chunk_sizes)
            return int(ends[ends <= n][-1]) if (ends <= n).any() else 0
        return n // self.owner.token_group * self.owner.token_group

    def _drop(self, n: int) -> None:
        """Forget the oldest ``n`` coded tokens (``_to_drop``'s count)."""
        if not n:
            return
        if self.key_side is not None:
            self.key_side.drop(n, self.owner.token_group)
            self.value_side.drop(n, self.owner.token_group)
        elif self.codes:
            j = int(np.searchsorted(np.cumsum(self.chunk_sizes), n)) + 1
            del self.codes[:j], self.chunk_sizes[:j]
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
        self.codes, self.chunk_sizes, self.n_coded, self.n_dropped, self.store, self.decoded = [], [], 0, 0, {}, {}

    # ------------------------------------------------------------------ memory
    def code_nbytes(self) -> int:
        """Bytes of the stored codes of the coded tokens (no slack, no tail)."""
        if self.reads_codes:
            return sum(b.nbytes(held=False) for b in self.store.values())
        return sum(int(c.nbytes) for c in self.codes)

    def tail_nbytes(self) -> int:
        return _tensor_bytes(self.tail_keys) + _tensor_bytes(self.tail_values) if self.is_initialized else 0

    def nbytes(self) -> int:
        return self.code_nbytes() + self.tail_nbytes()

    def decoded_nbytes(self) -> int:
        return sum(b.nbytes() for b in self.decoded.values())

    def held_nbytes(self) -> int:
        """Every byte that grows with the sequence: code buffers (with their slack), numpy
        codes, the tail, the decoded copy."""
        if self.reads_codes:
            codes = sum(b.nbytes() for b in self.store.values())
        else:
            codes = _array_bytes(self.codes, set())
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
        for t in fixed:
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += _tensor_bytes(t)
        return total

    @property
    def is_croppable(self) -> bool:
        """Whether :meth:`crop` can restore an earlier state exactly: per-vector codes in torch
        buffers and no window (each token's codes are its own; a window's tokens, once
        coded, or a group's statistics cannot be taken back)."""
        owner = self.owner
        return owner.reads_codes and not owner.grouped and owner.window == 0

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the newest ``-tokens_to_remove`` tokens (a negative count, as transformers'
        layers; assisted decoding's rollback)."""
        owner = self.owner
        if not self.is_croppable:
            raise NotImplementedError(
                f"QuantizedCache can be cropped only with window=0 and a per-vector scheme coded in torch "
                f"buffers (KV, KQV, QKQV, turboquant, K{{a}}V{{b}}); received {owner.scheme_name!r} with "
                f"window={owner.window}: its coded tokens cannot be split or restored to full precision")
        n = check_int(tokens_to_remove, "tokens_to_remove", high=0)
        if n == 0 or not self.is_initialized:
            return
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
        if self.codes or (self.scheme is not None and self.key_side is None):
            raise NotImplementedError(f"QuantizedCache does not support {what} for {self.owner.scheme_name!r}, "
                                      f"whose codes are numpy arrays (schemes without a code-reading path); "
                                      f"the code-reading schemes (KV, KQV, QKQV, turboquant, K{{a}}V{{b}}, kivi, "
                                      f"qjl) support it")
        index = index.to(self.tail_keys.device, torch.int64)
        for buf in (*self.store.values(), *self.decoded.values()):
            if buf.buf is not None:
                buf.buf = buf.buf.index_select(0, index)
        self.tail_keys = self.tail_keys.index_select(0, index)
        self.tail_values = self.tail_values.index_select(0, index)

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
            index = index.nonzero().flatten()
        self._select_rows(index, "batch selection")


class QuantizedCache(Cache):
    """A transformers KV cache that stores each layer's keys and values as scheme codes.

    Parameters
    ----------
    scheme_name : str
        A name from :data:`kvstats.SCHEMES` or ``"K{a}V{b}"``.
    bits : int or None
        The scheme's budget in bits per coordinate (None for ``identity`` and ``K{a}V{b}``).
    seed : int
        Randomness: ``SeedSequence([seed, layer, head])`` per KV head on the codes path,
        ``SeedSequence([seed, layer])`` (one draw per head) for numpy-coded schemes.
    window : int
        Most recent tokens kept in full precision (the model's dtype), as KIVI's residual.
    per_head : bool
        Independent rotation/sketch per KV head (default) or one shared by the heads of
        a layer.
    keep_decoded : bool or None
        Keep a decoded copy of the coded tokens (more memory, labelled in
        :meth:`memory_report`). With ``attention="codes"`` the copy holds the looked-up
        values (centroids, sign values; rotated space, float32) and the code-reading
        attention reads it instead of the codes — the same numbers, so greedy outputs are
        identical: the speed comparison of looking codes up against reading floats. With
        ``attention="model"`` it holds the decoded keys and values given to the model's
        attention. None (default): False with ``attention="codes"``, True with "model"
        (False there decodes every chunk on every read instead). kivi/qjl with
        ``attention="codes"`` have no looked-up values to copy: True is refused there.
    config : transformers PretrainedConfig, optional
        The model's config, as ``DynamicCache(config=...)`` takes it: its sliding-window
        (and chunked-attention) layers then hold only the tokens their attention can
        still read — the last ``sliding_window − 1``, plus up to ``max(16, W/32)`` (or a
        token group, or a coded chunk) more before a drop — and memory stops growing
        there (a drop is made at the start of an update, so right after a long prefill
        the layer still holds all of it); dropped tokens are not held anywhere, and a
        :meth:`crop` back into them is refused. Without it every layer keeps every
        token, which the model's masks hide from a sliding-window layer: the same
        attention, more memory.
    attention : {"codes", "model"} or None
        Who computes decode-step attention: ``"codes"`` (default for the schemes with a
        code-reading path, kivi and qjl included) —
        :func:`~kvstats.models.code_attention.code_attention`, through the wrapped eager/sdpa
        functions; ``"model"`` (the only choice for identity, Haar rotations and the other
        numpy-only schemes) — ``update`` returns decoded tensors to the model's own
        attention, any implementation (flash, sliding windows, soft-capping). The two
        agree to float32 rounding; a quantized cache can amplify such a difference (a new
        key's coordinate on a code boundary gets another code), so their greedy outputs
        may part after many steps (docs/benchmarks.md).
    **scheme_params
        Passed to :func:`kvstats.make_scheme` (e.g. ``rotation="haar"``,
        ``group_size=32``). For ``kivi`` the scheme's own ``residual`` is 0: the cache's
        ``window`` plays that role (a non-zero ``residual`` is a ValueError naming ``window``).

    Attributes
    ----------
    reads_codes : bool
        Whether the scheme has a code-reading path (per-vector and exportable, or kivi/qjl).
    grouped : bool
        Coded by kivi's or qjl's coders (token-grouped codes read by :mod:`kvstats.models.group_codes`).
    attention : str
        ``"codes"`` or ``"model"`` (resolved).

    Examples
    --------
    >>> import torch
    >>> from kvstats.models import QuantizedCache
    >>> cache = QuantizedCache("KQV", 4, seed=0)
    >>> k = torch.randn(1, 3, 10, 64); v = torch.randn(1, 3, 10, 64)
    >>> _ = cache.update(k, v, layer_idx=0)
    >>> cache.get_seq_length(), cache.layers[0].dequantized()[0].shape
    (10, torch.Size([1, 3, 10, 64]))
    >>> rep = cache.memory_report()
    >>> rep["attention"], rep["bytes_per_token"], rep["held_bytes"] == rep["stored_bytes"]
    ('codes', 210.0, True)
    """

    def __init__(self, scheme_name: str, bits=None, seed: int = 0, window: int = 0, *,
                 per_head: bool = True, keep_decoded: bool | None = None, attention: str | None = None,
                 config=None, **scheme_params):
        from kvstats.quant.schemes import make_scheme

        self.sliding_windows = _sliding_windows(config)
        self.scheme_name, self.bits = scheme_name, bits
        self.seed = check_int(seed, "seed", low=0)
        self.window = check_int(window, "window", low=0)
        if not isinstance(per_head, bool):
            raise TypeError(f"per_head must be a bool; received {per_head!r}")
        if keep_decoded is not None and not isinstance(keep_decoded, bool):
            raise TypeError(f"keep_decoded must be None or a bool; received {keep_decoded!r}")
        self.per_head = per_head
        params = dict(scheme_params)
        sdef, _ = parse_scheme_name(scheme_name, params)
        if "residual" in sdef.params:  # a scheme's own fp window (kivi): the cache's window plays it
            if params.get("residual", 0) != 0:
                # silently dropping it would run without the full-precision tokens asked for
                raise ValueError(f"residual must be 0 (or absent) for a cache: its window plays the "
                                 f"{scheme_name!r} residual; received residual={params['residual']!r}: use "
                                 f"QuantizedCache({scheme_name!r}, ..., window={params['residual']!r})")
            params["residual"] = 0
        self.scheme_params = params
        _, parsed = parse_scheme_name(scheme_name, params)
        # Tokens sharing stored statistics are coded in whole groups (1: per vector).
        self.token_group = sdef.token_group(parsed)
        self._make_scheme = make_scheme
        # Schemes without random components need no per-head draws.
        self.deterministic = not sdef.randomized(parsed)
        # Fail now, not inside a forward pass: unknown names, bad bits or parameters. The
        # head dimension comes with the first update, which checks the parameters bounded
        # by it (n_outliers, rank <= dim) against the model's; the probe takes a dimension
        # that admits them (at 64, n_outliers=80 was refused for a 128-dimensional model).
        probe_dim = 64
        for bounded in ("n_outliers", "rank"):
            value = params.get(bounded)
            if isinstance(value, int) and not isinstance(value, bool) and probe_dim <= value <= 4096:
                probe_dim = 1 << value.bit_length()
        probe = make_scheme(scheme_name, bits, probe_dim, seed=0, **params)
        # kivi's and qjl's coders (by type, whatever the scheme's name): numpy-coded whole
        # groups, read from torch buffers (group_codes)
        self.grouped = grouped_kind(probe) is not None
        self.reads_codes = self.grouped or (sdef.gpu and self.token_group == 1 and _exports(probe))
        if attention is None:
            attention = "codes" if self.reads_codes else "model"
        if attention not in ("codes", "model"):
            raise ValueError(f"attention must be None, 'codes' or 'model'; received {attention!r}"
                             f"{did_you_mean(attention, ('codes', 'model'))}")
        if attention == "codes" and not self.reads_codes:
            exporting = ", ".join(name for name, d in REGISTRY.items() if d.gpu)
            raise ValueError(f"attention='codes' needs a per-vector scheme that exports ({exporting}; "
                             f"Hadamard or no rotation) or kivi's or qjl's coders; received "
                             f"{scheme_name!r} with {params}: use attention='model'")
        self.attention = attention
        self.keep_decoded = (attention == "model") if keep_decoded is None else keep_decoded
        if self.grouped and attention == "codes" and self.keep_decoded:
            raise ValueError(f"keep_decoded=True with attention='codes' keeps the looked-up values of "
                             f"per-vector schemes; {scheme_name!r} has none: use attention='model' for "
                             f"a decoded copy")
        if attention == "codes":
            install()
        super().__init__(layer_class_to_replicate=self._new_layer)

    def _not_attention(self, what: str):
        raise NotImplementedError(
            f"QuantizedCache holds attention layers only; the model asked for {what} (a linear-attention, "
            "state-space or indexer layer of a hybrid model): use transformers' DynamicCache(config=model.config)")

    def get_conv_state(self, layer_idx: int, state_idx: int = 0):
        """Not held (hybrid models' non-attention layers): NotImplementedError."""
        self._not_attention("a convolution state")

    def update_conv_state(self, conv_states, layer_idx: int, state_idx: int = 0, **kwargs):
        """Not held (hybrid models' non-attention layers): NotImplementedError."""
        self._not_attention("a convolution state")

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0):
        """Not held (hybrid models' non-attention layers): NotImplementedError."""
        self._not_attention("a recurrent state")

    def update_recurrent_state(self, recurrent_states, layer_idx: int, state_idx: int = 0, **kwargs):
        """Not held (hybrid models' non-attention layers): NotImplementedError."""
        self._not_attention("a recurrent state")

    def update_indexer(self, indexer_key_states, layer_idx: int):
        """Not held (hybrid models' non-attention layers): NotImplementedError."""
        self._not_attention("indexer keys")

    def _new_layer(self) -> _CodesLayer:
        return _CodesLayer(self, len(self.layers))

    def _make(self, dim, seed, draws):
        return self._make_scheme(self.scheme_name, self.bits, dim, seed=seed, draws=draws,
                                 **self.scheme_params)

    def __repr__(self) -> str:
        return (f"QuantizedCache({self.scheme_name!r}, bits={self.bits}, window={self.window}, "
                f"layers={len(self.layers)}, seq_length={self.get_seq_length()})")

    def _live(self) -> list[_CodesLayer]:
        return [lay for lay in self.layers if lay.is_initialized]

    def nbytes(self) -> int:
        """Bytes the cache stores: every layer's codes (of the coded tokens) plus its
        full-precision tail."""
        return sum(layer.nbytes() for layer in self._live())

    def held_nbytes(self) -> int:
        """Every byte the cache holds that grows with the sequence: code buffers with their
        unused capacity, the tail and any decoded copy (:meth:`fixed_nbytes` apart)."""
        return sum(layer.held_nbytes() for layer in self._live())

    def fixed_nbytes(self) -> int:
        """Per-layer state that does not grow with the sequence (rotations, codebooks, sketches)."""
        seen: set = set()
        return sum(layer.fixed_nbytes(seen) for layer in self._live())

    def _tokens(self) -> int:
        layer = next(iter(self._live()), None)
        if layer is None:
            return 0
        return layer.get_seq_length() * layer.tail_keys.shape[0]

    def bytes_per_token(self) -> float:
        """Stored bytes per token of the sequence (all layers, K and V; per sequence of the
        batch). Sliding-window layers hold only their window: their share falls with length."""
        n = self._tokens()
        if n == 0:
            raise ValueError("the cache is empty: bytes_per_token needs at least one cached token")
        return self.nbytes() / n

    def fp16_bytes_per_token(self) -> float:
        """What an fp16 cache of the same layers and heads stores per token (K and V each
        with its own heads and head dimension)."""
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
        ``code_bytes``, ``tail_bytes``, ``decoded_copy_bytes``, ``held_bytes`` (everything
        that grows with the sequence, including unused buffer capacity and the decoded
        copy), ``fixed_bytes`` (rotations, codebooks, sketches); per cached token:
        ``bytes_per_token`` (stored), ``held_bytes_per_token``, ``fp16_bytes_per_token`` (what
        an fp16 cache holding every token stores); ``ratio_to_fp16`` (stored / fp16) and
        ``held_to_stored``; ``dropped_tokens`` (of the sliding-window layers, summed over
        them: held nowhere). Every byte is one the cache holds: ``held_bytes +
        fixed_bytes`` is the storage of every tensor and array its layers reference.
        """
        n = self._tokens()
        if n == 0:
            raise ValueError("the cache is empty: memory_report needs at least one cached token")
        layers = self._live()
        stored, held = self.nbytes(), self.held_nbytes()
        fp16 = self.fp16_bytes_per_token()
        mode = ("decoded copy" if self.keep_decoded else "codes" if self.attention == "codes" else "decoded on read")
        return {"scheme": self.scheme_name, "bits": self.bits, "window": self.window,
                "seq_length": self.get_seq_length(), "attention": mode, "attention_fn": self.attention,
                "nbytes": stored, "stored_bytes": stored,
                "code_bytes": sum(lay.code_nbytes() for lay in layers),
                "tail_bytes": sum(lay.tail_nbytes() for lay in layers),
                "decoded_copy_bytes": sum(lay.decoded_nbytes() for lay in layers),
                "held_bytes": held, "fixed_bytes": self.fixed_nbytes(),
                "bytes_per_token": stored / n, "held_bytes_per_token": held / n,
                "fp16_bytes_per_token": fp16, "ratio_to_fp16": stored / n / fp16,
                "held_to_stored": held / stored, "dropped_tokens": sum(lay.n_dropped for lay in layers)}


def _sliding_windows(config) -> dict[int, int]:
    """``{layer: window}`` of a model config's sliding-window and chunked-attention layers
    (transformers' reading of ``layer_types`` / ``sliding_window``, as DynamicCache's)."""
    if config is None:
        return {}
    from transformers.cache_utils import get_layer_types_and_kwargs

    if not hasattr(config, "get_text_config"):
        raise TypeError(f"config must be a transformers model config (model.config); received "
                        f"{type(config).__name__}")
    types, kwargs = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return {i: int(kw["sliding_window"]) for i, (t, kw) in enumerate(zip(types, kwargs))
            if t in ("sliding_attention", "chunked_attention") and kw.get("sliding_window")}


def _exports(scheme) -> bool:
    """Whether the scheme's parameters export (a Haar rotation, for one, does not)."""
    try:
        scheme.export()
    except ValueError:
        return False
    return True
