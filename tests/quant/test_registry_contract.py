"""The contract every registered scheme passes, parametrised over the registry.

No scheme name is written here: the cases are the entries of ``REGISTRY`` (each built
with its ``example_params``) plus mixed precision by name (``"K{a}V{b}"``), and what a
test expects of a scheme it asks its ``SchemeDef`` (budget range, fixed budget,
randomness, token grouping, GPU export, expected bits, key theory). A new entry is tested
by adding it. The contract:

- ``roundtrip`` equals ``dequantize(quantize())`` bit for bit (float32 and float64,
  shared and independent draws, a padded d, zero rows and norms that round to 0);
- the stored bytes hold exactly the accounted bits (at a byte-aligned shape; never fewer
  elsewhere), and the accounted bits equal ``SchemeDef.expected_bits``, which the
  registry writes from the definitions in docs/qjl.md and docs/theory.md, not from the
  coders;
- zero vectors decode to zero; same seed, same codes; another seed, other codes exactly
  when ``randomized``;
- bad budgets, parameters and names raise a ValueError naming the argument;
- each side is a ``Coder``; ``export`` exactly when ``gpu``; ``key_rel_mse`` predicts
  the measured key error where it offers a closed form.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.coder import Coder
from kvstats.quant.export import SchemeExport
from kvstats.quant.registry import REGISTRY, SCHEMES, parse_scheme_name, scheme_def
from kvstats.quant.schemes import SchemeCodes
from _awkward_kv import kv

# The awkward rows (norms ~1e-10) are below float16's normal range on purpose: the uniform
# coders' and the norm storage's warnings about them are expected here (tests/quant/test_uniform_small_values.py
# checks it); the contract is what is checked in this file.
pytestmark = [pytest.mark.filterwarnings("ignore:.*below float16's smallest normal:UserWarning"),
              pytest.mark.filterwarnings("ignore:.*vector norms are below float16:UserWarning")]

# every entry, and mixed precision by name (two, so neither side is special)
CASES = [(name, dict(d.example_params)) for name, d in REGISTRY.items()] + [("K3V5", {}), ("K2V1", {})]
IDS = [name for name, _ in CASES]

# A valid non-default value for every parameter any scheme takes: a scheme gets those it
# accepts (the parameter names come from the registry, these are only values).
VARIANT = {"rotation": "haar", "sketch": "orthogonal", "m": 40, "norm_dtype": np.float32,
           "n_outliers": 2, "outlier_m": 24, "group_size": 16, "value_bits": 2,
           "value_group_size": 32, "residual": 8, "key_bits": 3, "scale": "tensor", "rank": 48}
# An invalid value for every parameter (each must raise a ValueError naming it).
BAD = {"rotation": "fft", "sketch": "sparse", "m": 0, "norm_dtype": np.int8, "n_outliers": -1,
       "outlier_m": 0, "group_size": 0, "value_bits": 9, "value_group_size": 0, "residual": -1,
       "key_bits": 0, "scale": "channel", "rank": 0}


def budgets(name):
    """The budgets a case takes: None when fixed, else its range's ends and 3."""
    d = scheme_def(name)
    return [None] if d.fixed_budget else sorted({d.min_bits, 3, d.max_bits})


def variant(name, params):
    """``params`` plus a non-default value for every other parameter the scheme accepts."""
    sdef, fixed = parse_scheme_name(name, params)
    extra = {p: VARIANT[p] for p in sdef.params if p not in fixed}
    if "n_outliers" not in extra:
        extra.pop("outlier_m", None)
    return {**params, **extra}


def build(name, bits, dim, params, seed=7, draws=()):
    return kvstats.make_scheme(name, bits, dim, seed=seed, draws=draws, **params)


def test_names():
    assert kvstats.SCHEMES == SCHEMES == tuple(REGISTRY)
    for name, d in REGISTRY.items():
        assert d.name == name and d.summary and d.min_bits <= d.max_bits
        assert d.key_theory in (None, "mse", "prod")
        assert d.token_group_param is None or d.token_group_param in d.params
    mixed = {scheme_def(f"K{a}V{b}") for a in range(1, 9) for b in range(1, 9)}
    assert len(mixed) == 1 and mixed.pop().fixed_budget


