"""Every script in examples/ runs, with its fast settings, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
