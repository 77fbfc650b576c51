"""hypothesis_report and the figures on a synthetic sweep result (no quantizer needed)."""

import json
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest

from kvstats.report import (hypothesis_report, plot_crossover, plot_kl_vs_bits,
                            plot_lowrank_vs_heavytail, plot_recall_vs_bits, plot_shannon_phi)
from kvstats.analysis import compare_schemes
from kvstats.results import SweepResult
from kvstats.sweep import SweepConfig

from _sweep_frames import make_frame


def _result(frame):
    cfg = SweepConfig.from_dict({"schemes": ["KQV", "QKQV", "KV"], "distributions": ["gaussian"],
                                 "budgets": [2, 3], "n_trials": 40,
                                 "report": {"energy_resamples": 99, "bootstrap_resamples": 199}})
    manifest = {"n_cells": 6, "seed": 0, "started": "t0", "finished": "t1", "seconds": 1.0,
                "n_computed": 6, "executor": "serial", "host": {"platform": "test", "cpus": 2},
                "git": None, "versions": {"numpy": np.__version__}}
    return SweepResult(frame, manifest, cfg)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    f = make_frame({("KQV", 2): 1.5, ("QKQV", 2): 0.0, ("KV", 2): 0.75,
                    ("KQV", 3): 0.0, ("QKQV", 3): 1.5, ("KV", 3): 0.75}, n=40, seed=7)
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40,
                   seed=8, case=("heavy_tailed", "nu=1.5", 64, 128))
    h = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40,
                   seed=9, case=("low_rank", "rank=4", 64, 128))
    import pandas as pd
    out = tmp_path_factory.mktemp("rep")
    return hypothesis_report(_result(pd.concat([f, g, h], ignore_index=True)), out, pairing="none"), out


def test_report_files_and_content(report):
    rep, out = report
    for name in ("markdown", "html", "json", "summary", "comparisons", "crossovers", "theory"):
        assert rep.files[name].is_file() and rep.files[name].stat().st_size > 0
    md = rep.files["markdown"].read_text()
    assert "CROSSOVER in kl for gaussian" in md          # the planted crossover is stated
    assert "Winner rule" in md and "holm" in md
    assert "## gaussian, d = 64, N = 128" in md
    # every figure linked from the Markdown exists, PNG and SVG
    for link in re.findall(r"\]\((figures/[^)]+\.png)\)", md):
        assert (out / link).is_file() and (out / link).with_suffix(".svg").is_file()
    assert {"kl_vs_bits", "recall_vs_bits", "lowrank_vs_heavytail"} <= set(rep.figures)
    assert any(k.startswith("crossover_kqv_vs_qkqv") for k in rep.figures)


def test_html_is_self_contained(report):
    rep, _ = report
    html = rep.files["html"].read_text()
    imgs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert imgs and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert "http://" not in html and "https://" not in html


def test_json_is_strict_and_complete(report):
    rep, _ = report
    payload = json.loads(rep.files["json"].read_text(),
                         parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert len(payload["comparisons"]) == len(rep.comparisons)
    assert len(payload["summary"]) == len(rep.summary)
    assert payload["options"]["correction"] == "holm"


def test_plots_return_figures_with_units(frame_factory):
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=30)
    f["kl"] = np.abs(f["kl"])
    fig = plot_shannon_phi(f, "k")
    # one plane for all budgets: shared axes, each scheme a trajectory
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 1
    assert fig.axes[0].get_xlabel().startswith("direction error φ_k (rad)") and "dB" in fig.axes[0].get_ylabel()
    assert "nats" in plot_kl_vs_bits(f).axes[0].get_ylabel()
    assert "fraction" in plot_recall_vs_bits(f).axes[0].get_ylabel()
    comp = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False, pairing="none")
    assert len(plot_crossover(comp, ["kl", "phi_k"]).axes) == 2
    with pytest.raises(ValueError, match="place must be one of"):
        plot_shannon_phi(f, "q")
    with pytest.raises(ValueError, match="low_rank"):
        plot_lowrank_vs_heavytail(f)
    two = frame_factory({("KQV", 2): 0.0}, case=("gaussian", "-", 128, 128))
    import pandas as pd
    with pytest.raises(ValueError, match="exactly one case"):
        plot_shannon_phi(pd.concat([f, two]), "k")
    matplotlib.pyplot.close("all")


