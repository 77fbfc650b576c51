"""Gamma ratios of the sphere law at huge dims (critic_theory20 #4).

sphere_abs_moment, sphere_coordinate_pdf and high_rate_distortion took differences of
``gammaln`` and lost every digit as d grew (sphere_abs_moment: 2e-4 relative at d = 1e12,
2e8 at d = 1e17; d·high_rate_distortion(0, "beta", d): 3146 at d = 1e15 instead of 2.72).

Reference values: mpmath 1.3.0 at 40 digits (``mp.mp.dps = 40``), from the gamma
functions themselves, e.g. ``mp.gamma(d/2) / (mp.sqrt(mp.pi) * mp.gamma((d + 1)/2))`` for
E|u₁|; ``d·(1/12)(C^{1/3}·√π·Γ(a+1)/Γ(a+3/2))³``, ``C = Γ(d/2)/(√π Γ((d−1)/2))``,
``a = (d−3)/6`` for the Panter–Dite constant; ``C·(1 − x²)^((d−3)/2)`` at the float x
for the density. Rounded to 20 digits here.
"""

import numpy as np
import pytest

from kvstats.theory import high_rate_distortion, sphere_abs_moment, sphere_coordinate_pdf

ABS_MOMENT = {10**5: 0.0025231388298593497892, 10**8: 7.9788456279757676038e-5,
              10**10: 7.978845608228124699e-6, 10**12: 7.9788456080306482702e-7,
              10**14: 7.9788456080286735059e-8, 10**17: 2.5231325220201600546e-9}
# d·c_d → √3·π/2 = 2.72069904635132677... as d → ∞
PANTER_DITE = {128: 2.6575968127028145166, 10**9: 2.7206990381892296477,
               10**13: 2.7206990463505105662, 10**15: 2.7206990463513186138,
               10**17: 2.7206990463513266943}
DENSITY = {(10**12, 0.0): 398942.28040113347123, (10**12, 1e-6): 241970.72451926434611,
           (10**12, 3e-6): 4431.848411904767302, (10**17, 0.0): 126156626.10100800147,
           (10**17, 3e-9): 80441016.315624893478, (10**17, 1e-8): 850036.66025203391206}


@pytest.mark.parametrize("d", sorted(ABS_MOMENT))
def test_sphere_abs_moment_is_accurate_at_huge_d(d):
    assert sphere_abs_moment(d) == pytest.approx(ABS_MOMENT[d], rel=1e-14, abs=0)


@pytest.mark.parametrize("d", sorted(PANTER_DITE))
def test_panter_dite_constant_of_the_sphere_law_is_accurate_at_huge_d(d):
    assert d * high_rate_distortion(0, "beta", d) == pytest.approx(PANTER_DITE[d], rel=1e-14, abs=0)
    assert d * 4.0 ** 3 * high_rate_distortion(3, "beta", d) == pytest.approx(PANTER_DITE[d], rel=1e-14)


@pytest.mark.parametrize("d, x", sorted(DENSITY))
def test_sphere_coordinate_density_is_accurate_at_huge_d(d, x):
    assert sphere_coordinate_pdf([x], d)[0] == pytest.approx(DENSITY[(d, x)], rel=1e-13, abs=0)


def test_small_dims_keep_their_exact_values():
    # d = 1: E|u₁| = 1; d = 2: 2/π; d = 3: 1/2; the d = 3 density is 1/2 on [−1, 1]
    assert [sphere_abs_moment(d) for d in (1, 2, 3)] == pytest.approx([1.0, 2 / np.pi, 0.5],
                                                                       rel=1e-15)
    np.testing.assert_allclose(sphere_coordinate_pdf([-0.5, 0.0, 0.5], 3), 0.5, rtol=1e-15)
