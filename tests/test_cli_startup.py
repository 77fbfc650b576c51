"""The command's start: its parser, ``--help``, ``kvstats schemes`` and argument errors
import none of pandas, scipy, pyarrow, torch or jax (a second or more of CPU each time).

Run in a fresh interpreter (this test process has imported them all long ago); each step's
heavy modules are printed, so a failure names the step that first imported one.
"""

import json
import subprocess
import sys
import textwrap

HEAVY = ("pandas", "scipy", "pyarrow", "torch", "jax")

#: Each step: argv for kvstats.cli.main, and the exit status it must return.
STEPS = [
    (["--help"], 0),
    (["report", "--help"], 0),
    (["schemes"], 0),
    (["theory"], 2),                                   # argparse: --dim missing
    (["report", "d", "--correction", "nope"], 2),      # argparse: not a choice
    (["theory", "--dim", "2"], 2),                     # ours: --dim >= 3
    (["theory", "--dim", "64", "--bits", "9"], 2),     # ours: --bits in 1..8
    (["sweep", "--config", "c.toml", "--out", "o", "--workers", "0"], 2),
    (["report", "d", "--alpha", "2"], 2),
]

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from kvstats.cli import build_parser, main

    def heavy():
        return sorted(m for m in {heavy!r} if m in sys.modules)

    build_parser()
    out = [["parser", 0, heavy()]]
    for argv, _ in {steps!r}:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        out.append([" ".join(argv), code, heavy()])
    print(json.dumps(out))
""")


def test_parser_help_and_argument_errors_import_no_heavy_module(tmp_path):
    script = PROBE.format(heavy=HEAVY, steps=STEPS)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)   # cwd: no c.toml or d there
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.splitlines()[-1])
    assert [code for _, code, _ in rows] == [0] + [code for _, code in STEPS]
    assert [(step, mods) for step, _, mods in rows if mods] == []


def test_lazy_data_package_keeps_its_names():
    # the names `from kvstats.data import ...` gave before the exports became lazy
    script = ("import sys, kvstats.data as d\n"
              "before = 'kvstats.data.synthetic' in sys.modules\n"
              "from kvstats.data import DISTRIBUTIONS, VALUE_DISTRIBUTIONS, Trials, default_params, "
              "group_query_heads, sample\n"
              "from kvstats.data import synthetic, trials\n"
              "assert sample is synthetic.sample and Trials is trials.Trials\n"
              "assert d.real.load_trials and sorted(d.__all__) == d.__all__\n"
              "print(before, d.__all__)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split(" ", 1) == [
        "False", "['DISTRIBUTIONS', 'Trials', 'VALUE_DISTRIBUTIONS', 'default_params', "
                 "'group_query_heads', 'sample']\n"]
