"""The numerical environment a cell was computed in: the CPU and the BLAS numpy runs.

The same code, numpy and scipy (:func:`kvstats.sweep.plan.code_version`, which decides
whether a stored cell may be resumed) can still give other last bits on another node: a
BLAS picks its kernels by the CPU it finds (OpenBLAS's ``DYNAMIC_ARCH``: Haswell,
SkylakeX, Zen, ...), and numpy dispatches its own loops by the CPU's SIMD extensions,
so sums and products may round differently. :func:`numeric_env` records what the process
finds; the store writes it into every cell and the manifest, and a resume that takes
cells of another environment warns once (documented choice: it is not refused, since
the differences are rounding, far below any statistic's resolution, and refusing would
recompute a whole sweep moved to another node; ``resume=False`` recomputes it all here).
"""

from __future__ import annotations

import functools
import json
import platform

import numpy as np

__all__ = ["numeric_env", "env_differences", "NumericEnvWarning"]

_UNKNOWN = "unknown"


def numeric_env() -> dict[str, str]:
    """The CPU and the BLAS of this process, as strings (``"unknown"`` where not found).

    ``machine`` (``platform.machine()``), ``simd`` (the SIMD extensions numpy found on
    the CPU and dispatches to), ``blas`` (the BLAS numpy was built with, name and
    version) and ``blas_core`` (the kernel family that BLAS chose for this CPU, as
    threadpoolctl reports it: OpenBLAS's ``architecture``). Read once per process.

    Examples
    --------
    >>> env = numeric_env()
    >>> sorted(env), all(isinstance(v, str) for v in env.values())
    (['blas', 'blas_core', 'machine', 'simd'], True)
    """
    return dict(_numeric_env())


@functools.lru_cache(maxsize=1)
def _numeric_env() -> tuple[tuple[str, str], ...]:
    try:
        config = np.show_config(mode="dicts")
    except Exception:   # an older numpy, or a build without the record
        config = {}
    simd = config.get("SIMD Extensions", {}).get("found") or []
    blas = config.get("Build Dependencies", {}).get("blas", {})
    name, version = blas.get("name"), blas.get("version")
    core = _UNKNOWN
    try:
        from threadpoolctl import threadpool_info

        # numpy's BLAS among the libraries loaded (scipy may load another copy)
        cores = sorted({str(lib.get("architecture")) for lib in threadpool_info()
                        if lib.get("user_api") == "blas" and lib.get("architecture")
                        and (version is None or lib.get("version") == version)})
        core = ",".join(cores) or _UNKNOWN
    except Exception:   # threadpoolctl missing or unable to read a library
        pass
    return (("machine", platform.machine() or _UNKNOWN),
            ("simd", ",".join(map(str, simd)) or _UNKNOWN),
            ("blas", " ".join(str(x) for x in (name, version) if x) or _UNKNOWN),
            ("blas_core", core))


def env_differences(stored: object, now: dict[str, str]) -> str | None:
    """What differs between a recorded environment and ``now``, in words; None if nothing.

    A cell whose chunks were computed in several environments (a sweep resumed elsewhere)
    records them as ``{"mixed": <JSON list of them>}`` (:mod:`kvstats.sweep.run`): each
    that differs is described.

    Examples
    --------
    >>> now = {"machine": "x86_64", "blas_core": "SkylakeX"}
    >>> env_differences({"machine": "x86_64", "blas_core": "Haswell"}, now)
    'blas_core Haswell (now SkylakeX)'
    >>> env_differences(now, now) is None, env_differences(None, now)
    (True, 'none recorded')
    >>> import json
    >>> env_differences({"mixed": json.dumps([now, {**now, "blas_core": "Zen"}])}, now)
    'chunks of 2 environments, 1 other: blas_core Zen (now SkylakeX)'
    """
    if not isinstance(stored, dict):
        return "none recorded"
    if set(stored) == {"mixed"}:
        try:
            each = json.loads(stored["mixed"])
        except (TypeError, ValueError):
            each = None
        if isinstance(each, list):   # else an unreadable mark: compared as a record below
            diff = [d for d in (env_differences(e, now) for e in each) if d]
            return (f"chunks of {len(each)} environments, {len(diff)} other: " + "; ".join(diff)
                    if diff else None)
    diff = [f"{k} {stored.get(k, _UNKNOWN)} (now {now.get(k, _UNKNOWN)})"
            for k in sorted(set(stored) | set(now)) if stored.get(k) != now.get(k)]
    return ", ".join(diff) or None


class NumericEnvWarning(RuntimeWarning):
    """A resumed cell was computed in another numerical environment (:func:`numeric_env`).

    ``cell_id`` and ``stored`` (the cell's recorded environment, None if none) say which,
    for the sweep that gathers them into one warning.
    """

    def __init__(self, message: str, cell_id: str = "", stored: object = None) -> None:
        super().__init__(message)
        self.cell_id, self.stored = cell_id, stored
