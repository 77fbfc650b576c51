"""The kvstats command after the CLI referee of round 20: a bug while computing is a
traceback (exit 1), SIGTERM runs the Ctrl-C path (exit 143), an interrupted report says
only the report was, progress bars only on a terminal, the help's allowed values, a
refused no-op flag pair, the top-level did-you-mean and `kvstats report`'s crossover lines."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvstats.cli import main

from _tiny_sweep import tiny_toml

ROOT = Path(__file__).resolve().parents[1]

# a plugin whose scheme builds (the grid's check passes) and fails computing: a bug
BROKEN_PLUGIN = textwrap.dedent('''
    from kvstats.quant.register import define_scheme, register_scheme
    from kvstats.quant.uniform import UniformTokenCoder

    class Broken(UniformTokenCoder):
        def roundtrip(self, x):
            return len(5)

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, Broken(bits, dim, dim), Broken(bits, dim, dim)

    def stored(bits, dim, n_tokens, params):
        return n_tokens * (bits * dim + 32), n_tokens * (bits * dim + 32)

    register_scheme(define_scheme("broken_rt", build, stored, summary="fails computing"))
''')


def _kvstats(args, cwd, **kwargs):
    return subprocess.run([sys.executable, "-m", "kvstats.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, **kwargs,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})


def test_a_bug_while_computing_a_cell_is_a_traceback_and_exit_1(tmp_path):
    """A plugin's `len(5)` (a TypeError) while a cell was computed printed one line, exit 2,
    as bad input does, naming no file or line. Now the traceback, with the plugin's file
    and line, the cell and the kept-cells note; exit 1. A bad config stays one line, exit 2."""
    (tmp_path / "broken_plug.py").write_text(BROKEN_PLUGIN)
    config = tmp_path / "c.toml"
    config.write_text(tiny_toml().replace("[sweep]", '[sweep]\nplugins = ["broken_plug.py"]')
                      .replace('name = "QKQV"', 'name = "broken_rt"')
                      .replace('["KQV", "QKQV"]', '["KQV", "broken_rt"]'))
    proc = _kvstats(["sweep", "--config", "c.toml", "--out", "o", "--workers", "1"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" in proc.stderr and "broken_plug.py\", line 7, in roundtrip" in proc.stderr
    assert "[cell: 'broken_rt'" in proc.stderr and "cells finished, kept in" in proc.stderr
    # input errors: one line, exit 2 (a budget the checks refuse, before any compute)
    config.write_text(config.read_text().replace("budgets = [2, 3]", "budgets = [0]"))
    proc = _kvstats(["sweep", "--config", "c.toml", "--out", "o2", "--workers", "1"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr


def _group(pgid):
    """The live processes of the process group ``pgid`` (from /proc)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:   # ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(pid))
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table in /proc")
def test_sigterm_during_a_sweep_stops_its_pool_and_exits_143(tmp_path):
    """`kill PID` (or `timeout`, a scheduler's limit) killed the main process alone: the
    forkserver, resource tracker and workers stayed behind, and nothing was said. Now the
    Ctrl-C path runs (the workers get the TERM too, as Ctrl-C reaches them from a terminal):
    the pool is shut down, the kept cells are counted, exit 143. Run many times: the pool's
    shutdown hung now and then on a worker it was starting when the TERM came."""
    import signal
    import time

    (tmp_path / "c.toml").write_text(tiny_toml(budgets=(2, 3, 4), n_trials=4000).replace(
        "dims = [16]", "dims = [64]\nchunk_size = 20"))
    with open(tmp_path / "err", "w") as err:   # a file: a pipe would wait for any orphan too
        proc = subprocess.Popen([sys.executable, "-m", "kvstats.cli", "sweep", "--config", "c.toml",
                                 "--out", "o", "--workers", "2", "--no-report"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 40
        # the main process, the forkserver, the resource tracker and a worker at least
        while len(_group(proc.pid)) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, (tmp_path / "err").read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 143, (tmp_path / "err").read_text()
        gone = time.monotonic() + 10
        while _group(proc.pid) and time.monotonic() < gone:   # they end as it exits
            time.sleep(0.1)
        assert _group(proc.pid) == []
    finally:
        if _group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = (tmp_path / "err").read_text()
    assert "kvstats sweep: terminated; " in text and ("cells finished, kept in o/cells" in text
                                                      or "no cell of 6 had finished" in text), text


def _help(capsys, *command):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_report_no_figures_help_says_the_earlier_figures_go(capsys):
    """`kvstats report DIR --no-figures` empties DIR/figures (one folder holds one report);
    the help said only "skip the figures"."""
    assert ("skip the figures; the report's folder loses its earlier figures (one folder holds "
            "one report: --out OTHER keeps DIR's)") in _help(capsys, "report")


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_toml())
    return path


def test_an_interrupted_report_of_a_sweep_says_only_the_report_was(tiny_config, tmp_path,
                                                                   monkeypatch, capsys):
    """Ctrl-C in `kvstats sweep`'s report phase said to rerun with --resume, though every
    cell and the results were written: now it says to run `kvstats report DIR`. The bar
    the interrupt left open (the energy tests') is closed first, so the line is its own."""
    import kvstats.report
    from tqdm import tqdm

    def interrupted(result, out, **kwargs):
        bar = tqdm(total=4, desc="energy tests", file=sys.stderr)
        bar.update()
        raise KeyboardInterrupt   # the bar left open, as an interrupted loop leaves it

    monkeypatch.setattr(kvstats.report, "hypothesis_report", interrupted)
    out = tmp_path / "my out"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-figures"]) == 130
    assert (out / "manifest.json").is_file()
    err = capsys.readouterr().err
    assert err.endswith(f"\nkvstats sweep: interrupted; the sweep finished (its results are in {out}); "
                        f"only its report was interrupted: `kvstats report '{out}' --no-figures` "
                        "writes it\n"), err


def test_an_interrupted_sweep_says_it_in_the_commands_words(tiny_config, tmp_path, monkeypatch, capsys):
    """Ctrl-C before any cell finished said "0 of 4 cells finished, kept in ...: rerun with
    resume (kvstats sweep --resume; run_sweep's default) to compute only the other 4", the
    Python API's words; now the command's."""
    import kvstats.sweep.run as run

    def interrupted(task, emit=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "_compute_task", interrupted)
    assert main(["sweep", "--config", str(tiny_config), "--out", str(tmp_path / "o"), "--workers", "1",
                 "--no-progress"]) == 130
    assert capsys.readouterr().err == ("kvstats sweep: interrupted; no cell of 4 had finished: "
                                       "rerun the same command\n")


class _Terminal:
    """A stderr that says it is a terminal, and keeps what is written."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return True


def test_progress_bars_only_on_a_terminal(tiny_config, tmp_path, monkeypatch, capsys):
    """With stderr a file (`2> log`, nohup, CI) the bars' redraws filled it; now they are
    drawn only on a terminal, and --no-progress still turns them off there."""
    args = ["sweep", "--config", str(tiny_config), "--workers", "1", "--no-report"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "trials" not in capsys.readouterr().err
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert "sweep: 100%" in terminal.text and "48/48 trials, 4/4 cells" in terminal.text
    terminal.text = ""
    assert main([*args, "--out", str(tmp_path / "c"), "--no-progress"]) == 0
    assert terminal.text == ""
    assert "shown only when stderr is a terminal" in _help(capsys, "sweep")
    assert "shown only when stderr is a terminal" in _help(capsys, "report")


def test_report_help_lists_the_allowed_values_its_errors_list(capsys):
    """The help of --alpha, --metrics, --energy-resamples and --bootstrap-resamples did not
    say what the flags' checks accept; each now states the [report] option's own range, and
    --metrics the names (written out in the numpy-free parser: they must be the options')."""
    from kvstats.cli_parser import _FAMILY_METRICS
    from kvstats.report.options import FAMILY_METRICS, REPORT_OPTIONS

    assert _FAMILY_METRICS == FAMILY_METRICS
    allowed = {opt.name: opt.allowed for opt in REPORT_OPTIONS}
    assert allowed["alpha"] == "a float in (0, 1)" and allowed["energy_resamples"] == "an int >= 1"
    assert allowed["bootstrap_resamples"].startswith("an int >= 40 (2/(1 − confidence) above 0.95")
    text = _help(capsys, "report")
    assert "--alpha ALPHA significance level after adjustment, a float in (0, 1)" in text
    assert "energy test, not a count (an int >= 1)" in text
    assert "per confidence interval, an int >= 40 (and >= 2/(1 − confidence) above confidence 0.95)" in text
    assert f"(names: {', '.join(FAMILY_METRICS)})" in text


def test_sweep_refuses_no_figures_with_no_report(tiny_config, tmp_path, capsys):
    """`sweep --no-report --no-figures` was accepted, --no-figures doing nothing: now one
    line naming both flags, exit 2, before the folder is touched."""
    out = tmp_path / "o"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--no-report",
                 "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstats sweep: error: --no-figures with --no-report: no report is "
                          "written") and err.count("\n") == 1, err
    assert not out.exists()
    assert "without figures (refused with --no-report)" in _help(capsys, "sweep")


@pytest.mark.parametrize("argv, said", [
    (["--versoin"], "unrecognized arguments: --versoin (did you mean --version?)"),
    (["--versoin", "theory", "--dim", "64"], "unrecognized arguments: --versoin (did you mean --version?)"),
    (["-x"], "unrecognized arguments: -x (kvstats's options: --help, --version)"),
    (["theroy", "--dim", "64"], "argument COMMAND: invalid choice: 'theroy' (did you mean theory? "
                                "the commands: sweep, report, schemes, theory)"),
])
def test_the_top_level_parser_names_the_nearest_option_or_command(argv, said, capsys):
    """`kvstats --versoin` said "the following arguments are required: COMMAND", naming no
    typo; the commands' parsers answered "did you mean". Now the top level does too."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"kvstats: error: {said}"


def test_report_prints_the_crossover_lines_sweep_prints(tiny_config, tmp_path, monkeypatch, capsys):
    """`kvstats sweep` ends with the report's crossover sentences; `kvstats report` of the
    same sweep left them out. Both print them now, after the report's line."""
    import kvstats.analysis.crossover as crossover

    seen = []

    def sentences(crossovers, summary):
        seen.append(len(summary))
        return ["CROSSOVER in kl: KQV at 2; QKQV at 3."]

    monkeypatch.setattr(crossover, "crossover_sentences", sentences)
    out = tmp_path / "o"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-report"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--no-figures"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("report: ") and lines[-1] == "  CROSSOVER in kl: KQV at 2; QKQV at 3."
    assert seen and seen[0] > 0   # given the report's summary table
