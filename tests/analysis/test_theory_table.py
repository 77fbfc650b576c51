"""The theory table: closed-form predictions beside measurements, schemes from the registry."""

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import theory_table


def test_theory_predicts_key_snr_only_where_the_closed_form_holds():
    # d = 128: KV and KQV both get a prediction, and it matches within 0.5 dB on Gaussian
    # keys (closed form: -10 log10(d * D_n), kvstats.theory.unit_vector_mse). d = 96 is
    # padded to 128 by the Hadamard rotation: KQV gets no row, KV (unrotated) still does.
    config = {"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"],
              "dims": [96, 128], "n_keys": [64], "n_trials": 30}
    table = theory_table(kvstats.run_sweep(config, executor="serial", progress=False).frame,
                         n_resamples=99)
    rows = table[table["quantity"] == "k_snr_db"]
    assert set(map(tuple, rows[["dim", "scheme"]].to_numpy().tolist())) == {
        (96, "KV"), (128, "KV"), (128, "KQV")}
    assert np.all(np.abs(rows["measured"] - rows["predicted"]) < 0.5)


def test_theory_schemes_and_pairs_come_from_the_registry():
    from kvstats.analysis.theory import ratio_pairs, theory_schemes
    from kvstats.quant.registry import REGISTRY

    names = theory_schemes()
    assert set(names) == {d.name for d in REGISTRY.values()
                          if d.key_theory is not None and not d.fixed_budget}
    families = [REGISTRY[n].key_theory for n in names]
    assert families == sorted(families, key=("mse", "prod").index)   # MSE rows first
    assert ratio_pairs()[0] == ("KQV", "QKQV")
    for m, p in ratio_pairs():
        assert (REGISTRY[m].key_theory, REGISTRY[p].key_theory) == ("mse", "prod")
        assert REGISTRY[m].randomized({})     # rotated keys only: KV (unrotated) has no ratio row
    assert "KV" in names and "KV" not in {m for m, _ in ratio_pairs()}


def test_theory_rows_follow_the_registry_predictions(frame_factory):
    # synthetic measurements: only which rows exist and what is predicted is checked here
    from kvstats.quant.registry import scheme_def

    f = frame_factory({("turboquant_mse", 1): 0.0, ("turboquant_mse", 2): 0.0,
                       ("turboquant_prod", 2): 0.0, ("turboquant_prod", 1): 0.0,
                       ("kivi", 2): 0.0}, n=20)
    t = theory_table(f, n_resamples=99)
    assert list(zip(t.budget, t.quantity, t.scheme)) == [
        (1.0, "k_snr_db", "turboquant_mse"),                 # no prod row at n = 1, no kivi row
        (2.0, "k_snr_db", "turboquant_mse"), (2.0, "k_snr_db", "turboquant_prod"),
        (2.0, "ip_var_ratio_same_budget", "turboquant_prod/turboquant_mse"),
        (2.0, "ip_var_ratio_residual", "turboquant_prod(n)/turboquant_mse(n-1)")]
    snr = t[t.quantity == "k_snr_db"]
    expected = [-10 * np.log10(scheme_def(s).key_rel_mse(int(n), 64))
                for s, n in zip(snr.scheme, snr.budget)]
    # to rounding: the table takes math.log10, this numpy's (they may differ in the last bit)
    assert snr.predicted.tolist() == pytest.approx(expected, rel=1e-14)
    assert t.loc[3, "predicted"] == kvstats.theory.bit_trade_inflation(2, 64)
    assert t.loc[4, "predicted"] == kvstats.theory.residual_inflation(64)
    # measured: the ratio of the mean ip_var (prod at n over mse at n, and over mse at n − 1)
    var = {(s, b): g["ip_var"].mean() for (s, b), g in f.groupby(["scheme", "budget"])}
    assert t.loc[3, "measured"] == pytest.approx(var["turboquant_prod", 2] / var["turboquant_mse", 2], rel=1e-12)
    assert t.loc[4, "measured"] == pytest.approx(var["turboquant_prod", 2] / var["turboquant_mse", 1], rel=1e-12)
    assert (t.ci_low < t.measured).all() and (t.measured < t.ci_high).all()
    assert t.loc[0, "measured"] == f[(f.scheme == "turboquant_mse") & (f.budget == 1)]["snr_k"].mean()


