"""A transformers ``Cache`` that stores the real codes of any kvstats scheme.

Each layer keeps the scheme's codes (packed bits, small-integer codes, norms, scales: the
``SchemeCodes`` objects of :func:`kvstats.make_scheme`) and a full-precision *tail*: the
most recent ``window`` tokens, plus, for schemes whose statistics are per group of
tokens (``kivi``, ``qjl``), the incomplete last group (as KIVI keeps its residual). When the
tail grows beyond that, its oldest tokens are coded, in whole groups, with the layer's
scheme. A layer's scheme is built once, with a per-layer seed, so keys arriving in later
chunks are coded with the same rotation and sketch as earlier ones.

Reading returns ``dequantize(codes)`` followed by the tail. Decoding is deterministic, so
each chunk is decoded once when it is coded and the result kept as a read buffer
(``keep_decoded=True``, the default: reading is then O(new tokens), as a fused kernel
attending over the codes would be); ``keep_decoded=False`` decodes every chunk on every
read and gives identical numbers. :meth:`QuantizedCache.nbytes` counts what the cache
stores (codes and the tail), never that buffer.

For per-vector schemes and ``window=0`` a single forward pass over a sequence is the same
procedure as teacher-forced token-by-token decoding (every key is coded before attention
reads it in both cases); the two differ only where float32 rounding of the quantizer's
input flips a code on a boundary (``tests/models`` checks both agree).

Use it as any transformers cache: ``model(input_ids, cache=cache)`` or
``model.generate(input_ids, cache=cache)`` (transformers 5.x; the older keyword
``past_key_values=`` still works there, with a deprecation warning). Beam search and
cropping (assisted decoding) are not supported: coded chunks cannot be reordered or split.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

from kvstats._checks import check_int
from kvstats.quant.registry import parse_scheme_name


class _CodesLayer(DynamicLayer):
    """One layer of :class:`QuantizedCache`: scheme codes + a full-precision tail."""

    is_croppable = False

    def __init__(self, owner: QuantizedCache, layer_idx: int):
        super().__init__()
        self.owner, self.layer_idx = owner, layer_idx
        self.scheme = None
        self.codes: list = []
        self.n_coded = 0
        self._decoded_k: list[torch.Tensor] = []
        self._decoded_v: list[torch.Tensor] = []

    def lazy_initialization(self, key_states, value_states):
        self.device = key_states.device
        self.keys = key_states[..., :0, :]
        self.values = value_states[..., :0, :]
        n_heads, dim = key_states.shape[1], key_states.shape[-1]
        draws = (n_heads,) if self.owner.per_head and not self.owner.deterministic else ()
        seed = np.random.SeedSequence([self.owner.seed, self.layer_idx])
        self.scheme = self.owner._make(dim, seed, draws)
        self.is_initialized = True

    def _decode(self, codes):
        K_hat, V_hat = self.scheme.dequantize(codes)
        dtype = self.keys.dtype
        return (torch.from_numpy(np.ascontiguousarray(K_hat)).to(self.device, dtype),
                torch.from_numpy(np.ascontiguousarray(V_hat)).to(self.device, dtype))

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        tail_k = torch.cat([self.keys, key_states], dim=-2)
        tail_v = torch.cat([self.values, value_states], dim=-2)
        group = self.owner.token_group
        n_code = max(0, tail_k.shape[-2] - self.owner.window) // group * group
        if n_code:
            k_np = tail_k[..., :n_code, :].detach().to("cpu", torch.float32).numpy()
            v_np = tail_v[..., :n_code, :].detach().to("cpu", torch.float32).numpy()
            codes = self.scheme.quantize(k_np, v_np)
            self.codes.append(codes)
            self.n_coded += n_code
            if self.owner.keep_decoded:
                k_hat, v_hat = self._decode(codes)
                self._decoded_k.append(k_hat)
                self._decoded_v.append(v_hat)
            tail_k, tail_v = tail_k[..., n_code:, :], tail_v[..., n_code:, :]
        self.keys, self.values = tail_k.contiguous(), tail_v.contiguous()
        return self.dequantized()

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's keys and values as attention reads them: decoded codes, then the tail."""
        if not self.is_initialized:
            raise ValueError("the layer is empty: nothing has been cached yet")
        if self.owner.keep_decoded:
            parts_k, parts_v = self._decoded_k, self._decoded_v
        else:
            decoded = [self._decode(c) for c in self.codes]
            parts_k, parts_v = [k for k, _ in decoded], [v for _, v in decoded]
        if len(parts_k) > 1 and self.owner.keep_decoded:
            # Merge the read buffer so later reads concatenate two tensors, not n chunks.
            self._decoded_k = parts_k = [torch.cat(parts_k, dim=-2)]
            self._decoded_v = parts_v = [torch.cat(parts_v, dim=-2)]
        return (torch.cat([*parts_k, self.keys], dim=-2), torch.cat([*parts_v, self.values], dim=-2))

    def get_seq_length(self) -> int:
        if not self.is_initialized:
            return 0
        return self.n_coded + self.keys.shape[-2]

    def reset(self) -> None:
        super().reset()
        self.scheme = None
        self.codes, self.n_coded = [], 0
        self._decoded_k, self._decoded_v = [], []

    def nbytes(self) -> int:
        tail = 0
        if self.is_initialized:
            tail = self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size()
        return sum(int(c.nbytes) for c in self.codes) + tail

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("QuantizedCache cannot be cropped (coded chunks cannot be split)")

    def reorder_cache(self, beam_idx) -> None:
        raise NotImplementedError("QuantizedCache does not support beam search reordering")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("QuantizedCache does not support batch expansion")

    def batch_select_indices(self, indices) -> None:
        raise NotImplementedError("QuantizedCache does not support batch selection")


