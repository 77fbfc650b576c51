"""The KL figure keeps its log axis in every panel: a zero mean (the identity scheme's, an
exact reconstruction) is left off and named in its panel. It switched a panel with a zero
mean to a linear axis without a word, where KQV's 4-bit mean (0.004) sat on the axis and
the decay with the budget could not be read, and panels of one figure used two scales."""

import matplotlib
import numpy as np
import pandas as pd

from kvstats.report.plots import plot_kl_vs_bits

from _sweep_frames import make_frame

SPEC = {(s, b): 0.0 for s in ("KQV", "identity") for b in (2, 4)}


def _frame(zero_budgets=(2, 4)):
    parts = [make_frame(SPEC, n=20, seed=k, case=case)
             for k, case in enumerate([("gaussian", "-", 32, 32), ("low_rank", "rank=4", 32, 32)])]
    f = pd.concat(parts, ignore_index=True)
    f.loc[(f["scheme"] == "identity") & f["budget"].isin(zero_budgets), "kl"] = 0.0
    return f


def _drawn_y(ax):
    return np.concatenate([np.asarray(c.lines[0].get_ydata(), float) for c in ax.containers])


def test_every_panel_is_log_and_a_zero_mean_is_named_not_drawn():
    fig = plot_kl_vs_bits(_frame())
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2
    for ax in panels:
        assert ax.get_yscale() == "log"
        assert (_drawn_y(ax) > 0).all()
        assert [t.get_text() for t in ax.texts] == ["identity: KL = 0, not drawn"]
    matplotlib.pyplot.close("all")


def test_a_scheme_zero_at_some_budgets_names_them_and_draws_the_rest():
    fig = plot_kl_vs_bits(_frame(zero_budgets=(4,)))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.texts] == ["identity at n = 4: KL = 0, not drawn"]
    identity = next(c for c in ax.containers if c.get_label() == "identity")
    assert len(identity.lines[0].get_ydata()) == 1     # its n = 2 mean, on the axis
    matplotlib.pyplot.close("all")


def test_no_zero_mean_no_note():
    f = _frame(zero_budgets=())
    ax = plot_kl_vs_bits(f).axes[0]
    assert ax.get_yscale() == "log" and len(ax.texts) == 0
    matplotlib.pyplot.close("all")
