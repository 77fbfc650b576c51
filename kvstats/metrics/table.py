"""The metric table: one definition per per-trial metric of :func:`kvstats.error_profile`.

Every place that needs a fact about a metric (its direction, unit, figure label, whether
it belongs to the 6D profile or to the report's tests) asks this table; the tuples and
dicts below (``REPORT_METRICS``, ``PROFILE_6D``, ``HIGHER_IS_BETTER``,
``METRIC_DIRECTIONS``) are views of it, never separate lists. A new metric is one
:class:`Metric` entry here plus its column in :func:`kvstats.error_profile`.

The profile's other columns describe the trial, not an error (:data:`DESCRIPTORS`): the
same for every reconstruction of it, so never summarised as a metric, reported or tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kvstats._checks import check_choice

__all__ = ["Metric", "METRIC_TABLE", "metric", "REPORT_METRICS", "PROFILE_6D",
           "HIGHER_IS_BETTER", "METRIC_DIRECTIONS", "WORST_DIRECTIONS", "DESCRIPTORS"]

#: How a metric's worst case reads: "high" (larger is worse), "low" (smaller is worse),
#: "one" (farthest from 1 in log scale is worse; a value <= 0 is the farthest), "zero"
#: (farthest from 0 is worse).
WORST_DIRECTIONS = ("high", "low", "one", "zero")


@dataclass(frozen=True)
class Metric:
    """One per-trial metric (a column of :func:`kvstats.error_profile`).

    Attributes
    ----------
    name : str
        Column name.
    worst : {"high", "low", "one", "zero"}
        Direction of its worst case (:data:`WORST_DIRECTIONS`), used by
        :func:`kvstats.summarize_profile`.
    unit : str
        Unit of its values ("dB", "rad", "nats", "fraction", ...; "" for a pure ratio).
    label : str
        Short name for figures and tables ("SNR_k", "φ_k", "KL", "recall@5", ...).
    profile_6d : bool
        One of the six dimensions (scale and direction of K, V, T) of the error profile
        that the report's energy test compares.
    reported : bool
        Summarised and tested one by one in the report (:data:`REPORT_METRICS`).
    definition : str
        What one trial's value is (the report's "Metrics and units" table prints it).

    Examples
    --------
    >>> m = metric("kl")
    >>> m.higher_is_better, m.unit, m.axis_label
    (False, 'nats', 'KL (nats)')
    """

    name: str
    worst: str
    unit: str
    label: str
    profile_6d: bool = False
    reported: bool = False
    definition: str = field(kw_only=True)   # required: what a trial's value is

    def __post_init__(self) -> None:
        check_choice(self.worst, "worst", WORST_DIRECTIONS)
        if not self.definition:
            raise ValueError(f"metric {self.name!r}: definition must be a non-empty text; "
                             f"received {self.definition!r}")
        if self.profile_6d and not self.reported:
            raise ValueError(f"metric {self.name!r}: a 6D profile dimension must be reported")

    @property
    def higher_is_better(self) -> bool | None:
        """True when larger values are better, False when smaller are, None when neither
        (a norm ratio is best at 1, a bias at 0)."""
        return {"low": True, "high": False}.get(self.worst)

    @property
    def axis_label(self) -> str:
        """``label (unit)``, or the label alone for a unitless metric."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


# what a trial's value averages over, per place (keys, values, attention output)
_OVER = {"k": "the trial's N keys", "v": "the trial's N values",
         "t": "the attention outputs t = Σᵢ pᵢvᵢ (one per query; t̂ = Σᵢ p̂ᵢv̂ᵢ)"}


def _snr(p: str) -> str:
    return ("10·log10(‖x‖²/‖x − x̂‖²) per vector, averaged in dB over " + _OVER[p]
            + ", exact vectors left out: the mean of per-vector dB, not the dB of the mean "
            "error")


def _phi(p: str) -> str:
    return ("angle between a vector and its reconstruction, arccos(⟨x, x̂⟩/(‖x‖‖x̂‖)) in "
            "[0, π], averaged over " + _OVER[p])


def _norm_ratio(p: str) -> str:
    return "‖x̂‖/‖x‖ per vector, averaged over " + _OVER[p]


def _pooled(p: str) -> str:
    return ("energy-pooled SNR of the trial, 10·log10(Σ‖x‖²/Σ‖x − x̂‖²) over " + _OVER[p]
            + ": what the Shannon distortion–rate bound limits (kvstats.rate_distortion)")


