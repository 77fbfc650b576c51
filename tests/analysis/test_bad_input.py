"""Bad input to the analysis tables: a ValueError/TypeError naming the argument, never a
bare KeyError, AttributeError or numpy conversion error."""

import pandas as pd
import pytest

from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table
from kvstats.analysis.theory import nominal_bounds

from _sweep_frames import make_frame


@pytest.fixture(scope="module")
def frame():
    return make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5}, n=12)


def test_a_string_where_a_list_is_expected(frame):
    # iterated, "kl" would be the metrics "k", "l" and "KQV" the pairs ("K",), ("Q",), ...
    with pytest.raises(TypeError, match=r"metrics must be a list of metric names \(e.g. \['kl'\]\); received 'kl'"):
        compare_schemes(frame, [("KQV", "QKQV")], metrics="kl")
    with pytest.raises(TypeError, match=r"comparisons must be a list of \(scheme_a, scheme_b\) pairs, "
                                        r"e.g. \[\('KQV', 'QKQV'\)\] \(in a TOML config: .*\); "
                                        r"received 'KQV'"):
        compare_schemes(frame, "KQV")


def test_frames_without_the_columns_a_table_reads(frame):
    with pytest.raises(ValueError, match=r"comparisons lacks the column\(s\) \[.*'test', 'winner'\]"):
        find_crossovers(pd.DataFrame())
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['budget_b', 'test', 'winner'\]"):
        find_crossovers(summary_table(frame, n_resamples=49).rename(columns={"scheme": "scheme_a"})
                        .assign(scheme_b="QKQV"))
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        nominal_bounds({"budget": [3.0]})
    with pytest.raises(ValueError, match=r"frame lacks the column\(s\) \['trial'\]"):
        nominal_bounds(frame.drop(columns=["trial"]))


def test_a_text_metric_column_and_a_negative_seed(frame):
    bad = frame.assign(kl=frame["kl"].astype(str))
    with pytest.raises(TypeError, match=r"metric column\(s\) must be numeric; received \['kl \("):
        summary_table(bad, n_resamples=49)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, inf\]; received -1"):
        theory_table(frame, seed=-1)


def test_a_nan_metric_names_its_rows(frame):
    """A NaN metric is refused with the rows that hold it (which cell to recompute), not a
    bare column name; the tests never see it as a value."""
    import numpy as np

    bad = frame.copy()
    row = bad.index[(bad["scheme"] == "QKQV") & (bad["trial"] == 4)][0]
    bad.loc[row, "phi_t"] = np.nan
    bad.loc[bad.index[-1], "kl"] = np.nan
    for call in (lambda f: compare_schemes(f, [("KQV", "QKQV")], energy=False),
                 lambda f: summary_table(f, n_resamples=49)):
        with pytest.raises(ValueError, match=r"NaN in metric column\(s\) \['phi_t', 'kl'\], in 2 "
                                             r"row\(s\), the first at distribution = gaussian, .*"
                                             r"budget = 3.0, scheme = QKQV, trial = 4;"):
            call(bad)