def test_heavy_tailed_means_are_marked_once_without_warnings(tmp_path):
    """A planted Pareto(α = 1) KL (α̂ = 0.96 with this seed, n = 400, k = 20) is marked ‡
    with the footnote; an exponential KL (α̂ ≈ 3.6) is not; no HeavyTailWarning escapes."""
    import warnings

    import pandas as pd

    from kvstats.report.wording import HEAVY_MARK, HEAVY_NOTE
    from kvstats.stats import HeavyTailWarning

    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=400, seed=5)
    rng = np.random.default_rng(6)
    heavy = f.scheme == "KQV"
    f.loc[heavy, "kl"] = rng.pareto(1.0, heavy.sum())
    f.loc[~heavy, "kl"] = rng.exponential(1.0, (~heavy).sum())
    # the other metrics: N(0, 1), negative values, so no tail index and no mark
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeavyTailWarning)
        rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    assert HEAVY_NOTE in md and "1 of 18 summary means are marked ‡ (kl: 1)" in md
    rows = {line.split("|")[1].strip(): line for line in md.splitlines()
            if line.startswith("| KQV |") or line.startswith("| QKQV |")}
    assert rows["KQV"].count(HEAVY_MARK) == 1 and HEAVY_MARK not in rows["QKQV"]
    kl_col = md.splitlines()[[i for i, l in enumerate(md.splitlines()) if l.startswith("| scheme |")][0]]
    assert "kl tail α (95% upper)" in kl_col
    html = rep.files["html"].read_text()
    assert HEAVY_MARK in html and "tail index α of the values is below 2" in html
    summary = pd.read_csv(rep.files["summary"])
    assert summary.loc[~summary.ci_reliable, "metric"].tolist() == ["kl"]

    # light tails only: no mark and no footnote
    g = f.copy()
    g["kl"] = rng.exponential(1.0, len(g))
    rep2 = hypothesis_report(_result(g), tmp_path / "light", figures=False, energy_resamples=19)
    assert HEAVY_MARK not in rep2.files["markdown"].read_text()
    assert rep2.summary.ci_reliable.all()


def test_kl_plot_marks_heavy_tailed_means_hollow(frame_factory):
    # lognormal KL (light enough tail: Hill α̂ well above 2 at n = 400) vs Pareto with
    # α = 0.8 (infinite mean and variance: α̂ near 0.8)
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=400, seed=3)
    rng = np.random.default_rng(4)
    f["kl"] = np.exp(rng.normal(-3.0, 0.3, len(f)))
    heavy_rows = f["scheme"] == "QKQV"
    f.loc[heavy_rows, "kl"] = rng.pareto(0.8, heavy_rows.sum()) + 1.0
    fig = plot_kl_vs_bits(f)
    hollow = [line for line in fig.axes[0].lines if line.get_markerfacecolor() == "white"]
    assert len(hollow) == 2 and [len(line.get_xdata()) for line in hollow] == [0, 1]
    assert any("Hill" in t.get_text() for t in fig.legends[0].get_texts())
    light = frame_factory({("KQV", 2): 0.0}, n=400, seed=5)
    light["kl"] = np.exp(rng.normal(-3.0, 0.3, len(light)))
    assert not any("Hill" in t.get_text() for t in plot_kl_vs_bits(light).legends[0].get_texts())


def test_kl_plot_marks_a_mean_of_few_nonzero_values_hollow_as_the_tables_mark_it(frame_factory):
    """KL 0 on 95 of 100 trials and positive on 5: the tail screen cannot run (under 10
    positive values) but the tables mark the mean ‡ (its bootstrap interval undercovers);
    the figure drew its error bar as valid. It is hollow now, and only it."""
    from kvstats.analysis import summary_table

    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=100, seed=6)
    rng = np.random.default_rng(7)
    f["kl"] = np.exp(rng.normal(-3.0, 0.3, len(f)))
    sparse = (f["scheme"] == "QKQV") & (f["trial"] >= 5)
    f.loc[sparse, "kl"] = 0.0
    marks = summary_table(f, n_resamples=99).query("metric == 'kl'").set_index("scheme")["ci_reliable"]
    assert marks.to_dict() == {"KQV": True, "QKQV": False}
    fig = plot_kl_vs_bits(f)
    hollow = [line for line in fig.axes[0].lines if line.get_markerfacecolor() == "white"]
    assert [len(line.get_xdata()) for line in hollow] == [0, 1]
    assert any("few nonzero" in t.get_text() for t in fig.legends[0].get_texts())
    matplotlib.pyplot.close("all")


