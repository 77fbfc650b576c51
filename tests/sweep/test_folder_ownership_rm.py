"""A sweep taking a folder removes only what kvstats wrote there (referee RM, finding 1).

`clear_outputs` removed every `figures/*.png|svg`, `tables/*.csv` and `cells/*.parquet|csv`
by suffix, whoever wrote them, and said nothing when the config was unchanged. Now it
removes kvstats' fixed names, the report files `report_files.json` records (unchanged,
their SHA-256) and cells named as cells are (20 hex digits)."""

from pathlib import Path

import kvstats
from kvstats.sweep import store

CONFIG = {"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
          "n_keys": [32], "n_trials": 6, "seed": 1, "report": {"bootstrap_resamples": 99,
                                                              "energy_resamples": 49}}


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_a_rerun_keeps_the_users_files_and_edited_tables(tmp_path, capfd):
    out = tmp_path / "v1"
    res = kvstats.run_sweep(CONFIG, out=out, executor="serial", progress=False)
    kvstats.hypothesis_report(res, out, figures=False)
    reported = _files(out)
    assert {"tables/summary.csv", "tables/theory.csv", "report_files.json"} <= reported
    mine = {"figures/mine.png": "mine", "figures/mine.svg": "mine", "tables/mine.csv": "mine",
            "cells/mine.csv": "mine", "cells/notes.parquet": "mine"}
    for rel, text in mine.items():
        (out / rel).parent.mkdir(exist_ok=True)
        (out / rel).write_text(text)
    (out / "tables" / "summary.csv").write_text("edited by hand")   # recorded, then edited
    # a cell of another grid (a cell's name): a sweep's own, removed
    stray = next((out / "cells").glob("*.parquet"))
    foreign = out / "cells" / ("0" * 20 + stray.suffix)
    foreign.write_bytes(stray.read_bytes())
    capfd.readouterr()
    res = kvstats.run_sweep(CONFIG, out=out, executor="serial", progress=False)   # same config
    left = _files(out)
    for rel, text in mine.items():
        assert (out / rel).read_text() == text, rel
    assert (out / "tables" / "summary.csv").read_text() == "edited by hand"
    # the report's unchanged files, its fixed names and its record are gone; the cells stay
    assert not {"tables/theory.csv", "tables/comparisons.csv", "report.md", "report.html",
                "report.json", "report_files.json"} & left
    assert not foreign.exists()
    assert {f"cells/{c['id']}.parquet" for c in res.manifest["cells"]} <= left


def test_clear_outputs_removes_recorded_files_only_when_unchanged(tmp_path):
    (tmp_path / "cells").mkdir()
    (tmp_path / "figures").mkdir()
    for name in ("a.png", "b.png", "c.png"):
        (tmp_path / "figures" / name).write_text(name)
    recorded = {f"figures/{n}": store_sha(tmp_path / "figures" / n) for n in ("a.png", "b.png")}
    import json

    (tmp_path / "report_files.json").write_text(json.dumps({"kvstats_report_files": 1,
                                                            "files": recorded}))
    (tmp_path / "figures" / "b.png").write_text("edited")
    removed = store.clear_outputs(tmp_path, set())
    assert removed == ["figures/a.png", "report_files.json"]
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["b.png", "c.png"]


def store_sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
