"""The built-in distributions' names and the name of a captured cache, importable without numpy.

One place for them: :mod:`kvstats.data.synthetic` samples these names,
:mod:`kvstats.results` marks a captured cache's case with :data:`REAL`, and the command's
parser (:mod:`kvstats.cli_parser`), which ``--help`` builds and which must not import
numpy, shows them. Only the standard library is imported.

Examples
--------
>>> DISTRIBUTIONS[0], REAL, set(DISTRIBUTIONS) - set(VALUE_DISTRIBUTIONS)
('gaussian', 'real', {'focused'})
"""

from __future__ import annotations

__all__ = ["DISTRIBUTIONS", "VALUE_DISTRIBUTIONS", "REAL", "REAL_ABOUT"]

#: The built-in synthetic key distributions (registered ones are not among them).
DISTRIBUTIONS = ("gaussian", "heavy_tailed", "low_rank", "focused", "outlier_channels")
#: The value distributions: ``focused`` is defined by its alignment with the queries,
#: which values do not have.
VALUE_DISTRIBUTIONS = ("gaussian", "heavy_tailed", "low_rank", "outlier_channels")
#: The ``distribution`` of a case whose trials come from a captured real cache.
REAL = "real"
#: What a config gives ``real`` (``kvstats schemes``, ``--help``).
REAL_ABOUT = "a captured cache: params path, layer, head"
