"""What a new user runs first: the documented examples work and bad input is named.

Each test here pins a defect found by walking through README.md and docs/usage.md as a
new user (session 7): an example that failed or silently tested nothing, or an entry
point that accepted a mistake without saying so.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import kvstats
from kvstats.sweep import SweepConfig

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _usage_config() -> dict:
    """The first TOML block of docs/usage.md ("The config file"), parsed."""
    text = (DOCS / "usage.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block is not None, "docs/usage.md has no ```toml block"
    return tomllib.loads(block.group(1))


def test_usage_config_example_runs_and_tests_its_pairs(tmp_path):
    # The example once listed the default pairs (KQV/QKQV, KQV/KV, QKQV/KV) beside a
    # sweep of KQV and a QKQV labelled QKQV-orth: every pair was skipped and the report
    # held 0 tests; and its nu = 1.05 keys overflowed the default float16 norms at n = 2.
    # Run it at one budget, N = 128 and 30 trials: small, and the nu = 1.05 case still
    # holds a key whose norm overflows float16 (3.6e5), which the old example failed on.
    raw = _usage_config()
    raw["sweep"].update(budgets=[2], n_keys=[128], n_trials=30)
    raw["report"].update(energy_resamples=19, bootstrap_resamples=99, figures=False)
    cfg = SweepConfig.from_dict(raw)
    labels = [s.display() for s in cfg.schemes]
    assert all(a in labels and b in labels for a, b in cfg.comparisons)
    res = kvstats.run_sweep(cfg, out=tmp_path / "out", executor="serial", progress=False)
    comp = kvstats.hypothesis_report(res, tmp_path / "out").comparisons
    assert len(comp) > 0
    assert {tuple(p) for p in comp[["scheme_a", "scheme_b"]].to_numpy()} == set(cfg.comparisons)
    assert set(res.frame["params"]) == {"nu=1.05", "nu=1.5", "nu=3.0"}


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("walk") / "sweep"
    cfg = {"schemes": ["KQV", "QKQV"], "budgets": [3], "distributions": ["gaussian"],
           "dims": [32], "n_keys": [16], "n_trials": 8, "seed": 1,
           "report": {"figures": False, "energy_resamples": 19, "bootstrap_resamples": 99}}
    return kvstats.run_sweep(cfg, out=out, executor="serial", progress=False)


def test_hypothesis_report_refuses_an_unknown_comparison_label(small_sweep, tmp_path):
    # An explicit pair naming a label the sweep lacks was skipped like an absent default
    # pair: a typo gave a report of 0 tests without a word.
    out = tmp_path / "rep"
    with pytest.raises(ValueError, match=r"comparisons label must be one of \['KQV', 'QKQV'\]; "
                                         r"received 'KIVI'"):
        kvstats.hypothesis_report(small_sweep, out, comparisons=[("KQV", "KIVI")])
    assert not out.exists()   # refused before the folder is touched


def test_hypothesis_report_explicit_known_pair_still_runs(small_sweep, tmp_path):
    rep = kvstats.hypothesis_report(small_sweep, tmp_path / "rep", comparisons=[("QKQV", "KQV")])
    assert set(rep.comparisons["scheme_a"]) == {"QKQV"} and len(rep.comparisons) > 0


def test_hypothesis_report_comparisons_as_a_generator(small_sweep, tmp_path):
    # the label check reads the pairs once; compare_schemes must still receive them
    rep = kvstats.hypothesis_report(small_sweep, tmp_path / "rep",
                                    comparisons=(p for p in [("KQV", "QKQV")]))
    assert len(rep.comparisons) > 0


@pytest.mark.parametrize("bad", ["KQV", [("KQV", "QKQV", "KV")], [3], ["KQ"]])
def test_hypothesis_report_malformed_comparisons_are_a_type_error(small_sweep, tmp_path, bad):
    with pytest.raises(TypeError, match="comparisons must be"):
        kvstats.hypothesis_report(small_sweep, tmp_path / "rep", comparisons=bad)


def test_hypothesis_report_pairs_as_array_rows(small_sweep, tmp_path):
    import numpy as np

    rep = kvstats.hypothesis_report(small_sweep, tmp_path / "rep",
                                    comparisons=np.array([["KQV", "QKQV"]]))
    assert len(rep.comparisons) > 0


def _comparisons_frame():
    import pandas as pd

    return pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
                         "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV",
                         "scheme_b": "QKQV", "metric": "kl", "test": "sign",
                         "effect": [0.2, -0.5], "effect_low": [0.1, -0.6],
                         "effect_high": [0.3, -0.4], "significant": True})


def test_plot_crossover_names_a_text_effect_column():
    # a comparisons table whose 'effect' arrives as text (a report written before its
    # tables wrote NaN, read with kvstats.results.read_table): the plot failed deep in
    # numpy ("unsupported operand type(s) for -: 'str' and 'str'")
    from kvstats.report import plot_crossover

    t = _comparisons_frame()
    t["effect_low"] = t["effect_low"].astype(str)
    with pytest.raises(TypeError, match=r"comparisons column 'effect_low' must be numeric; "
                                        r"received dtype (object|str)"):
        plot_crossover(t, ["kl"], pair=("KQV", "QKQV"))


def test_plot_crossover_names_missing_columns():
    from kvstats.report import plot_crossover

    with pytest.raises(ValueError, match=r"comparisons lacks the column\(s\) \['effect_high'\]"):
        plot_crossover(_comparisons_frame().drop(columns="effect_high"), ["kl"],
                       pair=("KQV", "QKQV"))
    assert len(plot_crossover(_comparisons_frame(), ["kl"], pair=("KQV", "QKQV")).axes) == 1


def test_usage_real_example_fits_the_capture(tmp_path):
    # The real-cache example asked for n_trials = 78 of a selection of 26 texts x 2 layers
    # x 1 KV head = 52 trials, which the sweep refuses. A fake capture of the shape of
    # results/real/capture.npz (26 texts, 30 layers, 3 KV heads; docs/real_model.md) with
    # tiny N and d stands in for it.
    import json

    import numpy as np

    blocks = re.findall(r"```toml\n(.*?)```", (DOCS / "usage.md").read_text(), re.S)
    raw = tomllib.loads(blocks[1])
    path = tmp_path / "capture.npz"
    x = np.ones((26, 30, 3, 8, 4), np.float32)   # (texts, layers, KV heads, N, d)
    np.savez(path, K=x, V=x, q=np.ones((26, 30, 9, 8, 4), np.float32), meta=json.dumps({}))
    for entry in raw["distributions"]:
        for p in entry["params"]:
            p["path"] = str(path)
    raw["sweep"].update(dims=[4], n_keys=[8])
    cfg = SweepConfig.from_dict(raw)   # as written: a whole config, schemes included
    assert len(cfg.cells()) == 2 * len(cfg.budgets) * len(cfg.schemes) == 8


_GRID = {"budgets": [3], "distributions": ["gaussian"], "dims": [32], "n_keys": [16],
         "n_trials": 4}


def test_config_warns_when_no_default_pair_is_in_the_sweep():
    # KQV beside K4V2: every default pair (KQV/QKQV, KQV/KV, QKQV/KV) is skipped and the
    # report held 0 tests without a word
    with pytest.warns(UserWarning, match=r"no comparison: .*\['K4V2', 'KQV'\].*holds no tests"):
        SweepConfig.from_dict({**_GRID, "schemes": ["KQV", "K4V2"]})


@pytest.mark.parametrize("extra", [{"schemes": ["KQV", "K4V2"], "comparisons": []},
                                   {"schemes": ["KQV", "QKQV", "K4V2"]},
                                   {"schemes": ["K4V2"]}])
def test_config_no_warning_when_a_pair_runs_or_none_is_asked(extra):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SweepConfig.from_dict({**_GRID, **extra})


def _real_model_using_it() -> str:
    text = (DOCS / "real_model.md").read_text()
    return text[text.index("## Using it"):text.index("## The sweep on a capture")]


def test_real_model_first_run_prints_the_quality_columns_it_names():
    # "Using it" printed summarize_quality's 20 columns, which pandas elides in a terminal
    # ("..."; mean_kl among the hidden ones); it now selects the ones to read. Each must
    # be a column summarize_quality returns (its docstring's input, no model needed), and
    # the printed header the doc shows must be that selection.
    import pandas as pd

    from kvstats.models.quality import summarize_quality

    section = _real_model_using_it()
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    chosen = re.search(r"quality\[\[(.*?)\]\]", code, re.S)
    assert chosen is not None, "the example should print chosen columns of summarize_quality"
    columns = re.findall(r'"(\w+)"', chosen.group(1))
    df = pd.DataFrame({"scheme": "KV", "bits": 4.0, "window": 0, "mode": "prefill",
                       "text": [0, 0, 1], "position": [0, 1, 0], "kl": [0.0, 0.2, 0.1],
                       "top1_agree": [True, False, True], "nll_ref": [1.0, 1.0, 1.0],
                       "nll_quant": [1.0, 1.2, 1.1]})
    # kl_quality's memory record (bytes per token, fp16 bytes per token, held, fixed)
    df.attrs["memory"] = {"KV:4": (6300.0, 23040.0, 35446.0, 1865344.0)}
    summary = summarize_quality(df)
    assert set(columns) <= set(summary.columns), sorted(set(columns) - set(summary.columns))
    shown = re.search(r"printed, for.*?:\n\n    ([^\n]*)\n", section, re.S).group(1).split()
    assert shown == columns



def test_real_model_capture_size_is_the_one_the_example_writes():
    # The first run captures 3 of SmolLM2's 30 layers (layers=[0, 15, 29]); the text kept
    # the size of the all-layer capture it once made (59 MB; the file is 6 MB). The size
    # follows from the call: texts x layers x (3 K + 3 V + 9 q heads) x tokens x d = 64,
    # float32, stored uncompressed by write_capture (np.savez).
    section = _real_model_using_it()
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    call = re.search(r"capture\(model, tok, stdlib_texts\(\)\[:(\d+)\], max_tokens=(\d+), "
                     r"path=\"cap.npz\",\s*layers=\[([\d, ]+)\]\)", code)
    assert call is not None, "the example's capture call changed: update this test"
    texts, tokens, layers = int(call[1]), int(call[2]), len(call[3].split(","))
    stated = re.search(r"\(`cap.npz`: (\d+) texts × (\d+) tokens[^,]*, (\d+) MB\)", section)
    assert stated is not None and (int(stated[1]), int(stated[2])) == (texts, tokens)
    size_mb = texts * layers * (3 + 3 + 9) * tokens * 64 * 4 / 1e6
    assert abs(int(stated[3]) - size_mb) <= 0.1 * size_mb, (stated[0], size_mb)

def test_real_model_small_sweep_config_fits_the_capture_it_follows(tmp_path):
    # the small sweep of "Using it" reads the capture the example writes: 4 texts x 128
    # tokens of SmolLM2 (30 layers, 3 KV heads, 9 query heads, d = 64). A fake capture of
    # that shape stands in for it: the config must accept it (d, N, the 12 trials of a
    # layer) and make 2 layers x 2 budgets x 3 schemes = 12 cells, as the text says.
    import json

    import numpy as np

    block = re.search(r"```toml\n(.*?)```", _real_model_using_it(), re.S).group(1)
    raw = tomllib.loads(block)
    x = np.zeros((4, 30, 3, 128, 64), np.float32)
    np.savez(tmp_path / "cap.npz", K=x, V=x, q=np.zeros((4, 30, 9, 128, 64), np.float32),
             meta=json.dumps({}))
    (tmp_path / "real_small.toml").write_text(block)
    cfg = SweepConfig.from_toml(tmp_path / "real_small.toml")
    assert len(cfg.cells()) == 12 and cfg.n_trials == 12
    assert raw["distributions"][0]["params"][0]["path"] == "cap.npz"


def test_usage_equal_storage_recipe_compares_across_budgets(tmp_path):
    # docs/usage.md "Equal n is not equal storage": each scheme at its own budget, the pair
    # compared across budgets (smaller here: d = 64, N = 64, 12 trials, no figures)
    import pandas as pd

    blocks = re.findall(r"```toml\n(.*?)```", (DOCS / "usage.md").read_text(), re.S)
    raw = tomllib.loads(next(b for b in blocks if 'label = "TQ"' in b))
    raw["sweep"].update(dims=[64], n_keys=[64], n_trials=12)
    raw["report"].update(figures=False, energy_resamples=19, bootstrap_resamples=99)
    res = kvstats.run_sweep(raw, out=tmp_path / "o", executor="serial", progress=False)
    assert sorted(zip(res.frame.scheme, res.frame.budget)) == sorted([("TQ", 4.0)] * 12 + [("kivi", 2.0)] * 12)
    kvstats.hypothesis_report(res, tmp_path / "o")
    comp = pd.read_csv(tmp_path / "o" / "tables" / "comparisons.csv")
    assert set(zip(comp.scheme_a, comp.budget, comp.scheme_b, comp.budget_b)) == {("TQ", 4.0, "kivi", 2.0)}
    assert "TQ vs kivi (kivi at n = 2)" in (tmp_path / "o" / "report.md").read_text()


def test_usage_load_result_example_reads_a_finished_sweep(small_sweep, tmp_path, capsys):
    # docs/usage.md "Python": reading a folder a sweep wrote earlier (load_result was named
    # only in passing, with no example of getting a CLI sweep's table into Python)
    text = (DOCS / "usage.md").read_text()
    section = text[text.index("## Python"):text.index("## Your own scheme or distribution")]
    code = next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "load_result(" in b)
    edits = {'"results/quick"': repr(str(small_sweep.out)),
             '"results/quick_kl"': repr(str(tmp_path / "kl"))}
    for old, new in edits.items():
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    scope: dict = {}
    exec(compile(code, "usage.md", "exec"), scope)
    assert scope["f"].equals(small_sweep.frame)
    assert f"(3,) 2 {len(small_sweep.frame)}" in capsys.readouterr().out
    assert (tmp_path / "kl" / "report.md").is_file() and len(scope["rep"].comparisons) > 0


def test_run_sweep_resumes_by_default_as_usage_md_says(tmp_path):
    # docs/usage.md "Python": unlike the command (--resume), run_sweep reuses a folder's
    # checked cells by default; resume=False recomputes them (the page said only "rerun
    # without --resume", which a script cannot do)
    text = (DOCS / "usage.md").read_text()
    assert "in Python `resume=True` is the default" in text and "resume=False" in text
    cfg = {"schemes": ["KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
           "n_keys": [8], "n_trials": 4, "report": {"figures": False}}

    def statuses(**kw):
        res = kvstats.run_sweep(cfg, out=tmp_path / "o", executor="serial", progress=False, **kw)
        return [c["status"] for c in res.manifest["cells"]], res.frame

    first, frame = statuses()
    again, frame_again = statuses()
    fresh, _ = statuses(resume=False)
    assert (first, again, fresh) == (["computed"], ["resumed"], ["computed"])
    assert frame_again.equals(frame)


def kivi_snr_example(n_trials: int = 40) -> str:
    """docs/measurement.md's kivi numbers: mean per-key dB, pooled, coded keys, window."""
    import numpy as np

    t = kvstats.sample("gaussian", n_trials=n_trials, n_keys=256, dim=128, seed=0)
    K, V = kvstats.make_scheme("kivi", 2, 128, seed=0, draws=n_trials).roundtrip(t.K, t.V)
    db = 10 * np.log10((t.K ** 2).sum(-1) / ((K - t.K) ** 2).sum(-1))   # (trial, token)
    p = kvstats.error_profile(t, K, V)
    return (f"`snr_k` is {p.snr_k.mean():.2f} dB where its 224 coded keys average "
            f"{db[:, :224].mean():.2f} dB and the pooled SNR is {p.snr_k_pooled.mean():.2f} dB; "
            f"window {db[:, 224:].mean():.0f} dB")


