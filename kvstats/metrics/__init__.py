"""Measurement: stable attention, mechanism proxies and the per-trial 6D error profile."""

from kvstats._lazy import lazy_exports

# Exports are lazy (PEP 562): the metric table (the report options and the command's
# parser read it) imports neither pandas nor scipy through profile.
_HOMES = {
    "attention": ("argmax_shift", "attention_logits", "attention_output", "attention_weights",
                  "kl_divergence", "log_softmax", "softmax", "topk_recall"),
    "geometry": ("angle", "norm_ratio", "pooled_snr_db", "snr_db"),
    "profile": ("PROFILE_COLUMNS", "error_profile", "summarize_profile"),
    "table": ("METRIC_DIRECTIONS", "METRIC_TABLE", "Metric", "PROFILE_6D", "metric"),
}
_EXPORTS = {name: f"{__name__}.{module}" for module, names in _HOMES.items() for name in names}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, set(_HOMES))
