"""Publication figures of a sweep (seaborn on the Agg backend).

Every function takes the per-trial frame of :func:`kvstats.run_sweep`, returns a
:class:`matplotlib.figure.Figure`, and never shows it; :func:`save_figure` writes PNG and
SVG. Colours come from seaborn's colour-blind-safe palette, one fixed colour per scheme
across all figures of a report (pass ``palette`` to keep them equal between calls).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg", force=False)  # no display needed; a user's interactive backend is kept
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from kvstats._checks import check_choice  # noqa: E402
from kvstats.analysis.frame import CASE_COLUMNS, check_frame  # noqa: E402
from kvstats.analysis.intervals import tail_alpha  # noqa: E402
from kvstats.metrics.table import HIGHER_IS_BETTER, metric as metric_def  # noqa: E402
from kvstats.results import DEFAULT_COMPARISONS  # noqa: E402

__all__ = ["plot_shannon_phi", "plot_kl_vs_bits", "plot_recall_vs_bits", "plot_crossover",
           "plot_lowrank_vs_heavytail", "scheme_palette", "save_figure", "select_case"]

_PLACES = {"k": "keys K", "v": "values V", "t": "attention output T"}
_KL_FLOOR = 1e-6


def scheme_palette(schemes: Sequence[str]) -> dict[str, Any]:
    """A colour per scheme from seaborn's colour-blind palette (order of first appearance)."""
    import seaborn as sns

    names = list(dict.fromkeys(schemes))
    colors = sns.color_palette("colorblind", max(len(names), 1))
    return {s: colors[i % len(colors)] for i, s in enumerate(names)}


def _case_label(row: Any) -> str:
    params = "" if row["params"] in ("-", "") else f" ({row['params']})"
    return f"{row['distribution']}{params}, d={row['dim']}, N={row['n_keys']}"


def select_case(frame: pd.DataFrame, distribution: str | None = None, params: str | None = None,
                dim: int | None = None, n_keys: int | None = None) -> pd.DataFrame:
    """Rows of one case; raises a ValueError listing the cases when the selection is ambiguous."""
    frame = check_frame(frame)
    sel = frame
    for col, value in zip(CASE_COLUMNS, (distribution, params, dim, n_keys)):
        if value is not None:
            sel = sel[sel[col] == value]
    cases = sel[list(CASE_COLUMNS)].drop_duplicates()
    if len(cases) != 1:
        listed = [_case_label(r) for _, r in frame[list(CASE_COLUMNS)].drop_duplicates().iterrows()]
        raise ValueError(f"the selection (distribution={distribution!r}, params={params!r}, dim={dim!r}, "
                         f"n_keys={n_keys!r}) must match exactly one case; it matches {len(cases)}. "
                         f"Cases: {listed}")
    return sel


def _style() -> None:
    import seaborn as sns
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.0)


