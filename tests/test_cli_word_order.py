"""The ``kvstats`` command where a user's words come in another order or with a slip: a
list flag before the positional (``kvstats report --metrics kl DIR``), a mistyped option,
a stray word, a repeated bit width, a folder given as a plugin. Each works, or exits 2
with one line in the command's name that says what it received and how to write it."""

import json
import re
import subprocess
import sys

import pytest

from kvstats.cli import main
from kvstats.cli_parser import build_parser

from _tiny_sweep import tiny_toml

TINY_TOML = tiny_toml(budgets=(2,), energy_resamples=19, bootstrap_resamples=49)


def _error(argv, capsys) -> str:
    """The one error line of ``kvstats argv`` (exit status 2, argparse's or kvstats')."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A finished sweep (no report), for the report commands."""
    tmp = tmp_path_factory.mktemp("word_order")
    config = tmp / "tiny.toml"
    config.write_text(TINY_TOML)
    out = tmp / "sweep"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    return out


@pytest.mark.parametrize("argv", [
    ["--metrics", "kl", "snr_t", "{dir}"],               # the list flag first, DIR last
    ["{dir}", "--metrics", "kl", "snr_t"],                # DIR first, as the usage writes it
    ["--metrics", "kl", "snr_t", "--", "{dir}"],          # -- ends the list
])
def test_report_dir_before_or_after_the_metrics_list(argv, sweep_dir, tmp_path, capsys):
    out = tmp_path / "report"
    argv = [str(sweep_dir) if word == "{dir}" else word for word in argv]
    assert main(["report", "--out", str(out), "--no-figures", "--no-progress", *argv]) == 0
    capsys.readouterr()
    # the family is the two metrics asked for (and the 6D energy tests), not DIR
    tests = json.loads((out / "report.json").read_text())["comparisons"]
    assert {row["metric"] for row in tests} == {"kl", "snr_t", "profile_6d"}


def test_report_metrics_then_dir_parses_to_the_same_namespace(tmp_path):
    parser = build_parser()
    flag_first = parser.parse_args(["report", "--metrics", "kl", "snr_t", str(tmp_path)])
    dir_first = parser.parse_args(["report", str(tmp_path), "--metrics", "kl", "snr_t"])
    assert vars(flag_first) == vars(dir_first)


def test_report_without_dir_says_what_the_list_took_and_how_to_write_it(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "only_dir").mkdir()
    line = _error(["report", "--metrics", "kl", "results/quikc"], capsys)
    assert line.startswith("kvstats report: error: the following arguments are required: DIR")
    assert "kl results/quikc, the last no existing folder" in line
    assert "`kvstats report DIR --metrics kl snr_t`" in line and "-- DIR" in line
    # the folder alone: not taken as DIR, which would leave --metrics empty
    line = _error(["report", "--metrics", "only_dir"], capsys)
    assert "only the folder only_dir, which leaves it no METRIC" in line
    # no list: argparse's message, with nothing about --metrics
    assert _error(["report", "--no-figures"], capsys).endswith(
        "the following arguments are required: DIR")


