"""Your own quantization scheme, compared with KQV at equal n bits per coordinate, without editing kvstats.

The scheme: a plain per-vector uniform min-max scalar quantizer, no rotation. Each key
(and each value) stores its own minimum and maximum in float32 and every coordinate as
an n-bit code of the 2**n levels between them, packed: n·d + 64 bits per vector, counted
honestly in ``stored_bits`` and, independently, in the registry entry's ``expected_bits``.
Float32, not float16: a float16 min or max overflows beyond 65504, which Student-t keys
near nu = 1 reach; a vector float32 cannot hold (or a NaN) is a ValueError naming it.

Steps: define the coder (the Coder protocol of kvstats/quant/coder.py), register the
scheme (at import, so this file is a plugin too), hold it to the contract every
built-in passes (``check_scheme``), run a small sweep against KQV on Gaussian and
heavy-tailed keys, print the paired comparison and write the hypothesis-test report.

    .venv/bin/python examples/own_scheme.py       # 42-52 s wall, 7-9 s CPU (2 cores, load average 4-5)
    .venv/bin/python examples/own_scheme.py --fast --out /tmp/own   # seconds (what the tests run)

The full run finds (seed 0, d = 64, N = 512, 300 trials; measured at e780426, 2026-12-04):
mean KL of minmax vs KQV 0.0190 vs 0.0172 at n = 3 and 0.0041 vs 0.0048 at n = 4 on
Gaussian keys; 0.29 vs 0.090 and 0.072 vs 0.022 on Student-t (nu = 3) keys, where a vector's own min and max
are set by its largest coordinates and a rotation (KQV) spreads them out. At the same n,
minmax stores n + 1 bits per coordinate (its two float32 numbers over d = 64), KQV
n + 0.375: minmax's one win (Gaussian keys, n = 4) is at 5 bits against KQV's 4.375.
To compare at about equal storage, give each scheme its own budget and name the pair
(docs/usage.md, "Equal n is not equal storage").

The scheme is registered when the file is imported, not in ``main``, so the file is a
plugin as it stands: a config's ``[sweep] plugins = ["examples/own_scheme.py"]`` makes
``minmax`` a name ``kvstats sweep`` accepts (``kvstats schemes --plugins
examples/own_scheme.py`` shows it). ``main`` names the file as its sweep's plugin too, so
the workers import it and ``kvstats report OUT`` works later in another process
(docs/usage.md, "Your own scheme or distribution"). A plugin may import helpers beside
it (``import my_helpers``): their sources enter the cell ids too, so ``--resume``
recomputes after an edit of either. After moving the file, ``kvstats report OUT
--plugins NEW/PATH.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass

import numpy as np

import kvstats
from kvstats.quant.packing import pack_codes, unpack_codes


# --------------------------------------------------------------------------- the coder
@dataclass(frozen=True, eq=False)
class MinMaxCodes:
    """What a cache stores: packed codes and each vector's float32 minimum and maximum."""

    packed: np.ndarray   # uint8 (*batch, n, ceil(d·bits/8)): up to 7 bits of padding per vector
    low: np.ndarray      # float32 (*batch, n)
    high: np.ndarray     # float32 (*batch, n)
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(self.packed.nbytes + self.low.nbytes + self.high.nbytes)


