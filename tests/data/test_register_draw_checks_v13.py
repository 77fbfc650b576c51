"""What :func:`kvstats.sample` checks of a registered sampler's draw (referee T13, F1 and F4).

F1: a sampler that broadcast, tiled or repeated one draw over its trials was accepted by
``sample`` (only a sweep's preflight refused it), so a ``sample`` -> statistics user got T
copies of one trial counted as T independent ones. F4: a wrong shape was a TypeError.
"""

import numpy as np
import pytest

from kvstats.data.register import registered_distribution
from kvstats.data.synthetic import sample


def _broadcast(n, N, d, rng, p):
    return np.broadcast_to(rng.standard_normal((N, d)), (n, N, d))


def _tile(n, N, d, rng, p):
    return np.tile(rng.standard_normal((1, N, d)), (n, 1, 1))


def _repeat(n, N, d, rng, p):
    return np.repeat(rng.standard_normal((1, N, d)), n, axis=0)


def _fresh(n, N, d, rng, p):
    return rng.standard_normal((n, N, d))


@pytest.mark.parametrize("sampler", [_broadcast, _tile, _repeat])
@pytest.mark.parametrize("as_values", [False, True])
def test_one_draw_over_all_trials_is_refused(sampler, as_values):
    with registered_distribution("mine", sampler):
        kw = dict(value_distribution="mine") if as_values else {}
        with pytest.raises(ValueError, match=r"trials 0 and 1 of one draw have the same keys: the sampler "
                                             r"of distribution 'mine' must draw each of its n_trials anew"):
            sample("gaussian" if as_values else "mine", 3, 16, 8, seed=0, **kw)


def test_a_sampler_drawing_each_trial_passes_and_one_trial_cannot_be_judged():
    with registered_distribution("mine", _fresh):
        t = sample("mine", 300, 32, 8, seed=1)   # several chunks: each is checked
        assert t.K.shape == (300, 32, 8) and not np.array_equal(t.K[0], t.K[1])
    with registered_distribution("mine", _broadcast):
        assert sample("mine", 1, 16, 8, seed=0).K.shape == (1, 16, 8)   # nothing to compare


@pytest.mark.parametrize("shape", [(1, 16, 8), (3, 8, 16), (3, 16, 8, 1), (3, 16)])
def test_a_wrong_shape_is_a_value_error_naming_the_expected_one(shape):
    with registered_distribution("mine", lambda n, N, d, rng, p: rng.standard_normal(shape)):
        with pytest.raises(ValueError, match=r"distribution 'mine': its sampler must return a real array of "
                                             r"shape \(n_trials, n_keys, dim\) = \(3, 16, 8\); received array "
                                             rf"of shape \({shape[0]}, "):
            sample("mine", 3, 16, 8, seed=0)


@pytest.mark.parametrize("make", [lambda x: x.tolist(), lambda x: x > 0, lambda x: x + 0j,
                                  lambda x: x.astype(object)])
def test_not_a_real_array_stays_a_type_error(make):
    with registered_distribution("mine", lambda n, N, d, rng, p: make(rng.standard_normal((n, N, d)))):
        with pytest.raises(TypeError, match=r"distribution 'mine': its sampler must return a real array"):
            sample("mine", 3, 16, 8, seed=0)
