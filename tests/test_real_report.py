"""experiments/real_report.py: the paired KQV vs QKQV table of the profile section.

The reference is kvstats.stats.sign_test applied by hand to the matched units of a fake
profile frame (rows shuffled, so matching by (text, layer, head) is exercised).
"""

import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

from kvstats.stats import adjust_pvalues, sign_test


@pytest.fixture(scope="module")
def report(load_experiment):
    return load_experiment("real_report")


def fake_profile(seed: int = 0) -> pd.DataFrame:
    """5 texts x 2 layers x 2 heads, budgets 2 and 4, KQV / QKQV / KV, rows shuffled."""
    rng = np.random.default_rng(seed)
    idx = pd.MultiIndex.from_product([[2, 4], range(5), range(2), range(2)],
                                     names=["bits", "text", "layer", "head"]).to_frame(index=False)
    base = rng.normal(size=len(idx))
    frames = []
    for scheme, shift in (("KQV", -0.3), ("QKQV", 0.0), ("KV", 5.0)):
        f = idx.copy()
        f["scheme"] = scheme
        f["kl"] = base + shift + rng.normal(size=len(idx))
        # ties: recall equal on half the trials
        f["recall_at_5"] = np.where(np.arange(len(idx)) % 2 == 0, 0.8, rng.uniform(size=len(idx)))
        frames.append(f)
    return pd.concat(frames).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def reference(prof: pd.DataFrame, unit: list[str], metric: str, bits: int):
    g = prof[prof.bits == bits]
    a = g[g.scheme == "KQV"].groupby(unit)[metric].mean().sort_index()
    b = g[g.scheme == "QKQV"].groupby(unit)[metric].mean().sort_index()
    return a.to_numpy(), b.to_numpy()


@pytest.mark.parametrize("unit,keys", [("trial", ["text", "layer", "head"]), ("text", ["text"])])
def test_sign_test_on_matched_units(report, unit, keys):
    prof = fake_profile()
    t = report.kqv_qkqv_tests(prof, unit, ("kl", "recall_at_5"))
    assert len(t) == 4
    for r in t.itertuples():
        x, y = reference(prof, keys, r.metric, r.bits)
        st = sign_test(x, y)
        assert r.n == len(x) == (20 if unit == "trial" else 5)
        assert r.sign_p == st.pvalue
        assert (r.dominance, r.dom_low, r.dom_high) == (st.dominance, st.dominance_low, st.dominance_high)
        assert r.n_kqv_lower == st.n_negative and r.frac_kqv_lower == st.n_negative / len(x)
        assert r.mean_kqv == pytest.approx(x.mean()) and r.mean_qkqv == pytest.approx(y.mean())
    np.testing.assert_array_equal(t.sign_p_holm, adjust_pvalues(t.sign_p.to_numpy(), method="holm")
                                  .pvalues_adjusted)


def test_rounding_only_differences_are_zero_differences(report):
    # A trial's recall@5 is a mean of k/5 over its query heads: (0.8 + 1 + 0.6)/3 and
    # (1 + 0.6 + 0.8)/3 differ in the last bit. Such pairs are ties, as in the report
    # (kvstats.analysis.resolution.rounding_ties); reference: the sign test of the exact
    # differences (here -1/15 on 6 trials, +1/15 on 2, 0 on the rest).
    prof = fake_profile()
    a = (0.8 + 1 + 0.6) / 3
    b = (1 + 0.6 + 0.8) / 3
    assert a != b                                                         # the case occurs
    q = (prof.scheme == "QKQV").to_numpy()
    k = (prof.scheme == "KQV").to_numpy()
    prof["recall_at_5"] = np.where(q, b, a)
    rank = prof.groupby("scheme").cumcount().to_numpy()                   # 0..39 within a scheme
    prof.loc[k & (rank < 6), "recall_at_5"] = a - 1 / 15
    prof.loc[k & (rank >= 6) & (rank < 8), "recall_at_5"] = a + 1 / 15
    t = report.kqv_qkqv_tests(prof, "trial", ("recall_at_5",))
    n_lower = t.set_index("bits").n_kqv_lower
    by_bits = prof[k].assign(r=rank[k]).groupby("bits").r.agg(lambda r: ((r < 6).sum(), ((r >= 6) & (r < 8)).sum()))
    for bits, (lo, hi) in by_bits.items():
        st = sign_test(np.r_[-np.ones(lo), np.ones(hi), np.zeros(20 - lo - hi)], np.zeros(20))
        assert n_lower[bits] == lo
        assert t.set_index("bits").sign_p[bits] == st.pvalue


