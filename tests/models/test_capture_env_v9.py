"""capture records the environment that shapes its floats (referee T8, F2): ``meta["env"]``
holds the CPU, torch's CPU kernels and threads, numpy's BLAS (numeric_env), the attention
implementation, numpy/gguf versions, the kvstats revision and the batch size, and the
file reads it back as written. Before, a capture recorded none of these, so a changed
fingerprint (2026-12-02 vs 2026-12-04) could not be explained from the records.

A tiny random Llama (no download).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _tiny_llama import CharTokenizer, tiny_llama  # noqa: E402
from kvstats.data.capture_format import read_capture, read_header  # noqa: E402
from kvstats.models import capture  # noqa: E402
from kvstats.sweep.numeric_env import numeric_env  # noqa: E402

TEXTS = ["The quick brown fox jumps.", "Pack my box with jugs!", "Sphinx of black quartz."]
ENV_KEYS = {"cpu", "cpu_capability", "machine", "simd", "blas", "blas_core", "torch_threads",
            "attn_implementation", "numpy", "gguf", "kvstats_revision", "batch_size"}


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(vocab=97, hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, max_positions=64)
    return model, CharTokenizer(97)


def test_the_environment_is_written_and_read_back(tiny, tmp_path):
    model, tok = tiny
    threads = torch.get_num_threads()
    cap = capture(model, tok, TEXTS, max_tokens=8, batch_size=2, path=tmp_path / "c.npz")
    env = cap.meta["env"]
    assert set(env) == ENV_KEYS
    assert env["batch_size"] == 2 and env["torch_threads"] == threads
    assert env["attn_implementation"] == model.config._attn_implementation == "eager"
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["numpy"] == np.__version__
    assert {k: env[k] for k in numeric_env()} == numeric_env()     # the sweep's helper, reused
    assert isinstance(env["cpu"], str) and env["cpu"]
    rev = env["kvstats_revision"]
    assert rev is None or (set(rev) == {"revision", "dirty"} and len(rev["revision"]) == 40)
    assert read_capture(tmp_path / "c.npz")[3]["env"] == env                  # as written
    assert read_capture(tmp_path / "c.npz", mapped=True)[3]["env"] == env


def test_the_batch_size_changes_the_records_not_the_arrays(tiny, tmp_path):
    # the same floats (a capture does not depend on its batch size), other records: the
    # content fingerprints differ, the arrays fingerprints do not
    model, tok = tiny
    a = capture(model, tok, TEXTS, max_tokens=8, batch_size=1, path=tmp_path / "a.npz")
    b = capture(model, tok, TEXTS, max_tokens=8, batch_size=3, path=tmp_path / "b.npz")
    assert a.meta["env"]["batch_size"] == 1 and b.meta["env"]["batch_size"] == 3
    ha, hb = read_header(tmp_path / "a.npz"), read_header(tmp_path / "b.npz")
    if np.array_equal(a.K, b.K) and np.array_equal(a.V, b.V) and np.array_equal(a.q, b.q):
        assert ha.arrays_fingerprint == hb.arrays_fingerprint
    else:   # a BLAS whose rounding depends on the batch: then the arrays fingerprint must say so
        assert ha.arrays_fingerprint != hb.arrays_fingerprint
    assert ha.fingerprint != hb.fingerprint


def test_a_bad_batch_size_is_refused_before_the_run(tiny):
    from kvstats.models.kv_capture import capture_env

    with pytest.raises(ValueError, match="batch_size"):
        capture_env(tiny[0], 0)
