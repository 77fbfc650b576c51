"""kvstats: calibrated statistics for the damage KV-cache quantization does to attention.

The public API is the names in ``__all__``. They are imported lazily so that
``import kvstats`` stays fast and never imports torch or jax.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # quantization core
    "lloyd_max_codebook": "kvstats.quant.codebook",
    "empirical_codebook": "kvstats.quant.codebook",
    "Codebook": "kvstats.quant.codebook",
    "make_rotation": "kvstats.quant.rotation",
    "make_sketch": "kvstats.quant.qjl",
    "MSEQuantizer": "kvstats.quant.mse",
    "ProdQuantizer": "kvstats.quant.qjl",
    "QJLKeyQuantizer": "kvstats.quant.qjl",
    "KIVIQuantizer": "kvstats.quant.uniform",
    "make_scheme": "kvstats.quant.schemes",
    "SCHEMES": "kvstats.quant.schemes",
    "BitBudget": "kvstats.quant.schemes",
    # data and measurement
    "sample": "kvstats.data.synthetic",
    "DISTRIBUTIONS": "kvstats.data.synthetic",
    "Trials": "kvstats.data.trials",
    "load_trials": "kvstats.data.real",
    "error_profile": "kvstats.metrics.profile",
    "summarize_profile": "kvstats.metrics.profile",
    # experiments
    "run_sweep": "kvstats.sweep",
    "SweepConfig": "kvstats.sweep",
    "hypothesis_report": "kvstats.report",
    "plot_shannon_phi": "kvstats.report",
}
_SUBMODULES = {"quant", "data", "metrics", "stats", "report", "theory", "sweep", "models"}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"kvstats.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'kvstats' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