def test_direction_and_pairing(report):
    """KQV lower on every trial: dominance -1 and p = 2^(1-n); unpaired shuffling would not give it."""
    prof = fake_profile()
    kqv = prof.scheme == "KQV"
    prof.loc[kqv, "kl"] = prof.loc[kqv].merge(prof[prof.scheme == "QKQV"], on=["bits", "text", "layer", "head"],
                                              how="left", suffixes=("", "_q"))["kl_q"].to_numpy() - 1e-3
    t = report.kqv_qkqv_tests(prof, "trial", ("kl",))
    assert (t.dominance == -1).all() and (t.n_kqv_lower == 20).all()
    np.testing.assert_allclose(t.sign_p, 2.0 ** (1 - 20))


def test_bad_input(report):
    prof = fake_profile()
    with pytest.raises(ValueError, match="unit"):
        report.kqv_qkqv_tests(prof, "layer")
    with pytest.raises(ValueError, match="columns"):
        report.kqv_qkqv_tests(prof.drop(columns="head"), "trial", ("kl",))
    with pytest.raises(ValueError, match="more than one row"):
        report.kqv_qkqv_tests(pd.concat([prof, prof.iloc[:1]]), "trial", ("kl",))


def fake_positions(seed: int = 0) -> pd.DataFrame:
    """Configs a, b (8 texts x 5 positions) and p (texts 0..4 only, as the peers' fewer texts), shuffled."""
    rng = np.random.default_rng(seed)
    frames = []
    for config, shift, texts in (("a", -0.4, range(8)), ("b", 0.0, range(8)), ("p", 0.3, range(5))):
        idx = pd.MultiIndex.from_product([texts, range(5)], names=["text", "position"]).to_frame(index=False)
        idx["config"] = config
        idx["kl"] = np.exp(rng.normal(size=len(idx)) + shift + 0.5 * idx.text)
        frames.append(idx)
    return pd.concat(frames).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def test_e2e_sign_tests_against_sign_test_by_hand(report):
    pos = fake_positions()
    pairs = [("a", "b"), ("a", "p"), ("p", "b")]
    t = report.e2e_sign_tests(pos, pairs)
    assert [(r.a, r.b) for r in t.itertuples()] == pairs
    for r in t.itertuples():
        # per-text means of the texts both ran, matched by text (index-aligned)
        x = pos[pos.config == r.a].groupby("text").kl.mean()
        y = pos[pos.config == r.b].groupby("text").kl.mean()
        x, y = x.align(y, join="inner")
        st = sign_test(x.to_numpy(), y.to_numpy())
        assert r.n == len(x) == (8 if "p" not in (r.a, r.b) else 5)
        assert r.sign_p == st.pvalue and r.n_a_lower == st.n_negative
        assert (r.dominance, r.dom_low, r.dom_high) == (st.dominance, st.dominance_low, st.dominance_high)
        assert r.mean_a == pytest.approx(x.mean()) and r.mean_b == pytest.approx(y.mean())
        m = pos[pos.config == r.a].merge(pos[pos.config == r.b], on=["text", "position"])
        assert r.n_positions == len(m) and r.frac_pos_a_lower == pytest.approx(np.mean(m.kl_x < m.kl_y))
    np.testing.assert_array_equal(t.sign_p_holm, adjust_pvalues(t.sign_p.to_numpy(), method="holm")
                                  .pvalues_adjusted)


