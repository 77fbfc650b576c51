"""The README's Python example runs as written and prints what a reader expects."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md must contain a Python example"
    exec(compile(blocks[0], str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "KQV 4.1875 bits/coord with overhead" in out
    # KQV beats QKQV in KL on Gaussian keys at n = 4 (docs/results.md): in nearly every
    # paired trial, so the sign test's dominance must be close to -1.
    dominance = float(re.search(r"dominance = ([+-][0-9.]+)", out).group(1))
    assert dominance < -0.9
    # the output the README shows is the output the example prints
    shown = re.search(r"It prints.*?:\n\n((?:    .*\n)+)", README.read_text()).group(1)
    assert [line.strip() for line in shown.splitlines()] == out.strip().splitlines()


def test_readme_layout_names_every_package_and_module():
    """The layout section matches the tree: every subpackage of kvstats, every public module
    at its top level and every module of kvstats/quant is named in it."""
    root = README.parent
    layout = README.read_text().split("## Layout", 1)[1]
    packages = [p.parent.name for p in (root / "kvstats").glob("*/__init__.py")]
    modules = [p.stem for p in (root / "kvstats" / "quant").glob("*.py") if p.stem != "__init__"]
    missing = [f"kvstats/{p}/" for p in packages if f"{p}/" not in layout]
    missing += [f"kvstats/quant/{m}.py" for m in modules if not re.search(rf"\b{m}\b", layout)]
    top = [p.name for p in (root / "kvstats").glob("*.py") if not p.name.startswith("_")]
    missing += [f"kvstats/{name}" for name in top if not re.search(rf"\b{re.escape(name)}", layout)]
    assert not missing, f"README.md's layout section does not name {missing}"


def test_readme_seed_scheme_lines_are_the_registry_summaries():
    """The README's one line per seed scheme is the registry's summary, word for word."""
    from kvstats.quant.registry import scheme_def

    text = README.read_text()
    for name in ("KV", "KQV", "QKQV"):
        assert f"- `{name}`: {scheme_def(name).summary}\n" in text, name


def test_readme_command_lines_are_valid_commands():
    """Each line of the README's "From the command line" block parses as the command it
    shows (a renamed or mistyped flag there is the first thing a new user runs into)."""
    import contextlib
    import io
    import shlex

    from kvstats.cli_parser import build_parser

    block = README.read_text().split("From the command line:\n\n", 1)[1].split("\n\n", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert len(lines) >= 5 and all(line.startswith(".venv/bin/kvstats ") for line in lines), lines
    for line in lines:
        argv = shlex.split(line)[1:]
        if argv == ["--help"]:
            continue
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            try:
                build_parser().parse_args(argv)
            except SystemExit:
                raise AssertionError(f"README.md: {line!r}: {errors.getvalue().strip()}") from None



def test_readme_command_lines_name_files_that_exist():
    """The files the command block passes (``--config``, ``--plugins``) are in the repository,
    so each line runs as written from its root: it once showed ``kvstats schemes --plugins
    my_schemes.py`` and a moved-plugin report, both a file-not-found error when run."""
    import shlex

    block = README.read_text().split("From the command line:\n\n", 1)[1].split("\n\n", 1)[0]
    missing = []
    for line in block.splitlines():
        argv = shlex.split(line.split("#", 1)[0])
        missing += [f"{line.strip()}: {value}" for flag, value in zip(argv, argv[1:])
                    if flag in ("--config", "--plugins") and not (README.parent / value).is_file()]
    assert not missing, missing

def _resolves(name: str) -> bool:
    """Whether ``kvstats.a.b.c`` names a module or an attribute of one (True, unchecked,
    where the module needs an extra that is not installed)."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as err:
            if err.name and not err.name.startswith("kvstats"):
                return True
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_kvstats_name_the_user_docs_give_exists():
    """Each dotted ``kvstats.…`` name of README.md, docs/usage.md and examples/ resolves:
    a renamed or moved function is the second thing a new user runs into."""
    root = README.parent
    files = [README, root / "docs" / "usage.md", *sorted((root / "examples").glob("*.py"))]
    missing = [f"{path.name}: {name}" for path in files
               # not part of a file name such as DIR/.kvstats.lock
               for name in sorted(set(re.findall(r"(?<![.\w])kvstats(?:\.[A-Za-z_]\w*)+", path.read_text())))
               if not _resolves(name)]
    assert not missing, missing


def test_every_flag_the_user_docs_give_is_a_kvstats_flag():
    """Each ``--flag`` of README.md and docs/usage.md is an option of ``kvstats`` or of one
    of its commands, but for the other tools' flags listed here."""
    import argparse

    from kvstats.cli_parser import build_parser

    others = {"--index-url": "pip", "--collect-only": "pytest", "--tokens": "experiments/real_capture.py",
              "--layers": "experiments/real_capture.py"}
    flags = set(others)

    def collect(parser):
        for action in parser._actions:
            flags.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    collect(sub)

    collect(build_parser())
    for path in (README, README.parent / "docs" / "usage.md"):
        unknown = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", path.read_text())) - flags
        assert not unknown, f"{path.name} names {sorted(unknown)}, not a kvstats flag"