# ------------------------------------------------------------------ round trip
@pytest.mark.parametrize("name,params", CASES, ids=IDS)
@pytest.mark.parametrize("dim", [128, 96])  # 96: a Hadamard rotation pads to 128
@pytest.mark.parametrize("draws", [(), (3,)])
def test_roundtrip_equals_dequantize_quantize(name, params, dim, draws):
    for bits in budgets(name):
        for p in (params, variant(name, params)):
            scheme = build(name, bits, dim, p, draws=draws)
            assert isinstance(scheme.key_coder, Coder) and isinstance(scheme.value_coder, Coder)
            for dtype in (np.float32, np.float64):
                K, V = kv((3, 200, dim), dtype, seed=dim + (bits or 0))  # > 512 rows: chunks
                codes = scheme.quantize(K, V)
                assert isinstance(codes, SchemeCodes)
                ref = scheme.dequantize(codes)
                got = scheme.roundtrip(K, V)
                for g, r, x in zip(got, ref, (K, V)):
                    assert g.dtype == r.dtype == dtype and g.shape == r.shape == x.shape
                    assert np.array_equal(g, r)
                    assert np.isfinite(g).all()


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_roundtrip_broadcasts_batch_against_draws(name, params):
    scheme = build(name, budgets(name)[-1], 96, params, draws=(2, 3))
    K, V = kv((3, 40, 96), np.float32, seed=1)  # batch (3,) against draws (2, 3)
    K_hat, V_hat = scheme.roundtrip(K, V)
    ref = scheme.dequantize(scheme.quantize(K, V))
    assert np.array_equal(K_hat, ref[0]) and np.array_equal(V_hat, ref[1])
    # a side with drawn parameters (a rotation, even the identity, or a sketch)
    # broadcasts the batch against them; a side without (uniform, identity) keeps it
    assert K_hat.shape in ((2, 3, 40, 96), (3, 40, 96)) and V_hat.shape in ((2, 3, 40, 96), (3, 40, 96))
    if scheme_def(name).randomized(parse_scheme_name(name, params)[1]):
        assert K_hat.shape == (2, 3, 40, 96)


# ------------------------------------------------------------------ bit accounting
@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_accounted_bits_equal_expected_bits(name, params):
    sdef, parsed = parse_scheme_name(name, params)
    for bits in ([None] if sdef.fixed_budget else range(sdef.min_bits, sdef.max_bits + 1)):
        for p in (params, variant(name, params)):
            full = parse_scheme_name(name, p)[1]
            for dim in (64, 96, 128):
                scheme = build(name, bits, dim, p)
                for n_tokens in (1, 31, 100, 1000):
                    budget = scheme.bits_per_coord(n_tokens)
                    assert budget.total == pytest.approx(
                        sdef.expected_bits(bits, dim, n_tokens, **full), rel=1e-12)
                    assert sum(budget.breakdown.values()) == pytest.approx(2 * budget.total, rel=1e-12)
                    assert budget.total == (budget.key_total + budget.value_total) / 2
                    if scheme.bits is not None and p is params:
                        assert budget.nominal == scheme.bits
                    assert budget.to_frame().loc[0, "total"] == budget.total


@pytest.mark.parametrize("name,params", [("kivi", {"group_size": 16}), ("qjl", {"value_group_size": 16})])
def test_accounted_bits_with_a_partial_channel_group(name, params):
    # d = 40 is not a multiple of the group (16): each token's channels make 3 groups, the
    # last of 8 (the dims above are multiples of every group size they use)
    sdef, full = parse_scheme_name(name, params)
    for n_tokens in (1, 31, 100):
        budget = build(name, 2, 40, params).bits_per_coord(n_tokens)
        assert budget.total == pytest.approx(sdef.expected_bits(2, 40, n_tokens, **full), rel=1e-12)
        groups = n_tokens - min(n_tokens, 32) if name == "kivi" else n_tokens
        part = budget.breakdown["value_" + ("scales" if name == "kivi" else "scale_zero")]
        assert part * n_tokens * 40 == pytest.approx((1 if name == "kivi" else 2) * 16 * 3 * groups, rel=1e-12)


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_stored_bytes_equal_accounted_bits(name, params):
    # d = 128 and N = 96 (64 tokens past a 32-token window, two groups of 32): every
    # stored part is a whole number of bytes, so the arrays hold exactly the bits counted.
    # float32 input: the identity scheme is accounted as float32.
    n_tokens, d = 96, 128
    K, V = kv((n_tokens, d), np.float32, seed=2)
    for bits in budgets(name):
        scheme = build(name, bits, d, params)
        stored = scheme.quantize(K, V).nbytes * 8
        assert stored == 2 * scheme.bits_per_coord(n_tokens).total * n_tokens * d


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_stored_bytes_cover_accounted_bits(name, params):
    # Any shape and settings: sub-byte fields (outlier indices, odd code tails) are held
    # in whole bytes, so the arrays hold at least the bits counted, and not much more.
    n_tokens, d = 101, 96
    K, V = kv((n_tokens, d), np.float32, seed=3)
    for p in (params, variant(name, params)):
        scheme = build(name, budgets(name)[0], d, p)
        counted = round(2 * scheme.bits_per_coord(n_tokens).total * n_tokens * d, 6)
        assert counted <= scheme.quantize(K, V).nbytes * 8 <= 1.1 * counted