def test_e2e_sign_tests_pairs_by_text(report):
    """a lower than b on every text by a margin smaller than the spread between texts: the
    paired test gives the full 2^(1-n); an unpaired or mis-matched one would not."""
    pos = fake_positions()
    b = pos[pos.config == "b"].copy()
    a = b.assign(config="a", kl=b.kl - 1e-3)
    t = report.e2e_sign_tests(pd.concat([a, b]).sample(frac=1.0, random_state=1), [("a", "b")])
    assert t.n_a_lower.iloc[0] == 8 and t.dominance.iloc[0] == -1
    assert t.sign_p.iloc[0] == 2.0 ** (1 - 8) and t.frac_pos_a_lower.iloc[0] == 1.0


def test_e2e_sign_tests_bad_input(report):
    pos = fake_positions()
    with pytest.raises(ValueError, match="columns"):
        report.e2e_sign_tests(pos.drop(columns="position"), [("a", "b")])
    with pytest.raises(ValueError, match="more than one row"):
        report.e2e_sign_tests(pd.concat([pos, pos.iloc[:1]]), [("a", "b")])
    with pytest.raises(ValueError, match="no rows"):
        report.e2e_sign_tests(pos, [("a", "zz")])


# -- the formats family (deployed formats against the kvstats rows nearest in bits) ------------

def formats_positions(n_texts: int = 7, seed: int = 0) -> pd.DataFrame:
    """Every configuration of the formats family, n_texts x 3 positions, shuffled; texts differ
    by more than configurations (a factor e^{0.4 text} against e^{0.05 i}), so only matching by
    text sees the configurations' order."""
    rng = np.random.default_rng(seed)
    configs = sorted({c for pair in FORMATS_PAIRS for c in pair})
    frames = []
    for i, config in enumerate(configs):
        idx = pd.MultiIndex.from_product([range(n_texts), range(3)], names=["text", "position"]).to_frame(index=False)
        idx["config"] = config
        idx["kl"] = np.exp(0.4 * idx.text + 0.05 * i + 0.1 * rng.normal(size=len(idx)))
        frames.append(idx)
    return pd.concat(frames).sample(frac=1.0, random_state=seed).reset_index(drop=True)


FORMATS_PAIRS = ([(f, b) for f in ("q4_0", "mxfp4", "nvfp4") for b in ("turboquant_mse@4", "KQV@4")]
                 + [(f, "KQV@5") for f in ("q4_1", "q5_0", "q5_1")]
                 + [(f, b) for f in ("q8_0", "fp8_e4m3", "fp8_e5m2") for b in ("turboquant_mse@8", "KQV@8")])


def test_formats_family_is_the_paired_sign_test(report):
    """Each formats row: the sign test on per-text means matched by text, the paired 95% Fieller
    interval of the ratio, Holm over the 15 rows of this family alone; the families whose
    configurations did not run are named, not tested."""
    from kvstats.stats.equivalence import tost_ratio

    assert report.E2E_FAMILIES["formats"] == FORMATS_PAIRS   # the page's 15 pairs, in order
    pos = formats_positions()
    tests, lacking = report.e2e_family_tests(pos)
    assert sorted(tests) == ["formats"] and sorted(lacking) == ["main", "peers"]
    f = tests["formats"]
    assert [(r.a, r.b) for r in f.itertuples()] == FORMATS_PAIRS
    for r in f.itertuples():
        x = pos[pos.config == r.a].groupby("text").kl.mean().sort_index().to_numpy()
        y = pos[pos.config == r.b].groupby("text").kl.mean().sort_index().to_numpy()
        st = sign_test(x, y)
        assert r.n == 7 and r.n_positions == 21
        assert r.sign_p == st.pvalue and r.n_a_lower == st.n_negative
        assert (r.dominance, r.dom_low, r.dom_high) == (st.dominance, st.dominance_low, st.dominance_high)
        assert r.ratio == pytest.approx(x.mean() / y.mean())
        ci95 = tost_ratio(x, y, margin=(0.5, 2.0), alpha=0.025, alternative="equivalence", paired=True)
        ci90 = tost_ratio(x, y, margin=(0.5, 2.0), alpha=0.05, alternative="equivalence", paired=True)
        assert (r.ratio_low, r.ratio_high) == pytest.approx((ci95.low, ci95.high), rel=1e-12)
        assert r.ratio_low < ci90.low < r.ratio < ci90.high < r.ratio_high   # the 95%, not the 90%, interval
    np.testing.assert_array_equal(f.sign_p_holm, adjust_pvalues(f.sign_p.to_numpy(), method="holm")
                                  .pvalues_adjusted)


