"""`kvstats report` (and a sweep's report phase) tells a bug from bad input, as the sweep does.

A ValueError or TypeError raised by a bug inside the report's computation (its tables,
tests, figures, document, crossover lines) was printed as one line with exit 2, as if the
user's input were wrong, and the traceback that locates the bug was lost. Now the input is
checked before any compute (options, pairs, frame, the metrics and trials the tests need,
the family's permutations) and an error raised after that carries the note
"[report: computing ...]", which kvstats._cli_output.computing_error recognises: the command
lets it propagate (the traceback, exit 1). Each bad input stays one line and 2, and is
found before the compute starts (the tests below make the compute itself fail if reached).
"""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import kvstats.analysis.compare as compare_module
import kvstats.report.render as render
from kvstats._cli_output import computing_error
from kvstats.analysis import compare_schemes
from kvstats.cli import main
from kvstats.report import hypothesis_report
from kvstats.report.options import validate_report_options

from _tiny_sweep import tiny_toml

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))
from _sweep_frames import clustered_frame, make_frame, sweep_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["--no-figures", "--no-progress"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A tiny finished sweep (no report), written once for the module's tests."""
    where = tmp_path_factory.mktemp("sweep")
    (where / "c.toml").write_text(tiny_toml())
    assert main(["sweep", "--config", str(where / "c.toml"), "--out", str(where / "out"),
                 "--no-report", "--workers", "1", "--no-progress"]) == 0
    return where / "out"


def _copy(sweep_dir: Path, dest: Path) -> Path:
    shutil.copytree(sweep_dir, dest)
    return dest


def _old_sweep(sweep_dir: Path, dest: Path, edit) -> Path:
    """A copy of the sweep whose results ``edit`` changed, under a manifest of the first
    layout (``"kvstats_sweep": 1``, no results record), which load_result reads unchecked:
    what a sweep of an older kvstats (or one whose cells wrote a NaN) gives the report."""
    out = _copy(sweep_dir, dest)
    table = out / "results.parquet"
    edit(pd.read_parquet(table)).to_parquet(table)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.pop("results", None)
    manifest["kvstats_sweep"] = 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _boom(exc: Exception):
    def raising(*args, **kwargs):
        raise exc
    return raising


# --- a bug while the report computes: the traceback, exit 1 ------------------------------

@pytest.mark.parametrize("target, exc", [
    # the report's own names (render imports them), one per stage of its compute
    ("kvstats.report.render.summary_table", ValueError("boom in the summary")),
    ("kvstats.analysis.compare._pair_rows", TypeError("boom in the tests")),
    ("kvstats.report.render.theory_table", ValueError("boom in the theory table")),
    ("kvstats.report.render.build_document", ValueError("boom in the document")),
    ("kvstats.report.render._resolution", TypeError("boom in the json")),
    ("kvstats.analysis.crossover.crossover_sentences", ValueError("boom in the crossover lines")),
])
def test_a_bug_while_the_report_computes_is_its_traceback(sweep_dir, tmp_path, monkeypatch, target,
                                                          exc, capsys):
    """Before: main returned 2 and printed 'kvstats report: error: boom ...' in one line."""
    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(sys.modules[module], name, _boom(exc))
    with pytest.raises(type(exc)) as info:
        main(["report", str(_copy(sweep_dir, tmp_path / "s")), *QUIET])
    assert info.value is exc and computing_error(info.value)
    assert any(n.startswith("[report: computing ") for n in info.value.__notes__)
    assert "error:" not in capsys.readouterr().err   # no one-line message


def test_the_python_api_raises_the_same_exception_with_the_note(monkeypatch, tmp_path):
    """hypothesis_report keeps its exception: the same object and message, one note added."""
    exc = ValueError("boom")
    monkeypatch.setattr(render, "theory_table", _boom(exc))
    res = sweep_result(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=12))
    with pytest.raises(ValueError) as info:
        hypothesis_report(res, tmp_path / "r", figures=False, energy=False)
    assert info.value is exc and str(exc) == "boom"
    assert exc.__notes__ == ["[report: computing the tables, its input checked]"]


def test_the_command_exits_1_with_the_traceback(sweep_dir, tmp_path):
    """The process itself: exit 1, the traceback naming the function that failed, the note."""
    script = ("import sys, kvstats.report.render as r\n"
              "def theory_table(*a, **k):\n"
              "    return [][0:1].index(0)\n"       # a ValueError of a bug: list.index(x)
              "r.theory_table = theory_table\n"
              "from kvstats.cli import main\n"
              f"sys.exit(main(['report', {str(_copy(sweep_dir, tmp_path / 's'))!r}, '--no-figures', "
              "'--no-progress']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
                              filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))})
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" in proc.stderr and "in theory_table" in proc.stderr
    assert "[report: computing the tables, its input checked]" in proc.stderr
    assert "kvstats report: error:" not in proc.stderr


