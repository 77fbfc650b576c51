"""Referee RD2's figure findings F3, F4, F5, F9 and F10 (fixer FD2), checked on the artists.

F3: beyond the palette's 10 colours two schemes shared colour and marker (slot % 10 for both).
F4: a lossless reference (identity, 32 bits) stretched the recall figure's x axis.
F5: the recall legend/caption said "few nonzero values" where a fraction is screened by its
values below 1 (kvstats.analysis.intervals.few_nonzero).
F9: a case took a different magma colour in each figure (spread over that figure's cases).
F10: the low-rank/heavy-tail boxes hid how many trials lie below the 1e-6 floor.
"""

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from kvstats.quant.catalog import NAMES
from kvstats.report.options import validate_report_options
from kvstats.report.plots import (_scheme_style, plot_crossover, plot_kl_vs_bits,
                                  plot_lowrank_vs_heavytail, plot_recall_vs_bits, scheme_palette)

from _sweep_frames import make_frame

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: the 14 schemes of the referee's sweep (/tmp/RD2/many.toml): four of them took places 10-13
MANY = ["KV", "KQV", "QKQV", "turboquant_mse", "nvfp4", "q5_1", "qjl", "kivi", "identity", "q8_0",
        "q4_0", "fp8_e4m3", "mxfp4", "K4V2"]


def _looks(schemes):
    pal = scheme_palette(schemes)
    return {s: (mcolors.to_hex(pal[s]), _scheme_style(pal, s)["marker"]) for s in schemes}


@pytest.mark.parametrize("schemes", [MANY, list(NAMES), list(NAMES) + [f"mine{i}" for i in range(12)]])
def test_no_two_schemes_share_colour_and_marker(schemes):
    looks = _looks(schemes)
    assert len(set(looks.values())) == len(schemes), looks
    # the first ten places keep their look (colour and marker by place, as before)
    assert _looks(["KV", "KQV"]) == {"KV": looks["KV"], "KQV": looks["KQV"]}


def _unit_recall(frame, rng):
    # recall is a fraction in [0, 1]: make_frame's N(shift, 1) is not
    return frame.assign(recall_at_5=rng.uniform(0.4, 0.95, len(frame)))


def test_the_kl_figure_draws_fourteen_schemes_apart():
    """The artists of a 14-scheme figure, not only the style function: each scheme's handle
    has its own (colour, marker)."""
    f = pd.concat([make_frame({(s, 4): 0.0}, n=12, seed=i) for i, s in enumerate(MANY)], ignore_index=True)
    fig = plot_kl_vs_bits(f, n_resamples=49)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    looks = {lab: (mcolors.to_hex(h[0].get_color()), h[0].get_marker()) for h, lab in zip(handles, labels)}
    assert sorted(looks) == sorted(MANY)
    assert len(set(looks.values())) == len(MANY), looks


def _with_identity(seed=3):
    """KV at 2-4 bits and an exact identity cell at 32 bits (KL 0, recall 1 on every trial)."""
    rng = np.random.default_rng(seed)
    f = _unit_recall(make_frame({("KV", 2): 0.0, ("KV", 3): 0.0, ("KV", 4): 0.0, ("identity", 32): 0.0},
                                n=20, seed=seed), rng)
    ident = f["scheme"] == "identity"
    f.loc[ident, ["kl", "recall_at_5", "bits_total"]] = [0.0, 1.0, 32.0]
    return f


def test_an_exact_scheme_does_not_stretch_the_recall_axis():
    fig = plot_recall_vs_bits(_with_identity(), n_resamples=49)
    ax = fig.axes[0]
    # the x axis spans the drawn schemes (2.25-4.25 bits), not identity's 32
    assert ax.get_xlim()[1] < 6, ax.get_xlim()
    assert not any(32.0 in np.asarray(line.get_xdata(), float) for line in ax.lines)
    # identity: a dotted reference line at its mean (1) across the panel, and named
    refs = [c for c in ax.collections if c.get_linestyle() and c.get_linestyle()[0][1] is not None
            and np.allclose([seg[:, 1] for seg in c.get_segments()], 1.0)]
    assert len(refs) == 1
    notes = [t.get_text() for t in ax.texts]
    assert any("identity" in t and "exact" in t and "dotted" in t for t in notes), notes
    # the KL figure still leaves it off as before
    kl_notes = [t.get_text() for t in plot_kl_vs_bits(_with_identity(), n_resamples=49).axes[0].texts]
    assert any("identity: KL = 0, not drawn" in t for t in kl_notes), kl_notes


