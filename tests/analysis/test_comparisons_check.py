"""compare_schemes as a notebook user calls it: the scheme pairs are checked (one check,
check_comparisons, shared with hypothesis_report) and the design defaults to the report's
(pairing="trial").

A pair whose label no row of the frame has was skipped like a default pair absent from a
case: ``compare_schemes(frame, [("KQV", "TurboQuant")])`` returned an empty table,
``["KV", "QK"]`` became the character pairs ("K", "V"), ("Q", "K"), skipped as well, and
``[3]`` failed with "'int' object is not iterable".
"""

import warnings

import numpy as np
import pytest

from kvstats.analysis import check_comparisons, compare_schemes
from kvstats.analysis.clustered import TrialsAsUnitsWarning
from kvstats.report import hypothesis_report
from kvstats.results import DEFAULT_COMPARISONS

from _sweep_frames import make_frame, sweep_result


@pytest.fixture(scope="module")
def frame():
    return make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5}, n=12, seed=1)


def test_a_label_absent_from_the_frame_is_a_value_error_listing_its_labels(frame):
    with pytest.raises(ValueError, match=r"comparisons label must be one of \['KQV', 'QKQV'\]; "
                                         r"received 'TurboQuant' \(a given pair must name two "
                                         r"scheme labels of the data"):
        compare_schemes(frame, [("KQV", "TurboQuant")], energy=False)
    # a near miss gets the project's one did-you-mean (kvstats._checks.did_you_mean)
    with pytest.raises(ValueError, match=r"received 'qkqv' \(did you mean 'QKQV'\?\) \(a given pair"):
        compare_schemes(frame, [("KQV", "qkqv")], energy=False)


@pytest.mark.parametrize("bad, received", [
    (["KV", "QK"], "the item 'KV' of ['KV', 'QK']"),     # would be ('K', 'V'), ('Q', 'K')
    ([3], "the item 3 of [3]"),
    ([("KQV", "QKQV", "KV")], "the item ('KQV', 'QKQV', 'KV')"),
    ([("KQV", 3)], "the item ('KQV', 3)"),
    ("KQV", "'KQV'"),
    (3, "3"),
    ({"KQV": "QKQV"}, "{'KQV': 'QKQV'}"),                 # a dict would give its keys
    ((p for p in ["KV"]), "the item 'KV' of ['KV']"),     # a generator: its items shown
])
def test_a_malformed_pair_is_a_type_error_with_the_right_form(frame, bad, received):
    with pytest.raises(TypeError) as err:
        compare_schemes(frame, bad, energy=False)
    assert str(err.value).startswith("comparisons must be a list of (scheme_a, scheme_b) pairs, "
                                     "e.g. [('KQV', 'QKQV')] (in a TOML config: comparisons = "
                                     "[[\"KQV\", \"QKQV\"]]); received " + received)


def test_pairs_as_a_generator_or_array_rows_give_the_table_of_the_list(frame):
    ref = compare_schemes(frame, [("QKQV", "KQV")], energy=False)
    assert len(ref) and set(ref.scheme_a) == {"QKQV"}
    gen = compare_schemes(frame, (p for p in [("QKQV", "KQV")]), energy=False)
    rows = compare_schemes(frame, np.array([["QKQV", "KQV"]]), energy=False)
    assert gen.equals(ref) and rows.equals(ref)
    assert check_comparisons(np.array([["QKQV", "KQV"]]), ["KQV", "QKQV"]) == [("QKQV", "KQV")]
    assert type(check_comparisons(np.array([["QKQV", "KQV"]]), ["KQV", "QKQV"])[0][0]) is str


def test_the_default_pairs_skip_absent_schemes_and_warn_only_when_none_runs():
    part = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5, ("K4V2", 3): 0.0}, n=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = compare_schemes(part, energy=False)        # KQV/QKQV runs, the KV pairs are skipped
        written = compare_schemes(part, [list(p) for p in DEFAULT_COMPARISONS], energy=False)
        assert compare_schemes(part[part.scheme == "KQV"], energy=False).empty   # one scheme
        assert compare_schemes(part, [], energy=False).empty                    # none asked
    assert {tuple(p) for p in t[["scheme_a", "scheme_b"]].to_numpy()} == {("KQV", "QKQV")}
    assert written.equals(t)       # written out pair for pair: still the default pairs
    none = part[part.scheme != "QKQV"]
    with pytest.warns(UserWarning, match=r"no comparison: none of the default pairs .* names two "
                                         r"schemes of the data \(\['K4V2', 'KQV'\]\).*name the "
                                         r"pairs to test: `kvstats report DIR --comparison K4V2:KQV`, "
                                         r"or in the config's \[report\], comparisons = "
                                         r"\[\[\"K4V2\", \"KQV\"\]\].*comparisons=\[\('K4V2', 'KQV'\)\]") as rec:
        assert compare_schemes(none, energy=False).empty
    assert rec[0].filename == __file__       # points at the caller, not into kvstats


def test_the_default_design_is_the_reports_and_an_unmatched_frame_says_what_to_pass(frame):
    t = compare_schemes(frame, [("KQV", "QKQV")], energy=False)
    assert t.attrs["pairing"] == "trial" and set(t.test) == {"sign"}
    missing = frame.drop(index=frame.index[(frame.scheme == "QKQV") & (frame.trial == 7)])
    with pytest.raises(ValueError, match=r"pairing='trial' \(the default\) matches the rows of KQV "
                                         r"and QKQV .*trial 7 only in KQV's rows; pass "
                                         r"pairing='none' if the two schemes' rows are "
                                         r"independent samples"):
        compare_schemes(missing, [("KQV", "QKQV")], energy=False)
    assert set(compare_schemes(missing, [("KQV", "QKQV")], energy=False, pairing="none").test) == {
        "mann_whitney", "ks"}
    # a real case without its clusters (an old sweep): no unit to pair on, said with the remedy
    real = frame.assign(distribution="real", cluster=np.nan)
    with pytest.raises(ValueError, match=r"without a 'cluster'.*; or pass pairing='none'"):
        compare_schemes(real, [("KQV", "QKQV")], energy=False)
    with pytest.warns(TrialsAsUnitsWarning, match="24 of them record no 'cluster'"):  # said
        assert len(compare_schemes(real, [("KQV", "QKQV")], energy=False, pairing="none"))


def test_hypothesis_report_refuses_with_the_same_check(frame, tmp_path):
    # one check for both: the report's message is compare_schemes'
    res = sweep_result(frame)
    for bad, kind in (([("KQV", "TurboQuant")], ValueError), (["KV", "QK"], TypeError)):
        with pytest.raises(kind) as ours:
            compare_schemes(frame, bad)
        with pytest.raises(kind) as report:
            hypothesis_report(res, tmp_path / "rep", comparisons=bad, figures=False)
        assert str(report.value) == str(ours.value)
    assert not (tmp_path / "rep").exists()
