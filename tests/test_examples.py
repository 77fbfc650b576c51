"""Every script in examples/ runs, with its fast settings, as a user would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import kvstats

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_there_are_examples():
    assert {p.stem for p in EXAMPLES} >= {"own_scheme", "equal_bits", "profile_6d", "real_cache",
                                          "hypothesis_tests"}


def _run(script: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The script in a fresh interpreter in another folder: it must not rely on the test's state."""
    proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **(env or {})})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _example(name: str) -> Path:
    return EXAMPLES[0].parent / f"{name}.py"


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    """Each example's ``--fast --out OUT`` run, once per module: (the process, OUT)."""
    runs = {}

    def run(name: str) -> tuple[subprocess.CompletedProcess, Path]:
        if name not in runs:
            cwd = tmp_path_factory.mktemp(name)
            runs[name] = _run(_example(name), cwd, "--fast", "--out", str(cwd / "out")), cwd / "out"
        return runs[name]

    return run


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, fast_run):
    # every example has the --fast and --out flags the tests use, and a docstring saying
    # what it shows and how long it takes
    text = script.read_text()
    assert '"--fast"' in text and '"--out"' in text and re.search(r"\d+ s\b", text.split('"""')[1]), script
    proc, out = fast_run(script.stem)
    assert proc.stdout.strip(), script
    if script.stem == "own_scheme":
        assert (out / "report.md").is_file() and (out / "manifest.json").is_file()
        assert "minmax passes the scheme contract" in proc.stdout
        assert "minmax" in (out / "report.md").read_text()
        # the sweep names the file as its plugin (adopted, not imported a second time), so
        # the manifest records it and `kvstats report` in another process can load it
        import json

        code = json.loads((out / "manifest.json").read_text())["user_code"]
        assert code["schemes"] == {"minmax": str(script)} and code["plugins"][0]["file"] == str(script)


# --------------------------------------------------------------------------- equal_bits.py
_PLAN = re.compile(r"^  (\S+)\s+n = (\d+|fixed)\s+stores (\d+\.\d+)$", re.M)
_FINGERPRINT = re.compile(r"fingerprint ([0-9a-f]{16}) \(seed (\d+)\)")


def test_equal_bits_picks_budgets_by_stored_bits_and_prints_the_tests_it_ran(fast_run):
    proc, out = fast_run("equal_bits")
    target = float(re.search(r"target <= (\S+):", proc.stdout).group(1))
    plan = _PLAN.findall(proc.stdout)
    assert len(plan) >= 4, proc.stdout
    # each scheme's n is the largest whose stored total (recomputed here) fits the target
    for name, n, total in plan:
        bits = None if n == "fixed" else int(n)
        assert float(total) == pytest.approx(kvstats.make_scheme(name, bits, 128).bits_per_coord(256).total,
                                             abs=5e-5), name
        assert float(total) <= target
        sdef = kvstats.scheme_def(name)
        if bits is not None and bits < sdef.max_bits:
            assert kvstats.make_scheme(name, bits + 1, 128).bits_per_coord(256).total > target, name
    chosen = {name: n for name, n, _ in plan}
    # kivi's float16 window and scales cost it ~2.6 bits at N = 256
    assert target == 4.7 and chosen["kivi"] == "2" and chosen["turboquant_mse"] == "4"
    # the sweep stored what the plan said, and its table agrees with what was printed
    res = kvstats.load_result(out)
    stored = res.frame.groupby("scheme")["bits_total"].first()
    assert {name: round(stored[name], 4) for name, _, _ in plan} == {name: float(t) for name, _, t in plan}
    counted = re.findall(r"(\S+) (\d+\.\d{4})", proc.stdout.split("as the sweep counted them: ")[1].splitlines()[0])
    assert {name: float(t) for name, t in counted} == {name: float(t) for name, _, t in plan}
    table = pd.read_csv(out / "comparisons.csv")
    assert len(table) == 4 * (len(plan) - 1) and set(table.scheme_a) == {"turboquant_mse"}
    assert table.pvalue.between(0, 1).all() and (table.pvalue_adjusted >= table.pvalue - 1e-15).all()
    assert table.pvalue_adjusted.between(0, 1).all()
    printed = re.findall(r"^    (\S+)\s+mean .*p_adj (\S+)  -> (.*)$", proc.stdout, re.M)
    assert [m for m, _, _ in printed] == table.metric.tolist()
    assert [float(p) for _, p, _ in printed] == pytest.approx(table.pvalue_adjusted.tolist(), rel=0.06)
    # every verdict kind is counted once, and a "not resolvable" row says so
    counts = dict((k, int(v)) for v, k in [c.rsplit(" ", 1)[::-1] for c in
                                            proc.stdout.split("verdicts: ")[1].strip().split(", ")])
    assert sum(counts.values()) == len(table)
    unresolved = table.verdict.str.startswith("not resolvable")
    assert counts.get("not resolvable", 0) == unresolved.sum() > 0
    assert all(v.startswith("not resolvable") for _, _, v in printed if "pairs differ" in v)