def _legend_texts(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def test_the_hollow_legend_says_what_screens_each_metric():
    """A recall mean of 40 values, all nonzero, 3 of them below 1 is hollow (few_nonzero on
    1 - x); the legend must not say "few nonzero values" for it."""
    rng = np.random.default_rng(5)
    f = _unit_recall(make_frame({("KV", 3): 0.0, ("KV", 4): 0.0}, n=40, seed=5), rng)
    cell = f.index[(f["budget"] == 3.0)]
    f.loc[cell, "recall_at_5"] = np.r_[np.ones(37), 0.6, 0.8, 0.4]
    assert (f.loc[cell, "recall_at_5"] > 0).all()
    text = " ".join(_legend_texts(plot_recall_vs_bits(f, n_resamples=49))).replace("\n", " ")
    assert "few values below 1 (fewer than 10; or above 0)" in text and "nonzero" not in text, text
    # KL's sparse mean: zeros on most trials, 3 distinct positive values
    f.loc[cell, "kl"] = np.r_[np.zeros(37), 0.3, 0.7, 1.1]
    text = " ".join(_legend_texts(plot_kl_vs_bits(f, n_resamples=49))).replace("\n", " ")
    assert "few nonzero values (fewer than 10)" in text and "below 1" not in text, text


def test_the_report_captions_say_what_screens_each_metric(tmp_path):
    from kvstats.analysis import compare_schemes, find_crossovers, summary_table, theory_table
    from kvstats.report.sections import build_document

    from _sweep_frames import sweep_result

    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.5}, n=12, seed=7)
    comp = compare_schemes(f, [], energy=False)
    figs = {"kl_vs_bits": tmp_path / "kl.png", "recall_vs_bits": tmp_path / "recall.png",
            "lowrank_vs_heavytail": tmp_path / "lr.png"}
    md = build_document(sweep_result(f), summary_table(f, n_resamples=49), comp, find_crossovers(comp),
                        theory_table(f, n_resamples=49), figs, validate_report_options(), "unit",
                        None).markdown(tmp_path)
    kl = next(line for line in md.splitlines() if line.startswith("*Mean attention KL"))
    recall = next(line for line in md.splitlines() if line.startswith("*Mean top-5 recall"))
    boxes = next(line for line in md.splitlines() if line.startswith("*Per-trial KL"))
    assert "fewer than 10 nonzero values" in kl and "below 1" not in kl, kl
    assert "fewer than 10 values below 1" in recall and "nonzero" not in recall, recall
    assert "exact scheme" in recall and "dotted line" in recall, recall
    assert "share of its trials below 1e-6" in boxes, boxes


# ------------------------------------------------------------------ F9: one case, one colour
CASES = [("gaussian", "-"), ("heavy_tailed", "nu=1.5"), ("low_rank", "rank=8"), ("focused", "strength=0.5")]


def _cases_frame(dims=(32,)):
    return pd.concat([make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.3}, n=12, seed=10 + i, case=(d, p, dim, 64))
                      for i, ((d, p), dim) in enumerate((c, dim) for c in CASES for dim in dims)],
                     ignore_index=True)


def _comparisons(frame):
    cases = frame[["distribution", "params", "dim", "n_keys"]].drop_duplicates()
    return pd.DataFrame({**{c: cases[c].to_numpy() for c in cases}, "budget": 3.0, "budget_b": 3.0,
                         "scheme_a": "KQV", "scheme_b": "QKQV", "metric": "kl", "test": "mann_whitney",
                         "effect": 0.2, "effect_low": 0.1, "effect_high": 0.3, "significant": True})


@pytest.mark.parametrize("dims", [(32,), (32, 64)])
def test_a_case_has_one_colour_in_every_figure(dims):
    f = _cases_frame(dims)
    leg = plot_crossover(_comparisons(f), ["kl"], pair=("KQV", "QKQV")).legends[0]
    cross = {}
    for h, t in zip(leg.legend_handles, leg.get_texts()):
        cross.setdefault(t.get_text().split(",")[0], set()).add(tuple(np.round(mcolors.to_rgb(h.get_color()), 9)))
        # cases that differ only in d share a colour: their markers differ
    looks = {(mcolors.to_hex(h.get_color()), h.get_marker()) for h in leg.legend_handles}
    assert len(looks) == len(CASES) * len(dims)
    assert all(len(c) == 1 for c in cross.values()), cross
    assert len({c for cs in cross.values() for c in cs}) == len(CASES)   # four cases, four colours
    leg2 = plot_lowrank_vs_heavytail(f).legends[0]
    boxes = {t.get_text(): np.asarray(h.get_facecolor()[:3]) for h, t in zip(leg2.legend_handles, leg2.get_texts())}
    assert sorted(boxes) == sorted(k for k in cross if not k.startswith("focused"))
    for label, fill in boxes.items():
        # the boxes are filled a third of the way to white: 0.7 c + 0.3
        (c,) = cross[label]
        np.testing.assert_allclose(fill, 0.7 * np.asarray(c) + 0.3, atol=1e-6, err_msg=label)


# ---------------------------------------------------------- F10: the share below the KL floor
def test_each_box_says_its_share_below_the_floor():
    f = pd.concat([make_frame({("KQV", 3): 0.0, ("KQV", 4): 0.0}, n=20, seed=20 + i, case=(d, p, 32, 64))
                   for i, (d, p) in enumerate(CASES[1:3])], ignore_index=True)
    cell = f.index[(f["distribution"] == "heavy_tailed") & (f["budget"] == 3.0)]
    f.loc[cell[:8], "kl"] = np.r_[np.zeros(7), 5e-7]   # 8 of 20 below 1e-6: 40%
    one = f.index[(f["distribution"] == "low_rank") & (f["budget"] == 4.0)][:1]
    f.loc[one, "kl"] = 0.0                              # 1 of 20: 5%
    fig = plot_lowrank_vs_heavytail(f)
    ax = fig.axes[0]
    assert fig.get_suptitle().endswith("(under a box: the % of its trials below the floor)")
    texts = {t.get_text(): t for t in ax.texts}
    assert sorted(texts) == ["40%", "5%"], sorted(texts)
    assert ax.get_ylim()[0] < texts["40%"].get_position()[1] <= 1e-6   # on the panel, under the floor
    # each under its own box: heavy_tailed's at n = 3 (x near 0), low_rank's at n = 4 (x near 1)
    for label, (lo, hi) in (("40%", (-0.4, 0.0)), ("5%", (1.0, 1.4))):
        x = texts[label].get_position()[0]
        spans = [(p.get_path().vertices[:, 0].min(), p.get_path().vertices[:, 0].max()) for p in ax.patches]
        assert lo < x < hi and any(a < x < b for a, b in spans if b - a < 0.5), (label, x, spans)
