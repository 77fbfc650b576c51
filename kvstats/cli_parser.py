"""The ``kvstats`` command's argument parser, built without importing numpy.

Every command builds it, ``--help`` and a mistyped flag included, so it imports nothing
heavy: the built-in scheme and distribution names come from :mod:`kvstats.quant.catalog`
and :mod:`kvstats.data.catalog`, the report's corrections and pairings from
:mod:`kvstats.stats.catalog` (stdlib only, each the registries' and options' own source).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from pathlib import Path

from kvstats.data.catalog import DISTRIBUTIONS, REAL, REAL_ABOUT   # without numpy
from kvstats.quant import catalog   # the built-in scheme names, without numpy
from kvstats.stats.catalog import CORRECTIONS, PAIRINGS   # the report's choices, without numpy

__all__ = ["build_parser"]

#: The metrics ``--metrics`` may name, kvstats.report.options.FAMILY_METRICS written out:
#: that table imports numpy, which the help must not wait for (tests/test_cli_referee20.py
#: checks that the two agree).
_FAMILY_METRICS = ("snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t", "kl", "recall_at_5",
                   "argmax_shift", "snr_k_pooled", "snr_v_pooled")


def _schemes_epilog(width: int = 100) -> str:
    """The built-in schemes, one line each: the catalog's summary cut at a word to fit (in
    full, with the params and a plugin's schemes: ``kvstats schemes``).

    Examples
    --------
    >>> lines = _schemes_epilog().splitlines()
    >>> print(lines[3])
      KQV              WHT; K: n-bit Lloyd–Max; V: (n−1)-bit Lloyd–Max + 1-bit QJL residual
    >>> print(lines[11])
      q8_0             llama.cpp q8_0: blocks of 32 along d, 8-bit codes, an fp16 scale per block …
    """
    pad = max(map(len, catalog.NAMES)) + 2
    line = textwrap.TextWrapper(width - pad - 2, max_lines=1, placeholder=" …", break_on_hyphens=False)
    rows = [*catalog.SUMMARIES.items(), ("K{a}V{b}", "mixed precision by name, e.g. K4V2 (a, b in 1..8)")]
    head = textwrap.wrap("Schemes (n = bits per coordinate, the config's budgets; `kvstats schemes`: "
                         "each in full, with its params):", width)
    return "\n".join([*head, *(f"  {name:<{pad}}{_cut(line.fill(summary))}" for name, summary in rows)])


def _cut(text: str) -> str:
    """A summary cut inside a parenthesis ends before it (not on "(8.5 …")."""
    if text.endswith(" …") and text.count("(") > text.count(")"):
        text = text[:text.rindex("(")].rstrip(" ,;") + " …"
    return text


class _CommandParser(argparse.ArgumentParser):
    """A command's parser (``kvstats report``, ...): argparse's, and then where a user's
    words went wrong, a message in the command's name that says what and how to write it.

    ``finish(parser, args)``, given to the command's ``add_parser``, completes or refuses
    what argparse parsed (a list flag that took the positional after it: :func:`_report_dir`).
    ``needs``, the command's required options, are checked here rather than by argparse,
    which stops at the first missing one before it knows the words no option took: so
    ``kvstats sweep my.toml --out DIR`` is answered ``did you mean --config my.toml?``. A
    word no option takes is refused here, with the command's usage and the nearest option,
    not by the top-level parser with ``kvstats``'s. Only whole option names are taken: a
    prefix (``--metric`` for ``--metrics``) is refused with the did-you-mean, so a command
    line written into a paper's script means the same once a later option shares the prefix.
    """

    def __init__(self, *args, finish=None, needs: tuple[str, ...] = (), **kwargs) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)
        self.finish = finish
        self.needs = needs

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if self.finish is not None:
            self.finish(self, namespace)
        missing = [opt for opt in self.needs
                   if getattr(namespace, self._option_string_actions[opt].dest) is None]
        if missing:
            stray = [word for word in extras if not word.startswith("-")]
            hint = f" (did you mean {missing[0]} {stray[0]}?)" if stray else ""
            self.error(f"the following arguments are required: {', '.join(missing)}{hint}")
        if extras:
            self.error(_unrecognized(self, extras))
        return namespace, extras


class _TopParser(argparse.ArgumentParser):
    """The ``kvstats`` parser: a word before the command that is neither one of its options
    nor a command is refused naming the nearest (argparse said only that COMMAND is
    required, or listed the commands), as a command's parser does for its own words.

    Examples
    --------
    >>> import contextlib, io
    >>> def error(argv):
    ...     with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.suppress(SystemExit):
    ...         build_parser().parse_args(argv)
    ...     return err.getvalue().splitlines()[-1]
    >>> error(["--versoin"])
    'kvstats: error: unrecognized arguments: --versoin (did you mean --version?)'
    >>> error(["sweeep", "--config", "c.toml"])
    "kvstats: error: argument COMMAND: invalid choice: 'sweeep' (did you mean sweep? the commands: sweep, report, schemes, theory)"
    """

    def parse_known_args(self, args=None, namespace=None):
        commands = list(self._subparsers._group_actions[0].choices)
        for word in sys.argv[1:] if args is None else args:
            if word in commands:   # the command's words are its parser's
                break
            if not word.startswith("-"):
                near = difflib.get_close_matches(word, commands, n=1)
                hint = f"did you mean {near[0]}? " if near else ""
                self.error(f"argument COMMAND: invalid choice: {word!r} ({hint}the commands: "
                           f"{', '.join(commands)})")
            if word.split("=")[0] not in self._option_string_actions:
                self.error(_unrecognized(self, [word]))
        return super().parse_known_args(args, namespace)


def _unrecognized(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """The error for ``words`` no option of ``parser`` took: the nearest option of each
    mistyped flag, else the command's options.

    Examples
    --------
    >>> report = build_parser()._subparsers._group_actions[0].choices["report"]
    >>> print(_unrecognized(report, ["--metircs", "kl"]))
    unrecognized arguments: --metircs kl (did you mean --metrics?)
    >>> print(_unrecognized(report, ["results/b"]))
    unrecognized arguments: results/b (kvstats report takes one DIR; the rest are options)
    >>> print(_unrecognized(report, ["-m", "kl"]))  # doctest: +NORMALIZE_WHITESPACE
    unrecognized arguments: -m kl (kvstats report's options: --help, --out, --alpha,
    --correction, --energy-resamples, --bootstrap-resamples, --pairing, --metrics,
    --no-energy, --equivalence, --comparison, --equivalence-test, --figures, --no-figures,
    --no-progress, --plugins)
    """
    options = [s for action in parser._actions for s in action.option_strings]
    listed = ", ".join(s for s in options if s.startswith("--"))
    near = [m for w in words if w.startswith("-") for m in difflib.get_close_matches(
        w.split("=")[0], options, n=1, cutoff=0.6)]
    positionals = [a.metavar or a.dest for a in parser._actions if not a.option_strings]
    if set(words) & set(options):   # an option after `--`, which makes every word positional
        hint = "after --, no word is an option: write the options before it"
    elif near:
        hint = f"did you mean {', '.join(dict.fromkeys(near))}?"
    elif words[0].startswith("-"):
        hint = f"{parser.prog}'s options: {listed}"
    elif positionals:
        hint = f"{parser.prog} takes one {' and one '.join(positionals)}; the rest are options"
    else:
        hint = f"{parser.prog} takes only options: {listed}"
    return f"unrecognized arguments: {' '.join(words)} ({hint})"


def _report_dir(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """DIR of ``kvstats report`` where a user writes it, ``--metrics kl snr_t DIR`` too.

    ``--metrics`` takes every word up to the next flag, so DIR written after its list
    arrives as the list's last word; that word is DIR when it is an existing folder (and
    not the list's only word). Else DIR is missing, and the error says what the list took
    and how to write it.

    Examples
    --------
    >>> import tempfile
    >>> parser = build_parser()
    >>> with tempfile.TemporaryDirectory() as sweep:
    ...     args = parser.parse_args(["report", "--metrics", "kl", "snr_t", sweep])
    ...     args.metrics, args.dir == Path(sweep)
    (['kl', 'snr_t'], True)
    """
    if args.dir is not None:
        return
    words = args.metrics or []
    if len(words) > 1 and Path(words[-1]).is_dir():
        args.dir = Path(words.pop())
        return
    took = ""
    if words:
        took = (" (--metrics takes every word after it up to the next option, here "
                + (f"only the folder {words[0]}, which leaves it no METRIC" if Path(words[0]).is_dir()
                   else f"{' '.join(words)}, the last no existing folder")
                + ": write DIR first, `kvstats report DIR --metrics kl snr_t`, or end the list "
                  "with --, `kvstats report --metrics kl snr_t -- DIR`)")
    parser.error(f"the following arguments are required: DIR{took}")


def _theory_dim(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--dim`` of ``kvstats theory`` missing after a ``--bits`` list: the error says that
    the list took the numbers (``--bits 2 3 128``: d is not positional). Without a list,
    the command's ``needs`` check says ``--dim`` is required.

    Examples
    --------
    >>> _theory_dim(None, argparse.Namespace(dim=None, bits=None))   # needs= says it
    """
    if args.dim is None and args.bits:
        parser.error(f"the following arguments are required: --dim (--bits took every number "
                     f"after it, {' '.join(map(str, args.bits))}; the head dimension is the "
                     "option --dim: `kvstats theory --dim 128 --bits 2 3`)")


