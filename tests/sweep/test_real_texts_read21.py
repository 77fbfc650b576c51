"""A real case reads only the texts its first n_trials need (trials come text by text)."""
import json

import numpy as np
import pytest

from kvstats.data import real
from kvstats.sweep import run_sweep, sources

N_TEXTS, N_LAYERS, N_KV, GROUP, N, D = 5, 2, 2, 2, 16, 8


def _capture(path):
    rng = np.random.default_rng(0)
    K = rng.standard_normal((N_TEXTS, N_LAYERS, N_KV, N, D)).astype(np.float32)
    q = rng.standard_normal((N_TEXTS, N_LAYERS, N_KV * GROUP, N, D)).astype(np.float32)
    np.savez(path, K=K, V=K[::-1].copy(), q=q, meta=json.dumps({"model": "fake", "group_size": GROUP}))
    return path


@pytest.mark.parametrize("n_trials, layer, texts_read", [(5, [0, 1], 2), (4, [1], 2), (20, None, 5)])
def test_a_real_case_reads_only_the_texts_it_needs(tmp_path, monkeypatch, n_trials, layer, texts_read):
    path = _capture(tmp_path / "cap.npz")
    seen = []
    original = real.load_trials

    def spy(*args, **kw):
        out = original(*args, **kw)
        seen.append(sorted(set(out.meta["text"])))
        return out

    monkeypatch.setattr(sources, "load_trials", spy)
    cfg = {"schemes": ["KV"], "budgets": [3], "dims": [D], "n_keys": [N], "n_trials": n_trials,
           "distributions": [{"name": "real", "params": {"path": str(path), "layer": layer}}]}
    with pytest.warns(UserWarning) if n_trials % (N_KV * len(layer or range(N_LAYERS))) else _no_warning():
        res = run_sweep(cfg, executor="serial", progress=False)
    assert seen and all(s == list(range(texts_read)) for s in seen)
    # the trials are those of the whole capture's first n_trials (the same numbers)
    whole = original(path, layer=layer).subset(slice(0, n_trials))
    assert res.frame["cluster"].tolist() == whole.meta["cluster"]


def _no_warning():
    import contextlib
    return contextlib.nullcontext()


def test_load_trials_selects_texts(tmp_path):
    path = _capture(tmp_path / "cap.npz")
    whole = real.load_trials(path)
    two = real.load_trials(path, texts=[1, 3])
    per = N_LAYERS * N_KV
    np.testing.assert_array_equal(two.K, np.concatenate([whole.K[per:2 * per], whole.K[3 * per:4 * per]]))
    assert two.meta["cluster"] == [1] * per + [3] * per
    with pytest.raises(ValueError, match=r"texts must not repeat"):
        real.load_trials(path, texts=[1, 1])
    with pytest.raises(ValueError, match=r"texts"):
        real.load_trials(path, texts=5)