def test_report_does_not_import_the_runner():
    # the report reads results through kvstats.results; only loading a directory's
    # config (kvstats.results.load_result) reaches the runner's config schema
    import subprocess
    import sys

    code = ("import sys, kvstats.report; "
            "assert not [m for m in sys.modules if m.split('.')[:2] == ['kvstats', 'sweep']], "
            "sorted(m for m in sys.modules if m.startswith('kvstats'))")
    subprocess.run([sys.executable, "-c", code], check=True)


def _dashed_levels(ax):
    return sorted(round(line.get_ydata()[0], 6) for line in ax.get_lines() if line.get_linestyle() == "--"
                  and line.get_xdata()[0] == 0 and line.get_xdata()[1] == 1)


def test_shannon_phi_plane_draws_trajectories_and_the_limit(frame_factory):
    f = frame_factory({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=30)
    f["phi_k"] = np.abs(f["phi_k"]) + 0.01           # angles are positive (log axis)
    fig = plot_shannon_phi(f, "k", bounds={2.0: 12.04, 3.0: 18.06})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert _dashed_levels(ax) == [12.04, 18.06]       # the limit, one line per budget
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("2") == 2 and labels.count("3") == 2   # each mean labelled with its n
    assert "limit, n = 3" in labels
    # the note that explains the plane names the lines as drawn (grey, labelled), not "dashed",
    # which the second scheme's trajectory is too
    from kvstats.report.plots import SHANNON_PHI_NOTE
    assert 'Grey dashed horizontal lines labelled "limit, n = …"' in SHANNON_PHI_NOTE
    assert {line.get_color() for line in ax.get_lines() if line.get_linestyle() == "--"
            and line.get_xdata()[0] == 0} == {"0.35"}
    # T has no limit line even when bounds are given; a missing limit says why for K
    f["phi_t"] = np.abs(f["phi_t"]) + 0.01
    assert _dashed_levels(plot_shannon_phi(f, "t", bounds={2.0: 1.0}).axes[0]) == []
    fig = plot_shannon_phi(f, "k", bounds={}, bound_note="infinite variance")
    assert "infinite variance" in fig.axes[0].get_title() and _dashed_levels(fig.axes[0]) == []
    # by default a synthetic case's limit comes from its spectrum: white Gaussian, 6.02 dB/bit
    assert np.allclose(_dashed_levels(plot_shannon_phi(f, "k").axes[0]), [20 * np.log10(2) * n for n in (2, 3)])
    assert _dashed_levels(plot_shannon_phi(f, "k", bounds=None).axes[0]) == []
    g = f.assign(distribution="heavy_tailed", params="nu=1.5")
    assert "infinite variance" in plot_shannon_phi(g, "k").axes[0].get_title()
    matplotlib.pyplot.close("all")



@pytest.mark.parametrize("n_schemes", [2, 5])
def test_coinciding_schemes_stay_visible_in_the_shannon_phi_plane(frame_factory, n_schemes):
    """KV, KQV and turboquant_mse code keys alike, so their means coincide: each scheme's
    marker must show around the next one's (strictly smaller, drawn above it: its colour is
    in the rendered pixels) and its n labels must overlap neither another's nor the markers."""
    from kvstats.report.plots import scheme_palette

    names = ["KV", "QKQV", "turboquant_prod", "KQV", "turboquant_mse"][-n_schemes:]
    one = frame_factory({("KV", 2): 0.0, ("KV", 3): 0.0}, n=10)
    one["snr_k"] = 6.0 * one["budget"]                 # constant per budget: no error bars
    one["phi_k"] = 0.5 ** one["budget"]
    f = pd.concat([one.assign(scheme=s) for s in names], ignore_index=True)
    palette = scheme_palette(names)
    fig = plot_shannon_phi(f, "k", bounds=None, clouds=False, palette=palette)
    ax = fig.axes[0]
    means = [c for c in ax.collections if c.get_label() in names]
    assert [c.get_label() for c in means] == names
    sizes = [float(c.get_sizes()[0]) for c in means]
    assert all(a > b for a, b in zip(sizes, sizes[1:])), sizes          # each inside the one before
    assert all(a.get_zorder() < b.get_zorder() for a, b in zip(means, means[1:]))
    fig.set_dpi(100)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    px = fig.dpi / 72.0                                                  # pixels per point
    for budget in (2.0, 3.0):
        cx, cy = ax.transData.transform((0.5 ** budget, 6.0 * budget))
        # every scheme's colour shows in the pixels of the markers (their largest disk)
        r = int(np.ceil(np.sqrt(sizes[0]) / 2 * px))
        row, col = int(round(rgb.shape[0] - cy)), int(round(cx))
        win = rgb[row - r:row + r + 1, col - r:col + r + 1]
        for name in names:
            near = np.abs(win - np.asarray(palette[name])).max(axis=-1) < 0.05
            assert near.sum() >= 5, (name, budget, int(near.sum()))
        boxes = [t.get_window_extent(renderer) for t in ax.texts
                 if np.allclose(t.xy, (0.5 ** budget, 6.0 * budget)) and t.get_text() == f"{budget:g}"]
        assert len(boxes) == n_schemes
        for i, a in enumerate(boxes):
            # clear of the largest marker, and of the other schemes' labels
            nearest = np.hypot(np.clip(cx, a.x0, a.x1) - cx, np.clip(cy, a.y0, a.y1) - cy)
            assert nearest > np.sqrt(sizes[0]) / 2 * px
            assert not any(a.overlaps(b) for b in boxes[i + 1:])
    matplotlib.pyplot.close("all")


def test_the_shannon_phi_plane_plots_the_pooled_snr_of_keys_and_values():
    """The limit bounds the energy-pooled SNR, and kivi's float16 window (half the keys here)
    lifts its mean of per-vector dB far above its coded keys' SNR: the planes of K and V
    plot the pooled SNR, T (no pooled column, no limit) the mean of per-vector dB; a frame
    without the pooled columns keeps the per-vector one."""
    import kvstats

    res = kvstats.run_sweep({"schemes": ["kivi", "turboquant_mse"], "budgets": [2], "distributions": ["gaussian"],
                             "dims": [32], "n_keys": [64], "n_trials": 6, "comparisons": []},
                            executor="serial", progress=False)
    f = res.frame

    def mean_y(frame, place, scheme):
        ax = plot_shannon_phi(frame, place, clouds=False).axes[0]
        (c,) = [c for c in ax.collections if c.get_label() == scheme]
        return float(c.get_offsets()[0][1]), ax.get_ylabel()

    kivi = f[f.scheme == "kivi"]
    assert kivi["snr_k"].mean() - kivi["snr_k_pooled"].mean() > 3       # the window lifts the per-vector mean
    for place in ("k", "v"):
        for scheme, grp in f.groupby("scheme"):
            y, label = mean_y(f, place, scheme)
            assert y == pytest.approx(grp[f"snr_{place}_pooled"].mean(), rel=1e-12)
            assert label.startswith(f"pooled SNR_{place}")
    y, label = mean_y(f, "t", "kivi")
    assert y == pytest.approx(kivi["snr_t"].mean(), rel=1e-12) and label.startswith("SNR_t")
    y, label = mean_y(f.drop(columns=["snr_k_pooled", "snr_v_pooled"]), "k", "kivi")
    assert y == pytest.approx(kivi["snr_k"].mean(), rel=1e-12) and label.startswith("SNR_k")
    matplotlib.pyplot.close("all")

def test_report_shows_the_limit_and_each_gap(tmp_path):
    import kvstats

    res = kvstats.run_sweep({"schemes": ["KV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
                             "dims": [32], "n_keys": [64], "n_trials": 12,
                             "report": {"energy_resamples": 19, "bootstrap_resamples": 99}},
                            executor="serial", progress=False)
    rep = hypothesis_report(res, tmp_path, figures=False)
    md = rep.files["markdown"].read_text()
    assert "## Distance to the rate–distortion limit" in md and "gap (dB) [95% CI]" in md
    bound = rep.theory[rep.theory.quantity == "k_snr_bound"]
    assert set(bound.scheme) == {"KV", "QKQV"} and (bound.gap_db > 0).all()
    row = bound[(bound.scheme == "KV") & (bound.budget == 2)].iloc[0]
    assert f"| {row.gap_db:.2f} [{row.gap_low:.2f}, {row.gap_high:.2f}] |" in md
    # each row says which side it bounds: the key row is K's, the value row V's
    for quantity, place in (("k_snr_bound", "K"), ("v_snr_bound", "V")):
        r = rep.theory.query("quantity == @quantity and scheme == 'KV' and budget == 2").iloc[0]
        line = next(line for line in md.splitlines()
                    if f"| {r.gap_db:.2f} [{r.gap_low:.2f}, {r.gap_high:.2f}] |" in line)
        assert f"| 2 | {place} | KV |" in line


def test_a_report_removes_its_own_stale_files_and_nothing_else(tmp_path, frame_factory):
    import pandas as pd

    from kvstats.report.render import REPORT_RECORD

    two = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=20)
    low = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=20, seed=3, case=("low_rank", "rank=4", 64, 128))
    for f in (two, low):
        for p in ("k", "v", "t"):
            f[f"phi_{p}"] = np.abs(f[f"phi_{p}"]) + 0.01
    rep1 = hypothesis_report(_result(pd.concat([two, low], ignore_index=True)), tmp_path, energy_resamples=19)
    low_figs = sorted((tmp_path / "figures").glob("shannon_phi_*low_rank*"))
    assert low_figs and (tmp_path / REPORT_RECORD).is_file()
    mine = tmp_path / "figures" / "my_plot.png"
    mine.write_bytes(b"not kvstats")
    edited = low_figs[0]
    edited.write_bytes(b"edited by hand")                # changed since written: kept
    rep2 = hypothesis_report(_result(two), tmp_path, energy_resamples=19)
    left = {p.name for p in (tmp_path / "figures").iterdir()}
    assert "my_plot.png" in left and edited.name in left
    assert not any("low_rank" in n for n in left - {edited.name})   # the other stale figures went
    assert set(rep2.figures) < set(rep1.figures)
    for path in rep2.files.values():
        assert path.is_file()
    # an unreadable record: the folder is no longer recognisably kvstats' (as kvstats report
    # --out): refused before anything is removed or written
    good = (tmp_path / REPORT_RECORD).read_text()
    (tmp_path / REPORT_RECORD).write_text("{not json")
    with pytest.raises(ValueError, match="nothing kvstats wrote"):
        hypothesis_report(_result(two), tmp_path, energy_resamples=19, figures=False)
    assert mine.is_file() and (tmp_path / "figures" / "kl_vs_bits.png").is_file()
    (tmp_path / REPORT_RECORD).write_text(good)
    # a record naming a file outside the folder (edited, or another folder's) never removes it
    import hashlib
    import json as json_
    outside = tmp_path.parent / f"{tmp_path.name}_outside.txt"
    outside.write_text("not the report's")
    record = json_.loads((tmp_path / REPORT_RECORD).read_text())
    record["files"][f"../{outside.name}"] = hashlib.sha256(outside.read_bytes()).hexdigest()
    (tmp_path / REPORT_RECORD).write_text(json_.dumps(record))
    hypothesis_report(_result(two), tmp_path, energy_resamples=19, figures=False)
    assert outside.is_file()