def test_a_bug_in_a_sweeps_report_phase_is_its_traceback(tmp_path, monkeypatch):
    """`kvstats sweep` writes its report with the same function: a bug there is one too."""
    exc = ValueError("boom in the sweep's report")
    monkeypatch.setattr(render, "summary_table", _boom(exc))
    (tmp_path / "c.toml").write_text(tiny_toml())
    with pytest.raises(ValueError) as info:
        main(["sweep", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o"),
              "--workers", "1", *QUIET])
    assert info.value is exc and computing_error(exc)


# --- bad input: one line, exit 2, found before any compute --------------------------------

@pytest.fixture
def no_compute(monkeypatch):
    """The report's compute fails the test if it starts (an AssertionError, which the
    command does not catch): so the error must come from a check before it."""
    def reached(*args, **kwargs):
        raise AssertionError("the report's compute started before the input was checked")
    energy_rows = compare_module._energy_rows

    def energy(jobs, *args, **kwargs):   # called without jobs where energy=False
        if jobs:
            reached()
        return energy_rows(jobs, *args, **kwargs)
    monkeypatch.setattr(render, "summary_table", reached)
    monkeypatch.setattr(compare_module, "_energy_rows", energy)


def _one_line_2(argv, capsys, *words):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert all(w in err for w in words), err


def test_a_family_too_large_for_its_energy_tests_is_bad_input(sweep_dir, tmp_path, capsys, no_compute):
    """--alpha 1e-7 asks each energy test for more than 10^7 permutations: compare_schemes
    refused it only after the summary (and its own rows) were computed."""
    _one_line_2(["report", str(_copy(sweep_dir, tmp_path / "s")), "--alpha", "1e-7", *QUIET], capsys,
                "needs B =", "energy_resolution='fixed'")


def test_a_tested_metric_the_sweep_lacks_is_bad_input(sweep_dir, tmp_path, capsys, no_compute):
    """A sweep from before the pooled SNR columns, and --metrics snr_k_pooled."""
    old = _old_sweep(sweep_dir, tmp_path / "old",
                     lambda f: f.drop(columns=[c for c in f.columns if c.endswith("_pooled")]))
    _one_line_2(["report", str(old), "--metrics", "kl", "snr_k_pooled", *QUIET], capsys,
                "metrics has 'snr_k_pooled', which the frame lacks")


def test_a_nan_metric_in_the_sweep_is_bad_input(sweep_dir, tmp_path, capsys, no_compute):
    """A cell that wrote a NaN metric: its report is refused in one line naming the row."""
    def nan(f):
        f.loc[f.index[3], "kl"] = np.nan
        return f
    _one_line_2(["report", str(_old_sweep(sweep_dir, tmp_path / "nan", nan)), *QUIET], capsys,
                "has NaN in metric column(s) ['kl']", "recompute that cell")


def test_the_flags_stay_bad_input(sweep_dir, tmp_path, capsys, no_compute):
    _one_line_2(["report", str(_copy(sweep_dir, tmp_path / "s")), "--comparison", "KQV:nope", *QUIET],
                capsys, "nope")


def _refused_before_compute(res, **kwargs):
    """The input error hypothesis_report raises, with no computing note."""
    with pytest.raises(ValueError) as info:
        hypothesis_report(res, kwargs.pop("out"), figures=False, **kwargs)
    assert not computing_error(info.value) and not getattr(info.value, "__notes__", None)
    return str(info.value)


def test_trials_two_schemes_do_not_share_are_bad_input(tmp_path, no_compute):
    frame = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=10)
    frame = frame[~((frame["scheme"] == "KQV") & (frame["trial"] == 0))]
    text = _refused_before_compute(sweep_result(frame), out=tmp_path / "r")
    assert "trial 0 only in QKQV's rows" in text


def test_real_trials_without_their_text_are_bad_input(tmp_path, no_compute):
    frame = clustered_frame(n_texts=3, per_text=3)
    frame.loc[frame.index[:5], "cluster"] = np.nan   # an old sweep resumed by a newer kvstats
    text = _refused_before_compute(sweep_result(frame), out=tmp_path / "r")
    assert "real-cache trial(s) without a 'cluster'" in text


