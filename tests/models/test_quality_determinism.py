"""kl_quality reruns are bit-identical, whatever the thread settings of the process.

A tiny random Llama (transformers' LlamaConfig: 2 layers, hidden 64; no download) stands
in for SmolLM2: the sources of variation are the same kernels. Two fresh interpreters run
the same kl_quality calls, one with 1 torch thread and 1 OpenBLAS thread, the other with 2
of each and another PYTHONHASHSEED; every number must agree bit for bit. Without the
pinning (``threads=None``) the two runs differ on this machine (checked when the pinning
was added: torch's GEMMs change the codes-path KL, OpenBLAS's the Haar-rotated KQV).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]

# Built in each interpreter: the model's weights come from torch.manual_seed(0).
_SETUP = r'''
import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 512


class CharTokenizer:
    """Characters to ids, with a leading BOS (the call signature kl_quality uses)."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1] + [(ord(c) * 7919) % VOCAB for c in text]}


def tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=64, max_position_embeddings=512)
    model = LlamaForCausalLM(config).eval()
    model.config._attn_implementation = "eager"
    model.requires_grad_(False)
    return model


TEXTS = ["The quick brown fox jumps over the lazy dog. " * 3, "Pack my box with five dozen jugs. " * 2,
         "ab"]
'''

_RUN = _SETUP + r'''
import hashlib, json, sys
from kvstats.models import kl_quality

torch.set_num_threads(int(sys.argv[1]))  # what the process had before kl_quality pins it
model, tok = tiny_llama(), CharTokenizer()
digests = {}
for label, configs, extra in (
        ("codes path", [("KQV", 4), ("K4V2", None)], {}),
        ("numpy coder", [("KQV", 3)], {"rotation": "haar"}),
        ("decode", [("kivi", 2)], {"window": 8, "mode": "decode", "prefill_tokens": 16})):
    df = kl_quality(model, tok, TEXTS, configs, seed=3, **extra)
    numbers = df[["kl", "nll_ref", "nll_quant", "top1_quant"]].to_numpy(dtype="float64")
    digests[label] = [hashlib.sha256(numbers.tobytes()).hexdigest(), float(df.kl.mean())]
print(json.dumps({"digests": digests, "threads_after": torch.get_num_threads()}))
'''


def _run(threads: int, hash_seed: str) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _RUN, str(threads)], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reruns_in_fresh_processes_are_bit_identical_across_thread_settings():
    one, two = _run(1, "0"), _run(2, "12345")
    assert one["digests"] == two["digests"]
    # kl_quality restored the process's own setting
    assert (one["threads_after"], two["threads_after"]) == (1, 2)
    # and the runs measured something: the quantized caches really do change the model
    assert all(mean > 0 for _, mean in one["digests"].values())


# ------------------------------------------------------------------ in-process checks
@pytest.fixture(scope="module")
def tiny():
    namespace: dict = {}
    exec(_SETUP, namespace)  # the same model and tokenizer as the subprocesses
    return namespace["tiny_llama"](), namespace["CharTokenizer"](), namespace["TEXTS"]


def test_pinned_threads_restored_and_same_numbers_in_process(tiny):
    import torch

    from kvstats.models import kl_quality

    model, tok, texts = tiny
    torch.set_num_threads(2)  # the module fixture restores the suite's setting afterwards
    # the 3-token text: its few-token matmuls round differently on 2 threads (unpinned)
    a = kl_quality(model, tok, texts, "KQV", 4, seed=1)
    assert torch.get_num_threads() == 2
    b = kl_quality(model, tok, texts, "KQV", 4, seed=1, threads=1)
    np.testing.assert_array_equal(a.kl.to_numpy(), b.kl.to_numpy())
    # another seed is another draw of the rotation: the check above can tell draws apart
    c = kl_quality(model, tok, texts, "KQV", 4, seed=2)
    assert hashlib.sha256(c.kl.to_numpy().tobytes()).digest() != \
        hashlib.sha256(a.kl.to_numpy().tobytes()).digest()


def test_threads_validated(tiny):
    from kvstats.models import kl_quality

    model, tok, texts = tiny
    with pytest.raises(ValueError, match="threads"):
        kl_quality(model, tok, texts[:1], "KQV", 4, threads=0)
    with pytest.raises(TypeError, match="threads"):
        kl_quality(model, tok, texts[:1], "KQV", 4, threads=1.5)
