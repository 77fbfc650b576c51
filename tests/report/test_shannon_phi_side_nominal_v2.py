"""The Shannon–φ plane places each side at the bits its coder codes at (referee T3 F3).

The plane inferred a side's bits from the bits columns (n + side total − mean total), which
is exact only where both sides carry the same overhead (K{a}V{b}). A user scheme whose keys
store more overhead than its values (both coded at 3 bits) was placed at 4.5 and 1.5 bits:
its values faced the limit at 1.5 bits, 9 dB (1.5 × 6.02 dB/bit) below the one at the rate
it codes at. Now the sweep records each side's nominal bits from its coder
(``key_bits_nominal``/``value_bits_nominal``) and the plane reads them; a frame without them
(results of an earlier version) keeps the inference, and such a folder loads and reports.
The first test fails on the code before the fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.quant.register import define_scheme
from kvstats.quant.uniform import UniformTokenCoder
from kvstats.report.shannon_phi import _side_bits, plot_shannon_phi

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NEW = ("key_bits_nominal", "value_bits_nominal")
D, N = 32, 64


def _coders(key_bits: int, value_bits: int, dim: int):
    # keys: a float16 scale/zero per 8 coordinates (+4 bits/coord); values: per vector (+1 at d=32)
    return UniformTokenCoder(key_bits, dim, 8, name="K"), UniformTokenCoder(value_bits, dim, dim)


def _register(name: str, key_bits: int, value_bits: int) -> None:
    def build(bits, dim, params, key_rng, value_rng, draws):
        return (key_bits + value_bits) / 2, *_coders(key_bits, value_bits, dim)

    def expected_bits(bits, dim, n, params):
        return tuple(sum(c.stored_bits(n).values()) for c in _coders(key_bits, value_bits, dim))

    kvstats.register_scheme(define_scheme(name, build, expected_bits, summary="keys: more overhead"))


def _sweep(schemes, out=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kvstats.run_sweep({"schemes": list(schemes), "budgets": [3], "distributions": ["gaussian"],
                                  "dims": [D], "n_keys": [N], "n_trials": 6, "comparisons": []},
                                 out=out, executor="serial", progress=False)


def _n_labels(fig) -> set[str]:
    return {t.get_text() for t in fig.axes[0].texts if t.get_text()[:1].isdigit()}


def _limit_ns(fig) -> set[float]:
    return {float(t.get_text().split("= ")[1]) for t in fig.axes[0].texts if t.get_text().startswith("limit")}


@pytest.mark.parametrize("key_bits, value_bits, k_at, v_at", [(3, 3, None, None), (4, 2, 4.0, 2.0)])
def test_asymmetric_overhead_faces_the_limit_at_the_coders_bits(user_registries, key_bits, value_bits,
                                                                  k_at, v_at):
    name = f"asym{key_bits}{value_bits}"
    _register(name, key_bits, value_bits)
    f = _sweep([name]).frame
    # the premise: keys store 4 bits/coord more overhead than values, so the old inference
    # (n + side total − mean total) put the keys 2 bits up and the values 2 bits down
    assert f["key_bits_total"].iloc[0] - key_bits == 4.0 and f["value_bits_total"].iloc[0] - value_bits == 1.0
    for place, at in (("k", k_at), ("v", v_at)):
        side = _side_bits(f, place)[(name, 3.0)]
        assert (np.isnan(side) if at is None else side == at), (place, side)   # was 4.5/1.5, 5.5/0.5
        fig = plot_shannon_phi(f, place)
        word = "keys" if place == "k" else "values"
        assert _n_labels(fig) == {"3" if at is None else f"3 ({word} at {at:g})"}
        assert _limit_ns(fig) == {3.0 if at is None else at}   # the limit it faces, and only it
    assert (f["key_bits_nominal"] == key_bits).all() and (f["value_bits_nominal"] == value_bits).all()


def test_mixed_precision_sides_from_the_recorded_columns():
    f = _sweep(["K4V2", "K2V4", "KQV"]).frame
    rec = f.drop_duplicates("scheme").set_index("scheme")[list(NEW)]
    assert rec.loc["K4V2"].tolist() == [4.0, 2.0] and rec.loc["K2V4"].tolist() == [2.0, 4.0]
    assert rec.loc["KQV"].tolist() == [3.0, 3.0]
    k, v = _side_bits(f, "k"), _side_bits(f, "v")
    assert (k[("K4V2", 3.0)], v[("K4V2", 3.0)], k[("K2V4", 3.0)], v[("K2V4", 3.0)]) == (4.0, 2.0, 2.0, 4.0)
    assert np.isnan(k[("KQV", 3.0)]) and np.isnan(v[("KQV", 3.0)])
    assert _side_bits(f, "t").isna().all()
    # a frame without the columns (an earlier version's) infers the same for K{a}V{b}
    old = f.drop(columns=list(NEW))
    assert _side_bits(old, "k").equals(k) and _side_bits(old, "v").equals(v)


def test_a_frame_mixing_old_and_new_rows_reads_each_cell_its_way(user_registries):
    _register("asym42", 4, 2)
    new = _sweep(["asym42"]).frame
    old = _sweep(["K4V2"]).frame.assign(key_bits_nominal=np.nan, value_bits_nominal=np.nan)
    both = pd.concat([new, old], ignore_index=True)
    k = _side_bits(both, "k")
    assert k[("asym42", 3.0)] == 4.0 and k[("K4V2", 3.0)] == 4.0   # recorded; inferred


def test_a_folder_of_the_previous_version_loads_and_reports(tmp_path, monkeypatch):
    """A sweep written without the new columns (the previous version's cell rows and
    schema) loads, reports (the Shannon–φ plane included) and keeps K4V2's sides."""
    from kvstats.sweep import store, work

    rows = work._cell_rows
    monkeypatch.setattr(work, "_cell_rows", lambda *a, **k: rows(*a, **k).drop(columns=list(NEW)))
    monkeypatch.setattr(store, "CELL_COLUMNS", tuple(c for c in store.CELL_COLUMNS if c not in NEW))
    out = tmp_path / "old"
    _sweep(["KQV", "K4V2"], out=out)
    monkeypatch.undo()                                   # this version reads it
    res = kvstats.load_result(out)
    assert not set(NEW) & set(res.frame.columns)
    assert _side_bits(res.frame, "k")[("K4V2", 3.0)] == 4.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = kvstats.hypothesis_report(out, tmp_path / "report", comparisons=[("KQV", "K4V2")],
                                        energy_resamples=49, bootstrap_resamples=99)
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "Shannon" in text and rep is not None
    assert sorted(p.name for p in (tmp_path / "report" / "figures").glob("*shannon*"))
