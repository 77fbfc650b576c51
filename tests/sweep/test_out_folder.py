"""A sweep never overwrites a folder of someone else's files (kvstats.sweep.store.check_out_folder).

A folder that holds files but nothing kvstats wrote (no lock file, no kvstats manifest,
no report record) is refused before anything is created in it; a new or empty folder, a
finished sweep's folder, an interrupted first sweep's folder (lock and cells, no
manifest) and a folder the report API wrote are taken. Mutants tried: check_out_folder a
no-op (the refusal tests fail), the lock file not counted as kvstats' (the interrupted
sweep is refused), the report record not counted (the report folder is refused).
"""

import json

import pytest

from kvstats.sweep import run_sweep
from kvstats.sweep.store import LOCK_NAME, check_out_folder

TINY = {"schemes": ["KQV"], "budgets": [2, 3], "distributions": ["gaussian"],
        "dims": [16], "n_keys": [8], "n_trials": 4, "seed": 5}


def _entries(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_folder_of_someone_elses_files_is_refused_untouched(tmp_path):
    """`--out docs` by mistake: the sweep's report would overwrite report.md and figures/."""
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "diagram.png").write_text("theirs")
    (tmp_path / "report.md").write_text("theirs")
    before = _entries(tmp_path)
    with pytest.raises(ValueError, match=rf"output folder '{tmp_path}' holds 2 entries \(figures/, "
                                         r"report\.md\) and nothing kvstats wrote .*choose a new or "
                                         "empty folder"):
        run_sweep(TINY, out=tmp_path, executor="serial", progress=False)
    assert _entries(tmp_path) == before  # not even the lock file
    assert (tmp_path / "report.md").read_text() == "theirs"


def test_the_listing_is_short_and_a_foreign_manifest_does_not_count(tmp_path):
    for i in range(7):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "my web app"}))
    with pytest.raises(ValueError, match=r"holds 8 entries \(f0.txt, f1.txt, f2.txt, f3.txt, f4.txt "
                                         r"and 3 more\)"):
        check_out_folder(tmp_path)
    with pytest.raises(ValueError, match="what must be one of"):
        check_out_folder(tmp_path, "plot")


def test_new_empty_and_kvstats_folders_are_taken(tmp_path):
    check_out_folder(tmp_path / "new")            # does not exist yet
    check_out_folder(tmp_path)                    # empty
    assert not (tmp_path / "new").exists()        # checking creates nothing
    # a finished sweep: rerun and resume as before
    out = tmp_path / "sweep"
    first = run_sweep(TINY, out=out, executor="serial", progress=False)
    again = run_sweep(TINY, out=out, executor="serial", progress=False)
    assert again.manifest["n_computed"] == 0 and again.frame.equals(first.frame)
    # an interrupted first sweep: its lock file and cells, no manifest yet
    (out / "manifest.json").unlink()
    (out / "results.parquet").unlink()
    resumed = run_sweep(TINY, out=out, executor="serial", progress=False)
    assert resumed.manifest["n_computed"] == 0 and resumed.frame.equals(first.frame)
    # its manifest alone (the lock file removed by hand) still marks it
    (out / LOCK_NAME).unlink()
    check_out_folder(out)


def test_a_folder_the_report_api_wrote_is_taken(tmp_path):
    """hypothesis_report(result, out) takes no lock; its record of the files marks the folder."""
    import kvstats
    from kvstats.report.render import REPORT_RECORD
    from kvstats.sweep import store

    assert store._REPORT_RECORD == REPORT_RECORD  # the store's copy of the name
    res = run_sweep({**TINY, "schemes": ["KQV", "QKQV"], "n_trials": 8}, executor="serial", progress=False)
    rep = tmp_path / "rep"
    kvstats.hypothesis_report(res, rep, figures=False, energy_resamples=19, bootstrap_resamples=99)
    assert (rep / REPORT_RECORD).is_file() and not (rep / LOCK_NAME).exists()
    check_out_folder(rep, "report")
    check_out_folder(rep)


def test_a_report_that_fails_in_its_compute_leaves_the_folder_retryable(tmp_path):
    """hypothesis_report takes no lock: a report that failed after creating tables/ (or after
    removing an earlier report's record) left a folder check_out_folder refused on the retry
    ("holds 1 entry (tables/) and nothing kvstats wrote")."""
    import kvstats

    res = run_sweep({**TINY, "schemes": ["KQV", "QKQV"], "n_trials": 8}, executor="serial", progress=False)
    unmatched = res.frame[~((res.frame.scheme == "KQV") & (res.frame.trial == 3))]
    broken = type(res)(unmatched, res.manifest, res.config, res.out)
    opts = dict(figures=False, energy_resamples=19, bootstrap_resamples=99)
    for rep in (tmp_path / "new", tmp_path / "earlier"):
        if rep.name == "earlier":
            kvstats.hypothesis_report(res, rep, **opts)
        before = _entries(rep) if rep.exists() else []
        with pytest.raises(ValueError, match="pairing='trial'"):
            kvstats.hypothesis_report(broken, rep, **opts)    # unmatched trials: fails in compare
        assert _entries(rep) == before       # untouched (the new folder: created, empty)
        check_out_folder(rep, "report")
        assert kvstats.hypothesis_report(res, rep, **opts).files["markdown"].is_file()


def test_the_report_api_refuses_a_folder_of_another_sweep(tmp_path):
    """hypothesis_report(A, B) with B another sweep's folder is refused before B is touched
    (the CLI refused it; the Python call wrote A's report beside B's results)."""
    import shutil

    import kvstats
    from kvstats.results import load_result

    run_sweep(TINY, out=tmp_path / "a", executor="serial", progress=False)
    run_sweep({**TINY, "seed": 6}, out=tmp_path / "b", executor="serial", progress=False)
    before = _entries(tmp_path / "b")
    opts = dict(figures=False, energy_resamples=19, bootstrap_resamples=99)
    with pytest.raises(ValueError, match=r"holds another sweep \(its manifest.json is of run '"):
        kvstats.hypothesis_report(load_result(tmp_path / "a"), tmp_path / "b", **opts)
    with pytest.raises(ValueError, match="holds another sweep .*; this sweep is run None"):
        kvstats.hypothesis_report(run_sweep(TINY, executor="serial", progress=False), tmp_path / "b", **opts)
    assert _entries(tmp_path / "b") == before
    shutil.copytree(tmp_path / "a", tmp_path / "a_copy")       # the same run elsewhere: taken
    kvstats.hypothesis_report(tmp_path / "a", tmp_path / "a_copy", **opts)
    kvstats.hypothesis_report(tmp_path / "a", tmp_path / "a", **opts)   # its own folder
