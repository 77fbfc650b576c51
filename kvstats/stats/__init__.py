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

from kvstats._lazy import lazy_exports

# Exports are lazy (PEP 562): importing a light module of this package (multitest's
# ADJUST_METHODS, sequential's CORRECTIONS: the report options and the command's parser)
# does not import scipy.stats through bootstrap, rank and the rest.
_HOMES = {
    "_base": ("TiesWarning",),
    "bootstrap": ("BOOTSTRAP_METHODS", "BootstrapResult", "bootstrap_ci", "bootstrap_ratio_ci",
                  "min_resamples"),
    "cluster": ("cluster_bootstrap_ci", "cluster_bootstrap_ratio_ci"),
    "energy": ("ENERGY_METHODS", "EnergyDistanceResult", "EnergyTestResult", "energy_distance",
               "energy_test"),
    "equivalence": ("EquivalenceResult", "SkewedPairsWarning", "equivalence_verdict", "tost_rank",
                    "tost_ratio"),
    "family_resolution": ("Resolution", "monte_carlo_resolution", "required_resolution"),
    "ks_exact": ("KSExactResult", "ks_2samp_exact"),
    "multitest": ("ADJUST_METHODS", "MultipleTestResult", "add_adjusted_pvalues", "adjust_pvalues"),
    "power": ("PowerResult", "SampleSizeResult", "pairs_for_power", "power_mann_whitney",
              "power_sign_test", "trials_for_power"),
    "paired": ("SignedRankResult", "SignTestResult", "sign_test", "sign_test_floor", "wilcoxon_signed_rank"),
    "rank": ("KSResult", "MannWhitneyResult", "ks_2samp", "mann_whitney"),
    "sequential": ("EnergySequentialResult", "SequentialPermutationResult", "energy_test_sequential",
                   "sequential_permutation_test"),
    "tail": ("HeavyTailWarning", "TailIndexResult", "tail_index"),
}
_EXPORTS = {name: f"{__name__}.{module}" for module, names in _HOMES.items() for name in names}
_SUBMODULES = {"bootstrap", "catalog", "cluster", "energy", "family_resolution", "equivalence", "ks_exact", "multitest", "paired",
               "power", "rank", "sequential", "tail"}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
