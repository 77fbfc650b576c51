"""The [report] option ``energy``: whether the 6D energy tests are in the family.

A primary endpoint (``metrics = ["kl"]``, ``energy = false``) is a family of the KL tests
alone: no energy row, a smaller family, and Holm's adjusted p-values over the location
tests only (checked against Holm's closed form). The header says the energy tests were
left out by the option, not skipped; the option is validated, reaches the report from the
keyword, the TOML table and the command's ``--no-energy``; leaving it unset changes nothing.
"""

import json

import numpy as np
import pytest

from kvstats.cli import main
from kvstats.report import hypothesis_report
from kvstats.report.header import _family_text
from kvstats.report.options import validate_report_options
from kvstats.sweep import SweepConfig

from _sweep_frames import make_frame
from _sweep_frames import sweep_result as _result
from _tiny_sweep import tiny_toml

SPEC = {("KQV", 2): 0.0, ("QKQV", 2): 0.4, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}
FAST = dict(figures=False, energy_resamples=19, bootstrap_resamples=99)
LEFT_OUT = "the 6D energy tests were left out by the option energy = false"


def _holm(p):
    """Holm's adjusted p-values (closed form: step-down, running maximum, capped at 1)."""
    p = np.asarray(p, float)
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    out = np.empty_like(p)
    out[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return out


def _line(md, start):
    return next(x for x in md.splitlines() if x.startswith(start))


@pytest.mark.parametrize("bad", ["no", "false", 0, 1])
def test_a_non_bool_energy_is_one_line_naming_the_option(bad):
    with pytest.raises(TypeError) as info:
        validate_report_options({"energy": bad})
    msg = str(info.value)
    assert "'energy'" in msg and "true or false" in msg and "\n" not in msg, msg


def test_default_is_true_and_puts_the_energy_tests_in_the_family():
    assert validate_report_options()["energy"] is True
    assert validate_report_options({"energy": False})["energy"] is False


def test_a_primary_endpoint_is_the_kl_tests_alone(tmp_path):
    f = make_frame(SPEC, n=30, seed=71)
    # declared in the config's [report] table (given in the call, they read "set after the
    # sweep": test_report_options_after_sweep.py)
    with_energy = hypothesis_report(_result(f, report={"metrics": ["kl"]}), tmp_path / "e", **FAST)
    primary = hypothesis_report(_result(f, report={"metrics": ["kl"], "energy": False}), tmp_path / "p",
                                **FAST)
    comp, full = primary.comparisons, with_energy.comparisons
    # one pair at two budgets: a KL sign test per budget, and no energy row
    assert set(comp["test"]) == {"sign"} and set(comp["metric"]) == {"kl"}
    assert comp.attrs["n_tests"] == 2 and full.attrs["n_tests"] == 2 + 2
    assert comp.attrs["energy_skipped"] == 0   # left out by choice: not counted as skipped
    assert np.allclose(comp["pvalue_adjusted"], _holm(comp["pvalue"]))
    # the same raw KL p-values, adjusted over 2 tests here, over 4 with the energy tests
    kl = full[full["metric"] == "kl"]
    assert np.allclose(comp["pvalue"], kl["pvalue"])
    assert (comp["pvalue_adjusted"].to_numpy() <= kl["pvalue_adjusted"].to_numpy()).all()
    # the header: left out by the option, the family's tests and size, its first step α/2
    md = primary.files["markdown"].read_text()
    line = _line(md, "- Family (the [report] options metrics and energy = false)")
    assert "the tests of kl only, 2 p-values; " + LEFT_OUT in line, line
    assert f"p ≤ {0.05 / 2:.3g}" in line and "before looking at any result" in line
    assert "No 6D energy test for" not in md   # not the wording of non-finite profiles
    tests_line = _line(md, "- Tests:")
    assert "6D energy permutation" not in tests_line and "a permutation test: B" not in tests_line
    assert "no 6D energy test (the option energy = false" in tests_line
    assert "no 6D energy test (left out by the [report] option energy = false)" in _line(md, "- Family:")
    assert "energy tests (6D profile)" not in md.split("## Methods")[0]   # the Summary counts none
    payload = json.loads(primary.files["json"].read_text())
    assert payload["options"]["energy"] is False and payload["resolution"]["n_tests"] == 2
    assert LEFT_OUT not in with_energy.files["markdown"].read_text()


def test_energy_off_alone_names_the_tested_metrics(tmp_path):
    f = make_frame(SPEC, n=20, seed=72)
    rep = hypothesis_report(_result(f, report={"energy": False}), tmp_path / "r", **FAST)
    comp = rep.comparisons
    assert "energy" not in set(comp["test"])
    metrics = list(dict.fromkeys(comp["metric"]))
    line = _line(rep.files["markdown"].read_text(), "- Family (the [report] option energy = false)")
    assert f"the tests of {', '.join(metrics)} only, {comp.attrs['n_tests']} p-values" in line
    assert LEFT_OUT in line and "the other metrics keep" not in line   # no metric left out


def test_unset_energy_changes_nothing(tmp_path):
    f = make_frame(SPEC, n=20, seed=73)
    unset = hypothesis_report(_result(f), tmp_path / "unset", **FAST)
    on = hypothesis_report(_result(f), tmp_path / "on", energy=True, **FAST)
    for name in ("summary", "comparisons", "crossovers", "theory", "markdown"):
        assert unset.files[name].read_bytes() == on.files[name].read_bytes(), name
    md = unset.files["markdown"].read_text()
    assert "energy" in set(unset.comparisons["test"]) and "energy = false" not in md
    assert "- Family (the [report] option" not in md   # as before: no family line by default


def test_family_text_with_the_metrics_option_is_unchanged():
    import pandas as pd

    comp = pd.DataFrame({"test": ["sign", "energy"], "metric": ["kl", "profile_6d"],
                         "resolvable": [True, True], "significant": [False, False],
                         "pvalue": [0.5, 0.5]})
    comp.attrs.update(n_tests=2, alpha=0.05, correction="holm")
    assert _family_text(comp, ("kl",)).startswith(
        "Family (the [report] option metrics): the tests of kl and the 6D energy tests, 2 p-values; "
        "the other metrics keep their summaries and figures, without tests. Choose this set")


TOML = tiny_toml(seed=6, n_trials=10, energy_resamples=19, bootstrap_resamples=49,
                 report_extra='figures = false\nmetrics = ["kl"]\n{energy}')


def _tests(folder):
    payload = json.loads((folder / "report.json").read_text())
    return payload["options"]["energy"], sorted({r["test"] for r in payload["comparisons"]})


def test_toml_table_and_command_flag(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TOML.format(energy='energy = "no"\n'))
    with pytest.raises(TypeError, match="'energy' must be true or false"):
        SweepConfig.from_toml(bad)          # at load, before any compute
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TOML.format(energy="energy = false\n"))
    out = tmp_path / "sweep"
    assert main(["sweep", "--config", str(cfg), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    assert _tests(out) == (False, ["sign"])            # the config's [report] energy
    # a config with the energy tests, and the flag that leaves them out
    cfg.write_text(TOML.format(energy=""))
    out = tmp_path / "sweep_e"
    assert main(["sweep", "--config", str(cfg), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--no-progress"]) == 0
    assert _tests(tmp_path / "rep") == (True, ["energy", "sign"])
    assert main(["report", str(out), "--out", str(tmp_path / "rep_p"), "--no-energy",
                 "--no-progress"]) == 0
    assert _tests(tmp_path / "rep_p") == (False, ["sign"])
    capsys.readouterr()


def test_energy_off_with_nothing_compared_writes_no_family_line(tmp_path):
    # no pair compared: no test, so no "tests of  only, 0 p-values" line
    f = make_frame(SPEC, n=10, seed=73)
    rep = hypothesis_report(_result(f), tmp_path / "r", energy=False, comparisons=[], **FAST)
    assert rep.comparisons.empty
    assert "- Family (the [report]" not in rep.files["markdown"].read_text()