def plot_shannon_phi(frame: pd.DataFrame, place: str = "k", *, distribution: str | None = None,
                     params: str | None = None, dim: int | None = None, n_keys: int | None = None,
                     budgets: Sequence[float] | None = None, schemes: Sequence[str] | None = None,
                     palette: dict[str, Any] | None = None, max_points: int = 400,
                     seed: int = 0) -> "matplotlib.figure.Figure":
    """The Shannon–φ plane: SNR (dB) against direction error φ (rad), one cloud per scheme.

    One point per trial (the trial's mean per-key SNR and φ, or the attention output's),
    one panel per budget, for a single case (select it with ``distribution``, ``params``,
    ``dim``, ``n_keys`` when the frame holds several). Up is a better scale, left a
    better direction.

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`.
    place : {"k", "v", "t"}
        Keys, values or the attention output.
    distribution, params, dim, n_keys : optional
        Case selection.
    budgets, schemes : sequence, optional
        Subsets to draw (default: all, in frame order).
    palette : dict, optional
        Scheme → colour (default :func:`scheme_palette`).
    max_points : int
        At most this many trials per scheme and panel are drawn (a seeded subsample)
        so that the SVG stays small; means are computed on all trials.
    seed : int
        Seed of that subsample.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3, 4],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 10},
    ...     executor="serial", progress=False)
    >>> fig = kvstats.plot_shannon_phi(res.frame, place="t")
    >>> len(fig.axes)
    2
    """
    place = check_choice(place, "place", list(_PLACES))
    sel = select_case(frame, distribution, params, dim, n_keys)
    if schemes is not None:
        sel = sel[sel["scheme"].isin(schemes)]
    if budgets is not None:
        sel = sel[sel["budget"].isin(budgets)]
    if sel.empty:
        raise ValueError(f"no rows left after selecting schemes={schemes!r} and budgets={budgets!r}")
    snr, phi = f"snr_{place}", f"phi_{place}"
    sel = sel[np.isfinite(sel[snr]) & np.isfinite(sel[phi])]  # exact reconstructions sit at +inf
    if sel.empty:
        raise ValueError(f"every trial has SNR = +inf at place {place!r} (exact reconstruction); "
                         "nothing to draw")
    palette = palette or scheme_palette(sel["scheme"])
    bud = list(dict.fromkeys(sorted(sel["budget"].unique())))
    _style()
    ncol = min(len(bud), 5)
    nrow = math.ceil(len(bud) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol + 0.4, 2.8 * nrow + 0.6),
                             squeeze=False, constrained_layout=True)
    rng = np.random.default_rng(seed)
    for ax, b in zip(axes.flat, bud):
        at = sel[sel["budget"] == b]
        for scheme, grp in at.groupby("scheme", sort=False):
            pts = grp if len(grp) <= max_points else grp.iloc[np.sort(rng.choice(len(grp), max_points,
                                                                                 replace=False))]
            ax.scatter(pts[phi], pts[snr], s=6, alpha=0.35, color=palette[scheme], linewidths=0,
                       rasterized=False)
            ax.scatter([grp[phi].mean()], [grp[snr].mean()], s=60, marker="X", color=palette[scheme],
                       edgecolors="black", linewidths=0.6, label=scheme, zorder=3)
        ax.set_title(f"n = {b:g} bits/coord")
        ax.set_xlabel(f"direction error {metric_def(phi).axis_label}")
        ax.set_ylabel(metric_def(snr).axis_label)
    for ax in list(axes.flat)[len(bud):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in list(axes.flat)[1:len(bud)]:
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    fig.legend(handles, labels, loc="outside right center", title="scheme (× = mean)")
    fig.suptitle(f"Shannon–φ plane, {_PLACES[place]}: {_case_label(sel.iloc[0])}")
    return fig


def _mean_ci_frame(frame: pd.DataFrame, metric: str, confidence: float = 0.95) -> pd.DataFrame:
    """Mean ± normal-approximation CI per case, scheme and budget (for drawing only), and
    ``heavy``: the values' Hill tail index is below 2, so no CI of the mean is valid."""
    from scipy import stats

    z = stats.norm.ppf(0.5 + confidence / 2)
    g = frame.groupby(list(CASE_COLUMNS) + ["scheme", "budget"], sort=False)
    out = g.agg(mean=(metric, "mean"), sd=(metric, "std"), n=(metric, "size"),
                bits_total=("bits_total", "first"),
                heavy=(metric, lambda x: tail_alpha(x.to_numpy(np.float64), metric) < 2)).reset_index()
    half = z * out["sd"].fillna(0.0) / np.sqrt(out["n"])
    out["low"], out["high"] = out["mean"] - half, out["mean"] + half
    return out


def _bits_plot(frame: pd.DataFrame, metric: str, ylabel: str, title: str, log: bool,
               palette: dict[str, Any] | None) -> "matplotlib.figure.Figure":
    frame = check_frame(frame)
    palette = palette or scheme_palette(frame["scheme"])
    stats_ = _mean_ci_frame(frame, metric)
    cases = stats_[list(CASE_COLUMNS)].drop_duplicates()
    _style()
    ncol = min(len(cases), 3)
    nrow = math.ceil(len(cases) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol + 0.6, 3.0 * nrow + 0.6),
                             squeeze=False, constrained_layout=True)
    any_heavy = False
    for ax, (_, case) in zip(axes.flat, cases.iterrows()):
        sub = stats_.merge(case.to_frame().T.astype(stats_[list(CASE_COLUMNS)].dtypes))
        for scheme, grp in sub.groupby("scheme", sort=False):
            grp = grp.sort_values("bits_total")
            ax.errorbar(grp["bits_total"], grp["mean"],
                        yerr=[grp["mean"] - grp["low"], grp["high"] - grp["mean"]],
                        marker="o", ms=4, capsize=3, color=palette[scheme], label=scheme)
            heavy = grp[grp["heavy"]]
            ax.plot(heavy["bits_total"], heavy["mean"], ls="none", marker="o", ms=6,
                    mfc="white", mec=palette[scheme], mew=1.5, zorder=5)
            any_heavy = any_heavy or len(heavy) > 0
        if log and (sub["mean"] > 0).all():
            # a lower CI end ≤ 0 (heavy tails) is clipped at the axis floor
            ax.set_yscale("log", nonpositive="clip")
        ax.set_title(_case_label(case), fontsize=9)
        ax.set_xlabel("bits per coordinate, with overhead")
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if any_heavy:
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.3", mew=1.5))
        labels.append("heavy tail (Hill α < 2 at 95%):\nthe CI is not valid")
    fig.legend(handles, labels, loc="outside right center", title="scheme")
    fig.suptitle(title)
    return fig


