"""What a report and a replay read of a sweep folder is the checked record (referee RP).

F2: the report header printed the manifest's top-level ``seed``, a copy nothing checks (an
edit made it say "root seed 5" for data drawn with another); it prints the config's seed,
which the fingerprint checks. F3: ``Replay.stored()`` read the results file without the
manifest's content hash, so an edited file looked like an irreproducible sweep.
"""

from __future__ import annotations

import json

import pytest

import kvstats
from kvstats.results import read_table_meta, table_path
from kvstats.sweep import replay_trials
from kvstats.sweep.store import _write_table

GRID = {"schemes": ["KQV"], "budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 5, "seed": 11,
        "distributions": ["gaussian"], "comparisons": []}


@pytest.fixture
def sweep(tmp_path):
    out = tmp_path / "out"
    kvstats.run_sweep(GRID, out=out, executor="serial", progress=False)
    return out


def test_the_header_names_the_checked_seed(sweep, tmp_path):
    man = json.loads((sweep / "manifest.json").read_text())
    man["seed"] = 5   # the unchecked copy
    (sweep / "manifest.json").write_text(json.dumps(man))
    kvstats.hypothesis_report(sweep, tmp_path / "rep", figures=False)
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "root seed 11;" in text and "root seed 5" not in text


def test_stored_rows_are_the_checked_ones(sweep):
    path = table_path(sweep, "results")
    frame, meta = read_table_meta(path)
    frame.loc[3, "snr_k"] += 1e-9   # an edit under the old metadata
    _write_table(frame, path.with_suffix(""), meta)
    r = replay_trials(sweep, trials=[3])
    with pytest.raises(ValueError, match="content hash"):
        r.stored()