def test_case_labels_are_short_and_the_tables_exact(tmp_path):
    # two cases whose scales agree to 4 significant digits: the labels take 5, the
    # crossover sentence too; the summary CSV and the figure file names keep the exact text
    import pandas as pd

    long_a, long_b = "scale=1.2345678901234", "scale=1.2349999"
    f = pd.concat([make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 1.0, ("QKQV", 3): 0.0},
                              n=40, seed=s, case=("gaussian", p, 64, 128))
                   for s, p in ((1, long_a), (2, long_b))], ignore_index=True)
    rep = hypothesis_report(_result(f), tmp_path, figures=False, energy_resamples=19)
    md = rep.files["markdown"].read_text()
    heads = [line for line in md.splitlines() if line.startswith("## gaussian")]
    assert heads == ["## gaussian (scale=1.2346), d = 64, N = 128",
                     "## gaussian (scale=1.235), d = 64, N = 128"]
    assert long_a not in md and long_b not in md
    assert set(pd.read_csv(rep.files["summary"])["params"]) == {long_a, long_b}
    assert "for gaussian (scale=1.2346), d = 64, N = 128" in " ".join(rep.crossovers["description"])


def test_every_table_reads_back_numeric_with_read_table_and_read_csv(report):
    # a missing value is written "NaN", the sweep store's convention: with empty cells
    # kvstats.results.read_table kept 9 float columns of comparisons.csv (the energy rows'
    # effect and means, the margins), 5 of theory.csv and summary's tail_index as text
    import pandas as pd

    from kvstats.results import read_table

    rep, _ = report
    frames = {"summary": rep.summary, "comparisons": rep.comparisons,
              "crossovers": rep.crossovers, "theory": rep.theory}
    with_nan = []
    for name, frame in frames.items():
        numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
                   and not pd.api.types.is_bool_dtype(frame[c])]
        with_nan += [f"{name}.{c}" for c in numeric if frame[c].isna().any()]
        for reader in (read_table, pd.read_csv):
            back = reader(rep.files[name])
            assert list(back.columns) == list(frame.columns)
            text = [c for c in numeric if not pd.api.types.is_numeric_dtype(back[c])]
            assert not text, f"{reader.__name__}({name}.csv) reads {text} as text"
            for c in numeric:   # equal values, NaN where the frame had NaN (round-trip floats)
                np.testing.assert_array_equal(back[c].to_numpy(np.float64),
                                              frame[c].to_numpy(np.float64), err_msg=f"{name}.{c}")
    # the check has something to check: float columns with missing values in two tables
    assert {"comparisons.effect", "theory.predicted_asymptotic"} <= set(with_nan), with_nan