# --- the rate–distortion limit ---------------------------------------------------------

def _bound_rows(table, quantity="k_snr_bound"):
    return table[table["quantity"] == quantity]


def test_turboquant_mse_gap_to_shannon_is_the_lloyd_max_gap():
    # Gaussian keys, d = 64: turboquant_mse codes the unit vector with the n-bit Lloyd–Max
    # codebook of the sphere-coordinate density and stores a float16 norm (16/d bits per
    # coordinate). Its pooled key SNR is then exactly −10·log10(d·D_n) (norm and direction
    # are independent for Gaussian keys: kvstats.theory / the registry's key_rel_mse), so its
    # gap to the Gaussian bound at rate R = n + 16/d is 6.0206·R + 10·log10(d·D_n): the
    # finite-n Lloyd–Max gap (2.69 dB at n = 2 for d = 128, rising towards the high-rate
    # 10·log10(π√3/2) = 4.35 dB) plus 6.02·16/d for the norm. Tolerance: the bootstrap
    # CI's half-width twice over (about 4 standard errors) plus 0.02 dB for the float16
    # norm and the Jensen gap of a mean of per-trial dB.
    from kvstats.quant.registry import scheme_def
    from kvstats.rate_distortion import DB_PER_BIT

    d = 64
    cfg = {"schemes": ["turboquant_mse"], "budgets": [2, 3, 4], "distributions": ["gaussian"],
           "dims": [d], "n_keys": [128], "n_trials": 40, "seed": 5}
    t = theory_table(kvstats.run_sweep(cfg, executor="serial", progress=False).frame, n_resamples=199)
    rows = _bound_rows(t)
    assert len(rows) == 3
    for r in rows.itertuples():
        rel = scheme_def("turboquant_mse").key_rel_mse(int(r.budget), d)
        assert r.rate == r.budget + 16 / d
        assert r.predicted == pytest.approx(DB_PER_BIT * r.rate)         # white Gaussian bound
        expected = DB_PER_BIT * r.rate + 10 * np.log10(rel)
        assert r.gap_low <= r.gap_db <= r.gap_high
        assert abs(r.gap_db - expected) <= (r.gap_high - r.gap_low) + 0.02, (r.budget, r.gap_db, expected)
        assert r.gap_db == pytest.approx(r.predicted - r.measured)       # one bound per trial


def test_the_lloyd_max_gap_rises_towards_its_high_rate_limit():
    # the reference of the test above: the gap 6.0206·n + 10·log10(d·D_n) (no norm bits)
    # grows with n towards the Panter–Dite 10·log10(d·c_d) = 4.245 dB at d = 128 (c_d =
    # (1/12)(∫f_d^{1/3})³; 10·log10(π√3/2) = 4.347 dB only as d → ∞) and stays below it
    from kvstats.quant.registry import scheme_def
    from kvstats.theory import high_rate_distortion

    gaps = [6.0206 * n + 10 * np.log10(scheme_def("turboquant_mse").key_rel_mse(n, 128))
            for n in range(1, 9)]
    limit = 10 * np.log10(128 * high_rate_distortion(0, "beta", 128))
    assert np.all(np.diff(gaps) > 0) and gaps[-1] < limit < 10 * np.log10(np.pi * np.sqrt(3) / 2) - 0.1
    assert gaps[1] == pytest.approx(2.686, abs=1e-3) and gaps[-1] > limit - 0.04


