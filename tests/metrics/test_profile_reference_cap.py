"""A caller's reference dict (the sweep keeps one per chunk of trials for all of a case's
cells) holds at most ``_REFERENCE_BYTES``: with many queries per trial the logits (n_q per
key) would otherwise outgrow the trials (measured: 1.1 GB held at n_q = 128, d = 128,
N = 1024 before the cap). Past the cap a chunk's reference is recomputed per call, the same
operations on the same inputs, so every number is unchanged bit for bit."""

import numpy as np
import pandas as pd

import kvstats
from kvstats.metrics import error_profile
from kvstats.metrics import profile as profile_mod


def _held(reference):
    return sum(x.nbytes for r in reference.values() for x in r)


def _two_reconstructions(seed=3):
    t = kvstats.sample("gaussian", 40, 64, 16, seed=seed, n_queries=24)
    rng = np.random.default_rng(seed)
    return t, [(t.K + s * rng.standard_normal(t.K.shape), t.V + s * rng.standard_normal(t.V.shape))
               for s in (0.1, 0.3)]


def test_the_reference_dict_stays_under_its_cap_and_the_numbers_do_not_move(monkeypatch):
    t, hats = _two_reconstructions()
    monkeypatch.setattr(profile_mod, "_CHUNK_ELEMENTS", 64 * 24 * 4)   # 4 trials per chunk
    one_chunk = 4 * 24 * (3 * 64 + 16) * 8 + 4 * (64 + 64 + 1) * 8     # ip, logits, logp, pV; norms
    monkeypatch.setattr(profile_mod, "_REFERENCE_BYTES", 3 * one_chunk)
    reference = {}
    for K_hat, V_hat in hats:
        shared = profile_mod._profile(t, K_hat, V_hat, reference=reference)
        assert 0 < _held(reference) <= 3 * one_chunk     # 3 of the 10 chunks kept, not all
        assert len(reference) == 3
        pd.testing.assert_frame_equal(shared, error_profile(t, K_hat, V_hat), check_exact=True)


def test_under_the_cap_every_chunk_is_kept():
    t, hats = _two_reconstructions(seed=4)
    reference = {}
    for K_hat, V_hat in hats:
        shared = profile_mod._profile(t, K_hat, V_hat, reference=reference)
        pd.testing.assert_frame_equal(shared, error_profile(t, K_hat, V_hat), check_exact=True)
    assert len(reference) >= 1 and _held(reference) <= profile_mod._REFERENCE_BYTES
