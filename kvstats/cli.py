"""The ``kvstats`` command: run sweeps, write reports, print closed-form predictions.

Usage::

    kvstats sweep --config experiments/quick.toml --out results/quick
    kvstats report results/quick
    kvstats report results/quick --pairing none --out results/quick_two_sample
    kvstats report results/own --plugins ~/copies/my_schemes.py   # a plugin moved since
    kvstats theory --dim 128 --bits 2 3 4
    kvstats schemes --plugins my_schemes.py          # what a config may name, a plugin's too

Exit status 2, with one line and no traceback, for bad input (the config is checked
whole before any compute; a report's options, pairs and data before its compute), a
package to install, OS errors, an output folder another sweep holds and a non-empty
output folder that holds no kvstats sweep. 1, with the traceback, for an error raised
while a cell or a report was computed (a bug in a plugin's code or kvstats', a
``ValueError`` too: the input was checked before; but a norm overflow, an error of the
seeded data, is one line and 2), as for any other unexpected error; 1, with
one line, when a worker process died. 130 on Ctrl-C, 143 on SIGTERM (``kill``,
``timeout``, a scheduler's limit), after the same clean-up: a sweep's pool shut down and
its finished cells kept and counted. 141 (128 + SIGPIPE, what a shell reports for
``seq 1000 | head``), with no message, when the reader of stdout went away (``kvstats
theory ... | head``): the lines are dropped and the work is finished (a sweep still writes
its report); so that ``set -o pipefail`` scripts see kvstats as they see any Unix tool. A
closed stderr (a terminal's) stops a sweep at the progress bar's next write, also with 141
and no message (finished cells are kept for ``--resume``); an error whose line cannot be written keeps
its status; ``--help`` into a closed pipe exits 0.

The parser is :mod:`kvstats.cli_parser` and the output, errors and warnings
:mod:`kvstats._cli_output` (neither imports anything heavy); the commands are here.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
import textwrap
import time
import warnings
from typing import Sequence

from kvstats._cli_output import (PIPE_CLOSED, Stdout, Terminated, _replace_unencodable, close_bars, computing_error,
                                discard, error_text, import_error_text, kept_note, missing_package, os_error_text,
                                print_error, raised, sigterm_as_interrupt, warning_printer)
from kvstats.cli_parser import build_parser
from kvstats.data.catalog import REAL, REAL_ABOUT

__all__ = ["main", "build_parser", "PIPE_CLOSED"]


def _schemes_text(width: int = 100, params: bool = False) -> str:
    """The registry's schemes, one per entry with its one-line summary (wrapped) and, with
    ``params``, the settings a config's ``params`` table may give it (``p=default`` where
    the scheme declares a constant default, ``SchemeDef.defaults``).

    Examples
    --------
    >>> "kivi             KIVI" in _schemes_text()
    True
    >>> "[params: group_size=32, residual=32]" in _schemes_text(params=True)
    True
    """
    from kvstats.quant.registry import REGISTRY

    pad = max(map(len, REGISTRY)) + 2
    lines = ["Schemes (kvstats.quant.registry; n = bits per coordinate, the config's budgets):"]
    for name, sdef in REGISTRY.items():
        text = sdef.summary
        if params:   # what `params = {...}` accepts: a typo is refused naming these too
            listed = (f"{p}={sdef.defaults[p]!r}" if p in sdef.defaults else p for p in sorted(sdef.params))
            text += f" [params: {', '.join(listed) or 'none'}]"
        lines += textwrap.wrap(text, width, initial_indent=f"  {name:<{pad}}",
                               subsequent_indent=" " * (pad + 2), break_on_hyphens=False)
    lines.append(f"  {'K{a}V{b}':<{pad}}mixed precision by name, e.g. K4V2 (a, b in 1..8)")
    return "\n".join(lines)


def _cmd_sweep(args: argparse.Namespace, say: Stdout) -> int:
    from kvstats._checks import check_int

    if args.no_report and args.figures is not None:   # a no-op flag accepted silently says it did something
        flag = "--figures" if args.figures else "--no-figures"
        raise ValueError(f"{flag} with --no-report: no report is written, so there are no figures to "
                         f"{'draw' if args.figures else 'skip'}; give --no-report alone (or {flag} alone "
                         f"for a report {'with' if args.figures else 'without'} figures)")

    if args.workers is not None:   # before the sweep's imports (pandas, scipy)
        check_int(args.workers, "--workers", low=1)
    from kvstats.report import hypothesis_report
    from kvstats.sweep import run
    from kvstats.sweep.config import SweepConfig
    from kvstats.sweep.store import check_out_folder, lock_dir

    tic = time.perf_counter()
    config = SweepConfig.from_toml(args.config)  # the whole config, [report] included
    # every scheme and distribution of its grid, checked once, before the folder is touched
    cells = run.check_grid(config)
    if args.out.exists() and not args.out.is_dir():
        raise NotADirectoryError(f"--out {str(args.out)!r} is a file, not a folder")
    check_out_folder(args.out)  # before lock_dir writes its lock file there
    with lock_dir(args.out):  # held across the sweep and its report
        return _sweep_locked(args, config, cells, run, hypothesis_report, say, tic)


def _sweep_locked(args: argparse.Namespace, config, cells, run, hypothesis_report, say: Stdout,
                  tic: float) -> int:
    executor = "serial" if args.workers == 1 else None
    result = run._run_checked(config, cells, args.out, executor, _progress(args),
                              args.resume, args.workers)
    say(f"sweep: {_cell_counts(result.manifest)}, {len(result.frame)} rows in "
        f"{time.perf_counter() - tic:.1f} s -> {args.out}")
    if not args.no_report:
        tic = time.perf_counter()
        try:
            # None: the config's [report] figures (default true); --figures overrides its false
            rep = hypothesis_report(result, args.out, figures=args.figures,
                                    progress=_progress(args))
        except KeyboardInterrupt as exc:   # the sweep's results are written: no --resume to say
            again = " ".join(["kvstats report", shlex.quote(str(args.out)),
                              *({True: ["--figures"], False: ["--no-figures"]}.get(args.figures, []))])
            exc.add_note(f"[the sweep finished (its results are in {args.out}); only its report "
                         f"was interrupted: `{again}` writes it]")
            raise
        _say_report(rep, tic, say)
    return 0


def _say_report(rep, tic: float, say: Stdout) -> None:
    """The line of a written report (its files, figures and time), then its crossovers."""
    from kvstats.analysis.crossover import crossover_sentences

    say(f"report: {rep.files['markdown']}, {rep.files['html']} ({len(rep.figures)} figures) "
        f"in {time.perf_counter() - tic:.1f} s")
    try:
        lines = crossover_sentences(rep.crossovers, rep.summary)
    except (ValueError, TypeError) as exc:   # of the report's own tables: a bug, as in its compute
        exc.add_note("[report: computing its crossover lines, its input checked]")
        raise
    for line in lines:
        say("  " + line)


def _progress(args: argparse.Namespace) -> bool:
    """Progress bars: on a terminal, unless ``--no-progress`` (in a log file, ``nohup`` or
    CI, their redraws would fill it)."""
    try:
        return not args.no_progress and sys.stderr.isatty()
    except (AttributeError, ValueError):   # a stream without isatty, or closed
        return False


def _cell_counts(manifest: dict) -> str:
    """``"60 cells (0 computed, 60 resumed)"``: what ran, and what was reused after its check.

    Recomputed stored cells are counted by why: computed by other code (an edit of kvstats
    or of the user's code, not a fault of the file) or failed their check (damaged,
    truncated, another version's schema).

    Examples
    --------
    >>> _cell_counts({"n_cells": 4, "cells": [
    ...     {"status": "resumed"}, {"status": "computed", "resumed_chunks": 2},
    ...     {"status": "recomputed", "reason": "content differs from its recorded hash"},
    ...     {"status": "recomputed", "reason": "was computed by other code: kvstats a (now b)"}]})
    '4 cells (3 computed, 2 of them in place of stored cells: 1 computed by other code, 1 that failed their check; 1 resumed, checked; 2 chunk(s) of 1 computed cell(s) resumed from cells/parts)'
    """
    from kvstats.sweep.store import OTHER_CODE, _resumed_chunks

    cells = manifest["cells"]
    status = [c["status"] for c in cells]
    computed, resumed = len(status) - status.count("resumed"), status.count("resumed")
    other_code = sum(c["status"] == "recomputed"
                     and str(c.get("reason", "")).startswith(OTHER_CODE) for c in cells)
    kinds = [(n, why) for n, why in ((other_code, "computed by other code"),
                                     (status.count("recomputed") - other_code, "that failed their check"))
             if n]
    text = f"{manifest['n_cells']} cell{'' if manifest['n_cells'] == 1 else 's'} ({computed} computed"
    if len(kinds) == 1:
        text += f", {kinds[0][0]} of them in place of stored cells {kinds[0][1]}"
    elif kinds:
        text += (f", {status.count('recomputed')} of them in place of stored cells: "
                 + ", ".join(f"{n} {why}" for n, why in kinds))
    if resumed:
        text += f"{';' if kinds else ','} {resumed} resumed, checked"
    return text + _resumed_chunks(cells) + ")"


def _pairs_flag(words: list[str] | None, labels: Sequence[str] = ()) -> list[tuple[str, str]] | None:
    """The ``--comparison`` words as scheme pairs: ``["KV:q4_0"]`` -> ``[("KV", "q4_0")]``,
    ``["none"]`` -> ``[]`` (no pair), not given -> None (the config's).

    A label may hold ':': a word is split at the one ':' whose two sides are ``labels`` (the
    sweep's; two such: refused), else at its first (the report then names the unknown label).

    Examples
    --------
    >>> _pairs_flag(["KV:q4_0", "KQV:QKQV"]), _pairs_flag(["none"]), _pairs_flag(None)
    ([('KV', 'q4_0'), ('KQV', 'QKQV')], [], None)
    >>> _pairs_flag(["KV:fp16:KQV"], ["KV:fp16", "KQV"])
    [('KV:fp16', 'KQV')]
    >>> _pairs_flag(["KV"])
    Traceback (most recent call last):
    ...
    ValueError: --comparison takes A:B, two scheme labels, e.g. --comparison KV:q4_0 (repeat the flag for several), or --comparison none to test no pair; received 'KV'
    """
    if words is None:
        return None
    if words == ["none"]:
        return []
    pairs = []
    for word in words:
        splits = [(word[:i], word[i + 1:]) for i, ch in enumerate(word) if ch == ":"]
        fits = [pair for pair in splits if set(pair) <= set(labels)]
        if len(fits) > 1:
            raise ValueError(f"--comparison {word!r} splits into two pairs of the sweep's labels, {fits[0]} "
                             f"and {fits[1]}: give the pair in the config's [report] comparisons instead")
        pair = fits[0] if fits else (splits[0] if splits else (word,))
        if len(pair) != 2 or not all(label.strip() for label in pair):
            also = " (none tests no pair: give it alone)" if word == "none" else ""
            raise ValueError("--comparison takes A:B, two scheme labels, e.g. --comparison KV:q4_0 "
                             "(repeat the flag for several), or --comparison none to test no pair; "
                             f"received {word!r}{also}")
        pairs.append(pair)
    return pairs


def _cmd_report(args: argparse.Namespace, say: Stdout) -> int:
    args.equivalence = _margins_flag(args.equivalence)
    words, args.comparison = args.comparison, _pairs_flag(args.comparison)   # form; labels below
    _check_report_flags(args)   # before loading (and importing pandas): fails at once, named
    from kvstats.plugins import relocate_plugins
    from kvstats.report import hypothesis_report
    from kvstats.results import load_result
    from kvstats.sweep.store import check_out_folder, lock_dir

    tic = time.perf_counter()
    # the sweep's plugins from where they are now; a missing one is named with the fix
    relocate_plugins(args.dir, args.plugins or ())
    try:
        with warnings.catch_warnings():
            if words is not None:   # the config's pairs' warnings: not this report's, of --comparison's
                warnings.filterwarnings("ignore", "no comparison", UserWarning)
            result = load_result(args.dir)  # checked: the results pair with the manifest
    except ValueError as exc:
        if _NOT_REGISTERED not in str(exc):
            raise
        raise ValueError(f"{exc}{_SCRIPT_SWEEP.format(dir=str(args.dir))}") from None
    args.comparison = _pairs_flag(words, [spec.display() for spec in result.config.schemes])
    _check_metrics_keep_margins(args.metrics, result.config.report, args.dir / "manifest.json",
                                args.equivalence)
    _check_margin_flags(args, result.config.report)
    out = args.out or args.dir
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {str(out)!r} is a file, not a folder")
    check_out_folder(out, "report", report_of=result)  # --out: no one else's files, no other sweep
    with lock_dir(out):  # not while a sweep writes there
        rep = hypothesis_report(result, out, alpha=args.alpha, correction=args.correction,
                                comparisons=args.comparison,
                                energy_resamples=args.energy_resamples,
                                bootstrap_resamples=args.bootstrap_resamples,
                                pairing=args.pairing, metrics=args.metrics,
                                equivalence=args.equivalence,
                                equivalence_test=args.equivalence_test,
                                energy=False if args.no_energy else None,
                                figures=args.figures,   # None: the config's
                                progress=_progress(args))
    _say_report(rep, tic, say)
    return 0


#: How the registries say a name is not one of theirs (quant/registry.py, sweep/specs.py) ...
_NOT_REGISTERED = "of your own must be registered in this process first"
#: ... and what ``kvstats report`` adds: a scheme or distribution that a script registered
#: (no plugin recorded) is named by nothing this command can import.
_SCRIPT_SWEEP = ("; the kvstats command imports only the plugins the sweep's config named: a "
                 "sweep of a scheme or distribution a script registered is reported from Python, "
                 "with kvstats.hypothesis_report({dir!r}, OUT) in a script that registers it first "
                 "(or register it in a plugin file named in [sweep] plugins, and sweep again)")

#: The report flags that set a ``[report]`` option of the same name.
_REPORT_FLAGS = {"alpha": "--alpha", "energy_resamples": "--energy-resamples",
                 "bootstrap_resamples": "--bootstrap-resamples", "metrics": "--metrics",
                 "equivalence": "--equivalence", "equivalence_test": "--equivalence-test"}

_MARGIN_WORDS = ("METRIC=DELTA, e.g. --equivalence kl=0.2 (repeat the flag for several), or "
                 "--equivalence none to drop the config's margins")


def _margins_flag(words: list[str] | None) -> dict[str, float] | None:
    """The ``--equivalence`` words as margins: ``["kl=0.2"]`` -> ``{"kl": 0.2}``, ``["none"]``
    -> ``{}`` (the config's margins dropped), not given -> None (the config's). The names
    and values are then checked as the ``[report]`` option's (:func:`_check_report_flags`).

    Examples
    --------
    >>> _margins_flag(["kl=0.2", "recall_at_5=0.02"]), _margins_flag(["none"]), _margins_flag(None)
    ({'kl': 0.2, 'recall_at_5': 0.02}, {}, None)
    >>> _margins_flag(["kl"])
    Traceback (most recent call last):
    ...
    ValueError: --equivalence takes METRIC=DELTA, e.g. --equivalence kl=0.2 (repeat the flag for several), or --equivalence none to drop the config's margins; received 'kl'
    """
    if words is None:
        return None
    if words == ["none"]:
        return {}
    margins: dict[str, float] = {}
    for word in words:
        metric, eq, delta = word.partition("=")
        try:
            value = float(delta)
        except ValueError:
            value = None
        if not eq or not metric.strip() or value is None:
            also = " (none drops every margin: give it alone)" if word == "none" else ""
            raise ValueError(f"--equivalence takes {_MARGIN_WORDS}; received {word!r}{also}")
        if metric.strip() in margins:
            raise ValueError(f"--equivalence gives {metric.strip()} two margins "
                             f"({' '.join(words)}); give each metric once")
        margins[metric.strip()] = value
    return margins


def _check_report_flags(args: argparse.Namespace) -> None:
    """Each report flag given, checked as its ``[report]`` option is, the error naming the
    flag the user typed (``--alpha``), not the config key.

    Examples
    --------
    >>> _check_report_flags(argparse.Namespace(alpha=2.0, energy_resamples=None,
    ...                                        bootstrap_resamples=None))
    Traceback (most recent call last):
    ...
    ValueError: --alpha must be a float in (0, 1) (the [report] option alpha); received 2.0
    >>> _check_report_flags(argparse.Namespace(alpha=None, metrics=["kl", "snr_tt"]))
    Traceback (most recent call last):
    ...
    ValueError: --metrics must be a non-empty list of distinct names from snr_k, ...; received ['kl', 'snr_tt'] (did you mean 'snr_t'?)
    """
    from kvstats.report.options import REPORT_OPTIONS

    for opt in REPORT_OPTIONS:
        value = getattr(args, opt.name, None) if opt.name in _REPORT_FLAGS else None
        if value is None:
            continue
        try:
            opt.check(value)
        except (ValueError, TypeError) as exc:
            # the check's near-miss hint is kept (a misspelt --metrics name)
            hint = re.search(r" \(did you mean [^)]*\)", str(exc))
            hint = hint.group(0) if hint else ""
            if opt.name == "equivalence":   # a metric's name or margin: the check's words say which
                raise ValueError(f"--equivalence: {exc}") from None
            if opt.name == "metrics" and any("," in name for name in value):   # kl,snr_t
                words = [w for name in value for w in name.split(",") if w]
                hint = f" (the names are separate words: --metrics {' '.join(words)})"
            raise ValueError(f"{_REPORT_FLAGS[opt.name]} must be {opt.allowed} (the [report] "
                             f"option {opt.name}); received {value!r}{hint}") from None


def _check_margin_flags(args: argparse.Namespace, report_config: dict) -> None:
    """``--equivalence`` and ``--equivalence-test`` checked together with the config's other
    one (a dB metric needs the rank test; a rank margin is below 0.5), before any test runs:
    the error names the flags, the option's check says what is wrong."""
    flags = {k: v for k, v in (("equivalence", args.equivalence),
                               ("equivalence_test", args.equivalence_test)) if v is not None}
    if not flags:
        return
    from kvstats.report.options import validate_report_options
    try:
        validate_report_options({**report_config, **flags})
    except ValueError as exc:
        given = " and ".join(_REPORT_FLAGS[k] for k in flags)
        raise ValueError(f"{given}: {exc} (on the command line: --equivalence-test rank|ratio; "
                         "--equivalence none drops the margins)") from None


def _check_metrics_keep_margins(metrics, report_config, manifest, margins=None) -> None:
    """Each metric given an equivalence margin must be in the family (its TOST joins it):
    the margins of ``--equivalence`` (``margins``), else of the sweep's config; the family
    of ``--metrics``, else of the config's ``[report] metrics``. The error names the flags to
    type: the metrics to add, or (a config's margins) ``--equivalence`` to drop them.

    Examples
    --------
    >>> _check_metrics_keep_margins(["snr_t"], {"equivalence": {"kl": 0.1}}, "out/manifest.json")
    Traceback (most recent call last):
    ...
    ValueError: --metrics snr_t leaves out kl, which the sweep's config gives an equivalence margin ([report] equivalence = {'kl': 0.1}, in out/manifest.json); keep them: --metrics snr_t kl, or drop the margins: --equivalence none
    >>> _check_metrics_keep_margins(None, {"metrics": ["kl"]}, "out/manifest.json", {"snr_t": 0.1})
    Traceback (most recent call last):
    ...
    ValueError: --equivalence gives snr_t a margin, but the family leaves it out (the [report] metrics = ['kl'] of the sweep's config); add it: --metrics kl snr_t
    >>> _check_metrics_keep_margins(None, {"metrics": ["kl"], "equivalence": {"snr_t": 0.1}}, "m") is None
    True
    """
    family = metrics if metrics is not None else report_config.get("metrics")
    given = margins is not None
    margins = dict(report_config.get("equivalence") or {}) if margins is None else margins
    left_out = [m for m in margins if family is not None and m not in family]
    if not left_out or not (given or metrics is not None):   # the config's own pair: checked at load
        return
    add = f"--metrics {' '.join([*family, *left_out])}"
    if given:
        where = (f"--metrics {' '.join(metrics)}" if metrics is not None
                 else f"the [report] metrics = {list(family)} of the sweep's config")
        them = "it" if len(left_out) == 1 else "them"
        raise ValueError(f"--equivalence gives {', '.join(left_out)} a margin, but the family leaves "
                         f"{them} out ({where}); add {them}: {add}")
    kept = [f"--equivalence {m}={d!r}" for m, d in margins.items() if m in family]
    raise ValueError(f"--metrics {' '.join(metrics)} leaves out {', '.join(left_out)}, which "
                     f"the sweep's config gives an equivalence margin ([report] equivalence = "
                     f"{margins}, in {manifest}); keep them: {add}, or drop the margins: "
                     f"{' '.join(kept) or '--equivalence none'}")


def _distributions_text(width: int = 100) -> str:
    """The distributions a config may name, one per entry with the ``params`` it accepts
    and their defaults: the built-ins, the registered ones, then ``real`` (a capture, not a
    name to register).

    Examples
    --------
    >>> print(_distributions_text().splitlines()[2])
      heavy_tailed      nu=3.0, scale=1.0
    """
    from kvstats.data.register import distribution_names
    from kvstats.data.synthetic import default_params

    names = distribution_names()
    pad = max(map(len, [*names, REAL])) + 2
    lines = ["Distributions (and the params a config may give each, with their defaults):"]
    for name in names:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(default_params(name).items()))
        lines += textwrap.wrap(params or "no params", width,
                               initial_indent=f"  {name:<{pad}}", subsequent_indent=" " * (pad + 2),
                               break_on_hyphens=False)
    lines.append(f"  {REAL:<{pad}}{REAL_ABOUT}")
    return "\n".join(lines)


def _cmd_schemes(args: argparse.Namespace, say: Stdout) -> int:
    from kvstats.data.register import user_distributions
    from kvstats.plugins import _KEY as PLUGINS_KEY
    from kvstats.plugins import PluginError, load_plugins, plugin_summary
    from kvstats.quant.register import user_schemes

    refs = args.plugins or ()
    for ref in refs:   # named as --plugins, relative to the working directory (no config here)
        if os.path.isfile(ref) and not ref.endswith(".py"):
            raise ValueError(f"--plugins {ref!r} is a file but not a .py file; a plugin is a "
                             "Python file (my_schemes.py) or an importable module name")
        path_like = ref.endswith(".py") or os.sep in ref or "/" in ref   # else a module name
        if path_like and os.path.isdir(os.path.expanduser(ref)):
            raise ValueError(f"--plugins {ref!r} is a folder; a plugin is a Python file "
                             "(my_schemes.py) or an importable module name")
        if path_like and not os.path.isfile(os.path.expanduser(ref)):
            raise ValueError(f"--plugins: file {ref!r} does not exist (a relative path is "
                             f"resolved against the working directory, {os.getcwd()})")
    try:
        resolved = load_plugins(refs)
    except PluginError as exc:   # its message names the config key; here it is the flag
        raise ValueError(str(exc).replace(PLUGINS_KEY, "--plugins", 1)) from None
    say(_schemes_text(params=True))
    say("  (what each parameter does: docs/qjl.md, docs/formats.md, docs/usage.md)")
    say(_distributions_text())
    users = {**{f"scheme {n}": o for n, o in user_schemes().items()},
             **{f"distribution {n}": o for n, o in user_distributions().items()}}
    for what, origin in users.items():
        say(f"  {what}: registered by {origin or 'this process'}")
    for line in plugin_summary(resolved):   # a check of a plugin: one that registered nothing says so
        if " registered no " in line:
            say("  " + line)
    return 0


#: kvstats.quant.codebook.MAX_BETA_DIM, the largest d_pad whose sphere codebook is solved
#: (written out: that module imports scipy, which a refused --dim should not wait for)
_THEORY_MAX_DIM = 1 << 16


def _cmd_theory(args: argparse.Namespace, say: Stdout) -> int:
    from kvstats._checks import check_int

    dim = check_int(args.dim, "--dim", low=3, high=_THEORY_MAX_DIM)
    bits = [check_int(b, "--bits", low=1, high=8) for b in args.bits or (2, 3, 4, 5, 6)]
    if len(set(bits)) < len(bits):   # as a config's budgets: a repeat is a slip, not two rows
        raise ValueError(f"--bits must not repeat values; received {bits}")
    from kvstats import theory   # scipy: after the arguments are checked
    from kvstats.quant.rotation import next_pow2

    d_pad = next_pow2(dim)
    say(f"d = {dim} (rotated and coded as d_pad = {d_pad}); D_n = Lloyd–Max MSE per coordinate of the "
        f"sphere-coordinate density of dimension {d_pad} (kvstats.theory)")
    head = (f"{'n':>2} {'D_n':>11} {'d_pad*D_n':>10} {'N(0,1) D_n':>11} {'SNR_k MSE(n)':>13} "
            f"{'SNR_k prod(n)':>14} {'ipvar QKQV/KQV':>15} {'ipvar resid':>12}")
    say(head)
    say("-" * len(head))
    # Padded (d < d_pad): the rotation codes d_pad coordinates and the decode keeps a
    # d-dimensional projection of their error, which has no closed form (the report's
    # theory table gives no row either); the residual, in R^d, is sketched with m = d_pad.
    padded = d_pad != dim
    resid = theory.residual_inflation(dim, d_pad)
    dash = "–"
    for b in bits:
        rel = theory.unit_vector_mse(b, d_pad)
        mse_snr, prod_snr, inflation, resid_s = (f"{dash:>13}", f"{dash:>14}", f"{dash:>15}",
                                                 f"{dash:>12}")
        if not padded:
            mse_snr = f"{-10 * math.log10(rel):13.2f}"
        if b >= 2:
            resid_s = f"{resid:12.4f}"
            if not padded:
                rel_prod = theory.unit_vector_mse(b - 1, d_pad) * resid
                prod_snr = f"{-10 * math.log10(rel_prod):14.2f}"
                inflation = f"{theory.bit_trade_inflation(b, d_pad):15.3f}"
        say(f"{b:>2} {theory.lloyd_max_distortion(b, 'beta', d_pad):11.4e} {rel:10.5g} "
            f"{theory.lloyd_max_distortion(b, 'gaussian'):11.5g} {mse_snr} "
            f"{prod_snr} {inflation} {resid_s}")
    if padded:
        say(f"d = {dim} is not a power of two: a rotated scheme codes d_pad = {d_pad} coordinates and "
            f"keeps a {dim}-dimensional projection, whose error has no closed form (docs/theory.md, "
            f"'Padded dimensions'): no SNR or same-budget prediction (–); the residual ratio is "
            f"(π/2 − 1/d)·d/d_pad = residual_inflation({dim}, {d_pad}).")
        say(f"SNR in dB. Asymptotic inflation: (π/2)·d/d_pad = {math.pi / 2 * dim / d_pad:.4f} "
            "(QJL residual over scalar residual).")
        return 0
    say(f"SNR in dB. Asymptotic inflations: 2π = {2 * math.pi:.4f} (QKQV/KQV at equal n, "
        f"as D_(n−1)/D_n → 4), π/2 = {math.pi / 2:.4f} (QJL residual over scalar residual).")
    return 0


#: What an interrupted command leaves, and what to do (``--resume`` is the sweep's alone).
_INTERRUPTED = {
    # a sweep's note counts its finished cells from the grid's start; without it, none ran
    "sweep": "stopped before any cell was computed; rerun the same command",
    "report": "the output folder keeps its earlier report or none; rerun the same command",
    "schemes": "nothing was written",
    "theory": "nothing was written",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kvstats`` command; returns the exit status.

    Examples
    --------
    >>> from kvstats.cli import main
    >>> main(["theory", "--dim", "128", "--bits", "4"])  # doctest: +ELLIPSIS
    d = 128 ...
    0
    """
    _replace_unencodable()   # a cp1252 console prints "?" for π, not a traceback
    say, parser = Stdout(), build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help or a usage error: argparse wrote; flush before the exit does
        say.flush()
        raise
    handlers = {"sweep": _cmd_sweep, "report": _cmd_report, "schemes": _cmd_schemes,
                "theory": _cmd_theory}
    try:
        with warnings.catch_warnings(), sigterm_as_interrupt():   # both restored afterwards
            warnings.showwarning = warning_printer(args.command)
            code = handlers[args.command](args, say)
    except (ValueError, TypeError, *raised("kvstats.sweep.store", "SweepLockedError")) as exc:
        if computing_error(exc):
            raise   # a bug where a cell or a report was computed (`len(5)` in a plugin): the traceback, exit 1
        # bad input, or a folder another sweep writes into: a one-line message, not a traceback
        return print_error(args.command, exc, error_text(exc), 2)
    except OSError as exc:  # missing, unreadable or unwritable files and folders; closed pipes
        return print_error(args.command, exc, os_error_text(exc), 2)
    except ImportError as exc:  # an optional dependency the config needs (fp8 needs ml_dtypes)
        if missing_package(exc) is None:
            raise   # not a package to install (see missing_package): the traceback says where
        return print_error(args.command, exc, import_error_text(exc), 2)
    except raised("kvstats.sweep.run", "WorkerDiedError") as exc:
        # not bad input: the machine killed a worker (memory?)
        return print_error(args.command, exc, error_text(exc), 1)   # with what is kept (a note)
    except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM (Terminated)
        # a sweep's note counts the cells it keeps (kvstats.sweep.run._kept)
        notes = getattr(exc, "__notes__", None)
        what = kept_note(notes[-1]) if notes else _INTERRUPTED[args.command]
        terminated = isinstance(exc, Terminated)
        try:
            close_bars()   # a bar left open (the report's energy tests) would take the line
            print(f"kvstats {args.command}: {'terminated' if terminated else 'interrupted'}; {what}",
                  file=sys.stderr)
        except BrokenPipeError:
            discard("stderr")
        return 143 if terminated else 130
    return PIPE_CLOSED if say.closed and code == 0 else code


if __name__ == "__main__":
    sys.exit(main())
