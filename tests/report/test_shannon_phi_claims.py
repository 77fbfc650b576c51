"""What the Shannon–φ plane claims: its crosses only where the tables' intervals are valid,
its limit lines at the nominal budget and said so."""

import matplotlib
import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
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


def test_an_snr_with_a_heavy_left_tail_above_0_db_is_a_hollow_disk(frame_factory):
    """An SNR in dB is screened on both tails from its median as the tables screen it
    (metrics named): a heavy left tail of one scheme's SNR, every value above 0 dB, is
    marked hollow (screened from 0 on its right tail it read reliable)."""
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=200, seed=5)
    f["phi_k"] = np.abs(f["phi_k"]) + 0.01
    f["snr_k"] = 20.0 + np.random.default_rng(0).normal(0, 1, len(f))
    heavy = f["scheme"] == "QKQV"
    f.loc[heavy, "snr_k"] = 1e4 - np.random.default_rng(2).pareto(0.8, heavy.sum())
    x = f.loc[heavy, "snr_k"].to_numpy()
    assert x.min() > 0 and ci_reliable(x) and not ci_reliable(x, metrics=["snr_k"])
    palette = scheme_palette(["KQV", "QKQV"])
    ax = plot_shannon_phi(f, "k", bounds=None, palette=palette).axes[0]
    assert len(_hollow_points(ax, palette["QKQV"])) == 1 and _hollow_points(ax, palette["KQV"]) == []
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
    assert "n is the budget: a scheme's stored bits differ" in SHANNON_PHI_NOTE
    assert "so its point may lie above its line" in SHANNON_PHI_NOTE
    assert "\"Distance to the rate–distortion limit\" compares each scheme with the limit at the bits it stores" \
        in SHANNON_PHI_NOTE
    assert any("nominal n" in t.get_text() for t in ax.figure.legends[0].get_texts())
    matplotlib.pyplot.close("all")


def test_n_labels_cover_no_other_label_and_no_other_point(frame_factory):
    """The quick sweep's Gaussian key means (KV and KQV coincide; QKQV runs one bit behind):
    in the schemes' own directions KQV's "2" fell on QKQV's "3", which read as n = 3 at
    KQV's point. Every n label now keeps clear of every other label and of every other
    point's disk, and still sits beyond the largest disk of its own point."""
    phi = {"KV": [0.3455, 0.1833, 0.0952, 0.0486, 0.0247], "QKQV": [0.6411, 0.4, 0.2243, 0.1187, 0.0611]}
    snr = {"KV": [9.36, 14.70, 20.32, 26.13, 32.02], "QKQV": [2.49, 7.41, 12.75, 18.37, 24.16]}
    phi["KQV"], snr["KQV"] = phi["KV"], snr["KV"]
    one = frame_factory({("KV", n): 0.0 for n in range(2, 7)}, n=10)
    parts = []
    for scheme in ("KV", "KQV", "QKQV"):
        part = one.assign(scheme=scheme)
        part["phi_k"] = part["budget"].map(dict(zip(range(2, 7), phi[scheme])))
        part["snr_k"] = part["budget"].map(dict(zip(range(2, 7), snr[scheme])))
        parts.append(part)
    fig = plot_shannon_phi(pd.concat(parts, ignore_index=True), "k", bounds=None, clouds=False)
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0
    disks = [(ax.transData.transform(p), np.sqrt(s) / 2 * px)
             for c in ax.collections if c.get_label() in phi
             for p, s in zip(c.get_offsets(), np.broadcast_to(c.get_sizes(), len(c.get_offsets())))]
    texts = [t for t in ax.texts if t.get_text() in {"2", "3", "4", "5", "6"}]
    assert len(texts) == 15
    boxes = [t.get_window_extent(renderer) for t in texts]
    for i, (t, box) in enumerate(zip(texts, boxes)):
        assert not any(box.overlaps(b) for b in boxes[i + 1:]), t.get_text()
        own = ax.transData.transform(t.xy)
        for centre, radius in disks:
            gap = np.hypot(np.clip(centre[0], box.x0, box.x1) - centre[0],
                           np.clip(centre[1], box.y0, box.y1) - centre[1])
            limit = max(r for c, r in disks if np.allclose(c, own)) if np.allclose(centre, own) else radius
            assert gap >= limit - 0.5, (t.get_text(), centre, own)
    matplotlib.pyplot.close("all")


def _sizes(ax, scheme):
    """Diameters (points) of ``scheme``'s mean disks, in budget order."""
    (c,) = [c for c in ax.collections if c.get_label() == scheme]
    return np.round(np.sqrt(np.broadcast_to(c.get_sizes(), len(c.get_offsets()))), 6).tolist()


def test_a_disk_shrinks_only_where_it_covers_an_earlier_schemes(frame_factory):
    """Disks were sized by the scheme's place in the legend wherever they were: QKQV, far
    from the others, was always the smallest dot while the legend showed one size. Now a
    mean shrinks only where it covers an earlier scheme's: KQV's where it equals KV's
    (n = 2, 3), not at n = 4 where they part; QKQV's nowhere."""
    phi = {"KV": [0.35, 0.18, 0.095], "KQV": [0.35, 0.18, 0.02], "QKQV": [0.64, 0.40, 0.22]}
    snr = {"KV": [9.4, 14.7, 20.3], "KQV": [9.4, 14.7, 32.0], "QKQV": [2.5, 7.4, 12.8]}
    one = frame_factory({("KV", n): 0.0 for n in (2, 3, 4)}, n=10)
    parts = []
    for scheme in ("KV", "KQV", "QKQV"):
        part = one.assign(scheme=scheme)
        part["phi_k"] = part["budget"].map(dict(zip((2, 3, 4), phi[scheme])))
        part["snr_k"] = part["budget"].map(dict(zip((2, 3, 4), snr[scheme])))
        parts.append(part)
    ax = plot_shannon_phi(pd.concat(parts, ignore_index=True), "k", bounds=None, clouds=False).axes[0]
    big, small = _sizes(ax, "KV")[0], _sizes(ax, "KQV")[0]
    assert _sizes(ax, "KV") == [big] * 3 and _sizes(ax, "QKQV") == [big] * 3
    assert _sizes(ax, "KQV") == [small, small, big] and small < big
    matplotlib.pyplot.close("all")
