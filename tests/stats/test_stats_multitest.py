"""Multiple-testing corrections: reference values, family-wise error control, tidy helper."""

import warnings

import numpy as np
import pandas as pd
import pytest

from kvstats.stats import add_adjusted_pvalues, adjust_pvalues


def test_holm_and_bh_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm (1979) by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, running max
    holm = adjust_pvalues(p)
    np.testing.assert_allclose(holm.pvalues_adjusted, [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    assert holm.reject.tolist() == [True, False, False, True]
    # Benjamini-Hochberg (1995) by hand: p_(i) m / i with running min from the top:
    # 0.005*4/1=0.02, 0.01*4/2=0.02, 0.03*4/3=0.04, 0.04*4/4=0.04
    bh = adjust_pvalues(p, method="fdr_bh")
    np.testing.assert_allclose(bh.pvalues_adjusted, [0.02, 0.04, 0.04, 0.02], rtol=1e-12)
    assert bh.reject.all()
    frame = bh.to_frame()
    assert list(frame.columns) == ["pvalue", "pvalue_adjusted", "reject", "adjust_method", "alpha"]


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_holm_and_bonferroni_equal_statsmodels_bit_for_bit(method, monkeypatch):
    # computed here (statsmodels' Holm calls gc.collect() per call); reference:
    # statsmodels.stats.multitest.multipletests, on families with ties, zeros and ones.
    # Its gc.collect() (no effect on the numbers) is stubbed out: 400 of them cost 51 s
    # late in a large pytest process, 0.2 s without.
    import gc

    from statsmodels.stats.multitest import multipletests

    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)

    rng = np.random.default_rng(0)
    for t in range(400):
        m = int(rng.integers(1, 60))
        p = rng.random(m) ** rng.uniform(0.2, 8)
        p = np.round(p, 2) if t % 3 == 0 else p
        p[: m // 2] = 0.0 if t % 7 == 0 else p[: m // 2]
        p[-1] = 1.0 if t % 11 == 0 else p[-1]
        alpha = (0.05, 0.01, 0.2)[t % 3]
        reject, adjusted, _, _ = multipletests(p, alpha=alpha, method=method)
        res = adjust_pvalues(p, method=method, alpha=alpha)
        assert np.array_equal(res.reject, reject) and np.array_equal(res.pvalues_adjusted, adjusted)


def test_shape_is_kept():
    p = np.linspace(0.001, 0.9, 12).reshape(3, 4)
    res = adjust_pvalues(p, method="bonferroni")
    assert res.pvalues_adjusted.shape == (3, 4)
    np.testing.assert_allclose(res.pvalues_adjusted, np.minimum(p * 12, 1.0))


@pytest.mark.slow
def test_holm_controls_familywise_error(calib):
    # 20 true nulls with uniform p-values: P(any rejection) <= 0.05 (Holm), and BH equals
    # Holm's FWER bound when all nulls are true (FDR = FWER then)
    reps = calib.replicates(2000, 20000)
    rng = np.random.default_rng(1)
    p = rng.random((reps, 20))
    any_holm = np.array([adjust_pvalues(row).reject.any() for row in p])
    any_bh = np.array([adjust_pvalues(row, method="fdr_bh").reject.any() for row in p])
    lo, hi = calib.binom_interval(reps, 0.05)
    assert any_holm.mean() <= hi
    assert any_bh.mean() <= hi
    # Holm is not trivially conservative: its FWER under independence is 1 - 0.95^(...) ~ 0.049
    assert any_holm.mean() >= lo


def test_add_adjusted_pvalues_whole_family_and_groups():
    df = pd.DataFrame({"budget": [2, 2, 3, 3], "pvalue": [0.01, 0.04, 0.03, 0.005]})
    out = add_adjusted_pvalues(df)
    np.testing.assert_allclose(out["pvalue_adjusted"], [0.03, 0.06, 0.06, 0.02])
    assert out["reject"].dtype == bool and list(out["adjust_method"]) == ["holm"] * 4
    assert "pvalue_adjusted" not in df.columns          # input untouched
    grouped = add_adjusted_pvalues(df, by="budget", method="bonferroni")
    np.testing.assert_allclose(grouped["pvalue_adjusted"], [0.02, 0.08, 0.06, 0.01])
    renamed = add_adjusted_pvalues(df.rename(columns={"pvalue": "p"}), pvalue_column="p")
    assert "pvalue_adjusted" in renamed.columns


def test_add_adjusted_pvalues_with_a_repeated_index_and_missing_keys():
    # A frame from pd.concat without ignore_index repeats its index labels: families are
    # rows, not labels. Holm by hand (also statsmodels' multipletests on each family):
    # whole table: sorted 0.01, 0.02, 0.03, 0.04 times 4, 3, 2, 1, running max ->
    # 0.04, 0.06, 0.06, 0.06; by g: a = (0.01, 0.02) -> 0.02, 0.02; b = (0.03, 0.04) ->
    # 0.06, 0.06. The label-based version gave 0.08, 0.12, 0.12, 0.12 (a family of 8).
    part = pd.DataFrame({"g": ["a", "b"], "pvalue": [0.01, 0.03]})
    df = pd.concat([part, part.assign(pvalue=[0.02, 0.04])])       # index 0, 1, 0, 1
    assert df.index.tolist() == [0, 1, 0, 1]
    np.testing.assert_allclose(add_adjusted_pvalues(df)["pvalue_adjusted"],
                               [0.04, 0.06, 0.06, 0.06], rtol=1e-12)
    out = add_adjusted_pvalues(df, by="g")
    np.testing.assert_allclose(out["pvalue_adjusted"], [0.02, 0.06, 0.02, 0.06], rtol=1e-12)
    assert out["reject"].tolist() == [True, False, True, False]
    assert out.index.tolist() == [0, 1, 0, 1] and out["pvalue"].tolist() == df["pvalue"].tolist()
    # a missing key is a family of its own, never a row silently left out (NaN, False)
    df = pd.DataFrame({"g": ["a", "a", None, None, "b"], "pvalue": [0.01, 0.02, 0.01, 0.04, 0.3]})
    out = add_adjusted_pvalues(df, by="g")
    np.testing.assert_allclose(out["pvalue_adjusted"], [0.02, 0.02, 0.02, 0.04, 0.3], rtol=1e-12)
    assert out["reject"].tolist() == [True, True, True, True, False]


def test_alpha_and_the_ends_of_the_unit_interval():
    # p = 0 and p = 1 are p-values like any other, and alpha decides the rejections.
    # Holm by hand: sorted p times 6, 5, 4, 3, 2, 1 with a running max, clipped at 1:
    # 0, 0.1, 0.12, 0.135, 0.4, 1 (reference also statsmodels' multipletests)
    p = np.array([0.0, 0.02, 0.03, 0.045, 0.2, 1.0])
    res = adjust_pvalues(p, alpha=0.1)
    np.testing.assert_allclose(res.pvalues_adjusted, [0.0, 0.1, 0.12, 0.135, 0.4, 1.0],
                               rtol=1e-12)
    assert res.reject.tolist() == [True, True, False, False, False, False] and res.alpha == 0.1
    assert adjust_pvalues(p).reject.tolist() == [True] + [False] * 5       # alpha = 0.05
    # BH by hand: p_(i) 6 / i, running min from the top: 0, 0.06, 0.06, 0.0675, 0.24, 1
    bh = adjust_pvalues(p, method="fdr_bh", alpha=0.065)
    np.testing.assert_allclose(bh.pvalues_adjusted, [0.0, 0.06, 0.06, 0.0675, 0.24, 1.0],
                               rtol=1e-12)
    assert bh.reject.tolist() == [True, True, True, False, False, False]
    df = pd.DataFrame({"pvalue": p})
    assert add_adjusted_pvalues(df, alpha=0.1)["reject"].tolist() == res.reject.tolist()


@pytest.mark.parametrize("method", ["holm", "fdr_bh", "hommel", "fdr_by", "holm-sidak"])
def test_adjusted_pvalues_are_monotone_and_dominate_the_raw_ones(method):
    # step-up/step-down adjustments keep the order of the raw p-values, never lower one,
    # never exceed 1, and reject exactly where the adjusted value is <= alpha
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.random(40), rng.random(10) * 1e-3])
    res = adjust_pvalues(p, method=method)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(res.pvalues_adjusted[order]) >= 0)
    assert np.all(res.pvalues_adjusted >= p) and np.all(res.pvalues_adjusted <= 1)
    assert np.array_equal(res.reject, res.pvalues_adjusted <= 0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="pvalues must not be empty"):
        adjust_pvalues([])
    with pytest.raises(ValueError, match="pvalues must be finite"):
        adjust_pvalues([0.1, np.nan])
    with pytest.raises(ValueError, match=r"pvalues must lie in \[0, 1\]"):
        adjust_pvalues([0.1, 1.5])
    with pytest.raises(ValueError, match="method must be one of"):
        adjust_pvalues([0.1], method="BH")
    with pytest.raises(ValueError, match="alpha must be in"):
        adjust_pvalues([0.1], alpha=0.0)
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        add_adjusted_pvalues({"pvalue": [0.1]})
    with pytest.raises(ValueError, match="pvalue_column must name a column"):
        add_adjusted_pvalues(pd.DataFrame({"p": [0.1]}))
    with pytest.raises(ValueError, match=r"by must name columns of frame .*'nope'"):
        add_adjusted_pvalues(pd.DataFrame({"pvalue": [0.1], "budget": [2]}), by=["budget", "nope"])
    with pytest.raises(TypeError, match="pvalue_column 'pvalue' must hold numeric p-values"):
        add_adjusted_pvalues(pd.DataFrame({"pvalue": ["0.1"]}))
    # a bad p-value in the frame is named by its column and row (not as adjust_pvalues'
    # "pvalues", an argument the caller never passed)
    for value in (np.nan, 1.2, -0.1):
        with pytest.raises(ValueError, match=r"pvalue_column 'p' must hold p-values in \[0, 1\] "
                                             r"\(no NaN\); received 1 other value\(s\), the first "
                                             rf"{value!r} at row 1"):
            add_adjusted_pvalues(pd.DataFrame({"p": [0.1, value, 0.3], "g": [0, 0, 1]}),
                                 pvalue_column="p", by="g")


