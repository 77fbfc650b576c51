"""The work of a sweep: one task (chunks of one case) -> per-trial frames, in a worker.

Pure apart from reading a real capture: the result depends only on the task (its cells,
seeds and chunk range), never on which worker runs it or on what ran before, so tasks
can run in any order on any executor. Only the calling process writes files.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from kvstats.data.synthetic import sample
from kvstats.metrics.profile import _profile
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.schemes import Scheme, make_scheme
from kvstats.results import REAL
from kvstats.sweep.plan import _derive_seed, _Task
from kvstats.sweep.sources import _load_real, _trial_clusters


#: Coders whose ``roundtrip`` writes into a given ``out`` array.
_OUT_CODERS = (MSEQuantizer, ProdQuantizer)


def _roundtrip(scheme: Scheme, K: np.ndarray, V: np.ndarray,
               buffers: dict[tuple, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``scheme.roundtrip(K, V)``, written into arrays reused across the cells of a task
    when both coders take ``out``: a fresh chunk-sized array costs a first touch of
    every page (~14 ms per 32 MB here), paid per cell otherwise. Same numbers (the
    coders' arithmetic does not depend on where it writes); the frames keep no view of
    the arrays, so a later cell may overwrite them."""
    if not (isinstance(scheme.key_coder, _OUT_CODERS) and isinstance(scheme.value_coder, _OUT_CODERS)):
        return scheme.roundtrip(K, V)
    outs = []
    for side, x in (("K", K), ("V", V)):
        key = (side, x.shape, x.dtype.str)
        if key not in buffers:
            buffers[key] = np.empty_like(x)
        outs.append(buffers[key])
    coders = (scheme.key_coder, scheme.value_coder)
    return tuple(c.roundtrip(x, out=o) for c, x, o in zip(coders, (K, V), outs))


def _compute_task(task: _Task) -> list[tuple[str, int, pd.DataFrame, float]]:
    """Run one task; returns (cell id, first trial, per-trial frame, seconds) per cell
    and chunk. Runs in workers."""
    first = task.cells[0][0]
    case_key = first.case_key()
    d, n = first.dim, first.n_keys
    out = []
    buffers: dict[tuple, np.ndarray] = {}
    captured = _load_real(first, task.n_trials) if first.distribution == REAL else None
    for b in range(task.first, task.stop):
        start = b * task.chunk
        t = min(task.chunk, task.n_trials - start)
        if captured is not None:
            trials = captured.subset(slice(start, start + t)).astype(task.dtype)
        else:
            # The data seed depends on the case and chunk only: every scheme and budget of a
            # case sees the same trials (paired comparisons).
            trials = sample(first.distribution, t, n, d, seed=_derive_seed(task.seed, "data", case_key, b),
                            n_queries=task.n_queries, dtype=np.dtype(task.dtype),
                            generator=task.generator, **first.params)
        reference: dict = {}  # what error_profile computes from the trials alone, once per chunk
        for cell, cid in task.cells:
            tic = time.perf_counter()
            spec = cell.scheme
            bits = None if spec.fixed_budget else cell.budget
            try:
                scheme = make_scheme(spec.name, bits, d, seed=_derive_seed(task.seed, "scheme", cell.key(), b),
                                     draws=t, **spec.params)
                K_hat, V_hat = _roundtrip(scheme, trials.K, trials.V, buffers)
                bb = scheme.bits_per_coord(n)
                budget = float(bb.nominal) if cell.budget is None else float(cell.budget)
                # = error_profile(trials, K_hat, V_hat).assign(**cell columns)
                prof = _profile(trials, K_hat, V_hat, reference=reference, columns=dict(
                    trial=np.arange(start, start + t), distribution=cell.distribution,
                    params=cell.params_label(), dim=d, n_keys=n, budget=budget,
                    scheme=spec.display(), bits_nominal=float(bb.nominal),
                    bits_total=float(bb.total), key_bits_total=float(bb.key_total),
                    value_bits_total=float(bb.value_total), cell_id=cid,
                    cluster=_trial_clusters(captured, start, t)))
            except (ValueError, TypeError) as exc:
                # say which cell: the message alone does not tell a 90-cell grid apart
                raise type(exc)(f"{exc} [cell: {cell.describe()}]") from exc
            out.append((cid, start, prof, time.perf_counter() - tic))
        del trials
    return out