class QuantizedCache(Cache):
    """A transformers KV cache that stores each layer's keys and values as scheme codes.

    Parameters
    ----------
    scheme_name : str
        A name from :data:`kvstats.SCHEMES` or ``"K{a}V{b}"``.
    bits : int or None
        The scheme's budget in bits per coordinate (None for ``identity`` and ``K{a}V{b}``).
    seed : int
        Layer ``l`` uses ``SeedSequence([seed, l])`` for its scheme's randomness.
    window : int
        Most recent tokens kept in full precision (the model's dtype), as KIVI's residual.
    per_head : bool
        Independent rotation/sketch per KV head (``draws=(n_kv_heads,)``, default) or
        one shared by the heads of a layer (``draws=()``).
    keep_decoded : bool
        Keep a decoded read buffer (see the module docstring); does not change results.
    **scheme_params
        Passed to :func:`kvstats.make_scheme` (e.g. ``rotation="haar"``,
        ``group_size=32``). For ``kivi`` the scheme's own ``residual`` is 0: the cache's
        ``window`` plays that role.

    Examples
    --------
    >>> import torch
    >>> from kvstats.models import QuantizedCache
    >>> cache = QuantizedCache("KQV", 4, seed=0)
    >>> k = torch.randn(1, 3, 10, 64); v = torch.randn(1, 3, 10, 64)
    >>> K_hat, V_hat = cache.update(k, v, layer_idx=0)
    >>> K_hat.shape, cache.get_seq_length()
    (torch.Size([1, 3, 10, 64]), 10)
    >>> cache.bytes_per_token() < cache.fp16_bytes_per_token() / 3
    True
    """

    def __init__(self, scheme_name: str, bits=None, seed: int = 0, window: int = 0, *,
                 per_head: bool = True, keep_decoded: bool = True, **scheme_params):
        from kvstats.quant.schemes import make_scheme

        self.scheme_name, self.bits = scheme_name, bits
        self.seed = check_int(seed, "seed", low=0)
        self.window = check_int(window, "window", low=0)
        if not isinstance(per_head, bool):
            raise TypeError(f"per_head must be a bool; received {per_head!r}")
        self.per_head, self.keep_decoded = per_head, bool(keep_decoded)
        params = dict(scheme_params)
        sdef, _ = parse_scheme_name(scheme_name, params)
        if "residual" in sdef.params:  # a scheme's own fp window (kivi): the cache's window plays it
            params["residual"] = 0
        self.scheme_params = params
        _, parsed = parse_scheme_name(scheme_name, params)
        # Tokens sharing stored statistics are coded in whole groups (1: per vector).
        self.token_group = sdef.token_group(parsed)
        self._make_scheme = make_scheme
        # Schemes without random components need no per-head draws.
        self.deterministic = not sdef.randomized(parsed)
        # Fail now, not inside a forward pass: unknown names, bad bits or parameters.
        make_scheme(scheme_name, bits, 64, seed=0, **params)
        super().__init__(layer_class_to_replicate=self._new_layer)

    def _new_layer(self) -> _CodesLayer:
        return _CodesLayer(self, len(self.layers))

    def _make(self, dim, seed, draws):
        return self._make_scheme(self.scheme_name, self.bits, dim, seed=seed, draws=draws,
                                 **self.scheme_params)

    def __repr__(self) -> str:
        return (f"QuantizedCache({self.scheme_name!r}, bits={self.bits}, window={self.window}, "
                f"layers={len(self.layers)}, seq_length={self.get_seq_length()})")

    def nbytes(self) -> int:
        """Bytes the cache stores: every layer's codes plus its full-precision tail."""
        return sum(layer.nbytes() for layer in self.layers)

    def _tokens(self) -> int:
        layer = next((lay for lay in self.layers if lay.is_initialized), None)
        if layer is None:
            return 0
        return layer.get_seq_length() * layer.keys.shape[0]

    def bytes_per_token(self) -> float:
        """Stored bytes per cached token (all layers, K and V; per sequence of the batch)."""
        n = self._tokens()
        if n == 0:
            raise ValueError("the cache is empty: bytes_per_token needs at least one cached token")
        return self.nbytes() / n

    def fp16_bytes_per_token(self) -> float:
        """What an fp16 cache of the same layers and heads stores per token."""
        layers = [lay for lay in self.layers if lay.is_initialized]
        if not layers:
            raise ValueError("the cache is empty: fp16_bytes_per_token needs an initialized layer")
        return float(sum(2 * 2 * lay.keys.shape[1] * lay.keys.shape[-1] for lay in layers))

    def memory_report(self) -> dict:
        """Stored bytes, bytes per token, fp16 bytes per token and their ratio."""
        bpt, fp16 = self.bytes_per_token(), self.fp16_bytes_per_token()
        return {"scheme": self.scheme_name, "bits": self.bits, "window": self.window,
                "seq_length": self.get_seq_length(), "nbytes": self.nbytes(),
                "bytes_per_token": bpt, "fp16_bytes_per_token": fp16, "ratio_to_fp16": bpt / fp16}