@pytest.mark.parametrize("method", ["sidak", "holm-sidak"])
def test_sidak_of_a_pvalue_of_one_is_one_without_a_warning(method):
    # 1 − (1 − p)^m at p = 1 is 1 exactly (closed form); the log1p route must not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = adjust_pvalues([1.0, 0.5, 0.01], method=method)
    m = 3
    expected = {"sidak": [1.0, 1 - 0.5**m, 1 - 0.99**m],
                "holm-sidak": [1.0, 1 - 0.5**2, 1 - 0.99**3]}[method]
    np.testing.assert_allclose(res.pvalues_adjusted, expected, rtol=1e-12)


def test_every_correction_of_the_family_adjusts_and_has_a_resolution():
    """kvstats.stats.catalog.CORRECTIONS, the one list the analysis, the report's options
    and the parser read: each one adjusts p-values and has a closed-form first step."""
    from kvstats.stats.catalog import CORRECTIONS
    from kvstats.stats.multitest import ADJUST_METHODS
    from kvstats.stats.sequential import required_resolution

    assert set(CORRECTIONS) <= set(ADJUST_METHODS) and len(set(CORRECTIONS)) == len(CORRECTIONS)
    for correction in CORRECTIONS:
        assert required_resolution(10, 0.05, correction).n_permutations > 0
