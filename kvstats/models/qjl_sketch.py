"""The sketch matrices :class:`~kvstats.models.group_codes.QJLKeySide` reads: ``S`` as
float32 rows, held once with the numpy coder where it holds them so, and ``Sᵀ`` as a view.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

__all__: list[str] = []


def _sketch_rows(sketch) -> np.ndarray:
    """``S`` float32, C-contiguous ``(*draws, m, d)``, of a :class:`~kvstats.quant.sketch.Sketch`:
    the coder's own matrix when it holds one so (the cache's numpy coder, after
    :meth:`~kvstats.quant.qjl_keys.QJLKeyQuantizer.hold_sketches_as`), else a float32 copy.

    Read in place, the sketch is held once, and the numpy coder's codes and decodes are
    unchanged. (The attention's ``Sᵀ`` is then a transposed view: a one-query product
    over it rounds in another order than over a contiguous ``Sᵀ`` of its own; neither is
    the reference, the numpy estimator is, to rounding.) An srht sketch's matrix is built
    here and not kept by the coder: reading ``sketch.matrix`` would cache a float64 copy
    in the numpy coder, which codes by the fast transform and never reads it.
    """
    from kvstats.quant.sketch import _srht_matrix

    if sketch.dense is None:
        return _srht_matrix(sketch.signs, sketch.rows, sketch.m, sketch.dim).astype(np.float32)
    if sketch.dense.dtype == np.float32 and sketch.dense.flags.c_contiguous:
        return sketch.dense
    return np.ascontiguousarray(sketch.dense, dtype=np.float32)


def _transposed(rows: np.ndarray) -> torch.Tensor:
    """``Sᵀ`` ``(H or 1, d, m)``: a view of ``rows`` (``S``, :func:`_sketch_rows`)."""
    with warnings.catch_warnings():
        # the coder's sketch is read-only; the reader never writes to it either
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        s = torch.from_numpy(rows)
    return s.reshape((-1,) + s.shape[-2:]).transpose(-1, -2)