def test_bound_rows_follow_the_spectrum_of_each_case():
    # low rank: the water-filling bound of its spectrum, far above the white one at the
    # same rate; heavy tails with nu <= 2: no key row (no covariance), value rows still
    from kvstats.data.spectrum import synthetic_spectrum
    from kvstats.rate_distortion import bound_snr_db

    cfg = {"schemes": ["KV", "K4V2"], "budgets": [3], "dims": [32], "n_keys": [64], "n_trials": 12,
           "comparisons": [],    # a theory table: no test asked (no default pair names KV and K4V2)
           "distributions": [{"name": "low_rank", "params": {"rank": 4}},
                             {"name": "heavy_tailed", "params": {"nu": 1.5}}]}
    t = theory_table(kvstats.run_sweep(cfg, executor="serial", progress=False).frame, n_resamples=99)
    k, v = _bound_rows(t), _bound_rows(t, "v_snr_bound")
    mixed = t[(t.scheme == "K4V2") & (t.distribution == "low_rank")].set_index("quantity").rate
    assert mixed["k_snr_bound"] > 4 > mixed["v_snr_bound"] > 2
    k, v = k[k.scheme == "KV"], v[v.scheme == "KV"]
    assert k["distribution"].tolist() == ["low_rank"]
    assert sorted(v["distribution"]) == ["heavy_tailed", "low_rank"]
    spec = synthetic_spectrum("low_rank", 32, rank=4)
    r = k.iloc[0]
    assert r.predicted == pytest.approx(float(bound_snr_db(spec.eigenvalues, r.rate, spec.mean_square)))
    assert r.predicted > 6.0206 * r.rate + 10
    assert (v["n_units"] == 12).all()


def test_real_cases_get_the_bound_of_each_trials_layer_and_head(tmp_path):
    # a capture whose (layer, head)s have very different spectra: each trial is held to
    # its own bound, and intervals run over texts (n_units = texts)
    import json

    from kvstats.analysis.theory import real_case_spectra
    from kvstats.data.spectrum import capture_spectra
    from kvstats.sweep import SweepConfig

    rng = np.random.default_rng(0)
    texts, layers, heads, n, d = 4, 2, 2, 32, 16
    scales = np.exp(rng.normal(0, 1.5, (layers, heads, d)))
    K = (rng.standard_normal((texts, layers, heads, n, d)) * scales[None, :, :, None]).astype(np.float32)
    V = rng.standard_normal(K.shape).astype(np.float32)
    path = tmp_path / "cap.npz"
    np.savez(path, K=K, V=V, q=np.repeat(K, 3, axis=2), meta=json.dumps({}))
    cfg = SweepConfig.from_dict({"schemes": ["KV"], "budgets": [3], "dims": [d], "n_keys": [n],
                                 "n_trials": texts * layers * heads - 3,   # text 3: one trial
                                 "distributions": [{"name": "real", "params": {"path": str(path)}}]})
    frame = kvstats.run_sweep(cfg, executor="serial", progress=False).frame
    assert _bound_rows(theory_table(frame, n_resamples=99)).empty      # no capture, no bound
    spectra = real_case_spectra(cfg)
    assert len(spectra) == 1
    t = theory_table(frame, n_resamples=99, spectra=spectra)
    r = _bound_rows(t).iloc[0]
    ks, _ = capture_spectra(path)
    per_trial = ks.bound_snr_db(r.rate)[:len(frame)]    # trial t: (text, layer, head) in C order
    text = np.arange(len(frame)) // (layers * heads)
    by_text = pd.Series(per_trial).groupby(text).mean()
    assert r.predicted == pytest.approx(by_text.mean())
    assert r.n_units == texts and r.n_trials == len(frame)
    gap = pd.Series(per_trial - frame["snr_k_pooled"].to_numpy()).groupby(text).mean()
    assert r.gap_db == pytest.approx(gap.mean())


def test_a_fractional_budget_makes_no_theory_row(frame_factory):
    """K4V1 runs at 2.5 bits: no scheme of the theory table is at 2.5, and its budget must not
    be read as 2 (which would repeat the rows of n = 2)."""
    t = theory_table(frame_factory({("KQV", 2): 0.0, ("K4V1", 2.5): 0.0}, n=20), n_resamples=99)
    snr = t[t.quantity == "k_snr_db"]
    assert list(zip(snr.budget, snr.scheme)) == [(2.0, "KQV")]


