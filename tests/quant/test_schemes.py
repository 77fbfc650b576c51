"""Schemes: what the registry contract (test_registry_contract.py) does not cover.

Reference numbers with their provenance: the worked examples of the bit accounting in
docs/qjl.md (§3 QJL keys, §4 KIVI) and docs/theory.md (a Hadamard rotation of a d that
is not a power of two codes d_pad coordinates); settings recorded by ``describe``;
independent draws; the error messages of bad arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.registry import scheme_def
from kvstats.quant.schemes import SchemeCodes


def kv(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ worked examples
def test_qjl_keys_example_of_docs_qjl():
    # docs/qjl.md §3: d = 128, m = outlier_m = 256, 8 outliers, groups of 32, N = 100:
    # 25600 + 1600 + 25600 + 1600 + 4·8·7 = 54624 bits, 4.27 bits per coordinate.
    params = dict(m=256, n_outliers=8, group_size=32)
    scheme = kvstats.make_scheme("qjl", 2, 128, **params)
    budget = scheme.bits_per_coord(100)
    assert budget.key_total * 100 * 128 == 54624
    assert round(budget.key_total, 2) == 4.27
    assert round(budget.breakdown["key_outlier_indices"] * 100 * 128, 9) == 4 * 8 * 7


def test_kivi_example_of_docs_qjl():
    # docs/qjl.md §4: b = 2, g = 32, R = 32, N = 100, d = 64: keys 8704 + 3072 + 3072 +
    # 32768 bits = 7.44 bits per coordinate.
    budget = kvstats.make_scheme("kivi", 2, 64, group_size=32, residual=32).bits_per_coord(100)
    parts = {p: b * 100 * 64 for p, b in budget.breakdown.items() if p.startswith("key_")}
    assert parts == {"key_codes": 8704, "key_scales": 3072, "key_zeros": 3072, "key_window": 32768}
    assert budget.key_total == 7.44
    assert scheme_def("kivi").expected_bits(2, 64, 100, group_size=32, residual=32) == pytest.approx(budget.total, rel=1e-12)


def test_padded_hadamard_counts_d_pad_coordinates():
    # docs/theory.md: d = 96 is coded as d_pad = 128 coordinates (+ a float16 norm).
    budget = kvstats.make_scheme("turboquant_mse", 3, 96).bits_per_coord(10)
    assert budget.key_total == (3 * 128 + 16) / 96
    unrotated = kvstats.make_scheme("KV", 3, 96).bits_per_coord(10)
    assert unrotated.key_total == (3 * 96 + 16) / 96


def test_budget_scales_with_window_for_kivi():
    scheme = kvstats.make_scheme("kivi", 2, 128, group_size=32, residual=64)
    short, long = scheme.bits_per_coord(64), scheme.bits_per_coord(64 * 64)
    assert short.total == pytest.approx(16.0)  # everything still in the fp16 window
    assert 2 < long.total < short.total


# ------------------------------------------------------------------ settings, draws
def test_describe_records_sketch_and_rotation():
    info = kvstats.make_scheme("QKQV", 4, 64, sketch="orthogonal", m=32).describe()
    text = repr(info)
    assert "orthogonal" in text and "32" in text and "hadamard" in text


def test_draws_are_independent_per_trial_and_shared_without_draws():
    K, V = kv((1, 32, 64))
    K3, V3 = np.repeat(K, 3, axis=0), np.repeat(V, 3, axis=0)
    batched = kvstats.make_scheme("KQV", 3, 64, seed=0, draws=3)
    K_hat, _ = batched.dequantize(batched.quantize(K3, V3))
    assert not np.allclose(K_hat[0], K_hat[1]) and not np.allclose(K_hat[1], K_hat[2])
    shared = kvstats.make_scheme("KQV", 3, 64, seed=0)
    K_hat, _ = shared.dequantize(shared.quantize(K3, V3))
    np.testing.assert_array_equal(K_hat[0], K_hat[1])


def test_kivi_scheme_equals_kivi_quantizer():
    # the scheme's two coders split KIVIQuantizer's joint encode: same numbers, same bytes
    K, V = kv((2, 100, 64), np.float32, seed=3)
    scheme = kvstats.make_scheme("kivi", 3, 64, group_size=16, residual=11)
    kivi = kvstats.KIVIQuantizer(3, group_size=16, residual=11)
    joint = kivi.encode(K, V)
    codes = scheme.quantize(K, V)
    assert codes.nbytes == joint.nbytes
    for got, ref in zip(scheme.dequantize(codes), kivi.decode(joint)):
        assert np.array_equal(got, ref)
    keys, values = kivi.stored_bits(100, 64)
    budget = scheme.bits_per_coord(100)
    assert {f"key_{p}": b / 6400 for p, b in keys.items()} == {
        p: b for p, b in budget.breakdown.items() if p.startswith("key_")}
    assert sum(values.values()) / 6400 == budget.value_total


# ------------------------------------------------------------------ bad input
def test_bad_arrays():
    scheme = kvstats.make_scheme("KQV", 4, 64)
    K, V = kv((10, 64))
    with pytest.raises(ValueError, match="same shape"):
        scheme.quantize(K, V[:9])
    with pytest.raises(ValueError, match="last dimension dim=64"):
        scheme.quantize(K[:, :32], V[:, :32])
    bad = K.copy()
    bad[3, 5] = np.nan
    with pytest.raises(ValueError, match="K must be finite"):
        scheme.quantize(bad, V)
    bad[3, 5] = np.inf
    with pytest.raises(ValueError, match="V must be finite"):
        scheme.quantize(K, bad)
    with pytest.raises(ValueError, match="at least 2 dimension"):
        scheme.quantize(K[0], V[0])
    assert isinstance(scheme.quantize(K, V), SchemeCodes)


def test_mixed_name_and_params_must_agree():
    with pytest.raises(ValueError, match="fixes key_bits=4, value_bits=2"):
        kvstats.make_scheme("K4V2", None, 64, key_bits=3)
    with pytest.raises(ValueError, match="must be None or their mean 3.0"):
        kvstats.make_scheme("K4V2", 4, 64)
    assert kvstats.make_scheme("K4V2", 3.0, 64).bits == 3.0


def test_identity_refuses_a_budget_it_would_ignore():
    # it stores float32: bits=4 was silently dropped (a cache labelled "identity:4")
    with pytest.raises(ValueError, match=r"bits for identity must be None or 32 \(fixed by the "
                                         r"format\); received 4"):
        kvstats.make_scheme("identity", 4, 64)
    assert kvstats.make_scheme("identity", None, 64).bits is None
    assert kvstats.make_scheme("identity", 32, 64).bits is None


@pytest.mark.parametrize("name", ["KQV", "kivi", "fp8_e4m3"])
def test_values_are_coded_in_the_dtype_of_the_keys(name):
    """K float32 and V float64: V is cast to float32 first, so its codes and reconstruction
    are those of V.astype(float32) (the dtype the scheme returns)."""
    rng = np.random.default_rng(0)
    K = rng.standard_normal((2, 40, 64)).astype(np.float32)
    V = rng.standard_normal((2, 40, 64)) * 3.0
    scheme = kvstats.make_scheme(name, 4 if name != "fp8_e4m3" else None, 64, seed=1)
    mixed, same = scheme.roundtrip(K, V), scheme.roundtrip(K, V.astype(np.float32))
    assert mixed[1].dtype == np.float32
    np.testing.assert_array_equal(mixed[1], same[1])
    np.testing.assert_array_equal(scheme.dequantize(scheme.quantize(K, V))[1], same[1])


@pytest.mark.parametrize("returns,text", [
    (lambda coder, bits: (coder, coder), "must return (bits, key_coder, value_coder); received"),
    (lambda coder, bits: (coder, coder, bits), "with bits a number or None; received bits of type UniformTokenCoder"),
    (lambda coder, bits: (bits, coder, "coder"), "its value coder, a str, lacks the Coder protocol"),
])
def test_a_build_returning_the_wrong_thing_is_named_by_make_scheme(returns, text):
    # a user's build in another order is told so at once, not by an AttributeError in a sweep
    from kvstats.quant.register import define_scheme, registered_scheme
    from kvstats.quant.uniform import UniformTokenCoder

    def build(bits, dim, params, key_rng, value_rng, draws):
        return returns(UniformTokenCoder(bits, dim, dim), bits)

    sdef = define_scheme("wrong_build", build, lambda b, d, n, p: (0, 0), summary="x")
    with registered_scheme(sdef), pytest.raises(TypeError, match="the build function of scheme 'wrong_build'") as err:
        kvstats.make_scheme("wrong_build", 3, 16)
    assert text in str(err.value)


def test_a_fixed_budget_is_the_schemes_own_whatever_its_build_checks():
    # a user's 8-bit format whose build ignores the budget asked for: make_scheme refuses
    # another one for it as for the built-in formats, so the scheme passes the contract
    from kvstats.quant.register import define_scheme, registered_scheme
    from kvstats.quant.uniform import UniformTokenCoder

    def build(bits, dim, params, key_rng, value_rng, draws):
        return 8, UniformTokenCoder(8, dim, dim), UniformTokenCoder(8, dim, dim)

    def bits_of(bits, dim, n_tokens, params):
        return (n_tokens * (8 * dim + 32),) * 2

    sdef = define_scheme("eight", build, bits_of, summary="8-bit", fixed_budget=True)
    with registered_scheme(sdef):
        account = kvstats.check_scheme("eight", raise_on_failure=False)
    assert set(account.values()) == {"ok"}, account
    with registered_scheme(sdef):
        assert kvstats.make_scheme("eight", None, 16).bits == kvstats.make_scheme("eight", 8, 16).bits == 8
        with pytest.raises(ValueError, match=r"bits for eight must be None or 8 \(its budget is fixed\); received 3"):
            kvstats.make_scheme("eight", 3, 16)