def test_formats_family_pairs_by_text_and_ignores_other_families(report):
    """a below b on every text by less than the spread between texts: p = 2^(1-n) for that
    row, found only by matching texts; adding the main family's configurations (tested as a
    family of their own) leaves the formats rows as they were."""
    pos = formats_positions()
    q5 = pos[pos.config == "KQV@5"]
    pos = pd.concat([pos[pos.config != "q5_1"], q5.assign(config="q5_1", kl=q5.kl * 0.99)])
    f = report.e2e_family_tests(pos)[0]["formats"]
    row = f[(f.a == "q5_1") & (f.b == "KQV@5")].iloc[0]
    assert row.n_a_lower == 7 and row.dominance == -1 and row.sign_p == 2.0 ** (1 - 7)
    main = {c for pair in report.E2E_FAMILIES["main"] for c in pair}
    extra = pd.concat([pos[pos.config == "KQV@4"].assign(config=c) for c in sorted(main - set(pos.config))])
    tests, lacking = report.e2e_family_tests(pd.concat([pos, extra]))
    assert sorted(tests) == ["formats", "main"] and sorted(lacking) == ["peers"]
    pd.testing.assert_frame_equal(tests["formats"], f)


def test_formats_table_caption_states_the_family_resolution(report):
    """The caption prints the smallest Holm p this family can reach (15 tests: 15 * 2^(1-n))
    and says whether a row can reach 0.05 at all."""
    summary = pd.DataFrame({"scheme": [a for a, _ in FORMATS_PAIRS], "bytes_per_token": 6480.0})
    for n_texts, reachable in ((7, False), (12, True)):
        f = report.e2e_family_tests(formats_positions(n_texts))[0]["formats"]
        text = report.formats_table(summary, f)
        assert f"in this family {15 * 2.0 ** (1 - n_texts):.2g}" in text
        assert ("no row can reach α = 0.05" in text) is not reachable
        assert "| ratio_low | ratio_high |" in text and "mw_p" not in text and "wilcoxon" not in text


def test_section_e2e_reads_tests_from_positions(report, tmp_path):
    """The page's formats table comes from the positions; e2e_tests.csv's rows with an empty
    ``test`` (the two-sample tests of older runs) are not read."""
    pos = formats_positions()
    pos.to_csv(tmp_path / "e2e_positions.csv.gz", index=False)
    configs = sorted(set(pos.config))
    pd.DataFrame({"scheme": configs, "bits": np.nan, "n_texts": 7, "n_positions": 21, "mean_kl": 0.1,
                  "bytes_per_token": 6480.0}).to_csv(tmp_path / "e2e_summary.csv", index=False)
    pd.DataFrame({"a": ["q4_0"], "b": ["KQV@4"], "unit": ["text"], "mw_p_holm": [1e-9], "family": ["formats"],
                  "test": [np.nan]}).to_csv(tmp_path / "e2e_tests.csv", index=False)
    page = report.section_e2e(str(tmp_path), None)
    f = report.e2e_family_tests(pos)[0]["formats"]
    assert report.md(f[report.E2E_TEST_COLS[:6] + ["ratio_low", "ratio_high"] + report.E2E_TEST_COLS[6:]]) in page
    assert "Not tested (a family is tested whole): main" in page and "1e-09" not in page