def test_usage_shows_the_required_positional_and_options_unbracketed(capsys):
    for command, shown in (("report", " DIR\n"), ("theory", " --dim D [--bits"),
                           ("sweep", " --config FILE --out DIR [")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        usage = capsys.readouterr().out.split("\n\n")[0]
        assert shown in usage + "\n" and not re.search(r"\[(DIR|--dim D|--config FILE|--out DIR)\]", usage)


@pytest.mark.parametrize("argv, expected", [
    (["report", "d", "--metircs", "kl"],
     "kvstats report: error: unrecognized arguments: --metircs kl (did you mean --metrics?)"),
    # a prefix of an option is not the option: a script's command line keeps its meaning
    # when a later option shares the prefix
    (["report", "d", "--metric", "kl"],
     "kvstats report: error: unrecognized arguments: --metric kl (did you mean --metrics?)"),
    (["sweep", "--config", "c.toml", "--out", "o", "--res"],
     "kvstats sweep: error: unrecognized arguments: --res (did you mean --resume?)"),
    (["sweep", "--config", "c.toml", "--out", "o", "--resmue"],
     "kvstats sweep: error: unrecognized arguments: --resmue (did you mean --resume?)"),
    (["report", "a", "b"],
     "kvstats report: error: unrecognized arguments: b (kvstats report takes one DIR; the rest "
     "are options)"),
    (["theory", "64"],
     "kvstats theory: error: the following arguments are required: --dim (did you mean --dim 64?)"),
    (["theory", "--dim", "64", "128"],
     "kvstats theory: error: unrecognized arguments: 128 (kvstats theory takes only options: "
     "--help, --dim, --bits)"),
    (["sweep", "my.toml", "--out", "o"],
     "kvstats sweep: error: the following arguments are required: --config (did you mean "
     "--config my.toml?)"),
    (["sweep", "--config", "c.toml"],
     "kvstats sweep: error: the following arguments are required: --out"),
    (["theory", "--dim", "64", "-b", "3"],
     "kvstats theory: error: unrecognized arguments: -b 3 (kvstats theory's options: --help, "
     "--dim, --bits)"),
    (["report", "--metrics", "kl", "--", "d", "--no-figures"],
     "kvstats report: error: unrecognized arguments: --no-figures (after --, no word is an "
     "option: write the options before it)"),
    (["theory", "--bits", "2", "3", "128"],
     "kvstats theory: error: the following arguments are required: --dim (--bits took every "
     "number after it, 2 3 128; the head dimension is the option --dim: `kvstats theory --dim "
     "128 --bits 2 3`)"),
])
def test_a_slip_is_one_line_in_the_commands_name(argv, expected, capsys):
    assert _error(argv, capsys) == expected


def test_theory_refuses_a_repeated_bit_width(capsys):
    assert _error(["theory", "--dim", "64", "--bits", "2", "--bits", "3", "2"], capsys) == (
        "kvstats theory: error: --bits must not repeat values; received [2, 3, 2]")


def test_schemes_plugins_folder_is_named_a_folder(tmp_path, capsys):
    line = _error(["schemes", "--plugins", str(tmp_path)], capsys)
    assert line == (f"kvstats schemes: error: --plugins {str(tmp_path)!r} is a folder; a plugin "
                    "is a Python file (my_schemes.py) or an importable module name")


def test_the_new_argument_errors_import_no_numpy():
    # as test_cli_startup's argparse steps: a usage error costs no numeric import
    probe = ("import contextlib, io, sys\nfrom kvstats.cli import main\n"
             "for argv in (['report', '--metrics', 'kl'], ['theory', '--bits', '2', '128'], "
             "['report', 'd', '--metircs']):\n"
             "    with contextlib.redirect_stderr(io.StringIO()):\n"
             "        try: main(argv)\n"
             "        except SystemExit: pass\n"
             "print('numpy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


def test_a_repeated_metrics_flag_adds_to_the_list(tmp_path, capsys):
    # as --bits: `--metrics kl --metrics snr_t` is both (a store action kept only snr_t)
    args = build_parser().parse_args(["report", "d", "--metrics", "kl", "--metrics", "snr_t"])
    assert args.metrics == ["kl", "snr_t"]
    line = _error(["report", str(tmp_path), "--metrics", "kl", "--metrics", "kl"], capsys)
    assert line.startswith("kvstats report: error: --metrics must be ") and "['kl', 'kl']" in line


def test_comma_separated_metrics_are_shown_as_separate_words(tmp_path, capsys):
    line = _error(["report", str(tmp_path), "--metrics=kl,snr_t"], capsys)
    assert line.endswith("received ['kl,snr_t'] (the names are separate words: --metrics kl snr_t)")


def test_metrics_that_leave_out_a_configured_margin_say_what_to_type(tmp_path, capsys):
    # the config's margins are in the sweep's manifest, not the command line's to drop
    config = tmp_path / "eq.toml"
    config.write_text(TINY_TOML.replace("[report]", "[report]\nequivalence = {kl = 0.1}"))
    out = tmp_path / "sweep"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    line = _error(["report", str(out), "--metrics", "snr_t", "--no-figures"], capsys)
    assert line == ("kvstats report: error: --metrics snr_t leaves out kl, which the sweep's "
                    "config gives an equivalence margin ([report] equivalence = {'kl': 0.1}, in "
                    f"{out / 'manifest.json'}); keep them: --metrics snr_t kl, or drop the "
                    "margins: --equivalence none")
    assert main(["report", str(out), "--metrics", "snr_t", "kl", "--no-figures",
                 "--no-progress"]) == 0
