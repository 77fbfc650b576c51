"""The comparison family's corrections and designs by name, importable without numpy.

One place for both lists: the analysis (:func:`kvstats.analysis.compare_schemes`), the
report's options (:mod:`kvstats.report.options`), the energy test's resolution
(:func:`kvstats.stats.sequential.required_resolution`) and the command's parser
(:mod:`kvstats.cli_parser`, which ``--help`` builds and which must not import numpy) read
them here. Only the standard library is imported.

Examples
--------
>>> CORRECTIONS[0], PAIRINGS
('holm', ('none', 'trial'))
"""

from __future__ import annotations

__all__ = ["CORRECTIONS", "PAIRINGS"]

#: The multiple-testing corrections a comparison family takes: each adjusts p-values
#: (:mod:`kvstats.stats.multitest`) and has a closed-form most demanding first step (the
#: permutations an energy test needs to be able to reject: ``required_resolution``).
CORRECTIONS = ("holm", "fdr_bh", "bonferroni", "sidak", "holm-sidak", "hommel", "fdr_by")
#: The designs of a comparison: two independent samples ("none"), or pairs matched on the
#: unit ("trial", each scheme's value of one trial or cluster against the other's).
PAIRINGS = ("none", "trial")
