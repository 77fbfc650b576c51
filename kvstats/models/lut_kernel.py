"""Fused CPU loops for the code-reading attention: look codes up and use them in one pass.

(The C source of the loops is :mod:`kvstats.models.lut_source`; this module compiles it
once and checks every array before the loops read or write it.)

Pure torch looks codes up with a gather (``index_select``) that costs ~2 ns per code on a
CPU core, several times a float multiply-add, and materialises the centroids of every
cached token at every step. The two loops here decode one token's packed codes into a
small buffer (a 2**bits-entry table, in L1) and use it at once, as the TurboQuant/QJL
kernels do on a GPU:

- ``scores[bh, g, t] = scale[bh, t] · Σ_j q[bh, g, j] · table[code(bh, t, j)]``
- ``acc[bh, g, j]   += w[bh, g, t] · table[code(bh, t, j)]``  (over t)

Sign bits are 1-bit codes with the table ``[-1, +1]``. Packed codes use the layout of
:func:`kvstats.models.code_attention._pack` (eight codes per little-endian word of
``bits`` bytes). Both loops can read a decoded copy of those values instead of the codes
(``dense``; the cache's ``keep_decoded=True`` mode): the same arithmetic on the same
numbers, so the two give bit-identical attention. A third loop codes a decode step's
tokens (TurboQuant-mse/prod with float16 norms, rounded as torch rounds) straight into the
cache's buffers. A fourth scores a query against QJL's packed sign bits by byte tables
(:meth:`LUTKernel.sign_scores`: per query, for each byte position the 256 signed sums of
its 8 sketched coordinates, then one look-up per byte of a token instead of 8 multiply-adds
after unpacking). Two more read KIVI's uniform codes (``code · scale + zero``, float16
scale/zero per group) from their packed bytes, eight tokens' codes at a time into L1
instead of a float copy of the whole cache: :meth:`LUTKernel.group_scores` (keys, scale
and zero per channel over groups of tokens; ``q ⊙ s`` and ``q·z`` once per group) and
:meth:`LUTKernel.token_accumulate` (values, per token over groups of channels). The C
source is compiled once per machine and CPU with the system C compiler (``cc -O3
-march=native``, reassociation allowed so the dot products vectorise;
under a second) into the kvstats cache directory and loaded with ctypes: no torch headers,
no Python build step. Without a compiler (or with ``KVSTATS_LUT_KERNEL=0``) :func:`kernel`
returns None and the caller uses its torch path (the same numbers up to float32 summation
order; ``tests/models/test_code_attention.py`` and, for the sign scores and KIVI's codes,
``tests/models/test_group_codes.py`` check both).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from kvstats.models.lut_source import SOURCE as _SOURCE

__all__ = ["kernel", "LUTKernel"]


# Reassociation only (the dot products' sums vectorise); no other fast-math licence.
_FLAGS = ("-O3", "-shared", "-fPIC", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math")


class LUTKernel:
    """The loaded loops (see the module docstring); build with :func:`kernel`.

    :meth:`scores` and :meth:`accumulate` read a coder's packed codes (each method's example
    checks them against the torch gather of the same centroids), :meth:`encode` writes them.

    Examples
    --------
    >>> k = kernel()                                   # None without a C compiler
    >>> k is None or isinstance(k, LUTKernel)
    True
    """

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        p, i, l = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
        lib.lut_scores.argtypes = [p, p, p, p, p, p, i, i, i, i, i, l, l, l, p, l, l]
        lib.lut_accumulate.argtypes = [p, p, p, ctypes.c_float, p, p, p, i, i, i, i, i, l, l, l, p, l, l]
        lib.encode.argtypes = [p, p, p, p, p, p, i, i, i, i, i, i, i, i, p, p, p, p, l]
        lib.sign_scores.argtypes = [p, p, p, ctypes.c_float, p, p, i, i, i, i, l, l, l]
        lib.lut_scores.restype = lib.lut_accumulate.restype = lib.encode.restype = ctypes.c_int
        lib.sign_scores.restype = ctypes.c_int
        lib.group_scores.argtypes = [p, p, p, p, p, p, i, i, i, i, i, i, l, l, l, l, l, l]
        lib.token_accumulate.argtypes = [p, p, p, p, p, i, i, i, i, i, i, l, l, l, l, l, l]
        lib.group_scores.restype = lib.token_accumulate.restype = ctypes.c_int
        self._tables: dict = {}

    def _byte_table(self, table: torch.Tensor, bits: int, given: torch.Tensor | None = None) -> int | None:
        """Pointer to the per-byte value table of ``table`` (bits dividing 8; for 3 bits the
        per-pair table), kept alive here; None for other widths."""
        if 8 % bits and bits != 3:
            return None
        shape = (256, 8 // bits) if 8 % bits == 0 else (64, 2)
        if given is not None:
            if given.shape != shape or given.dtype != torch.float32 or not given.is_contiguous():
                raise ValueError(f"bytetab must be contiguous float32 {shape}; received "
                                 f"{given.dtype} {tuple(given.shape)}")
            return given.data_ptr()
        key = (bits, table.numpy().tobytes())  # by content: codebooks repeat across layers and caches
        if key not in self._tables:
            from kvstats.models.code_attention import _byte_table

            self._tables[key] = _byte_table(table.contiguous(), bits)
        return self._tables[key].data_ptr()

    @staticmethod
    def _table(table: torch.Tensor, bits: int) -> torch.Tensor:
        """The ``2**bits`` values of the codes, float32 (the loops read ``table[code]``)."""
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
            raise ValueError(f"bits must be an integer in [1, 8]; received {bits!r}")
        if table.dtype != torch.float32 or table.ndim != 1 or table.shape[0] != 2 ** bits:
            raise ValueError(f"table must be float32 ({2 ** bits},) (a value per {bits}-bit code); received "
                             f"{table.dtype} {tuple(table.shape)}")
        return table.contiguous()

    @staticmethod
    def _on_cpu(**tensors: torch.Tensor | None) -> None:
        """The loops read raw CPU pointers: a tensor elsewhere (an accelerator's, meta) is a
        ValueError, not a crash."""
        for name, t in tensors.items():
            if t is not None and t.device.type != "cpu":
                raise ValueError(f"{name} must be a CPU tensor (the loops read its memory directly); "
                                 f"received device {t.device}")

    # The C loops index rows bh < BH and tokens t < n of these arrays: every shape they
    # read is checked here, so a mismatch is a ValueError, never a read past the end.
    @staticmethod
    def _codes(codes: torch.Tensor, BH: int, n: int, n_codes: int, bits: int,
               name: str = "codes") -> tuple[torch.Tensor, int, int]:
        """(BH, >= n tokens, nbytes) uint8 with a contiguous last axis → (tensor, stride0, stride1)."""
        nbytes = -(-n_codes // 8) * bits
        if (codes.dtype != torch.uint8 or codes.ndim != 3 or codes.stride(-1) != 1 or codes.shape[0] != BH
                or codes.shape[1] < n or codes.shape[-1] != nbytes):
            raise ValueError(f"{name} must be uint8 ({BH}, >= {n}, {nbytes}) with a contiguous last axis; "
                             f"received {codes.dtype} {tuple(codes.shape)}")
        return codes, codes.stride(0), codes.stride(1)

    @staticmethod
    def _half(scale: torch.Tensor, BH: int, n: int, name: str = "scale") -> tuple[torch.Tensor, int]:
        if (scale.dtype != torch.float16 or scale.ndim != 2 or scale.stride(-1) != 1 or scale.shape[0] != BH
                or scale.shape[-1] < n):
            raise ValueError(f"{name} must be float16 ({BH}, >= {n}) with a contiguous last axis; received "
                             f"{scale.dtype} {tuple(scale.shape)}")
        return scale, scale.stride(0)

    @staticmethod
    def _dense(dense: torch.Tensor | None, BH: int, n: int, width: int) -> tuple[int | None, int, int]:
        """(pointer, stride0, stride1) of a decoded copy ``(BH, >= n, width)`` float32, or NULL."""
        if dense is None:
            return None, 0, 0
        if dense.dtype != torch.float32 or dense.ndim != 3 or dense.stride(-1) != 1 or dense.shape[0] != BH \
                or dense.shape[-1] != width or dense.shape[-2] < n:
            raise ValueError(f"dense must be float32 ({BH}, >= {n}, {width}) with a contiguous last axis; "
                             f"received {dense.dtype} {tuple(dense.shape)}")
        return dense.data_ptr(), dense.stride(0), dense.stride(1)

    def scores(self, q: torch.Tensor, codes: torch.Tensor, n: int, scale: torch.Tensor,
               table: torch.Tensor, bits: int, bytetab: torch.Tensor | None = None,
               dense: torch.Tensor | None = None) -> torch.Tensor:
        """``(BH, G, n)``: ``scale[bh, t] · q[bh, g] · table[codes of token t]`` for the
        first ``n`` tokens of ``codes`` ``(BH, capacity, nbytes)`` and float16 ``scale``
        ``(BH, capacity)``. ``bytetab``: the ``(256, 8 // bits)`` values per byte (3 bits:
        ``(64, 2)`` per pair of codes; made from ``table`` when not given). ``dense``: a
        decoded copy of the looked-up values ``(BH, capacity, D)`` float32, read instead of
        ``codes`` by the same loop (so the same values give bit-identical scores).

        Examples
        --------
        >>> import kvstats; from kvstats.models.code_attention import SideCoder
        >>> coder, k = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key]), kernel()
        >>> codes, norms = coder.encode(torch.randn(2, 5, 64), fused=False).values()   # (BH, n, ·)
        >>> c = coder.centroids_of(codes) * norms.float()[..., None]          # looked up: (BH, n, D)
        >>> q = torch.randn(2, 3, 64)                           # k: None without a C compiler
        >>> k is None or torch.allclose(k.scores(q, codes, 5, norms, coder.centroids, 4), q @ c.mT, atol=1e-5)
        True
        """
        self._on_cpu(q=q, codes=codes, scale=scale, table=table, bytetab=bytetab, dense=dense)
        BH, G, D = q.shape
        q, table = q.contiguous().to(torch.float32), self._table(table, bits)
        codes, s0, s1 = self._codes(codes, BH, n, D, bits)
        scale, ss0 = self._half(scale, BH, n)
        dptr, d0, d1 = self._dense(dense, BH, n, D)
        out = torch.empty(BH, G, n, dtype=torch.float32)
        err = self._lib.lut_scores(q.data_ptr(), codes.data_ptr(), scale.data_ptr(), table.data_ptr(),
                                   self._byte_table(table, bits, bytetab), out.data_ptr(), BH, G, D, n, bits,
                                   s0, s1, ss0, dptr, d0, d1)
        if err:
            raise ValueError(f"codes per token must be <= 4096; received {D}")
        return out

    def accumulate(self, w: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, mult: float,
                   table: torch.Tensor, bits: int, n_codes: int, bytetab: torch.Tensor | None = None,
                   dense: torch.Tensor | None = None) -> torch.Tensor:
        """``(BH, G, n_codes)``: ``Σ_t w[bh, g, t] · mult · scale[bh, t] · table[codes of token t]``
        (``dense``: as in :meth:`scores`).

        Examples
        --------
        >>> import kvstats; from kvstats.models.code_attention import SideCoder
        >>> coder, k = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().key]), kernel()
        >>> codes, norms = coder.encode(torch.randn(2, 5, 64), fused=False).values()   # (BH, n, ·)
        >>> c = coder.centroids_of(codes) * norms.float()[..., None]          # looked up: (BH, n, D)
        >>> w = torch.softmax(torch.randn(2, 3, 5), -1)
        >>> k is None or torch.allclose(k.accumulate(w, codes, norms, 2.0, coder.centroids, 4, 64), 2 * w @ c,
        ...                             atol=1e-5)
        True
        """
        self._on_cpu(w=w, codes=codes, scale=scale, table=table, bytetab=bytetab, dense=dense)
        BH, G, n = w.shape
        w, table = w.contiguous().to(torch.float32), self._table(table, bits)
        codes, s0, s1 = self._codes(codes, BH, n, n_codes, bits)
        scale, ss0 = self._half(scale, BH, n)
        dptr, d0, d1 = self._dense(dense, BH, n, n_codes)
        acc = torch.empty(BH, G, n_codes, dtype=torch.float32)
        err = self._lib.lut_accumulate(w.data_ptr(), codes.data_ptr(), scale.data_ptr(), float(mult),
                                       table.data_ptr(), self._byte_table(table, bits, bytetab), acc.data_ptr(),
                                       BH, G, n_codes, n, bits, s0, s1, ss0, dptr, d0, d1)
        if err:
            raise ValueError(f"codes per token must be <= 4096; received {n_codes}")
        return acc

    def sign_scores(self, sq: torch.Tensor, signs: torch.Tensor, n: int, norms: torch.Tensor,
                    scale: float) -> torch.Tensor:
        """``(BH, G, n)``: ``scale · norms[bh, t] · Σ_i sq[bh, g, i] · σ_i`` with ``σ_i = ±1``
        the sign bits of token ``t`` (bit ``i`` in byte ``i // 8`` at bit ``i % 8``, 1 ↦ +1)
        for the first ``n`` tokens of ``signs`` ``(BH, capacity, ceil(m/8))`` and float16
        ``norms`` ``(BH, capacity)``, from sketched queries ``sq`` ``(BH, G, m)``: QJL's key
        estimator by byte tables (one look-up per byte of a token).

        Examples
        --------
        >>> import numpy as np
        >>> sq, k = torch.randn(2, 3, 20), kernel()                     # None without a C compiler
        >>> bits = np.random.default_rng(0).integers(0, 2, (2, 5, 20)).astype(np.uint8)
        >>> signs = torch.from_numpy(np.packbits(bits, axis=-1, bitorder="little"))    # (2, 5, 3)
        >>> norms = torch.rand(2, 5).half()
        >>> ref = sq @ (2.0 * torch.from_numpy(bits).float() - 1).mT * 0.5 * norms.float()[:, None]
        >>> k is None or torch.allclose(k.sign_scores(sq, signs, 5, norms, 0.5), ref, atol=1e-5)
        True
        """
        self._on_cpu(sq=sq, signs=signs, norms=norms)
        if sq.ndim != 3 or not sq.is_floating_point() or sq.shape[-1] < 1:
            raise ValueError(f"sq must be a real floating-point (BH, G, m) tensor with m >= 1; received "
                             f"{sq.dtype} {tuple(sq.shape)}")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not abs(scale) < float("inf"):
            raise ValueError(f"scale must be a finite real number; received {scale!r}")
        BH, G, m = sq.shape
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an integer >= 0 (tokens to score); received {n!r}")
        sq = sq.contiguous().to(torch.float32)
        signs, s0, s1 = self._codes(signs, BH, n, m, 1, "signs")
        norms, ns0 = self._half(norms, BH, n, "norms")
        tab = torch.empty(G * -(-m // 8) * 256, dtype=torch.float32)  # the loop's byte tables
        out = torch.empty(BH, G, n, dtype=torch.float32)
        self._lib.sign_scores(sq.data_ptr(), signs.data_ptr(), norms.data_ptr(), float(scale), tab.data_ptr(),
                              out.data_ptr(), BH, G, m, n, s0, s1, ns0)
        return out

    @staticmethod
    def _uniform(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, BH: int, n: int, n_codes: int,
                 bits: int, group: int, per_token: bool) -> tuple[int, ...]:
        """Check :meth:`group_scores`' / :meth:`token_accumulate`'s codes and float16
        ``scale``/``zero`` (``(BH, >= groups of n tokens, n_codes)``, or per token ``(BH, >= n,
        groups of n_codes channels)``) → the strides of codes, scale and zero."""
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
            raise ValueError(f"bits must be an integer in [1, 8]; received {bits!r}")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise ValueError(f"group must be an integer >= 1; received {group!r}")
        rows, width = (n, -(-n_codes // group)) if per_token else (-(-n // group), n_codes)
        nbytes = -(-n_codes * bits // 8)  # pack_codes' rows (not whole words of eight codes)
        if (codes.dtype != torch.uint8 or codes.ndim != 3 or codes.stride(-1) != 1 or codes.shape[0] != BH
                or codes.shape[1] < n or codes.shape[-1] != nbytes):
            raise ValueError(f"codes must be uint8 ({BH}, >= {n}, {nbytes}) with a contiguous last axis; "
                             f"received {codes.dtype} {tuple(codes.shape)}")
        for name, t in (("scale", scale), ("zero", zero)):
            if (t.dtype != torch.float16 or t.ndim != 3 or t.stride(-1) != 1 or t.shape[0] != BH
                    or t.shape[1] < rows or t.shape[2] != width):
                raise ValueError(f"{name} must be float16 ({BH}, >= {rows}, {width}) with a contiguous last axis; "
                                 f"received {t.dtype} {tuple(t.shape)}")
        return *codes.stride()[:2], *scale.stride()[:2], *zero.stride()[:2]

    def group_scores(self, q: torch.Tensor, codes: torch.Tensor, n: int, scale: torch.Tensor,
                     zero: torch.Tensor, bits: int, group: int) -> torch.Tensor:
        """``(BH, G, n)``: ``q[bh, g] · (codes[bh, t] ⊙ s + z)`` for the first ``n`` tokens of
        packed integer ``codes`` ``(BH, capacity, nbytes)`` (:func:`kvstats.quant.packing.pack_codes`
        along the ``D`` channels), with float16 ``scale`` and ``zero`` ``(BH, groups, D)`` of
        token ``t``'s group ``t // group`` (KIVI's keys; the last group may be partial).

        Examples
        --------
        >>> import numpy as np; from kvstats.quant.packing import pack_codes
        >>> x = np.random.default_rng(0).integers(0, 16, (2, 40, 64), dtype=np.uint8)   # 4-bit codes
        >>> s, z = torch.rand(2, 2, 64).half(), torch.randn(2, 2, 64).half()           # 2 groups of 32 tokens
        >>> S, Z = (t.float().repeat_interleave(32, 1)[:, :40] for t in (s, z))      # per token
        >>> k_hat = torch.from_numpy(x).float() * S + Z                                # (2, 40, 64)
        >>> q, k = torch.randn(2, 3, 64), kernel()                   # k: None without a C compiler
        >>> codes = torch.from_numpy(pack_codes(x, 4))
        >>> k is None or torch.allclose(k.group_scores(q, codes, 40, s, z, 4, 32), q @ k_hat.mT, atol=1e-4)
        True
        """
        self._on_cpu(q=q, codes=codes, scale=scale, zero=zero)
        if q.ndim != 3 or not q.is_floating_point():
            raise ValueError(f"q must be a real floating-point (BH, G, D) tensor; received {q.dtype} {tuple(q.shape)}")
        BH, G, D = q.shape
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an integer >= 0 (tokens to score); received {n!r}")
        strides = self._uniform(codes, scale, zero, BH, n, D, bits, group, per_token=False)
        q = q.contiguous().to(torch.float32)
        qs, out = torch.empty(G, D, dtype=torch.float32), torch.empty(BH, G, n, dtype=torch.float32)
        if self._lib.group_scores(q.data_ptr(), codes.data_ptr(), scale.data_ptr(), zero.data_ptr(), qs.data_ptr(),
                                  out.data_ptr(), BH, G, D, n, bits, group, *strides):
            raise ValueError(f"q's channels and queries must be <= 4096; received {tuple(q.shape)}")
        return out

    def token_accumulate(self, w: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                         bits: int, group: int, dim: int) -> torch.Tensor:
        """``(BH, G, dim)``: ``Σ_t w[bh, g, t] · (codes[bh, t] ⊙ s_t + z_t)`` over the ``n =
        w.shape[-1]`` first tokens of packed integer ``codes`` ``(BH, capacity, nbytes)``,
        with float16 ``scale``/``zero`` ``(BH, capacity, ceil(dim / group))`` per token and
        group of ``group`` channels (KIVI's values; the last group may be partial).

        Examples
        --------
        >>> import numpy as np; from kvstats.quant.packing import pack_codes
        >>> x = np.random.default_rng(0).integers(0, 4, (2, 5, 40), dtype=np.uint8)    # 2-bit codes
        >>> s, z = torch.rand(2, 5, 2).half(), torch.randn(2, 5, 2).half()             # channels 0-31, 32-39
        >>> S, Z = (t.float().repeat_interleave(32, -1)[..., :40] for t in (s, z))   # per channel
        >>> v_hat = torch.from_numpy(x).float() * S + Z                                # (2, 5, 40)
        >>> w, k = torch.softmax(torch.randn(2, 3, 5), -1), kernel()    # k: None without a C compiler
        >>> codes = torch.from_numpy(pack_codes(x, 2))
        >>> k is None or torch.allclose(k.token_accumulate(w, codes, s, z, 2, 32, 40), w @ v_hat, atol=1e-5)
        True
        """
        self._on_cpu(w=w, codes=codes, scale=scale, zero=zero)
        if w.ndim != 3 or not w.is_floating_point():
            raise ValueError(f"w must be a real floating-point (BH, G, n) tensor; received {w.dtype} {tuple(w.shape)}")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 4096:
            raise ValueError(f"dim must be an integer in [1, 4096]; received {dim!r}")
        BH, G, n = w.shape
        strides = self._uniform(codes, scale, zero, BH, n, dim, bits, group, per_token=True)
        w = w.contiguous().to(torch.float32)
        acc = torch.empty(BH, G, dim, dtype=torch.float32)
        self._lib.token_accumulate(w.data_ptr(), codes.data_ptr(), scale.data_ptr(), zero.data_ptr(), acc.data_ptr(),
                                   BH, G, dim, n, bits, group, *strides)
        return acc

    def encode(self, coder, x: torch.Tensor, into: dict | None = None) -> dict[str, torch.Tensor] | None:
        """:meth:`SideCoder.encode` of float32 ``x`` ``(B, H, n, d)`` in one C call (float16
        norms only). Same codes as the torch coder except where float32 summation order
        moves a coordinate across a boundary. ``into``: ``{"codes", "norms"[, "signs",
        "rnorms"]}`` → :class:`~kvstats.models.growing_buffer.GrowingBuffer` written in
        place (nothing returned) instead of new tensors.

        Examples
        --------
        >>> import kvstats; from kvstats.models.code_attention import SideCoder
        >>> coder = SideCoder([kvstats.make_scheme("KQV", 4, 64, seed=0).export().value])   # prod
        >>> x, k = torch.randn(1, 2, 5, 64), kernel()
        >>> ref = coder.encode(x, fused=False)                   # the torch coder
        >>> fused = ref if k is None else k.encode(coder, x)     # one C call
        >>> sorted(fused), bool((fused["codes"] == ref["codes"]).float().mean() > 0.99)
        (['codes', 'norms', 'rnorms', 'signs'], True)
        """
        if x.ndim != 4 or x.shape[-1] != coder.dim:
            raise ValueError(f"x must be (B, H, n, {coder.dim}) (the coder's head dimension); received "
                             f"shape {tuple(x.shape)}")
        self._on_cpu(x=x)
        B, H, n, d = x.shape
        x = x.contiguous().to(torch.float32)  # the loop reads float32 (a no-op for the caches)
        st = self._static(coder, d)
        names, shapes, dtypes = st["names"], st["shapes"], st["dtypes"]
        if into is None:
            out = {k: torch.empty(B, H, n, *shapes[k], dtype=dtypes[k]) for k in names}
            ptrs, os0 = [out[k].data_ptr() for k in names], n
        else:
            out = None
            bufs = [into[k] for k in names]
            for k, b in zip(names, bufs):
                # grows when needed, and refuses buffers of another batch, heads or shape
                # (the loop writes B·H rows of each at the first buffer's row stride)
                b.reserve(B, H, n, shapes[k], dtypes[k])
            if len({(b.n, b.capacity) for b in bufs}) != 1:
                raise ValueError(f"into must hold buffers of equal length and capacity; received "
                                 f"{ {k: (b.n, b.capacity) for k, b in zip(names, bufs)} }")
            ptrs = [b.buf.data_ptr() + b.n * b.buf.stride(2) * b.buf.element_size() for b in bufs]
            os0 = bufs[0].buf.shape[2]
        if len(names) == 2:
            ptrs += [None, None]
        err = self._lib.encode(x.data_ptr(), *st["maps"], B * H, H, st["Hs"], n, d, coder.dim_padded, coder.bits,
                               coder.m, *ptrs, os0)
        if err == 1:  # NaN/inf input, or a norm beyond float16 (the loop's norm dtype)
            from kvstats.models.code_attention import _norm_error

            raise ValueError(_norm_error(x, "x", torch.float16))
        if err:
            raise ValueError(f"dimensions must be <= 4096; received d={d}, d_pad={coder.dim_padded}, m={coder.m}")
        if into is not None:
            for b in bufs:
                b.n += n
        return out

    @staticmethod
    def _static(coder, d: int) -> dict:
        """What :meth:`encode` passes for a coder on every call (kept on the coder: the
        contiguous signs and sketch, their pointers, the parts' names, shapes, dtypes).

        Rebuilt when the coder's tensors are not those the pointers were taken from: a
        deep copy or an unpickled cache carries this dict, whose pointers would otherwise
        address the original's (possibly freed) memory."""
        source = tuple(None if t is None else t.data_ptr()
                       for t in (coder.signs, coder.hd, coder.boundaries, coder.centroids, coder.sketch))
        st = getattr(coder, "_lut_static", None)
        if st is None or st.get("source") != source:
            coder.check_fixed()  # the pointers below are read as float32 CPU arrays of the coder's shapes
            prod = coder.coder == "prod"
            signs = None if coder.signs is None else coder.signs.reshape(-1, d).contiguous()
            sketch = coder.sketch.contiguous() if prod else None
            Hs = 1 if signs is None and sketch is None else (signs if signs is not None else sketch).shape[0]

            def ptr(t):
                return None if t is None else t.data_ptr()

            st = {"keep": (signs, sketch), "Hs": Hs, "source": source,
                  "maps": (ptr(signs), ptr(coder.hd), coder.boundaries.data_ptr(), coder.centroids.data_ptr(),
                           ptr(sketch)),
                  "names": ["codes", "norms", "signs", "rnorms"] if prod else ["codes", "norms"],
                  "shapes": {"codes": (coder.code_bytes,), "norms": (), "signs": (coder.sign_bytes,), "rnorms": ()},
                  "dtypes": {"codes": torch.uint8, "signs": torch.uint8, "norms": torch.float16,
                             "rnorms": torch.float16}}
            coder._lut_static = st
        return st


_KERNEL: list = []  # [LUTKernel or None] once tried


def _cpu_id() -> str:
    """This CPU's model and feature flags (Linux): a library built with -march=native is
    cached per CPU, never loaded on another one."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    keep = [ln for ln in lines if ln.startswith(("model name", "flags"))][:2]
    return "\n".join(keep)


def _native() -> tuple[str, ...]:
    """-march=native (AVX2 where the CPU has it) when the CPU is identified, else nothing."""
    return ("-march=native",) if _cpu_id() else ()


def _cache_dir() -> Path:
    from kvstats.models.loader import default_cache_dir

    return Path(default_cache_dir()) / "kernels"


def _kernel_for(x: torch.Tensor, fused: bool | None) -> LUTKernel | None:
    """:func:`kernel` for CPU ``x`` unless ``fused`` is False (None there: the caller's torch
    path); ``fused=True`` without it is a ValueError."""
    if fused not in (None, True, False):
        raise ValueError(f"fused must be None, True or False; received {fused!r}")
    kern = kernel() if fused is not False and x.device.type == "cpu" else None
    if fused and kern is None:
        raise ValueError("fused must be None or False here: the compiled loops read CPU tensors and were not built")
    return kern


def kernel() -> LUTKernel | None:
    """The compiled loops, or None (no C compiler, a failed build, ``KVSTATS_LUT_KERNEL=0``).

    Examples
    --------
    >>> k = kernel()
    >>> k is None or isinstance(k, LUTKernel)
    True
    """
    if _KERNEL:
        return _KERNEL[0]
    lib = None
    if os.environ.get("KVSTATS_LUT_KERNEL", "1") != "0":
        flags = (*_FLAGS, *_native())
        digest = hashlib.sha256((_SOURCE + " ".join(flags) + _cpu_id()).encode()).hexdigest()[:16]
        target = _cache_dir() / f"kvstats_lut_{digest}.so"
        try:
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                built = target.with_name(f"{target.name}.{os.getpid()}.tmp")
                try:
                    with tempfile.TemporaryDirectory() as tmp:
                        src = Path(tmp) / "lut.c"
                        src.write_text(_SOURCE)
                        subprocess.run([os.environ.get("CC", "cc"), *flags, "-o", str(built), str(src)],
                                       check=True, capture_output=True, timeout=120)
                    os.replace(built, target)  # atomic: concurrent builders never load a partial file
                finally:
                    # a failed or timed-out compile can leave its partial output behind
                    built.unlink(missing_ok=True)
            lib = LUTKernel(ctypes.CDLL(str(target)))
        except (OSError, subprocess.SubprocessError):
            lib = None
    _KERNEL.append(lib)
    return lib