_METRICS = (
    Metric("snr_k", "low", "dB", "SNR_k", profile_6d=True, reported=True, definition=_snr("k")),
    Metric("phi_k", "high", "rad", "φ_k", profile_6d=True, reported=True, definition=_phi("k")),
    Metric("norm_ratio_k", "one", "", "‖k̂‖/‖k‖", definition=_norm_ratio("k")),
    Metric("snr_v", "low", "dB", "SNR_v", profile_6d=True, reported=True, definition=_snr("v")),
    Metric("phi_v", "high", "rad", "φ_v", profile_6d=True, reported=True, definition=_phi("v")),
    Metric("norm_ratio_v", "one", "", "‖v̂‖/‖v‖", definition=_norm_ratio("v")),
    Metric("snr_t", "low", "dB", "SNR_t", profile_6d=True, reported=True, definition=_snr("t")),
    Metric("phi_t", "high", "rad", "φ_t", profile_6d=True, reported=True, definition=_phi("t")),
    Metric("norm_ratio_t", "one", "", "‖t̂‖/‖t‖", definition=_norm_ratio("t")),
    Metric("kl", "high", "nats", "KL", reported=True, definition=(
        "KL(p ‖ p̂) = Σᵢ pᵢ(ln pᵢ − ln p̂ᵢ) of the exact attention p = softmax(q·K/√d) and "
        "the quantized p̂ = softmax(q·K̂/√d) over the N keys, averaged over the trial's "
        "queries")),
    Metric("recall_at_5", "low", "fraction", "recall@5", reported=True, definition=(
        "fraction of the 5 keys with the largest exact logits q·k/√d that stay among the 5 "
        "largest quantized logits q·k̂/√d (ties count as kept), averaged over queries")),
    Metric("argmax_shift", "high", "fraction", "argmax shift", reported=True, definition=(
        "fraction of the trial's queries whose exact top key is no longer a top key of the "
        "quantized logits")),
    Metric("ip_bias", "zero", "q·k units", "q·k error bias", definition=(
        "mean of the inner-product error q·k̂ − q·k over the trial's (query, key) pairs")),
    Metric("ip_var", "high", "(q·k units)²", "q·k error variance", definition=(
        "population variance of the inner-product error q·k̂ − q·k over the trial's "
        "(query, key) pairs")),
    Metric("ip_slope", "one", "", "q·k slope", definition=(
        "least-squares slope through the origin of q·k̂ on q·k over the trial's (query, key) "
        "pairs, Σ(q·k)(q·k̂)/Σ(q·k)²: 1 for an unbiased inner-product estimator, β < 1 for "
        "a shrinking one (TurboQuant-mse: β = 1 − D); 1 when every q·k and q·k̂ is 0, +inf "
        "when every q·k is 0 but some q·k̂ is not")),
    Metric("snr_k_pooled", "low", "dB", "pooled SNR_k", definition=_pooled("k")),
    Metric("snr_v_pooled", "low", "dB", "pooled SNR_v", definition=_pooled("v")),
)

#: The trial descriptors, column → definition (unit included), after the metrics in
#: :func:`kvstats.error_profile`'s columns: properties of the trial's exact data, the same
#: for every scheme of a case; not metrics (no direction, never in the report's tests).
DESCRIPTORS: Mapping[str, str] = MappingProxyType({
    "attn_entropy": "entropy H = −Σᵢ pᵢ ln pᵢ in nats of the exact attention p = "
                    "softmax(q·K/√d) over the N keys, averaged over the trial's queries: "
                    "ln N for uniform attention, 0 for one key; exp(H) is the effective "
                    "number of keys attended",
})

#: Every metric by name, in the column order of :func:`kvstats.error_profile`.
METRIC_TABLE: Mapping[str, Metric] = MappingProxyType({m.name: m for m in _METRICS})

#: Metrics summarised and tested one by one in the report.
REPORT_METRICS: tuple[str, ...] = tuple(m.name for m in _METRICS if m.reported)
#: The 6D error profile (scale and direction for K, V, T) used by the energy test.
PROFILE_6D: tuple[str, ...] = tuple(m.name for m in _METRICS if m.profile_6d)
#: The winner rule of the report: whether a larger value is better, per reported metric.
HIGHER_IS_BETTER: Mapping[str, bool] = MappingProxyType(
    {m.name: m.higher_is_better for m in _METRICS if m.reported})
#: The worst-case direction of every metric (see :data:`WORST_DIRECTIONS`).
METRIC_DIRECTIONS: Mapping[str, str] = MappingProxyType({m.name: m.worst for m in _METRICS})


def metric(name: str) -> Metric:
    """The :class:`Metric` called ``name``; ValueError listing the metrics otherwise.

    Parameters
    ----------
    name : str
        A key of :data:`METRIC_TABLE` (the profile's columns and the pooled SNRs).

    Returns
    -------
    Metric
        Its direction, label and the report's use of it.

    Examples
    --------
    >>> metric("recall_at_5").axis_label
    'recall@5 (fraction)'
    """
    return METRIC_TABLE[check_choice(name, "metric", list(METRIC_TABLE))]
