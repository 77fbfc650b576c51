"""The kvstats command, in-process and as a subprocess, on a tiny config."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvstats.cli import PIPE_CLOSED, build_parser, main

from _tiny_sweep import tiny_toml

ROOT = Path(__file__).resolve().parents[1]

TINY_TOML = tiny_toml()


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_TOML)
    return path


def test_help_describes_every_option(capsys):
    parser = build_parser()
    for sub in ("sweep", "report", "schemes", "theory"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([sub, "--help"])
        assert exc.value.code == 0
        text = capsys.readouterr().out
        actions = parser._subparsers._group_actions[0].choices[sub]._actions
        for action in actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{sub} {action.option_strings} has no help"
                assert action.option_strings[-1] in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = capsys.readouterr().out
    assert "KQV" in text and "heavy_tailed" in text  # choices come from the registries


def test_usage_synopsis_names_every_flag():
    # docs/usage.md "The command": each command's line(s) name all its flags, and no other
    text = (ROOT / "docs" / "usage.md").read_text()
    synopsis = text.split("## The command\n\n", 1)[1].split("\n\n", 1)[0]
    documented: dict[str, set[str]] = {}
    for block in re.split(r"^    kvstats ", synopsis, flags=re.M)[1:]:
        name = block.split()[0]
        flags = set(re.findall(r"--[a-z][a-z-]*", re.sub(r"#.*", "", block)))  # not comments
        # `kvstats --help`, `kvstats --version`: the top-level flags
        documented.setdefault("" if name.startswith("--") else name, set()).update(flags)
    parser = build_parser()

    def flags(p):
        return {s for a in p._actions for s in a.option_strings if s.startswith("--")}
    expected = {name: flags(sub) for name, sub in parser._subparsers._group_actions[0].choices.items()}
    expected[""] = flags(parser)
    assert {k: v - {"--help"} for k, v in documented.items()} == {
        k: v - {"--help"} for k, v in expected.items()}


def test_version(capsys):
    import kvstats

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"kvstats {kvstats.__version__}\n"


def test_theory_bits_repeated_and_default(capsys):
    def budgets(argv):
        assert main(["theory", "--dim", "64", *argv]) == 0
        return [int(line.split()[0]) for line in capsys.readouterr().out.splitlines()
                if re.match(r"\s*\d+ ", line)]
    # a repeated --bits kept only its last list
    assert budgets(["--bits", "2", "--bits", "3", "4"]) == [2, 3, 4]
    assert budgets([]) == [2, 3, 4, 5, 6]
    assert budgets(["--bits", "7"]) == [7]


def test_theory_prints_closed_forms(capsys):
    assert main(["theory", "--dim", "128", "--bits", "1", "4"]) == 0
    out = capsys.readouterr().out
    assert "d_pad = 128" in out and "2π" in out
    row = [line for line in out.splitlines() if line.strip().startswith("4 ")][0].split()
    # N(0,1) Lloyd–Max MSE at 4 bits: 0.009497 (Max 1960; exact 0.0095010, his entry low by 4e-4)
    assert float(row[3]) == pytest.approx(0.009497, rel=1e-3)
    # d_pad·D_4 of the sphere-coordinate density at d=128 is within 2% of the Gaussian value
    assert float(row[2]) == pytest.approx(0.009497, rel=0.02)
    assert main(["theory", "--dim", "96"]) == 0
    assert "d_pad = 128" in capsys.readouterr().out


def test_sweep_and_report_in_process(tmp_path, tiny_config, capsys):
    out = tmp_path / "out"
    code = main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-figures"])
    assert code == 0
    for name in ("manifest.json", "report.md", "report.html", "report.json", "tables/comparisons.csv"):
        assert (out / name).is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_computed"] == 4
    # resume: nothing recomputed
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report", "--resume"]) == 0
    assert json.loads((out / "manifest.json").read_text())["n_computed"] == 0
    # the summary line says the cells were resumed (after their check), not just "0 computed"
    assert "sweep: 4 cells (0 computed, 4 resumed, checked)" in capsys.readouterr().out
    # the report alone, into another directory, with BH
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--correction", "fdr_bh",
                 "--no-figures"]) == 0
    assert "fdr_bh" in (tmp_path / "rep" / "report.md").read_text()


def test_report_into_another_sweeps_folder_is_refused(tmp_path, tiny_config, capsys):
    """`kvstats report A --out B`, B holding sweep B, wrote A's report beside B's results (a
    folder of two sweeps, each file believable); refused before B is touched. A copy of A
    is the same sweep: its report may go there."""
    import shutil

    def sweep(name, seed):
        config = tmp_path / f"{name}.toml"
        config.write_text(TINY_TOML.replace("seed = 3", f"seed = {seed}"))
        assert main(["sweep", "--config", str(config), "--out", str(tmp_path / name), "--workers", "1",
                     "--no-progress", "--no-report"]) == 0

    sweep("a", 3)
    sweep("b", 4)
    before = sorted(p.name for p in (tmp_path / "b").iterdir())
    capsys.readouterr()
    assert main(["report", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--no-figures",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvstats report: error: output folder {str(tmp_path / 'b')!r} holds "
                          "another sweep")
    assert f"; {str(tmp_path / 'a')!r} is run " in err and "the sweep's own folder" in err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == before   # no report, no lock
    shutil.copytree(tmp_path / "a", tmp_path / "a_copy")
    assert main(["report", str(tmp_path / "a"), "--out", str(tmp_path / "a_copy"), "--no-figures",
                 "--no-progress"]) == 0
    assert (tmp_path / "a_copy" / "report.md").is_file()


def test_report_pairing_flag_end_to_end(tmp_path, tiny_config, capsys):
    """kvstats report --pairing trial on a small sweep: the paired tests, said in the report."""
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    # without the flag: the default design, paired on the shared trials
    assert main(["report", str(out), "--out", str(tmp_path / "paired"),
                 "--no-figures", "--no-progress"]) == 0
    payload = json.loads((tmp_path / "paired" / "report.json").read_text())
    assert payload["options"]["pairing"] == "trial"
    assert {r["test"] for r in payload["comparisons"]} == {"sign", "energy"}
    assert {r["n_a"] for r in payload["comparisons"]} == {12}          # 12 trial pairs
    md = (tmp_path / "paired" / "report.md").read_text()
    assert "Design: **paired** (pairing = \"trial\")" in md and "No KS test" in md
    # --pairing none: the two-sample tests
    assert main(["report", str(out), "--out", str(tmp_path / "none"), "--pairing", "none",
                 "--no-figures", "--no-progress"]) == 0
    payload = json.loads((tmp_path / "none" / "report.json").read_text())
    assert payload["options"]["pairing"] == "none"
    assert {r["test"] for r in payload["comparisons"]} == {"mann_whitney", "ks", "energy"}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["report", str(out), "--pairing", "paired"])
    assert exc.value.code == 2 and "invalid choice: 'paired'" in capsys.readouterr().err


def test_bad_input_exits_with_a_message(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[schemes]]\nname = "KVQ"\n[[distributions]]\nname = "gaussian"\n')
    assert main(["sweep", "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "scheme name must be one of" in err and "KVQ" in err
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "nothing' does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["theory"])  # --dim is required
    # the flag's name, not the Python argument's, and before the config is read
    assert main(["sweep", "--config", str(tmp_path / "absent.toml"), "--out", str(tmp_path / "o"),
                 "--workers", "0"]) == 2
    assert "error: --workers must be an integer in [1, inf]; received 0" in capsys.readouterr().err
    assert main(["theory", "--dim", "2"]) == 2
    assert "error: --dim must be an integer in [3, 65536]; received 2" in capsys.readouterr().err
    assert main(["theory", "--dim", "64", "--bits", "9"]) == 2
    assert "error: --bits must be an integer in [1, 8]; received 9" in capsys.readouterr().err
    # --correction takes every correction the [report] table takes
    from kvstats.report.options import CORRECTIONS as _CORRECTIONS

    assert set(_CORRECTIONS) >= {"holm", "fdr_bh", "bonferroni", "hommel"}
    for name in _CORRECTIONS:
        assert build_parser().parse_args(["report", "d", "--correction", name]).correction == name


def test_the_grid_is_checked_once_before_the_folder_is_touched(tmp_path, tiny_config, capsys,
                                                               monkeypatch):
    """`kvstats sweep` checks every distribution and scheme of the grid once (it checked
    them, then run_sweep checked them again), before it creates or locks the folder, and
    a grid that fails says what run_sweep says."""
    from kvstats.sweep import run, run_sweep

    checks = []
    real = run._preflight
    monkeypatch.setattr(run, "_preflight", lambda *args: (checks.append(args), real(*args))[1])
    assert main(["sweep", "--config", str(tiny_config), "--out", str(tmp_path / "out"),
                 "--workers", "1", "--no-progress", "--no-report"]) == 0
    assert len(checks) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY_TOML.replace('name = "gaussian"', 'name = "low_rank"\nparams = {rank = 40}'))
    with pytest.raises(ValueError) as info:
        run_sweep(bad, progress=False)
    capsys.readouterr()
    assert main(["sweep", "--config", str(bad), "--out", str(tmp_path / "new")]) == 2
    assert capsys.readouterr().err == f"kvstats sweep: error: {info.value}\n"
    assert "rank must be an integer in [1, 16]; received 40" in str(info.value)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("margin", ["inf", "nan", "0.0", "-0.1"])
def test_sweep_refuses_a_margin_the_tests_refuse_before_it_computes(tmp_path, margin, capsys):
    # an infinite equivalence margin passed the config check, then every TOST refused it
    # after the sweep had run ("margin must be a finite real number")
    config = tmp_path / "c.toml"
    config.write_text(TINY_TOML + f"equivalence = {{kl = {margin}}}\n")
    out = tmp_path / "o"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "report option 'equivalence.kl' must be a finite margin > 0; received" in err
    assert not out.exists()


def test_a_locked_folder_is_one_line_and_exit_2(tmp_path, tiny_config, capsys, monkeypatch):
    # main() catches SweepLockedError without importing the sweep up front (kvstats._cli_output.raised)
    from kvstats.sweep import store

    def locked(*args, **kwargs):
        raise store.SweepLockedError("output folder 'o' is in use by another sweep (pid 1)")

    monkeypatch.setattr(store, "lock_dir", locked)
    assert main(["sweep", "--config", str(tiny_config), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 2
    assert capsys.readouterr().err == ("kvstats sweep: error: output folder 'o' is in use by "
                                       "another sweep (pid 1)\n")


def test_report_of_a_parquet_sweep_without_pyarrow_says_to_install_it(tmp_path, capsys,
                                                                      monkeypatch):
    # it said "table ... cannot be read (truncated or not a table?): ModuleNotFoundError"
    out = tmp_path / "sweep"
    out.mkdir()
    config = {"schemes": ["KQV"], "distributions": ["gaussian"], "dims": [16], "n_keys": [8]}
    (out / "manifest.json").write_text(json.dumps({"config": config}))
    (out / "results.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)   # as if not installed
    assert main(["report", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstats report: error: the Python package 'pyarrow' is not installed")
    assert "pip install pyarrow" in err and "truncated" not in err


def test_subprocess_module_entry_point(tmp_path, tiny_config):
    out = tmp_path / "sub"
    proc = subprocess.run([sys.executable, "-m", "kvstats.cli", "sweep", "--config", str(tiny_config),
                           "--out", str(out), "--workers", "1", "--no-progress"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "sweep: 4 cells" in proc.stdout
    assert (out / "figures" / "kl_vs_bits.png").is_file()
    helptext = subprocess.run([sys.executable, "-m", "kvstats.cli", "--help"], capture_output=True,
                              text=True, timeout=120).stdout
    assert "sweep" in helptext and "theory" in helptext


def test_os_errors_are_one_line_and_exit_2(tmp_path, tiny_config, capsys, monkeypatch):
    """--out a file, a folder under a file, cells/ not a folder, an unreadable config, a
    report into an unwritable place: one line each, exit 2, no traceback."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    args = ["--workers", "1", "--no-progress", "--no-report"]
    cases = [(["sweep", "--config", str(tiny_config), "--out", str(afile)] + args, "is a file, not a folder"),
             (["sweep", "--config", str(tiny_config), "--out", str(afile / "sub")] + args, "Not a directory")]
    blocked = tmp_path / "blocked"
    (blocked).mkdir()
    (blocked / ".kvstats.lock").write_text("")  # a sweep's folder (else refused as someone else's)
    (blocked / "cells").write_text("not a folder")
    cases.append((["sweep", "--config", str(tiny_config), "--out", str(blocked)] + args, "cells"))
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"kvstats {argv[0]}: error: ") and err.count("\n") == 1 and message in err, err
    # a report into a place that cannot be written
    out = tmp_path / "ok"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out)] + args) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(afile / "rep"), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstats report: error: cannot use ") and err.count("\n") == 1, err
    # an unreadable config (simulated: tests may run as root, who reads everything)
    import pathlib

    real_open = pathlib.Path.open

    def deny(self, *a, **kw):
        if self.name == tiny_config.name:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "open", deny)
    assert main(["sweep", "--config", str(tiny_config), "--out", str(tmp_path / "o2")] + args) == 2
    err = capsys.readouterr().err
    assert "cannot be read: Permission denied" in err and err.count("\n") == 1, err


