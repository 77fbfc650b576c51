"""The device test's comparison of a backend-encoded cache with the reference encode
(tests/gpu/_gpu_helpers.py ``cache_disagreement``), on the CPU: a code that moves takes its
token's residual signs with it, and only that token's planes count; signs that differ where
the codes agree, and norms off by more than a float16 step, count."""

import numpy as np

from _gpu_helpers import cache_disagreement, manual_spec
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import quantize_kv

H, N = 2, 512


def _caches(spec, params):
    K, V = np.random.default_rng(0).normal(size=(2, H, N, 128)).astype(np.float32)
    ref = quantize_kv(K, V, spec, params, impl="reference")
    return ref, {f: None if a is None else np.array(a) for f, a in zip(ref._fields, ref)}


def test_a_moved_code_counts_once_and_signs_of_unmoved_tokens_count():
    spec, params = make_cache_spec("QKQV", 3, 128, seed=0)  # planes and signs on both sides
    ref, parts = _caches(spec, params)
    assert set(cache_disagreement(ref, ref).values()) == {0.0}
    # token 7 of head 1: one key code moves (one bit of one plane byte), and with it about
    # half its residual's sign bits: here all of its sign bytes
    parts["k_planes"][1, 0, 7, 3] ^= 1
    parts["k_signs"][1, 7] ^= 0xFF
    got = cache_disagreement(ref._replace(**parts), ref)
    assert got["k_planes"] == 1 / parts["k_planes"].size
    assert got["k_signs"] == 0.0 and got["v_signs"] == 0.0
    # one sign byte of a token whose codes agree, and a norm two float16 steps off
    parts["k_signs"][0, 9, 5] ^= 0x10
    parts["v_snorms"][0, 3] = np.float16(parts["v_snorms"][0, 3]) * np.float16(1 + 2 ** -9)
    got = cache_disagreement(ref._replace(**parts), ref)
    assert got["k_signs"] == 1 / ((H * N - 1) * parts["k_signs"].shape[-1])
    assert got["v_snorms"] == 1 / (H * N) and got["v_norms"] == 0.0 and got["k_snorms"] == 0.0


def test_one_float16_step_passes_and_signs_without_codes_count_everywhere():
    spec, params = manual_spec(128, 0, 3, 128, 0)  # pure QJL keys: no key planes
    ref, parts = _caches(spec, params)
    parts["k_signs"][1, 7] ^= 0xFF
    x = parts["v_norms"][1, 2]
    parts["v_norms"][1, 2] = np.nextafter(x, np.float16(np.inf))  # one float16 step: rounding
    got = cache_disagreement(ref._replace(**parts), ref)
    assert got["k_signs"] == parts["k_signs"].shape[-1] / parts["k_signs"].size
    assert got["v_norms"] == 0.0 and "k_planes" not in got