def test_measurement_md_kivi_snr_numbers_come_out():
    # the per-key dB mean of a scheme with a float16 window is not its coded keys' SNR:
    # the numbers docs/measurement.md quotes, recomputed
    text = " ".join((DOCS / "measurement.md").read_text().split())
    shown = kivi_snr_example()
    assert shown.split("; window")[0] in text, shown
    assert "~" + shown.split("window ")[1] in text, shown


def test_usage_practical_notes_one_more_bit_example_prints_its_comments(capsys):
    # docs/usage.md "Practical notes": why QKQV at n = 2 beats n = 3 on nu = 1.5 keys in the
    # demo's report (one-hot keys after the rotation). The snippet's printed numbers must
    # be the ones its comments and the prose state.
    import textwrap

    text = (DOCS / "usage.md").read_text()
    notes = text[text.index("## Practical notes"):]
    code = textwrap.dedent(re.search(r"```python\n(.*?)```", notes, re.S).group(1))
    exec(compile(code, "usage.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    snr = [printed[i] for i in range(1, 8, 2)]
    assert snr == list(re.search(r"# ([\d.]+), ([\d.]+), ([\d.]+), ([\d.]+) dB", code).groups())
    assert f"{float(printed[-1]):.2f}" == re.search(r"# (0\.\d\d)\n", code).group(1)
    prose = " ".join(notes.split())
    assert f"({float(snr[0]):.1f} dB on one-hot keys)" in prose
    assert f"{round(100 * float(printed[-1]))}% of those keys' energy" in prose


def test_usage_progress_bar_example_has_the_shape_a_sweep_prints(tmp_path):
    # docs/usage.md showed '6/24 cells' after the bar began counting trials ('8/8 trials,
    # 2/2 cells'): the example must read as the bar does, digits and bar glyphs aside
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    def shape(line: str) -> str:
        line = re.sub(r"\|[^|]*\|", "|BAR|", line)
        return re.sub(r"\s+", " ", re.sub(r"\d+", "N", line)).strip()

    text = " ".join((DOCS / "usage.md").read_text().split())
    shown = re.search(r"the sweep's, `(sweep:[^`]*)`", text).group(1)
    (tmp_path / "c.toml").write_text('schemes = ["KQV", "QKQV"]\ndistributions = ["gaussian"]\n'
                                     '[sweep]\nbudgets = [2]\ndims = [16]\nn_keys = [8]\nn_trials = 3\n')
    # the bars show only on a terminal: stderr is a pseudo-terminal here, read as it is written
    master, slave = pty.openpty()
    # a window 120 columns wide (a new pseudo-terminal has 0, which tqdm draws as nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "kvstats.cli", "sweep", "--config", "c.toml", "--out",
                             "o", "--workers", "1", "--no-report"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=slave, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:          # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stderr = b"".join(chunks).decode(errors="replace")
    assert proc.wait() == 0, stderr
    printed = [part for part in re.split(r"[\r\n]", stderr) if part.startswith("sweep:") and "|" in part]
    assert printed and shape(shown) == shape(printed[-1]), (shown, printed[-1])


def _usage_section(start: str, end: str) -> str:
    text = (DOCS / "usage.md").read_text()
    return text[text.index(start):text.index(end)]


def test_usage_python_section_example_runs(tmp_path, monkeypatch, capsys):
    # docs/usage.md "Python": the first example, as written but smaller (12 trials, no
    # figures in the report; the two Shannon–φ planes it saves are still drawn). Its KL
    # table printed with pandas' default width hid the p-values and winners ("...").
    code = re.search(r"```python\n(.*?)```", _usage_section("## Python", "## Your own scheme"), re.S).group(1)
    edits = {'"n_trials": 50': '"n_trials": 12',
             '"report": {"energy_resamples": 99, "bootstrap_resamples": 199}':
                 '"report": {"energy_resamples": 19, "bootstrap_resamples": 99, "figures": False}'}
    for old, new in edits.items():
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "usage.md", "exec"), {})
    out = capsys.readouterr().out
    header = "distribution  budget scheme_a scheme_b    effect  pvalue_adjusted"
    assert header in out and "..." not in out.split(header)[1], out
    assert (tmp_path / "results" / "api" / "report.md").is_file()
    # the planes go under results/ (git-ignored), not into the folder it runs from (RB2 F2)
    assert (tmp_path / "results" / "api" / "shannon_phi_t.png").is_file()
    assert (tmp_path / "results" / "api" / "shannon_phi_k.png").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_usage_equal_storage_bits_snippet_prints_what_the_text_says(capsys):
    # docs/usage.md "Equal n is not equal storage": the stored bits before any sweep
    section = _usage_section("### Equal n is not equal storage", "### Paired and two-sample tests")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "usage.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()
    shown = re.search(r"prints (`.*?`) and\s+(`[^`]*`)", " ".join(section.split()))
    assert printed == re.findall(r"`([^`]*)`", shown.group(0))
    # and the kivi totals the lead-in quotes for longer contexts
    kivi = kvstats.make_scheme("kivi", 2, 128)
    assert [round(kivi.bits_per_coord(n).total, 2) for n in (1024, 4096)] == [3.41, 3.10]
    assert "stores 3.41 bits per coordinate on N = 1024 and 3.10 on N = 4096" in " ".join(section.split())