def _experiment_scripts():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return root, sorted((root / "experiments").glob("*.py"))


def test_experiment_scripts_parse_their_arguments_with_argparse():
    """Fast, static: every experiments/ script builds an ArgumentParser (so --help works);
    the slow test below runs each with --help."""
    _, scripts = _experiment_scripts()
    assert scripts
    missing = [s.name for s in scripts if "ArgumentParser(" not in s.read_text()]
    assert not missing, f"scripts without argparse --help: {missing}"


@pytest.mark.slow
def test_experiment_scripts_have_help():
    """experiments/ scripts answer --help (exit 0, a usage line) without running. All of
    them at KVSTATS_TEST_SCALE=full (~45 s: each imports its stack first); at the default
    scale the one that once read '--help' as a sweep folder and one benchmark."""
    from kvstats._checks import replicate_scale

    root, scripts = _experiment_scripts()
    if replicate_scale() != "full":
        scripts = [s for s in scripts if s.name in ("dalberto_claims.py", "bench_quant.py")]
        assert len(scripts) == 2
    for script in scripts:
        proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                              timeout=300, cwd=root)
        assert proc.returncode == 0 and "usage:" in proc.stdout, (script.name, proc.stderr[-500:])


# ---------------------------------------------------------------- the new-user audit (session 7)
def _help(argv):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0


