"""The "beta" (sphere-coordinate) Lloyd–Max codebook is solved only where its integrals
are accurate: dim·MSE must approach the Gaussian value as 1 − c/dim (the coordinate times
√dim tends to N(0, 1), with O(1/dim) corrections). Up to MAX_BETA_DIM the deviation falls
4× per 4× in dim at every bit width; beyond it the solved values drifted (8 bits: 1.00009
at 2^20 where 0.99999 is due; ``kvstats theory --dim 268435456 --bits 8`` printed a value
10% off), so larger dims are refused."""

import pytest

from kvstats.quant.codebook import MAX_BETA_DIM, lloyd_max_codebook


@pytest.mark.parametrize("bits", range(1, 9))
def test_dim_times_mse_approaches_the_gaussian_as_one_over_dim_up_to_the_bound(bits):
    gauss = lloyd_max_codebook(bits).mse

    def gap(dim):
        return 1.0 - dim * lloyd_max_codebook(bits, "beta", dim).mse / gauss

    quarter, full = gap(MAX_BETA_DIM // 4), gap(MAX_BETA_DIM)
    assert full > 0 and 3.5 < quarter / full < 4.5


def test_beyond_the_bound_is_refused_naming_dim_and_the_gaussian_limit():
    with pytest.raises(ValueError, match=r"dim must be at most 65536 .*distribution='gaussian'.*received 65537"):
        lloyd_max_codebook(4, "beta", MAX_BETA_DIM + 1)


def test_the_theory_command_refuses_the_same_dims_up_front(capsys):
    from kvstats import cli

    assert cli._THEORY_MAX_DIM == MAX_BETA_DIM
    assert cli.main(["theory", "--dim", str(MAX_BETA_DIM + 1), "--bits", "8"]) == 2
    err = capsys.readouterr().err
    assert "--dim must be an integer in [3, 65536]" in err and "received 65537" in err
