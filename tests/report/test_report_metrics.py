"""The report's "Metrics and units" block, and the sentences that depend on the report's design
or on which pairs it tested (heavy-tail advice, a report of no test), on constructed frames."""

import warnings

import numpy as np
import pytest

from kvstats.analysis import METRICS
from kvstats.metrics.table import METRIC_TABLE
from kvstats.report import hypothesis_report
from kvstats.report.tables import COLUMN_DEFINITIONS, metrics_table
from kvstats.report.wording import HEAVY_NOTE

from _sweep_frames import make_frame
from _sweep_frames import sweep_result as _result


def _totals(f, totals):
    """Set each (scheme, budget)'s bits_total: values no scheme has, so none can be assumed."""
    for (scheme, budget), total in totals.items():
        f.loc[(f.scheme == scheme) & (f.budget == budget), "bits_total"] = total
    return f


def test_every_reported_metric_is_defined_with_the_metric_tables_label_unit_and_direction():
    table = metrics_table()
    assert table["column"].tolist() == [*METRICS, "snr_k_pooled", "snr_v_pooled", *COLUMN_DEFINITIONS]
    for row in table.head(len(METRICS) + 2).itertuples(index=False):
        m = METRIC_TABLE[row.column]
        assert (row.label, row.unit) == (m.label, m.unit)
        assert row.better == ("higher" if m.higher_is_better else "lower")
        assert row.definition.startswith(m.definition)      # one home: the metric table
        assert (row.definition == m.definition) == (row.column in METRICS)
    rows = table.set_index("column")
    # what a new user asked: the KL's direction and unit, φ in radians, SNR a mean of dB
    assert rows.loc["kl", "definition"].startswith("KL(p ‖ p̂) = Σᵢ pᵢ(ln pᵢ − ln p̂ᵢ) of the exact")
    assert rows.loc["kl", "unit"] == "nats" and rows.loc["phi_t", "unit"] == "rad"
    assert "the mean of per-vector dB, not the dB of the mean error" in rows.loc["snr_v", "definition"]
    assert rows.loc["bits total", "unit"] == "bits per coordinate"


def test_the_report_prints_the_block_and_equal_budget_totals_from_the_data(tmp_path):
    spec = {("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}
    f = _totals(make_frame(spec, n=20, seed=51), {("KQV", 2): 2.3125, ("QKQV", 2): 2.4375,
                                                  ("KQV", 3): 3.3125, ("QKQV", 3): 3.4375})
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md, html = rep.files["markdown"].read_text(), rep.files["html"].read_text()
    block = md[md.index("## Metrics and units"):md.index("## Crossovers")]
    for name in METRICS:
        m = METRIC_TABLE[name]
        assert f"| {name} | {m.label} | {m.unit} |" in block
    assert "<h2>Metrics and units</h2>" in html and "KL(p ‖ p̂)" in html
    assert ("**Equal budget** means the same nominal n (code bits per coordinate)" in block
            and "e.g. n = 2 (gaussian, d = 64, N = 128): KQV 2.3125, QKQV 2.4375 bits per "
            "coordinate." in block)
    # equal totals are said to be equal, and a budget with one scheme is no example
    g = _totals(make_frame({("KQV", 2): 0.0, ("QKQV", 3): 0.0, ("KQV", 3): 0.0}, n=20, seed=52),
                {("KQV", 3): 3.5, ("QKQV", 3): 3.5})
    md = hypothesis_report(_result(g), tmp_path / "eq", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert ("e.g. n = 3 (gaussian, d = 64, N = 128): QKQV 3.5, KQV 3.5 bits per coordinate "
            "(here equal).") in md


def _heavy_kl(seed):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=400, seed=seed)
    rng = np.random.default_rng(seed)
    heavy = (f["scheme"] == "KQV").to_numpy()
    f.loc[heavy, "kl"] = 1.0 + rng.pareto(1.0, heavy.sum())
    return f


@pytest.mark.parametrize("pairing, advice", [
    ("trial", "and the sign test, which uses only the signs of the paired differences, no moments."),
    ("none", "and the Mann–Whitney test, which uses only ranks, no moments.")])
def test_heavy_tail_advice_names_the_location_test_the_report_used(tmp_path, pairing, advice):
    md = hypothesis_report(_result(_heavy_kl(53)), tmp_path, figures=False, energy_resamples=19,
                           pairing=pairing).files["markdown"].read_text()
    assert md.count(HEAVY_NOTE + " Where a mean is marked, read the median, p99 and max "
                    "(tables/summary.csv) " + advice) == 2     # the header and the footnote
    assert "rank tests" not in md


def test_a_report_of_no_test_says_which_pairs_were_missing_and_which_labels_exist(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("K4V2", 3): 0.0}, n=20, seed=54)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # config and check_comparisons warn too
        result = _result(f, ("KQV", "K4V2"))
        rep = hypothesis_report(result, tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    assert rep.comparisons.empty and "No metric was tested" not in md
    # the config names no pairs: the default ones, not "asked for" (as the UserWarning says)
    assert ("No comparison pair was present: none of the default pairs (KQV vs QKQV, KQV vs "
            "KV, QKQV vs KV) names two schemes of one case of this sweep, so no test and no "
            "crossover. The sweep's scheme labels: KQV, K4V2;") in md
    assert "- Tests: none, since no comparison pair was present" in md
    md = hypothesis_report(result, tmp_path / "asked_none", figures=False, energy_resamples=19,
                           comparisons=[]).files["markdown"].read_text()
    assert "No comparison was asked for (comparisons = []), so no test and no crossover; this " \
           "sweep's scheme labels: KQV, K4V2." in md
    # a pair tested at one budget only: no crossover to look for, said as before
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=20, seed=55)
    md = hypothesis_report(_result(g), tmp_path / "one", figures=False,
                           energy_resamples=19).files["markdown"].read_text()
    assert "No metric was tested at two or more budgets." in md and "No comparison" not in md
