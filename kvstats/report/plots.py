"""Publication figures of a sweep (seaborn on the Agg backend).

Every function takes the per-trial frame of :func:`kvstats.run_sweep`, returns a
:class:`matplotlib.figure.Figure`, and never shows it; :func:`save_figure` writes PNG and
SVG. A scheme has a colour of seaborn's colour-blind palette of 10, a marker and a line style
by its place (:func:`_scheme_slots`: apart in greyscale, no two schemes of a figure alike);
pass ``palette`` to keep a user scheme's equal between calls. A case (distribution setting)
has one magma colour in every figure, never a scheme's. Figures are sized for a paper's text
width (7 in), so their text prints at 6 points or more. The Shannon–φ plane, with its limit
lines, nested markers and trial clouds, is :mod:`kvstats.report.shannon_phi` (its names are
importable from here too).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg", force=False)  # no display needed; a user's interactive backend is kept
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from kvstats._checks import check_choice  # noqa: E402
from kvstats.analysis.compare import LOCATION_TESTS  # noqa: E402
from kvstats.analysis.frame import CASE_COLUMNS, check_frame, label_digits, short_params  # noqa: E402
from kvstats.analysis.intervals import MIN_NONZERO, _is_fraction, few_nonzero, tail_alpha  # noqa: E402
from kvstats.metrics.table import HIGHER_IS_BETTER, metric as metric_def  # noqa: E402
from kvstats.results import DEFAULT_COMPARISONS  # noqa: E402

__all__ = ["SHANNON_PHI_NOTE", "CROSSOVER_METRICS", "plot_shannon_phi", "plot_kl_vs_bits", "plot_recall_vs_bits", "plot_crossover",
           "plot_lowrank_vs_heavytail", "scheme_palette", "save_figure", "select_case"]

_PLACES = {"k": "keys K", "v": "values V", "t": "attention output T"}
#: Names kept importable from here that live in :mod:`kvstats.report.shannon_phi`.
_SHANNON_PHI = ("SHANNON_PHI_NOTE", "plot_shannon_phi")


def __getattr__(name: str) -> Any:
    """The Shannon–φ plane's names, from its module (imported on first use: it reads this one's)."""
    if name in _SHANNON_PHI:
        from kvstats.report import shannon_phi
        return getattr(shannon_phi, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
_KL_FLOOR = 1e-6
#: The width (inches) a paper prints a figure at, its full text width: figures are sized to
#: about this, so that their text prints near its nominal size (6 points or more).
_PRINT_WIDTH_IN = 7.0
#: Marker and line style per scheme by its place (as its colour): apart in greyscale (_scheme_style).
_MARKERS = "osD^vP*Xph"
_LINESTYLES = ("-", "--", ":", "-.")
#: The colour-blind palette's size: a built-in scheme's colour is its catalog place modulo it.
_N_COLORS = 10


def _scheme_slots(schemes: Sequence[str]) -> dict[str, int]:
    """Each scheme's place in the palette (its colour, marker and line style), in order of first
    appearance: a built-in scheme's is its place in the catalog (:data:`kvstats.quant.catalog.NAMES`)
    modulo the palette's size, one look in every report where no built-in 10 places earlier in
    the catalog runs with it; such a one, and a scheme of one's own, takes the lowest free place.

    Examples
    --------
    >>> _scheme_slots(["QKQV", "mine", "KV"]), _scheme_slots(["KQV", "q4_0"])
    ({'QKQV': 2, 'mine': 1, 'KV': 0}, {'KQV': 1, 'q4_0': 0})
    """
    from kvstats.quant.catalog import NAMES   # stdlib only

    names = list(dict.fromkeys(schemes))
    slots: dict[str, int] = {}
    for s in sorted((s for s in names if s in NAMES), key=NAMES.index):
        if NAMES.index(s) % _N_COLORS not in slots.values():
            slots[s] = NAMES.index(s) % _N_COLORS
    free = (i for i in range(len(NAMES) + len(names)) if i not in slots.values())
    for s in names:
        if s not in slots:
            slots[s] = next(free)
    return {s: slots[s] for s in names}


def scheme_palette(schemes: Sequence[str]) -> dict[str, Any]:
    """A colour per scheme from seaborn's colour-blind palette (in order of first appearance): a
    built-in scheme's is its catalog place modulo 10, the same in every report where no built-in 10
    places earlier runs with it (:func:`_scheme_slots`); such a one, or a user's, takes a free one.

    Examples
    --------
    >>> from kvstats.report.plots import scheme_palette
    >>> pal = scheme_palette(["KV", "KQV", "KV"])
    >>> list(pal), len(pal["KV"]), pal["KV"] != pal["KQV"]
    (['KV', 'KQV'], 3, True)
    >>> scheme_palette(["QKQV", "KQV"])["KQV"] == pal["KQV"]     # whatever the order
    True
    """
    import seaborn as sns

    colors = sns.color_palette("colorblind", _N_COLORS)
    return {s: colors[i % _N_COLORS] for s, i in _scheme_slots(schemes).items()}


def _scheme_style(palette: dict[str, Any], scheme: str) -> dict[str, Any]:
    """Colour, marker and line style of ``scheme`` by its place (:func:`_scheme_slots` of the
    palette's schemes). Places 10 apart share a colour: the marker moves on one per round of
    the palette, so no two schemes of a figure share both (up to 100 schemes)."""
    i = _scheme_slots(list(palette))[scheme]
    return {"color": palette[scheme], "marker": _MARKERS[(i + i // _N_COLORS) % len(_MARKERS)],
            "ls": _LINESTYLES[i % len(_LINESTYLES)]}


def _case_palette(table: pd.DataFrame) -> dict[tuple, Any]:
    """A colour per setting (distribution, params, N) of ``table``'s full case list (a frame or
    compare_schemes' table), sorted: a case has one colour in every figure, whichever cases each
    draws (cases that differ only in d share it; marker or panel tells them apart). Magma:
    colour-blind safe, of increasing lightness (apart in greyscale), none of the schemes'; its hues
    turn from black-purple through red to peach (cividis's dark end gave two navies, ΔE 25; 43 here)."""
    keys = sorted(set(zip(table["distribution"], table["params"], table["n_keys"].astype(int))))
    return dict(zip(keys, plt.get_cmap("magma")(np.linspace(0.1, 0.85, max(len(keys), 1)))))


def _legend_below(fig: Any, handles: list, labels: list, title: str, ncol: int) -> Any:
    """The figure's one legend under its panels: it hides no data and adds no width."""
    return fig.legend(handles, labels, loc="outside lower center", title=title,
                      ncol=max(1, min(ncol, len(handles))))


def _case_label(row: Any, digits: int | None = None) -> str:
    """``digits``: the params' numbers to that many significant digits (None: exact, as
    :func:`select_case` needs them)."""
    text = row["params"] if digits is None else short_params(row["params"], digits)
    params = "" if row["params"] in ("-", "") else f" ({text})"
    return f"{row['distribution']}{params}, d={row['dim']}, N={row['n_keys']}"


def select_case(frame: pd.DataFrame, distribution: str | None = None, params: str | None = None,
                dim: int | None = None, n_keys: int | None = None) -> pd.DataFrame:
    """Rows of one case; raises a ValueError listing the cases when the selection is ambiguous.

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.report.plots import select_case
    >>> res = kvstats.run_sweep({"schemes": ["KV"], "budgets": [3], "distributions":
    ...     ["gaussian", "low_rank"], "dims": [32], "n_keys": [64], "n_trials": 4},
    ...     executor="serial", progress=False)
    >>> sorted(set(select_case(res.frame, distribution="low_rank")["distribution"]))
    ['low_rank']
    >>> select_case(res.frame)
    Traceback (most recent call last):
    ...
    ValueError: the selection (distribution=None, ...) must match exactly one case; it matches 2. ...
    """
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


def _marked(x: np.ndarray, metric: str) -> bool:
    """The tables' ‡ (:func:`kvstats.analysis.summary_table`'s ``ci_reliable`` False): a Hill
    tail index below 2 at 95%, or a mean carried by too few nonzero values."""
    return bool(tail_alpha(x, metric) < 2 or few_nonzero(x, metric))


def _mean_ci_frame(frame: pd.DataFrame, metric: str, confidence: float = 0.95,
                   n_resamples: int = 999, seed: int = 0) -> pd.DataFrame:
    """Mean and the tables' interval per case, scheme and budget: ``low``/``high`` are
    :func:`~kvstats.analysis.summary_table`'s ``ci_low``/``ci_high`` for the same arguments (BCa
    bootstrap, :func:`~kvstats.analysis.intervals.mean_ci`, seeded by the values, so the same
    numbers), ``heavy``: the tables' ‡ (:func:`_marked`), ``exact``: KL 0 on every trial."""
    from kvstats.analysis.intervals import _in_unit_interval, _is_fraction, mean_ci

    rows = []
    for key, grp in frame.groupby(list(CASE_COLUMNS) + ["scheme", "budget"], sort=False):
        x = grp[metric].to_numpy(np.float64)
        unit = _is_fraction(metric) and _in_unit_interval(x)   # as summary_table asks
        mean, low, high = mean_ci(x, confidence, n_resamples, seed, unit_interval=unit)
        rows.append((*key, mean, low, high, x.size, float(grp["bits_total"].iloc[0]), _marked(x, metric),
                     bool((grp["kl"] == 0).all())))
    return pd.DataFrame(rows, columns=[*CASE_COLUMNS, "scheme", "budget", "mean", "low", "high", "n",
                                       "bits_total", "heavy", "exact"])


def _bits_plot(frame: pd.DataFrame, metric: str, ylabel: str, title: str, log: bool,
               palette: dict[str, Any] | None, confidence: float, n_resamples: int,
               seed: int) -> "matplotlib.figure.Figure":
    from kvstats._checks import check_int, check_real
    from kvstats.analysis.clustered import N_IN_CLUSTER
    from kvstats.results import REAL

    frame = check_frame(frame)
    confidence = check_real(confidence, "confidence", low=0, high=1, low_open=True, high_open=True)
    n_resamples, seed = check_int(n_resamples, "n_resamples", low=1), check_int(seed, "seed", low=0)
    palette = palette or scheme_palette(frame["scheme"])
    stats_ = _mean_ci_frame(frame, metric, confidence, n_resamples, seed)
    cases = stats_[list(CASE_COLUMNS)].drop_duplicates()
    digits = label_digits(cases["params"])
    _style()
    # two panels a row, the legend below: about the print width (_PRINT_WIDTH_IN)
    ncol, nrow = min(len(cases), 2), math.ceil(len(cases) / min(len(cases), 2))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol + 0.2, 2.5 * nrow + 1.0),
                             squeeze=False, constrained_layout=True)
    any_heavy = False
    for ax, (_, case) in zip(axes.flat, cases.iterrows()):
        sub = stats_.merge(case.to_frame().T.astype(stats_[list(CASE_COLUMNS)].dtypes))
        floor = None
        if not log:   # an exact scheme (identity, 32 bits) would squeeze the others: a dotted line
            ax.hlines(sub.loc[sub["exact"], "mean"].unique(), 0, 1, transform=ax.get_yaxis_transform(), colors="0.4", lw=0.8, ls=":")
            _note_zero_means(ax, sub[sub["exact"]], sub, sub.iloc[:0], "exact, at the dotted line")
            sub = sub[~sub["exact"]]
        if log:   # every panel on the log axis: a mean of 0 (an exact scheme's) is left off, and said
            _note_zero_means(ax, sub[sub["mean"] <= 0], sub, sub[(sub["mean"] > 0) & (sub["low"] <= 0)])
            sub = sub[sub["mean"] > 0]
            ax.set_yscale("log")
            # an interval reaching 0 (a mean of few nonzero values) has no lower end on the
            # axis: its bar runs to the panel's floor, marked ▼ there, and the note says so
            ends = np.r_[sub["mean"], sub["low"][sub["low"] > 0]]
            floor = float(ends.min()) / 3 if ends.size else None
        for scheme, grp in sub.groupby("scheme", sort=False):
            grp = grp.sort_values("bits_total")
            style = _scheme_style(palette, scheme)
            zero = (grp["low"] <= 0).to_numpy() if floor is not None else np.zeros(len(grp), bool)
            low = np.where(zero, floor or 0.0, grp["low"])
            ax.errorbar(grp["bits_total"], grp["mean"], yerr=[grp["mean"] - low, grp["high"] - grp["mean"]],
                        ms=4.5, capsize=3, lw=1.2, label=scheme, **style)
            ax.plot(grp["bits_total"][zero], low[zero], ls="none", marker="v", ms=4, color=palette[scheme])
            heavy = grp[grp["heavy"]]
            ax.plot(heavy["bits_total"], heavy["mean"], ls="none", marker=style["marker"], ms=6.5,
                    mfc="white", mec=palette[scheme], mew=1.5, zorder=5)
            any_heavy = any_heavy or len(heavy) > 0
        if floor is not None:
            ax.set_ylim(bottom=floor / 1.5)
        ax.set_title(_case_label(case, digits), fontsize=9)
        ax.set_xlabel("bits per coordinate, with overhead")
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    first = {}   # each scheme's handle, in order of first appearance
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            first.setdefault(lab, h)
    handles, labels = list(first.values()), list(first)
    if any_heavy:
        handles.append(Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.3", mew=1.5))
        few, also = ("values below 1", "; or above 0") if _is_fraction(metric) else ("nonzero values", "")
        labels.append(f"hollow, ‡: heavy tail (Hill α < 2 at 95%) or few {few}\n(fewer than {MIN_NONZERO}{also}): "
                      "the CI is not valid")
    _legend_below(fig, handles, labels, "scheme", min(len(first), 4) + any_heavy)
    # the interval and its unit named, as the report's: the tables' bootstrap CI of a mean over
    # trials, or over texts (clusters) where the frame holds cluster means (aggregate_clusters)
    unit = ("trials" if N_IN_CLUSTER not in frame.columns else "texts"
            if (frame["distribution"] == REAL).all() else "clusters")
    fig.suptitle(f"{title} (mean, {100 * confidence:g}% BCa bootstrap CI over {unit}, as the tables)")
    return fig


def _note_zero_means(ax: Any, zero: pd.DataFrame, sub: pd.DataFrame, to_zero: pd.DataFrame,
                     what: str = "KL = 0, not drawn") -> None:
    """Name, in the panel's lower left corner (low KL at few bits: empty), the schemes whose mean
    is 0 and so not on the log axis: "identity: KL = 0, not drawn", with the budgets where only
    some of a scheme's are; and those whose interval reaches 0 (``to_zero``), whose bar is cut at
    the axis floor (▼). ``what``: why ``zero`` is left off (not KL's: lower right, as recall's)."""
    def named(rows: pd.DataFrame, whole: bool) -> str:
        return "; ".join(s if whole and len(g) == int((sub["scheme"] == s).sum())
                         else f"{s} at n = {', '.join(f'{b:g}' for b in g['budget'])}"
                         for s, g in rows.groupby("scheme", sort=False))
    lines = ([f"{named(zero, True)}: {what}"] if len(zero) else []) + (
        [f"▼ {named(to_zero, False)}: CI reaches 0, bar cut at the axis"] if len(to_zero) else [])
    if lines:
        left = what.startswith("KL")
        ax.text(0.02 if left else 0.98, 0.03, "\n".join(lines), transform=ax.transAxes, fontsize=7,
                ha="left" if left else "right", va="bottom", color="0.25")


def plot_kl_vs_bits(frame: pd.DataFrame, *, palette: dict[str, Any] | None = None, confidence: float = 0.95,
                    n_resamples: int = 999, seed: int = 0) -> "matplotlib.figure.Figure":
    """Mean attention KL(p_ref ‖ p_quant) (nats) against bits per coordinate, with CIs, per case.

    A log y axis in every panel: a mean of 0 (an exact scheme, such as identity) has no place on
    it and is left off, named in its panel ("identity: KL = 0, not drawn"). Error bars are the
    tables' intervals of the mean (:func:`~kvstats.analysis.summary_table`'s ``ci_low``/``ci_high``
    for the same ``confidence``, ``n_resamples`` and ``seed``: BCa bootstrap over the frame's rows,
    trials or texts), so never below 0; one that reaches 0 is cut at the axis floor, marked ▼ and
    named in its panel. Hollow markers flag the means the tables mark ‡: per-trial values with a
    Hill tail index below 2 at 95% (infinite variance: no interval of the mean is valid there) or a
    mean carried by fewer than 10 nonzero values (its bootstrap interval undercovers). The x axis
    counts every stored overhead.

    Parameters
    ----------
    frame : pandas.DataFrame
        Per-trial results (a sweep's ``SweepResult.frame``): one panel per case.
    palette : dict, optional
        Scheme label → colour (default :func:`scheme_palette` of the frame's schemes).
    confidence, n_resamples, seed : float, int, int
        The intervals' level, bootstrap resamples and seed, as the report's tables
        (``[report]`` confidence, bootstrap_resamples, seed).

    Returns
    -------
    matplotlib.figure.Figure

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
    return _bits_plot(frame, "kl", f"mean {metric_def('kl').axis_label}", "Attention KL vs bit budget",
                      True, palette, confidence, n_resamples, seed)


def plot_recall_vs_bits(frame: pd.DataFrame, *, palette: dict[str, Any] | None = None, confidence: float = 0.95,
                        n_resamples: int = 999, seed: int = 0) -> "matplotlib.figure.Figure":
    """Mean top-5 routing recall (fraction) against bits per coordinate, with CIs, per case.

    Error bars (the tables' bootstrap intervals, within [0, 1]), hollow markers and the
    arguments as in :func:`plot_kl_vs_bits` (but hollow for fewer than 10 values below 1, or
    above 0); the x axis counts every stored overhead. An exact scheme (KL 0 on every trial:
    identity, 32 bits) is a dotted line at its mean, named in its panel, not a point there.

    Parameters
    ----------
    frame, palette, confidence, n_resamples, seed
        As :func:`plot_kl_vs_bits`.

    Returns
    -------
    matplotlib.figure.Figure

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
                      "Top-5 routing recall vs bit budget", False, palette, confidence, n_resamples, seed)


#: The metrics of the crossover figure's panels (the report's crossover list names every metric).
CROSSOVER_METRICS = ("kl", "phi_k", "snr_k", "phi_t")


def plot_crossover(comparisons: pd.DataFrame, metrics: Sequence[str] = CROSSOVER_METRICS,
                   *, pair: tuple[str, str] = DEFAULT_COMPARISONS[0], palette: dict[str, Any] | None = None
                   ) -> "matplotlib.figure.Figure":
    """Rank-biserial r (or paired dominance) of a scheme pair against the budget, per metric and case.

    The effect of the location-test rows: Mann–Whitney's r, or under the paired design
    (``compare_schemes(..., pairing="trial")``) the sign test's dominance P(a > b) − P(a < b)
    over the pairs that differ, with the same sign. A case has its colour of the other figures.

    The report's one sign convention (its tables use the same): **r > 0 when the first scheme's
    values tend to be larger** (better for SNR and recall@5, worse for φ, KL and argmax shift;
    each panel's title says which). Filled markers: significant after the report's adjustment; a
    crossover (the report's rule, :func:`kvstats.analysis.find_crossovers`) is a line with filled
    markers on both sides of zero. The error bars are the unadjusted 95% intervals of r
    (Newcombe's for Mann–Whitney, the sign test's Clopper–Pearson-based one under pairing): one
    that excludes 0 need not be significant after the adjustment, so they do not show a crossover
    by themselves. A sign row whose pairs all have equal values (``n_informative`` 0: the
    dominance is 0/0) has no point.

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
    numeric = ["budget", "budget_b", "effect", "effect_low", "effect_high"]
    need = [*CASE_COLUMNS, "scheme_a", "scheme_b", "metric", "test", "significant", *numeric]
    if missing := [c for c in need if c not in comparisons.columns]:
        raise ValueError(f"comparisons lacks the column(s) {missing} of compare_schemes' table; "
                         f"received columns {list(comparisons.columns)}")
    for col in numeric:   # a report before session 7 wrote missing values as empty cells (read_table: text)
        if not pd.api.types.is_numeric_dtype(comparisons[col]):
            raise TypeError(f"comparisons column {col!r} must be numeric; received dtype {comparisons[col].dtype} "
                            "(an older report's tables/comparisons.csv, with empty cells: read it with pandas.read_csv)")
    metrics = [check_choice(m, "metrics", list(HIGHER_IS_BETTER)) for m in metrics]
    # the location test's rows: Mann–Whitney, or the sign test under the paired design
    mw = comparisons[comparisons["test"].isin(list(LOCATION_TESTS.values()))
                     & (comparisons["scheme_a"] == pair[0]) & (comparisons["scheme_b"] == pair[1])
                     & (comparisons["budget"] == comparisons["budget_b"])]
    if mw.empty:
        raise ValueError(f"comparisons has no Mann–Whitney or sign-test rows for pair {pair!r}")
    paired = bool((mw["test"] == LOCATION_TESTS["trial"]).any())
    cases = mw[list(CASE_COLUMNS)].drop_duplicates()
    digits = label_digits(cases["params"])     # short labels that keep the cases apart
    labels_all = [_case_label(r, digits) for _, r in cases.iterrows()]
    # a colour (the whole table's cases', as in the other figures), a marker and a small offset per case:
    # cases that share a value (r = ±1 when every trial separates) stay side by side, apart in greyscale
    pal = _case_palette(comparisons)
    colors = dict(zip(labels_all, (pal[r["distribution"], r["params"], int(r["n_keys"])] for _, r in cases.iterrows())))
    markers = dict(zip(labels_all, "osD^vP*Xph" * (len(cases) // 10 + 1)))
    width = 0.5  # of the gap between budgets taken by the spread of the cases
    offsets = dict(zip(labels_all, (np.arange(len(cases)) - (len(cases) - 1) / 2) * (width / max(len(cases), 1))))
    _style()
    # two panels a row on one y scale, the legend below: about the print width (_PRINT_WIDTH_IN)
    ncol, nrow = min(len(metrics), 2), math.ceil(len(metrics) / min(len(metrics), 2))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol + 0.2, 2.5 * nrow + 1.2), squeeze=False,
                             sharey=True, constrained_layout=True)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    for ax, metric in zip(axes.flat, metrics):
        for _, case in cases.iterrows():
            sub = mw[(mw["metric"] == metric)]
            for col in CASE_COLUMNS:
                sub = sub[sub[col] == case[col]]
            sub = sub.sort_values("budget")
            if sub.empty:
                continue
            label = _case_label(case, digits)
            r, lo, hi = (sub[c].to_numpy(np.float64) for c in ("effect", "effect_low", "effect_high"))
            # a sign row where no pair differs has no dominance (0/0): no point, as the
            # tables' "—", not a 0 with the placeholder interval [-1, 1]
            if "n_informative" in sub:
                none_differ = (sub["test"] == LOCATION_TESTS["trial"]).to_numpy() & (
                    sub["n_informative"].to_numpy() == 0)
                r, lo, hi = (np.where(none_differ, np.nan, v) for v in (r, lo, hi))
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
    for ax in axes[:, 0]:
        # two lines: one is taller than a panel once the case legend takes its room
        ax.set_ylabel(f"paired dominance\n(> 0: {pair[0]} larger)" if paired else
                      f"rank-biserial r\n(> 0: {pair[0]} larger)")
    drawn = {lab for ax in axes.flat for lab in ax.get_legend_handles_labels()[1]}
    # the legend shows each case's marker with its colour (the bars' own handles have none)
    handles = [Line2D([], [], color=colors[lab], marker=markers[lab], ms=5, lw=1.2)
               for lab in labels_all if lab in drawn]
    _legend_below(fig, handles, [lab for lab in labels_all if lab in drawn], "case", 2)
    fig.suptitle(f"{pair[0]} vs {pair[1]} across budgets (filled: significant after adjustment)")
    return fig


def plot_lowrank_vs_heavytail(frame: pd.DataFrame, metric: str = "kl", *,
                              palette: dict[str, Any] | None = None) -> "matplotlib.figure.Figure":
    """Damage on low-rank vs heavy-tailed (and Gaussian) keys, per scheme, budget and d.

    Box plots (per trial) of ``metric`` by distribution; one panel per head dimension, budgets on
    the x axis, one colour per distribution setting (and N, where the sweep has several: a box
    never pools two cases; a case's colour of the other figures), one row per scheme. KL is on a
    log axis, floored at 1e-6 nats for display (exact zeros exist), with the share of a box's
    trials below the floor printed under it.

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
    digits = label_digits(sel["params"])
    short = sel["params"].map({p: short_params(p, digits) for p in sel["params"].unique()})
    setting = sel["distribution"] + np.where(sel["params"] == "-", "", " (" + short + ")")
    if sel["n_keys"].nunique() > 1:   # one box per case: trials of another N are another population
        setting = setting + ", N = " + sel["n_keys"].astype(str)
    sel = sel.assign(setting=setting)[np.isfinite(sel[metric])]
    dims = sorted(sel["dim"].unique())
    schemes = list(dict.fromkeys(sel["scheme"]))
    _style()
    fig, axes = plt.subplots(len(schemes), len(dims), figsize=(4.6 * len(dims) + 2.4, 2.6 * len(schemes) + 0.6),
                             squeeze=False, constrained_layout=True, sharey=True)
    settings = list(dict.fromkeys(sel.sort_values("distribution")["setting"]))
    # the cases' colours of every figure (the frame's full case list), never the schemes', filled
    # a third of the way to white so that the median line shows on the darkest box
    case_pal = _case_palette(frame)
    rgb = {k: case_pal[c, p, int(n)] for k, c, p, n in zip(*(sel[c] for c in ("setting", *CASE_COLUMNS[:2], "n_keys")))}
    pal = {k: tuple(0.7 * np.asarray(rgb[k][:3]) + 0.3) for k in settings}
    log = metric == "kl"
    label = metric_def(metric).axis_label   # with its unit
    if log:   # KL spans many decades (and can be exactly 0): log axis, floored for display only
        sel = sel.assign(below=sel[metric] < _KL_FLOOR, **{metric: sel[metric].clip(lower=_KL_FLOOR)})
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
                            palette=pal, saturation=1.0, ax=ax, fliersize=1, linewidth=0.6, linecolor="0.15", log_scale=log,
                            legend=(i == 0 and j == 0))
            # a box's quartiles may sit on the floor, unseen: under it, the share of its trials below
            # it (seaborn's dodged places: a width of 0.8 shared by the settings)
            for (n, setting), share in (sub.groupby(["n", "setting"])["below"].mean().items() if log else ()):
                if share > 0:
                    pct = "<1%" if share < 0.01 else ">99%" if 0.99 < share < 1 else f"{100 * share:.0f}%"
                    ax.text(order.index(n) - 0.4 + (settings.index(setting) + 0.5) * 0.8 / len(settings),
                            _KL_FLOOR / 1.5, pct, ha="center", va="top", fontsize=6, color="0.2")
            ax.set_title(f"{scheme}, d = {d}", fontsize=9)
            ax.set_xlabel("budget n (bits/coord)")
            ax.set_ylabel(f"{label}, floored at 1e{round(math.log10(_KL_FLOOR))}" if log else label)
    if log:   # room under the floor for the shares
        axes[0, 0].set_ylim(bottom=_KL_FLOOR / 12)
    first = axes[0, 0]
    if first.get_legend() is not None:
        handles, labels = first.get_legend_handles_labels()
        first.get_legend().remove()
        fig.legend(handles, labels, loc="outside right center", title="keys", fontsize=7)
    fig.suptitle(f"Low-rank vs heavy-tailed keys: {metric_def(metric).label} per trial"
                 + (" (under a box: the % of its trials below the floor)" if log else ""))
    return fig


def save_figure(fig: "matplotlib.figure.Figure", stem: str | Path, *, dpi: int = 130) -> dict[str, Path]:
    """Write ``stem.png`` and ``stem.svg``; close the figure; return the paths.

    Both are byte-reproducible: the same figure gives the same files (the SVG without its
    date and with fixed element ids, a salt in place of matplotlib's random one).

    Examples
    --------
    >>> import tempfile
    >>> import matplotlib.pyplot as plt
    >>> from pathlib import Path
    >>> from kvstats.report.plots import save_figure
    >>> fig, ax = plt.subplots()
    >>> paths = save_figure(fig, Path(tempfile.mkdtemp()) / "figs" / "empty")
    >>> sorted(paths), paths["png"].name, paths["svg"].is_file()
    (['png', 'svg'], 'empty.png', True)
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = {}
    for ext in ("png", "svg"):
        path = stem.with_suffix(f".{ext}")
        with plt.rc_context({"svg.hashsalt": "kvstats"}):
            fig.savefig(path, dpi=dpi, bbox_inches="tight",
                        metadata={"Date": None} if ext == "svg" else None)
        paths[ext] = path
    plt.close(fig)
    return paths