def test_help_names_every_scheme_and_distribution_and_schemes_says_what_each_is(capsys):
    """`kvstats --help` gives every built-in scheme a line, in the registry's order, with its
    summary (whole, or cut at a word and ending in ' …', within 100 columns), names every
    distribution and points at `kvstats schemes`, which gives each scheme's whole summary
    from the registry."""
    from kvstats.data.synthetic import DISTRIBUTIONS
    from kvstats.quant.registry import BUILTIN, REGISTRY

    _help(["--help"])
    out = capsys.readouterr().out
    epilog = out.split("\nSchemes (", 1)[1]
    assert max(map(len, epilog.splitlines())) <= 100
    rows = [line.split(None, 1) for line in epilog.split("\n\n")[0].splitlines() if line.startswith("  ")]
    assert [name for name, _ in rows] == [*BUILTIN, "K{a}V{b}"]
    room = 100 - 2 - max(map(len, BUILTIN)) - 2   # the summary column
    for (name, shown), sdef in zip(rows, BUILTIN.values()):
        if len(sdef.summary) <= room:
            assert shown == sdef.summary, name
        else:
            assert shown.endswith(" …") and sdef.summary.startswith(shown[:-2] + " "), name
    assert rows[-1][1] == "mixed precision by name, e.g. K4V2 (a, b in 1..8)"
    text = " ".join(out.split())
    assert all(f" {name}," in text for name in DISTRIBUTIONS), text
    assert "`kvstats schemes`: each in full, with its params" in text
    assert main(["schemes"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name, sdef in REGISTRY.items():
        assert f" {name} {' '.join(sdef.summary.split())}" in text, name


def test_energy_resamples_help_says_it_is_a_floor_not_a_count(tmp_path, capsys):
    """--energy-resamples B: under energy_resolution = 'family' (the default) the energy tests
    may draw up to max(B, required_resolution(family).n_permutations), B being the least cap."""
    from kvstats.stats.sequential import required_resolution

    _help(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "permutations per 6D energy test" not in text
    for words in ("the least permutation cap B_max of each 6D energy test, not a count",
                  "energy_resolution = 'family' (the default) B_max = max(B,",
                  "kvstats.stats.sequential.required_resolution", "'fixed' B_max = B",
                  "stopping at its energy_stop-th exceedance"):
        assert words in text, words
    # the claim, on a report: B = 49 and the family's resolution above it (24 trials: more
    # pairs than the exact enumeration takes, so the energy tests draw)
    out = tmp_path / "out"
    drawn_config = tmp_path / "drawn.toml"
    drawn_config.write_text(tiny_toml(n_trials=24))
    assert main(["sweep", "--config", str(drawn_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    assert main(["report", str(out), "--energy-resamples", "49", "--no-figures", "--no-progress"]) == 0
    payload = json.loads((out / "report.json").read_text())
    rows = payload["comparisons"]
    energy = [r for r in rows if r["test"] == "energy"]
    need = required_resolution(payload["resolution"]["n_tests"], 0.05, "holm").n_permutations
    assert energy and need > 49
    assert {r["max_permutations"] for r in energy} == {max(49, need)}


def _closed_pipe_run(args, *, stderr_too=False):
    """Run `python -m kvstats.cli ARGS` with stdout (and stderr) a pipe whose reader is gone."""
    read, write = os.pipe()
    os.close(read)  # closed before the child writes: every write gets EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "kvstats.cli", *args], stdout=write,
                              stderr=write if stderr_too else subprocess.PIPE, text=True, timeout=600,
                              cwd=ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1",
                                             "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)


@pytest.mark.parametrize("buffered", [False, True])
def test_a_closed_stdout_ends_quietly(buffered, monkeypatch):
    """`kvstats theory --dim 100 | head` printed "error: Broken pipe" and exited 2. Now: no
    message, exit 141 (128 + SIGPIPE, as a shell reports `seq 1000 | head`), whether stdout
    is unbuffered (PYTHONUNBUFFERED=1: each line a write) or buffered (one write at the end)."""
    if buffered:
        monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    else:
        monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    proc = _closed_pipe_run(["theory", "--dim", "100"])
    assert (proc.returncode, proc.stderr) == (PIPE_CLOSED, "")
    # stderr closed too (`2>&1 | head`): still no traceback, the same status
    proc = _closed_pipe_run(["theory", "--dim", "100"], stderr_too=True)
    assert proc.returncode == PIPE_CLOSED
    # --help: argparse ignores the closed pipe itself (exit 0); its buffered text must not
    # fail at the interpreter's exit ("Exception ignored ... BrokenPipeError", exit 120)
    proc = _closed_pipe_run(["--help"])
    assert (proc.returncode, proc.stderr) == (0, "")
    # bad input with both closed: the line is lost, the status stays the error's
    assert _closed_pipe_run(["theory", "--dim", "2"], stderr_too=True).returncode == 2


def test_a_sweep_into_closed_stdout_and_stderr_finishes_quietly(tiny_config, tmp_path):
    """Both closed (`2>&1 | head`): exit 141, no traceback, the sweep written (no progress
    bar: stderr is no terminal)."""
    out = tmp_path / "out"
    proc = _closed_pipe_run(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                             "--no-report"], stderr_too=True)
    assert proc.returncode == PIPE_CLOSED and (out / "manifest.json").is_file()


class _ClosedPipe:
    """A stdout whose reader went away."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass


def test_a_sweep_whose_stdout_closes_still_writes_its_report(tiny_config, tmp_path, monkeypatch, capsys):
    """The lines are dropped, not the work: the report is written, nothing on stderr, 141."""
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = main(["sweep", "--config", str(tiny_config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-figures"])
    assert code == PIPE_CLOSED and (out / "report.md").is_file()
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["report", str(out), "--no-figures", "--no-progress"]) == PIPE_CLOSED
    assert capsys.readouterr().err == ""
    # an error still says so (exit 2), stdout closed or not
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["theory", "--dim", "2"]) == 2
    assert "--dim must be an integer" in capsys.readouterr().err


def test_a_folder_of_someone_elses_files_is_refused(tiny_config, tmp_path, capsys):
    """`--out` a folder holding the user's files and no sweep: exit 2, one line naming the
    folder and what it holds, and nothing in it touched (no lock file either)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my notes")
    args = ["--workers", "1", "--no-progress", "--no-figures"]
    assert main(["sweep", "--config", str(tiny_config), "--out", str(mine)] + args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvstats sweep: error: output folder '{mine}' holds 1 entry (report.md) "
                          "and nothing kvstats wrote") and err.count("\n") == 1, err
    assert sorted(p.name for p in mine.iterdir()) == ["report.md"]
    assert (mine / "report.md").read_text() == "my notes"
    # the report's --out too
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out)] + args) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(mine), "--no-figures", "--no-progress"]) == 2
    assert "a report writes report.md" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["report.md"]
    # an existing sweep folder keeps working: rerun, resume, report into it
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out)] + args) == 0
    assert main(["sweep", "--config", str(tiny_config), "--out", str(out), "--resume"] + args) == 0
    assert main(["report", str(out), "--no-figures", "--no-progress"]) == 0


