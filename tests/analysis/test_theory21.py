"""The theory table asks only the schemes a frame holds, at their example settings, and
reads their key side's rotation and coded coordinates from the entry (referee R4 F1, F2).

- F1: a registered scheme with a required parameter (no default, set in
  ``example_params``) whose ``randomized`` reads it made every later ``theory_table``
  fail with ``KeyError``, even on a frame without it (the table asked ``randomized({})``
  of every registry entry).
- F2: "randomized" stood for "rotated, coding d_pad coordinates". A scheme with KV's
  unrotated keys and KQV's randomized values, ``key_theory="mse"``, got a key prediction
  on outlier-channel keys (14.8 dB predicted, 5.9 measured) and was paired with the prod
  schemes; a Haar-rotated one at d = 96 (no padding) got none. Now ``key_rotated`` and
  ``coded_dim`` say so.
"""

from __future__ import annotations

import pytest

import kvstats
from kvstats.analysis.theory import ratio_pairs, theory_schemes
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.registry import scheme_def

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TQ = scheme_def("turboquant_mse")
KV, KQV = scheme_def("KV"), scheme_def("KQV")


def _sweep(schemes, distributions=("gaussian",), dim=32):
    return kvstats.run_sweep({"schemes": list(schemes), "budgets": [3], "distributions": list(distributions),
                              "dims": [dim], "n_keys": [64], "n_trials": 12}, executor="serial",
                             progress=False).frame


def _tq_build(bits, dim, params, key_rng, value_rng, draws):
    return TQ.build(bits, dim, {**TQ.defaults, "rotation": params["rot"]}, key_rng, value_rng, draws)


def _tq_bits(bits, dim, n, params):
    return TQ._bits(bits, dim, n, {**TQ.defaults, "rotation": params["rot"]})


def _rot_randomized(params):
    return params["rot"] != "identity"


def _rot_coded(dim, params):
    return TQ.coded_dim(dim, {"rotation": params["rot"]})


def test_a_scheme_with_a_required_parameter_does_not_break_a_later_table(user_registries):
    sdef = define_scheme("tqrot", _tq_build, _tq_bits, summary="turboquant_mse, rotation required",
                         params=["rot"], example_params={"rot": "hadamard"}, randomized=_rot_randomized,
                         key_theory="mse", coded_dim=_rot_coded)
    kvstats.register_scheme(sdef)
    table = kvstats.theory_table(_sweep(["KQV"]), n_resamples=99)
    assert table["quantity"].tolist() == ["k_snr_db", "k_snr_bound", "v_snr_bound"]
    assert "tqrot" in theory_schemes() and ("KQV", "QKQV") in ratio_pairs()


def test_a_scheme_absent_from_the_frame_is_asked_nothing(monkeypatch):
    import dataclasses

    from kvstats.quant import registry

    def broken(params):
        raise KeyError("never asked")

    frame = _sweep(["KQV"])
    entry = dataclasses.replace(TQ, name="ghost", _randomized=broken, _key_rotated=broken, _coded=broken)
    monkeypatch.setitem(registry._TABLE, "ghost", entry)   # past register_scheme's own probe
    table = kvstats.theory_table(frame, n_resamples=99)
    assert "ghost" not in set(table["scheme"])


def _kvprod_build(bits, dim, params, key_rng, value_rng, draws):
    # keys exactly as KV's (unrotated Lloyd-Max), values exactly as KQV's (rotated prod)
    _, key, _ = KV.build(bits, dim, KV.filled({}), key_rng, value_rng, draws)
    _, _, value = KQV.build(bits, dim, KQV.filled({}), key_rng, value_rng, draws)
    return bits, key, value


def _kvprod_bits(bits, dim, n, params):
    return KV._bits(bits, dim, n, KV.filled({}))[0], KQV._bits(bits, dim, n, KQV.filled({}))[1]


def test_randomized_values_do_not_make_unrotated_keys_rotated(user_registries):
    sdef = define_scheme("kvprod", _kvprod_build, _kvprod_bits, summary="KV keys, KQV values",
                         min_bits=2, randomized=True, key_theory="mse")
    with registered_scheme(sdef):
        assert not any("kvprod" in pair for pair in ratio_pairs())
        table = kvstats.theory_table(_sweep(["kvprod", "KV"], ("gaussian", "outlier_channels"), dim=64),
                                     n_resamples=99)
    rows = table[table["quantity"] == "k_snr_db"]
    # as KV's identical key side: a prediction on isotropic Gaussian keys only
    assert sorted(rows[rows["scheme"] == "kvprod"]["distribution"]) == ["gaussian"]
    assert sorted(rows[rows["scheme"] == "KV"]["distribution"]) == ["gaussian"]


def _haar_build(bits, dim, params, key_rng, value_rng, draws):
    return TQ.build(bits, dim, {**TQ.defaults, "rotation": "haar"}, key_rng, value_rng, draws)


def _haar_bits(bits, dim, n, params):
    return TQ._bits(bits, dim, n, {**TQ.defaults, "rotation": "haar"})


def test_the_coded_coordinates_are_the_entrys_own(user_registries):
    # a Haar rotation codes the d = 96 coordinates themselves (coded_dim's default, d): the
    # closed form holds there, while the built-in's padded Hadamard (128) gets no row
    sdef = define_scheme("tqhaar", _haar_build, _haar_bits, summary="turboquant_mse, Haar rotation",
                         randomized=True, key_rotated=True, key_theory="mse")
    with registered_scheme(sdef):
        table = kvstats.theory_table(_sweep(["tqhaar", "turboquant_mse"], ("gaussian", "outlier_channels"),
                                            dim=96), n_resamples=99)
    rows = table[table["quantity"] == "k_snr_db"]
    assert sorted(rows["scheme"]) == ["tqhaar", "tqhaar"]
    # 3-bit prediction d·D_3 at d = 96 (kvstats.theory.unit_vector_mse, the sphere law):
    # the measured mean of per-key dB is within 0.3 dB (Jensen: +0.04 to +0.12 dB at d = 128)
    gauss = rows[rows["distribution"] == "gaussian"].iloc[0]
    assert gauss["predicted"] == pytest.approx(-10 * __import__("math").log10(TQ.key_rel_mse(3, 96)))
    assert abs(gauss["measured"] - gauss["predicted"]) < 0.3
