"""The report's figures as a referee reads them: text legible at print size, nothing
overlapping, legends off the data, one look per scheme in every figure, cases never in a
scheme's colour, and every series told apart in greyscale. Each property is read from the
Figure object after drawing."""

import itertools

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from kvstats.report.plots import (_PRINT_WIDTH_IN, CROSSOVER_METRICS, plot_crossover, plot_kl_vs_bits,
                                  plot_lowrank_vs_heavytail, plot_recall_vs_bits, scheme_palette)
from kvstats.report.shannon_phi import plot_shannon_phi

SCHEMES = ("KV", "KQV", "QKQV")
BUDGETS = (2, 3, 4, 5, 6)
# the four cases of the quick demo, with its long case labels
CASES = (("gaussian", "-"), ("heavy_tailed", "nu=1.5"), ("low_rank", "rank=8"), ("focused", "strength=0.5"))
MIN_PRINTED_PT = 6.0   # the smallest type journals accept at final size is 5–7 points


@pytest.fixture(scope="module")
def frame():
    from _sweep_frames import make_frame

    parts = [make_frame({(s, b): 0.3 * b + i for i, s in enumerate(SCHEMES) for b in BUDGETS}, n=30,
                        seed=k, case=(dist, params, 128, 256)) for k, (dist, params) in enumerate(CASES)]
    f = pd.concat(parts, ignore_index=True)
    for col in ("phi_k", "phi_v", "phi_t"):     # angles are positive (the plane's log axis)
        f[col] = np.exp(-f[col] / 4)
    return f


@pytest.fixture(scope="module")
def comparisons():
    rng = np.random.default_rng(0)
    rows = [dict(distribution=d, params=p, dim=128, n_keys=256, budget=float(b), budget_b=float(b),
                 scheme_a="KQV", scheme_b="KV", metric=m, test="mann_whitney",
                 effect=e, effect_low=max(e - 0.2, -1.0), effect_high=min(e + 0.2, 1.0), significant=e > 0)
            for d, p in CASES for m in CROSSOVER_METRICS for b in BUDGETS
            for e in [float(rng.uniform(-1, 1))]]
    return pd.DataFrame(rows)


def _figures(frame, comparisons):
    pal = scheme_palette(frame["scheme"])
    return {"kl_vs_bits": plot_kl_vs_bits(frame, palette=pal),
            "recall_vs_bits": plot_recall_vs_bits(frame, palette=pal),
            "crossover": plot_crossover(comparisons, pair=("KQV", "KV")),
            "lowrank_vs_heavytail": plot_lowrank_vs_heavytail(frame, palette=pal),
            "shannon_phi_k": plot_shannon_phi(frame, "k", distribution="gaussian", palette=pal, bounds=None),
            "shannon_phi_t": plot_shannon_phi(frame, "t", distribution="heavy_tailed", palette=pal)}


def _drawn_texts(fig):
    """The texts a reader sees: visible, non-empty, in a visible axes, and no tick label of a
    tick outside the view (matplotlib keeps those, undrawn)."""
    fig.canvas.draw()
    undrawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            pad = 1e-9 * (hi - lo)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - pad <= tick.get_loc() <= hi + pad:
                    undrawn |= {id(tick.label1), id(tick.label2)}
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and id(t) not in undrawn
            and (t.axes is None or t.axes.get_visible())]