class MinMaxCoder:
    """Per-vector uniform quantizer: n-bit codes between the vector's own min and max."""

    def __init__(self, bits: int, dim: int):
        self.bits, self.dim = bits, dim
        self.nominal_bits = float(bits)

    def encode(self, x: np.ndarray) -> MinMaxCodes:
        x = np.asarray(x)
        with np.errstate(over="ignore"):           # a float64 beyond float32's range: refused below
            low = x.min(axis=-1).astype(np.float32)    # what is stored, so what decoding uses
            high = x.max(axis=-1).astype(np.float32)
        bad = ~(np.isfinite(low) & np.isfinite(high))
        if bad.any():
            raise ValueError("x must be finite and within float32's range (|x| <= 3.4e38: each "
                             "vector's min and max are stored in float32); received a vector with "
                             f"min {x.min(axis=-1)[bad][0]:.4g} and max {x.max(axis=-1)[bad][0]:.4g}")
        lo, hi = low.astype(np.float64)[..., None], high.astype(np.float64)[..., None]
        step = (hi - lo) / (2 ** self.bits - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            codes = np.where(step > 0, np.rint((x - lo) / np.where(step > 0, step, 1.0)), 0.0)
        codes = np.clip(codes, 0, 2 ** self.bits - 1).astype(np.uint8)
        return MinMaxCodes(pack_codes(codes, self.bits), low, high, x.dtype)

    def decode(self, codes: MinMaxCodes) -> np.ndarray:
        lo, hi = codes.low.astype(np.float64)[..., None], codes.high.astype(np.float64)[..., None]
        step = (hi - lo) / (2 ** self.bits - 1)
        q = unpack_codes(codes.packed, self.bits, self.dim).astype(np.float64)
        return (lo + q * step).astype(codes.dtype)

    def roundtrip(self, x: np.ndarray) -> np.ndarray:
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        # n·d code bits per vector (not the padding of packing them into whole bytes, as
        # every kvstats coder counts) and two float32 numbers
        return {"codes": float(self.bits * self.dim * n_tokens), "min_max": 64.0 * n_tokens}

    def describe(self) -> dict:
        return {"coder": "minmax", "bits": self.bits, "dim": self.dim}


# --------------------------------------------------------------------------- the scheme
def build(bits, dim, params, key_rng, value_rng, draws):
    """No randomness: the generators and draws are not used."""
    return bits, MinMaxCoder(bits, dim), MinMaxCoder(bits, dim)


def expected_bits(bits, dim, n_tokens, params):
    """From the definition: n·d code bits and two float32 numbers per vector, each side."""
    side = n_tokens * (bits * dim + 2 * 32)
    return side, side


MINMAX = kvstats.define_scheme("minmax", build, expected_bits, summary="per-vector uniform min-max, "
                               "n-bit codes, float32 min and max per vector, no rotation")
# at the top level: importing the file registers the scheme, as a plugin must (a call in
# main() would not run when a sweep imports the file). Run as a script, the file is
# imported once, as __main__; naming it as the sweep's plugin below does not import it again.
kvstats.register_scheme(MINMAX)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="a tiny sweep (seconds): what the tests run")
    ap.add_argument("--out", default=None, help="folder for the sweep and its report (default: a new temp folder, kept: delete it after)")
    args = ap.parse_args(argv)

    account = kvstats.check_scheme("minmax")        # raises, listing what fails
    print(f"minmax passes the scheme contract ({len(account)} clauses)")

    n_trials, n_keys = (16, 64) if args.fast else (300, 512)
    # this file as the plugin: workers import it, and the manifest records it (file, SHA-256)
    config = {"plugins": [__file__], "schemes": ["minmax", "KQV"], "budgets": [3, 4],
              "distributions": ["gaussian", {"name": "heavy_tailed", "params": {"nu": 3.0}}],
              "dims": [64], "n_keys": [n_keys], "n_trials": n_trials,
              "comparisons": [["minmax", "KQV"]],
              "report": {"energy_resamples": 99, "bootstrap_resamples": 199} if args.fast else {}}
    out = args.out or tempfile.mkdtemp(prefix="own_scheme_")
    result = kvstats.run_sweep(config, out=out, progress=False)

    bits = result.frame.groupby(["scheme", "budget"])["bits_total"].first().unstack()
    print("stored bits per coordinate (K and V averaged):\n" + bits.round(4).to_string())
    kl = result.frame.groupby(["distribution", "budget", "scheme"])["kl"].mean().unstack()
    print("mean KL(p || p_hat):\n" + kl.to_string(float_format=lambda v: f"{v:.3g}"))
    table = kvstats.compare_schemes(result.frame, [("minmax", "KQV")], metrics=["kl"],
                                    energy=False)
    print("paired sign tests of KL, minmax vs KQV (Holm-adjusted p):\n" + table[
        ["distribution", "budget", "mean_a", "mean_b", "pvalue_adjusted", "winner"]].to_string(index=False))
    report = kvstats.hypothesis_report(result, out, figures=not args.fast)
    print(f"report: {report.files['markdown']}")


if __name__ == "__main__":
    main()
