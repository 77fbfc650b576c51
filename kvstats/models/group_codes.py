"""Attention read from the codes of the token-grouped schemes (``kivi``, ``qjl``), mostly in torch.

The companion of :mod:`kvstats.models.code_attention` (per-vector schemes) for
:class:`kvstats.models.QuantizedCache`: the numpy coders of :mod:`kvstats.quant.uniform`
and :mod:`kvstats.quant.qjl_keys` code each whole group of tokens once; the side classes
here move what they store into torch buffers grown in place (nothing decoded is kept) and
compute a decode step's scores and output from them, batched over batch, heads and tokens:

- KIVI keys (per channel ``c``, groups ``g`` of G tokens, ``k̂_tc = z_gc + s_gc·x_tc``):
  ``q·k̂_t = (q ⊙ s_g)·x_t + q·z_g`` — the query scaled by each group's scales, one matmul
  per group against the integer codes (as float), plus ``q·z_g``;
- per-token uniform values (KIVI's, and the qjl scheme's; groups ``j`` of channels):
  ``Σ_t p_t v̂_t = Σ_t (p_t s_tj) x_t + Σ_t p_t z_tj`` on each channel group;
- QJL keys (:class:`~kvstats.quant.qjl_keys.QJLKeyQuantizer`): the estimator of
  :meth:`~kvstats.quant.qjl_keys.QJLKeyQuantizer.scores` — ``c·‖k_in‖·(S q_in)·σ_in +
  c'·‖k_out‖·(S' q_out)·σ'`` with ``q_out`` the query on the group's outlier channels and
  ``c`` the sketch's own constant (``Sketch.scale``); without outliers, on the CPU, by
  the compiled byte-table loop :meth:`~kvstats.models.lut_kernel.LUTKernel.sign_scores`.

Codes are held packed as the numpy coders pack them (:func:`kvstats.quant.packing.
pack_codes`; KIVI keys repacked along channels so that tokens are the growing axis: the
same bytes), sign bits packed, norms/scales/zeros float16 as stored, outlier indices
uint8/uint16; the per-step unpacking is a transient.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float

from kvstats._checks import check_int
from kvstats.models.code_attention import _byte_table, _shifts
from kvstats.models.growing_buffer import GrowingBuffer
from kvstats.models.lut_kernel import _kernel_for, kernel
from kvstats.models.qjl_sketch import _sketch_rows, _transposed
from kvstats.quant.packing import pack_codes, unpack_codes

__all__ = ["KIVIKeySide", "TokenValueSide", "QJLKeySide", "grouped_kind", "make_sides", "unpack_float"]

_SIGN_TABLE = _byte_table(torch.tensor([-1.0, 1.0]), 1)  # (256, 8): the ±1 signs of each byte
_SIGN_TABLE_NP = _SIGN_TABLE.numpy()


def unpack_float(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """Codes packed by :func:`kvstats.quant.packing.pack_codes` ``(..., nbytes)`` → their
    values as float32 ``(..., n)`` (a transient).

    Examples
    --------
    >>> c = np.array([[3, 0, 1, 2, 7]], dtype=np.uint8)
    >>> unpack_float(torch.from_numpy(pack_codes(c, 3)), 3, 5).tolist()
    [[3.0, 0.0, 1.0, 2.0, 7.0]]
    """
    if not isinstance(packed, torch.Tensor) or packed.dtype != torch.uint8:
        got = f"a {packed.dtype} tensor" if isinstance(packed, torch.Tensor) else type(packed).__name__
        raise TypeError(f"packed must be a uint8 torch.Tensor (pack_codes' bytes); received {got}")
    bits = check_int(bits, "bits", low=1, high=8)
    # n < 0 sliced codes off the end ([..., :n]) instead of being refused
    n = check_int(n, "n", low=0)
    need = -(-n * bits // 8)
    if packed.shape[-1] < need:
        raise ValueError(f"packed must hold at least {need} bytes per row for {n} codes of {bits} bits; "
                         f"received {packed.shape[-1]}")
    lead = packed.shape[:-1]
    if 8 % bits == 0:  # whole codes per byte, code j at bits j·bits (low bits first)
        # one shift-and-mask per code position, written into its strided slot: 4x faster
        # here than a gather from a (256, 8/bits) table, whose rows are too short to copy well
        per = 8 // bits
        out = torch.empty(*packed.shape, per, dtype=torch.float32, device=packed.device)
        for j in range(per):
            out[..., j] = (packed >> (j * bits)) & (2 ** bits - 1) if j else packed & (2 ** bits - 1)
        return out.view(*lead, -1)[..., :n]
    # eight codes per little-endian word of `bits` bytes (pack_codes' layout); pad to whole words
    nb = packed.shape[-1]
    whole = -(-nb // bits) * bits
    if whole != nb:
        packed = torch.nn.functional.pad(packed, (0, whole - nb))
    words = (packed.reshape(*lead, -1, bits).to(torch.int64) << _shifts(8, bits)).sum(-1)
    idx = (words[..., None] >> _shifts(bits, 8)) & (2 ** bits - 1)
    return idx.to(torch.float32).view(*lead, -1)[..., :n]


def _signs_pm(packed: torch.Tensor, m: int) -> torch.Tensor:
    """±1 float32 ``(..., m)`` of packed sign bits (bit 1 ↦ +1, little bit order)."""
    # a gather of each byte's row of ±1 values (20x faster here than shifting the bytes);
    # on the CPU numpy's take, whose 32-byte rows have a fast path, is 2x index_select's speed
    if packed.device.type == "cpu":
        out = torch.from_numpy(np.take(_SIGN_TABLE_NP, packed.numpy().reshape(-1), axis=0))
    else:
        out = _SIGN_TABLE.to(packed.device).index_select(0, packed.reshape(-1).to(torch.int32))
    return out.view(*packed.shape[:-1], -1)[..., :m]


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


class _Side:
    """Buffers of one side (keys or values) of a token-grouped scheme."""

    names: tuple[str, ...] = ()
    per_group: tuple[str, ...] = ()  # buffers with one entry per group of tokens (the rest: per token)

    def __init__(self):
        # step 1: these buffers grow by whole groups of tokens (or one entry per group)
        self.store = {n: GrowingBuffer(step=1) for n in self.names}

    def _append(self, **parts: np.ndarray) -> None:
        for name, a in parts.items():
            self.store[name].append(_t(a))

    def view(self, name: str) -> torch.Tensor:
        """The held entries of buffer ``name`` (a view, :meth:`GrowingBuffer.view`).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> keys.view("codes").shape, keys.view("scale").dtype     # 16 tokens, 2 groups of scales
        (torch.Size([1, 2, 16, 16]), torch.float16)
        """
        return self.store[name].view()

    def drop(self, n_tokens: int, group: int) -> None:
        """Forget the oldest ``n_tokens`` (whole groups of ``group`` tokens).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key); keys.drop(8, 8)
        >>> keys.view("codes").shape[2], keys.view("scale").shape[2]   # 8 tokens, 1 group left
        (8, 1)
        """
        if n_tokens % group:
            raise ValueError(f"n_tokens must be whole groups of {group}; received {n_tokens}")
        for name, buf in self.store.items():
            buf.drop(n_tokens // group if name in self.per_group else n_tokens)

    def fixed_tensors(self) -> list[torch.Tensor]:
        """The state that does not grow with tokens (sketches; none for uniform codes).

        Examples
        --------
        >>> import kvstats
        >>> keys, values = make_sides(kvstats.make_scheme("kivi", 2, 64, residual=0))
        >>> keys.fixed_tensors(), values.fixed_tensors()
        ([], [])
        """
        return []


class KIVIKeySide(_Side):
    """KIVI keys: per-channel fp16 scale/zero over groups of ``group`` tokens.

    Buffers: ``codes`` ``(B, H, n, ceil(d·bits/8))`` packed along channels, ``scale`` and
    ``zero`` ``(B, H, n/group, d)`` float16.

    Examples
    --------
    >>> import kvstats
    >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
    >>> keys, _ = make_sides(scheme)
    >>> rng = np.random.default_rng(0)
    >>> K, V = rng.standard_normal((2, 1, 2, 16, 64), dtype=np.float32)
    >>> codes = scheme.quantize(K, V)
    >>> keys.append(codes.key)                                   # two groups of 8 tokens
    >>> keys.view("codes").shape, keys.view("scale").shape
    (torch.Size([1, 2, 16, 16]), torch.Size([1, 2, 2, 64]))
    >>> K_hat = torch.from_numpy(scheme.dequantize(codes)[0])
    >>> torch.equal(keys.decode(), K_hat)                        # the numpy decode
    True
    >>> q = torch.randn(1, 2, 1, 64)
    >>> torch.allclose(keys.scores(q), q @ K_hat.transpose(-1, -2), atol=1e-4)
    True
    """

    names = ("codes", "scale", "zero")
    per_group = ("scale", "zero")

    def __init__(self, bits: int, group: int, dim: int):
        super().__init__()
        self.bits, self.group, self.dim = bits, group, dim

    def append(self, side_codes) -> None:
        """Append the :class:`~kvstats.quant.uniform.KIVISideCodes` of whole groups
        (no window: the cache's tail plays it).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key); keys.append(codes.key)
        >>> keys.view("codes").shape[2], keys.view("zero").shape[2]    # tokens, groups
        (32, 4)
        """
        u = side_codes.quantized
        n = side_codes.n_tokens
        ints = unpack_codes(u.codes, self.bits, n)                       # (B, H, d, n)
        self._append(codes=pack_codes(np.swapaxes(ints, -1, -2), self.bits),
                     scale=np.swapaxes(u.scale, -1, -2), zero=np.swapaxes(u.zero, -1, -2))

    def _grouped(self):
        x = unpack_float(self.view("codes"), self.bits, self.dim)
        B, H, N, d = x.shape
        return (x.view(B, H, N // self.group, self.group, d), self.view("scale").to(torch.float32),
                self.view("zero").to(torch.float32))

    def scores(self, q: Float[torch.Tensor, "B H Q d"], fused: bool | None = None) -> Float[torch.Tensor, "B H Q N"]:
        """``q·k̂`` for every coded token: ``(q ⊙ s_g)·x_t + q·z_g`` per group. ``fused``
        (None: when built, CPU queries) reads the packed codes by :meth:`LUTKernel.group_scores`;
        False: torch matmuls over the unpacked codes (same numbers up to float32 summation order).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> q = torch.randn(1, 2, 3, 64)
        >>> torch.allclose(keys.scores(q), q @ keys.decode().transpose(-1, -2), atol=1e-4)
        True
        """
        kern = _kernel_for(q, fused)
        if kern is not None:
            (B, H, Q, d), (c, s, z) = q.shape, (self.view(k).flatten(0, 1) for k in self.names)
            return kern.group_scores(q.reshape(B * H, Q, d), c, c.shape[1], s, z, self.bits, self.group).view(B, H, Q, -1)
        x, s, z = self._grouped()
        B, H, G, _, _ = x.shape
        raw = torch.matmul(q[:, :, None] * s[:, :, :, None, :], x.transpose(-1, -2))  # (B, H, G, Q, g)
        raw = raw + torch.matmul(q, z.transpose(-1, -2)).transpose(-1, -2)[..., None]
        return raw.permute(0, 1, 3, 2, 4).reshape(B, H, q.shape[2], -1)

    def decode(self) -> Float[torch.Tensor, "B H N d"]:
        """``k̂ = z_g + s_g·x`` (float32; what the numpy decoder gives).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> torch.equal(keys.decode(), torch.from_numpy(scheme.dequantize(codes)[0]))
        True
        """
        x, s, z = self._grouped()
        B, H = x.shape[:2]
        return (z[:, :, :, None, :] + s[:, :, :, None, :] * x).reshape(B, H, -1, self.dim)


class TokenValueSide(_Side):
    """Per-token uniform values (KIVI's values, the qjl scheme's values): fp16 scale/zero per
    group of ``group`` channels.

    Buffers: ``codes`` ``(B, H, n, ceil(d·bits/8))``, ``scale``, ``zero`` ``(B, H, n, ceil(d/group))``.

    Examples
    --------
    >>> import kvstats
    >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
    >>> _, values = make_sides(scheme)
    >>> rng = np.random.default_rng(0)
    >>> K, V = rng.standard_normal((2, 1, 2, 16, 64), dtype=np.float32)
    >>> codes = scheme.quantize(K, V)
    >>> values.append(codes.value)
    >>> values.view("codes").shape, values.view("scale").shape   # 8 channel groups of 8
    (torch.Size([1, 2, 16, 16]), torch.Size([1, 2, 16, 8]))
    >>> V_hat = torch.from_numpy(scheme.dequantize(codes)[1])
    >>> p = torch.softmax(torch.randn(1, 2, 1, 16), -1)
    >>> torch.allclose(values.accumulate(p), p @ V_hat, atol=1e-5), torch.equal(values.decode(), V_hat)
    (True, True)
    """

    names = ("codes", "scale", "zero")

    def __init__(self, bits: int, group: int, dim: int):
        super().__init__()
        self.bits, self.group, self.dim = bits, group, dim
        self.n_groups = -(-dim // group)

    def append(self, codes) -> None:
        """Append :class:`~kvstats.quant.uniform.UniformCodes` along channels (or a
        :class:`~kvstats.quant.uniform.KIVISideCodes` holding them).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> values.append(codes.value)
        >>> values.view("codes").shape, values.view("scale").shape   # per token: 8 groups of 8 channels
        (torch.Size([1, 2, 16, 16]), torch.Size([1, 2, 16, 8]))
        """
        u = getattr(codes, "quantized", codes)
        self._append(codes=u.codes, scale=u.scale, zero=u.zero)

    def _grouped(self):
        x = unpack_float(self.view("codes"), self.bits, self.dim)
        pad = self.n_groups * self.group - self.dim
        if pad:
            x = torch.nn.functional.pad(x, (0, pad))
        B, H, N, _ = x.shape
        return (x.view(B, H, N, self.n_groups, self.group), self.view("scale").to(torch.float32),
                self.view("zero").to(torch.float32))

    def accumulate(self, p: Float[torch.Tensor, "B H Q N"], fused: bool | None = None) -> Float[torch.Tensor, "B H Q d"]:
        """``Σ_t p_t v̂_t`` = ``Σ_t (p_t s_tj) x_t + Σ_t p_t z_tj`` on each channel group j
        (``fused``: as :meth:`KIVIKeySide.scores`, by :meth:`LUTKernel.token_accumulate`).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> values.append(codes.value)
        >>> p = torch.softmax(torch.randn(1, 2, 3, 16), -1)
        >>> torch.allclose(values.accumulate(p), p @ values.decode(), atol=1e-5)
        True
        """
        kern = _kernel_for(p, fused)
        if kern is not None:
            (B, H, Q, N), (c, s, z) = p.shape, (self.view(k).flatten(0, 1) for k in self.names)
            return kern.token_accumulate(p.reshape(B * H, Q, N), c, s, z, self.bits, self.group, self.dim).view(B, H, Q, -1)
        x, s, z = self._grouped()
        B, H, N, J, g = x.shape
        Q = p.shape[2]
        if J == 1:
            out = torch.matmul(p * s[..., 0][:, :, None, :], x[:, :, :, 0])[:, :, :, None, :]
        else:
            w = (p[..., None] * s[:, :, None]).permute(0, 1, 4, 2, 3)              # (B, H, J, Q, N)
            out = torch.matmul(w, x.permute(0, 1, 3, 2, 4)).permute(0, 1, 3, 2, 4)  # (B, H, Q, J, g)
        out = out + torch.matmul(p, z)[..., None]
        return out.reshape(B, H, Q, J * g)[..., :self.dim]

    def decode(self) -> Float[torch.Tensor, "B H N d"]:
        """``v̂ = z + s·x`` per channel group (float32; the numpy decode).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8)
        >>> keys, values = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> values.append(codes.value)
        >>> torch.equal(values.decode(), torch.from_numpy(scheme.dequantize(codes)[1]))
        True
        """
        x, s, z = self._grouped()
        B, H, N = x.shape[:3]
        return (z[..., None] + s[..., None] * x).reshape(B, H, N, -1)[..., :self.dim]


class QJLKeySide(_Side):
    """QJL keys (:class:`~kvstats.quant.qjl_keys.QJLKeyQuantizer`): sign bits of the
    inlier sketch and their norm per token; with outliers, the outlier sketch's signs and
    norm per token and the outlier channels per group of ``group`` tokens.

    Buffers: ``signs`` ``(B, H, n, ceil(m/8))``, ``norms`` ``(B, H, n)``; with outliers
    ``osigns``, ``onorms`` and ``idx`` ``(B, H, n/group, n_outliers)``.

    Examples
    --------
    >>> import kvstats
    >>> scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
    >>> keys, _ = make_sides(scheme)
    >>> rng = np.random.default_rng(0)
    >>> K, V = rng.standard_normal((2, 1, 2, 16, 64), dtype=np.float32)
    >>> codes = scheme.quantize(K, V)
    >>> keys.append(codes.key)
    >>> sorted(keys.store), keys.view("idx").shape               # 2 outlier channels per group
    (['idx', 'norms', 'onorms', 'osigns', 'signs'], torch.Size([1, 2, 2, 2]))
    >>> q = torch.randn(1, 2, 1, 64)
    >>> ref = scheme.key_coder.scores(q.numpy(), codes.key)      # the numpy estimator
    >>> torch.allclose(keys.scores(q), torch.from_numpy(ref), atol=1e-4)
    True
    """

    per_group = ("idx",)

    def __init__(self, coder):
        self.m, self.scale = coder.sketch.m, float(coder.sketch.scale)
        self.group, self.dim, self.n_out = coder.group_size, coder.dim, coder.n_outliers
        self.names = ("signs", "norms") + (("osigns", "onorms", "idx") if self.n_out else ())
        super().__init__()
        # S (and S'), float32: the numpy coder's own matrices where it holds them so
        self.rows = [_sketch_rows(coder.sketch)]
        if self.n_out:
            self.om, self.oscale = coder.outlier_sketch.m, float(coder.outlier_sketch.scale)
            self.rows.append(_sketch_rows(coder.outlier_sketch))
        self._views()

    def _views(self) -> None:
        """``st`` (and ``ost``): the ``Sᵀ`` views the products read."""
        self.st = _transposed(self.rows[0])
        if self.n_out:
            self.ost = _transposed(self.rows[1])

    # A copy or a pickle carries the matrices (with the coder's, when shared: one copy)
    # and rebuilds the views, which would otherwise copy them a second time.
    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("st", "ost")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._views()

    def append(self, codes) -> None:
        """Append :class:`~kvstats.quant.qjl_keys.QJLKeyCodes` of whole groups.

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
        >>> keys, _ = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> keys.view("signs").shape, keys.view("norms").shape     # 192 sign bits per token
        (torch.Size([1, 2, 16, 24]), torch.Size([1, 2, 16]))
        """
        self._append(signs=codes.inlier.signs, norms=codes.inlier.norms)
        if self.n_out:
            self._append(osigns=codes.outlier.signs, onorms=codes.outlier.norms, idx=codes.outlier_idx)

    def fixed_tensors(self) -> list[torch.Tensor]:
        """``Sᵀ`` (and the outlier sketch's ``S'ᵀ``): views of the numpy coder's matrices.

        Examples
        --------
        >>> import kvstats
        >>> keys, _ = make_sides(kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2))
        >>> [tuple(t.shape) for t in keys.fixed_tensors()]            # (draws, d, m)
        [(1, 64, 192), (1, 64, 192)]
        """
        return [self.st] + ([self.ost] if self.n_out else [])

    def _mask(self) -> torch.Tensor:
        """``(B, H, groups, d)`` float: 1 on each group's outlier channels."""
        idx = self.view("idx").to(torch.int64)
        return torch.zeros(*idx.shape[:-1], self.dim).scatter_(-1, idx, 1.0)

    def _part(self, sq: torch.Tensor, signs: str, norms: str, m: int, scale: float) -> torch.Tensor:
        """``c·‖k‖·⟨sq_group(k), σ_k⟩`` ``(B, H, Q, N)`` from per-group sketched queries
        ``sq`` ``(B, H, G, Q, m)``."""
        pm = _signs_pm(self.view(signs), m)
        B, H, N, _ = pm.shape
        raw = torch.matmul(sq, pm.view(B, H, sq.shape[2], -1, m).transpose(-1, -2))  # (B, H, G, Q, g)
        raw = raw.permute(0, 1, 3, 2, 4).reshape(B, H, sq.shape[3], N)
        return raw * (scale * self.view(norms).to(torch.float32))[:, :, None, :]

    def scores(self, q: Float[torch.Tensor, "B H Q d"], fused: bool | None = None) -> Float[torch.Tensor, "B H Q N"]:
        """The estimator of :meth:`QJLKeyQuantizer.scores` for every coded token. ``fused``
        (default: on the CPU, without outliers, when it could be built): the compiled
        byte-table loop :meth:`~kvstats.models.lut_kernel.LUTKernel.sign_scores`, or the
        torch unpacking and matmul (False); the same numbers up to float32 rounding.

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
        >>> keys, _ = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> q = torch.randn(1, 2, 3, 64)
        >>> ref = scheme.key_coder.scores(q.numpy(), codes.key)       # the numpy estimator
        >>> keys.scores(q).shape, torch.allclose(keys.scores(q), torch.from_numpy(ref), atol=1e-4)
        (torch.Size([1, 2, 3, 16]), True)
        """
        sq = torch.matmul(q, self.st)                                          # (B, H, Q, m)
        # (with outliers sq differs per group of tokens: byte tables per group would not pay)
        if fused not in (None, True, False):
            raise ValueError(f"fused must be None, True or False; received {fused!r}")
        kern = kernel() if fused is not False and not self.n_out and q.device.type == "cpu" else None
        if fused and kern is None:
            raise ValueError("fused must be None or False here: the byte-table loop reads CPU queries of a "
                             "cache without outliers, and needs a C compiler")
        if kern is not None:
            B, H, Q, m = sq.shape
            signs, norms = self.view("signs"), self.view("norms")
            N = norms.shape[-1]
            out = kern.sign_scores(sq.reshape(B * H, Q, m), signs.reshape(B * H, N, -1), N,
                                   norms.reshape(B * H, N), self.scale)
            return out.view(B, H, Q, N)
        if not self.n_out:
            return self._part(sq[:, :, None], "signs", "norms", self.m, self.scale)
        q_out = q[:, :, None] * self._mask()[:, :, :, None, :]                 # (B, H, G, Q, d)
        sq_in = sq[:, :, None] - torch.matmul(q_out, self.st[:, None])
        return (self._part(sq_in, "signs", "norms", self.m, self.scale)
                + self._part(torch.matmul(q_out, self.ost[:, None]), "osigns", "onorms", self.om, self.oscale))

    def numpy_codes(self, coder) -> object:
        """The held codes as the numpy coder's :class:`~kvstats.quant.qjl_keys.QJLKeyCodes`
        (views of the buffers), for its own decode: bit for bit what the model path decodes
        from the same codes, where :meth:`decode`'s matmuls round in another order (a
        prefill through either gives the same logits; QJL's sign bits amplify any
        difference in later layers).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
        >>> keys, _ = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> held = keys.numpy_codes(scheme.key_coder)
        >>> np.array_equal(scheme.key_coder.decode(held), scheme.key_coder.decode(codes.key))
        True
        """
        from kvstats.quant.qjl import QJLCodes
        from kvstats.quant.qjl_keys import QJLKeyCodes

        def arr(name):
            return np.ascontiguousarray(self.view(name).numpy())

        inlier = QJLCodes(arr("signs"), arr("norms"), self.m)
        n = inlier.norms.shape[-1]
        if self.n_out:
            outlier, idx = QJLCodes(arr("osigns"), arr("onorms"), self.om), arr("idx")
        else:
            outlier, idx = None, np.zeros((*inlier.norms.shape[:-1], n // self.group, 0), coder.idx_dtype)
        return QJLKeyCodes(inlier, outlier, idx, n, self.group, np.dtype(np.float32))

    def decode(self) -> Float[torch.Tensor, "B H N d"]:
        """Each part's ``c·‖k‖·Sᵀσ`` on its channels (float32).

        Examples
        --------
        >>> import kvstats
        >>> scheme = kvstats.make_scheme("qjl", 3, 64, group_size=8, n_outliers=2)
        >>> keys, _ = make_sides(scheme)
        >>> codes = scheme.quantize(*np.random.default_rng(0).standard_normal((2, 1, 2, 16, 64), dtype=np.float32))
        >>> keys.append(codes.key)
        >>> ref = scheme.key_coder.decode(codes.key)                   # the numpy decode
        >>> torch.allclose(keys.decode(), torch.from_numpy(ref), atol=1e-4)
        True
        """
        def rec(signs, norms, m, scale, st):
            x = torch.matmul(_signs_pm(self.view(signs), m), st.transpose(-1, -2))
            return x * (scale * self.view(norms).to(torch.float32))[..., None]

        out = rec("signs", "norms", self.m, self.scale, self.st)
        if not self.n_out:
            return out
        mask = self._mask().repeat_interleave(self.group, dim=2) > 0
        return torch.where(mask, rec("osigns", "onorms", self.om, self.oscale, self.ost), out)


def grouped_kind(scheme) -> str | None:
    """Which grouped side pair codes ``scheme`` (``'kivi'`` or ``'qjl'``), read from its
    coders' types, so that a scheme registered under another name with these coders is
    read the same way; ``None`` for any other scheme.

    Examples
    --------
    >>> import kvstats
    >>> grouped_kind(kvstats.make_scheme("kivi", 2, 64, residual=0)), grouped_kind(kvstats.make_scheme("KQV", 3, 64))
    ('kivi', None)
    """
    from kvstats.quant.qjl_keys import QJLKeyQuantizer
    from kvstats.quant.uniform import KIVIKeyCoder, KIVIValueCoder, UniformTokenCoder

    kc, vc = scheme.key_coder, scheme.value_coder
    if isinstance(kc, KIVIKeyCoder) and isinstance(vc, KIVIValueCoder):
        return "kivi"
    if isinstance(kc, QJLKeyQuantizer) and isinstance(vc, UniformTokenCoder):
        return "qjl"
    return None


def make_sides(scheme) -> tuple[_Side, _Side]:
    """The torch sides of a numpy scheme coded in groups (:func:`grouped_kind`: ``kivi``'s
    or ``qjl``'s coders): its coders' settings and sketches.

    Examples
    --------
    >>> import kvstats
    >>> k, v = make_sides(kvstats.make_scheme("kivi", 2, 64, residual=0))
    >>> type(k).__name__, type(v).__name__, sorted(k.store)
    ('KIVIKeySide', 'TokenValueSide', ['codes', 'scale', 'zero'])
    """
    kind = grouped_kind(scheme)
    kc, vc = scheme.key_coder, scheme.value_coder
    if kind is None:
        raise ValueError(f"scheme must be coded by kivi's or qjl's coders; received {scheme.name!r} with "
                         f"coders {type(kc).__name__}/{type(vc).__name__}")
    key = KIVIKeySide(kc.bits, kc.group_size, kc.dim) if kind == "kivi" else QJLKeySide(kc)
    return key, TokenValueSide(vc.bits, vc.group_size, vc.dim)