def test_usage_reading_a_report_equivalence_example_runs(small_sweep, tmp_path, capsys):
    # docs/usage.md "Reading a report": margins on a finished sweep, counted by verdict
    code = re.search(r"```python\n(.*?)```", _usage_section("## Reading a report", "The figures (`figures/*.png`"),
                     re.S).group(1)
    edits = {'"results/quick"': repr(str(small_sweep.out)),
             '"results/quick_equivalence"': repr(str(tmp_path / "eq")),
             '[("KQV", "KV")]': '[("KQV", "QKQV")]'}   # the small sweep has no KV
    for old, new in edits.items():
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    scope: dict = {}
    exec(compile(code, "usage.md", "exec"), scope)
    tost = scope["tost"]
    assert len(tost) == 1 and set(tost.metric) == {"kl"}
    assert set(tost.verdict) <= {"equivalent within δ", "different", "inconclusive"}
    assert "gaussian" in capsys.readouterr().out


def test_usage_shipped_configs_table_names_every_config():
    # docs/usage.md listed 5 of the 20 configs in experiments/ as "The shipped configs"
    import fnmatch

    root = DOCS.parent
    table = _usage_section("### The shipped configs", "### Real caches as a data source")
    named = []
    for row in table.splitlines():
        if row.startswith("| `experiments/"):
            named += re.findall(r"`([\w*.]+\.toml)`", row.split(" | ")[0].replace("experiments/", ""))
    for name in named:
        assert "*" in name or (root / "experiments" / name).is_file(), name
    configs = sorted(p.name for p in (root / "experiments").glob("*.toml"))
    missing = [c for c in configs if not any(fnmatch.fnmatch(c, n) for n in named)]
    assert not missing, f"docs/usage.md's table of shipped configs lacks {missing}"


