"""plot_shannon_phi's crosses with clusters of trials as the unit (referee RW, F2).

Trials of one real text are correlated, so the crosses of the real Shannon–φ figure must
take the text, not the trial, as the unit. References: with equal cluster sizes the
cluster-robust (CR1) standard error of the mean is sd(cluster means)/√G, so the cross is
scipy.stats.t.interval(0.95, G − 1) on the G cluster means (computed here with scipy,
not with kvstats); with unequal sizes it is CR1 written out from its definition
(Cameron & Miller 2015, eq. 11 with the G/(G−1) factor, regression on a constant);
with one trial per cluster it is the trial interval (t on n − 1 degrees of freedom).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import kvstats
import kvstats.analysis


def _frame(sizes, seed=0, shared=1.0):
    """One scheme at one budget; trials of cluster g share a random effect of sd ``shared``."""
    rng = np.random.default_rng(seed)
    text = np.repeat(np.arange(len(sizes)), sizes)
    effect = rng.normal(0.0, shared, len(sizes))[text]
    n = text.size
    others = {m: 1.0 + rng.random(n) for m in kvstats.analysis.METRICS}   # not drawn at place k
    return pd.DataFrame({**others, "phi_k": np.exp(-1.0 + 0.3 * effect + 0.1 * rng.normal(size=n)),
                         "snr_k": 10.0 + 2.0 * effect + 0.5 * rng.normal(size=n),
                         "text": text, "trial": np.arange(n)})


def _cross(frame, **kw):
    """(x half-width, y half-width, x mean, y mean) of the one cross drawn."""
    fig = kvstats.plot_shannon_phi(frame, "k", scheme="KQV", budget=4, clouds=False, **kw)
    try:
        (c,) = [c for c in fig.axes[0].containers if hasattr(c, "has_xerr")]
        xbar, ybar = c.lines[2]
        (xs,), (ys,) = xbar.get_segments(), ybar.get_segments()
        return (xs[1][0] - xs[0][0]) / 2, (ys[1][1] - ys[0][1]) / 2, (xs[1][0] + xs[0][0]) / 2, \
            (ys[1][1] + ys[0][1]) / 2
    finally:
        plt.close(fig)


def test_equal_clusters_give_the_t_interval_of_the_cluster_means():
    f = _frame([9] * 12)
    hx, hy, mx, my = _cross(f, cluster="text")
    means = f.groupby("text")[["phi_k", "snr_k"]].mean()
    for col, half, centre in (("phi_k", hx, mx), ("snr_k", hy, my)):
        g = means[col].to_numpy()
        low, high = stats.t.interval(0.95, g.size - 1, loc=g.mean(), scale=stats.sem(g))
        assert half == pytest.approx((high - low) / 2, rel=1e-9)
        assert centre == pytest.approx(f[col].mean(), rel=1e-12)      # the trials' mean, as before
    # the trials as units would be far narrower on these correlated trials (the bug)
    hx_trial, hy_trial, *_ = _cross(f)
    assert hx > 2 * hx_trial and hy > 2 * hy_trial


def test_unequal_clusters_give_cr1():
    f = _frame([1, 3, 7, 2, 9, 4, 5], seed=2)
    hx, hy, *_ = _cross(f, cluster="text")
    for col, half in (("phi_k", hx), ("snr_k", hy)):
        x = f[col].to_numpy()
        n, g = x.size, f["text"].nunique()
        resid_sums = f.assign(r=x - x.mean()).groupby("text")["r"].sum().to_numpy()
        se = np.sqrt(g / (g - 1) * np.sum(resid_sums ** 2)) / n
        assert half == pytest.approx(stats.t.ppf(0.975, g - 1) * se, rel=1e-9)


def test_one_trial_per_cluster_is_the_trial_interval():
    f = _frame([1] * 40, seed=3)
    hx, hy, *_ = _cross(f, cluster="text")
    assert (hx, hy) == pytest.approx(_cross(f)[:2], rel=1e-9)
    q = stats.t.ppf(0.975, 39)
    assert hx == pytest.approx(q * f["phi_k"].std(ddof=1) / np.sqrt(40), rel=1e-9)
    assert hy == pytest.approx(q * f["snr_k"].std(ddof=1) / np.sqrt(40), rel=1e-9)


@pytest.mark.parametrize("bad", ["no_such_column", 3])
def test_bad_cluster_column(bad):
    with pytest.raises(ValueError, match="cluster must be None or the name of a column"):
        kvstats.plot_shannon_phi(_frame([2, 2]), "k", scheme="KQV", budget=4, cluster=bad)


def test_missing_cluster_labels_are_refused():
    f = _frame([2, 2]).astype({"text": float})
    f.loc[0, "text"] = np.nan
    with pytest.raises(ValueError, match="without missing values"):
        kvstats.plot_shannon_phi(f, "k", scheme="KQV", budget=4, cluster="text")


def test_real_report_figures_take_the_text_as_unit(load_experiment, tmp_path, monkeypatch):
    """experiments/real_report.py draws the real planes with the text as the unit and says so."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_real_report import small_results

    report = load_experiment("real_report")
    small_results(tmp_path)
    prof = pd.read_csv(tmp_path / "profile.csv")
    prof = prof.assign(trial=prof.groupby(["scheme", "bits"]).cumcount(), argmax_shift=0.0)
    prof.to_csv(tmp_path / "profile.csv", index=False)             # the columns real_profile.py writes
    from kvstats.data.capture_format import write_capture   # data with a spectrum (the limit lines)
    rng = np.random.default_rng(0)
    K = rng.standard_normal((3, 2, 1, 16, 8)).astype(np.float32)
    write_capture(tmp_path / "cap.npz", K, K, np.concatenate([K, K], axis=2), {})
    seen = []
    real_plot = kvstats.plot_shannon_phi

    def spy(frame, **kw):
        seen.append(kw.get("cluster"))
        return real_plot(frame, **kw)

    monkeypatch.setattr(kvstats, "plot_shannon_phi", spy)
    text = report.figures(str(tmp_path), str(tmp_path / "figures"), str(tmp_path / "cap.npz"))
    assert seen == ["text", "text"]
    assert "95% intervals whose unit is the text" in text and "over the 3 texts, t with 2 degrees" in text
