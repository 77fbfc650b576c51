"""A tiny random Llama and a character tokenizer: the model tests that need no download.

Each test picks its own shapes (GQA groups, head dimensions that pad, several layers);
the weights depend only on the shapes and ``seed`` (``torch.manual_seed`` right before
the model is built).
"""

from __future__ import annotations


class CharTokenizer:
    """Characters to ids ``(ord(c) * multiplier) % vocab`` after a BOS id of 1 (the call
    signature ``capture``, ``kl_quality`` and ``texts.prompt_token_ids`` use)."""

    def __init__(self, vocab: int, multiplier: int = 7919):
        self.vocab, self.multiplier = vocab, multiplier

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1] + [(ord(c) * self.multiplier) % self.vocab for c in text]}


class PasskeyTokenizer:
    """What ``run_retrieval`` asks of a tokenizer: ids from characters (no BOS), digits
    back from ids, an EOS id (the retrieval tests' tiny model answers in digits)."""

    eos_token_id = 2

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + ord(c) % 90 for c in text]}

    def decode(self, ids):
        return "".join(chr(48 + i % 10) for i in ids)

    def convert_tokens_to_ids(self, token):
        return 2


def tiny_llama(*, vocab: int, hidden: int, layers: int, heads: int, kv_heads: int,
               max_positions: int, head_dim: int | None = None, attn: str = "eager", seed: int = 0,
               **config):
    """A randomly initialised ``LlamaForCausalLM`` in eval mode without gradients
    (intermediate size 2 × hidden; ``config`` passes other ``LlamaConfig`` fields)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if head_dim is not None:
        config["head_dim"] = head_dim
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
        attn_implementation=attn, **config)).eval()
    model.requires_grad_(False)
    return model
