"""Calibrated two-sample statistics for comparing quantization schemes trial by trial.

Rank tests (Mann–Whitney with rank-biserial effect size, two-sample KS, and for paired
samples the Wilcoxon signed rank), the energy distance and its fast permutation test for
the multivariate 6D profiles (free or within-pair relabellings), multiple-testing
corrections, bootstrap intervals (with a heavy-tail screen: the Hill tail index) and
simulated power. See docs/statistics.md.
"""

from ._base import TiesWarning
from .bootstrap import BOOTSTRAP_METHODS, BootstrapResult, bootstrap_ci, bootstrap_ratio_ci
from .cluster import cluster_bootstrap_ci, cluster_bootstrap_ratio_ci
from .energy import EnergyDistanceResult, EnergyTestResult, energy_distance, energy_test
from .multitest import ADJUST_METHODS, MultipleTestResult, add_adjusted_pvalues, adjust_pvalues
from .power import PowerResult, SampleSizeResult, power_mann_whitney, trials_for_power
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
    "power_mann_whitney",
    "sign_test",
    "tail_index",
    "trials_for_power",
    "wilcoxon_signed_rank",
]
