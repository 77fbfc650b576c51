"""Errors about a parameter the caller left at its default name it as the default.

A shape too small for a default (``outlier_channels``' 4 channels in d = 1, ``focused``'s
one focus key among N = 1 keys) used to be reported as if the caller had passed the
default ("n_channels must be an integer in [1, 1]; received 4" for ``sample(..., dim=1)``).
"""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest

from kvstats.data import DISTRIBUTIONS, VALUE_DISTRIBUTIONS, default_params, sample
from kvstats.data.spectrum import synthetic_spectrum
from kvstats.data.synthetic import scale_for_entropy

_CALLERS = {
    "sample": lambda d, **kw: sample("outlier_channels", 2, 4, d, **kw),
    "synthetic_spectrum": lambda d, **kw: synthetic_spectrum("outlier_channels", d, **kw),
    "scale_for_entropy": lambda d, **kw: scale_for_entropy("outlier_channels", 0.5, 4, d,
                                                           n_trials=2, **kw),
}


@pytest.mark.parametrize("caller", sorted(_CALLERS))
@pytest.mark.parametrize("d", [1, 3])
def test_default_n_channels_too_many_for_dim_names_dim(caller, d):
    with pytest.raises(ValueError) as info:
        _CALLERS[caller](d)
    msg = str(info.value)
    assert msg.startswith("dim must be >= 4 for n_channels at its default 4 ")
    assert f"received dim={d}: pass n_channels <= {d} or a larger dim" in msg
    assert "received 4" not in msg
    # a value the caller passed is still reported as theirs
    with pytest.raises(ValueError, match=rf"^n_channels must be an integer in \[1, {d}\]; received 5$"):
        _CALLERS[caller](d, n_channels=5)
    assert _CALLERS[caller](4) is not None                 # the default fits d = 4


def test_default_value_n_channels_too_many_for_dim_names_value_params():
    with pytest.raises(ValueError, match=r"^dim must be >= 4 for value_params\['n_channels'\] at its "
                                         r"default 4 .*received dim=2: pass "
                                         r"value_params\['n_channels'\] <= 2 or a larger dim$"):
        sample("gaussian", 2, 4, 2, value_distribution="outlier_channels")
    with pytest.raises(ValueError, match=r"^value_params\['n_channels'\] must be an integer in \[1, 2\]; "
                                         r"received 3$"):
        sample("gaussian", 2, 4, 2, value_distribution="outlier_channels",
               value_params={"n_channels": 3})


def test_focused_default_n_focus_with_one_key_names_n_keys():
    for call in (lambda: sample("focused", 1, 1, 4), lambda: synthetic_spectrum("focused", 4, n_keys=1)):
        with pytest.raises(ValueError, match=r"^n_keys must be >= 2 for 'focused' with its default "
                                             r"n_focus=1 .*; received n_keys=1$"):
            call()
    with pytest.raises(ValueError, match=r"^n_focus must be < n_keys .*; received n_focus=1, n_keys=1$"):
        sample("focused", 1, 1, 4, n_focus=1)


def test_focused_default_n_focus_with_many_queries_says_it_is_the_default():
    with pytest.raises(ValueError, match=r"^n_focus \* n_queries must be <= n_keys .*; received "
                                         r"n_queries=3, n_keys=2 with the default n_focus=1$"):
        sample("focused", 1, 2, 4, n_queries=3)
    with pytest.raises(ValueError, match=r"; received n_focus=1, n_queries=3, n_keys=2$"):
        sample("focused", 1, 2, 4, n_queries=3, n_focus=1)


def test_focused_default_strength_with_several_focus_keys_asks_for_strength():
    for call in (lambda: sample("focused", 1, 16, 4, n_focus=2),
                 lambda: synthetic_spectrum("focused", 4, n_keys=16, n_focus=2)):
        with pytest.raises(ValueError, match=r"^strength must be given for 'focused' with n_focus=2: "
                                             r"its default strength=0.5 is not < 1/n_focus .*; pass "
                                             r"strength in \(0, 0.5\)$"):
            call()
    with pytest.raises(ValueError, match=r"^strength must be in \(0.0, 0.5\); received 0.5$"):
        sample("focused", 1, 16, 4, n_focus=2, strength=0.5)
    assert sample("focused", 1, 16, 4, n_focus=2, strength=0.3).K.shape == (1, 16, 4)


def test_synthetic_spectrum_marks_its_default_n_keys():
    with pytest.raises(ValueError, match=r"; received n_focus=1024, n_keys=1024 \(synthetic_spectrum's "
                                         r"default n_keys\)$"):
        synthetic_spectrum("focused", 8, n_focus=1024, strength=1e-4)
    with pytest.raises(ValueError, match=r"; received n_focus=64, n_keys=64$"):
        synthetic_spectrum("focused", 8, n_keys=64, n_focus=64, strength=1e-3)


def _quotes_a_default(msg: str, passed: dict, defaults: dict) -> list[str]:
    """The parameters left at their default that ``msg`` reports as received."""
    out = []
    for key, value in defaults.items():
        if key in passed:
            continue
        said = re.escape(repr(value))
        if (re.match(rf"^(value_params\['{key}'\]|{key}) must .*; received {said}$", msg)
                or re.search(rf"received ([^;]*, )?{key}={said}\b", msg)):
            out.append(key)
    return out


def test_quotes_a_default_sees_the_old_messages():
    # the detector the sweep below relies on flags the messages this file is about
    d = default_params("outlier_channels")
    assert _quotes_a_default("n_channels must be an integer in [1, 1]; received 4", {}, d) == ["n_channels"]
    assert _quotes_a_default("n_focus must be < n_keys (x); received n_focus=1, n_keys=1", {},
                             default_params("focused")) == ["n_focus"]
    assert _quotes_a_default("n_channels must be an integer in [1, 1]; received 4",
                             {"n_channels": 4}, d) == []


def test_small_shapes_never_quote_a_default_nor_fail_otherwise():
    # every built-in at d, N, n_queries in 1..3 relying on the defaults: a finite draw, or
    # a ValueError that does not report a default as received; no warning, no other error
    shapes = itertools.product(DISTRIBUTIONS, [1, 2, 3], [1, 2, 3], [1, 2, 3])
    for dist, n_keys, dim, n_q in shapes:
        for vdist in (None,) + VALUE_DISTRIBUTIONS:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    t = sample(dist, 2, n_keys, dim, n_queries=n_q, value_distribution=vdist)
                except ValueError as exc:
                    msg = str(exc)
                    quoted = _quotes_a_default(msg, {}, default_params(dist))
                    if vdist is not None:
                        quoted += _quotes_a_default(msg, {}, default_params(vdist))
                    assert not quoted, (dist, n_keys, dim, n_q, vdist, msg)
                    continue
            assert all(np.isfinite(a).all() for a in (t.K, t.V, t.q))


def test_scale_for_entropy_names_the_parameters_it_accepts_without_scale():
    # the generic check of sample() would list 'scale' as allowed, which this refuses
    from kvstats.data.synthetic import scale_for_entropy

    with pytest.raises(ValueError, match=r"params \['nuu'\] not accepted by scale_for_entropy for "
                                         r"'gaussian'; allowed: none \(scale is what it solves for\)"):
        scale_for_entropy("gaussian", 1.0, 64, 16, nuu=2)
    with pytest.raises(ValueError, match=r"allowed: \['nu'\]"):
        scale_for_entropy("heavy_tailed", 1.0, 64, 16, nuu=2)