def test_equal_bits_is_reproducible_from_its_seed(tmp_path):
    def fingerprint(seed, name):
        proc = _run(_example("equal_bits"), tmp_path, "--fast", "--seed", str(seed), "--out", str(tmp_path / name))
        (digest, printed_seed), = _FINGERPRINT.findall(proc.stdout)
        assert printed_seed == str(seed)
        return digest

    first = fingerprint(5, "a")
    assert fingerprint(5, "b") == first != fingerprint(6, "c")


# --------------------------------------------------------------------------- profile_6d.py
def test_profile_6d_writes_the_table_and_the_planes(fast_run):
    proc, out = fast_run("profile_6d")
    for place in "kvt":
        png = out / f"shannon_phi_{place}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, png
    frame = pd.read_csv(out / "profile.csv")
    assert frame.groupby("budget").size().to_dict() == {2.0: 30, 3.0: 30, 4.0: 30, 5.0: 30}
    assert (frame.kl >= 0).all() and np.isfinite(frame.kl).all() and frame.recall_at_5.between(0, 1).all()
    for place in "kvt":
        assert frame[f"phi_{place}"].between(0, np.pi).all()
        snr = frame.groupby("budget")[f"snr_{place}"].mean()
        assert snr.is_monotonic_increasing and snr.diff().dropna().between(3, 9).all(), snr  # ~6 dB a bit
    assert (frame.bits_total > frame.budget).all()
    # the case as the tables write it ("heavy_tailed nu=3.0 keys" read as two words; a
    # case without params once printed "gaussian - keys")
    assert re.search(r"^KQV at n = 3 \(3\.\d{4} bits per coordinate stored\) on heavy_tailed \(nu=3\.0\) keys: "
                     r"30 trials of N = 128, d = 64$", proc.stdout, re.M), proc.stdout.splitlines()[0]
    # the printed per-trial rows are the table's rows at n = 3
    header, *rows = proc.stdout.split("per-trial table")[1].splitlines()[1:7]
    cols = header.split()
    at3 = frame[frame.budget == 3].set_index("trial")
    for line in rows:
        values = dict(zip(cols, map(float, line.split())))
        for col in ("kl", "snr_k", "phi_t"):
            assert values[col] == pytest.approx(at3.loc[int(values["trial"]), col], rel=1e-3), (col, line)
    # every printed column is explained, with its unit
    from kvstats.metrics.table import METRIC_TABLE

    for col in cols[1:]:
        assert re.search(rf"^  {col}\s+\S+\s+worse: \w+\s+" + re.escape(METRIC_TABLE[col].definition[:30]),
                         proc.stdout, re.M), col


