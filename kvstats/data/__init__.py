"""Data: the trial container and synthetic key/value/query distributions.

Loading captured real caches lives in :mod:`kvstats.data.real` (imported on demand).
"""

from kvstats.data.synthetic import DISTRIBUTIONS, VALUE_DISTRIBUTIONS, default_params, sample
from kvstats.data.trials import Trials, group_query_heads

__all__ = ["DISTRIBUTIONS", "VALUE_DISTRIBUTIONS", "Trials", "default_params",
           "group_query_heads", "sample"]