def test_the_api_refuses_a_folder_of_someone_elses_files(tmp_path):
    """hypothesis_report, like kvstats report --out, never writes into a folder that holds
    files but nothing kvstats wrote (its report.md would be overwritten)."""
    notes = tmp_path / "report.md"
    notes.write_text("my notes")
    frame = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0}, n=10)
    with pytest.raises(ValueError, match="holds 1 entry \\(report.md\\) and nothing kvstats wrote"):
        hypothesis_report(_result(frame), tmp_path, energy_resamples=19, figures=False)
    assert notes.read_text() == "my notes" and sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_the_figures_stage_shows_a_progress_bar(tmp_path, capfd):
    # drawing takes as long as the tests of a small sweep: the stage has a bar of its own,
    # counted in figures, and none without progress
    f = make_frame({("KQV", 2): 1.5, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.5}, n=12, seed=3)
    hypothesis_report(_result(f), tmp_path / "quiet", pairing="none", progress=False)
    assert "figures" not in capfd.readouterr().err
    rep = hypothesis_report(_result(f), tmp_path / "shown", pairing="none", progress=True)
    err = capfd.readouterr().err
    totals = {int(t) for t in re.findall(r"figures: .*?\| \d+/(\d+) ", err)}
    # one total: 3 Shannon-φ plots per case, KL and recall, one crossover per default pair
    assert totals == {3 + 2 + 3}, err[-500:]
    assert len(rep.figures) <= 8


