"""Sizes a sweep cannot run are refused before any compute, naming the key.

Found by a referee pass (2026-12-02): ``n_trials = 10**30`` passed the config and failed
after the output folder was locked and cleared, with numpy's "Cannot cast ufunc
'subtract' input 0 from dtype('O')"; ``n_keys = 10**12`` at d = 16 ended the command with
a MemoryError traceback (exit 1) from the grid's one-trial draw.
"""

import pytest

from kvstats.cli import main
from kvstats.sweep import SweepConfig, check_grid, run

BASE = {"schemes": ["KQV"], "distributions": ["gaussian"], "budgets": [2], "dims": [16],
        "n_keys": [32], "n_trials": 4, "comparisons": []}


@pytest.mark.parametrize("n_trials", [2**53 + 1, 10**30])
def test_n_trials_beyond_what_the_store_counts_exactly_is_refused(n_trials):
    # the store hashes every numeric column, the trial numbers too, as float64 (frame_digest):
    # exact up to 2**53
    with pytest.raises(ValueError, match=rf"n_trials must be an integer in \[2, {2**53}\] \(trial "
                                         rf"numbers .*\); received {n_trials}$"):
        SweepConfig.from_dict({**BASE, "n_trials": n_trials})
    assert SweepConfig.from_dict({**BASE, "n_trials": 2**53}).n_trials == 2**53


def test_a_huge_n_trials_is_one_line_and_the_folder_is_untouched(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(run, "_compute_task", lambda *a, **k: pytest.fail("a task ran"))
    config = tmp_path / "c.toml"
    config.write_text('[sweep]\nbudgets = [2]\ndims = [16]\nn_keys = [32]\n'
                      'n_trials = 1000000000000000000000\n'
                      '[[schemes]]\nname = "KQV"\n[[distributions]]\nname = "gaussian"\n')
    out = tmp_path / "out"
    code = main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "n_trials must be an integer in" in err, err
    assert not out.exists()


def _no_memory(*args, **kwargs):
    raise MemoryError("Unable to allocate 116. TiB for an array with shape (1, 1000000000000, 16)")


@pytest.mark.parametrize("where, what", [("kvstats.data.synthetic.sample", "distribution 'gaussian'"),
                                         ("kvstats.quant.schemes.make_scheme", "scheme 'KQV' at n=2")])
def test_one_trial_that_does_not_fit_in_memory_is_a_value_error_naming_the_sizes(monkeypatch, where,
                                                                                 what):
    """The grid's one-trial draw (or scheme) runs out of memory: a size this machine cannot
    hold, named with the keys that set it, not a MemoryError after the folder is taken.
    (Simulated: whether numpy refuses 116 TiB at once depends on the kernel's overcommit.)"""
    module, name = where.rsplit(".", 1)
    monkeypatch.setattr(__import__(module, fromlist=[name]), name, _no_memory)
    with pytest.raises(ValueError) as err:
        check_grid(BASE)
    text = str(err.value)
    assert text.startswith(what) and "d=16" in text, text
    assert "does not fit in memory" in text and "lower dims, n_keys or n_queries" in text, text
    assert "Unable to allocate 116. TiB" in text, text   # numpy's words, kept


def test_the_command_says_it_in_one_line_before_the_folder_exists(tmp_path, capsys, monkeypatch):
    import kvstats.data.synthetic as synthetic

    monkeypatch.setattr(synthetic, "sample", _no_memory)
    monkeypatch.setattr(run, "_compute_task", lambda *a, **k: pytest.fail("a task ran"))
    config = tmp_path / "c.toml"
    config.write_text('[sweep]\nbudgets = [2]\ndims = [16]\nn_keys = [1000000000000]\nn_trials = 4\n'
                      '[[schemes]]\nname = "KQV"\n[[distributions]]\nname = "gaussian"\n')
    out = tmp_path / "out"
    code = main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "does not fit in memory" in err, err
    assert not out.exists()