def _luma(color):
    """Greyscale value of a colour (ITU-R BT.601 weights, what a greyscale print applies)."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_every_text_prints_at_6_points_or_more_at_a_papers_text_width(frame, comparisons):
    """A figure is printed at most at the text width (7 in): one saved wider shrinks. The
    crossover panels were 15 in wide (legend at 3.3 pt printed), the KL and recall grids 11 in
    (tick labels at 5.5 pt)."""
    for name, fig in _figures(frame, comparisons).items():
        texts = _drawn_texts(fig)
        width = fig.get_tightbbox(fig.canvas.get_renderer()).width    # inches, as saved
        scale = min(1.0, _PRINT_WIDTH_IN / width)
        small = sorted({(round(t.get_fontsize() * scale, 1), t.get_text()[:30]) for t in texts
                        if t.get_fontsize() * scale < MIN_PRINTED_PT})
        assert not small, f"{name}: {width:.1f} in wide, printed at {scale:.2f}: {small[:5]}"
    matplotlib.pyplot.close("all")


def test_no_two_texts_overlap_and_legends_hide_no_data(frame, comparisons):
    for name, fig in _figures(frame, comparisons).items():
        renderer = fig.canvas.get_renderer()
        boxes = [(t.get_text()[:25], t.get_window_extent(renderer)) for t in _drawn_texts(fig)]
        clashes = [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]
        assert not clashes, f"{name}: {clashes[:5]}"
        for legend in fig.legends:
            lb = legend.get_window_extent(renderer)
            covered = [ax.get_title() for ax in fig.axes if ax.get_visible()
                       and lb.overlaps(ax.get_window_extent(renderer))]
            assert not covered, f"{name}: the legend covers the panels {covered}"
    matplotlib.pyplot.close("all")


def _scheme_lines(ax):
    """label → (colour, marker, line style) of the labelled mean lines (error bar data lines)."""
    return {c.get_label(): (matplotlib.colors.to_hex(c.lines[0].get_color()), c.lines[0].get_marker(),
                            c.lines[0].get_linestyle())
            for c in ax.containers if c.get_label() in SCHEMES}


def test_each_scheme_has_one_look_in_every_figure_and_the_schemes_differ_in_greyscale(frame):
    """Every scheme was a circle in the KL and recall figures: in greyscale (and for a reader
    who confuses the palette's hues) KV and KQV, drawn on top of each other, could not be told
    apart. Each has its own marker and line style now, the same in each figure, its
    Shannon–φ trajectory included."""
    pal = scheme_palette(frame["scheme"])
    kl = _scheme_lines(plot_kl_vs_bits(frame, palette=pal).axes[0])
    recall = _scheme_lines(plot_recall_vs_bits(frame, palette=pal).axes[0])
    assert kl == recall and set(kl) == set(SCHEMES)
    assert {s: c for s, (c, _, _) in kl.items()} == {s: matplotlib.colors.to_hex(pal[s]) for s in SCHEMES}
    assert len({m for _, m, _ in kl.values()}) == len(SCHEMES)
    assert len({ls for _, _, ls in kl.values()}) == len(SCHEMES)
    # the plane's trajectories: the same colour and line style per scheme
    ax = plot_shannon_phi(frame, "k", distribution="gaussian", palette=pal, bounds=None, clouds=False).axes[0]
    styles = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.lines
              if len(line.get_xdata()) == len(BUDGETS) and line.get_linestyle() != "None"}
    assert styles == {(c, ls) for c, _, ls in kl.values()}
    matplotlib.pyplot.close("all")


def test_case_colours_are_never_a_schemes_and_differ_in_greyscale(frame, comparisons):
    """The box plot coloured its distributions with the schemes' palette (Gaussian keys in
    KV's blue, heavy-tailed in KQV's orange), and the crossover panels coloured cases with
    tab10, whose blue, green and red have nearly one grey (and red/green is the commonest
    colour-vision deficiency). Cases now take magma: never a scheme's colour, of
    increasing lightness."""
    pal = {matplotlib.colors.to_hex(c) for c in scheme_palette(SCHEMES).values()}
    box_ax = plot_lowrank_vs_heavytail(frame).axes[0]
    faces = {matplotlib.colors.to_hex(p.get_facecolor()) for p in box_ax.patches}
    legend = plot_crossover(comparisons, pair=("KQV", "KV")).legends[0]
    lines = [matplotlib.colors.to_hex(h.get_color()) for h in legend.legend_handles]
    for name, colors in (("box plot", sorted(faces)), ("crossover", lines)):
        assert len(colors) == len(set(colors)) >= 3, name
        assert not set(colors) & pal, f"{name} draws cases in a scheme's colour: {set(colors) & pal}"
        luma = sorted(_luma(c) for c in colors)
        assert min(np.diff(luma)) > 0.1, f"{name}: greyscale values {np.round(luma, 2)}"
    matplotlib.pyplot.close("all")


def test_crossover_legend_shows_each_cases_marker(comparisons):
    """The legend's handles were the error bars' own, whose markers are drawn size 0 (the
    markers are separate scatters): the shapes that tell cases apart in greyscale were in no
    legend. Each case's entry now carries its marker."""
    fig = plot_crossover(comparisons, pair=("KQV", "KV"))
    handles = fig.legends[0].legend_handles
    assert len(handles) == len(CASES)
    assert all(h.get_markersize() > 0 for h in handles)
    assert len({h.get_marker() for h in handles}) == len(CASES)
    matplotlib.pyplot.close("all")


def test_box_plot_axis_and_title_name_the_metric_with_its_unit(frame):
    """For another metric than KL, the box plot's y axis read the column code ('recall_at_5')
    with no unit, and its title 'recall_at_5 per trial'."""
    fig = plot_lowrank_vs_heavytail(frame, "recall_at_5")
    assert fig.axes[0].get_ylabel() == "recall@5 (fraction)"
    assert fig.get_suptitle() == "Low-rank vs heavy-tailed keys: recall@5 per trial"
    assert plot_lowrank_vs_heavytail(frame).axes[0].get_ylabel() == "KL (nats), floored at 1e-6"
    matplotlib.pyplot.close("all")


def _lab(color):
    """CIELAB (D65) of an sRGB colour: the sRGB transfer curve, the sRGB→XYZ matrix of IEC
    61966-2-1, then CIE 1976 L*a*b* (the closed forms; CIE76 ΔE is the Euclidean distance)."""
    rgb = np.asarray(matplotlib.colors.to_rgb(color))
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ lin / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_every_two_cases_of_a_crossover_figure_are_far_apart_in_colour(comparisons):
    """The quick report's four cases in cividis 0.0 and 0.27 were two navies (ΔE 25): only the
    marker told the Gaussian and heavy-tailed cases apart. Every two of four cases are now
    more than 40 apart (CIE76 ΔE; about 2.3 is a just-noticeable difference)."""
    handles = plot_crossover(comparisons, pair=("KQV", "KV")).legends[0].legend_handles
    labs = [_lab(h.get_color()) for h in handles]
    gaps = [np.linalg.norm(a - b) for a, b in itertools.combinations(labs, 2)]
    assert len(labs) == len(CASES) and min(gaps) > 40, np.round(gaps, 1)
    matplotlib.pyplot.close("all")
