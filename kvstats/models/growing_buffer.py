"""The tensors a quantized cache layer grows token by token, in place.

:class:`~kvstats.models.QuantizedCache`'s code buffers (:mod:`kvstats.models.code_attention`,
:mod:`kvstats.models.group_codes`), their decoded copies and the compiled encoder's
outputs (:mod:`kvstats.models.lut_kernel`) are each one :class:`GrowingBuffer`: a tensor
``(batch, heads, tokens, *shape)`` with a little unused capacity along its tokens, so a
decode step writes in place instead of concatenating the whole layer. The numpy codes of
the schemes without a code-reading path are held so too (:class:`CodeChunks`), so that a
decode step adds no Python object.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from kvstats._checks import check_int

__all__ = ["GrowingBuffer", "CodeChunks"]


class GrowingBuffer:
    """A tensor grown along axis 2 (tokens) in place, with little slack.

    The first append allocates exactly; later growth adds ``max(step, n // 32)`` tokens
    (``step`` 16 by default; 1 for buffers that grow once per group of tokens), so the
    unused capacity stays under ~3 % of a long sequence (and the copies amortise).

    Examples
    --------
    >>> b = GrowingBuffer()
    >>> b.append(torch.zeros(1, 2, 5, 3)); b.append(torch.ones(1, 2, 1, 3))
    >>> b.view().shape, b.capacity, b.nbytes(held=False), b.nbytes()
    (torch.Size([1, 2, 6, 3]), 21, 144, 504)
    """

    def __init__(self, step: int = 16):
        self.buf: torch.Tensor | None = None
        self.n = 0
        self.step = step

    @property
    def capacity(self) -> int:
        """Tokens the allocation holds (appended or not; 0 before the first append).

        Examples
        --------
        >>> b = GrowingBuffer(step=4)
        >>> b.capacity, b.append(torch.zeros(1, 1, 3, 2)), b.capacity
        (0, None, 3)
        >>> b.append(torch.zeros(1, 1, 1, 2)); b.capacity, b.view().shape[2]
        (7, 4)
        """
        return 0 if self.buf is None else self.buf.shape[2]

    def reserve(self, batch: int, heads: int, extra: int, tail: tuple[int, ...], dtype: torch.dtype,
                device: torch.device | str | None = None) -> None:
        """Make room for ``extra`` more tokens (each of shape ``tail``) without writing them,
        on ``device`` (default: the buffer's; torch's default device for a new one).

        Tokens of another batch, head count, shape, dtype or device than those held are a
        ValueError (growing would broadcast the held ones into them, or move them).

        Examples
        --------
        >>> b = GrowingBuffer()
        >>> b.reserve(1, 2, 10, (8,), torch.uint8)
        >>> b.capacity, b.view().shape                     # room for 10, none written
        (10, torch.Size([1, 2, 0, 8]))
        >>> b.reserve(1, 2, 1, (8,), torch.float32)
        Traceback (most recent call last):
        ...
        ValueError: tokens must have the buffer's (batch, heads, ·, *shape) = (1, 2, '·', 8), dtype torch.uint8 ...
        """
        held = self.buf
        device = torch.device(device) if device is not None else held.device if held is not None else None
        if held is not None and (tuple(held.shape[:2]) != (batch, heads) or tuple(held.shape[3:]) != tuple(tail)
                                 or held.dtype != dtype or held.device != device):
            raise ValueError(f"tokens must have the buffer's (batch, heads, ·, *shape) = "
                             f"{(*held.shape[:2], '·', *held.shape[3:])}, dtype {held.dtype} and device "
                             f"{held.device}; received {(batch, heads, extra, *tail)} {dtype} on {device}")
        need = self.n + extra
        if self.buf is None or need > self.buf.shape[2]:
            cap = need if self.buf is None else max(need, self.n + max(self.step, self.n // 32))
            new = torch.empty((batch, heads, cap, *tail), dtype=dtype, device=device)
            if self.buf is not None:
                new[:, :, :self.n] = self.buf[:, :, :self.n]
            self.buf = new

    def append(self, x: torch.Tensor) -> None:
        """Write ``x`` ``(batch, heads, n, *shape)`` after the held tokens (growing as
        :meth:`reserve` does, on ``x``'s device).

        Examples
        --------
        >>> b = GrowingBuffer()
        >>> b.append(torch.zeros(1, 1, 2, 1)); b.append(torch.ones(1, 1, 1, 1))
        >>> b.view().flatten().tolist()
        [0.0, 0.0, 1.0]
        """
        # on x's device: a decoded copy of a model on an accelerator stays there
        self.reserve(x.shape[0], x.shape[1], x.shape[2], tuple(x.shape[3:]), x.dtype, x.device)
        need = self.n + x.shape[2]
        self.buf[:, :, self.n:need] = x
        self.n = need

    def view(self) -> torch.Tensor:
        """The held tokens ``(batch, heads, n, *shape)``: a view of the buffer (no copy;
        later appends may reallocate it, so it is not kept across them).

        Examples
        --------
        >>> b = GrowingBuffer()
        >>> b.append(torch.arange(3.0).view(1, 1, 3, 1))
        >>> v = b.view(); v.shape, v.data_ptr() == b.buf.data_ptr()
        (torch.Size([1, 1, 3, 1]), True)
        """
        return self.buf[:, :, :self.n]

    def drop(self, n: int) -> None:
        """Forget the oldest ``n`` tokens (moved down in place; the capacity stays).

        Examples
        --------
        >>> b = GrowingBuffer()
        >>> b.append(torch.arange(5.0).view(1, 1, 5, 1)); b.drop(3)
        >>> b.view().flatten().tolist(), b.capacity
        ([3.0, 4.0], 5)
        """
        if not 0 <= n <= self.n:
            raise ValueError(f"n must be between 0 and the {self.n} tokens held; received {n}")
        keep = self.n - n
        if n and keep:
            self.buf[:, :, :keep] = self.buf[:, :, n:self.n].clone()  # clone: the ranges overlap
        self.n = keep

    def nbytes(self, held: bool = True) -> int:
        """Bytes allocated (``held``) or of the appended tokens only.

        Examples
        --------
        >>> b = GrowingBuffer()
        >>> b.reserve(1, 1, 10, (4,), torch.float16); b.append(torch.zeros(1, 1, 2, 4, dtype=torch.float16))
        >>> b.nbytes(), b.nbytes(held=False)             # 10 and 2 tokens of 4 float16
        (80, 16)
        """
        if self.buf is None:
            return 0
        t = self.buf if held else self.view()
        return t.numel() * t.element_size()


class _Varies(Exception):
    """A chunk's codes do not fit the buffers' layout (held as an object instead)."""


def _layout(obj, shape: tuple[int, ...], arrays: list) -> tuple:
    """The layout of a codes tree (compared with ``==`` across chunks), its arrays appended
    to ``arrays`` in order: each array runs along the tokens (``(B, H, n, ...)`` of a block
    of ``shape = (B, H, n, d)``) or is one per chunk; a tuple equal to ``shape``
    (SchemeCodes' own) is rebuilt for each chunk; any other value is the same in every
    chunk of a layout."""
    if isinstance(obj, np.ndarray):
        tokens = obj.ndim >= 3 and obj.shape[:3] == shape[:3]
        arrays.append(obj)
        return ("array", tokens, obj.dtype, obj.shape[3:] if tokens else obj.shape)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = dataclasses.fields(obj)
        if not all(f.init for f in fields):  # its constructor could not rebuild it
            raise _Varies
        return ("tree", type(obj), tuple((f.name, _layout(getattr(obj, f.name), shape, arrays)) for f in fields))
    if isinstance(obj, tuple) and obj == shape:
        return ("shape",)
    return ("value", obj)


def _array_nodes(layout: tuple):
    """The ``("array", ...)`` nodes of a layout, in the order of its arrays."""
    if layout[0] == "array":
        yield layout
    elif layout[0] == "tree":
        for _, sub in layout[2]:
            yield from _array_nodes(sub)


def _rebuild(layout: tuple, arrays, shape: tuple[int, ...]):
    kind = layout[0]
    if kind == "array":
        return next(arrays)
    if kind == "tree":
        return layout[1](**{name: _rebuild(sub, arrays, shape) for name, sub in layout[2]})
    return shape if kind == "shape" else layout[1]


class CodeChunks:
    """The numpy codes of a cache layer's coded chunks, held in :class:`GrowingBuffer` s.

    A numpy-coded scheme (identity, a Haar rotation, the deployed formats) codes each
    block the cache hands it (a prefill, then one token per decode step) into a
    ``SchemeCodes``: a tree of small dataclasses whose arrays run along the block's tokens
    ``(B, H, n, ...)`` or are one per call (fp8's and nvfp4's per-head scale). Kept as
    objects, each decode step added a dozen Python objects per layer (0.8–3.4 KB measured
    over 4 heads of 128, more than the codes of q4_0 or KQV-4), uncounted. Here each array of the tree is one buffer instead, grown along
    the tokens or, one entry per chunk, along a chunk axis, beside the tokens of each
    chunk (int32): a decode step writes bytes and adds no object. Iterating rebuilds each
    chunk's ``SchemeCodes`` (transient, read-only arrays) from exactly the arrays the
    scheme returned, so a decode chunk by chunk gives the same numbers as before. Chunks
    whose layout varies (klt: side information per block half, bounds per call) or whose
    arrays torch cannot hold are kept as objects from then on (``objects``), their Python
    objects counted by :meth:`nbytes`.

    Examples
    --------
    >>> import numpy as np, kvstats
    >>> from kvstats.models.growing_buffer import CodeChunks
    >>> scheme = kvstats.make_scheme("q4_0", None, 32)
    >>> x = np.random.default_rng(0).standard_normal((1, 2, 5, 32)).astype(np.float32)
    >>> chunks = CodeChunks()
    >>> for a, b in ((0, 4), (4, 5)):                    # a prefill, then one token
    ...     chunks.append(scheme.quantize(x[:, :, a:b], x[:, :, a:b]), (1, 2, b - a, 32))
    >>> len(chunks), chunks.sizes().tolist(), chunks.objects is None
    (2, [4, 1], True)
    >>> last = list(chunks)[-1]                        # rebuilt from the buffers
    >>> bool(np.array_equal(scheme.dequantize(last)[0], scheme.roundtrip(x[:, :, 4:], x[:, :, 4:])[0]))
    True
    >>> chunks.nbytes(held=False) == 2 * 5 * 2 * 18    # K and V, 2 heads: 18 bytes per 32 values
    True
    """

    def __init__(self):
        self.layout: tuple | None = None        # of every chunk's SchemeCodes
        self.buffers: list[GrowingBuffer] = []  # one per array of the layout, in its order
        self.tokens: list[bool] = []            # whether each array runs along the tokens
        self.batch: tuple[int, ...] = ()        # the blocks' (B, H) and last axis: SchemeCodes.shape
        self.dim: tuple[int, ...] = ()          # is (*batch, n, *dim)
        self.sizes_buf = GrowingBuffer()        # tokens of each chunk, int32 (1, 1, chunks)
        self.objects: list | None = None        # the chunks as objects, once a layout varied

    def __len__(self) -> int:
        return self.sizes_buf.n

    def sizes(self) -> np.ndarray:
        """Tokens of each chunk, oldest first (int64).

        Examples
        --------
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> CodeChunks().sizes().tolist()
        []
        """
        if not self.sizes_buf.n:
            return np.zeros(0, np.int64)
        return self.sizes_buf.view()[0, 0].numpy().astype(np.int64)

    def append(self, codes, shape: tuple[int, ...]) -> None:
        """Hold the ``SchemeCodes`` of a block of ``shape = (B, H, n, d)`` as the newest chunk.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> scheme = kvstats.make_scheme("identity", None, 4)
        >>> chunks = CodeChunks(); x = np.ones((1, 1, 3, 4), np.float32)
        >>> chunks.append(scheme.quantize(x, x), x.shape); chunks.sizes().tolist()
        [3]
        """
        shape = tuple(int(s) for s in shape)
        if len(shape) != 4 or min(shape) < 0 or shape[2] >= 2 ** 31:
            raise ValueError(f"shape must be the block's (B, H, n, d), n < 2**31; received {shape}")
        if self.objects is None:
            parts = self._parts(codes, shape)
            if parts is None:  # from now on, objects (their Python overhead counted)
                self.objects = list(self._chunks(copy=True)) if self.layout is not None else []
                self.layout, self.buffers, self.tokens = None, [], []
            else:
                for buf, part in zip(self.buffers, parts):
                    buf.append(part)
        if self.objects is not None:
            self.objects.append(codes)
        self.sizes_buf.append(torch.full((1, 1, 1), shape[2], dtype=torch.int32))

    def _parts(self, codes, shape: tuple[int, ...]) -> list[torch.Tensor] | None:
        """The tensors to append of a chunk of the held layout (the first chunk sets it),
        or None when it does not fit (buffers unchanged)."""
        arrays: list = []
        try:
            layout = _layout(codes, shape, arrays)
            if self.layout is not None and not (layout == self.layout and shape[:2] == self.batch
                                                and shape[3:] == self.dim):
                return None
            nodes = list(_array_nodes(layout))
            # per-chunk arrays get a chunk axis; torch copies first (an array torch cannot hold)
            parts = [torch.from_numpy(np.ascontiguousarray(a if node[1] else a.reshape(1, 1, 1, *a.shape)))
                     for a, node in zip(arrays, nodes)]
        except (_Varies, TypeError, ValueError):  # also a comparison that is not a bool
            return None
        if self.layout is None:
            self.layout, self.batch, self.dim = layout, shape[:2], shape[3:]
            self.tokens = [node[1] for node in nodes]
            # one entry per chunk: grown a chunk at a time (klt's per-half bases are large)
            self.buffers = [GrowingBuffer() if t else GrowingBuffer(step=1) for t in self.tokens]
        return parts

    def __iter__(self):
        """Each chunk's ``SchemeCodes``, oldest first (rebuilt from the buffers: read-only
        views, valid until the next change)."""
        return self._chunks(copy=False)

    def _chunks(self, copy: bool):
        if self.objects is not None:
            yield from list(self.objects)
            return
        views = [b.view() for b in self.buffers]
        sizes = self.sizes()
        ends = np.cumsum(sizes)
        for i, (start, end) in enumerate(zip((ends - sizes).tolist(), ends.tolist())):
            arrays = []
            for v, tokens in zip(views, self.tokens):
                a = (v[:, :, start:end] if tokens else v[0, 0, i]).numpy()
                if copy:  # arrays of their own (the buffers are let go)
                    a = a.copy()
                else:     # a view of the buffer, if contiguous: a decoder must not write it
                    a = a if a.flags.c_contiguous else a.copy()   # (ascontiguousarray makes 0-d 1-d)
                    a.flags.writeable = False
                arrays.append(a)
            yield _rebuild(self.layout, iter(arrays), (*self.batch, end - start, *self.dim))

    def runs(self):
        """The held codes in as few ``SchemeCodes`` as decode alike: each run of consecutive
        chunks whose one-per-chunk arrays (fp8's and nvfp4's per-call scale) hold the same
        bytes as one ``SchemeCodes`` over all their tokens (every chunk, for a scheme with
        none: one decode call instead of one per decode step); chunks held as objects (klt's)
        one by one. Read-only arrays, valid until the next change.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> scheme = kvstats.make_scheme("q4_0", None, 32)
        >>> x = np.random.default_rng(0).standard_normal((1, 2, 6, 32)).astype(np.float32)
        >>> chunks = CodeChunks()
        >>> for a in range(6):                             # six one-token chunks
        ...     chunks.append(scheme.quantize(x[:, :, a:a + 1], x[:, :, a:a + 1]), (1, 2, 1, 32))
        >>> [c.shape for c in chunks.runs()]                # one SchemeCodes of all six tokens
        [(1, 2, 6, 32)]
        >>> whole = scheme.dequantize(next(chunks.runs()))[0]
        >>> bool(np.array_equal(whole, np.concatenate([scheme.dequantize(c)[0] for c in chunks], axis=2)))
        True
        """
        if self.objects is not None or not len(self):
            yield from self._chunks(copy=False)
            return
        views = [b.view() for b in self.buffers]
        sizes = self.sizes()
        ends = np.cumsum(sizes)
        starts = ends - sizes
        # a run ends where any per-chunk array's bytes change (bytes: -0.0 and 0.0 differ)
        new = np.zeros(len(sizes), bool)
        new[0] = True
        for v, tokens in zip(views, self.tokens):
            if not tokens:
                per = np.ascontiguousarray(v[0, 0].numpy()).view(np.uint8).reshape(len(sizes), -1)
                new[1:] |= (per[1:] != per[:-1]).any(axis=1)
        firsts = np.flatnonzero(new)
        for i, j in zip(firsts.tolist(), [*firsts[1:].tolist(), len(sizes)]):
            start, end = int(starts[i]), int(ends[j - 1])
            arrays = []
            for v, tokens in zip(views, self.tokens):
                a = (v[:, :, start:end] if tokens else v[0, 0, i]).numpy()
                a = a if a.flags.c_contiguous else a.copy()   # a decoder must not write the buffer
                a.flags.writeable = False
                arrays.append(a)
            yield _rebuild(self.layout, iter(arrays), (*self.batch, end - start, *self.dim))

    def _cut(self, first: int, stop: int) -> None:
        """Keep chunks ``first`` to ``stop − 1``: the oldest ``first`` dropped (moved down),
        those from ``stop`` on forgotten."""
        sizes = self.sizes()
        a, b = int(sizes[:first].sum()), int(sizes[:stop].sum())
        for buf, tokens in zip(self.buffers, self.tokens):
            buf.n = b if tokens else stop
            buf.drop(a if tokens else first)
        if self.objects is not None:
            del self.objects[stop:], self.objects[:first]
        self.sizes_buf.n = stop
        self.sizes_buf.drop(first)

    def drop(self, n_chunks: int) -> None:
        """Forget the oldest ``n_chunks`` chunks.

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> scheme = kvstats.make_scheme("identity", None, 4)
        >>> chunks = CodeChunks(); x = np.ones((1, 1, 3, 4), np.float32)
        >>> for n in (3, 1, 1):
        ...     chunks.append(scheme.quantize(x[:, :, :n], x[:, :, :n]), (1, 1, n, 4))
        >>> chunks.drop(2); chunks.sizes().tolist(), chunks.buffers[0].n
        ([1], 1)
        """
        self._cut(check_int(n_chunks, "n_chunks", low=0, high=len(self)), len(self))

    def truncate(self, n_chunks: int) -> None:
        """Keep the oldest ``n_chunks`` chunks only (a failed coding step's rollback; it also
        undoes a partial append).

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> scheme = kvstats.make_scheme("identity", None, 4)
        >>> chunks = CodeChunks(); x = np.ones((1, 1, 3, 4), np.float32)
        >>> chunks.append(scheme.quantize(x, x), x.shape); chunks.append(scheme.quantize(x, x), x.shape)
        >>> chunks.truncate(1); len(chunks), chunks.buffers[0].n
        (1, 3)
        """
        self._cut(0, check_int(n_chunks, "n_chunks", low=0, high=len(self)))

    def nbytes(self, held: bool = True) -> int:
        """Bytes of the chunks' arrays (``held=False``: exactly what their ``SchemeCodes``
        store), or all the chunks hold (``held``): with the buffers' unused capacity and the
        chunk sizes, and for chunks held as objects their Python objects (``sys.getsizeof``
        of each dataclass, its ``__dict__``, array header, tuple and list).

        Examples
        --------
        >>> import numpy as np, kvstats
        >>> from kvstats.models.growing_buffer import CodeChunks
        >>> scheme = kvstats.make_scheme("identity", None, 4)
        >>> chunks = CodeChunks(); x = np.ones((1, 1, 3, 4), np.float32)
        >>> chunks.append(scheme.quantize(x, x), x.shape)
        >>> chunks.nbytes(held=False), chunks.nbytes()     # K and V, float32; + one int32 size
        (96, 100)
        """
        from kvstats.models.cache_memory import _array_bytes, _object_bytes

        if self.objects is not None:
            if not held:
                return sum(int(c.nbytes) for c in self.objects)
            seen: set = set()
            return (_array_bytes(self.objects, seen) + _object_bytes(self.objects, set())
                    + self.sizes_buf.nbytes())
        return (sum(b.nbytes(held) for b in self.buffers)
                + (self.sizes_buf.nbytes() if held else 0))
