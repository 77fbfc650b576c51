"""Referee RQ's findings F2-F5 on the synthetic data layer (kvstats/data/synthetic.py).

F2: ``low_rank``'s chunks were sized by ``N·d`` alone, so a trial's ``(d, rank)`` basis was
not bounded (17 GB of basis in one chunk at N = 1, d = rank = 512). F3: a ``scale`` (or
``noise``, ``magnitude``) that put the draws below the dtype's smallest normal gave all-zero
or subnormal keys and no error. F4: a registered sampler overflowing float32 was told to
lower built-in parameters it does not have. F5: docs/measurement.md said only ``focused``
keys touch the queries.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import kvstats.data.synthetic as syn
from kvstats import sample
from kvstats.data.register import registered_distribution

ROOT = Path(__file__).resolve().parents[2]
TINY32 = float(np.finfo(np.float32).tiny)


# --- F2: the chunk bounds the basis too, and changes no bit -----------------------------

@pytest.mark.parametrize("N,d,rank", [(16, 128, 128),    # the referee's case (1060 MiB peak)
                                      (1, 512, 512),     # 17 GB of basis in one chunk before
                                      (1024, 128, 128)])
def test_low_rank_chunk_bounds_the_basis(N, d, rank):
    chunk = syn._chunk_trials("low_rank", N, d, {"rank": rank})
    # every array a low_rank trial draws: basis (d, rank), coefficients (N, rank), keys (N, d)
    assert chunk * d * max(N, rank) <= syn._CHUNK_ELEMENTS
    assert chunk * d * max(N, rank) > syn._CHUNK_ELEMENTS // 2     # not needlessly small
    # the other distributions keep their N·d sizing
    assert syn._chunk_trials("gaussian", N, d, {}) == max(1, syn._CHUNK_ELEMENTS // (N * d))


def test_low_rank_qr_input_is_bounded_when_rank_exceeds_n_keys(monkeypatch):
    # Spy on the basis draws that sample() really makes: before the fix one chunk of all 40
    # trials went to one QR of 40 x 32 x 32 = 40960 elements, ten times the bound.
    monkeypatch.setattr(syn, "_CHUNK_ELEMENTS", 4096)
    seen, qr = [], np.linalg.qr
    monkeypatch.setattr(np.linalg, "qr", lambda a, *args, **kw: (seen.append(a.shape), qr(a, *args, **kw))[1])
    sample("low_rank", 40, 2, 32, seed=0, rank=32)
    assert seen and sum(s[0] for s in seen) == 40
    assert max(int(np.prod(s)) for s in seen) <= 4096


@pytest.mark.parametrize("dtype,generator", [(np.float64, 1), (np.float32, 1), (np.float32, 2)])
def test_chunk_size_changes_no_bit(monkeypatch, dtype, generator):
    kw = dict(seed=11, n_queries=3, dtype=dtype, generator=generator, rank=12, query="subspace",
              energy="per_direction", value_distribution="low_rank", value_params={"rank": 5})
    ref = sample("low_rank", 9, 4, 16, **kw)          # one chunk at the default bound
    for elements in (1, 16 * 12, 16 * 12 * 2 + 1, 16 * 12 * 5):   # 1, 1, 2 and 5 trials a chunk
        monkeypatch.setattr(syn, "_CHUNK_ELEMENTS", elements)
        t = sample("low_rank", 9, 4, 16, **kw)
        for a, b in ((t.K, ref.K), (t.V, ref.V), (t.q, ref.q)):
            assert a.tobytes() == b.tobytes()


# --- F3: draws the parameters put below the smallest normal are refused ------------------

@pytest.mark.parametrize("dist,params,dtype,named", [
    ("gaussian", {"scale": 1e-46}, np.float32, "scale=1e-46"),        # all zero before
    ("gaussian", {"scale": 1e-40}, np.float32, "scale=1e-40"),        # subnormal before
    ("gaussian", {"scale": 1e-320}, np.float64, "scale=1e-320"),
    ("heavy_tailed", {"scale": 1e-40}, np.float32, "scale=1e-40"),
    ("focused", {"scale": 1e-40, "strength": 0.3}, np.float32, "scale=1e-40"),
    # scale is normal, but a signal coordinate's SD scale·√(rank/d) = 5e-38/8 is not
    ("low_rank", {"scale": 5e-38, "rank": 1, "energy": "per_direction"}, np.float32,
     "scale=5e-38, rank=1, energy='per_direction'"),
    ("low_rank", {"noise": 1e-40}, np.float32, "scale=1.0, noise=1e-40"),
    ("outlier_channels", {"scale": 1e-10, "magnitude": 1e-30}, np.float32,
     "scale=1e-10, magnitude=1e-30, offset=0.0"),
])
def test_parameters_below_the_smallest_normal_are_refused_by_name(dist, params, dtype, named):
    name = np.dtype(dtype).name
    with pytest.raises(ValueError, match=rf"parameter\(s\) of '{dist}' must give normal {name} "
                                         rf"draws .*received {re.escape(named)}, typical \|x\|"):
        sample(dist, 2, 16, 64, seed=0, dtype=dtype, **params)


def test_value_params_below_the_smallest_normal_are_named_as_value_params():
    with pytest.raises(ValueError, match=r"value_params of 'gaussian' must give normal float32 "
                                         r"draws .*value_params\['scale'\]=1e-46.*draw float64"):
        sample("gaussian", 2, 8, 4, dtype=np.float32, value_params={"scale": 1e-46})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_refusal_sits_where_the_draws_leave_the_normal_range(seed):
    # The threshold is the parameters' typical |x|, not chance: 4x above it the draws are
    # mostly normal (median |x| ~ 0.67 x 4 tiny for a Gaussian), 4x below it they are refused.
    for factor, ok in ((4.0, True), (0.25, False)):
        cases = [("gaussian", {"scale": factor * TINY32}, lambda t: t.K),
                 ("low_rank", {"scale": 8 * factor * TINY32, "rank": 1, "noise": 0.0,
                               "energy": "per_direction"}, lambda t: t.K),   # d = 64: SD scale/8
                 ("outlier_channels", {"magnitude": factor * TINY32, "n_channels": 2},
                  lambda t: t.K[np.abs(t.K) < 1e-30])]                       # the outlier channels
        for dist, params, part in cases:
            if not ok:
                with pytest.raises(ValueError, match="must give normal float32 draws"):
                    sample(dist, 4, 32, 64, seed=seed, dtype=np.float32, **params)
                continue
            x = np.abs(part(sample(dist, 4, 32, 64, seed=seed, dtype=np.float32, **params)))
            assert x.size >= 4 * 32 * 2 and np.median(x) >= TINY32, dist


def test_small_but_normal_parameters_still_draw():
    # Chance puts a few draws below tiny here; the parameters do not: no error.
    t = sample("gaussian", 4, 64, 16, seed=0, dtype=np.float32, scale=1e-36)
    assert np.median(np.abs(t.K)) > TINY32 and (np.abs(t.K) > 0).all()
    sample("low_rank", 2, 8, 16, seed=0, dtype=np.float32, noise=0.0)    # no noise: nothing to check
    sample("gaussian", 2, 8, 16, seed=0, dtype=np.float64, scale=1e-300)


# --- F4: a registered sampler's overflow is about its values ---------------------------

def test_registered_sampler_overflowing_float32_is_told_its_values():
    with registered_distribution("rq_big", lambda n, N, d, rng, p: 1e39 * rng.standard_normal((n, N, d))):
        with pytest.raises(ValueError) as err:
            sample("rq_big", 2, 4, 3, dtype=np.float32)
    msg = str(err.value)
    assert re.search(r"'rq_big': its sampler returned values beyond the float32 range "
                     r"\(max \|x\| = \d\.\d+e\+39", msg), msg
    assert "draw float64" in msg
    assert "lower scale" not in msg and "parameters {}" not in msg


def test_registered_sampler_overflow_error_is_its_own():
    def sampler(n, N, d, rng, p):
        return np.full((n, N, d), 10.0 ** 400)        # a Python float overflow in the sampler

    with registered_distribution("rq_overflow", sampler):
        with pytest.raises(OverflowError):
            sample("rq_overflow", 2, 4, 3)


# --- F5: the docs name both distributions that touch the queries ------------------------

def test_measurement_doc_names_low_rank_subspace_queries():
    text = " ".join((ROOT / "docs" / "measurement.md").read_text(encoding="utf-8").split())
    sentence = text.split("Queries are `N(0, I_d)`, independent of everything except", 1)[1]
    sentence = sentence.split(". ", 1)[0]
    assert "`focused`" in sentence and "`low_rank`" in sentence
    assert 'query="subspace"' in sentence