@pytest.mark.parametrize("name", ["define_scheme", "check_scheme", "register_distribution"])
def test_usage_signatures_of_the_plugin_api_are_the_functions(name):
    # docs/usage.md "Your own scheme or distribution" gave define_scheme without
    # token_group_default and defaults, and check_scheme's keyword-only argument as positional
    import inspect

    section = " ".join(_usage_section("## Your own scheme or distribution", "## Reproduce one trial").split())
    shown = re.search(rf"`(?:kvstats\.)?{name}\((.*?)\)`", section).group(1)
    parts = []
    for p in inspect.signature(getattr(kvstats, name)).parameters.values():
        if p.kind is p.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}".replace("'", '"'))
    expected = ", ".join(parts)
    assert shown == expected, (shown, expected)


def test_usage_reproducibility_paragraph_holds(tmp_path):
    # docs/usage.md "Design of a sweep": the same config gives the same table and report
    # numbers in another folder; another root seed other trials
    import pandas as pd

    assert "**Reproducibility**" in (DOCS / "usage.md").read_text()
    cfg = {"schemes": ["KQV", "QKQV"], "budgets": [2], "distributions": ["gaussian"], "dims": [16],
           "n_keys": [8], "n_trials": 12, "seed": 5,
           "report": {"figures": False, "energy_resamples": 19, "bootstrap_resamples": 99}}

    def run(name, **changes):
        res = kvstats.run_sweep({**cfg, **changes}, out=tmp_path / name, executor="serial", progress=False)
        rep = kvstats.hypothesis_report(res, tmp_path / name)
        return res.frame, rep.comparisons, rep.summary

    frame, comp, summary = run("a")
    frame_b, comp_b, summary_b = run("b")
    assert frame.equals(frame_b)
    pd.testing.assert_frame_equal(comp, comp_b)
    pd.testing.assert_frame_equal(summary, summary_b)
    other = run("c", seed=6)[0]
    assert not (other.kl.to_numpy() == frame.kl.to_numpy()).any()


