"""kvstats: calibrated statistics for the damage KV-cache quantization does to attention.

The public API is the names in ``__all__``. They are imported lazily so that
``import kvstats`` stays fast and never imports torch or jax.

Where to start (each name's own ``help`` has its parameters, units and an example):

- data: `sample` draws synthetic `Trials` (keys, values, queries) from `DISTRIBUTIONS`;
  `load_trials` reads captured ones; `group_query_heads` builds them from model tensors.
- quantization: `make_scheme` builds a named scheme of `SCHEMES` at a bit width
  (``roundtrip(K, V)`` decodes what it would store; `BitBudget` counts its bits).
- measurement: `error_profile` gives one row per trial (SNR in dB, angles in radians,
  norm ratios, KL in nats, recall, argmax shift: ``kvstats.metrics.METRIC_TABLE``),
  `summarize_profile` their means, quantiles and worst cases.
- experiments and tests: `run_sweep` (a `SweepConfig` grid), `load_result`,
  `summary_table`, `compare_schemes`, `hypothesis_report`; the tests themselves are in
  ``kvstats.stats``, closed forms in ``kvstats.theory``.

Examples
--------
>>> import kvstats
>>> trials = kvstats.sample("gaussian", n_trials=20, n_keys=64, dim=32, seed=0)
>>> K_hat, V_hat = kvstats.make_scheme("KQV", 4, 32, seed=1).roundtrip(trials.K, trials.V)
>>> profile = kvstats.error_profile(trials, K_hat, V_hat)
>>> summary = kvstats.summarize_profile(profile).set_index("metric")
>>> int(summary.loc["snr_k", "n"]), round(float(summary.loc["snr_k", "mean"]), 1)
(20, 20.8)
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # quantization core
    "lloyd_max_codebook": "kvstats.quant.codebook",
    "empirical_codebook": "kvstats.quant.codebook",
    "Codebook": "kvstats.quant.codebook",
    "make_rotation": "kvstats.quant.rotation",
    "make_sketch": "kvstats.quant.sketch",
    "MSEQuantizer": "kvstats.quant.mse",
    "ProdQuantizer": "kvstats.quant.prod",
    "QJLKeyQuantizer": "kvstats.quant.qjl_keys",
    "KIVIQuantizer": "kvstats.quant.uniform",
    "make_scheme": "kvstats.quant.schemes",
    "SCHEMES": "kvstats.quant.schemes",
    "scheme_def": "kvstats.quant.registry",
    "BitBudget": "kvstats.quant.schemes",
    "define_scheme": "kvstats.quant.register",
    "register_scheme": "kvstats.quant.register",
    "unregister_scheme": "kvstats.quant.register",
    "check_scheme": "kvstats.quant.contract",
    # data and measurement
    "sample": "kvstats.data.synthetic",
    "DISTRIBUTIONS": "kvstats.data.synthetic",
    "register_distribution": "kvstats.data.register",
    "unregister_distribution": "kvstats.data.register",
    "Trials": "kvstats.data.trials",
    "group_query_heads": "kvstats.data.trials",
    "load_trials": "kvstats.data.real",
    "error_profile": "kvstats.metrics.profile",
    "summarize_profile": "kvstats.metrics.profile",
    # experiments
    "run_sweep": "kvstats.sweep",
    "SweepConfig": "kvstats.sweep",
    "replay_trials": "kvstats.sweep",
    "load_result": "kvstats.results",
    "summary_table": "kvstats.analysis",
    "compare_schemes": "kvstats.analysis",
    "aggregate_clusters": "kvstats.analysis",
    "find_crossovers": "kvstats.analysis",
    "theory_table": "kvstats.analysis",
    "hypothesis_report": "kvstats.report",
    "validate_report_options": "kvstats.report.options",
    "plot_shannon_phi": "kvstats.report",
    "plot_kl_vs_bits": "kvstats.report",
    "plot_recall_vs_bits": "kvstats.report",
    "plot_crossover": "kvstats.report",
}
_SUBMODULES = {"quant", "data", "metrics", "stats", "analysis", "report", "theory", "sweep", "models"}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
__all__ = __all__ + ["__version__"]