def _usage_requiring(parser: argparse.ArgumentParser, *shown: str) -> str:
    """``parser``'s usage with each of ``shown`` (``"DIR"``, ``"--dim D"``) outside
    brackets: argparse leaves them optional so that the command's ``finish`` can find them
    where a list flag took them (see :class:`_CommandParser`), and the command requires
    them.

    Examples
    --------
    >>> theory = build_parser()._subparsers._group_actions[0].choices["theory"]
    >>> print(theory.format_usage(), end="")
    usage: kvstats theory [-h] --dim D [--bits N [N ...]]
    """
    usage = parser.format_usage().removeprefix("usage: ").rstrip("\n")
    for text in shown:
        usage = usage.replace(f"[{text}]", text)
    return usage


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every option documented in ``--help``).

    Examples
    --------
    >>> args = build_parser().parse_args(["sweep", "--config", "c.toml", "--out", "o", "--resume"])
    >>> args.command, str(args.config), args.resume, args.workers
    ('sweep', 'c.toml', True, None)
    """
    epilog = "\n\n".join([_schemes_epilog(), *(textwrap.fill(text, 100, break_on_hyphens=False) for text in (
        f"Distributions: {', '.join(DISTRIBUTIONS)}, {REAL} ({REAL_ABOUT}); their params and "
        "defaults: `kvstats schemes`.",
        "Start: `kvstats sweep --config experiments/quick.toml --out results/quick`, then open "
        "results/quick/report.html; the config format: docs/usage.md. `kvstats COMMAND --help`: "
        "a command's options."))])
    parser = _TopParser(
        prog="kvstats",
        description="Calibrated statistics for the damage KV-cache quantization does to attention.",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    from kvstats import __version__   # kvstats' own __init__ imports nothing heavy

    parser.add_argument("--version", action="version", version=f"kvstats {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=_CommandParser)

    sw = sub.add_parser("sweep", help="run a sweep from a TOML config, then write the report and figures",
                        needs=("--config", "--out"),
                        description="Run the grid of a TOML config (schemes × budgets × distributions "
                                    "× d × N × trials), write DIR/results.parquet, DIR/manifest.json, "
                                    "DIR/cells/ (for resuming) and the report (DIR/report.md, "
                                    "report.html, report.json, tables/, figures/). The config "
                                    "format: docs/usage.md; the names it may use and each "
                                    "scheme's params: `kvstats schemes`.")
    # --config and --out: required (needs=, checked by _CommandParser)
    sw.add_argument("--config", type=Path, metavar="FILE",
                    help="TOML sweep configuration (e.g. experiments/quick.toml)")
    sw.add_argument("--out", type=Path, metavar="DIR",
                    help="output folder (created if missing). One folder holds one sweep: it is "
                         "locked while the sweep runs (a second sweep into it refuses), and what an "
                         "earlier sweep left there (manifest, results, report, figures, cells of "
                         "another grid; files of yours beside them stay) is removed before the new one "
                         "computes. A folder that holds "
                         "files but no kvstats sweep is refused, so that nothing of yours is "
                         "overwritten")
    sw.add_argument("--workers", type=int, default=None, metavar="N",
                    help="worker processes (default: number of CPUs available, at most the number "
                         "of tasks; 1 runs in this process)")
    sw.add_argument("--no-progress", action="store_true",
                    help="do not show the progress bars (the sweep's cells, the report's energy "
                         "tests and figures; shown only when stderr is a terminal)")
    sw.add_argument("--resume", action="store_true",
                    help="reuse cells already finished in DIR/cells and the finished chunks of "
                         "unfinished cells in DIR/cells/parts (same config and seed), each checked "
                         "first (a wrong, short, truncated or edited one is recomputed, with a line "
                         "saying so); without it every cell is recomputed and the chunks removed")
    sw.add_argument("--no-report", action="store_true", help="only run the sweep; skip the report")
    sw.add_argument("--figures", action=argparse.BooleanOptionalAction, default=None,
                    help="write the report with figures (--figures) or without figures (refused "
                         "with --no-report) (default: the config's [report] figures, else drawn)")
    sw.usage = _usage_requiring(sw, "--config FILE", "--out DIR")

    rp = sub.add_parser("report", help="(re)write the report of a finished sweep directory",
                        finish=_report_dir,
                        description="Read DIR/results.parquet and DIR/manifest.json (refused when "
                                    "they do not belong to one sweep: another config or run, a "
                                    "torn or edited file) and write the hypothesis-test report "
                                    "into DIR (or --out), holding that folder's lock.")
    # nargs="?": _report_dir requires it, and takes it from the end of --metrics' list
    rp.add_argument("dir", type=Path, nargs="?", metavar="DIR",
                    help="sweep output directory (before or after the options)")
    rp.add_argument("--out", type=Path, default=None, metavar="OUT",
                    help="where to write the report (default: DIR); a folder that holds files but "
                         "no kvstats output is refused, and so is one that holds another sweep")
    rp.add_argument("--alpha", type=float, default=None,
                    help="significance level after adjustment, a float in (0, 1) (default: "
                         "config's, else 0.05)")
    rp.add_argument("--correction", choices=list(CORRECTIONS), default=None,
                    help="multiple-testing correction over every p-value of the report "
                         "(default: config's, else holm; the [report] correction's choices)")
    rp.add_argument("--energy-resamples", type=int, default=None, metavar="B",
                    help="the least permutation cap B_max of each 6D energy test, not a count "
                         "(an int >= 1): each test is sequential (Besag–Clifford), stopping at its "
                         "energy_stop-th "
                         "exceedance (10 by default), else after B_max draws; with the [report] "
                         "option energy_resolution = 'family' (the default) B_max = max(B, the "
                         "permutations the whole family needs to reject at --alpha after "
                         "--correction: kvstats.stats.sequential.required_resolution), with "
                         "'fixed' B_max = B (default: config's, else 499)")
    rp.add_argument("--bootstrap-resamples", type=int, default=None, metavar="B",
                    help="bootstrap resamples per confidence interval, an int >= 40 (and >= "
                         "2/(1 − confidence) above confidence 0.95) (default: config's, else 999)")
    rp.add_argument("--pairing", choices=list(PAIRINGS), default=None,
                    help="design of the comparisons: 'trial', each scheme's value matched with the "
                         "other's on the same trial (text, on cluster means): sign test, energy with "
                         "within-pair swaps, paired TOST, no KS; 'none', two independent samples "
                         "(Mann–Whitney, KS, energy) (default: config's, else trial)")
    # no argparse choices: the names are the metric table's (which imports numpy), and a
    # misspelt one gets its did-you-mean from the [report] option's own check. extend, as
    # --bits: `--metrics kl --metrics snr_t` is both (store kept the last, silently)
    rp.add_argument("--metrics", nargs="+", action="extend", default=None, metavar="METRIC",
                    help="the metrics tested one by one, e.g. --metrics kl snr_t (may be "
                         "repeated): their tests and "
                         "the 6D energy tests (unless --no-energy) form the family the "
                         "correction adjusts together "
                         "(default: config's, else every report metric and the pooled SNRs). "
                         "Choose them before looking at results: a smaller family lowers the "
                         "p-value each test needs. The others keep their summary tables and "
                         "figures, without tests (names: " + ", ".join(_FAMILY_METRICS) + ")")
    rp.add_argument("--no-energy", action="store_true",
                    help="leave the 6D energy tests out of the family (none runs), so it holds "
                         "the --metrics' tests only: with --metrics kl, a primary endpoint "
                         "declared before looking at results (the [report] option energy = "
                         "false; default: config's, else the energy tests are in)")
    # append, one word each: a list flag would take DIR after it (see _report_dir)
    rp.add_argument("--equivalence", action="append", default=None, metavar="METRIC=DELTA",
                    help="an equivalence margin, e.g. --equivalence kl=0.2 (repeat for several): "
                         "each compared pair gets a TOST for the metric, in the family; given, "
                         "these replace the config's margins, and --equivalence none drops them "
                         "(the [report] option equivalence; default: config's, else none; "
                         "METRIC: any --metrics name, those in dB with --equivalence-test rank)")
    rp.add_argument("--comparison", action="append", default=None, metavar="A:B",
                    help="a scheme pair to test, by its labels, e.g. --comparison KV:q4_0 (repeat "
                         "for several): given, these replace the config's comparisons and the "
                         "report names them as chosen after the sweep; --comparison none tests no "
                         "pair (default: config's, else the default pairs present)")
    rp.add_argument("--equivalence-test", default=None, metavar="{ratio,rank}",
                    help="how a margin is read: 'ratio', mean(a)/mean(b) within [1/(1+δ), 1+δ] "
                         "(not for metrics in dB); 'rank', P(a > b) within 0.5 ± δ, δ < 0.5 "
                         "(the [report] option equivalence_test; default: config's, else ratio)")
    rp.add_argument("--figures", action=argparse.BooleanOptionalAction, default=None,
                    help="draw the figures (--figures), or skip the figures; the report's folder "
                         "loses its earlier figures (one folder holds one report: --out OTHER "
                         "keeps DIR's) (default: config's [report] figures, else drawn)")
    rp.add_argument("--no-progress", action="store_true",
                    help="do not show the progress bars (energy tests, figures; shown only when "
                         "stderr is a terminal)")
    rp.add_argument("--plugins", action="append", type=Path, default=None, metavar="PATH",
                    help="a plugin file of the sweep where it is now, when it is no longer at the "
                         "path the manifest recorded (moved, copied to another machine); repeat "
                         "for several. Matched to the recorded plugin by SHA-256, else by file "
                         "name, and imported in its place; a file of another SHA-256 gives a "
                         "warning naming both files and hashes (the report's numbers are the "
                         "stored results; the header says which file was used)")
    rp.usage = _usage_requiring(rp, "DIR")

    sc = sub.add_parser("schemes", help="list the schemes and distributions a config may name, "
                                        "plugins' included",
                        description="Print every scheme (with its summary and params) and "
                                    "distribution (with its params and their defaults) a sweep "
                                    "config may name; with --plugins, after importing those plugins "
                                    "as a config's [sweep] plugins would (a check that a plugin "
                                    "registers what you expect), each user entry with the plugin "
                                    "that registered it.")
    sc.add_argument("--plugins", action="append", default=None, metavar="PLUGIN",
                    help="a plugin to import first: a .py file (relative to the working directory) "
                         "or a module name; repeat for several")

    th = sub.add_parser("theory", help="print closed-form predictions for a head dimension",
                        finish=_theory_dim, needs=("--dim",),
                        description="Print, per bit width, the Lloyd–Max distortion of the "
                                    "sphere-coordinate density of dimension d_pad (next power of "
                                    "two ≥ d), the predicted key SNR of a rotated n-bit MSE quantizer "
                                    "and of (n−1)-bit + 1-bit QJL residual, and the predicted q·k "
                                    "error variance inflation of QKQV over KQV (→ 2π) and of the QJL "
                                    "residual over the scalar residual (→ π/2). For d not a power of "
                                    "two only the residual ratio has a closed form, "
                                    "(π/2 − 1/d)·d/d_pad; the rest print as –.")
    # required (needs=); _theory_dim says when a --bits list took the number
    th.add_argument("--dim", type=int, metavar="D", help="head dimension d (≥ 3; required)")
    # extend, not store: `--bits 2 --bits 3` is 2 and 3 (store kept the last, 3); no default
    # list here, since argparse would extend it
    th.add_argument("--bits", type=int, nargs="+", action="extend", default=None, metavar="N",
                    help="bit budgets n (1..8, distinct; default 2 3 4 5 6; may be repeated)")
    th.usage = _usage_requiring(th, "--dim D")
    return parser
