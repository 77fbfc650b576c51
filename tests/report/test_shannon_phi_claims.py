"""What the Shannon–φ plane claims: its crosses only where the tables' intervals are valid,
its limit lines at the nominal budget and said so."""

import matplotlib
import matplotlib.colors as mcolors
import numpy as np
import pytest

from kvstats.analysis.intervals import ci_reliable
from kvstats.report.plots import scheme_palette
from kvstats.report.shannon_phi import SHANNON_PHI_NOTE, plot_shannon_phi


def _hollow_points(ax, color):
    """The (x, y) of the white-faced disks edged in ``color``: the plane's ‡ means."""
    found = []
    for col in ax.collections:
        faces, edges = col.get_facecolors(), col.get_edgecolors()
        if len(faces) and len(edges) and np.allclose(faces[0][:3], 1.0) \
                and np.allclose(edges[0][:3], mcolors.to_rgb(color)):
            found.extend(map(tuple, np.asarray(col.get_offsets())))
    return sorted(found)


def test_a_mean_the_tables_mark_is_a_hollow_disk_and_no_other(frame_factory):
    """Pareto(α = 1.2) angles (infinite variance) at n = 3 of one scheme: that mean, and only
    that one, is drawn hollow (its normal-approximation cross is not an interval), as the
    tables mark it ‡ (ci_reliable False); the φ ~ |N(0, 1)| + 0.01 means stay filled."""
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=200, seed=5)
    f["phi_k"] = np.abs(f["phi_k"]) + 0.01
    heavy = (f["scheme"] == "QKQV") & (f["budget"] == 3.0)
    f.loc[heavy, "phi_k"] = np.random.default_rng(1).pareto(1.2, heavy.sum()) + 0.01
    assert not ci_reliable(f.loc[heavy, "phi_k"].to_numpy())
    for (scheme, budget), g in f.groupby(["scheme", "budget"]):
        assert ci_reliable(g["phi_k"].to_numpy(), g["snr_k"].to_numpy()) == ((scheme, budget) != ("QKQV", 3.0))
    palette = scheme_palette(["KQV", "QKQV"])
    ax = plot_shannon_phi(f, "k", bounds=None, palette=palette).axes[0]
    sel = f[heavy]
    hollow = _hollow_points(ax, palette["QKQV"])
    assert len(hollow) == 1 and hollow[0] == pytest.approx((sel["phi_k"].mean(), sel["snr_k"].mean()))
    assert _hollow_points(ax, palette["KQV"]) == []
    assert any("no valid interval" in t.get_text() for t in ax.figure.legends[0].get_texts())
    # nothing marked: no hollow disk, no legend entry
    light = f[~heavy]
    ax = plot_shannon_phi(light, "k", bounds=None, palette=palette).axes[0]
    assert _hollow_points(ax, palette["QKQV"]) == [] and _hollow_points(ax, palette["KQV"]) == []
    assert not any("no valid interval" in t.get_text() for t in ax.figure.legends[0].get_texts())
    matplotlib.pyplot.close("all")


def test_the_limit_lines_are_at_the_nominal_budget_and_the_note_says_what_that_allows(frame_factory):
    """The lines sit at 6.02·n dB (white Gaussian, nominal n) while each scheme stores
    bits_total = n + 0.25 bits: a code of that rate may lie above its line (at 2.25 bits the
    limit is 13.55 dB, above the line at 12.04), so the note must not say no point lies
    above it; it says n is nominal and where each scheme meets the limit of its own bits."""
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=30)
    f["phi_k"] = np.abs(f["phi_k"]) + 0.01
    ax = plot_shannon_phi(f, "k").axes[0]
    levels = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"
              and tuple(line.get_xdata()) == (0, 1)]
    assert levels == pytest.approx([20 * np.log10(2) * 2.0])
    assert (f["bits_total"] > f["bits_nominal"]).all()
    assert 20 * np.log10(2) * f["bits_total"].iloc[0] > levels[0] + 1.0
    assert "no code's expected energy-pooled SNR lies above it" not in SHANNON_PHI_NOTE
    assert "n is the nominal budget" in SHANNON_PHI_NOTE
    assert "so its point may lie above its line" in SHANNON_PHI_NOTE
    assert "\"Distance to the rate–distortion limit\" compares each scheme with the limit at the bits it stores" \
        in SHANNON_PHI_NOTE
    assert any("nominal n" in t.get_text() for t in ax.figure.legends[0].get_texts())
    matplotlib.pyplot.close("all")
