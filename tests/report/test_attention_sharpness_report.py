"""Each case's section of the report says how sharp its exact attention is (the trials'
``attn_entropy``), and a frame without the column gives the report it gave before."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.report import hypothesis_report
from kvstats.report.notation import _num
from kvstats.report.sections import FEW_KEYS, _sharpness_texts

CASE = ("gaussian", "-", 128, 256)


def _frame(entropies, n_keys=256, schemes=("KV", "KQV")):
    """One case's rows: every scheme on the same trials, with these entropies."""
    return pd.DataFrame([{"distribution": "gaussian", "params": "-", "dim": 128, "n_keys": n_keys,
                          "scheme": s, "trial": i, "attn_entropy": h}
                         for s in schemes for i, h in enumerate(entropies)])


def test_the_line_reports_mean_and_range_over_the_trials_once_each():
    text = _sharpness_texts(_frame([5.0, 5.2, 4.9, 5.3]))[CASE]
    # over 4 trials (not 8 rows: every scheme holds the same trials); ln 256 = 5.545
    assert "mean 5.1 nats (range 4.9 to 5.3 over 4 trials; ln N = 5.545 for uniform" in text
    assert f"exp(mean H) = {math.exp(5.1):.3g} of the 256 keys" in text
    assert text.endswith("the same for every scheme: not tested.")


@pytest.mark.parametrize("keys, reading", [(256, "near uniform"), (128, "near uniform"),
                                           (127.9, "between the two"), (24.5, "between the two"),
                                           (5.01, "between the two"), (FEW_KEYS, "concentrated on few keys"),
                                           (1.0, "concentrated on few keys")])
def test_the_reading_follows_its_stated_rule(keys, reading):
    # concentrated on few keys: exp(mean H) ≤ 5; else near uniform: ≥ N/2 = 128
    text = _sharpness_texts(_frame([math.log(keys)]))[CASE]    # one trial: its mean is exact
    assert f"attended: {reading} (rule: concentrated on few keys when exp(mean H) ≤ {FEW_KEYS}, " \
           "else near uniform when ≥ N/2)" in text


def test_few_keys_are_concentrated_even_where_half_of_n_is_fewer():
    # N = 8: exp(mean H) = 4.5 is ≥ N/2 and ≤ 5; the rule reads it concentrated, as it states
    f = _frame([math.log(4.5)], n_keys=8)
    (text,) = _sharpness_texts(f).values()
    assert "of the 8 keys effectively attended: concentrated on few keys (rule" in text


def test_no_line_without_the_column_or_its_values():
    assert _sharpness_texts(_frame([5.0]).drop(columns="attn_entropy")) == {}
    assert _sharpness_texts(_frame([np.nan, np.nan])) == {}
    # a trial missing its value (a cell from before the column) is left out of the count
    assert "over 1 trial;" in _sharpness_texts(_frame([5.0, np.nan]))[CASE]


def test_each_case_section_has_the_line_and_a_frame_without_it_reports_as_before(tmp_path):
    res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [2, 3],
                             "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 1.5}}],
                             "dims": [32], "n_keys": [64], "n_trials": 16},
                            executor="serial", progress=False)
    opts = dict(energy_resamples=19, bootstrap_resamples=99, figures=False)
    new = hypothesis_report(res, tmp_path / "new", **opts)
    old = hypothesis_report(dataclasses.replace(res, frame=res.frame.drop(columns="attn_entropy")),
                            tmp_path / "old", **opts)
    new_md = (tmp_path / "new" / "report.md").read_text().splitlines()
    old_md = (tmp_path / "old" / "report.md").read_text().splitlines()
    added = [line for line in new_md if line.startswith("Exact attention: entropy H")]
    # one line per case, right under its heading, and nothing else changed
    assert len(added) == 2
    for line in added:
        i = new_md.index(line)
        assert new_md[i - 2].startswith("## ") and new_md[i - 1] == "" and new_md[i + 1] == ""
    assert _without(new_md, added) == old_md
    # the numbers are the trials' own
    h = res.frame[res.frame.distribution == "gaussian"].drop_duplicates("trial")["attn_entropy"]
    assert f"mean {_num(h.mean())} nats" in added[0]
    assert "near uniform" in added[0] and "concentrated on few keys (rule" in added[1]
    # no table, summary, test or metric row of it
    for name in ("summary", "comparisons", "crossovers", "theory"):
        assert (new.files[name].read_bytes() == old.files[name].read_bytes()), name
    assert "attn_entropy" not in (tmp_path / "new" / "report.md").read_text()


def _without(lines, added):
    """``lines`` with each added line and the blank line after it removed."""
    out, skip = [], False
    for line in lines:
        if line in added:
            skip = True
            continue
        if skip and line == "":
            skip = False
            continue
        skip = False
        out.append(line)
    return out