def test_an_old_real_sweep_is_labelled_once_in_the_header_without_a_warning(tmp_path):
    """A real frame from before clusters were recorded (no ``cluster``): the header says its
    unit is the trial and why; every table of the report, the theory table too, runs where
    TrialsAsUnitsWarning is silenced, so the caller gets no warning on top of the label."""
    import warnings

    from kvstats.analysis.clustered import TrialsAsUnitsWarning
    from _sweep_frames import clustered_frame

    old = clustered_frame(n_texts=6, per_text=4).drop(columns="cluster")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrialsAsUnitsWarning)
        rep = hypothesis_report(_result(old), tmp_path, pairing="none", energy_resamples=19,
                                bootstrap_resamples=99)
    md = rep.files["markdown"].read_text()
    assert "Unit of observation: the trial. The frame records no text (cluster) per real" in md


def test_saved_figures_are_byte_reproducible(tmp_path):
    """The same figure saved twice gives the same PNG and SVG bytes (the SVG carried a date
    and random clip-path ids: two reports of one sweep differed in every SVG)."""
    import matplotlib.pyplot as plt

    from kvstats.report.plots import save_figure

    def draw(stem):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 3, 2], clip_on=True)
        ax.fill_between([0, 1, 2], [0, 1, 0], alpha=0.3)
        return save_figure(fig, stem)

    first, second = draw(tmp_path / "a" / "fig"), draw(tmp_path / "b" / "fig")
    for ext in ("png", "svg"):
        assert first[ext].read_bytes() == second[ext].read_bytes(), ext
    assert b"<dc:date>" not in first["svg"].read_bytes()
