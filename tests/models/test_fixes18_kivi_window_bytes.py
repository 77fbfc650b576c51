"""kivi's full-precision window in a QuantizedCache counts the bytes it is held in.

The cache holds its tail (kivi's 32-token window and incomplete group) in the model's
dtype -- float32 for a float32 model, 4 bytes a value, unlike the numpy scheme's float16
window (KIVIQuantizer.bits_per_coord counts 16 bits) -- and ``ratio_to_fp16`` divides
those bytes by an fp16 cache's (2 bytes a value). The report now names the dtype it
counted (``tail_dtype``); every count is checked against the tensors actually held.
"""

import pytest
import torch

from kvstats.models import QuantizedCache
from kvstats.models.peers import held_bytes

HEADS, DIM, WINDOW, GROUP = 3, 64, 32, 32


@pytest.mark.parametrize("dtype,size", [(torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2)])
def test_kivi_window_counts_the_bytes_of_its_held_dtype(dtype, size):
    cache = QuantizedCache("kivi", 2, seed=0, window=WINDOW, group_size=GROUP)
    g = torch.Generator().manual_seed(0)
    for n in (100, 1, 1, 1):          # a prefill, then decode steps
        cache.update(*torch.randn(2, 1, HEADS, n, DIM, generator=g).to(dtype), layer_idx=0)
    layer, rep = cache.layers[0], cache.memory_report()
    tokens = 103
    tail = layer.tail_keys.nbytes + layer.tail_values.nbytes          # what is held
    assert layer.tail_keys.dtype == dtype and rep["tail_dtype"] == str(dtype).removeprefix("torch.")
    assert rep["tail_bytes"] == tail == layer.tail_keys.shape[-2] * HEADS * 2 * DIM * size
    assert layer.tail_keys.shape[-2] >= WINDOW
    codes = sum(b.view().nbytes for side in (layer.key_side, layer.value_side)
                for b in side.store.values())                         # packed codes, float16 scales/zeros
    assert rep["code_bytes"] == codes and rep["stored_bytes"] == codes + tail
    fp16 = 2 * HEADS * 2 * DIM                                        # K and V, 2 bytes a value
    assert rep["fp16_bytes_per_token"] == fp16
    assert rep["ratio_to_fp16"] == rep["stored_bytes"] / tokens / fp16
    # the generic walk over every tensor the cache holds agrees (kivi holds no fixed state)
    assert held_bytes(cache) == rep["held_bytes"] + rep["fixed_bytes"]