def plot_kl_vs_bits(frame: pd.DataFrame, *, palette: dict[str, Any] | None = None) -> "matplotlib.figure.Figure":
    """Mean attention KL(p_ref ‖ p_quant) (nats) against bits per coordinate, 95% CIs, per case.

    Error bars are normal-approximation intervals of the mean (the report's tables give
    the bootstrap intervals); hollow markers flag means whose per-trial values have a Hill
    tail index below 2 (infinite variance: no interval of the mean is valid there). The x
    axis counts every stored overhead.

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.report import plot_kl_vs_bits
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3, 4],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 10},
    ...     executor="serial", progress=False)
    >>> plot_kl_vs_bits(res.frame).axes[0].get_ylabel()
    'mean KL (nats)'
    """
    return _bits_plot(frame, "kl", f"mean {metric_def('kl').axis_label}", "Attention KL vs bit budget (mean, 95% CI)",
                      True, palette)


def plot_recall_vs_bits(frame: pd.DataFrame, *, palette: dict[str, Any] | None = None) -> "matplotlib.figure.Figure":
    """Mean top-5 routing recall (fraction) against bits per coordinate, 95% CIs, per case.

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.report import plot_recall_vs_bits
    >>> res = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3, 4],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 10},
    ...     executor="serial", progress=False)
    >>> plot_recall_vs_bits(res.frame).axes[0].get_xlabel()
    'bits per coordinate, with overhead'
    """
    return _bits_plot(frame, "recall_at_5", f"mean {metric_def('recall_at_5').axis_label}",
                      "Top-5 routing recall vs bit budget (mean, 95% CI)", False, palette)


