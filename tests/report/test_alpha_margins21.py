"""alpha >= 0.5 with equivalence margins is refused before any compute (referee R8, finding 2).

A TOST's interval is the (1 − 2α) one, so none exists from α = 0.5 on. The options accepted
alpha in (0, 1) with margins; after the whole compute each TOST row read "inconclusive (no
equivalence test: alpha must be in (0.0, 0.5) ...)", a bad option shown as a statistical
verdict. Now the options check names alpha, the margins and the range, for the Python API, a
config's [report] table and `kvstats report` (one line, exit 2); compare_schemes raises
rather than writing such rows.
"""

import warnings

import pytest

import kvstats.analysis.compare as compare_module
import kvstats.report.render as render
from kvstats.analysis import compare_schemes
from kvstats.cli import main
from kvstats.report import hypothesis_report
from kvstats.report.options import validate_report_options
from kvstats.sweep import SweepConfig

from _sweep_frames import make_frame, sweep_result
from _tiny_sweep import tiny_toml

WORDS = ("'alpha'", "(0, 0.5)", "equivalence", "{'kl': 0.1}")


@pytest.mark.parametrize("alpha", [0.5, 0.6, 0.99])
def test_the_options_refuse_alpha_from_half_with_margins(alpha):
    with pytest.raises(ValueError) as info:
        validate_report_options({"alpha": alpha, "equivalence": {"kl": 0.1}})
    assert all(w in str(info.value) for w in WORDS) and f"received alpha {alpha:g}" in str(info.value)


def test_the_options_keep_what_is_allowed():
    assert validate_report_options({"alpha": 0.49, "equivalence": {"kl": 0.1}})["alpha"] == 0.49
    assert validate_report_options({"alpha": 0.6})["alpha"] == 0.6   # no margins: no TOST


@pytest.fixture
def no_compute(monkeypatch):
    """The report's compute fails the test if it starts."""
    def reached(*args, **kwargs):
        raise AssertionError("the report's compute started before the options were checked")
    monkeypatch.setattr(render, "summary_table", reached)
    monkeypatch.setattr(compare_module, "_pair_rows", reached)


def test_the_python_api_refuses_it_before_any_compute(tmp_path, no_compute):
    res = sweep_result(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=20, seed=1))
    with pytest.raises(ValueError) as info:
        hypothesis_report(res, tmp_path / "out", alpha=0.6, equivalence={"kl": 0.1}, figures=False)
    assert all(w in str(info.value) for w in WORDS)
    assert not (tmp_path / "out").exists()   # nothing written either


def test_a_configs_report_table_refuses_it():
    with pytest.raises(ValueError) as info:
        SweepConfig.from_dict({"schemes": ["KQV", "QKQV"], "distributions": ["gaussian"],
                               "budgets": [2], "report": {"alpha": 0.5, "equivalence": {"kl": 0.1}}})
    assert all(w in str(info.value) for w in WORDS)


def test_the_command_refuses_it_in_one_line_with_exit_2(tmp_path, capsys, no_compute):
    (tmp_path / "c.toml").write_text(tiny_toml(n_trials=6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["sweep", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "s"),
                     "--no-report", "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    code = main(["report", str(tmp_path / "s"), "--alpha", "0.6", "--equivalence", "kl=0.1",
                 "--no-figures", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert all(w in err for w in WORDS), err


def test_compare_schemes_raises_rather_than_writing_inconclusive_rows():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=20, seed=2)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 0\.5\) with equivalence margins.*0\.6"):
        compare_schemes(f, [("KQV", "QKQV")], alpha=0.6, equivalence={"kl": 0.1}, energy=False)
    rows = compare_schemes(f, [("KQV", "QKQV")], alpha=0.4, equivalence={"kl": 0.1}, energy=False)
    assert rows.loc[rows.test == "equivalence", "pvalue"].notna().all()
