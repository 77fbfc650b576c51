"""The code-reading cache on the decoder architectures of transformers 5.x (tiny random
models): decode steps read from the codes give the scores of the model's own attention
over the decoded cache, or a clear error. docs/real_model.md ("Other architectures")
cites this file; tests/models/test_code_attention.py keeps six of them in the fast suite.
"""

import pytest
import torch

from kvstats.models import QuantizedCache

pytestmark = pytest.mark.slow

READ = ["Qwen2", "Qwen3", "Qwen3Moe", "Phi", "Phi3", "Gemma", "Gemma3Text", "Granite", "Olmo2", "Olmo3",
        "StableLm", "Cohere", "Cohere2", "Mistral", "Ministral", "Starcoder2", "GPTNeoX", "SmolLM3", "Glm",
        "Ernie4_5", "Exaone4", "Apertus", "Arcee"]


def _model(arch, attn):
    import transformers

    cfg_cls = getattr(transformers, f"{arch}Config")
    model_cls = getattr(transformers, f"{arch.removesuffix('Text')}ForCausalLM")
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=64, pad_token_id=0,
                  attn_implementation=attn)
    return model_cls(cfg).eval()


def _scores(model, cache):
    ids = torch.randint(2, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, cache=cache, max_new_tokens=5, do_sample=False,
                             pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    return torch.stack(out.scores)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", READ)
def test_decode_steps_read_from_codes_match_the_models_attention(arch, attn):
    model = _model(arch, attn)
    codes = _scores(model, QuantizedCache("KQV", 4, seed=1))
    decoded = _scores(model, QuantizedCache("KQV", 4, seed=1, attention="model"))
    torch.testing.assert_close(codes, decoded, rtol=0, atol=1e-5)


@pytest.mark.parametrize("arch,error,match", [
    ("Gemma2", ValueError, "softcap is not supported.*attention='model'"),
    ("GptOss", ValueError, "s_aux is not supported.*attention='model'"),
    ("Bloom", TypeError, "handle on its codes.*attention='model'"),
    ("Mpt", TypeError, "handle on its codes.*attention='model'"),
    ("Qwen3Next", NotImplementedError, "attention layers only.*DynamicCache")])
def test_what_the_code_reading_attention_cannot_do_is_refused(arch, error, match):
    model = _model(arch, "eager")
    with pytest.raises(error, match=match):
        _scores(model, QuantizedCache("KQV", 4, seed=1))