# --------------------------------------------------------------------------- real_cache.py
def test_real_cache_fast_sweeps_a_capture_with_the_text_as_the_unit(fast_run):
    proc, out = fast_run("real_cache")
    trials = kvstats.load_trials(out / "capture.npz", layer=0)
    assert trials.K.shape == (32, 64, 32) and len(set(trials.meta["cluster"])) == 16
    assert "units: 16 texts per case" in proc.stdout
    assert (out / "sweep" / "report.md").is_file()
    # the printed mean KLs are the text means of the stored sweep
    per_text = kvstats.aggregate_clusters(kvstats.load_result(out / "sweep").frame)
    assert len(per_text) == 2 * 2 * 2 * 16
    expected = per_text.groupby(["params", "budget", "scheme"])["kl"].mean()
    table = proc.stdout.split("per layer and n:\n")[1].split("\n\n")[0].splitlines()[2:]
    printed = [float(v) for line in table for v in line.split()[-2:]]
    assert len(printed) == 8 and all(v > 0 for v in printed)
    assert sorted(printed) == pytest.approx(sorted(expected.tolist()), rel=1e-3)
    tests = re.findall(r"^  layer=\d+\s+n = \d  (\S+)\s+n_a = (\d+)  dominance (\S+)  p_adj (\S+)  -> (.*)$",
                       proc.stdout, re.M)
    assert len(tests) == 16
    for metric, n_a, dominance, p_adj, winner in tests:
        assert n_a == "16" and -1 <= float(dominance) <= 1 and 0 <= float(p_adj) <= 1
        assert winner in ("KQV", "QKQV", "no significant difference") or winner.startswith("not resolvable")
    assert {w for m, *_, w in tests if m == "kl"} == {"KQV"}   # QKQV's 1-bit key residual: 5x the KL