# ------------------------------------------------------------------ zero and seeds
@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_zero_vectors_decode_to_zero(name, params):
    zeros = np.zeros((2, 40, 64))
    scheme = build(name, budgets(name)[0], 64, params)
    for out in (scheme.dequantize(scheme.quantize(zeros, zeros)), scheme.roundtrip(zeros, zeros)):
        for x in out:
            np.testing.assert_array_equal(x, 0.0)
    if scheme_def(name).token_group(parse_scheme_name(name, params)[1]) == 1:
        # per-vector schemes: a zero row among others decodes to zero (shared group
        # statistics, e.g. KIVI's per-channel min/max, only promise it for zero groups)
        K, V = kv((40, 64), np.float64, seed=4)
        K[5], V[9] = 0.0, 0.0
        K_hat, V_hat = scheme.roundtrip(K, V)
        assert np.all(K_hat[5] == 0) and np.all(V_hat[9] == 0)


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_seeds_reproduce_and_differ_exactly_when_randomized(name, params):
    K, V = kv((64, 64), np.float64, seed=5)
    for p in (params, variant(name, params)):
        sdef, full = parse_scheme_name(name, p)
        a, b, c = (build(name, budgets(name)[0], 64, p, seed=s) for s in (5, 5, 6))
        out = [s.dequantize(s.quantize(K, V)) for s in (a, b, c)]
        assert all(np.array_equal(x, y) for x, y in zip(out[0], out[1]))
        differs = any(not np.array_equal(x, y) for x, y in zip(out[0], out[2]))
        assert differs == sdef.randomized(full)


def test_token_groups_come_from_the_parameter():
    for name, d in REGISTRY.items():
        if d.token_group_param is None:
            assert d.token_group(dict(d.example_params)) == 1
        else:
            assert d.token_group({**d.example_params, d.token_group_param: 5}) == 5
            with pytest.raises(ValueError, match=d.token_group_param):
                d.token_group({d.token_group_param: 0})


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_bad_budget_and_parameters_name_the_argument(name, params):
    sdef = scheme_def(name)
    if sdef.fixed_budget:
        scheme = build(name, None, 64, params)
        if scheme.bits is not None:  # the budget is the mean of the name's or params' bits
            with pytest.raises(ValueError, match="bits"):
                build(name, scheme.bits + 1, 64, params)
    else:
        for bits in (sdef.min_bits - 1, sdef.max_bits + 1):
            with pytest.raises(ValueError, match=rf"bits must be an integer in \[{sdef.min_bits}, {sdef.max_bits}\]"):
                build(name, bits, 64, params)
        with pytest.raises(TypeError, match="bits must be an integer"):
            build(name, 2.5, 64, params)
    bits = budgets(name)[0]
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['nope'\]"):
        build(name, bits, 64, {**params, "nope": 1})
    fixed = set(parse_scheme_name(name, {})[1])  # K{a}V{b} fixes key_bits, value_bits
    for p in sorted(sdef.params - fixed):
        with pytest.raises(ValueError, match=p):
            build(name, bits, 64, {**params, p: BAD[p]})
    for p in sorted(fixed):
        with pytest.raises(ValueError, match="fixes key_bits"):
            build(name, bits, 64, {**params, p: 1 + parse_scheme_name(name, {})[1][p] % 8})
    with pytest.raises(ValueError, match=r"dim must be an integer in \[2, inf\]"):
        build(name, bits, 1, params)
    with pytest.raises(ValueError, match=r"draws must be an integer in \[1, inf\]"):
        build(name, bits, 64, params, draws=0)


@pytest.mark.parametrize("bad", ["nope", "K9V2", "K0V1", "K4V", "k4v2", "kv", ""])
def test_bad_names(bad):
    with pytest.raises(ValueError, match="name must be one of"):
        kvstats.make_scheme(bad, 4, 64)
    with pytest.raises(ValueError, match="name must be one of"):
        scheme_def(bad)


def test_name_type():
    with pytest.raises(TypeError, match="name must be a scheme name string"):
        kvstats.make_scheme(3, 4, 64)


def _bad_inputs(dim):
    K, V = kv((20, dim), np.float64, seed=5)
    nan, inf = K.copy(), V.copy()
    nan[3, 5], inf[2, 1] = np.nan, np.inf
    return {"short V": (K, V[:19]), "wrong dim": (K[:, :32], V[:, :32]), "nan K": (nan, V),
            "inf V": (K, inf), "1-D": (K[0], V[0]), "strings": (K.astype(str), V),
            "empty": (K[:0], V[:0]), "ragged": ([[1.0], [1.0, 2.0]], V)}