def test_main_family_caption_names_the_interval_sign_test_computes(report, tmp_path):
    """The sign test's dominance interval is Clopper–Pearson's (kvstats.stats.sign_test, since
    2026-12-03); the caption called it Wilson's (the tables of older pages were Wilson's: 16 of
    16 texts give -0.613 there, -0.588 here)."""
    configs = sorted({c for pair in report.E2E_FAMILIES["main"] for c in pair})
    idx = pd.MultiIndex.from_product([range(16), range(3)], names=["text", "position"]).to_frame(index=False)
    pos = pd.concat([idx.assign(config=c, kl=np.exp(0.1 * i + 0.3 * idx.text)) for i, c in enumerate(configs)])
    pos.to_csv(tmp_path / "e2e_positions.csv.gz", index=False)
    pd.DataFrame({"scheme": configs, "bits": np.nan, "n_texts": 16, "n_positions": 48, "mean_kl": 0.1,
                  "bytes_per_token": 6480.0}).to_csv(tmp_path / "e2e_summary.csv", index=False)
    pd.DataFrame({"a": [], "b": [], "unit": [], "test": []}).to_csv(tmp_path / "e2e_tests.csv", index=False)
    page = report.section_e2e(str(tmp_path), None)
    assert "its 95% Clopper–Pearson (exact) interval [`dom_low`, `dom_high`]" in page and "Wilson" not in page
    t = report.e2e_sign_tests(pos, report.E2E_FAMILIES["main"])
    all_lower = t[t.n_a_lower == 16]
    assert len(all_lower) and np.allclose(all_lower.dom_high, 1 - 2 * 0.025 ** (1 / 16))


def test_families_name_configurations_real_e2e_runs(report, load_experiment):
    """Every configuration a family compares is one experiments/real_e2e.py writes."""
    e2e = load_experiment("real_e2e")
    runs = set(e2e.config_names())
    for fam, pairs in report.E2E_FAMILIES.items():
        assert {c for pair in pairs for c in pair} <= runs, fam
    assert not hasattr(e2e, "compare") and not hasattr(e2e, "format_tests")   # one place for the tests


def test_docstring_examples(report):
    import doctest

    res = doctest.testmod(report)
    assert res.attempted >= 3 and res.failed == 0


def small_results(tmp_path, n_texts=3, n_layers=2, n_heads=1, group=2, n_keys=16, dim=8):
    """A results folder as real_stats.py and real_profile.py write it for a small capture
    (every column the profile section reads), and the capture's header."""
    from kvstats.data.capture_format import read_header, write_capture

    rng = np.random.default_rng(1)
    idx = pd.MultiIndex.from_product([[2, 4], range(n_texts), range(n_layers), range(n_heads)],
                                     names=["bits", "text", "layer", "head"]).to_frame(index=False)
    metrics = ["kl", "recall_at_5", "snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t"]
    prof = pd.concat([idx.assign(scheme=s, **{m: rng.uniform(size=len(idx)) for m in metrics})
                      for s in ("KV", "KQV", "QKQV")], ignore_index=True)
    prof.to_csv(tmp_path / "profile.csv", index=False)
    prof.groupby(["scheme", "bits"])[metrics].mean().to_csv(tmp_path / "profile_cells.csv")
    lh = pd.MultiIndex.from_product([["K", "V"], range(n_layers), range(n_heads)],
                                    names=["tensor", "layer", "head"]).to_frame(index=False)
    stat_cols = ["n_outlier_channels", "max_channel_ratio", "kurt_pooled", "kurt_channel", "kurt_wht",
                 "effective_rank", "rank90", "mean_sq_norm", "mean_sq_norm_pos0"]
    lh.assign(**{c: rng.uniform(size=len(lh)) for c in stat_cols}).to_csv(tmp_path / "stats_layer_head.csv",
                                                                         index=False)
    z = np.zeros((n_texts, n_layers, n_heads, n_keys, dim), np.float32)
    write_capture(tmp_path / "cap.npz", z, z, np.zeros((n_texts, n_layers, n_heads * group, n_keys, dim),
                                                       np.float32), {})
    return read_header(tmp_path / "cap.npz")


