"""summarize_quality on hand-made per-position rows (no model needed)."""

import numpy as np
import pandas as pd
import pytest

from kvstats.models import summarize_quality


def test_summary_values_by_hand():
    kl = np.array([0.0, 0.2, 0.4, 0.1, 0.3])
    df = pd.DataFrame({"scheme": "KQV", "bits": 4.0, "window": 0, "mode": "prefill",
                       "text": [0, 0, 0, 1, 1], "position": [0, 1, 2, 0, 1], "kl": kl,
                       "top1_agree": [True, True, False, True, False],
                       "nll_ref": [1.0, 2.0, 3.0, 1.0, 3.0], "nll_quant": [1.5, 2.0, 3.5, 1.0, 3.0]})
    df.attrs["memory"] = {"KQV:4": (100.0, 400.0)}
    s = summarize_quality(df).iloc[0]
    assert s.n_texts == 2 and s.n_positions == 5
    assert s.mean_kl == pytest.approx(0.2)
    assert s.se_kl == pytest.approx(np.std(kl, ddof=1) / np.sqrt(5))
    # per-text means 0.2 and 0.2 -> zero spread between texts
    assert s.se_kl_text == pytest.approx(0.0)
    assert s.median_kl == pytest.approx(0.2) and s.max_kl == pytest.approx(0.4)
    assert s.p99_kl == pytest.approx(np.quantile(kl, 0.99))
    assert s.top1_agreement == pytest.approx(0.6)
    assert s.ppl_ref == pytest.approx(np.exp(2.0)) and s.ppl_ratio == pytest.approx(np.exp(0.2))
    assert s.bytes_per_token == 100.0 and s.ratio_to_fp16 == 0.25


def test_one_row_per_configuration_and_bad_input():
    base = dict(window=0, mode="prefill", text=0, position=0, kl=0.1, top1_agree=True,
                nll_ref=1.0, nll_quant=1.1)
    df = pd.DataFrame([{**base, "scheme": "KV", "bits": 2.0}, {**base, "scheme": "KV", "bits": 3.0},
                       {**base, "scheme": "identity", "bits": np.nan}])
    s = summarize_quality(df)
    assert len(s) == 3 and list(s.scheme) == ["KV", "KV", "identity"]
    with pytest.raises(ValueError, match=r"missing columns \['kl'\]"):
        summarize_quality(df.drop(columns="kl"))


def test_text_level_error_bar_is_the_standard_error_of_the_per_text_means():
    # equal lengths: se_kl_text = sd(ddof=1) / sqrt(3) of the per-text means (0.1, 0.2, 0.6)
    kl = [0.1, 0.1, 0.2, 0.2, 0.6, 0.6]
    df = pd.DataFrame({"scheme": "KV", "bits": 2.0, "window": 0, "mode": "prefill",
                       "text": [0, 0, 1, 1, 2, 2], "position": [0, 1] * 3, "kl": kl,
                       "top1_agree": True, "nll_ref": 1.0, "nll_quant": 1.0})
    s = summarize_quality(df).iloc[0]
    means = np.array([0.1, 0.2, 0.6])
    assert s.se_kl_text == pytest.approx(np.std(means, ddof=1) / np.sqrt(3), rel=1e-12)
    assert s.n_texts == 3 and s.mean_kl == pytest.approx(np.mean(kl))


def test_text_level_error_bar_belongs_to_mean_kl_for_texts_of_unequal_length():
    # mean_kl is over positions, so a long text weighs more; its standard error with texts
    # as units is the cluster-robust (CR1) one of statsmodels' OLS on a constant with the
    # texts as clusters. (It was sd(per-text means)/sqrt(n), the error bar of the unweighted
    # mean of means, another estimate: 0.099 here against the right 0.043.)
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(0)
    lengths = [3, 9, 1, 6, 14]
    text = np.repeat(np.arange(5), lengths)
    kl = rng.exponential(0.1 * (1 + text), size=text.size)
    df = pd.DataFrame({"scheme": "KV", "bits": 2.0, "window": 0, "mode": "prefill", "text": text,
                       "position": np.concatenate([np.arange(n) for n in lengths]), "kl": kl, "top1_agree": True, "nll_ref": 1.0, "nll_quant": 1.0})
    s = summarize_quality(df).iloc[0]
    fit = sm.OLS(kl, np.ones(kl.size)).fit(cov_type="cluster", cov_kwds={"groups": text})
    assert s.mean_kl == pytest.approx(fit.params[0], rel=1e-12)
    assert s.se_kl_text == pytest.approx(fit.bse[0], rel=1e-10)
    means = pd.Series(kl).groupby(text).mean()
    assert abs(s.se_kl_text - means.std(ddof=1) / np.sqrt(5)) > 0.01