def test_on_a_clustered_frame_every_measured_row_is_over_texts():
    # 6 texts x 5 trials per cell: each row's mean and interval are those of the 6 text
    # means (mean_ci / ratio_ci on the text means, same seed), n_units = 6, n_trials = 30
    from kvstats.analysis.intervals import mean_ci, ratio_ci

    config = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [64], "n_keys": [32], "n_trials": 30}
    frame = kvstats.run_sweep(config, executor="serial", progress=False).frame
    rng = np.random.default_rng(1)
    frame["cluster"] = frame["trial"] // 5
    frame["ip_var"] *= np.exp(rng.normal(0, 1, 6))[frame["cluster"]]   # a strong text effect
    table = theory_table(frame, n_resamples=99, seed=3)
    texts = lambda cell, col: cell.groupby("cluster")[col].mean().to_numpy()  # noqa: E731
    cell = lambda s, n: frame[(frame["scheme"] == s) & (frame["budget"] == n)]  # noqa: E731
    snr = table[(table["quantity"] == "k_snr_db") & (table["scheme"] == "KQV")
                & (table["budget"] == 3)].iloc[0]
    assert (snr["n_trials"], snr["n_units"]) == (30, 6)
    assert (snr["measured"], snr["ci_low"], snr["ci_high"]) == pytest.approx(
        mean_ci(texts(cell("KQV", 3), "snr_k"), 0.95, 99, 3), rel=1e-12)
    # the ratio's two schemes were measured on the same texts: the text means are pairs,
    # resampled whole (the shared text effect cancels in the ratio)
    ratio = table[(table["quantity"] == "ip_var_ratio_same_budget") & (table["budget"] == 3)].iloc[0]
    q, k = texts(cell("QKQV", 3), "ip_var"), texts(cell("KQV", 3), "ip_var")
    want = ratio_ci(q, k, 99, 3, paired=True)
    assert (ratio["n_trials"], ratio["n_units"], ratio["paired"]) == (30, 6, True)
    assert (ratio["ci_low"], ratio["ci_high"]) == pytest.approx((want["ci_low"], want["ci_high"]),
                                                                rel=1e-12)
    apart = ratio_ci(q, k, 99, 3)            # what the row was before (2026-12-02)
    assert ratio["ci_high"] - ratio["ci_low"] < 0.5 * (apart["ci_high"] - apart["ci_low"])
    # without clusters the same rows are over the 30 trials
    plain = theory_table(frame.drop(columns="cluster"), n_resamples=99, seed=3)
    assert set(plain.loc[plain["quantity"] != "k_snr_bound", "n_units"].dropna()) <= {30}


def test_padded_dimension_ratio_rows_use_the_residual_in_r_d():
    """d = 96 (Hadamard padded to d_pad = 128): the residual r lives in R^96 and is sketched
    with m = 128 Gaussian rows, so the QJL error of q·r is ((π/2)‖q‖²‖r‖² − (q·r)²)/m, i.e.
    (π/2 − 1/96)·96/128 = 1.170 times E(q·r)² = ‖q‖²‖r‖²/96 for an isotropic residual — not
    π/2 − 1/128 = 1.563 (what the rows predicted before; 1.183 [1.158, 1.212] and 1.155 [1.127, 1.193] at
    n = 3, 4 over 400 trials, paired intervals; docs/theory.md §6).
    The same-budget ratio has no closed form when padded (the padded MSE error is not
    d_pad·D_n), so that row is left out, as the k_snr_db rows are."""
    import math

    config = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [96], "n_keys": [128], "n_trials": 80, "seed": 2}
    table = theory_table(kvstats.run_sweep(config, executor="serial", progress=False).frame,
                         n_resamples=199)
    assert not (table["quantity"] == "ip_var_ratio_same_budget").any()
    row = table[table["quantity"] == "ip_var_ratio_residual"].iloc[0]
    assert row.predicted == pytest.approx((math.pi / 2 - 1 / 96) * 96 / 128, rel=1e-12)
    assert row.predicted_asymptotic == pytest.approx(math.pi / 2 * 96 / 128, rel=1e-12)
    # measured within about 3.5 standard errors of the ratio (its 95% CI is about ±6.5% at
    # 80 trials: SE ≈ 3.3%); the old prediction lies far above the interval
    assert abs(math.log(row.measured / row.predicted)) < 0.12
    assert row.ci_high < math.pi / 2 - 1 / 128


