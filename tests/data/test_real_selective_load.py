"""load_trials reads only the selected layers and KV heads (and only q's last position)
from a capture file, through memory maps, with exactly the trials the whole-file path
gave (a sweep's real case held the whole file in each worker: critic_sweep20 #2)."""

import json
import tracemalloc

import numpy as np
import pytest

from kvstats.data.capture_format import read_capture
from kvstats.data.real import load_capture, load_trials


def _capture(path, save=np.savez, byteorder="<"):
    rng = np.random.default_rng(5)
    dt = np.dtype(f"{byteorder}f4")
    K = rng.standard_normal((3, 4, 2, 16, 8)).astype(dt)
    V = rng.standard_normal((3, 4, 2, 16, 8)).astype(dt)
    q = rng.standard_normal((3, 4, 6, 16, 8)).astype(dt)
    save(path, K=K, V=V, q=q, meta=json.dumps({"model": "toy", "layers": [0, 5, 9, 12]}))
    return path


def _whole_file(path, layer, head):
    """The trials as load_trials selected them from the whole file (its code before the
    maps): every array read, then sliced."""
    K, V, q, meta = load_capture(path)
    held = meta["layers"]
    slots = [held.index(i) for i in ([layer] if isinstance(layer, int) else layer or held)]
    heads = [head] if isinstance(head, int) else head or list(range(K.shape[2]))
    g = q.shape[2] // K.shape[2]
    q_heads = [h * g + j for h in heads for j in range(g)]
    return (K[:, slots][:, :, heads], V[:, slots][:, :, heads], q[:, slots][:, :, q_heads, -1:, :])


@pytest.mark.parametrize("save, byteorder", [(np.savez, "<"), (np.savez, ">"),
                                             (np.savez_compressed, "<")])
@pytest.mark.parametrize("layer, head", [(None, None), (5, 1), ([12, 0], [1, 0]), ([9], None)])
def test_the_selection_is_the_whole_file_path_bit_for_bit(tmp_path, save, byteorder, layer, head):
    p = _capture(tmp_path / "c.npz", save, byteorder)
    t = load_trials(p, layer=layer, head=head)
    K, V, q = _whole_file(p, layer, head)
    n = K.shape[0] * K.shape[1] * K.shape[2]
    for got, want in ((t.K, K), (t.V, V)):
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want.reshape(n, 16, 8), strict=True)
    np.testing.assert_array_equal(t.q, q.reshape(n, 3, 8), strict=True)


def _big_capture(tmp_path):
    """A capture of 4 texts, 8 layers, 8 KV heads (32 query heads), 64 tokens, d = 16; its
    path, the bytes of its K, V and q, and its K."""
    rng = np.random.default_rng(0)
    K = rng.standard_normal((4, 8, 8, 64, 16)).astype(np.float32)
    q = rng.standard_normal((4, 8, 32, 64, 16)).astype(np.float32)
    p = tmp_path / "big.npz"
    np.savez(p, K=K, V=K, q=q, meta=json.dumps({}))
    return p, K.nbytes * 2 + q.nbytes, K


def test_only_the_selection_is_read_into_memory(tmp_path):
    # tracemalloc counts numpy's array buffers (not a map's pages): reading the file whole
    # allocates all of K, V, q (2.5 MB here); one layer and KV head of 8 x 8 is 1/64 of K
    # and V and 1/64 of q's last position (under 0.1 MB with the trials' own copies)
    p, whole, _ = _big_capture(tmp_path)
    assert isinstance(read_capture(p, mapped=True)[2], np.memmap)
    tracemalloc.start()
    try:
        t = load_trials(p, layer=3, head=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t.K.shape == (4, 64, 16) and t.q.shape == (4, 4, 16)
    assert peak < whole / 20, (peak, whole)


def test_capture_spectra_reads_only_its_selection(tmp_path):
    # the spectra of one layer and KV head (for the rate–distortion bound) read that slice
    # alone, through the maps, and equal those of the whole-file arrays
    from kvstats.data.spectrum import capture_spectra, measured_spectrum

    p, whole, K = _big_capture(tmp_path)
    want = measured_spectrum(K[:, 3, 2].reshape(1, 1, 4 * 64, 16)).eigenvalues[0, 0]
    tracemalloc.start()
    try:
        k, v = capture_spectra(p, layer=3, head=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(k.eigenvalues[0], want, rtol=1e-12)
    assert peak < whole / 20, (peak, whole)
