"""Referee R6, findings 2 and 6: crossovers of a concatenated table, and bad input named.

2. find_crossovers read the "no pair differs" flags with ``.loc[grp.index]``: on
   ``pd.concat`` of two compare_schemes tables without ignore_index (a repeated index,
   which add_adjusted_pvalues accepts) it returned both tables' rows, and zip paired this
   case's budgets with another case's flags: a false sentence, no error.
6. scheme_pairs and crossover_sentences raised a bare KeyError (or "too many values to
   unpack") on a frame lacking a column or a pair of three.
"""

import pandas as pd
import pytest

from kvstats.analysis import find_crossovers
from kvstats.analysis.compare import scheme_pairs
from kvstats.analysis.crossover import crossover_sentences

NR = "not resolvable at n = 5 pairs (smallest attainable adjusted p 1)"


def _table(dist, n_informative):
    return pd.DataFrame({"distribution": dist, "params": "-", "dim": 64, "n_keys": 128,
                         "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV",
                         "scheme_b": "QKQV", "metric": "kl", "test": "sign", "winner": [NR, NR],
                         "n_informative": n_informative})


def test_crossover_sentences_do_not_depend_on_the_tables_index():
    """The referee's cr2.py: gaussian, no pair differs at either budget; heavy_tailed, 3
    pairs differ at both (blind). Before, the concatenation without ignore_index read
    "no significant winner at any budget (not resolvable at n = 3; no pair differs at
    n = 2)" for both cases."""
    t1, t2 = _table("gaussian", [0.0, 0.0]), _table("heavy_tailed", [3.0, 3.0])
    fresh = find_crossovers(pd.concat([t1, t2], ignore_index=True))
    for index in (pd.concat([t1, t2]), pd.concat([t1, t2]).set_axis([7, 7, 7, 7])):
        assert find_crossovers(index).equals(fresh)
    assert fresh["description"].tolist() == [
        "no crossover in kl for gaussian, d = 64, N = 128: no pair differs at any budget "
        "(the values were equal on every unit).",
        "no crossover can be seen in kl for heavy_tailed, d = 64, N = 128: no budget's test "
        "could have rejected."]


def test_scheme_pairs_names_a_missing_column_and_a_bad_pair():
    f = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 8, "n_keys": 4,
                      "scheme": ["A", "B"], "budget": [3.0, 3.0]})
    with pytest.raises(ValueError, match=r"frame must have the columns .* it lacks \['distribution'"):
        scheme_pairs(pd.DataFrame({"a": [1]}), [("A", "B")])
    with pytest.raises(ValueError, match=r"it lacks \['budget'\]"):
        scheme_pairs(f.drop(columns="budget"), [("A", "B")])
    with pytest.raises(TypeError, match=r"comparisons must be a list of \(scheme_a, scheme_b\) "
                                        r"pairs.*received the item \('A', 'B', 'C'\)"):
        scheme_pairs(f, [("A", "B", "C")])          # at the call, not at the first next()
    with pytest.raises(TypeError, match="frame must be a per-trial DataFrame; received dict"):
        scheme_pairs({"scheme": ["A"]}, [("A", "B")])
    assert [p[1:5] for p in scheme_pairs(f, iter([("A", "B")]))] == [(3.0, 3.0, "A", "B")]


def test_crossover_sentences_names_a_missing_column():
    case = {"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128}
    cross = pd.DataFrame([{**case, "scheme_a": "A", "scheme_b": "B", "crossover": True,
                           "description": "CROSSOVER in kl for gaussian: A wins at n = 2; B wins at n = 3."}])
    summary = pd.DataFrame([{**case, "budget": 2, "scheme": s, "bits_total": 2.0} for s in "AB"])
    with pytest.raises(ValueError, match=r"summary must be the table of summary_table .* it lacks "
                                         r"\['distribution', 'params', 'dim', 'n_keys', 'scheme', "
                                         r"'bits_total'\]; received columns \['x'\]"):
        crossover_sentences(cross, pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match=r"crossovers must be the table of find_crossovers .* "
                                         r"it lacks \['description'\]"):
        crossover_sentences(cross.drop(columns="description"), summary)
    with pytest.raises(TypeError, match="summary must be a DataFrame; received list"):
        crossover_sentences(cross, [])
    # an empty crossover table, with or without columns: no sentence
    assert crossover_sentences(pd.DataFrame(), summary) == []
    assert crossover_sentences(cross.iloc[:0], summary) == []
    assert crossover_sentences(cross, summary) == [
        cross["description"].iloc[0] + " Bits stored per coordinate: A 2, B 2."]
