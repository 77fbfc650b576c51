"""plot_shannon_phi on a frame of kvstats.error_profile (one scheme's trials, no sweep columns):
scheme= and budget= name its point, the case keywords its case; the points drawn are the
frame's means (pooled SNR for keys and values, per-vector dB for T, against mean φ)."""

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis.theory import nominal_bounds


@pytest.fixture(scope="module")
def trials():
    return kvstats.sample("gaussian", n_trials=12, n_keys=64, dim=32, seed=7)


def _profile(trials, n):
    coder = kvstats.make_scheme("KQV", n, 32, seed=8, draws=trials.n_trials)
    return kvstats.error_profile(trials, *coder.roundtrip(trials.K, trials.V))


def _means(fig, label):
    """The mean markers of scheme ``label``: (φ, SNR) per budget, in budget order."""
    (points,) = [c for c in fig.axes[0].collections if c.get_label() == label]
    return np.asarray(points.get_offsets())


def _dashed_levels(ax):
    """The grey dashed limit lines (axhline: x from 0 to 1 in axes units), not a dashed
    trajectory (KQV's line style in every figure)."""
    return sorted(float(line.get_ydata()[0]) for line in ax.get_lines()
                  if line.get_linestyle() == "--" and tuple(line.get_xdata()) == (0, 1))


@pytest.mark.parametrize("place, snr", [("k", "snr_k_pooled"), ("v", "snr_v_pooled"), ("t", "snr_t")])
def test_one_budget_profile_is_drawn_at_its_means(trials, place, snr):
    profile = _profile(trials, 3)
    assert not {"scheme", "budget", "distribution", "bits_total"} & set(profile.columns)
    fig = kvstats.plot_shannon_phi(profile, place, scheme="KQV", budget=3)
    assert np.allclose(_means(fig, "KQV"), [[profile[f"phi_{place}"].mean(), profile[snr].mean()]])
    assert [t.get_text() for t in fig.axes[0].texts if t.get_text() == "3"] == ["3"]   # its n
    assert fig.axes[0].get_title().endswith(": case not given")
    assert _dashed_levels(fig.axes[0]) == []        # an unknown case has no automatic limit
    assert list(profile.columns) == list(_profile(trials, 3).columns)   # the frame is not changed


def test_budgets_concatenated_and_the_named_case_give_the_sweeps_plane(trials):
    profile = pd.concat([_profile(trials, n).assign(budget=float(n)) for n in (2, 4)], ignore_index=True)
    case = dict(distribution="gaussian", dim=32, n_keys=64)
    fig = kvstats.plot_shannon_phi(profile, "k", scheme="KQV", **case)
    means = profile.groupby("budget")[["phi_k", "snr_k_pooled"]].mean().to_numpy()
    assert np.allclose(_means(fig, "KQV"), means)
    assert fig.axes[0].get_title() == "Shannon–φ plane, keys K: gaussian, d=32, N=64"
    # the automatic limit of the named synthetic case, as for a sweep's frame of it
    sweep_like = profile.assign(scheme="KQV", params="-", bits_nominal=np.nan, bits_total=np.nan, **case)
    bounds = nominal_bounds(sweep_like)
    expected = bounds[(bounds["place"] == "k")]["bound_snr_db"].to_list()
    assert len(expected) == 2 and np.allclose(_dashed_levels(fig.axes[0]), sorted(expected))


def test_missing_or_misused_fill_keywords_say_what_to_pass(trials):
    profile = _profile(trials, 3)
    with pytest.raises(ValueError, match=r"no 'scheme' column .*pass scheme="):
        kvstats.plot_shannon_phi(profile, "k", budget=3)
    with pytest.raises(ValueError, match=r"no 'budget' column .*pass budget="):
        kvstats.plot_shannon_phi(profile, "k", scheme="KQV")
    sweep = profile.assign(scheme="KQV", budget=3.0, distribution="gaussian", params="-", dim=32,
                           n_keys=64, bits_nominal=3.0, bits_total=3.25)
    with pytest.raises(ValueError, match=r"this frame has one: select with schemes="):
        kvstats.plot_shannon_phi(sweep, "k", scheme="KQV")
    with pytest.raises(ValueError, match=r"this frame has one: select with budgets="):
        kvstats.plot_shannon_phi(sweep, "k", budget=3)
    # a sweep's frame draws as before, its means the same as the profile's
    assert np.allclose(_means(kvstats.plot_shannon_phi(sweep, "k"), "KQV"),
                       _means(kvstats.plot_shannon_phi(profile, "k", scheme="KQV", budget=3), "KQV"))