def test_pooled_snrs_some_rows_lack_are_bad_input(tmp_path, no_compute):
    frame = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=10).assign(snr_k_pooled=1.0)
    frame.loc[frame.index[0], "snr_k_pooled"] = np.nan
    text = _refused_before_compute(sweep_result(frame), out=tmp_path / "r",
                                   metrics=["kl", "snr_k_pooled"])
    assert "rows lack it" in text


# --- the check's count of the family is compare_schemes' ---------------------------------

PAIRS = [("KQV", "QKQV")]


def _compare(res, opts):
    def compare(f, **changed):
        kw = dict(alpha=opts["alpha"], correction=opts["correction"],
                  energy_resamples=opts["energy_resamples"],
                  energy_resolution=opts["energy_resolution"], energy_stop=opts["energy_stop"],
                  seed=opts["seed"], equivalence=opts["equivalence"],
                  equivalence_test=opts["equivalence_test"], pairing=opts["pairing"],
                  metrics=opts["metrics"], energy=opts["energy"], progress=False)
        return compare_schemes(render._as_tested(f, opts["pairing"]), PAIRS, **{**kw, **changed})
    return compare


def _zero_kl(f):
    return f.assign(kl=0.0)   # a ratio TOST of two zero means is undefined: no test


@pytest.mark.parametrize("options, edit", [
    ({}, None),
    ({"pairing": "none"}, None),
    ({"equivalence": {"kl": 0.2}}, None),
    ({"equivalence": {"kl": 0.2}, "pairing": "none"}, None),
    ({"equivalence": {"kl": 0.2}}, _zero_kl),
    ({"equivalence": {"kl": 0.1, "snr_t": 0.1}, "equivalence_test": "rank"}, None),
    ({"metrics": ["kl"], "energy": False}, None),
    ({"metrics": ["kl", "snr_t"]}, lambda f: f.assign(snr_k=np.where(f["scheme"] == "KQV", np.inf, f["snr_k"]))),
])
def test_the_checks_family_size_brackets_compare_schemes_count(options, edit):
    """_check_family counts the family without computing it (to refuse one needing more than
    MAX_FAMILY_PERMUTATIONS per energy test before any compute): its bounds must hold
    compare_schemes' own attrs["n_tests"], and meet where no TOST can be undefined. The
    last case has no finite 6D point for KQV: its pairs have no energy test."""
    frame = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=8)
    res = sweep_result(edit(frame) if edit else frame)
    opts = validate_report_options({**dict(res.config.report), "energy_resamples": 19, **options})
    compare = _compare(res, opts)
    low, high = render._check_family(res.frame, PAIRS, opts, compare)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n_tests = compare(res.frame, energy_resolution="fixed").attrs["n_tests"]
    assert low <= n_tests <= high
    assert (low == high) == (not opts["equivalence"])
    if edit is _zero_kl:   # the two TOSTs (one per budget) are undefined: the least is exact
        assert n_tests == low < high


def _alpha_between(low: int, high: int) -> float:
    """An alpha at which a family of ``low`` tests needs at most 10^7 permutations per
    energy test and one of ``high`` more (Holm: B ~ n/alpha)."""
    from kvstats.stats.sequential import required_resolution

    alpha = (low + high) / 2 / compare_module.MAX_FAMILY_PERMUTATIONS
    b = [required_resolution(n, alpha).n_permutations for n in (low, high)]
    assert b[0] <= compare_module.MAX_FAMILY_PERMUTATIONS < b[1], b
    return alpha


@pytest.mark.parametrize("edit, refused", [(_zero_kl, False), (None, True)])
def test_where_the_tosts_decide_they_are_counted(monkeypatch, edit, refused):
    """Between the bounds the check counts the defined TOSTs (compare_schemes without energy
    tests): undefined ones leave the family small enough, defined ones make it too large."""
    frame = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=8)
    res = sweep_result(edit(frame) if edit else frame)
    opts = validate_report_options({**dict(res.config.report), "energy_resamples": 19,
                                    "equivalence": {"kl": 0.2}, "metrics": ["kl"]})
    low, high = render._check_family(res.frame, PAIRS, opts, _compare(res, opts))
    opts = {**opts, "alpha": _alpha_between(low, high)}

    energy_rows = compare_module._energy_rows

    def energy(jobs, *args, **kwargs):   # called without jobs where energy=False
        assert not jobs, "an energy test ran in the check"
        return energy_rows(jobs, *args, **kwargs)
    monkeypatch.setattr(compare_module, "_energy_rows", energy)
    if refused:
        with pytest.raises(ValueError, match=f"over this family of {high} tests needs B ="):
            render._check_family(res.frame, PAIRS, opts, _compare(res, opts))
    else:
        assert render._check_family(res.frame, PAIRS, opts,
                                    _compare(res, opts)) == (low, low)