def test_sections_state_the_counts_of_their_results(report, tmp_path):
    """The sentences that say what was pooled and what a trial is give the results' own
    counts and the capture's N, d and group (they once said 26 x 30 x 3 = 2340, N = 256
    whatever the capture), and drop N and d when the capture is not the one of the results."""
    header = small_results(tmp_path)
    stats = report.section_stats(str(tmp_path), header)
    assert "Pooled over 3 texts × 16 positions per (layer, KV head); 2 layers × 1 KV heads." in stats
    assert "Means over the 2 (layer, head) pairs" in stats
    # the captured keys are post-RoPE: the regenerated section must say so (it said only "keys")
    assert "Keys are\npost-RoPE keys (what the cache stores)" in stats
    assert "max_ratio the largest over the 1 heads" in stats
    prof = report.section_profile(str(tmp_path), None, header)
    assert ("Trials: one per (text, layer, KV head) = 3 × 2 × 1 = 6, N = 16 keys, d = 8, the 2 query "
            "heads of the group at the last position") in prof
    assert "2340" not in prof and "256" not in prof and "26 texts" not in prof
    (tmp_path / "other").mkdir()
    other = small_results(tmp_path / "other", n_texts=4)
    prof = report.section_profile(str(tmp_path), None, other)   # profile.csv has 3 texts, the capture 4
    assert "= 3 × 2 × 1 = 6, the query heads of the group" in prof and "N = " not in prof
    assert "all texts and positions of the capture" in report.section_stats(str(tmp_path), None)


def test_regenerating_keeps_the_summary_and_the_hand_written_part(tmp_path, monkeypatch):
    """The page's account of the run that made its results (in the header), its summary under the header, its generated sections (kept when their results
    are missing) and everything below the marker survive a rewrite unchanged."""
    import runpy
    from pathlib import Path

    page = tmp_path / "real_model.md"
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(sys, "argv", ["real_report.py", "--results", str(tmp_path / "empty"), "--out", str(page),
                                      "--capture", str(tmp_path / "none.npz")])
    script = str(Path(__file__).resolve().parents[1] / "experiments" / "real_report.py")
    runpy.run_path(script, run_name="__main__")                      # a new page
    text = page.read_text()
    marker = "<!-- hand-written below: kept by experiments/real_report.py -->"
    head, sections = text.split("\n\n## ", 1)
    summary = "<!-- kept: summary -->\n\n## What this page holds\n\nA summary.\n\n<!-- /kept: summary -->\n"
    assert head.count("<!-- kept: runs -->") == 1                   # a new page: the commands
    head = re.sub(r"<!-- kept: runs -->.*<!-- /kept: runs -->",
                  "<!-- kept: runs -->\nThe run of a day, its commit and wall times.\n<!-- /kept: runs -->",
                  head, flags=re.S)
    page.write_text(head + "\n" + summary + "\n## " + sections.replace(marker, marker + "\n\n## Notes\n\nkept"))
    before = page.read_text()
    runpy.run_path(script, run_name="__main__")
    assert page.read_text() == before


