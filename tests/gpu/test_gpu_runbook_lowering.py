"""The GPU runbook's device steps, lowered for CUDA from the CPU at their exact shapes and
dtypes through both Pallas backends (tests/gpu/_runbook_calls.py lists the calls): a shape
that only the device runs cannot fail there on a lowering rule, a block shape or Mosaic's
shared-memory check that these CPU tests never saw."""

import re
from pathlib import Path

import pytest

import test_gpu_device
from _runbook_calls import _CACHE_CALLS, LABELS, SMALL_LABELS, runbook_calls


def test_labels_name_every_call_in_order():
    # LABELS parametrizes the test below without building the calls: it must list them all
    assert list(runbook_calls()) == LABELS and LABELS[:len(SMALL_LABELS)] == SMALL_LABELS


def test_the_calls_follow_the_runbook():
    # the runbook's bench arguments on a GPU (schemes and tokens) and the device test's cache
    # length are among the lowered calls: changing one without the list fails here
    text = (Path(__file__).parents[2] / "experiments" / "gpu_runbook.sh").read_text()
    words = re.search(r'bench_default="(--require-gpu[^"]*)"', text).group(1).split()

    def values(flag):
        i = words.index(flag) + 1
        return words[i:next((j for j in range(i, len(words)) if words[j].startswith("--")), len(words))]

    lowered = {(f"{name}:{bits}", n) for name, bits, _, H, n, *_ in _CACHE_CALLS if H == 8}
    assert {(s, int(n)) for s in values("--schemes") for n in values("--tokens")} <= lowered
    assert {("KQV:4", test_gpu_device.N_TOKENS), ("QKQV:3", test_gpu_device.N_TOKENS)} <= lowered


@pytest.mark.parametrize("label", LABELS)
def test_runbook_call_lowers_for_cuda(label, backend, lower_cuda, lowers_through):
    fn, args = runbook_calls()[label]
    text = lower_cuda(lambda *a: fn(backend, *a), *args)
    assert lowers_through(text, backend)
    if label.startswith("decode_attention"):
        assert "kvstats_quantized_decode_attention" in text
