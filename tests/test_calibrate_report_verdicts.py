"""experiments/calibrate_report_verdicts.py at a tiny size: its output's structure, counts
that agree with its per-run records, the library facts those counts rest on (Holm's
rejections are a subset of BH's; a significant row's verdict declares a difference), the
exact intervals against their closed form, and power where it is certain.

The script is loaded from its file (experiments/ is not a package).
"""

from __future__ import annotations

import json

import pytest

# alpha 0.6: null rows do reach significance at this size, so the count checks below are not vacuous
TINY = dict(runs=2, seed=3, tost_reps=3, cluster_reps=2, power_runs_n=1, pool_trials=60, n_trials=10, alpha=0.6,
            tost_cells=(("gaussian", 20, 0.05),), cluster_cells=((4, 3, 0.3),))


@pytest.fixture(scope="module")
def script(load_experiment):
    return load_experiment("calibrate_report_verdicts")


@pytest.fixture(scope="module")
def out(script):
    return script.calibrate(**TINY)


def _rates(obj):
    """Every {k, n, rate, low, high} dict inside the output."""
    if isinstance(obj, dict):
        if set(obj) == {"k", "n", "rate", "low", "high"}:
            yield obj
        for v in obj.values():
            yield from _rates(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _rates(v)


def test_clopper_pearson_is_the_closed_form_at_the_ends(script):
    # k = 0: [0, 1 - (α/2)^(1/n)]; k = n: [(α/2)^(1/n), 1] (Clopper & Pearson 1934)
    for n in (1, 7, 100):
        zero, full = script.clopper_pearson(0, n), script.clopper_pearson(n, n)
        assert zero["low"] == 0 and zero["high"] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
        assert full["high"] == 1 and full["low"] == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    # 1 of 100: the beta quantiles, scipy.stats.beta.ppf(0.025, 1, 100), beta.ppf(0.975, 2, 99)
    mid = script.clopper_pearson(1, 100)
    assert (mid["low"], mid["high"]) == pytest.approx((0.000253146, 0.0544593), rel=1e-5)
    for bad in ((-1, 5), (6, 5), (0, 0)):
        with pytest.raises(ValueError, match="k must|n must"):
            script.clopper_pearson(*bad)


def test_output_records_every_setting_and_part(out):
    s = out["settings"]
    assert set(out) == {"settings", "null", "tost", "clustered", "power"}
    for key in ("runs", "seed", "tost_reps", "cluster_reps", "power_runs", "pool_trials", "n_trials", "alpha",
                "energy_resamples", "delta", "tost_cells", "cluster_cells", "part_seeds", "pool", "commit",
                "date_utc", "load_before", "load_after", "elapsed_s", "part_elapsed_s"):
        assert key in s, key
    assert s["runs"] == TINY["runs"] and s["pool"]["n_trials"] == TINY["pool_trials"]
    rates = list(_rates(out))
    assert len(rates) > 20
    for r in rates:
        assert 0 <= r["k"] <= r["n"] and r["rate"] == r["k"] / r["n"]
        assert 0 <= r["low"] <= r["rate"] <= r["high"] <= 1


def test_null_counts_agree_with_the_records(out):
    nu = out["null"]
    # 2 distributions x 2 budgets x (9 metrics' sign tests + 2 pooled SNRs + 1 energy) = 48 paired;
    # unpaired: MW and KS per metric (22) + energy = 23 per case, 92
    assert nu["family"] == {"trial": 48, "none": 92}
    assert len(nu["records"]) == TINY["runs"]
    for key, r in nu["any"].items():
        assert r["n"] == TINY["runs"] and r["k"] == sum(rec[key]["any"] for rec in nu["records"])
    for rec in nu["records"]:
        for pairing in ("trial", "none"):
            holm, bh = rec[f"{pairing}/holm"], rec[f"{pairing}/fdr_bh"]
            assert holm["n_significant"] <= bh["n_significant"]      # Holm's rejections ⊆ BH's
        for key in ("trial/holm", "trial/fdr_bh", "none/holm", "none/fdr_bh"):
            # the count is the report's verdicts: a row is significant iff its verdict declares it
            assert rec[key]["n_significant"] == rec[key]["verdicts_declaring"]
            assert rec[key]["any"] == (rec[key]["n_significant"] > 0)
    assert any(rec[key]["any"] for rec in nu["records"] for key in nu["any"])
    # the two corrections were both applied: at alpha 0.6 BH's step-up rejects more somewhere
    assert any(rec[f"{p}/holm"]["n_significant"] < rec[f"{p}/fdr_bh"]["n_significant"]
               for rec in nu["records"] for p in ("trial", "none"))
    assert nu["per_test"]["trial/energy"]["n"] == 4 * TINY["runs"]
    assert nu["per_test"]["none/mann_whitney"]["n"] == 44 * TINY["runs"]


def test_tost_and_clustered_cells(out):
    assert [(c["distribution"], c["side"]) for c in out["tost"]] == [("gaussian", "1+delta"),
                                                                     ("gaussian", "1/(1+delta)")]
    assert out["tost"][0]["true_ratio"] == pytest.approx(1.2) and out["tost"][1]["true_ratio"] == pytest.approx(1 / 1.2)
    assert all(c["equivalent"]["n"] == TINY["tost_reps"] for c in out["tost"])
    rows = out["clustered"]
    assert [r["unit"] for r in rows] == ["cluster", "trial"]
    for r in rows:
        assert r["family"] == 12 and r["any"]["n"] == TINY["cluster_reps"]
        assert r["pairs_tested"] == (4 if r["unit"] == "cluster" else 12)     # C clusters, C·M trials
        assert r["sign_per_test"]["n"] == 11 * TINY["cluster_reps"]


def test_the_twin_is_kqv_under_another_name(script, tmp_path):
    # same bits, same trials, its own rotation and sketch draws: rows exchangeable, not copies
    from kvstats.quant.register import registered_scheme
    with registered_scheme(script.twin_scheme()):
        pool = script.make_pool(6, 1, str(tmp_path))
    for dist in ("gaussian", "heavy_tailed"):
        a, b = script._pair(pool, dist)
        for col in ("bits_total", "key_bits_total", "value_bits_total", "bits_nominal"):
            assert (a[col].to_numpy() == b[col].to_numpy()).all(), col
        assert (a["kl"].to_numpy() != b["kl"].to_numpy()).all()


def test_power_is_certain_on_continuous_metrics(script):
    # KQV-3 vs twin-4 at 20 trials: 4 bits beats 3 on every trial of a continuous metric, so the
    # sign test's p is 2^-19, below 0.05 / 24; each such row is significant, never for KQV
    from kvstats.quant.register import registered_scheme
    with registered_scheme(script.twin_scheme()):
        pw = script.power_runs(2, 5, n_trials=20)
    assert pw["family"] == 24 and pw["any"]["k"] == 2 and pw["wrong_winner"]["k"] == 0
    rows = {(r["distribution"], r["metric"]): r["significant"]["k"] for r in pw["rows"]}
    for dist in ("gaussian", "heavy_tailed"):
        for metric in ("kl", "snr_k", "snr_v", "phi_t"):
            assert rows[(dist, metric)] == 2, (dist, metric)


def test_main_writes_json_and_the_table(script, tmp_path, capsys):
    path = tmp_path / "c.json"
    script.main(["--runs", "1", "--parts", "null", "tost", "--trials", "8", "--tost-reps", "2",
                 "--pool-trials", "40", "--tost-cells", "gaussian,10,0.05", "--out", str(path), "--no-progress"])
    data = json.loads(path.read_text())
    assert set(data) == {"settings", "null", "tost"} and "command" in data["settings"]
    table = capsys.readouterr().out
    assert len(table.splitlines()) == 1 + len(data["null"]["any"]) + len(data["null"]["per_test"]) + 2
    with pytest.raises(ValueError, match="parts must"):
        script.calibrate(1, parts=("nul",))
    with pytest.raises(ValueError, match="distribution must be one of"):
        script.calibrate(1, parts=("tost",), pool_trials=5, tost_reps=1, tost_cells=(("gausian", 5, 0.05),))
