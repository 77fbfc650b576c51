"""Calibrated statistics for comparing quantization schemes trial by trial: paired and two-sample.

Every scheme of a sweep case sees the same trials, so a comparison's two samples are
paired; the paired design is the default of the report and of
:func:`kvstats.analysis.compare_schemes` (``pairing="trial"``), the two-sample one is
``pairing="none"``. Paired: the sign test with its dominance P(a > b) − P(a < b)
(:func:`sign_test`, the report's location test), the Wilcoxon signed-rank test
(:func:`wilcoxon_signed_rank`), the energy permutation test with within-pair swaps
(``energy_test(..., paired=True)``; sequential in :mod:`.sequential`) and the paired TOST
(:mod:`.equivalence`, ``paired=True``). Two-sample: Mann–Whitney with rank-biserial effect
size, KS (:mod:`.ks_exact`: exact under ties), the energy test with free relabelling and
the unpaired TOST. Also: the energy distance of the multivariate 6D profiles,
multiple-testing corrections, bootstrap intervals (with a heavy-tail screen: the Hill tail
index; :mod:`.cluster` for clustered trials) and simulated power. See docs/statistics.md.
"""

from ._base import TiesWarning
from .bootstrap import BOOTSTRAP_METHODS, BootstrapResult, bootstrap_ci, bootstrap_ratio_ci
from .cluster import cluster_bootstrap_ci, cluster_bootstrap_ratio_ci
from .energy import EnergyDistanceResult, EnergyTestResult, energy_distance, energy_test
from .multitest import ADJUST_METHODS, MultipleTestResult, add_adjusted_pvalues, adjust_pvalues
from .power import PowerResult, SampleSizeResult, pairs_for_power, power_mann_whitney, power_sign_test, trials_for_power
from .paired import SignedRankResult, SignTestResult, sign_test, wilcoxon_signed_rank
from .rank import KSResult, MannWhitneyResult, ks_2samp, mann_whitney
from .tail import HeavyTailWarning, TailIndexResult, tail_index

__all__ = [
    "ADJUST_METHODS",
    "BOOTSTRAP_METHODS",
    "BootstrapResult",
    "EnergyDistanceResult",
    "EnergyTestResult",
    "HeavyTailWarning",
    "KSResult",
    "MannWhitneyResult",
    "MultipleTestResult",
    "PowerResult",
    "SampleSizeResult",
    "SignedRankResult",
    "SignTestResult",
    "TailIndexResult",
    "TiesWarning",
    "add_adjusted_pvalues",
    "adjust_pvalues",
    "bootstrap_ci",
    "bootstrap_ratio_ci",
    "cluster_bootstrap_ci",
    "cluster_bootstrap_ratio_ci",
    "energy_distance",
    "energy_test",
    "ks_2samp",
    "mann_whitney",
    "pairs_for_power",
    "power_mann_whitney",
    "power_sign_test",
    "sign_test",
    "tail_index",
    "trials_for_power",
    "wilcoxon_signed_rank",
]
