"""The unrotated KV's k_snr_db row only on isotropic Gaussian keys (critic_theory20 #2).

Unrotated, KV codes the key's own coordinates with the sphere-law codebook: the
prediction d·D_n holds for a direction uniform on the sphere (distribution "gaussian")
and missed by 6 to 12 dB on outlier_channels keys (Gaussian, anisotropic) at d = 64.
The rotated KQV keeps its row there, as a yardstick."""

import kvstats
from kvstats.analysis.theory import theory_table


def test_unrotated_kv_gets_a_key_snr_prediction_on_isotropic_gaussian_keys_only():
    frame = kvstats.run_sweep({"schemes": ["KV", "KQV"], "budgets": [3],
                               "distributions": ["gaussian", "outlier_channels", "low_rank"],
                               "dims": [64], "n_keys": [64], "n_trials": 5},
                              executor="serial", progress=False).frame
    table = theory_table(frame, n_resamples=49)
    rows = table[table["quantity"] == "k_snr_db"]
    assert sorted(zip(rows["distribution"], rows["scheme"])) == [
        ("gaussian", "KQV"), ("gaussian", "KV"), ("low_rank", "KQV"), ("outlier_channels", "KQV")]
    # the bound rows (every scheme) are unchanged: KV keeps its k_snr_bound everywhere
    kv_bound = table[(table["quantity"] == "k_snr_bound") & (table["scheme"] == "KV")]
    assert set(kv_bound["distribution"]) == {"gaussian", "outlier_channels", "low_rank"}