def test_norms_sentence_says_the_counts_are_descriptive(report, tmp_path):
    """E‖k‖² > E‖v‖² per layer is a count of sample means, not a test: the sentence says so
    and names the closest layer (the page once read as if every layer had been shown)."""
    small_results(tmp_path)                                   # stats_layer_head.csv of 2 layers
    s = pd.read_csv(tmp_path / "stats_layer_head.csv")
    s.loc[s.tensor == "K", "mean_sq_norm"] = [3.0, 1.1]       # ratios 3 / 0.5 = 6 and 1.1 / 1 = 1.1
    s.loc[s.tensor == "V", "mean_sq_norm"] = [0.5, 1.0]
    s.to_csv(tmp_path / "stats_layer_head.csv", index=False)
    w = pd.MultiIndex.from_product([range(2), ["K", "V"]], names=["layer", "tensor"]).to_frame(index=False)
    w.assign(head="all", frobenius=[2.0, 1.0, 1.0, 2.0], spectral=1.5).to_csv(tmp_path / "weights.csv", index=False)
    text = report.section_norms(str(tmp_path))
    assert "E‖k‖² > E‖v‖²: 2/2 (median ratio 3.55; smallest 1.1, layer 1)" in text
    assert "Layers with ‖W_K‖_F > ‖W_V‖_F: 1/2; spectral: 0/2" in text
    assert "these counts are descriptive: no layer's difference is tested" in text


def test_value_metrics_sentence_is_checked_on_the_rows(report, tmp_path):
    """The per-layer caption says KQV's and QKQV's value metrics are equal only when every
    matched trial's are equal up to rounding; a last-bit difference is still equal, a real
    one is counted."""
    header = small_results(tmp_path)
    prof = pd.read_csv(tmp_path / "profile.csv")
    kqv, qkqv = (prof.scheme == "KQV").to_numpy(), (prof.scheme == "QKQV").to_numpy()
    for m in ("snr_v", "phi_v"):
        prof.loc[qkqv, m] = prof.loc[kqv, m].to_numpy() * (1 + 2 ** -52)   # same values, last bit apart
    prof.to_csv(tmp_path / "profile.csv", index=False)
    text = report.section_profile(str(tmp_path), None, header)
    assert ("`snr_v`, `phi_v` of KQV and QKQV are equal up to floating-point rounding on all 12 matched "
            "(budget, trial) pairs") in text
    prof.loc[np.flatnonzero(qkqv)[:3], "phi_v"] += 0.5
    prof.to_csv(tmp_path / "profile.csv", index=False)
    text = report.section_profile(str(tmp_path), None, header)
    assert "`snr_v`, `phi_v` of KQV and QKQV differ on 0 and 3 of the 12 matched (budget, trial) pairs" in text
    assert "equal up to" not in text


def test_e2e_runs_are_recorded_and_stated(report, load_experiment, tmp_path):
    """real_e2e.py records what each run ran on (a full run starts the list, ``--only`` runs
    append) and the page states every run; without the file the page says it is not recorded."""
    e2e = load_experiment("real_e2e")
    assert "not recorded" in report.runs_sentence(str(tmp_path))
    full = e2e.run_record("full", 1, 0.0)
    assert full["started"] == "1970-01-01 00:00 UTC" and full["threads"] == 1
    assert {"cpu", "machine", "simd", "blas", "blas_core", "torch", "numpy", "revision"} <= set(full)
    e2e.record_run(str(tmp_path), {**full, "cpu": "old cpu"}, append=True)
    e2e.record_run(str(tmp_path), full, append=False)      # a full run starts anew
    e2e.record_run(str(tmp_path), {**full, "run": "--only formats", "threads": 2}, append=True)
    runs = json.loads((tmp_path / "e2e_runs.json").read_text())
    assert [r["run"] for r in runs] == ["full", "--only formats"] and "old cpu" not in str(runs)
    said = report.runs_sentence(str(tmp_path))
    assert said.startswith("Computed by (`e2e_runs.json`): full run 1970-01-01 00:00 UTC")
    assert f"{full['cpu']} ({full['machine']}, {full['blas']}" in said
    assert "1 thread," in said and "--only formats run" in said and "2 threads," in said
