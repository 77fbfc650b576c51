"""What peers.py and docs/real_model.md say of a peer's decode step (referee R2, finding 4):
quanto's returns the current token's raw key, fp8's codes it with the frozen scale. A
documentation fix: this pins the behaviour the corrected sentence states (transformers
5.x's QuantizedLayer.update and Fp8QuantizedLayer.update), so that a transformers change
shows here.
"""

import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from kvstats.models.peers import make_peer_cache  # noqa: E402

NAMES = ["hf:fp8", pytest.param("hf:quanto-int4", marks=pytest.mark.skipif(
    importlib.util.find_spec("optimum.quanto") is None, reason="optimum-quanto not installed"))]


@pytest.mark.parametrize("name", NAMES)
def test_the_current_token_of_a_decode_step(name):
    from transformers import LlamaConfig

    cfg = LlamaConfig(num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, hidden_size=64)
    cache = make_peer_cache(name, cfg)
    g = torch.Generator().manual_seed(0)
    first = torch.randn(1, 1, 1, 64, generator=g)
    K, _ = cache.update(first, first, 0)
    assert torch.equal(K, first)                           # the prefill: raw, for both
    new = 0.5 * torch.randn(1, 1, 1, 64, generator=g)
    K, _ = cache.update(new, new, 0)
    raw = torch.equal(K[..., -1:, :], new)
    assert raw is (name != "hf:fp8"), float((K[..., -1:, :] - new).abs().max())
