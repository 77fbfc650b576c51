"""The tensors a quantized cache layer grows token by token, in place.

:class:`~kvstats.models.QuantizedCache`'s code buffers (:mod:`kvstats.models.code_attention`,
:mod:`kvstats.models.group_codes`), their decoded copies and the compiled encoder's
outputs (:mod:`kvstats.models.lut_kernel`) are each one :class:`GrowingBuffer`: a tensor
``(batch, heads, tokens, *shape)`` with a little unused capacity along its tokens, so a
decode step writes in place instead of concatenating the whole layer.
"""

from __future__ import annotations

import torch

__all__ = ["GrowingBuffer"]


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