def test_a_warning_prints_as_one_kvstats_line(tmp_path, capsys):
    """On the command line a warning names the subcommand, not the entry script's source
    line (which means nothing to the user); the caller's warning printer is restored."""
    import warnings

    cfg = tmp_path / "c.toml"
    cfg.write_text('[sweep]\nseed = 1\nbudgets = [2]\ndims = [16]\nn_keys = [8]\nn_trials = 5\n'
                   '[[schemes]]\nname = "KQV"\n[[schemes]]\nname = "K4V2"\n'
                   '[[distributions]]\nname = "gaussian"\n')
    before = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["sweep", "--config", str(cfg), "--out", str(tmp_path / "out"),
                     "--no-progress", "--no-figures"]) == 0
    assert warnings.showwarning is before
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "warning" in ln.lower()]
    assert lines and lines[0].startswith("kvstats sweep: warning: no comparison: none of the default")
    assert not any("UserWarning" in ln or ".py:" in ln for ln in lines)


@pytest.mark.usefixtures("user_registries")
def test_schemes_lists_a_plugins_names_with_their_origin(tmp_path, capsys, monkeypatch):
    """`kvstats schemes --plugins FILE` imports the plugin first and names what it
    registered, with the file; a missing plugin is the usual one-line error."""
    plugin = tmp_path / "cli_plug.py"
    plugin.write_text(
        "from kvstats.data.register import register_distribution\n"
        "def draw(n_trials, n_keys, dim, rng, params):\n"
        "    return rng.standard_normal((n_trials, n_keys, dim))\n"
        "register_distribution('cli_listed', draw, {})\n")
    monkeypatch.chdir(tmp_path)
    assert main(["schemes"]) == 0
    before = capsys.readouterr().out
    assert "KQV" in before and "cli_listed" not in before
    assert main(["schemes", "--plugins", "cli_plug.py"]) == 0
    out = capsys.readouterr().out
    assert "cli_listed no params" in " ".join(out.split()).split("Distributions (")[1]
    assert f"distribution cli_listed: registered by {plugin}" in out
    assert main(["schemes", "--plugins", "missing.py"]) == 2
    assert "missing.py' does not exist" in capsys.readouterr().err


