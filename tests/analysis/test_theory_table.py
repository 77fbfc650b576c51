"""The theory table: closed-form predictions beside measurements, schemes from the registry."""

import numpy as np

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
    assert snr.predicted.tolist() == expected
    assert t.loc[3, "predicted"] == kvstats.theory.bit_trade_inflation(2, 64)
    assert t.loc[4, "predicted"] == kvstats.theory.residual_inflation(64)
