"""experiments/real_report.py: the paired KQV vs QKQV table of the profile section.

The reference is kvstats.stats.sign_test applied by hand to the matched units of a fake
profile frame (rows shuffled, so matching by (text, layer, head) is exercised).
"""

import importlib.util
import pathlib

import numpy as np
import pandas as pd
import pytest

from kvstats.stats import adjust_pvalues, sign_test

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "real_report.py"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("real_report", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fake_profile(seed: int = 0) -> pd.DataFrame:
    """5 texts x 2 layers x 2 heads, budgets 2 and 4, KQV / QKQV / KV, rows shuffled."""
    rng = np.random.default_rng(seed)
    idx = pd.MultiIndex.from_product([[2, 4], range(5), range(2), range(2)],
                                     names=["bits", "text", "layer", "head"]).to_frame(index=False)
    base = rng.normal(size=len(idx))
    frames = []
    for scheme, shift in (("KQV", -0.3), ("QKQV", 0.0), ("KV", 5.0)):
        f = idx.copy()
        f["scheme"] = scheme
        f["kl"] = base + shift + rng.normal(size=len(idx))
        # ties: recall equal on half the trials
        f["recall_at_5"] = np.where(np.arange(len(idx)) % 2 == 0, 0.8, rng.uniform(size=len(idx)))
        frames.append(f)
    return pd.concat(frames).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def reference(prof: pd.DataFrame, unit: list[str], metric: str, bits: int):
    g = prof[prof.bits == bits]
    a = g[g.scheme == "KQV"].groupby(unit)[metric].mean().sort_index()
    b = g[g.scheme == "QKQV"].groupby(unit)[metric].mean().sort_index()
    return a.to_numpy(), b.to_numpy()


@pytest.mark.parametrize("unit,keys", [("trial", ["text", "layer", "head"]), ("text", ["text"])])
def test_sign_test_on_matched_units(report, unit, keys):
    prof = fake_profile()
    t = report.kqv_qkqv_tests(prof, unit, ("kl", "recall_at_5"))
    assert len(t) == 4
    for r in t.itertuples():
        x, y = reference(prof, keys, r.metric, r.bits)
        st = sign_test(x, y)
        assert r.n == len(x) == (20 if unit == "trial" else 5)
        assert r.sign_p == st.pvalue
        assert (r.dominance, r.dom_low, r.dom_high) == (st.dominance, st.dominance_low, st.dominance_high)
        assert r.n_kqv_lower == st.n_negative and r.frac_kqv_lower == st.n_negative / len(x)
        assert r.mean_kqv == pytest.approx(x.mean()) and r.mean_qkqv == pytest.approx(y.mean())
    np.testing.assert_array_equal(t.sign_p_holm, adjust_pvalues(t.sign_p.to_numpy(), method="holm")
                                  .pvalues_adjusted)


def test_direction_and_pairing(report):
    """KQV lower on every trial: dominance -1 and p = 2^(1-n); unpaired shuffling would not give it."""
    prof = fake_profile()
    kqv = prof.scheme == "KQV"
    prof.loc[kqv, "kl"] = prof.loc[kqv].merge(prof[prof.scheme == "QKQV"], on=["bits", "text", "layer", "head"],
                                              how="left", suffixes=("", "_q"))["kl_q"].to_numpy() - 1e-3
    t = report.kqv_qkqv_tests(prof, "trial", ("kl",))
    assert (t.dominance == -1).all() and (t.n_kqv_lower == 20).all()
    np.testing.assert_allclose(t.sign_p, 2.0 ** (1 - 20))


def test_bad_input(report):
    prof = fake_profile()
    with pytest.raises(ValueError, match="unit"):
        report.kqv_qkqv_tests(prof, "layer")
    with pytest.raises(ValueError, match="columns"):
        report.kqv_qkqv_tests(prof.drop(columns="head"), "trial", ("kl",))
    with pytest.raises(ValueError, match="more than one row"):
        report.kqv_qkqv_tests(pd.concat([prof, prof.iloc[:1]]), "trial", ("kl",))


def fake_positions(seed: int = 0) -> pd.DataFrame:
    """Configs a, b (8 texts x 5 positions) and p (texts 0..4 only, as the peers' fewer texts), shuffled."""
    rng = np.random.default_rng(seed)
    frames = []
    for config, shift, texts in (("a", -0.4, range(8)), ("b", 0.0, range(8)), ("p", 0.3, range(5))):
        idx = pd.MultiIndex.from_product([texts, range(5)], names=["text", "position"]).to_frame(index=False)
        idx["config"] = config
        idx["kl"] = np.exp(rng.normal(size=len(idx)) + shift + 0.5 * idx.text)
        frames.append(idx)
    return pd.concat(frames).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def test_e2e_sign_tests_against_sign_test_by_hand(report):
    pos = fake_positions()
    pairs = [("a", "b"), ("a", "p"), ("p", "b")]
    t = report.e2e_sign_tests(pos, pairs)
    assert [(r.a, r.b) for r in t.itertuples()] == pairs
    for r in t.itertuples():
        # per-text means of the texts both ran, matched by text (index-aligned)
        x = pos[pos.config == r.a].groupby("text").kl.mean()
        y = pos[pos.config == r.b].groupby("text").kl.mean()
        x, y = x.align(y, join="inner")
        st = sign_test(x.to_numpy(), y.to_numpy())
        assert r.n == len(x) == (8 if "p" not in (r.a, r.b) else 5)
        assert r.sign_p == st.pvalue and r.n_a_lower == st.n_negative
        assert (r.dominance, r.dom_low, r.dom_high) == (st.dominance, st.dominance_low, st.dominance_high)
        assert r.mean_a == pytest.approx(x.mean()) and r.mean_b == pytest.approx(y.mean())
        m = pos[pos.config == r.a].merge(pos[pos.config == r.b], on=["text", "position"])
        assert r.n_positions == len(m) and r.frac_pos_a_lower == pytest.approx(np.mean(m.kl_x < m.kl_y))
    np.testing.assert_array_equal(t.sign_p_holm, adjust_pvalues(t.sign_p.to_numpy(), method="holm")
                                  .pvalues_adjusted)


def test_e2e_sign_tests_pairs_by_text(report):
    """a lower than b on every text by a margin smaller than the spread between texts: the
    paired test gives the full 2^(1-n); an unpaired or mis-matched one would not."""
    pos = fake_positions()
    b = pos[pos.config == "b"].copy()
    a = b.assign(config="a", kl=b.kl - 1e-3)
    t = report.e2e_sign_tests(pd.concat([a, b]).sample(frac=1.0, random_state=1), [("a", "b")])
    assert t.n_a_lower.iloc[0] == 8 and t.dominance.iloc[0] == -1
    assert t.sign_p.iloc[0] == 2.0 ** (1 - 8) and t.frac_pos_a_lower.iloc[0] == 1.0


def test_e2e_sign_tests_bad_input(report):
    pos = fake_positions()
    with pytest.raises(ValueError, match="columns"):
        report.e2e_sign_tests(pos.drop(columns="position"), [("a", "b")])
    with pytest.raises(ValueError, match="more than one row"):
        report.e2e_sign_tests(pd.concat([pos, pos.iloc[:1]]), [("a", "b")])
    with pytest.raises(ValueError, match="no rows"):
        report.e2e_sign_tests(pos, [("a", "zz")])
