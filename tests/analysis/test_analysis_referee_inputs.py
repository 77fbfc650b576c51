"""Referee pass on the analysis tables' bad input (public API): each case was accepted
silently, or failed with an error naming no argument, before its fix."""

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import aggregate_clusters, compare_schemes, find_crossovers, summary_table

from _sweep_frames import clustered_frame, make_frame

PAIR = [("KQV", "QKQV")]


@pytest.fixture(scope="module")
def frame():
    return make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3}, n=10)


@pytest.mark.parametrize("name, value", [("energy", "no"), ("energy", 0), ("progress", "yes"),
                                         ("ks", "no"), ("ks", 1)])
def test_a_flag_that_is_not_a_bool_is_refused(frame, name, value):
    # energy="no" is truthy: it ran the energy tests; ks="no" ran the KS tests
    with pytest.raises(TypeError, match=rf"{name} must be True(, False or None| or False).*; "
                                        rf"received {value!r}"):
        compare_schemes(frame, PAIR, metrics=["kl"], pairing="none", **{name: value})
    # numpy's bools (a table's column) are bools
    t = compare_schemes(frame, PAIR, metrics=["kl"], pairing="none", energy=np.bool_(False),
                        ks=np.bool_(False))
    assert set(t["test"]) == {"mann_whitney"}


def test_nothing_to_test_is_refused(frame):
    # was an empty table (0 tests) without a word
    with pytest.raises(ValueError, match=r"nothing to test: metrics is empty and energy=False.*"
                                         r"received metrics=\[\]"):
        compare_schemes(frame, PAIR, metrics=[], energy=False)
    # the energy test alone is a family
    t = compare_schemes(frame, PAIR, metrics=[], energy_resamples=19, energy_resolution="fixed")
    assert t["test"].tolist() == ["energy"]


@pytest.mark.parametrize("column", ["budget", "bits_total"])
def test_a_text_budget_or_bits_column_is_named(frame, column):
    # was numpy's "could not convert string to float: 'two'", naming no column
    bad = frame.assign(**{column: "two"})
    for call in (lambda f: compare_schemes(f, PAIR, metrics=["kl"], energy=False),
                 lambda f: summary_table(f, n_resamples=49)):
        with pytest.raises(TypeError, match=rf"frame column\(s\) budget, bits_nominal and "
                                            rf"bits_total must be numeric .*\['{column} \("):
            call(bad)


def test_a_text_pooled_snr_column_is_named(frame):
    with pytest.raises(TypeError, match=r"metric column\(s\) must be numeric; received \['snr_k_pooled \("):
        compare_schemes(frame.assign(snr_k_pooled="x"), PAIR, metrics=["snr_k_pooled"], energy=False)


@pytest.mark.parametrize("ids, shown", [(lambda c: c + 0.5, "0.5"), (lambda c: c.astype(str) + "a", "'0a'")])
def test_cluster_ids_must_be_integers(ids, shown):
    f = clustered_frame(n_texts=4, per_text=3)
    # 0.5 and 0.7 were both cast to cluster 0: two texts merged into one unit without a word
    for call in (aggregate_clusters, lambda g: compare_schemes(g, PAIR, metrics=["kl"], energy=False)):
        with pytest.raises(ValueError, match=rf"frame\['cluster'\] must hold integer cluster ids "
                                             rf".*received 48 other value\(s\), the first {shown}"):
            call(f.assign(cluster=ids(f["cluster"])))
    # integral floats (a column with NaN for synthetic trials) are ids
    g = aggregate_clusters(f.assign(cluster=f["cluster"].astype(float)))
    assert g["cluster"].tolist() == aggregate_clusters(f)["cluster"].tolist()


def test_a_crossover_table_without_text_winners_is_refused():
    t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
                      "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV",
                      "scheme_b": "QKQV", "metric": "kl", "test": "sign", "winner": ["QKQV", np.nan]})
    # was AttributeError: 'float' object has no attribute 'startswith'
    with pytest.raises(TypeError, match=r"winner column must hold compare_schemes' text .*received nan"):
        find_crossovers(t)
