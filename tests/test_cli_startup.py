"""The command's start: its parser, ``--help``, ``kvstats schemes`` and argument errors
import none of pandas, scipy, pyarrow, torch or jax (a second or more of CPU each time);
the parser, every ``--help`` and argparse's own errors not even numpy or jaxtyping (the
built-in scheme and distribution names the parser shows are :mod:`kvstats.quant.catalog`'s
and :mod:`kvstats.data.catalog`'s, which the registries read too, and the report's
corrections and pairings :mod:`kvstats.stats.catalog`'s, which the report's options read).

Run in a fresh interpreter (this test process has imported them all long ago); each step's
heavy modules are printed, so a failure names the step that first imported one.
"""

import json
import subprocess
import sys
import textwrap

HEAVY = ("pandas", "scipy", "pyarrow", "torch", "jax")
#: What the parser and argparse's own output (help, usage errors) must not import either.
NUMERIC = ("numpy", "jaxtyping")

#: Each step: argv for kvstats.cli.main, and the exit status it must return. The first
#: ones are argparse's alone (help, usage errors), which import no numpy either; the rest
#: are kvstats' own checks, which may.
ARGPARSE_STEPS = [
    (["--help"], 0),
    (["sweep", "--help"], 0),
    (["report", "--help"], 0),
    (["schemes", "--help"], 0),
    (["theory", "--help"], 0),
    (["theory"], 2),                                   # --dim missing
    (["sweep", "--config", "c.toml"], 2),              # --out missing
    (["report", "d", "--correction", "nope"], 2),      # not a choice
    (["report", "d", "--pairing", "paired"], 2),       # not a choice
]
STEPS = ARGPARSE_STEPS + [
    (["schemes"], 0),
    (["theory", "--dim", "2"], 2),                     # --dim >= 3
    (["theory", "--dim", "64", "--bits", "9"], 2),     # --bits in 1..8
    (["sweep", "--config", "c.toml", "--out", "o", "--workers", "0"], 2),
    (["report", "d", "--alpha", "2"], 2),
]

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from kvstats.cli import build_parser, main

    def loaded():
        return sorted(m for m in {modules!r} if m in sys.modules)

    build_parser()
    out = [["parser", 0, loaded()]]
    for argv, _ in {steps!r}:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        out.append([" ".join(argv), code, loaded()])
    print(json.dumps(out))
""")


def _probe(tmp_path, steps, modules):
    """[step, exit status, the ``modules`` loaded after it] in a fresh interpreter."""
    script = PROBE.format(modules=modules, steps=steps)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)   # cwd: no c.toml or d there
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.splitlines()[-1])
    assert [code for _, code, _ in rows] == [0] + [code for _, code in steps]
    return rows


def test_parser_help_and_argument_errors_import_no_heavy_module(tmp_path):
    rows = _probe(tmp_path, STEPS, HEAVY)
    assert [(step, mods) for step, _, mods in rows if mods] == []


def test_parser_and_argparse_output_import_no_numpy(tmp_path):
    """Building the parser, every --help and argparse's own errors: no numpy, no jaxtyping
    (each of the registries the parser's names come from imports them)."""
    rows = _probe(tmp_path, ARGPARSE_STEPS, NUMERIC)
    assert [(step, mods) for step, _, mods in rows if mods] == []


def test_the_catalogs_import_no_numpy():
    """The names the parser reads (kvstats.quant.catalog, kvstats.data.catalog,
    kvstats.stats.catalog) import only the standard library; `from kvstats.data import
    DISTRIBUTIONS` reads its catalog."""
    script = ("import sys\n"
              "from kvstats.quant import catalog as schemes\n"
              "from kvstats.data import DISTRIBUTIONS, catalog as data\n"
              "from kvstats.stats import catalog as family\n"
              f"print(sorted(m for m in {NUMERIC + HEAVY!r} if m in sys.modules), "
              "DISTRIBUTIONS is data.DISTRIBUTIONS, len(schemes.NAMES) > 0, len(family.CORRECTIONS) > 0)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[] True True True\n"


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