# ---- found by using kvstats as a new user (session 10): each error names what the user typed


def test_report_flags_are_named_as_typed_before_the_sweep_is_read(tmp_path, capsys):
    """`kvstats report DIR --alpha 2` names `--alpha` (not the config key 'alpha' of a
    [report] table the user never wrote), its allowed values and what it received, and
    fails before DIR is read (DIR need not even exist)."""
    missing = str(tmp_path / "no_sweep_here")
    for flag, value, allowed in [("--alpha", "2", "a float in (0, 1)"),
                                 ("--alpha", "nan", "a float in (0, 1)"),
                                 ("--energy-resamples", "0", "an int >= 1"),
                                 ("--bootstrap-resamples", "-5", "an int >= 40 (2/(1 − confidence) above 0.95)")]:
        assert main(["report", missing, flag, value]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"kvstats report: error: {flag} must be {allowed}"), err
        assert "received" in err and len(err.strip().splitlines()) == 1


@pytest.mark.usefixtures("user_registries")
def test_schemes_plugins_errors_name_the_flag_and_the_working_directory(tmp_path, capsys, monkeypatch):
    """`kvstats schemes --plugins` has no config: a missing file is resolved against the
    working directory and the error says so (it said 'config [sweep] plugins ... against the
    config file's folder'); a file that is not Python is named as such (it was imported as
    a module name, 'No module named README'); a plugin that registers nothing says so."""
    monkeypatch.chdir(tmp_path)
    assert main(["schemes", "--plugins", "absent.py"]) == 2
    err = capsys.readouterr().err
    assert "--plugins: file 'absent.py' does not exist" in err and str(tmp_path) in err
    assert "config" not in err
    (tmp_path / "notes.md").write_text("# not python\n")
    assert main(["schemes", "--plugins", "notes.md"]) == 2
    err = capsys.readouterr().err
    assert "'notes.md' is a file but not a .py file" in err and "No module named" not in err
    (tmp_path / "broken_plug.py").write_text("raise RuntimeError('boom')\n")
    assert main(["schemes", "--plugins", "broken_plug.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstats schemes: error: --plugins: importing file") and "boom" in err
    (tmp_path / "empty_plug.py").write_text("X = 1\n")
    assert main(["schemes", "--plugins", "empty_plug.py"]) == 0
    out = capsys.readouterr().out
    assert f"plugin {str(tmp_path / 'empty_plug.py')!r} registered no scheme or distribution" in out
    # a SchemeDef defined but not registered is named (plugins.plugin_summary, as a config's error does)
    (tmp_path / "unregistered_plug.py").write_text(
        "import kvstats\nS = kvstats.define_scheme('unreg_s', lambda *a: None, lambda *a: (0, 0), summary='x')\n")
    assert main(["schemes", "--plugins", "unregistered_plug.py"]) == 0
    out = capsys.readouterr().out
    assert "defines the scheme(s) 'unreg_s' (S) without registering them" in out


@pytest.mark.parametrize("command", ["sweep", "report"])
def test_an_interrupt_says_what_that_command_left(command, tiny_config, tmp_path, monkeypatch, capsys):
    """Ctrl-C: exit 130 and a line for the command interrupted. `report` has no --resume,
    which the one message for every command told the user to use."""
    import kvstats.cli as cli

    def interrupted(args, say):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.__dict__, f"_cmd_{command}", interrupted)
    argv = (["sweep", "--config", str(tiny_config), "--out", str(tmp_path / "o")]
            if command == "sweep" else ["report", str(tmp_path / "o")])
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.startswith(f"kvstats {command}: interrupted;")
    # raised before any cell ran: nothing for --resume to reuse (tests/test_cli_rm.py)
    assert "--resume" not in err


