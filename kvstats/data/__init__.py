"""Data: the trial container and synthetic key/value/query distributions.

Loading captured real caches lives in :mod:`kvstats.data.real` (imported on demand).
Exports are lazy (PEP 562, :mod:`kvstats._lazy`): ``import kvstats.data.register`` (what
the command's parser and ``kvstats schemes`` read) does not import the samplers, and
``from kvstats.data import sample`` imports :mod:`kvstats.data.synthetic` then.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

_EXPORTS = {
    "DISTRIBUTIONS": "kvstats.data.catalog",
    "VALUE_DISTRIBUTIONS": "kvstats.data.catalog",
    "default_params": "kvstats.data.synthetic",
    "sample": "kvstats.data.synthetic",
    "Trials": "kvstats.data.trials",
    "group_query_heads": "kvstats.data.trials",
}
_SUBMODULES = {"catalog", "synthetic", "trials", "register", "real"}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
__all__ = sorted(_EXPORTS)   # ``import *`` gives the names, as before, not the submodules
