"""Every script in examples/ runs, with its fast settings, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kvstats

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_there_are_examples():
    assert [p.name for p in EXAMPLES if p.name == "own_scheme.py"] == ["own_scheme.py"]


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    # a fresh interpreter in another folder: the script must not rely on the test's state
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(script), "--fast", "--out", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "report.md").is_file() and (out / "manifest.json").is_file()
    if script.stem == "own_scheme":
        assert "minmax passes the scheme contract" in proc.stdout
        assert "minmax" in (out / "report.md").read_text()
        # the sweep names the file as its plugin (adopted, not imported a second time), so
        # the manifest records it and `kvstats report` in another process can load it
        import json

        code = json.loads((out / "manifest.json").read_text())["user_code"]
        assert code["schemes"] == {"minmax": str(script)} and code["plugins"][0]["file"] == str(script)


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


def test_the_usage_excerpt_runs_with_the_examples_coder(tmp_path, user_registries):
    # docs/usage.md "Your own scheme or distribution": its code, with examples/own_scheme.py's
    # MinMaxCoder, at 20 trials of N = 64 and a report without figures
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text()
    section = text[text.index("## Your own scheme or distribution"):text.index("## Reproduce one trial")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    edits = {'"n_keys": [512], "n_trials": 300': '"n_keys": [64], "n_trials": 20',
             'out="results/own")': f'out={str(tmp_path / "own")!r}, executor="serial")',
             'hypothesis_report(res, "results/own")':
                 f'hypothesis_report(res, {str(tmp_path / "own")!r}, figures=False, bootstrap_resamples=99, '
                 'energy_resamples=19)'}
    for old, new in edits.items():
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    example = _load_example()
    kvstats.unregister_scheme("minmax")   # the example registers at import; the excerpt registers its own
    exec(compile(code, "usage.md", "exec"), {"MinMaxCoder": example.MinMaxCoder, "__name__": "__main__"})
    assert "minmax" in (tmp_path / "own" / "report.md").read_text()


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
