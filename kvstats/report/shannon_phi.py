"""The Shannon–φ plane of a case: each scheme's trajectory over budgets, the limit beside it.

The plane's one figure function, :func:`plot_shannon_phi`, with what it needs alone: the
explanation the report prints (:data:`SHANNON_PHI_NOTE`), the rate–distortion limit of a
synthetic case (:func:`_auto_bounds`) and the nested markers that keep coinciding schemes
visible (:func:`_nested_markers`). The case selection, palette and style are the other
figures' (:mod:`kvstats.report.plots`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from kvstats._checks import check_choice
from kvstats.analysis.frame import CASE_COLUMNS, LABEL_DIGITS, reported_pooled_snrs, short_params
from kvstats.analysis.intervals import ci_reliable
from kvstats.metrics.table import metric as metric_def
from kvstats.report.plots import (_PLACES, _case_label, _scheme_style, _style, plt, scheme_palette,
                                  select_case)
from kvstats.stats.cluster import _cluster_sums

__all__ = ["SHANNON_PHI_NOTE", "plot_shannon_phi"]


#: What the Shannon–φ plane shows, said once (figure captions, docs/report.md).
SHANNON_PHI_NOTE = (
    "Each point is a scheme at one budget n: y is the mean over trials of the SNR of the reconstruction "
    "(dB; higher means a smaller error relative to the signal, the scale of the error): for keys and "
    "values the trial's energy-pooled SNR, what the limit below bounds (a scheme that keeps some vectors "
    "nearly exact, such as a full-precision window, has a mean of per-vector dB far above its coded "
    "vectors' SNR; the pooled one is not lifted so), for the attention output the mean of per-vector dB; x "
    "the mean angle φ between each vector and its reconstruction (radians, log scale; lower means the "
    "direction is kept: for keys, with the norm, what sets the attention scores q·k). Up-left is better on "
    "both counts. A scheme's points, joined in the order of n, form its trajectory (schemes whose means "
    "coincide, such as two that code the keys alike, show as nested markers, the first scheme of the "
    "legend largest, each with its n labels on its own side, or the nearest side that covers no other "
    "label or point); crosses are 95% intervals of the two means (Student t over the independent units: "
    "the trials, or, where the figure says so, clusters of trials such as a real capture's texts; the "
    "tables carry bootstrap intervals; one whose φ interval reaches 0 is cut at the log axis, marked ◄ "
    "there), the faint dots the individual trials. Each scheme has its marker of the other figures "
    "(colours repeat past 10 schemes, markers tell them apart). A hollow marker is a mean the tables mark "
    "‡ (a heavy tail, either tail for an SNR in dB, or too few nonzero values in its φ or SNR): no "
    "interval of it, its cross included, is valid. Grey dashed horizontal lines labelled \"limit, n = …\" "
    "(keys and values): Shannon's rate–distortion limit at n bits per coordinate, the highest pooled SNR "
    "any code of that rate reaches on a Gaussian source of the case's covariance (on Gaussian data a code "
    "of rate n lies above it only by sampling error and, the mean being of per-trial dB, a Jensen term of "
    "order 1/(N·d)). n is the budget: a scheme's stored bits differ (norms and scales add, the tables' "
    "\"bits total\"; a sketch of other size than d moves its \"bits nominal\"), so its point may lie above its "
    "line. A scheme that codes keys and values at different bits (K4V2 at n = 3: keys at 4, values at 2) "
    "faces the limit of its side's bits: its label says so (\"3 (keys at 4)\") and that line is drawn (the "
    "side's bits: those its coder codes each coordinate at). \"Distance to the rate–distortion limit\" "
    "compares each scheme with the limit at the bits it stores. The attention output T has no such line: "
    "it is not coded, its error mixes the key and value errors through the softmax. A trial reconstructed "
    "exactly (SNR = +inf, φ = 0) enters both means as it enters the tables': φ's mean counts its 0, and "
    "the SNR's mean is +inf; such a mean is an upward triangle on a row above the others (\"mean SNR = "
    "+inf\"), at its mean φ, with its n and how many trials were exact, and no cross (no interval of an "
    "infinite mean exists); a budget whose mean φ is 0 (exact on every trial) has no place on the log axis "
    "and is named in the title, not drawn. The faint dots are the finite trials.")


class _NothingToPlace(ValueError):
    """No mean φ > 0 at the place (every trial exact): nothing to draw (the report says so)."""


def _side_bits(frame: pd.DataFrame, place: str) -> pd.Series:
    """Per (scheme, budget) of ``frame`` (one case's: a side's bits may depend on d): the bits per
    coordinate its side ``place`` is coded at where they differ from the budget (NaN elsewhere and for T):
    its coder's, as the sweep records them (``key_bits_nominal``/``value_bits_nominal``); a cell of an
    earlier version infers them: n plus what the side stores above the mean of both (``key_bits_total`` −
    ``bits_total``), if half a bit or more from n (less is overhead: KQV's values store 1/8 bit more)."""
    side = {"k": "key", "v": "value"}.get(place)
    cells = frame.groupby(["scheme", "budget"], sort=False)
    out = pd.Series(np.nan, index=cells.size().index)
    n = out.index.get_level_values("budget")
    used = [f"{side}_bits_total", "bits_total", "bits_nominal"]
    if side is not None and set(used) <= set(frame.columns):
        first = cells[used].first().astype(float)
        guess = (first["bits_nominal"] + first[used[0]] - first["bits_total"]).round(3)
        out = guess.where((guess - n).abs() >= 0.5)
    if side is not None and f"{side}_bits_nominal" in frame.columns:   # first(): skips NaN
        known = cells[f"{side}_bits_nominal"].first().astype(float)
        out = known.where((known - n).abs() > 1e-9).where(known.notna(), out)
    return out


def _with_side_budgets(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each case's trials again at its K{a}V{b} schemes' sides' bits (a and b) as budgets
    (:func:`_side_bits` of that case alone: qjl's key bits m/d differ by d), for nominal_bounds."""
    cols, parts = [*CASE_COLUMNS, "budget", "trial"], [frame]
    for _, case in frame.groupby(list(CASE_COLUMNS), sort=False):   # nominal_bounds' grouping
        extra = sorted({b for place in ("k", "v") for b in _side_bits(case, place).dropna()})
        parts += [case[cols].drop_duplicates("trial").assign(budget=float(b)) for b in extra]
    return pd.concat(parts, ignore_index=True)


def _auto_bounds(sel: pd.DataFrame, place: str, note: str | None) -> tuple[dict[float, float], str | None]:
    """The limit at each budget (and side's bits) of the (one) case in ``sel`` from its analytic spectrum."""
    from kvstats.analysis.theory import nominal_bounds

    if place not in ("k", "v"):
        return {}, note
    try:
        nb = nominal_bounds(_with_side_budgets(sel))
    except (ValueError, TypeError):  # not a synthetic case of kvstats.sample (e.g. a relabelled real one)
        return {}, note
    nb = nb[nb["place"] == place]
    finite = nb[nb["bound_snr_db"].notna()]
    if finite.empty and not nb.empty and note is None:
        note = str(nb["note"].iloc[0])
    return dict(zip(finite["budget"], finite["bound_snr_db"])), note


#: The case columns of a sweep frame, each filled (where a frame lacks it) from the keyword
#: of the same name, else with "-" (unknown: left out of the title; no automatic limit).
_CASE_FILL = ("distribution", "params", "dim", "n_keys")


def _as_sweep_frame(frame: pd.DataFrame, case: Mapping[str, Any], scheme: str | None,
                    budget: float | None) -> tuple[pd.DataFrame, bool]:
    """``frame`` with the sweep columns a :func:`kvstats.error_profile` frame lacks filled in:
    the case (``case``'s values, else "-"), ``scheme`` and ``budget`` (asked for by name when
    missing), ``bits_nominal``/``bits_total`` as NaN (the plane does not read them). Also
    whether a case column was filled with "-". A sweep's frame comes back unchanged."""
    if not isinstance(frame, pd.DataFrame):
        return frame, False            # check_frame names the type
    fills: dict[str, Any] = {}
    for col, value, select in (("scheme", scheme, "schemes"), ("budget", budget, "budgets")):
        if value is None:
            if col not in frame.columns:
                raise ValueError(f"frame has no {col!r} column (a kvstats.error_profile frame?): "
                                 f"pass {col}= to name it, e.g. plot_shannon_phi(profile, "
                                 "scheme='KQV', budget=3)")
        elif col in frame.columns:
            raise ValueError(f"{col}= fills the {col!r} column of a frame without one "
                             f"(kvstats.error_profile's); this frame has one: select with "
                             f"{select}=; received {col}={value!r}")
        else:
            fills[col] = value if col == "scheme" else float(value)
    unknown = False
    for col in _CASE_FILL:
        if col not in frame.columns:
            fills[col] = "-" if case[col] is None else case[col]
            unknown |= case[col] is None
    for col in ("bits_nominal", "bits_total"):
        if col not in frame.columns:
            fills[col] = np.nan
    return (frame.assign(**fills) if fills else frame), unknown


def _known_case_label(row: pd.Series, digits: int = LABEL_DIGITS) -> str:
    """The case as :func:`~kvstats.report.plots._case_label` writes it, without the parts
    not known ("-"), for a profile frame whose case was not (wholly) given."""
    params = "" if row["params"] in ("-", "") else f" ({short_params(row['params'], digits)})"
    parts = [] if row["distribution"] == "-" else [f"{row['distribution']}{params}"]
    parts += [f"{name}={row[col]}" for name, col in (("d", "dim"), ("N", "n_keys")) if row[col] != "-"]
    return ", ".join(parts) or "case not given"


_EDGE = 0.6   # white edge of the mean markers (points): it separates nested markers


def _nested_markers(k: int) -> tuple[list[float], list[tuple[tuple[float, float], str, str]]]:
    """Marker areas (points²) and n-label placements of ``k`` schemes in one Shannon–φ plane.

    Schemes can code a place identically (KV, KQV and turboquant_mse the keys; K4V2's
    keys are KV's at n = 4), so their means coincide. Where one covers an earlier one
    (:func:`_nest`) it is drawn over it as a strictly smaller disk (circles: any other
    shape's corners would cover the ring of the one below; every other mean is drawn at the
    largest size; diameters evenly from 13 points, up to 22 for more schemes,
    down to 4, steps of at most 4 points), so a ring of each shows around the next, and its
    n labels go in a direction of their own around the point (clockwise from the upper
    right, ``k`` directions), beyond the largest disk.

    Examples
    --------
    >>> sizes, places = _nested_markers(2)
    >>> [round(s ** 0.5, 2) for s in sizes], [p[1:] for p in places]
    ([13.0, 9.0], [('left', 'bottom'), ('right', 'top')])
    """
    k = max(int(k), 1)
    big = min(22.0, max(13.0, 4.0 + 3.5 * (k - 1)))
    step = min(4.0, (big - 4.0) / (k - 1)) if k > 1 else 0.0
    diam = big - step * np.arange(k)
    radius = big / 2 + 3.0
    places = [_label_place(_label_angle(i, k), radius) for i in range(k)]
    return [float(d * d) for d in diam], places


def _nest(fig: Any, ax: Any, means: list[tuple[Any, Any, np.ndarray]],
          sizes: list[float]) -> list[tuple[float, float, float]]:
    """Shrink a mean's disk only where it covers an earlier scheme's: where their centres are
    closer than the largest disk's radius, it takes the next smaller size of ``sizes``
    (:func:`_nested_markers`) below the smallest it covers; every other mean keeps the largest,
    one size (a disk's size says nothing else). ``means``: per scheme, in drawing order, its
    mean disks, its hollow (‡) disks or None, and which means are hollow. Returns the disks
    (x, y, diameter in points), positions read after the layout is settled."""
    fig.draw_without_rendering()
    reach = math.sqrt(sizes[0]) / 2 * fig.dpi / 72.0
    earlier: list[tuple[np.ndarray, int]] = []     # (centre in pixels, nesting depth)
    disks = []
    for dots, hollow, marked in means:
        xy = np.asarray(dots.get_offsets(), float)
        centres = ax.transData.transform(xy)
        depth = [1 + max((d for c, d in earlier if np.hypot(*(p - c)) < reach), default=-1)
                 for p in centres]
        area = np.asarray(sizes)[depth]
        dots.set_sizes(area)
        if hollow is not None:
            hollow.set_sizes(area[marked])
        earlier += list(zip(centres, depth))
        disks += [(x, y, math.sqrt(a)) for (x, y), a in zip(xy, area)]
    return disks


def _label_angle(i: int, k: int) -> float:
    """The direction (degrees) of the ``i``-th of ``k`` schemes' n labels: clockwise from 45°."""
    return 45.0 - 360.0 * i / k


def _label_place(angle: float, radius: float) -> tuple[tuple[float, float], str, str]:
    """Offset (points) and alignment of a label ``radius`` points from its point at ``angle``°."""
    t = np.deg2rad(angle)
    c, s = math.cos(t), math.sin(t)
    ha = "left" if c > 0.38 else "right" if c < -0.38 else "center"
    va = "bottom" if s > 0.38 else "top" if s < -0.38 else "center"
    return (radius * c, radius * s), ha, va


def _place_n_labels(fig: Any, ax: Any, labels: list[tuple[float, float, str, Any, float]],
                    disks: list[tuple[float, float, float]], radius: float) -> None:
    """Write each n label in its scheme's direction, or, where it would cover an earlier label
    or another point's disk, in the nearest of eight directions around its point that does not
    (its own direction when none is free). ``labels``: (x, y, text, colour, angle);
    ``disks``: (x, y, diameter in points). Positions are read after the layout is settled."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0
    centres = ax.transData.transform([(x, y) for x, y, _ in disks]) if disks else np.empty((0, 2))
    radii = np.array([d / 2 * px for *_, d in disks])
    placed = []

    def draw(x: float, y: float, text: str, color: Any, angle: float) -> tuple[Any, Any]:
        (dx, dy), ha, va = _label_place(angle, radius)
        ann = ax.annotate(text, (x, y), xytext=(dx, dy), ha=ha, va=va, textcoords="offset points",
                          fontsize=7, color=color, zorder=6,
                          bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.6})
        return ann, ann.get_window_extent(renderer)

    for x, y, text, color, angle in labels:
        foreign = ~np.all(np.isclose(centres, ax.transData.transform((x, y))), axis=1)
        cx, cy, r = centres[foreign, 0], centres[foreign, 1], radii[foreign]
        # the scheme's own direction first, then the others by how far they turn from it
        for attempt in sorted((angle + 45.0 * j for j in range(8)),
                              key=lambda a: abs((a - angle + 180.0) % 360.0 - 180.0)):
            ann, box = draw(x, y, text, color, attempt)
            near = np.hypot(np.clip(cx, box.x0, box.x1) - cx, np.clip(cy, box.y0, box.y1) - cy)
            if not (np.any(near < r) or any(box.overlaps(b) for b in placed)):
                break
            ann.remove()
        else:                                   # no free direction: its own
            ann, box = draw(x, y, text, color, angle)
        placed.append(box)


def _mean_se(x: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
    """The standard error of the mean of ``x`` over all its values, with the clusters of
    ``labels`` as the independent units (cluster-robust CR1: each cluster's deviation is
    its sum minus its share of the mean, ``√(G/(G−1) Σ_g (S_g − x̄ n_g)²) / n``, as
    :func:`kvstats.models.summarize_quality`'s ``se_kl_text``), and the number G of
    clusters. One value per cluster: ``sd/√n``. NaN for G < 2 or an infinite mean."""
    _, sums, sizes = _cluster_sums(x, labels, "cluster")
    g = sums.size
    if g < 2:
        return np.nan, g
    with np.errstate(invalid="ignore"):      # inf − inf for an infinite SNR: NaN, no cross
        dev = sums - x.mean() * sizes
        return float(np.sqrt(g / (g - 1) * np.sum(dev ** 2)) / x.size), g


def _cell_means(sel: pd.DataFrame, phi: str, snr: str, cluster: str | None = None) -> pd.DataFrame:
    """Per (scheme, budget): the means of ``phi`` and ``snr`` over every trial, as
    :func:`~kvstats.analysis.summary_table` takes them (an exact trial's SNR of +inf makes
    the mean +inf, its φ of 0 counts), their standard errors (``sx``, ``sy``) with the
    values of column ``cluster`` as the independent units (None: each trial;
    :func:`_mean_se`) and the number of units (``units``), the count of trials, how many
    were exact (SNR = +inf) and the tables' ‡ (``marked``, :func:`ci_reliable` of all trials)."""
    def cell(d: pd.DataFrame) -> pd.Series:
        x, y = d[phi].to_numpy(np.float64), d[snr].to_numpy(np.float64)
        labels = np.arange(len(d)) if cluster is None else d[cluster].to_numpy()
        (sx, units), (sy, _) = _mean_se(x, labels), _mean_se(y, labels)
        return pd.Series({"x": float(np.mean(x)), "y": float(np.mean(y)), "sx": sx, "sy": sy,
                          "units": units, "n": y.size,
                          "exact": int(np.isposinf(y).sum()),
                          "marked": not ci_reliable(x, y, metrics=[phi, snr])})
    cols = [phi, snr] if cluster is None else [phi, snr, cluster]
    return sel.groupby(["scheme", "budget"], sort=False)[cols].apply(cell)


def _unplaced_text(cells: pd.DataFrame) -> str:
    """The title's line naming the (scheme, budget) cells whose mean φ is 0 (exact on every
    trial, or φ = 0 on every trial): the log axis has no place for them ("" for none)."""
    if cells.empty:
        return ""
    parts = [f"{scheme} at n = {', '.join(f'{b:g}' for b in grp.index.get_level_values('budget'))}"
             for scheme, grp in cells.groupby(level="scheme", sort=False)]
    what = ("exact on every trial (SNR = +inf, φ = 0)" if (cells["exact"] == cells["n"]).all()
            else "mean φ = 0")
    return f"not drawn (no place on the log axis), {what}: {'; '.join(parts)}"


def _draw_infinite_means(ax: Any, infinite: list[tuple[int, str, pd.DataFrame]],
                         palette: dict[str, Any], size: float, n_labels: list, k: int) -> list:
    """Draw the means of SNR +inf (some trial exact) as upward triangles at their mean φ on a
    row above every other point and limit line, labelled "mean SNR = +inf", the y axis held
    there; each one's n label says how many trials were exact ("n: k/N exact"). Returns the
    entries for :func:`_nest` (so nested triangles shrink like disks)."""
    lo, hi = ax.get_ylim()
    span = hi - lo
    row = hi + 0.08 * span
    ticks = [t for t in ax.get_yticks() if lo <= t <= hi]   # no dB tick on the +inf row
    ax.set_yticks(ticks)
    ax.set_ylim(lo, hi + 0.14 * span)
    ax.axhline(hi + 0.03 * span, color="0.6", lw=0.6, ls=":", zorder=2)
    ax.annotate("mean SNR = +inf", (1.0, row), xycoords=("axes fraction", "data"), xytext=(-3, 0),
                textcoords="offset points", ha="right", va="center", fontsize=6.5, color="0.3")
    out = []
    for i, scheme, m in infinite:
        tri = ax.scatter(m["x"], np.full(len(m), row), s=size, marker="^", color=palette[scheme],
                         edgecolors="white", linewidths=_EDGE, zorder=5 + 0.01 * i,
                         label=f"_{scheme}: mean SNR = +inf")
        out.append((tri, None, np.zeros(len(m), bool)))
        n_labels += [(r["x"], row, f"{b:g}: {int(r['exact'])}/{int(r['n'])} exact", palette[scheme],
                      _label_angle(i, k)) for b, r in m.iterrows()]
    return out


def plot_shannon_phi(frame: pd.DataFrame, place: str = "k", *, distribution: str | None = None,
                     params: str | None = None, dim: int | None = None, n_keys: int | None = None,
                     budgets: Sequence[float] | None = None, schemes: Sequence[str] | None = None,
                     palette: dict[str, Any] | None = None, max_points: int = 400,
                     seed: int = 0, bounds: Mapping[float, float] | str | None = "auto",
                     bound_note: str | None = None, clouds: bool = True,
                     scheme: str | None = None, budget: float | None = None,
                     cluster: str | None = None) -> "matplotlib.figure.Figure":
    """The Shannon–φ plane of one case: each scheme a trajectory over budgets, the limit beside it.

    One axes for a single case (select it with ``distribution``, ``params``, ``dim``,
    ``n_keys`` when the frame holds several): y is the mean over trials of the SNR
    (dB): for keys and values the trial's energy-pooled SNR ``snr_<place>_pooled``, what
    the limit bounds (a frame without it on every row: ``snr_<place>``, the mean of
    per-vector dB, which a scheme keeping some vectors nearly exact lifts far above its
    coded vectors' SNR; the tables' rule, :func:`~kvstats.analysis.frame.reported_pooled_snrs`),
    for the attention output ``snr_t``; x the mean direction error φ (``phi_<place>``, radians, log
    scale, since φ halves with every bit while the SNR grows linearly in dB); up-left is
    better. Each scheme's means at its budgets are joined in budget order and labelled
    with n (coinciding means stay visible: each scheme's disk is smaller than the one
    drawn before it, its labels on a side of their own, or the nearest free one:
    :func:`_place_n_labels`); 95% Student t intervals of both means are drawn as crosses,
    the trials as the independent units or the clusters of ``cluster``
    (a mean whose φ or SNR values fail :func:`~kvstats.analysis.intervals.ci_reliable`, the
    tables' ‡, is a hollow disk: its cross is not a valid interval); the
    trials show as faint dots under them. The means are the tables' (those of
    :func:`~kvstats.analysis.summary_table`), over every trial: an exact trial (SNR = +inf,
    φ = 0) counts its 0 in φ's mean and makes the SNR's mean +inf, drawn as an upward
    triangle on a row "mean SNR = +inf" above the others, labelled with its n and its count
    of exact trials; a budget whose mean φ is 0 (exact on every trial) is named in the title,
    as the log axis has no place for it. ``bounds`` (budget → SNR dB, e.g. from
    :func:`kvstats.analysis.theory.nominal_bounds`) draws the rate–distortion limit at
    each n a drawn point faces (a K{a}V{b} side: its own bits, in its label) as a dashed horizontal
    line. :data:`SHANNON_PHI_NOTE` explains the plane.

    A frame of :func:`kvstats.error_profile` (one scheme's trials, without the sweep's
    columns) is drawn as it is with ``scheme=`` and ``budget=`` naming its point (or its
    own ``budget`` column, for several budgets concatenated); ``distribution``,
    ``params``, ``dim`` and ``n_keys`` then name its case (the title, and the automatic
    limit of a synthetic case).

    Parameters
    ----------
    frame : DataFrame
        Per-trial frame of :func:`kvstats.run_sweep`, or of :func:`kvstats.error_profile`
        (with ``scheme`` and ``budget``).
    place : {"k", "v", "t"}
        Keys, values or the attention output.
    distribution, params, dim, n_keys : optional
        Case selection; for a frame without these columns (a profile), its case, each
        filled in as given (not given: unknown, "-", and no automatic limit).
    budgets, schemes : sequence, optional
        Subsets to draw (default: all, in frame order).
    palette : dict, optional
        Scheme → colour (default :func:`scheme_palette`).
    max_points : int
        At most this many trials per scheme and budget are drawn as dots (a seeded
        subsample) so that the SVG stays small; means are computed on all trials.
    seed : int
        Seed of that subsample.
    bounds : mapping, "auto" or None
        Budget n → the limit's SNR in dB at n bits per coordinate. ``"auto"`` (the
        default): for a synthetic case, from its analytic spectrum
        (:func:`kvstats.analysis.theory.nominal_bounds`, one query per trial); none for a
        real case (its capture is not in the frame: pass them). None: no lines.
    bound_note : str, optional
        Why there is no limit (keys and values, when ``bounds`` is empty), written in
        the plot.
    clouds : bool
        Draw the per-trial dots.
    scheme : str, optional
        The scheme label of a frame without a ``scheme`` column (a profile); a ValueError
        for a frame with one (select with ``schemes``).
    budget : float, optional
        The budget n of a frame without a ``budget`` column (a profile at one n); a
        ValueError for a frame with one (select with ``budgets``).
    cluster : str, optional
        A column of ``frame`` naming each trial's independent unit (integer or string
        labels), e.g. ``"text"`` for trials of a real capture, whose layers and heads read
        one text's tokens and are correlated. The crosses then take the clusters as units:
        the cluster-robust (CR1) standard error of each mean over all trials and a t
        quantile with G − 1 degrees of freedom for G clusters (with one trial per cluster,
        the trial interval). None (the default): every trial is a unit, as a synthetic
        sweep's independent draws are; for correlated trials that interval is too narrow.
        The means and dots are the trials' either way.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import kvstats
    >>> res = kvstats.run_sweep({"schemes": ["KQV", "QKQV"], "budgets": [3, 4],
    ...     "distributions": ["gaussian"], "dims": [32], "n_keys": [64], "n_trials": 10},
    ...     executor="serial", progress=False)
    >>> fig = kvstats.plot_shannon_phi(res.frame, place="k", bounds={3.0: 18.06, 4.0: 24.08})
    >>> len(fig.axes), fig.axes[0].get_xscale()
    (1, 'log')

    One scheme's profile at one budget, straight from :func:`kvstats.error_profile`:

    >>> trials = kvstats.sample("gaussian", n_trials=10, n_keys=64, dim=32, seed=0)
    >>> coder = kvstats.make_scheme("KQV", 3, 32, seed=1, draws=10)
    >>> profile = kvstats.error_profile(trials, *coder.roundtrip(trials.K, trials.V))
    >>> fig = kvstats.plot_shannon_phi(profile, "k", scheme="KQV", budget=3,
    ...     distribution="gaussian", dim=32, n_keys=64)
    >>> fig.axes[0].get_title()
    'Shannon–φ plane, keys K: gaussian, d=32, N=64'

    Trials in clusters (here pairs sharing a made-up text): the crosses take the texts as units.

    >>> fig = kvstats.plot_shannon_phi(profile.assign(text=profile["trial"] // 2), "k", scheme="KQV",
    ...     budget=3, cluster="text")
    """
    place = check_choice(place, "place", list(_PLACES))
    if cluster is not None and not (isinstance(cluster, str) and isinstance(frame, pd.DataFrame)
                                    and cluster in frame.columns and frame[cluster].notna().all()):
        columns = f" (columns: {list(frame.columns)})" if isinstance(frame, pd.DataFrame) else ""
        raise ValueError(f"cluster must be None or the name of a column of frame without missing "
                         f"values (each trial's independent unit, e.g. 'text'); received {cluster!r}{columns}")
    frame, unknown_case = _as_sweep_frame(frame, dict(distribution=distribution, params=params,
                                                      dim=dim, n_keys=n_keys), scheme, budget)
    sel = select_case(frame, distribution, params, dim, n_keys)
    if schemes is not None:
        sel = sel[sel["scheme"].isin(schemes)]
    if budgets is not None:
        sel = sel[sel["budget"].isin(budgets)]
    if sel.empty:
        raise ValueError(f"no rows left after selecting schemes={schemes!r} and budgets={budgets!r}")
    snr, phi = f"snr_{place}", f"phi_{place}"
    # what the limit bounds (and not lifted by near-exact vectors), where the tables report it:
    # a column some rows lack would drop those schemes from the plane without a word
    if f"{snr}_pooled" in reported_pooled_snrs(frame, stacklevel=3):
        snr = f"{snr}_pooled"
    # the means are the tables' (summary_table), over every trial: an exact trial (SNR = +inf,
    # φ = 0) makes the SNR's mean +inf and counts its 0 in φ's; dropping it would plot
    # another quantity than the tables print
    stats_ = _cell_means(sel, phi, snr, cluster)
    placed = stats_["x"] > 0            # a mean φ of 0 (exact on every trial): not on a log axis
    if not placed.any():
        raise _NothingToPlace(f"no budget has a mean φ > 0 at place {place!r} (every trial an exact "
                         "reconstruction, SNR = +inf): nothing to place on the log axis")
    unplaced = _unplaced_text(stats_[~placed])
    sel = sel[sel.set_index(["scheme", "budget"]).index.isin(stats_[placed].index)]
    palette = palette or scheme_palette(sel["scheme"])
    sides = _side_bits(sel, place).reindex(stats_.index)   # K4V2's keys face the limit at 4, not n
    faced = sides.fillna(pd.Series(stats_.index.get_level_values("budget"), index=stats_.index))
    if isinstance(bounds, str):
        check_choice(bounds, "bounds", ["auto"])
        bounds, bound_note = _auto_bounds(sel, place, bound_note)
    # only limits a drawn point faces, whoever passes them (identity's n = 32 squeezed the rest)
    bounds = {b: v for b, v in (bounds or {}).items() if float(b) in set(faced[placed])}
    from scipy import stats as sps
    q_all = sps.t.ppf(0.975, np.maximum(stats_["units"].to_numpy(np.float64) - 1, 1))
    low_all = (stats_["x"] - q_all * stats_["sx"].fillna(0.0))[placed & np.isfinite(stats_["y"])]
    # a φ interval reaching 0 is cut at the axis's left end, marked ◄ (as the bits figures' ▼)
    ends = [stats_["x"][placed], low_all[low_all > 0], sel[phi][sel[phi] > 0] if clouds else []]
    floor = float(np.min(np.concatenate(ends))) / 2.0 if (low_all <= 0).any() else None
    _style()
    fig, ax = plt.subplots(figsize=(7.4, 5.0), constrained_layout=True)
    rng = np.random.default_rng(seed)
    # schemes that coincide (KV, KQV and turboquant_mse code keys alike) stay visible: drawn
    # at one size, a mean shrinks only where it covers an earlier scheme's (_nest)
    k = sel["scheme"].nunique()
    sizes, _ = _nested_markers(k)
    any_marked = False
    n_labels, means = [], []    # the n labels written last, where they cover no other label or disk
    infinite = []               # (scheme index, scheme, its budgets whose mean SNR is +inf)
    for i, (scheme, grp) in enumerate(sel.groupby("scheme", sort=False)):
        color = palette[scheme]
        if clouds:   # the finite trials: an exact one has no point on the plane
            pts = grp[np.isfinite(grp[snr]) & np.isfinite(grp[phi]) & (grp[phi] > 0)]
            pts = pts.groupby("budget", sort=False, group_keys=False).apply(
                lambda g: g if len(g) <= max_points else
                g.iloc[np.sort(rng.choice(len(g), max_points, replace=False))])
            ax.scatter(pts[phi], pts[snr], s=4, alpha=0.15, color=color, linewidths=0, zorder=1,
                       rasterized=True)
        m = stats_.loc[scheme].loc[sorted(grp["budget"].unique())]
        side = sides.loc[scheme].reindex(m.index)
        marker = _scheme_style(palette, scheme)["marker"]   # colours repeat past 10 schemes
        # t over the units (the trials, or the clusters): no cross for fewer than two
        q = sps.t.ppf(0.975, np.maximum(m["units"].to_numpy(np.float64) - 1, 1))
        hx, hy = q * m["sx"].fillna(0.0), q * m["sy"].fillna(0.0)
        # the scheme's line style of every figure (by its place in the palette), for greyscale;
        # an infinite mean breaks the line (matplotlib leaves non-finite points out)
        ax.plot(m["x"], m["y"], color=color, lw=1.4, ls=_scheme_style(palette, scheme)["ls"],
                zorder=3 + 0.01 * i)
        inf = np.isposinf(m["y"].to_numpy())
        if inf.any():
            infinite.append((i, scheme, m[inf]))
        m, hx, hy, side = m[~inf], hx[~inf].to_numpy(), hy[~inf], side[~inf]
        cut = (m["x"] - hx <= 0).to_numpy() if floor is not None else np.zeros(len(m), bool)
        ax.errorbar(m["x"], m["y"], xerr=[np.where(cut, m["x"] - (floor or 0.0), hx), hx], yerr=hy,
                    ls="none", color=color, elinewidth=1.0, capsize=2, zorder=4)
        if cut.any():
            ax.plot(np.full(cut.sum(), floor), m["y"][cut], ls="none", marker="<", ms=4, color=color,
                    zorder=4, label=f"_{scheme}: φ interval cut at the axis")
        dots = ax.scatter(m["x"], m["y"], s=sizes[0], marker=marker, color=color,
                          edgecolors="white", linewidths=_EDGE, zorder=5 + 0.01 * i, label=scheme)
        # the tables' ‡ (heavy tail, few nonzero values): no interval of the mean is valid
        marked = m["marked"].to_numpy(bool)
        hollow = None
        if marked.any():
            hollow = ax.scatter(m.loc[marked, "x"], m.loc[marked, "y"], s=sizes[0], marker=marker,
                                facecolors="white", edgecolors=color, linewidths=1.5, zorder=5 + 0.01 * i)
            any_marked = True
        means.append((dots, hollow, marked))
        n_labels += [(r["x"], r["y"], f"{b:g}" + ("" if np.isnan(at) else f" ({_PLACES[place].split()[0]} at {at:g})"),
                      color, _label_angle(i, k)) for (b, r), at in zip(m.iterrows(), side)]
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    from matplotlib.lines import Line2D
    extra = []
    if place in ("k", "v") and bounds:
        x_hi = ax.get_xlim()[1]
        for b, level in sorted(bounds.items()):
            if not np.isfinite(level):
                continue
            ax.axhline(level, color="0.35", ls="--", lw=0.8, zorder=2)
            ax.annotate(f"limit, n = {b:g}", (x_hi, level), xytext=(-3, 2), textcoords="offset points",
                        ha="right", va="bottom", fontsize=6.5, color="0.3")
        extra.append((Line2D([], [], color="0.35", ls="--", lw=0.8),
                      "rate–distortion limit\nat nominal n bits/coord\n(Gaussian of the\ncase's covariance)"))
    if any_marked:
        extra.append((Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.3", mew=1.5),
                      "‡ (heavy tail or few\nnonzero values):\nno valid interval"))
    if floor is not None and any(line.get_marker() == "<" for line in ax.get_lines()):
        extra.append((Line2D([], [], ls="none", marker="<", ms=4, color="0.3"),
                      "φ interval reaches 0:\ncut at the axis"))
    if infinite:
        means += _draw_infinite_means(ax, infinite, palette, sizes[0], n_labels, k)
        extra.append((Line2D([], [], ls="none", marker="^", ms=6, color="0.3"),
                      "mean SNR = +inf\n(some trials exact:\nk/N labelled)"))
    import textwrap
    subtitle = ""
    if place in ("k", "v") and not bounds and bound_note:
        subtitle = "\n" + textwrap.fill(f"no rate–distortion limit drawn: {bound_note}", 110)
    if unplaced:
        subtitle += "\n" + textwrap.fill(unplaced, 110)
    ax.annotate("better", xy=(0.03, 0.2), xytext=(0.13, 0.05), xycoords="axes fraction",
                textcoords="axes fraction", fontsize=8, color="0.25", ha="center",
                arrowprops={"arrowstyle": "->", "color": "0.25", "lw": 1.0})
    ax.set_xlabel(f"direction error {metric_def(phi).axis_label}, mean over trials (log scale)")
    ax.set_ylabel(f"{metric_def(snr).axis_label}, mean over trials")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="none", marker="o", ms=3, color="0.5", alpha=0.5)] + [h for h, _ in extra]
    labels += ["trials"] + [lab for _, lab in extra]
    legend = fig.legend(handles, labels, loc="outside right center", title="scheme (labels: n)", fontsize=8)
    for handle in legend.legend_handles[:k]:   # one size there: the nested disks' smallest is 4 points
        handle.set_sizes([70.0])
    case_label = (_known_case_label if unknown_case else _case_label)(sel.iloc[0], LABEL_DIGITS)
    ax.set_title(f"Shannon–φ plane, {_PLACES[place]}: {case_label}{subtitle}",
                 fontsize=10 if not subtitle else 8.5)
    disks = _nest(fig, ax, means, sizes)
    _place_n_labels(fig, ax, n_labels, disks, math.sqrt(sizes[0]) / 2 + 3.0)   # beyond the largest disk
    return fig
