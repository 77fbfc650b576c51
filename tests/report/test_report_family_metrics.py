"""The [report] option ``metrics``: which metrics' tests form the family the correction adjusts.

The family's size sets every adjusted p-value (Holm: the k-th smallest p times n − k + 1), so
the tests here check the size and the adjusted p-values against Holm's closed form over the
rows the report tested, the refusals of bad names (with the near miss), the command's flag,
the TOML table, and that leaving the option unset changes nothing.
"""

import json

import numpy as np
import pytest

from kvstats.analysis.tested_metrics import TESTABLE_METRICS, default_metrics
from kvstats.cli import main
from kvstats.report import hypothesis_report
from kvstats.report.options import FAMILY_METRICS, validate_report_options
from kvstats.sweep import SweepConfig

from _sweep_frames import make_frame
from _sweep_frames import sweep_result as _result
from _tiny_sweep import tiny_toml

SPEC = {("KQV", 2): 0.0, ("QKQV", 2): 0.4, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}
FAST = dict(figures=False, energy_resamples=19, bootstrap_resamples=99)


def _holm(p):
    """Holm's adjusted p-values (closed form: step-down, running maximum, capped at 1)."""
    p = np.asarray(p, float)
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    out = np.empty_like(p)
    out[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return out


def test_the_family_holds_the_chosen_metrics_and_holm_adjusts_over_its_size(tmp_path):
    f = make_frame(SPEC, n=30, seed=61)
    full = hypothesis_report(_result(f), tmp_path / "all", **FAST).comparisons
    # declared in the config's [report] table, as a family must be
    rep = hypothesis_report(_result(f, report={"metrics": ["kl", "snr_t"]}), tmp_path / "two", **FAST)
    comp = rep.comparisons
    # one pair at two budgets: a sign test per chosen metric and an energy test per budget
    assert set(comp["metric"]) == {"kl", "snr_t", "profile_6d"}
    assert comp.attrs["n_tests"] == 2 * 2 + 2 == comp["pvalue"].notna().sum()
    assert full.attrs["n_tests"] == 2 * len(default_metrics(f)) + 2
    tested = comp[comp["pvalue"].notna()]
    assert np.allclose(tested["pvalue_adjusted"], _holm(tested["pvalue"]))
    # the same raw p-value of kl is adjusted over 6 tests here, over 20 in the full report
    key = ["budget", "metric", "test"]
    kl = comp[comp["metric"] == "kl"].set_index(key)["pvalue"]
    assert np.allclose(kl, full[full["metric"] == "kl"].set_index(key)["pvalue"].loc[kl.index])
    # the header: which metrics, how many tests, the first step's threshold α/6, the warning
    md = rep.files["markdown"].read_text()
    line = next(x for x in md.splitlines() if x.startswith("- Family (the [report] option metrics)"))
    assert "the tests of kl, snr_t and the 6D energy tests, 6 p-values" in line
    assert f"p ≤ {0.05 / 6:.3g}" in line and "before looking at any result" in line
    payload = json.loads(rep.files["json"].read_text())
    assert payload["options"]["metrics"] == ["kl", "snr_t"]
    assert payload["resolution"]["n_tests"] == 6 and payload["resolution"]["p_needed"] == pytest.approx(0.05 / 6)
    # the other metrics keep their summaries (descriptive), with no test rows
    assert set(rep.summary["metric"]) >= set(default_metrics(f))
    assert "| KQV vs QKQV | phi_k |" not in md and "| KQV vs QKQV | kl |" in md


def test_unset_metrics_is_the_full_family_and_adds_no_header_line(tmp_path):
    f = make_frame(SPEC, n=20, seed=62)
    unset = hypothesis_report(_result(f), tmp_path / "unset", **FAST)
    every = hypothesis_report(_result(f), tmp_path / "every", metrics=list(default_metrics(f)), **FAST)
    for name in ("summary", "comparisons", "crossovers", "theory"):
        assert unset.files[name].read_bytes() == every.files[name].read_bytes(), name
    assert "- Family (the [report] option metrics)" not in unset.files["markdown"].read_text()


@pytest.mark.parametrize("bad, words", [
    (["kl", "snr_tt"], ["'metrics'", "'snr_tt'", "did you mean 'snr_t'", "allowed: snr_k"]),
    ("kl", ["'metrics'", "list", "'kl'"]),
    ([], ["'metrics'", "non-empty", "[]"]),
    (["kl", "kl"], ["'metrics'", "once", "['kl']"]),
])
def test_bad_metrics_are_refused_before_any_file(tmp_path, bad, words):
    with pytest.raises((ValueError, TypeError)) as info:
        hypothesis_report(_result(make_frame(SPEC, n=10)), tmp_path / "rep", metrics=bad, **FAST)
    assert all(w in str(info.value) for w in words), str(info.value)
    assert not (tmp_path / "rep").exists()


def test_equivalence_margins_must_be_on_metrics_of_the_family():
    with pytest.raises(ValueError, match=r"margins for \['recall_at_5'\].*leaves out"):
        validate_report_options({"metrics": ["kl"], "equivalence": {"recall_at_5": 0.02}})
    assert validate_report_options({"metrics": ["kl"], "equivalence": {"kl": 0.1}})["metrics"] == ("kl",)


def test_the_options_names_are_the_metrics_compare_schemes_can_test():
    # kvstats.report.options cannot import kvstats.analysis (pandas): its copy must agree
    assert FAMILY_METRICS == TESTABLE_METRICS


TOML = tiny_toml(seed=5, n_trials=10, energy_resamples=19, bootstrap_resamples=49,
                 report_extra="figures = false\nmetrics = {metrics}\n")


def _tested(folder):
    payload = json.loads((folder / "report.json").read_text())
    return payload["options"]["metrics"], {r["metric"] for r in payload["comparisons"]}


def test_toml_table_and_command_flag(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TOML.format(metrics='["kl", "recal_at_5"]'))
    with pytest.raises(ValueError, match="did you mean 'recall_at_5'"):
        SweepConfig.from_toml(bad)          # at load, before any compute
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TOML.format(metrics='["kl"]'))
    out = tmp_path / "sweep"
    assert main(["sweep", "--config", str(cfg), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    assert _tested(out) == (["kl"], {"kl", "profile_6d"})     # the config's [report] metrics
    # the flag overrides the config
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--metrics", "snr_t", "phi_t",
                 "--no-progress"]) == 0
    assert _tested(tmp_path / "rep") == (["snr_t", "phi_t"], {"snr_t", "phi_t", "profile_6d"})
    capsys.readouterr()
    # a misspelt name: one line naming the flag and the near miss, exit 2, no report
    assert main(["report", str(out), "--out", str(tmp_path / "typo"), "--metrics", "kl", "snr_tt",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--metrics must be a non-empty list" in err and "did you mean 'snr_t'" in err, err
    assert not (tmp_path / "typo").exists()


def test_crossover_figures_have_panels_only_for_tested_metrics(tmp_path, monkeypatch):
    import kvstats.report.plots as plots

    drawn, draw = [], plots.plot_crossover

    def record(comp, metrics=plots.CROSSOVER_METRICS, **kw):
        drawn.append(list(metrics))
        return draw(comp, metrics, **kw)

    monkeypatch.setattr(plots, "plot_crossover", record)
    f = make_frame(SPEC, n=12, seed=63)
    rep = hypothesis_report(_result(f), tmp_path / "kl", metrics=["kl", "snr_t"], figures=True,
                            energy_resamples=19, bootstrap_resamples=49)
    assert drawn == [["kl"]] and "crossover_kqv_vs_qkqv" in rep.figures
    # no tested metric among the crossover figure's: no figure of empty panels
    rep = hypothesis_report(_result(f), tmp_path / "t", metrics=["snr_t"], figures=True,
                            energy_resamples=19, bootstrap_resamples=49)
    assert drawn == [["kl"]] and not any(n.startswith("crossover_") for n in rep.figures)