def test_real_cache_without_the_weights_says_so_and_does_nothing(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "rc"
    proc = _run(_example("real_cache"), tmp_path, "--out", str(out), env={"KVSTATS_CACHE": str(tmp_path / "none")})
    assert "real_cache: skipped: SmolLM2's weights are not cached" in proc.stderr
    assert not (out / "capture.npz").exists() and not (out / "sweep").exists()


# --------------------------------------------------------------------------- hypothesis_tests.py
def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's adjusted p-values from their definition: max over the steps so far of (m - i) p_(i)."""
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


def test_hypothesis_tests_family_is_holm_adjusted_and_its_resolution_is_stated(fast_run):
    proc, out = fast_run("hypothesis_tests")
    family = pd.read_csv(out / "paired_family.csv")
    assert family.test.tolist() == ["sign"] * 6 + ["energy (paired)", "TOST ratio"]
    assert family.pvalue.between(0, 1).all() and family.pvalue.gt(0).all()
    assert family.pvalue_adjusted.to_numpy() == pytest.approx(_holm(family.pvalue.to_numpy()), rel=1e-12)
    assert (family.reject == (family.pvalue_adjusted <= 0.05)).all()
    sign = family[family.test == "sign"]
    assert sign.min_attainable_p.tolist() == pytest.approx(np.minimum(1, 2 * 0.5 ** sign.n_informative).tolist())
    assert (family.resolvable == ~(family.min_attainable_p > 0.05 / len(family))).all()
    # KQV codes values with a 1-bit QJL residual, KV without: their values' SNR differs on every trial
    rejected = set(family[family.reject].metric)
    assert {"snr_v", "snr_t"} <= rejected
    for line in re.findall(r"^  (?:sign|energy|TOST).*$", proc.stdout, re.M):
        p, p_adj = map(float, re.search(r"  p\s+(\S+)  p_adj\s+(\S+)", line).groups())
        assert 0 <= p <= p_adj <= 1, line
    kl_a, kl_b, ratio = map(float, re.search(r"means of kl \(nats\): KQV (\S+), KV (\S+); KL ratio (\S+),",
                                             proc.stdout).groups())
    assert kl_a > 0 and kl_b > 0 and ratio == pytest.approx(kl_a / kl_b, rel=2e-3)
    assert re.search(r"KL verdict: (equivalent within δ|different|inconclusive)$", proc.stdout, re.M)
    two = re.findall(r"^  (Mann–Whitney|KS|energy \(free\)).*  p (\S+)  p_adj (\S+)$", proc.stdout, re.M)
    assert [t for t, _, _ in two] == ["Mann–Whitney", "KS", "energy (free)"]
    assert all(0 <= float(p) <= float(q) <= 1 for _, p, q in two)


def test_hypothesis_tests_marks_a_test_too_few_trials_cannot_resolve(tmp_path):
    # 12 trials: top-5 sets and argmax shifts differ on a few of them, so their sign tests'
    # best p, 2 * 2**-k, is above Holm's first step 0.05/8; the SNR tests still resolve
    out = tmp_path / "ht"
    proc = _run(_example("hypothesis_tests"), tmp_path, "--fast", "--trials", "12", "--out", str(out))
    family = pd.read_csv(out / "paired_family.csv").set_index("metric")
    assert not family.loc["argmax_shift", "resolvable"] and family.loc["snr_v", "resolvable"]
    # recall's 6 differing pairs (8 on the schemes' streams before 2026-12-03): best p
    # 2 * 2**-6 = 0.031, below alpha but not below alpha/8
    assert family.loc["recall_at_5", "n_informative"] == 6 and not family.loc["recall_at_5", "resolvable"]
    assert 2 * 2.0 ** -6 < 0.05
    assert (family.resolvable == (family.min_attainable_p.isna() | (family.min_attainable_p <= 0.05 / 8))).all()
    assert family.loc["argmax_shift", "min_attainable_p"] > 0.05 / 8 >= family.loc["snr_v", "min_attainable_p"]
    marked = re.findall(r"^  sign\s+(\S+) .*NOT RESOLVABLE", proc.stdout, re.M)
    assert marked == family.index[~family.resolvable].tolist()


def _load_example(name: str = "own_scheme"):
    """examples/NAME.py as a module (importing it registers what it registers: use the
    user_registries fixture)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES[0].parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_examples_coder_keeps_every_coordinate_within_half_a_step_at_any_scale(user_registries):
    # its min and max were float16: beyond 65504 (Student-t keys near nu = 1) they overflowed
    # to inf and the vector decoded to NaN. A uniform code of 2**n levels between a vector's
    # min and max is off by at most half a step, at any scale float32 holds.
    coder = _load_example().MinMaxCoder(3, 64)
    x = np.random.default_rng(0).standard_normal((4, 16, 64))
    for scale in (1.0, 1e5, 1e30):
        for dtype in (np.float32, np.float64):
            xs = (x * scale).astype(dtype)
            x_hat = coder.roundtrip(xs)
            half_step = (xs.max(-1, keepdims=True) - xs.min(-1, keepdims=True)) / (2 * (2**3 - 1))
            assert x_hat.dtype == dtype and np.all(np.abs(x_hat - xs) <= half_step * (1 + 1e-6)), (scale, dtype)


@pytest.mark.parametrize("value", [1e39, np.inf, np.nan])
def test_the_examples_coder_names_a_vector_float32_cannot_hold(user_registries, value):
    x = np.zeros((2, 3, 8))
    x[1, 2, 5] = value
    with pytest.raises(ValueError, match=r"x must be finite and within float32's range .*; "
                                         r"received a vector with min (0|nan) and max (1e\+39|inf|nan)$"):
        _load_example().MinMaxCoder(3, 8).encode(x)


def test_the_readme_plugin_recipe_for_the_example(tmp_path):
    # README.md: examples/own_scheme.py registers its scheme at import, so it is a plugin as
    # it stands (it registered in main(), and naming it in [sweep] plugins registered
    # nothing): `kvstats schemes` lists its scheme, and `kvstats sweep` and `kvstats report`
    # (a fresh process) run a config that names it.
    def kvstats_cli(*args):
        return subprocess.run([sys.executable, "-m", "kvstats.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})

    example = EXAMPLES[0].parent / "own_scheme.py"
    readme = (EXAMPLES[0].parents[1] / "README.md").read_text()
    assert 'plugins = ["examples/own_scheme.py"]' in readme and "registers its scheme when imported" in readme
    proc = kvstats_cli("schemes", "--plugins", str(example))
    assert proc.returncode == 0 and f"scheme minmax: registered by {example}" in proc.stdout, proc.stderr
    assert "registered no scheme" not in proc.stdout
    (tmp_path / "sweep.toml").write_text(
        f'[sweep]\nplugins = ["{example}"]\nbudgets = [3]\ndims = [32]\nn_keys = [16]\n'
        'n_trials = 6\n[[schemes]]\nname = "minmax"\n[[schemes]]\nname = "KQV"\n'
        '[[distributions]]\nname = "gaussian"\n[report]\ncomparisons = [["minmax", "KQV"]]\n'
        'figures = false\nenergy_resamples = 19\nbootstrap_resamples = 99\n')
    proc = kvstats_cli("sweep", "--config", "sweep.toml", "--out", "own", "--workers", "1",
                       "--no-progress", "--no-report")
    assert proc.returncode == 0, proc.stderr
    proc = kvstats_cli("report", "own", "--no-figures")
    assert proc.returncode == 0, proc.stderr
    assert "minmax vs KQV" in (tmp_path / "own" / "report.md").read_text()