@pytest.mark.parametrize("texts", [1, 2])
def test_a_capture_of_one_or_two_texts_gets_ratio_rows_without_an_interval(texts):
    """One text per cell made theory_table (and so the report) raise in the ratio rows'
    BCa jackknife; two gave a bootstrap "95% CI" of two values. As mean_ci does below 3
    units, the row keeps its ratio of means and prints no interval (both ends the ratio)."""
    config = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [64], "n_keys": [32], "n_trials": 6}
    frame = kvstats.run_sweep(config, executor="serial", progress=False).frame
    frame["cluster"] = frame["trial"] % texts
    table = theory_table(frame, n_resamples=99, seed=3)
    ratios = table[table["quantity"].str.startswith("ip_var_ratio")]
    assert len(ratios) == 3 and (ratios["n_units"] == texts).all()
    assert (ratios["ci_low"] == ratios["measured"]).all() and (ratios["ci_high"] == ratios["measured"]).all()
    snr = table[table["quantity"] == "k_snr_db"]
    assert (snr["ci_low"] == snr["measured"]).all()          # mean_ci's rule, the same one


def test_ratio_ci_of_two_constant_samples_is_the_exact_ratio():
    from kvstats.analysis.intervals import ratio_ci

    r = ratio_ci(np.full(20, 3.0), np.full(20, 2.0), 99, 0)     # BCa raised: degenerate bootstrap
    assert (r["measured"], r["ci_low"], r["ci_high"]) == (1.5, 1.5, 1.5)


def test_real_trials_without_their_text_are_said_to_be_units():
    """A real frame from before clusters were recorded (no ``cluster``, or NaN in cells a
    newer sweep resumed) gave trial-level means and intervals silently; now theory_table
    warns as summary_table and compare_schemes do (TrialsAsUnitsWarning, naming what is
    missing and the remedy), and goes on (the report labels such a unit). Silent where each
    real trial names its text, on synthetic trials, and on cluster means."""
    import warnings

    from kvstats.analysis import aggregate_clusters, compare_schemes, summary_table
    from kvstats.analysis.clustered import TrialsAsUnitsWarning

    config = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [64], "n_keys": [32], "n_trials": 12}
    synthetic = kvstats.run_sweep(config, executor="serial", progress=False).frame
    old = synthetic.assign(distribution="real", params="layer=0")
    if "cluster" in old:
        old = old.drop(columns="cluster")
    resumed = old.assign(cluster=np.where(old["trial"] < 6, old["trial"] // 3, np.nan))
    calls = [lambda f: theory_table(f, n_resamples=99), lambda f: summary_table(f, n_resamples=99),
             lambda f: compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], energy=False,
                                       pairing="none")]
    paired = lambda f: compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], energy=False)  # noqa: E731
    with pytest.raises(ValueError, match="without a 'cluster'"):   # no unit to pair on: refused
        paired(resumed)
    for frame, textless, tests in ((old, len(old), [*calls, paired]),
                                   (resumed, int(resumed["cluster"].isna().sum()), calls)):
        for call in tests:
            with pytest.warns(TrialsAsUnitsWarning) as caught:
                call(frame)
            message = str(caught[0].message)
            assert f"but {textless} of them record no 'cluster'" in message
            assert "run the sweep again in a new directory" in message
    with pytest.warns(TrialsAsUnitsWarning):        # still computed, over the trials
        assert set(theory_table(old, n_resamples=99)["n_units"].dropna()) == {12}
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrialsAsUnitsWarning)
        rows = theory_table(old.assign(cluster=old["trial"]), n_resamples=99)   # texts known
        assert set(rows["n_units"].dropna()) == {12}
        theory_table(synthetic, n_resamples=99)
        theory_table(old.assign(cluster=old["trial"] // 3), n_resamples=99)    # clustered itself
        theory_table(aggregate_clusters(old.assign(cluster=old["trial"] // 3)), n_resamples=99)