def _raised(fn):
    with pytest.raises((ValueError, TypeError)) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_bad_arrays_raise_the_same_error_in_quantize_and_roundtrip(name, params):
    scheme = build(name, budgets(name)[0], 64, params)
    for label, (K, V) in _bad_inputs(64).items():
        expected = _raised(lambda: scheme.quantize(K, V))
        assert _raised(lambda: scheme.roundtrip(K, V)) == expected, label
    K, V = kv((20, 64), np.float64, seed=6)
    with pytest.raises(TypeError, match="SchemeCodes"):
        scheme.dequantize((K, V))
    other_name, other_params = next(case for case in CASES if case[0] != name)
    other = build(other_name, budgets(other_name)[0], 64, other_params).quantize(K, V)
    with pytest.raises(ValueError, match=f"made by scheme '{other_name}'"):
        scheme.dequantize(other)


# ------------------------------------------------------------------ coders, export, theory
@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_describe_names_each_coder(name, params):
    scheme = build(name, budgets(name)[0], 64, params)
    info = scheme.describe()
    assert info["scheme"] == name and info["dim"] == 64
    assert isinstance(info["key"]["coder"], str) and isinstance(info["value"]["coder"], str)
    assert info["params"] == parse_scheme_name(name, params)[1]


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_export_exactly_when_gpu(name, params):
    scheme = build(name, budgets(name)[-1], 96, params, seed=3)
    if not scheme_def(name).gpu:
        with pytest.raises(ValueError, match="GPU export"):
            scheme.export()
        return
    ex = scheme.export()
    assert isinstance(ex, SchemeExport) and ex.name == name and ex.dim == 96
    for side, coder in ((ex.key, scheme.key_coder), (ex.value, scheme.value_coder)):
        assert side.coder in ("mse", "prod") and side.dim == 96
        assert side.centroids.shape == (2 ** side.bits,)
        assert side.boundaries.shape == (2 ** side.bits - 1,)
        if side.signs is not None:
            assert side.signs.shape == (side.dim_padded,) and np.all(np.abs(side.signs) == 1)
        assert (side.sketch is None) == (side.coder == "mse") == (side.sketch_scale == 0.0)
        assert side.bits + (side.coder == "prod") == coder.nominal_bits
    with pytest.raises(ValueError, match="draws"):
        build(name, budgets(name)[-1], 96, params, draws=2).export()
    if "rotation" in scheme_def(name).params:
        with pytest.raises(ValueError, match="rotation"):
            build(name, budgets(name)[-1], 96, {**params, "rotation": "haar"}).export()


@pytest.mark.parametrize("name,params", [c for c in CASES if not scheme_def(c[0]).fixed_budget],
                         ids=[n for n in IDS if not scheme_def(n).fixed_budget])
def test_error_decreases_with_bits(name, params):
    rng = np.random.default_rng(8)
    K, V = rng.standard_normal((2, 2, 128, 64))
    errors = []
    for bits in range(scheme_def(name).min_bits, 7):
        K_hat, V_hat = build(name, bits, 64, params, seed=0).roundtrip(K, V)
        errors.append(np.mean((K - K_hat) ** 2) + np.mean((V - V_hat) ** 2))
    assert np.all(np.diff(errors) < 0), errors


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_lossy_unless_stored_at_full_precision(name, params):
    # guards the bit-exact comparisons above against a roundtrip (and dequantize) that
    # return their input: only a 32-bit side (identity) may reproduce it
    K, V = kv((200, 64), np.float64, seed=9)
    scheme = build(name, budgets(name)[0], 64, params)
    budget = scheme.bits_per_coord(200)
    for x, x_hat, nominal in zip((K, V), scheme.roundtrip(K, V),
                                 (budget.key_nominal, budget.value_nominal)):
        assert np.array_equal(x_hat, x) == (nominal >= 32)


@pytest.mark.parametrize("name,params", CASES, ids=IDS)
def test_key_theory_predicts_the_key_error(name, params):
    sdef, full = parse_scheme_name(name, params)
    if sdef.key_theory is None:
        assert sdef.key_rel_mse(3, 128) is None
        return
    # Gaussian keys, d = 128 (no padding), 4,000 keys: the mean relative error is within
    # a few percent of the closed form (exact law for MSE; QJL reconstruction for prod).
    K = np.random.default_rng(7).standard_normal((4000, 128))
    for bits in range(max(sdef.min_bits, 2), 5):
        scheme = build(name, bits, 128, params, seed=bits)
        K_hat, _ = scheme.roundtrip(K, K)
        measured = np.mean(np.sum((K - K_hat) ** 2, -1) / np.sum(K ** 2, -1))
        assert measured == pytest.approx(sdef.key_rel_mse(bits, 128), rel=0.05)