def plot_crossover(comparisons: pd.DataFrame, metrics: Sequence[str] = ("kl", "phi_k", "snr_k", "phi_t"),
                   *, pair: tuple[str, str] = DEFAULT_COMPARISONS[0], palette: dict[str, Any] | None = None
                   ) -> "matplotlib.figure.Figure":
    """Rank-biserial r of a scheme pair against the budget, per metric and case.

    The report's one sign convention (its tables use the same): **r > 0 when the first
    scheme's values tend to be larger** (better for SNR and recall@5, worse for φ, KL and
    argmax shift; each panel's title says which). A line that crosses zero with
    non-overlapping CIs on both sides is a crossover. Filled markers: significant after
    the report's adjustment.

    Parameters
    ----------
    comparisons : DataFrame
        The table of :func:`kvstats.analysis.compare_schemes`.
    metrics : sequence of str
        Metrics to draw, one panel each.
    pair : (str, str)
        The scheme pair (default: the first of :data:`kvstats.results.DEFAULT_COMPARISONS`).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kvstats.report import plot_crossover
    >>> t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
    ...     "budget": [2.0, 3.0], "budget_b": [2.0, 3.0], "scheme_a": "KQV", "scheme_b": "QKQV",
    ...     "metric": "kl", "test": "mann_whitney", "effect": [0.2, -0.5],
    ...     "effect_low": [0.1, -0.6], "effect_high": [0.3, -0.4], "significant": True})
    >>> len(plot_crossover(t, ["kl"]).axes)
    1
    """
    if not isinstance(comparisons, pd.DataFrame):
        raise TypeError(f"comparisons must be the DataFrame of compare_schemes; received "
                        f"{type(comparisons).__name__}")
    metrics = [check_choice(m, "metrics", list(HIGHER_IS_BETTER)) for m in metrics]
    mw = comparisons[(comparisons["test"] == "mann_whitney") & (comparisons["scheme_a"] == pair[0])
                     & (comparisons["scheme_b"] == pair[1])
                     & (comparisons["budget"] == comparisons["budget_b"])]
    if mw.empty:
        raise ValueError(f"comparisons has no Mann–Whitney rows for pair {pair!r}")
    cases = mw[list(CASE_COLUMNS)].drop_duplicates()
    import seaborn as sns
    labels_all = [_case_label(r) for _, r in cases.iterrows()]
    # distinct hues, a marker and a small horizontal offset per case: cases that share a
    # value (r = ±1 when every trial separates) stay visible side by side, not stacked
    colors = dict(zip(labels_all, sns.color_palette("tab10", max(len(cases), 1))))
    markers = dict(zip(labels_all, "osD^vP*Xph" * (len(cases) // 10 + 1)))
    width = 0.5  # of the gap between budgets taken by the spread of the cases
    offsets = dict(zip(labels_all, (np.arange(len(cases)) - (len(cases) - 1) / 2)
                       * (width / max(len(cases), 1))))
    _style()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics) + 2.2, 3.2), squeeze=False,
                             constrained_layout=True)
    for ax, metric in zip(axes.flat, metrics):
        for _, case in cases.iterrows():
            sub = mw[(mw["metric"] == metric)]
            for col in CASE_COLUMNS:
                sub = sub[sub[col] == case[col]]
            sub = sub.sort_values("budget")
            if sub.empty:
                continue
            label = _case_label(case)
            r = sub["effect"].to_numpy()
            lo, hi = sub["effect_low"].to_numpy(), sub["effect_high"].to_numpy()
            x = sub["budget"].to_numpy(float) + offsets[label]
            ax.errorbar(x, r, yerr=[r - lo, hi - r], color=colors[label], capsize=2,
                        lw=1.2, label=label, marker=markers[label], ms=0)
            sig = sub["significant"].to_numpy(bool)
            ax.scatter(x[sig], r[sig], color=colors[label], marker=markers[label], s=28, zorder=3)
            ax.scatter(x[~sig], r[~sig], facecolor="white", edgecolor=colors[label],
                       marker=markers[label], s=28, zorder=3)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_ylim(-1.05, 1.05)
        ax.set_title(f"{metric} ({'higher' if HIGHER_IS_BETTER[metric] else 'lower'} is better)")
        ax.set_xlabel("budget n (bits/coord; cases side by side)")
        ax.set_xticks(sorted(mw["budget"].unique()))
        ax.set_ylabel(f"rank-biserial r (> 0: {pair[0]} larger)")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside right center", title="case", fontsize=7)
    fig.suptitle(f"{pair[0]} vs {pair[1]} across budgets (filled: significant after adjustment)")
    return fig


