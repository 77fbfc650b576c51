"""One check of the scheme pairs (kvstats.results.check_comparisons) for the sweep config,
the ``[report]`` options, compare_schemes and hypothesis_report: one message per error, and
the "no default pair present" warning given once per user action, at the user's line.

A sweep of KQV + K4V2 and its report once gave two warnings (the config's, the report's
compare), a third for clustered data, and the config's pointed inside kvstats (its
``stacklevel=3`` landed in from_dict or run_sweep).
"""

import warnings

import pytest

import kvstats
from kvstats.analysis import compare_schemes
from kvstats.report.options import validate_report_options
from kvstats.results import DEFAULT_COMPARISONS
from kvstats.sweep import SweepConfig

from _sweep_frames import clustered_frame, sweep_result

_GRID = {"schemes": ["KQV", "K4V2"], "budgets": [3], "distributions": ["gaussian"], "dims": [16],
         "n_keys": [8], "n_trials": 4,
         "report": {"figures": False, "energy_resamples": 19, "bootstrap_resamples": 99}}


def _no_pair_warnings(record):
    return [w for w in record if issubclass(w.category, UserWarning)
            and str(w.message).startswith("no comparison: none of the default pairs")]


def _recorded(call):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")     # a repeated warning is recorded, not deduplicated
        value = call()
    return value, _no_pair_warnings(rec)


def test_the_config_warns_once_at_the_users_line():
    _, got = _recorded(lambda: SweepConfig.from_dict(_GRID))
    assert len(got) == 1 and got[0].filename == __file__
    assert "names two schemes of the data (['K4V2', 'KQV'])" in str(got[0].message)
    _, got = _recorded(lambda: SweepConfig(schemes=["KQV", "K4V2"], distributions=["gaussian"]))
    assert len(got) == 1 and got[0].filename == __file__


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("once") / "sweep"
    res, got = _recorded(lambda: kvstats.run_sweep(_GRID, out=out, executor="serial",
                                                   progress=False))
    return res, out, got


def test_run_sweep_of_a_dict_warns_once_at_the_users_line(swept):
    _, _, got = swept
    assert len(got) == 1 and got[0].filename == __file__


def test_the_report_of_a_checked_sweep_does_not_warn_again(swept, tmp_path):
    res, out, _ = swept
    rep, got = _recorded(lambda: kvstats.hypothesis_report(res, tmp_path / "a"))
    assert got == [] and rep.comparisons.empty
    # from the folder the config is read again: the one warning of that call, at its line
    _, got = _recorded(lambda: kvstats.hypothesis_report(out, tmp_path / "b"))
    assert len(got) == 1 and got[0].filename == __file__
    # the default pairs written out and given to the report: checked there, warned once
    _, got = _recorded(lambda: kvstats.hypothesis_report(res, tmp_path / "c",
                                                         comparisons=list(DEFAULT_COMPARISONS)))
    assert len(got) == 1 and got[0].filename == __file__


def test_clustered_data_is_warned_once_too(tmp_path):
    f = clustered_frame().replace({"scheme": {"QKQV": "K4V2"}})
    res, got = _recorded(lambda: sweep_result(f, schemes=("KQV", "K4V2")))
    assert len(got) == 1        # the config's (built in the helper: points at its line)
    rep, got = _recorded(lambda: kvstats.hypothesis_report(res, tmp_path, figures=False,
                                                           energy_resamples=19))
    assert got == [] and rep.comparisons.empty     # trial-level and cluster-level tests alike


def test_compare_schemes_warns_at_the_users_line():
    f = clustered_frame().replace({"scheme": {"QKQV": "K4V2"}})
    table, got = _recorded(lambda: compare_schemes(f, energy=False))
    assert table.empty and len(got) == 1 and got[0].filename == __file__


@pytest.mark.parametrize("bad", ["KQV", ["KQV", "QKQV"], [("KQV",)], [("KQV", 3)]])
def test_one_message_for_a_malformed_pair_everywhere(bad):
    f = clustered_frame()
    messages = set()
    for call in (lambda: compare_schemes(f, bad, energy=False),
                 lambda: SweepConfig.from_dict({**_GRID, "comparisons": bad}),
                 lambda: validate_report_options({"comparisons": bad})):
        with pytest.raises(TypeError) as err:
            call()
        messages.add(str(err.value))
    assert len(messages) == 1, messages
    assert messages.pop().startswith("comparisons must be a list of (scheme_a, scheme_b) pairs, "
                                     "e.g. [('KQV', 'QKQV')] (in a TOML config: comparisons = "
                                     "[[\"KQV\", \"QKQV\"]]); received ")


def test_one_message_for_an_unknown_label_everywhere():
    f = clustered_frame().replace({"scheme": {"QKQV": "K4V2"}})
    messages = set()
    for call in (lambda: compare_schemes(f, [("KQV", "k4v2")], energy=False),
                 lambda: SweepConfig.from_dict({**_GRID, "comparisons": [["KQV", "k4v2"]]}),
                 lambda: SweepConfig(schemes=["KQV", "K4V2"], distributions=["gaussian"],
                                     comparisons=[], report={"comparisons": [["KQV", "k4v2"]]})):
        with pytest.raises(ValueError) as err:
            call()
        messages.add(str(err.value))
    assert messages == {"comparisons label must be one of ['K4V2', 'KQV']; received 'k4v2' "
                        "(did you mean 'K4V2'?) (a given pair must name two scheme labels of the "
                        "data; only the default pairs skip absent schemes)"}


def test_a_doctest_of_a_kvstats_module_is_pointed_at():
    # a doctest runs in a copy of its module's globals (__name__ "kvstats...."): the warning
    # names its example, not doctest.py
    import doctest

    test = doctest.DocTestParser().get_doctest(
        ">>> _ = SweepConfig(schemes=['KQV', 'K4V2'], distributions=['gaussian'])\n",
        {"__name__": "kvstats.sweep.config", "SweepConfig": SweepConfig}, "example", "ex.py", 0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        doctest.DocTestRunner().run(test)
    got = _no_pair_warnings(rec)
    assert len(got) == 1 and got[0].filename.startswith("<doctest example"), got[0].filename
