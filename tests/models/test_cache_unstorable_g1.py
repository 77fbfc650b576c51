"""Finite states a scheme's format cannot store are refused by the update that brings them.

Before: such a token (e.g. a key whose norm is beyond the float16 norms) entered the
window or kivi's/qjl's/klt's open group and was refused only when a later, valid update
coded it, with an error naming the coder's argument (``x``, ``K``): generation could not
go on. The limits come from the coders (kvstats/quant/coder.py check_norm_range, the
torch SideCoder's norms, uniform.py's float16 zero/scale, blockfmt.py's float16 scale and
minimum, klt.py's float16 mean/scales, and float32 for every coder).
"""

import warnings

import pytest
import torch

from kvstats.models import QuantizedCache

# (scheme, bits, params, window, bad value put in one coordinate of one key, dtype)
CASES = [
    ("KQV", 4, {}, 3, 1e5, torch.float32),              # float16 norms (torch codes)
    ("turboquant_prod", 4, {}, 3, 1e5, torch.float32),
    ("KQV", 4, {"rotation": "haar"}, 3, 1e5, torch.float32),   # numpy MSE/prod coders
    ("qjl", 3, {}, 0, 1e5, torch.float32),              # QJL key norms, open group
    ("kivi", 2, {}, 0, -1e5, torch.float32),            # float16 zero/scale, open group
    ("kivi", 1, {}, 0, 4e4, torch.float32),             # 1 bit: max − min is the scale
    ("q8_0", None, {}, 3, 1e7, torch.float32),          # float16 block scale
    ("q4_1", None, {}, 3, -1e5, torch.float32),         # float16 block minimum
    ("klt", 4, {"group_size": 8}, 0, 1e5, torch.float32),   # float16 mean/scales
    ("fp8_e4m3", None, {}, 3, 1e39, torch.float64),     # float32 (every coder reads it)
    ("nvfp4", None, {}, 3, 1e39, torch.float64),
    ("identity", None, {}, 3, 1e39, torch.float64),
]


def _ids(case):
    return f"{case[0]}-{case[1]}-{'-'.join(f'{k}={v}' for k, v in case[2].items())}w{case[3]}"


def _snapshot(cache):
    layer = cache.layers[0]
    k, v = layer.dequantized()
    return cache.get_seq_length(), layer.n_coded, k.clone(), v.clone()


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
@pytest.mark.parametrize("side", [0, 1])
def test_unstorable_token_refused_at_its_update_state_unchanged(case, side):
    scheme, bits, params, window, bad, dtype = case
    cache = QuantizedCache(scheme, bits, window=window, **params)
    g = torch.Generator().manual_seed(1)

    def r(n):
        return torch.randn(1, 2, n, 64, generator=g).to(dtype)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache.update(r(5), r(5), layer_idx=0)
        before = _snapshot(cache)
        k, v = r(1), r(1)
        (k, v)[side][0, 1, 0, 5] = bad
        arg = ("key_states", "value_states")[side]
        with pytest.raises(ValueError, match=rf"^{arg} must have .* at most .* for layer 0's "
                                             rf"'{scheme}' codes; received ") as info:
            cache.update(k, v, layer_idx=0)
        after = _snapshot(cache)
        assert before[:2] == after[:2]
        assert torch.equal(before[2], after[2]) and torch.equal(before[3], after[3])
        # generation goes on: enough valid steps to code every open group/window
        for _ in range(40):
            cache.update(r(1), r(1), layer_idx=0)
        assert cache.get_seq_length() == 45


def test_refused_first_update_leaves_the_layer_empty():
    cache = QuantizedCache("KQV", 4, window=4)
    k = torch.randn(1, 2, 3, 64)
    k[0, 0, 2, 0] = 1e5
    with pytest.raises(ValueError, match=r"^key_states must have vector norms \(stored as float16\) at most "
                                         r"65504 for layer 0's 'KQV' codes; received 100000"):
        cache.update(k, torch.randn(1, 2, 3, 64), layer_idx=0)
    layer = cache.layers[0]
    assert not layer.is_initialized and layer.get_seq_length() == 0 and layer.tail_keys is None
    # another dtype and shape are then welcome (nothing was held)
    cache.update(torch.randn(1, 3, 2, 64, dtype=torch.float64), torch.randn(1, 3, 2, 64, dtype=torch.float64),
                 layer_idx=0)
    assert cache.get_seq_length() == 2


@pytest.mark.parametrize("scheme, bits, limit", [("KQV", 4, 65504.0), ("q8_0", None, None), ("kivi", 2, 65504.0)])
def test_values_at_the_limit_are_stored(scheme, bits, limit):
    # the refusal is not conservative where the format's limit is per token: a key just
    # inside it is cached and coded (the coder accepts it too)
    cache = QuantizedCache(scheme, bits, window=2)
    k = torch.zeros(1, 1, 1, 64)
    k[..., 0] = 65504.0 if limit else 127 * 65504.0   # q8_0: scale = max|x| / 127
    for _ in range(40):
        cache.update(k, torch.randn(1, 1, 1, 64), layer_idx=0)
    assert cache.get_seq_length() == 40 and cache.layers[0].n_coded > 0


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("kivi", 2), ("q4_0", 4)])
def test_ordinary_states_skip_the_rules_after_one_probe(monkeypatch, name, bits):
    # One reduction per side (shared with the finiteness check) bounds every stored
    # quantity by max|x|·√d; below a coder's smallest limit its rules are not run (they
    # cost tens of µs a layer and token, as much as a decode step's coding): each coder is
    # asked once, on a zero probe, for its limits. States near a limit still get the rules.
    import kvstats.models.cache_layer as cl

    calls = []
    real = cl.storable_limits

    def counting(coder, x):
        calls.append(float(abs(x).max()))
        return real(coder, x)

    monkeypatch.setattr(cl, "storable_limits", counting)
    cache = QuantizedCache(name, bits, seed=0)
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        cache.update(torch.randn(1, 2, 1, 64, generator=g), torch.randn(1, 2, 1, 64, generator=g), layer_idx=0)
    assert calls == [0.0, 0.0]                 # the two probes, nothing else
    big = torch.randn(1, 2, 1, 64, generator=g)
    big[0, 0, 0, 0] = 9000.0                   # 9000·√64 is beyond every coder's smallest limit here
    cache.update(big, big.clone(), layer_idx=0)
    assert len(calls) == 4 and calls[2:] == [9000.0, 9000.0]
