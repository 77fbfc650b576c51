"""The Shannon–φ plane's limits, markers and cut intervals, and the report's omitted planes
(referee RD2 F1, F2, F3's plane part, F6, F11).

F1: the report passed the limit of every budget of a case, so a lossless identity at n = 32
    drew a 192.7 dB line over points it never faced (the axes squeezed under it).
F2: a K4V2 scheme at budget 3 codes keys at 4 bits and values at 2: its K point was labelled
    "3" and read against the n = 3 limit, which it lies above.
F3: every mean was a disk, so two schemes of one colour (palette places 10 apart) looked alike.
F6: a plane raising any ValueError was dropped without a word in the report.
F11: a φ interval reaching 0 ran off the log axis unmarked.
Each test fails on the code before the fix.
"""

import math
import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib.markers import MarkerStyle

import kvstats
from kvstats.analysis.theory import nominal_bounds
from kvstats.report.plots import _scheme_style, scheme_palette
from kvstats.report.shannon_phi import plot_shannon_phi

#: Shannon's limit for a white Gaussian source: 20·log10(2) = 6.0206 dB per bit (docs/theory.md §7).
DB_PER_BIT = 20 * math.log10(2)


@pytest.fixture(scope="module")
def sweep():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kvstats.run_sweep({"schemes": ["KV", "K4V2", "identity"], "budgets": [3],
                                  "distributions": ["gaussian"], "dims": [32], "n_keys": [64],
                                  "n_trials": 12}, executor="serial", progress=False).frame


def _limits(ax):
    """n → level of the drawn "limit, n = …" lines (text and dashed line agree)."""
    texts = {float(t.get_text().split("= ")[1]): t.xy[1] for t in ax.texts if t.get_text().startswith("limit")}
    dashed = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"
                    and list(line.get_xdata()) == [0, 1])
    assert np.allclose(sorted(texts.values()), dashed)
    return texts


def _report_bounds(frame, place):
    """What the report passes: the limit at every budget of the case (nominal_bounds of the frame)."""
    nb = nominal_bounds(frame)
    nb = nb[(nb["place"] == place) & nb["bound_snr_db"].notna()]
    return dict(zip(nb["budget"], nb["bound_snr_db"]))


def test_only_limits_a_drawn_point_faces(sweep):
    """F1: identity (n = 32, exact on every trial) is not drawn, so neither is its limit, even
    when the caller passes it; the axes then hold the drawn points, not 193 dB."""
    bounds = _report_bounds(sweep, "k")
    assert 32.0 in bounds and bounds[32.0] > 190          # the report passes it
    ax = plot_shannon_phi(sweep, "k", bounds=bounds).axes[0]
    limits = _limits(ax)
    assert 32.0 not in limits and 3.0 in limits
    assert ax.get_ylim()[1] < 60
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("place, word, bits", [("k", "keys", 4.0), ("v", "values", 2.0)])
def test_a_mixed_scheme_side_faces_the_limit_of_its_own_bits(sweep, place, word, bits):
    """F2: K4V2 at n = 3 is labelled with its side's bits and that side's limit is drawn (the
    white Gaussian's 6.02 dB per bit), automatic or passed as the report passes it (its bounds
    computed with the sides' bits as budgets); KV at n = 3 keeps its plain label."""
    for report in (False, True):
        if report:
            from kvstats.report.shannon_phi import _with_side_budgets
        bounds = _report_bounds(_with_side_budgets(sweep), place) if report else "auto"
        ax = plot_shannon_phi(sweep, place, bounds=bounds).axes[0]
        labels = [t.get_text() for t in ax.texts]
        assert f"3 ({word} at {bits:g})" in labels and labels.count("3") == 1   # KV's
        limits = _limits(ax)
        assert math.isclose(limits[bits], DB_PER_BIT * bits, abs_tol=0.05)
        # the point lies under the limit it faces (on Gaussian data only sampling error could lift it)
        mixed = sweep[sweep["scheme"] == "K4V2"][f"snr_{place}_pooled"].mean()
        assert mixed < limits[bits]
    matplotlib.pyplot.close("all")