def plot_lowrank_vs_heavytail(frame: pd.DataFrame, metric: str = "kl", *,
                              palette: dict[str, Any] | None = None) -> "matplotlib.figure.Figure":
    """Damage on low-rank vs heavy-tailed (and Gaussian) keys, per scheme, budget and d.

    Box plots (per trial) of ``metric`` by distribution; one panel per head dimension,
    budgets on the x axis, one colour per distribution setting, one row per scheme. KL is
    drawn on a log axis, floored at 1e-6 nats for display (exact zeros exist).

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.report import plot_lowrank_vs_heavytail
    >>> res = kvstats.run_sweep({"schemes": ["KQV"], "budgets": [3], "distributions":
    ...     ["low_rank", {"name": "heavy_tailed", "params": {"nu": 1.5}}], "dims": [32],
    ...     "n_keys": [64], "n_trials": 10}, executor="serial", progress=False)
    >>> plot_lowrank_vs_heavytail(res.frame).axes[0].get_xlabel()
    'budget n (bits/coord)'
    """
    import seaborn as sns

    frame = check_frame(frame)
    metric = check_choice(metric, "metric", list(HIGHER_IS_BETTER))
    sel = frame[frame["distribution"].isin(["low_rank", "heavy_tailed", "gaussian"])]
    if not {"low_rank", "heavy_tailed"} <= set(sel["distribution"]):
        raise ValueError("frame must contain both 'low_rank' and 'heavy_tailed' cases; received "
                         f"distributions {sorted(set(frame['distribution']))}")
    sel = sel.assign(setting=sel["distribution"] + np.where(sel["params"] == "-", "",
                                                             " (" + sel["params"] + ")"))
    sel = sel[np.isfinite(sel[metric])]
    dims = sorted(sel["dim"].unique())
    schemes = list(dict.fromkeys(sel["scheme"]))
    _style()
    fig, axes = plt.subplots(len(schemes), len(dims), figsize=(4.6 * len(dims) + 2.4, 2.6 * len(schemes) + 0.6),
                             squeeze=False, constrained_layout=True, sharey=True)
    settings = list(dict.fromkeys(sel.sort_values("distribution")["setting"]))
    pal = dict(zip(settings, sns.color_palette("colorblind", len(settings))))
    log = metric == "kl"
    if log:
        # KL spans many decades (and can be exactly 0): log axis, floored for display only
        sel = sel.assign(**{metric: sel[metric].clip(lower=_KL_FLOOR)})
    sel = sel.assign(n=sel["budget"].map(lambda b: f"{b:g}"))
    order = [f"{b:g}" for b in sorted(sel["budget"].unique())]
    for i, scheme in enumerate(schemes):
        for j, d in enumerate(dims):
            ax = axes[i, j]
            sub = sel[(sel["scheme"] == scheme) & (sel["dim"] == d)]
            if sub.empty:
                ax.set_visible(False)
                continue
            with warnings.catch_warnings():
                # seaborn 0.13 passes matplotlib's deprecated `vert`; not ours to fix
                warnings.simplefilter("ignore", matplotlib.MatplotlibDeprecationWarning)
                sns.boxplot(data=sub, x="n", y=metric, order=order, hue="setting", hue_order=settings,
                            palette=pal, ax=ax, fliersize=1, linewidth=0.6, log_scale=log,
                            legend=(i == 0 and j == 0))
            ax.set_title(f"{scheme}, d = {d}", fontsize=9)
            ax.set_xlabel("budget n (bits/coord)")
            ax.set_ylabel(f"KL (nats, floored at {_KL_FLOOR:g})" if log else metric)
    first = axes[0, 0]
    if first.get_legend() is not None:
        handles, labels = first.get_legend_handles_labels()
        first.get_legend().remove()
        fig.legend(handles, labels, loc="outside right center", title="keys", fontsize=7)
    fig.suptitle(f"Low-rank vs heavy-tailed keys: {metric} per trial")
    return fig


def save_figure(fig: "matplotlib.figure.Figure", stem: str | Path, *, dpi: int = 130) -> dict[str, Path]:
    """Write ``stem.png`` and ``stem.svg``; close the figure; return the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = {}
    for ext in ("png", "svg"):
        path = stem.with_suffix(f".{ext}")
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        paths[ext] = path
    plt.close(fig)
    return paths
