"""A missing case, budget or scheme is an error, not rows that every table silently leaves out."""

import numpy as np
import pytest

from kvstats.analysis import check_frame, compare_schemes, summary_table

from _sweep_frames import make_frame


@pytest.mark.parametrize("column, value", [("params", None), ("distribution", np.nan),
                                           ("budget", np.nan), ("scheme", None)])
def test_a_missing_key_is_a_value_error_naming_the_column_and_rows(column, value):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=10)
    f[column] = f[column].astype(object)
    f.loc[f.index[:3], column] = value           # groupby would drop these 3 rows
    match = rf"missing values \(NaN or None\) in the key column\(s\) \['{column}'\], in 3 of 20 row\(s\)"
    with pytest.raises(ValueError, match=match):
        check_frame(f)
    with pytest.raises(ValueError, match=match):
        compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    with pytest.raises(ValueError, match=match):
        summary_table(f, n_resamples=9)