def test_usage_per_trial_columns_are_the_frames(small_sweep):
    # docs/usage.md "Outputs": the per-trial columns it lists are exactly the results table's
    text = " ".join((DOCS / "usage.md").read_text().split())
    listed = text[text.index("Per-trial columns:"):text.index("### The store")]
    lists = [part.split(", ") for part in re.findall(r"`([^`]*)`", listed) if ", " in part]
    assert len(lists) == 2 and lists[0][0] == "snr_k" and lists[1][0] == "distribution", lists
    assert sorted(lists[0] + lists[1]) == sorted(small_sweep.frame.columns)


def test_usage_another_models_cache_example_prints_its_comment(tmp_path, monkeypatch, capsys):
    # docs/usage.md "Real caches": a capture written from arrays, read by a sweep
    import textwrap

    section = _usage_section("### Real caches as a data source", "## Design of a sweep")
    code = textwrap.dedent(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "usage.md", "exec"), {})
    assert capsys.readouterr().out.strip() == re.search(r"# (\{.*\} \d+):", code).group(1)
    assert (tmp_path / "results" / "my_cache" / "manifest.json").is_file()
    # the capture too goes under results/, not into the folder it runs from (RB2 F2)
    assert (tmp_path / "results" / "my_cache.npz").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_usage_anchor_links_name_its_headings():
    # docs/usage.md's contents line and cross-references link to its own headings
    text = (DOCS / "usage.md").read_text()

    def slug(heading: str) -> str:   # how GitHub names a heading's anchor
        return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

    headings = {slug(h) for h in re.findall(r"^#{1,4} (.*)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]*)\)", text)
    assert len(links) >= 12 and not set(links) - headings, sorted(set(links) - headings)


def test_user_docs_write_numbers_without_thousands_separators():
    # The docs write 65536, not 65,536 (tests read the numbers; "1,024" also reads as a
    # list of two). usage.md and measurement.md had 16 such numbers, real_model.md 75 (most
    # written by experiments/real_report.py). A quoted heading of another page ("The d =
    # 1,024, N = 1,024 seed grid" of benchmarks.md) is its title.
    root = DOCS.parent
    found = []
    for path in (root / "README.md", DOCS / "usage.md", DOCS / "measurement.md", DOCS / "real_model.md"):
        text = re.sub(r'"[^"]*"', "", path.read_text())
        found += [f"{path.name}: {m}" for m in re.findall(r"\d+(?:,\d{3})+\b", text)]
    assert not found, found


def test_real_report_writes_numbers_without_thousands_separators(load_experiment):
    # experiments/real_report.py generates most of docs/real_model.md; its sentences wrote
    # "4,860 B/token" and "11,700 matched (budget, trial) pairs"
    import pandas as pd

    report = load_experiment("real_report")
    s = pd.DataFrame({"scheme": ["qjl", "qjl+o4", "KQV"], "bits": 3,
                      "bytes_per_token": [4860.0, 7212.0, 4860.0]})
    note = report.qjl_note(s)
    assert "at 4860 B/token, exactly KQV@3's budget" in note and "7210 B/token measured" in note
    prof = pd.DataFrame({"scheme": ["KQV", "QKQV"] * 1200, "bits": 4, "text": [i // 2 for i in range(2400)],
                         "layer": 0, "head": 0, "snr_v": 1.0, "phi_v": 0.1})
    assert "on all 1200 matched (budget, trial) pairs" in report.value_agreement(prof)
    text = note + report.value_agreement(prof) + report.value_agreement(prof.assign(phi_v=range(2400)))
    assert not re.findall(r"\d+(?:,\d{3})+\b", text)
    # and no other sentence of it: no ',' format spec, no comma-grouped literal
    source = (DOCS.parent / "experiments" / "real_report.py").read_text()
    assert not re.findall(r"\{[^{}]*:,[^{}]*\}|\d,\d{3}\b", source)


def test_measurement_md_metrics_table_names_every_profile_column():
    # error_profile returns snr_k_pooled and snr_v_pooled; the table of docs/measurement.md
    # ("Metrics") listed every other column and not these two.
    text = (DOCS / "measurement.md").read_text()
    table = text.split("## Metrics", 1)[1].split("\n\n| column |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+)`", table))
    named |= {f"norm_ratio{s}" for s in ("_v", "_t") if f"`{s}`" in table}   # "norm_ratio_k, _v, _t"
    trials = kvstats.sample("gaussian", n_trials=2, n_keys=16, dim=8, seed=0)
    columns = set(kvstats.error_profile(trials, trials.K, trials.V).columns) - {"trial"}
    assert columns <= named, sorted(columns - named)
