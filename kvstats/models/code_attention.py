"""Attention read from the codes of a per-vector kvstats scheme, in torch.

(~600 lines as one idea: the coder that writes the codes and the attention that reads
them share one layout — packing, byte tables, rotation — and are checked against each
other; the buffers that hold them are :mod:`kvstats.models.growing_buffer`'s.)

The torch mirror of ``kvstats_gpu.decode`` (same math, docs/design.md's GPU path), for
:class:`kvstats.models.QuantizedCache`. A scheme side (keys or values) exported by
``Scheme.export()`` is TurboQuant-mse (norm + Lloyd–Max codes of the rotated unit vector)
or TurboQuant-prod (the same plus the signs of a QJL sketch of the residual and its norm).
With ``k = ‖k‖·Rᵀĉ (+ c·‖r‖·Sᵀσ)``:

- scores ``q·k = ‖k‖·(R q)·ĉ + c·‖r‖·(S q)·σ``: the query is rotated (and sketched) once
  per step, never the N keys;
- output ``Σ p_n v_n = Rᵀ(Σ p_n ‖v_n‖ ĉ_n) + c·Sᵀ(Σ p_n ‖r_n‖ σ_n)``: accumulated in the
  rotated (sketched) space and mapped back once per step.

Nothing decoded is kept (unless the cache is asked for a decoded copy: then the same
loops read the copy's float values instead of looking the codes up — the same numbers,
the look-up's cost apart). The look-ups run in the compiled loops of
:mod:`kvstats.models.lut_kernel` (each token's codes decoded into an L1 buffer and used at
once) when a C compiler is available, else as torch gathers (``index_select``; centroids
of one layer's tokens as a transient). :class:`SideCoder` also *encodes*, batched over
batch, heads and tokens: a prefill block with torch ops that mirror the numpy coders'
arithmetic (same rotation order, boundaries, float32 casts and norm rounding), a decode
step (≤ 16 tokens) in one C call.

How the model reaches it: :mod:`kvstats.models.attention_hook`. The token-grouped
schemes (kivi, qjl) score and accumulate through the sides of
:mod:`kvstats.models.group_codes` inside the same :func:`code_attention`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from jaxtyping import Float, UInt8

from kvstats.models.growing_buffer import GrowingBuffer  # noqa: F401 (re-exported: its former home)
from kvstats.quant.coder import float32_limits, norm_limits
from kvstats.quant.export import SideExport

__all__ = ["SideCoder", "GrowingBuffer", "code_attention", "hadamard"]

_NORM_DTYPES = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
                np.dtype(np.float64): torch.float64}


@lru_cache(maxsize=16)
def hadamard(n: int) -> torch.Tensor:
    """Sylvester's Hadamard matrix ``H_n`` (±1, float32), ``n`` a power of two.

    Examples
    --------
    >>> hadamard(4).tolist()[1]
    [1.0, -1.0, 1.0, -1.0]
    """
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        raise ValueError(f"n must be a power of two >= 1; received {n!r}")
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


@lru_cache(maxsize=16)
def _hadamard_rows(d: int, n: int) -> torch.Tensor:
    """The first ``d`` rows of ``H_n``, one tensor shared by every coder, cut from an uncached
    ``H_n`` (``hadamard(n)``'s lru_cache would keep the n × n matrix alive, uncounted)."""
    return hadamard.__wrapped__(n)[:d].clone()


def _norm_error(x: torch.Tensor, name: str, norm_dtype: torch.dtype) -> str:
    """Why norms of ``x`` cannot be stored: NaN/inf in it, else norms beyond ``norm_dtype``
    (float32 advised only from float16: beyond float32 it would not help)."""
    if bad := int((~torch.isfinite(x)).sum()):
        return f"{name} must be finite; received {bad} NaN/inf value(s) in a tensor of shape {tuple(x.shape)}"
    return (f"{name} has vector norms beyond the range of norm_dtype={str(norm_dtype)[6:]} (max "
            f"{torch.finfo(norm_dtype).max:.6g}; largest norm {float(x.float().square().sum(-1).sqrt().max()):.6g})"
            + ("; use norm_dtype=np.float32" if norm_dtype == torch.float16 else ""))


@lru_cache(maxsize=16)
def _shifts(step: int, count: int) -> torch.Tensor:
    return torch.arange(count, dtype=torch.int64) * step


def _pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """uint8 codes ``< 2**bits`` ``(..., n)`` → packed bytes ``(..., ceil(n/8)·bits)``.

    Code ``j`` of a group of eight sits at bit ``j·bits`` of a little-endian word of
    ``bits`` bytes (for 1, 2, 4, 8 bits: whole codes per byte, low bits first) — the
    layout of :func:`kvstats.quant.packing.pack_codes` and the QJL sign bits.
    """
    n = codes.shape[-1]
    if n % 8:
        codes = torch.nn.functional.pad(codes, (0, 8 - n % 8))
    lead = codes.shape[:-1]
    if 8 % bits == 0:
        per = 8 // bits
        c = codes.reshape(*lead, -1, per).to(torch.int32) << _shifts(bits, per).to(torch.int32)
        return c.sum(-1).to(torch.uint8)
    words = (codes.reshape(*lead, -1, 8).to(torch.int64) << _shifts(bits, 8)).sum(-1)
    return ((words[..., None] >> _shifts(8, bits)) & 255).to(torch.uint8).reshape(*lead, -1)


@lru_cache(maxsize=64)
def _codebook(centroids: bytes, boundaries: bytes, bits: int) -> tuple[torch.Tensor, ...]:
    """float32 centroids, boundaries, byte table (None for 3 and 5-7 bits) and the loops'
    table of a codebook, one set shared by every coder with that codebook (a Lloyd–Max
    codebook depends on bits and dimension only: one per cache, not one per layer)."""
    c, b = (torch.from_numpy(np.frombuffer(x, np.float32).copy()) for x in (centroids, boundaries))
    table = _byte_table(c, bits) if 8 % bits == 0 else None
    return c, b, table, table if bits != 3 else _byte_table(c, 3)


@lru_cache(maxsize=1)
def _sign_tables() -> tuple[torch.Tensor, torch.Tensor]:
    """The ±1 sign values and their (256, 8) byte table, shared by every prod coder."""
    values = torch.tensor([-1.0, 1.0])
    return values, _byte_table(values, 1)


def _byte_table(values: torch.Tensor, bits: int) -> torch.Tensor:
    """``(256, 8 // bits)``: the values of the codes packed in each byte value; for 3 bits
    ``(64, 2)``: the values of each pair of adjacent codes (6 bits, low code first)."""
    per = 8 // bits if 8 % bits == 0 else 2
    idx = (torch.arange(2 ** (bits * per))[:, None] >> _shifts(bits, per)) & (2 ** bits - 1)
    return values[idx].contiguous()


class SideCoder:
    """One side (keys or values) of an exported scheme, as torch tensors, for H heads.

    Parameters
    ----------
    exports : sequence of SideExport
        One per KV head (independent draws), or one shared by every head.

    Attributes
    ----------
    coder : {"mse", "prod"}
    bits, dim, dim_padded, m : int
        Scalar-code bits, head dimension, coded coordinates, sketch rows (0 for mse).
    code_bytes, sign_bytes : int
        Packed bytes per vector of the codes and of the sign bits.

    Examples
    --------
    >>> import kvstats
    >>> ex = kvstats.make_scheme("KQV", 4, 64, seed=0).export()
    >>> vc = SideCoder([ex.value])
    >>> x = torch.randn(1, 1, 5, 64)
    >>> parts = vc.encode(x)
    >>> sorted(parts), parts["codes"].shape, vc.nbytes_per_vector()
    (['codes', 'norms', 'rnorms', 'signs'], torch.Size([1, 1, 5, 24]), 36)
    >>> x_hat = vc.decode(parts)
    >>> bool(((x - x_hat).norm(dim=-1) < 0.5 * x.norm(dim=-1)).all())
    True
    """

    def __init__(self, exports: Sequence[SideExport]):
        if not exports or not all(isinstance(e, SideExport) for e in exports):
            raise TypeError(f"exports must be a non-empty sequence of SideExport; received {exports!r:.80}")
        e0 = exports[0]
        key = (e0.coder, e0.bits, e0.dim, e0.dim_padded, e0.m, e0.signs is None, e0.norm_dtype)
        for e in exports[1:]:
            if (other := (e.coder, e.bits, e.dim, e.dim_padded, e.m, e.signs is None, e.norm_dtype)) != key:
                raise ValueError(f"exports must share coder, bits, dims, sketch rows and norm dtype; "
                                 f"received {key} and {other}")
        if e0.coder not in ("mse", "prod"):
            raise ValueError(f"coder must be 'mse' or 'prod'; received {e0.coder!r}")
        self.coder, self.bits, self.dim, self.dim_padded = e0.coder, e0.bits, e0.dim, e0.dim_padded
        self.m = e0.m if e0.coder == "prod" else 0
        self.norm_dtype = _NORM_DTYPES[np.dtype(e0.norm_dtype)]
        d, dp = self.dim, self.dim_padded
        if e0.signs is None:
            if dp != d:
                raise ValueError(f"an unrotated side must have dim_padded == dim; received {dp} != {d}")
            self.signs = self.hd = None
        else:
            # numpy folds 1/sqrt(d_pad) into the signs (float64, then cast to float32) and applies
            # the Hadamard product to the zero-padded input: only H_dpad's first d rows meet x.
            s = np.stack([e.signs for e in exports]) / np.sqrt(dp)
            self.signs = torch.from_numpy(s[:, None, :d].astype(np.float32))  # (H or 1, 1, d)
            self.hd = _hadamard_rows(d, dp)                                    # (d, d_pad)
        # the look-up loops' table (lut_table): per byte, or per pair of codes for 3 bits
        self.centroids, self.boundaries, self.table, self.lut_table = _codebook(
            e0.centroids.astype(np.float32).tobytes(), e0.boundaries.astype(np.float32).tobytes(), self.bits)
        self.code_bytes = -(-dp // 8) * self.bits
        self.sketch, self.scale, self.sign_bytes = None, 0.0, 0
        if self.coder == "prod":
            self.sketch = torch.from_numpy(np.stack([e.sketch for e in exports]).astype(np.float32))  # (H|1, m, d)
            self.scale, self.sign_bytes = float(e0.sketch_scale), -(-self.m // 8)
            self.sign_values, self.sign_table = _sign_tables()

    def __getstate__(self) -> dict:
        # the compiled encoder's raw pointers (lut_kernel) address this object's tensors,
        # not a copy's: a deep copy or a pickle starts without them
        return {k: v for k, v in self.__dict__.items() if k != "_lut_static"}

    def check_fixed(self) -> None:
        """Refuse a rotation, codebook or sketch no longer as built: float32 CPU tensors of
        the coder's shapes. The compiled encoder reads their memory directly (another dtype
        coded silently wrong, another device crashed) and the torch encoder mirrors the
        numpy coder's float32 arithmetic: a coder's fixed state is not moved or cast.

        Examples
        --------
        >>> import kvstats
        >>> coder = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> coder.check_fixed()
        >>> coder.centroids = coder.centroids.double()
        >>> coder.check_fixed()
        Traceback (most recent call last):
        ...
        ValueError: the coder's centroids must be a float32 CPU tensor of shape (16,) ...
        """
        d, hs = self.dim, next((t.shape[0] for t in (self.signs, self.sketch) if t is not None), 1)
        expected = {"signs": (hs, 1, d), "hd": (d, self.dim_padded), "centroids": (2 ** self.bits,),
                    "boundaries": (2 ** self.bits - 1,), "sketch": (hs, self.m, d)}
        for name, shape in expected.items():
            t = getattr(self, name)
            if t is not None and (t.dtype != torch.float32 or t.device.type != "cpu" or tuple(t.shape) != shape):
                raise ValueError(f"the coder's {name} must be a float32 CPU tensor of shape {shape} (a coder's "
                                 f"rotation, codebook and sketch are not moved to another device or dtype); "
                                 f"received {t.dtype} {tuple(t.shape)} on {t.device}")

    @property
    def sketch_t(self) -> torch.Tensor:
        """``Sᵀ`` ``(H or 1, d, m)`` (a view), of a prod coder only.

        Examples
        --------
        >>> import kvstats
        >>> vc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().value])   # prod
        >>> vc.sketch_t.shape, vc.sketch_t.data_ptr() == vc.sketch.data_ptr()
        (torch.Size([1, 64, 64]), True)
        """
        return self.sketch.transpose(-1, -2)

    # ------------------------------------------------------------------ maps
    def rotate(self, x: Float[torch.Tensor, "*b H n d"]) -> Float[torch.Tensor, "*b H n d_pad"]:
        """``R x`` (float32): the randomized Hadamard rotation (``x`` itself unrotated).

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> x = torch.randn(1, 1, 5, 64)
        >>> torch.allclose(kc.rotate(x).norm(dim=-1), x.norm(dim=-1))   # orthogonal
        True
        """
        return x if self.hd is None else torch.matmul(x * self.signs, self.hd)

    def unrotate(self, y: Float[torch.Tensor, "*b H n d_pad"]) -> Float[torch.Tensor, "*b H n d"]:
        """``Rᵀ y`` (float32), the inverse of :meth:`rotate`.

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> x = torch.randn(1, 1, 5, 64)
        >>> torch.allclose(kc.unrotate(kc.rotate(x)), x, atol=1e-5)
        True
        """
        return y if self.hd is None else torch.matmul(y, self.hd.T) * self.signs

    def centroids_of(self, packed: UInt8[torch.Tensor, "*b n nbytes"]) -> Float[torch.Tensor, "*b n d_pad"]:
        """Centroids ``ĉ`` of packed codes (a transient; nothing is kept).

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> parts = kc.encode(torch.randn(1, 1, 5, 64))
        >>> c = kc.centroids_of(parts["codes"])                     # (1, 1, 5, 64)
        >>> c.shape, bool(torch.isin(c, kc.centroids).all())
        (torch.Size([1, 1, 5, 64]), True)
        """
        lead = packed.shape[:-1]
        if self.table is not None:
            # index_select: several times faster than advanced indexing on CPU
            out = self.table.index_select(0, packed.reshape(-1).to(torch.int32))
            return out.view(*lead, -1)[..., :self.dim_padded]
        b = self.bits
        # eight codes per little-endian word of b bytes; int32 holds b <= 3 (24 bits)
        wide = torch.int32 if b <= 3 else torch.int64
        words = (packed.reshape(*lead, -1, b).to(wide) << _shifts(8, b).to(wide)).sum(-1, dtype=wide)
        idx = (words[..., None] >> _shifts(b, 8).to(wide)) & (2 ** b - 1)
        return self.centroids.index_select(0, idx.reshape(-1)).view(*lead, -1)[..., :self.dim_padded]

    def signs_of(self, packed: UInt8[torch.Tensor, "*b n mbytes"]) -> Float[torch.Tensor, "*b n m"]:
        """±1 residual signs of packed sign bits (bit 1 ↦ +1), of a prod coder.

        Examples
        --------
        >>> import kvstats
        >>> vc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().value])   # prod
        >>> vc.signs_of(torch.tensor([[5] + [0] * 7], dtype=torch.uint8))[0, :4].tolist()
        [1.0, -1.0, 1.0, -1.0]
        """
        out = self.sign_table.index_select(0, packed.reshape(-1).to(torch.int32))
        return out.view(*packed.shape[:-1], -1)[..., :self.m]

    # ------------------------------------------------------------------ coding
    def _norms(self, x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        norms = torch.sqrt((x * x).sum(-1))
        if norms.numel() and not float(norms.max()) <= torch.finfo(self.norm_dtype).max:  # NaN/inf too
            raise ValueError(_norm_error(x, name, self.norm_dtype))
        return norms, norms.to(self.norm_dtype)

    def storable_limits(self, x: Float[torch.Tensor, "*b H n d"]) -> list[tuple[str, float, float]]:
        """float32 and ``norm_dtype``, norms as `encode` computes them (:mod:`kvstats.quant.coder`).

        Examples
        --------
        >>> import kvstats
        >>> SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key]).storable_limits(torch.ones(1, 64))[1]
        ('vector norms (stored as float16)', 65504.0, 8.0)
        """
        return float32_limits(x) + norm_limits(torch.sqrt(x.float().square().sum(-1)), str(self.norm_dtype)[6:])

    def encode(self, x: Float[torch.Tensor, "*b H n d"], fused: bool | None = None) -> dict[str, torch.Tensor]:
        """Codes of float32 vectors: ``codes`` (packed uint8), ``norms``; prod adds
        ``signs`` (packed sign bits) and ``rnorms`` (residual norms).

        ``fused`` (default: for blocks of at most 16 tokens of a ``(B, H, n, d)`` input
        with float16 norms, when the loops of :mod:`kvstats.models.lut_kernel` are built):
        one C call instead of ~40 small torch ops (a decode step); larger blocks (a
        prefill) take the torch ops, which mirror the numpy coder's arithmetic.

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])   # mse, 4 bits
        >>> parts = kc.encode(torch.randn(2, 3, 5, 64))
        >>> {k: (tuple(v.shape), v.dtype) for k, v in parts.items()}
        {'codes': ((2, 3, 5, 32), torch.uint8), 'norms': ((2, 3, 5), torch.float16)}
        """
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have head dimension {self.dim} (this coder's) on its last axis; "
                             f"received shape {tuple(x.shape)}")
        x = x.to(torch.float32)
        if fused is None:
            fused = x.ndim == 4 and x.shape[-2] <= 16 and self.norm_dtype == torch.float16
        if fused:
            from kvstats.models.lut_kernel import kernel

            if (kern := kernel()) is not None:
                return kern.encode(self, x)
        self.check_fixed()
        norms, stored = self._norms(x, "x")
        inv = torch.where(norms > 0, 1.0 / norms.double(), 0.0).to(torch.float32)
        # contiguous: unrotated (KV) states of a transposed view keep its strides, which
        # bucketize would copy with a UserWarning
        codes = torch.bucketize(self.rotate(x * inv[..., None]).contiguous(), self.boundaries)
        parts = {"codes": _pack(codes.to(torch.uint8), self.bits), "norms": stored}
        if self.coder == "prod":
            base = self.unrotate(self.centroids[codes]) * stored.to(torch.float32)[..., None]
            r = x - base
            parts["signs"] = _pack((torch.matmul(r, self.sketch_t) >= 0).to(torch.uint8), 1)
            parts["rnorms"] = self._norms(r, "the residual of x")[1]
        return parts

    def decode(self, parts: dict[str, torch.Tensor]) -> Float[torch.Tensor, "*b H n d"]:
        """``x̂`` (float32) from :meth:`encode`'s parts: what a decoded copy would hold.

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> x = torch.randn(1, 1, 400, 64)
        >>> rel = ((kc.decode(kc.encode(x)) - x).norm(dim=-1) / x.norm(dim=-1)).square().mean()
        >>> bool(abs(rel / 0.00913 - 1) < 0.1)   # the closed form: REGISTRY["KQV"].key_rel_mse(4, 64)
        True
        """
        x = self.unrotate(self.centroids_of(parts["codes"])) * parts["norms"].to(torch.float32)[..., None]
        if self.coder == "prod":
            rec = torch.matmul(self.signs_of(parts["signs"]), self.sketch)
            x = x + rec * (self.scale * parts["rnorms"].to(torch.float32))[..., None]
        return x

    def nbytes_per_vector(self) -> int:
        """Stored bytes per coded vector (codes, norm; prod: signs and residual norm).

        Examples
        --------
        >>> import kvstats
        >>> ex = kvstats.make_scheme("KQV", 4, 64, seed=0).export()
        >>> SideCoder([ex.key]).nbytes_per_vector()      # 64 codes of 4 bits + a float16 norm
        34
        >>> SideCoder([ex.value]).nbytes_per_vector()    # 3 bits + norm + 64 sign bits + norm
        36
        """
        nb = torch.empty((), dtype=self.norm_dtype).element_size()
        return self.code_bytes + nb + (self.sign_bytes + nb if self.coder == "prod" else 0)

    def fixed_tensors(self) -> list[torch.Tensor]:
        """The per-layer state that does not grow with tokens (rotation, codebook, sketch).

        Examples
        --------
        >>> import kvstats
        >>> kc = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key])
        >>> [tuple(t.shape) for t in kc.fixed_tensors()]    # centroids, boundaries, signs, H rows, byte table
        [(16,), (15,), (1, 1, 64), (64, 64), (256, 2)]
        """
        out = [t for t in (self.centroids, self.boundaries, self.signs, self.hd, self.table, self.sketch) if t is not None]
        if self.lut_table is not None and self.lut_table is not self.table:
            out.append(self.lut_table)
        if self.coder == "prod":
            out += [self.sign_values, self.sign_table]
        return out


def code_attention(query: Float[torch.Tensor, "B Hq Q d"], layer, attention_mask: torch.Tensor | None,
                   scaling: float | None, n_rep: int, *, fused: bool | None = None, weights: bool = False
                   ) -> Float[torch.Tensor, "B Q Hq d"] | tuple[torch.Tensor, torch.Tensor]:
    """Attention of ``query`` over a code-reading cache layer (coded tokens + fp tail).

    Parameters
    ----------
    query : ``(B, Hq, Q, d)``
        Post-RoPE queries; head ``h·n_rep + g`` attends to KV head ``h`` (``repeat_kv``).
    layer : the cache layer (``key_coder``, ``value_coder``, ``store``, ``n_coded``,
        ``tail_keys``/``tail_values``: the full-precision tail in the model's dtype,
        ``decoded``: a copy of the looked-up
        values under the store's names ``k_codes``/``k_signs``/``v_codes``/``v_signs``,
        read instead of the codes when present, or empty; for kivi/qjl, ``key_side`` and
        ``value_side`` of :mod:`kvstats.models.group_codes`, which score and accumulate
        from their own buffers).
    attention_mask : ``(B, 1, Q, L)`` or ``(B, Hq, Q, L)`` (one per query head) bool (True =
        attend) or additive float, or None (causal: query i is at position ``L − Q + i``;
        a layer with a ``sliding_window`` W also hides keys W or more positions back).
        Leading axes of size 1 broadcast; a last axis longer than ``L`` is read from its end.
    scaling : float or None
        Score scale > 0; None: ``1/√d``, as transformers' sdpa (torch's ``scale=None``).
    n_rep : int
        Query heads per KV head.
    fused : bool, optional
        Use the compiled look-up loops of :mod:`kvstats.models.lut_kernel` (default: when
        they could be built) or the torch gathers (False). Same numbers up to float32
        summation order. kivi/qjl caches: their key scores and value sums have loops too
        (qjl's keys: without outliers).
    weights : bool
        Also return the attention probabilities ``(B, Hq, Q, L)`` in ``query``'s dtype (what
        transformers' eager attention returns beside its output).

    Returns
    -------
    torch.Tensor ``(B, Q, Hq, d)`` in ``query``'s dtype (what transformers' attention
    functions return), and the probabilities with ``weights=True``.

    Examples
    --------
    Four query heads on two KV heads, one decode step over 7 coded tokens and a
    full-precision window of 2: the same as softmax attention over the decoded cache.

    >>> from kvstats.models import QuantizedCache
    >>> g = torch.Generator().manual_seed(0)
    >>> k, v = torch.randn(1, 2, 9, 64, generator=g), torch.randn(1, 2, 9, 64, generator=g)
    >>> handle, _ = QuantizedCache("KQV", 4, window=2).update(k, v, layer_idx=0)
    >>> q = torch.randn(1, 4, 1, 64, generator=g)
    >>> out = code_attention(q, handle.layer, None, 64 ** -0.5, n_rep=2)
    >>> out.shape, handle.layer.n_coded
    (torch.Size([1, 1, 4, 64]), 7)
    >>> K, V = (x.repeat_interleave(2, 1) for x in handle.layer.dequantized())
    >>> ref = (torch.softmax(q @ K.transpose(-1, -2) / 8, -1) @ V).transpose(1, 2)
    >>> torch.allclose(out, ref, atol=1e-5)
    True
    """
    from kvstats.models.lut_kernel import kernel

    kern = kernel() if fused is None or fused else None
    if fused and kern is None:
        raise ValueError("fused must be None or False: the look-up loops could not be built here")
    if layer.tail_keys is None or not layer.n_coded + layer.tail_keys.shape[-2]:
        # (was an AttributeError, or torch.cat's error on an empty list of scores)
        raise ValueError("layer must hold at least one token to attend to; it holds none (no update, "
                         "or one of 0 tokens)")
    d_layer, H = layer.tail_keys.shape[-1], layer.n_heads
    # a complex query was cast to its real part (a warning only), an integer 0/1 mask added
    if query.ndim != 4 or query.shape[-1] != d_layer or not query.is_floating_point():
        raise ValueError(f"query must be a real floating-point tensor (B, Hq, Q, {d_layer}) (the layer's head "
                         f"dimension); received {query.dtype} of shape {tuple(query.shape)}")
    if attention_mask is not None and not (attention_mask.dtype == torch.bool or attention_mask.is_floating_point()):
        raise ValueError(f"attention_mask must be bool (True = attend) or an additive float mask, or None; "
                         f"received dtype {attention_mask.dtype}")
    scaling = d_layer ** -0.5 if scaling is None else scaling  # as transformers' sdpa (torch's scale=None)
    if isinstance(scaling, bool) or not isinstance(scaling, numbers.Real) or not 0 < scaling < float("inf"):
        raise ValueError(f"scaling must be None (1/sqrt(d)) or a positive finite real number; received {scaling!r}")
    if isinstance(n_rep, bool) or not isinstance(n_rep, int) or n_rep < 1 or query.shape[1] != n_rep * H:
        raise ValueError(f"n_rep must be the query heads per KV head (the layer has {H} KV heads); "
                         f"received n_rep={n_rep!r} with {query.shape[1]} query heads")
    if query.shape[0] != layer.tail_keys.shape[0]:
        raise ValueError(f"query must have the layer's batch of {layer.tail_keys.shape[0]} sequences; received "
                         f"shape {tuple(query.shape)}")
    sides = getattr(layer, "key_side", None) is not None  # a token-grouped scheme (kivi, qjl)
    half = not sides and (layer.key_coder.norm_dtype == torch.float16
                          and layer.value_coder.norm_dtype == torch.float16)
    if not half:  # the loops read float16 norms (the schemes' default)
        if fused and not sides:
            raise ValueError("fused must be None or False for norm dtypes other than float16")
        kern = None
    B, Hq, Q, d = query.shape
    GQ = n_rep * Q
    qf = query.to(torch.float32).reshape(B, H, GQ, d) * scaling
    N, st = layer.n_coded, layer.store
    T = layer.tail_keys.shape[-2]
    window = getattr(layer, "sliding_window", None)  # what a None mask must still hide
    # the decoded copy of the looked-up values, when the layer keeps one (keep_decoded=True):
    # read in place of the codes by the same arithmetic, hence the same numbers
    copy = layer.decoded if "k_codes" in layer.decoded else {}

    def flat(buf):
        return None if buf is None else buf.buf.view(B * H, *buf.buf.shape[2:])

    def values(coder, name, signs):
        if name in copy:
            return copy[name].view()
        return coder.signs_of(st[name].view()) if signs else coder.centroids_of(st[name].view())

    def lookup_scores(qx, coder, name, scale, signs):
        if kern is not None:
            table = coder.sign_values if signs else coder.centroids
            out = kern.scores(qx.reshape(B * H, GQ, -1), flat(st[name]), N,
                              scale.buf.view(B * H, scale.buf.shape[2]), table, 1 if signs else coder.bits,
                              coder.sign_table if signs else coder.lut_table, dense=flat(copy.get(name)))
            return out.view(B, H, GQ, N)
        vals = values(coder, name, signs)
        return torch.matmul(qx, vals.transpose(-1, -2)) * scale.view().to(torch.float32)[:, :, None, :]

    def lookup_sum(p, coder, name, scale, mult, signs):
        if kern is not None:
            width = coder.m if signs else coder.dim_padded
            table = coder.sign_values if signs else coder.centroids
            out = kern.accumulate(p.reshape(B * H, GQ, N), flat(st[name]), scale.buf.view(B * H, scale.buf.shape[2]),
                                  mult, table, 1 if signs else coder.bits, width,
                                  coder.sign_table if signs else coder.lut_table, dense=flat(copy.get(name)))
            return out.view(B, H, GQ, width)
        w = p * (mult * scale.view().to(torch.float32))[:, :, None, :]
        return torch.matmul(w, values(coder, name, signs))

    parts = []
    if N and sides:
        parts.append(layer.key_side.scores(qf, fused=fused))   # both grouped key sides have a loop
    elif N:
        kc = layer.key_coder
        s = lookup_scores(kc.rotate(qf), kc, "k_codes", st["k_norms"], False)
        if kc.coder == "prod":
            s = s + lookup_scores(torch.matmul(qf, kc.sketch_t) * kc.scale, kc, "k_signs", st["k_rnorms"], True)
        parts.append(s)
    if T:
        parts.append(torch.matmul(qf, layer.tail_keys.to(torch.float32).transpose(-1, -2)))
    s = parts[0] if len(parts) == 1 else torch.cat(parts, -1)
    L = N + T
    s = s.view(B, H, n_rep, Q, L)
    if attention_mask is not None:
        mask = attention_mask[..., -L:]
        if (mask.ndim != 4 or mask.shape[0] not in (1, B) or mask.shape[1] not in (1, Hq)
                or mask.shape[2] not in (1, Q) or mask.shape[3] != L):
            raise ValueError(f"attention_mask must be (B, 1 or Hq, Q, >= L) = ({B}, 1 or {Hq}, {Q}, >= {L}) "
                             f"(axes of size 1 broadcast); received shape {tuple(attention_mask.shape)}")
        # per query head: head h·n_rep + g attends through KV head h (repeat_kv's order)
        mask = mask[:, :, None] if mask.shape[1] == 1 else mask.unflatten(1, (H, n_rep))
        if mask.dtype == torch.bool:
            s = s.masked_fill(~mask, torch.finfo(torch.float32).min)
        else:
            s = s + mask.to(torch.float32)
    elif Q > 1 or window:
        # causal, and within a sliding window (positions relative to the last held token)
        pos, kpos = torch.arange(L - Q, L, device=s.device)[:, None], torch.arange(L, device=s.device)[None, :]
        hidden = kpos > pos
        if window:
            hidden = hidden | (kpos <= pos - window)
        s = s.masked_fill(hidden, torch.finfo(torch.float32).min)
    p = torch.softmax(s, dim=-1).view(B, H, GQ, L)
    out = None
    if N and sides:
        out = layer.value_side.accumulate(p[..., :N] if T else p, fused=fused)
    elif N:
        vc = layer.value_coder
        pc = p[..., :N] if T else p
        out = vc.unrotate(lookup_sum(pc, vc, "v_codes", st["v_norms"], 1.0, False))
        if vc.coder == "prod":
            out = out + torch.matmul(lookup_sum(pc, vc, "v_signs", st["v_rnorms"], vc.scale, True), vc.sketch)
    if T:
        tail = torch.matmul(p[..., N:], layer.tail_values.to(torch.float32))
        out = tail if out is None else out + tail
    out = out.view(B, H, n_rep, Q, d).reshape(B, Hq, Q, d).transpose(1, 2)
    out = out.to(query.dtype).contiguous()
    if weights:
        return out, p.view(B, Hq, Q, L).to(query.dtype)
    return out