def test_a_missing_optional_package_is_one_line_with_the_install_command(tmp_path, monkeypatch, capsys):
    """A scheme whose coder needs a package the core install (`make demo`) lacks (fp8 and
    MX formats: ml_dtypes) gave a traceback; now one line naming the package, the scheme
    (the exception's note) and the pip command, exit 2."""
    import kvstats.cli as cli

    def needs_package(args, say):
        exc = ModuleNotFoundError("No module named 'ml_dtypes'", name="ml_dtypes")
        exc.add_note("[scheme 'fp8_e4m3', d=64]")
        raise exc

    monkeypatch.setitem(cli.__dict__, "_cmd_schemes", needs_package)
    assert main(["schemes"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "'ml_dtypes' is not installed" in err and "fp8_e4m3" in err
    assert "pip install ml_dtypes" in err


@pytest.mark.parametrize("exc", [
    ImportError("cannot import name 'all_identical' from 'kvstats.analysis.resolution'",
                name="kvstats.analysis.resolution"),
    ModuleNotFoundError("No module named 'kvstats.analysis.gone'", name="kvstats.analysis.gone"),
])
def test_an_import_failing_inside_kvstats_is_a_traceback_not_an_install_hint(monkeypatch, capsys, exc):
    """kvstats' own import failing (a bug, a half-updated install) said "the Python package
    'kvstats' is not installed ... pip install kvstats", which sends the user the wrong way:
    it propagates, with the traceback that says where."""
    import kvstats.cli as cli

    def broken(args, say):
        raise exc

    monkeypatch.setitem(cli.__dict__, "_cmd_schemes", broken)
    with pytest.raises(ImportError) as raised:
        main(["schemes"])
    assert raised.value is exc and capsys.readouterr().err == ""


def test_crossover_lines_carry_each_schemes_stored_bits():
    """At an equal nominal n a scheme with a window or per-group scales can store twice
    the bits (kivi at n = 2 stores 4.6 bits per coordinate on d = 128, N = 256, against
    TurboQuant-mse's 2.1): the sweep's closing crossover lines print each scheme's bits
    total range in that case, from the summary table, not another case's."""
    import pandas as pd

    from kvstats.analysis.crossover import crossover_sentences as _crossover_lines

    cases = [{"distribution": d, "params": "-", "dim": 128, "n_keys": 256}
             for d in ("gaussian", "low_rank")]
    summary = pd.DataFrame([{**case, "budget": b, "scheme": s, "metric": m,
                             "bits_total": b + extra + (1.0 if case["distribution"] == "low_rank" else 0)}
                            for case in cases for s, extra in (("TQ", 0.125), ("kivi", 2.625))
                            for b in (2, 3, 4) for m in ("kl", "snr_k")])
    cross = pd.DataFrame([{**cases[0], "scheme_a": "TQ", "scheme_b": "kivi", "metric": "kl",
                           "crossover": True, "description": "CROSSOVER in kl: TQ at 2; kivi at 3, 4."},
                          {**cases[1], "scheme_a": "TQ", "scheme_b": "kivi", "metric": "kl",
                           "crossover": False, "description": "no crossover"}])
    assert _crossover_lines(cross, summary) == [
        "CROSSOVER in kl: TQ at 2; kivi at 3, 4. Bits stored per coordinate: "
        "TQ 2.125–4.125, kivi 4.625–6.625."]
    assert _crossover_lines(cross.iloc[:0], summary) == []


def test_sweep_keeps_the_configs_figures_false(tmp_path, tiny_config, capsys):
    """`[report] figures = false` in the config: `kvstats sweep` passed figures=True to
    the report unless --no-figures was given, and drew them anyway."""
    config = tmp_path / "no_figures.toml"
    config.write_text(tiny_config.read_text() + "figures = false\n")
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    assert "(0 figures)" in capsys.readouterr().out
    assert not list(out.glob("figures/*"))


def test_schemes_lists_each_schemes_params(capsys):
    """A config's `params = {...}` for a scheme: `kvstats schemes` names what each accepts
    (the registry's params) and the default of each that has a constant one, so a user
    need not provoke an error to learn them (m = n·d and the like: the name alone)."""
    assert main(["schemes"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name, listed in (
            ("kivi", "group_size=32, residual=32"),
            ("qjl", "group_size=32, m, n_outliers=0, norm_dtype='float16', outlier_m, sketch='gaussian', "
                    "value_bits, value_group_size"),
            ("KQV", "m, norm_dtype='float16', rotation='hadamard', sketch='gaussian'"),
            ("klt", "group_size=1024, rank"), ("q8_0", "none")):
        assert f"{name} " in out and f"[params: {listed}]" in out, name
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "kvstats schemes" in capsys.readouterr().out


def test_schemes_lists_each_distributions_params_with_their_defaults(capsys):
    """A config's distribution ``params`` were named nowhere on the command line: each
    distribution's line now gives them, with the defaults (the sampler's own table)."""
    from kvstats.data import DISTRIBUTIONS, default_params

    assert main(["schemes"]) == 0
    lines = capsys.readouterr().out.split("Distributions (", 1)[1].splitlines()[1:]
    for name in DISTRIBUTIONS:
        line = next(ln for ln in lines if ln.split()[0] == name)
        assert all(f"{k}={v!r}" in line for k, v in default_params(name).items()), line
    assert lines[-1].split() == ["real", "a", "captured", "cache:", "params", "path,", "layer,", "head"]


def test_theory_at_a_padded_dim_predicts_only_what_has_a_closed_form(capsys):
    """d = 96 (padded to 128): `kvstats theory` printed the unpadded d = 128 predictions
    (key SNR 9.36 dB at n = 2, residual ratio π/2 − 1/128 = 1.563), where a rotated
    scheme measures 10.45 dB and the residual ratio is (π/2 − 1/d)·d/d_pad = 1.170
    (docs/theory.md, "Padded dimensions"; the report's theory table gives no SNR row)."""
    assert main(["theory", "--dim", "96", "--bits", "1", "2", "4"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if re.match(r"^ ?[1-8] ", line)}
    assert sorted(rows) == ["1", "2", "4"]
    for n in ("2", "4"):
        # D_n, d_pad·D_n, N(0,1) D_n stay (the codebook's facts); the SNR and same-budget
        # columns have no closed form; the residual ratio is (π/2 − 1/d)·d/d_pad
        assert rows[n][4:7] == ["–", "–", "–"], rows[n]
        assert float(rows[n][7]) == pytest.approx((math.pi / 2 - 1 / 96) * 96 / 128, abs=1e-4)
    assert rows["1"][4:] == ["–"] * 4
    assert "d = 96 is not a power of two" in out and "2π" not in out
    # a power of two keeps every column
    assert main(["theory", "--dim", "64", "--bits", "2"]) == 0
    row = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(" 2 ")][0]
    assert "–" not in row and float(row[7]) == pytest.approx(math.pi / 2 - 1 / 64, abs=1e-4)


def test_theory_keeps_its_digits_at_8_bits(capsys):
    """At n = 8 the relative MSEs are ~4e-5: printed with 5 decimals they kept one digit
    (0.00004). The N(0,1) Lloyd–Max MSE at 8 bits is within 1% of the Panter–Dite
    high-resolution value (π√3/2)·4⁻⁸ = 4.151e-5; d_pad·D_8 at d = 128 within 3% of it."""
    assert main(["theory", "--dim", "128", "--bits", "8"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("8 ")][0].split()
    panter_dite = math.pi * math.sqrt(3) / 2 * 4.0 ** -8
    assert float(row[3]) == pytest.approx(panter_dite, rel=0.01)
    assert float(row[2]) == pytest.approx(float(row[3]), rel=0.03)
    assert len(row[2].split("e")[0].replace(".", "").lstrip("0")) >= 4   # significant digits


def test_a_value_error_s_notes_reach_the_one_line(monkeypatch, capsys):
    """The runner names the failing cell in a note on errors it cannot rebuild with a longer
    message (json.JSONDecodeError from a plugin sampler): the one line keeps it, once."""
    import json

    import kvstats.cli as cli

    def bad_json(args, say):
        try:
            json.loads("")
        except json.JSONDecodeError as exc:
            exc.add_note("[distribution 'x' params - at d=16, N=8]")
            exc.add_note("Expecting value")          # already in the message: not repeated
            raise

    monkeypatch.setitem(cli.__dict__, "_cmd_schemes", bad_json)
    assert main(["schemes"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.endswith("Expecting value: line 1 column 1 (char 0) "
                        "[distribution 'x' params - at d=16, N=8]")


def test_cell_counts_say_why_stored_cells_were_recomputed():
    # a resume after an edit of the code recomputes every cell: not "bad" cells (the old
    # wording), cells computed by other code; a damaged file is a failed check
    from kvstats.cli import _cell_counts
    other = {"status": "recomputed", "reason": "was computed by other code: kvstats 1 (now 2)"}
    damaged = {"status": "recomputed", "reason": "holds 3 rows of 4 (short or truncated)"}
    assert _cell_counts({"n_cells": 2, "cells": [other, other]}) == (
        "2 cells (2 computed, 2 of them in place of stored cells computed by other code)")
    assert _cell_counts({"n_cells": 2, "cells": [damaged, {"status": "resumed"}]}) == (
        "2 cells (1 computed, 1 of them in place of stored cells that failed their check; "
        "1 resumed, checked)")
    assert _cell_counts({"n_cells": 1, "cells": [{"status": "computed"}]}) == "1 cell (1 computed)"


def test_report_comparison_flag_replaces_the_configs_pairs(tmp_path, capsys):
    """kvstats report --comparison A:B tests that pair (the config named another), and the
    report names the choice as made after the sweep; a bad word or label is one line, exit 2."""
    config = tmp_path / "three.toml"
    config.write_text(TINY_TOML.replace('[[schemes]]\nname = "QKQV"',
                                        '[[schemes]]\nname = "QKQV"\n[[schemes]]\nname = "KV"'))
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1",
                 "--no-progress", "--no-report"]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "kv"), "--comparison", "KQV:KV",
                 "--comparison", "QKQV:KV", "--no-figures", "--no-progress", "--no-energy"]) == 0
    payload = json.loads((tmp_path / "kv" / "report.json").read_text())
    assert {(r["scheme_a"], r["scheme_b"]) for r in payload["comparisons"]} == {("KQV", "KV"), ("QKQV", "KV")}
    assert "comparisons" in payload["options_set_after_sweep"]
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(tmp_path / "bad"), "--comparison", "KQV"]) == 2
    assert "--comparison takes A:B" in capsys.readouterr().err
    assert main(["report", str(out), "--out", str(tmp_path / "bad2"), "--comparison", "KQV:nope",
                 "--no-figures", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err
