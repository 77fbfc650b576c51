"""Worst error of ``kvstats.metrics.angle`` on random errors against a 50-digit mpmath angle.

The numbers docs/measurement.md quotes for random errors ("Angle" under the formulas).
x ~ N(0, I_d), x̂ = x + s·N(0, I_d) for s in 1e-1, 1e-3, 1e-6, 1e-9, drawn in float64 and
rounded to float32 for the float32 rows (the reference is the angle of the rounded
inputs, so only the metric's arithmetic is measured). Reference: the unit vectors of the
exact inputs and ``2·atan2(‖u − v‖, ‖u + v‖)`` in mpmath at 50 digits. Rows per (d, s):
``max(40, min(3000, 24000 // d))``, seed 0. Prints, per dtype and d, the worst relative
error over the rows with φ ≥ 1e-6 (and the angle where it occurred) and the worst
absolute error (radians) over the rows with φ < 1e-6, where the unit-vector form's
absolute ~1e-16 rad is the meaningful bound (its relative error ~1e-16/φ grows as φ → 0).

Run: ``python experiments/angle_accuracy.py`` (about a minute on one core).
"""

from __future__ import annotations

import argparse

import mpmath as mp
import numpy as np

from kvstats.metrics import angle

mp.mp.dps = 50
DIMS = (2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SCALES = (1e-1, 1e-3, 1e-6, 1e-9)


def mp_angle(x: np.ndarray, xh: np.ndarray) -> mp.mpf:
    """Angle between two float vectors (read exactly) to 50 digits."""
    x = [mp.mpf(float(v)) for v in x]
    y = [mp.mpf(float(v)) for v in xh]
    nx = mp.sqrt(mp.fsum(v * v for v in x))
    ny = mp.sqrt(mp.fsum(v * v for v in y))
    a = mp.sqrt(mp.fsum((p / nx - q / ny) ** 2 for p, q in zip(x, y)))
    b = mp.sqrt(mp.fsum((p / nx + q / ny) ** 2 for p, q in zip(x, y)))
    return 2 * mp.atan2(a, b)


def worst(dtype: type, d: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(worst relative error for φ ≥ 1e-6, its angle, worst absolute error for φ < 1e-6)."""
    rel, at, ab = 0.0, 0.0, 0.0
    rows = max(40, min(3000, 24000 // d))
    for s in SCALES:
        x = rng.standard_normal((rows, d))
        xh = (x + s * rng.standard_normal(x.shape)).astype(dtype)
        x = x.astype(dtype)
        got = angle(x, xh)
        for i in range(rows):
            ref = mp_angle(x[i], xh[i])
            err = abs(mp.mpf(float(got[i])) - ref)
            if ref < 1e-6:
                ab = max(ab, float(err))
            elif float(err / ref) > rel:
                rel, at = float(err / ref), float(ref)
    return rel, at, ab


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=list(DIMS), metavar="D",
                    help=f"head dimensions to measure (default: {' '.join(map(str, DIMS))})")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random rows (default 0)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("dtype        d  rel, phi>=1e-6 (at phi)  abs, phi<1e-6")
    for dtype in (np.float64, np.float32):
        for d in args.dims:
            rel, at, ab = worst(dtype, d, rng)
            print(f"{np.dtype(dtype).name:8s} {d:5d} {rel:14.2e}  ({at:8.2e})  {ab:12.2e}")


if __name__ == "__main__":
    main()
