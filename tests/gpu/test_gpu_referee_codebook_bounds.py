"""StaticCodebook.from_arrays refuses boundaries that are not between their neighbouring
centroids (cell i is (boundaries[i-1], boundaries[i]] and decodes to centroids[i])."""

import numpy as np
import pytest

pytest.importorskip("jax")
from kvstats_gpu.codebook import StaticCodebook  # noqa: E402


@pytest.mark.parametrize("centroids, boundaries", [
    ([-1.0, 1.0], [2.0]),                        # above the last centroid
    ([-1.0, 1.0], [-1.5]),                       # below the first
    ([-1.0, 1.0], [1.0]),                        # on the next cell's centroid (outside its cell)
    ([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.6, 1.0]),  # sorted, but the middle one past centroid 2
])
def test_boundaries_outside_their_centroids_are_refused(centroids, boundaries):
    with pytest.raises(ValueError, match=r"boundaries\[i\] must lie in \[centroids\[i\], centroids\[i \+ 1\]\).*received boundaries\[\d\]"):
        StaticCodebook.from_arrays(centroids, boundaries)


def test_a_boundary_on_its_own_cells_centroid_is_accepted():
    # x = -1 has code #{k: b_k < x} = 0 and decodes to centroids[0] = -1: inside its cell
    cb = StaticCodebook.from_arrays([-1.0, 1.0], [-1.0])
    assert cb.bits == 1


def test_boundaries_not_sorted_are_refused():
    with pytest.raises(ValueError, match="strictly increasing"):
        StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [0.0, -1.0, 1.0])


def test_lloyd_max_codebooks_are_accepted():
    import kvstats

    for bits in range(1, 9):
        cb = kvstats.lloyd_max_codebook(bits, "beta", dim=128)
        assert StaticCodebook.from_codebook(cb).bits == bits
