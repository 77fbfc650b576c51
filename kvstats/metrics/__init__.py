"""Measurement: stable attention, mechanism proxies and the per-trial 6D error profile."""

from kvstats.metrics.attention import (argmax_shift, attention_logits, attention_output,
                                       attention_weights, kl_divergence, log_softmax, softmax,
                                       topk_recall)
from kvstats.metrics.geometry import angle, norm_ratio, pooled_snr_db, snr_db
from kvstats.metrics.profile import PROFILE_COLUMNS, error_profile, summarize_profile
from kvstats.metrics.table import METRIC_DIRECTIONS, METRIC_TABLE, Metric, metric

__all__ = ["METRIC_DIRECTIONS", "METRIC_TABLE", "Metric", "PROFILE_COLUMNS", "angle",
           "argmax_shift", "attention_logits", "attention_output", "attention_weights",
           "error_profile", "kl_divergence", "log_softmax", "metric", "norm_ratio",
           "pooled_snr_db", "snr_db", "softmax", "summarize_profile", "topk_recall"]
