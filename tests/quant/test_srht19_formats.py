"""FP8/nvfp4 scales that underflow in float32.

A head's float32 scale is amax/M (M = 448 for E4M3, 57344 for E5M2, 448·6 = 2688 for
nvfp4's global scale): below float32's smallest normal it is a subnormal (rounded to a
multiple of 2^-149), below half its smallest subnormal it is 0 and the head decodes to
zeros. That warns (UserWarning), as kvstats.quant.uniform and klt warn for float16 scales.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kvstats.quant.fp8 import FP8Coder
from kvstats.quant.microscaling import MXCoder


@pytest.mark.parametrize("coder,amax", [(FP8Coder("fp8_e5m2", 16), 1e-42),   # 1e-42/57344 -> 0
                                        (FP8Coder("fp8_e4m3", 16), 1e-43),   # 1e-43/448 -> 0
                                        (MXCoder("nvfp4", 16), 1e-42)])      # 1e-42/2688 -> 0
def test_a_nonzero_head_whose_scale_underflows_to_zero_warns(coder, amax):
    x = np.zeros((2, 1, 16), np.float32)
    x[0, 0, 0] = amax                               # head 0: scale 0; head 1: all zero
    with pytest.warns(UserWarning, match=r"x: 1 of 2 scales .* 1 are 0: their data decode as exact zeros"):
        out = coder.roundtrip(x)
    assert not out.any()                            # what the warning says


def test_a_subnormal_scale_warns_with_its_rounding():
    x = np.zeros((1, 1, 4), np.float32)
    x[0, 0, 0] = 1e-40                              # e4m3: scale 2.2e-43, 160 subnormal steps
    with pytest.warns(UserWarning, match=r"1 are subnormal, rounded by up to 0.0031 relative"):
        out = FP8Coder("fp8_e4m3", 4).roundtrip(x)
    assert abs(out[0, 0, 0] / np.float32(1e-40) - 1) < 0.07   # e4m3's 2^-4 plus the scale's rounding


@pytest.mark.parametrize("coder", [FP8Coder("fp8_e4m3", 16), FP8Coder("fp8_e5m2", 16, scale="tensor"),
                                   MXCoder("nvfp4", 16)])
def test_normal_scales_and_all_zero_heads_do_not_warn(coder):
    x = np.zeros((3, 2, 16), np.float32)
    x[0] = 1.0
    x[1, 0, 0] = 1e-33                              # scale normal for every format (≥ 1.2e-38)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        coder.roundtrip(x)

