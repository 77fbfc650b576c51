"""``kvstats report DIR --equivalence METRIC=DELTA`` (repeatable, ``none`` drops the config's
margins) and ``--equivalence-test``: the [report] options equivalence and equivalence_test
from the command line, checked before loading, each error one line naming the flag."""

import json

import pytest

from kvstats.cli import main

from _tiny_sweep import tiny_toml


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A finished tiny sweep whose config gives kl an equivalence margin."""
    tmp = tmp_path_factory.mktemp("eq")
    config = tmp / "c.toml"
    config.write_text(tiny_toml(budgets=(2,), energy_resamples=19, bootstrap_resamples=49,
                                report_extra="equivalence = {kl = 0.1}"))
    out = tmp / "sweep"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    return out


def _report(sweep, out, *flags):
    return main(["report", str(sweep), "--out", str(out), "--no-figures", "--no-progress",
                 "--no-energy", *flags])


def _options(out):
    return json.loads((out / "report.json").read_text())["options"]


def test_margins_from_the_command_line_replace_the_configs(sweep, tmp_path):
    assert _report(sweep, tmp_path / "a", "--equivalence", "kl=0.3", "--equivalence",
                   "recall_at_5=0.05") == 0
    assert _options(tmp_path / "a")["equivalence"] == {"kl": 0.3, "recall_at_5": 0.05}
    assert _report(sweep, tmp_path / "b") == 0   # without the flag: the config's
    assert _options(tmp_path / "b")["equivalence"] == {"kl": 0.1}
    assert _report(sweep, tmp_path / "c", "--equivalence", "none") == 0
    assert _options(tmp_path / "c")["equivalence"] == {}


def test_the_equivalence_test_flag_sets_the_option(sweep, tmp_path):
    assert _report(sweep, tmp_path / "r", "--equivalence-test", "rank", "--equivalence",
                   "snr_k=0.1") == 0
    opts = _options(tmp_path / "r")
    assert opts["equivalence_test"] == "rank" and opts["equivalence"] == {"snr_k": 0.1}


def test_metrics_leaving_out_a_configs_margin_can_drop_it(sweep, tmp_path, capsys):
    assert _report(sweep, tmp_path / "m", "--metrics", "snr_t") == 2
    assert capsys.readouterr().err.rstrip().endswith(
        "keep them: --metrics snr_t kl, or drop the margins: --equivalence none")
    assert _report(sweep, tmp_path / "m", "--metrics", "snr_t", "--equivalence", "none") == 0
    assert _options(tmp_path / "m")["equivalence"] == {}


@pytest.mark.parametrize("flags, says", [
    (["--equivalence", "kl"], "--equivalence takes METRIC=DELTA, e.g. --equivalence kl=0.2"),
    (["--equivalence", "kl=big"], "received 'kl=big'"),
    (["--equivalence", "kll=0.2"], "--equivalence: report option 'equivalence' has unknown metric "
                                   "'kll' (did you mean 'kl'?)"),
    (["--equivalence", "kl=-1"], "must be a finite margin > 0; received -1.0"),
    (["--equivalence", "kl=0.1", "--equivalence", "kl=0.2"], "gives kl two margins"),
    (["--equivalence", "none", "--equivalence", "kl=0.2"], "none drops every margin: give it alone"),
    (["--equivalence-test", "ranks"], "--equivalence-test must be one of 'ratio', 'rank' (the "
                                      "[report] option equivalence_test); received 'ranks' (did "
                                      "you mean 'rank'?)"),
    (["--metrics", "kl", "--equivalence", "snr_t=0.1", "--equivalence-test", "rank"],
     "--equivalence gives snr_t a margin, but the family leaves it out (--metrics kl); add it: "
     "--metrics kl snr_t"),
    # the two options together (a dB metric needs the rank test; a rank margin is below 0.5)
    (["--equivalence", "snr_t=0.1"], "--equivalence: report option 'equivalence.snr_t'"),
    (["--equivalence", "kl=0.7", "--equivalence-test", "rank"],
     "--equivalence and --equivalence-test: report option 'equivalence.kl' must be a margin in "
     "(0, 0.5)"),
])
def test_a_bad_flag_is_one_line_naming_it(sweep, tmp_path, capsys, flags, says):
    assert _report(sweep, tmp_path / "bad", *flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kvstats report: error: ") and says in err, err
    assert not (tmp_path / "bad").exists()   # refused before anything is written