def test_each_scheme_has_its_marker_in_the_plane(sweep):
    """F3: the mean markers are the schemes' markers of the other figures (no longer all disks)."""
    frame = sweep[sweep["scheme"] != "identity"]
    palette = scheme_palette(frame["scheme"])
    ax = plot_shannon_phi(frame, "k", palette=palette).axes[0]
    shapes = {}
    for coll in ax.collections:
        if coll.get_label() in palette:
            style = MarkerStyle(_scheme_style(palette, coll.get_label())["marker"])
            want = style.get_path().transformed(style.get_transform()).vertices
            got = coll.get_paths()[0].vertices
            assert got.shape == want.shape and np.allclose(got, want), coll.get_label()
            shapes[coll.get_label()] = want.shape
    assert len(shapes) == 2 and len(set(shapes.values())) == 2     # KV's disk, K4V2's other shape
    matplotlib.pyplot.close("all")


def test_a_phi_interval_reaching_zero_is_cut_and_marked(frame_factory):
    """F11: one large φ among small ones: the t interval of the mean reaches below 0. Its bar
    now ends at a positive φ inside the axes, marked ◄ there, and the legend says so."""
    f = frame_factory({("KQV", 2): 0.0, ("KQV", 3): 0.0}, n=10)
    spread = np.r_[[1e-3] * 9, 1.0]
    f["phi_k"] = 0.01
    f.loc[f["budget"] == 2, "phi_k"] = spread
    mean, sd = spread.mean(), spread.std(ddof=1)
    assert mean - 2.262 * sd / math.sqrt(10) < 0                 # t(9) 97.5% = 2.262
    fig = plot_shannon_phi(f, "k", bounds=None)
    ax = fig.axes[0]
    cut = [line for line in ax.get_lines() if line.get_marker() == "<"]
    assert len(cut) == 1
    floor = cut[0].get_xdata()[0]
    assert 0 < floor < 1e-3 and ax.get_xlim()[0] <= floor
    segments = [seg for coll in ax.collections if isinstance(coll, matplotlib.collections.LineCollection)
                for seg in coll.get_segments() if seg[0][1] == seg[1][1]]     # horizontal: the φ bars
    assert min(min(seg[0][0], seg[1][0]) for seg in segments) == pytest.approx(floor)
    assert any("cut at the axis" in t.get_text() for t in fig.legends[0].get_texts())
    matplotlib.pyplot.close("all")


def test_report_says_why_a_plane_is_missing(tmp_path):
    """F6: an identity-only sweep has no Shannon–φ plane (every mean φ is 0): the case's section
    says so where its planes would be."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kvstats.run_sweep({"schemes": ["identity"], "budgets": [4], "distributions": ["gaussian"],
                                 "dims": [32], "n_keys": [64], "n_trials": 6}, executor="serial", progress=False)
        rep = kvstats.hypothesis_report(res, tmp_path, bootstrap_resamples=99, comparisons=[])
    assert not any(name.startswith("shannon_phi_") for name in rep.figures)
    md = (tmp_path / "report.md").read_text()
    head = md.index("## gaussian, d = 32, N = 64")
    sentence = md.index("No Shannon–φ plane of the keys K and the values V and the attention output T")
    assert head < sentence < md.index("### ", head)


def test_other_plane_errors_propagate(tmp_path, monkeypatch):
    """F6: a ValueError other than "nothing to draw" is an error of the report, not a silent gap."""
    import kvstats.report.shannon_phi as module

    def broken(*args, **kwargs):
        raise ValueError("a defect of the plane")

    monkeypatch.setattr(module, "plot_shannon_phi", broken)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kvstats.run_sweep({"schemes": ["KV"], "budgets": [3], "distributions": ["gaussian"],
                                 "dims": [32], "n_keys": [64], "n_trials": 6}, executor="serial", progress=False)
        with pytest.raises(ValueError, match="a defect of the plane"):
            kvstats.hypothesis_report(res, tmp_path, bootstrap_resamples=99, comparisons=[])
