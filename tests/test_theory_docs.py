"""The closed-form numbers printed in docs/theory.md and docs/qjl.md, recomputed.

Each table cell and each quoted list of values that a closed form of kvstats.theory gives
is recomputed here and must read as printed (to half a unit of its last printed digit, or
as the same formatted string), so that a page cannot drift from the code, nor the code
from the page. Measured numbers (Monte Carlo, sweeps) are not here: the pages give their
commands and dates.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from kvstats import theory as T
from kvstats.rate_distortion import DB_PER_BIT

DOCS = Path(__file__).resolve().parents[1] / "docs"


def page(name):
    """The page's text with every run of whitespace one space (lists break across lines)."""
    return " ".join((DOCS / name).read_text(encoding="utf-8").split())


def table(name, header_start):
    """Rows (lists of cell strings) of the markdown table whose header starts with ``header_start``."""
    lines = (DOCS / name).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])  # \| is a pipe
    return rows


def number(cell):
    """A printed number: unicode minus, a leading ≈, e−05 exponents."""
    return float(cell.replace("≈", "").replace("−", "-").replace("**", "").strip())


def assert_reads(cell, value):
    """``value`` rounds to the printed ``cell``: within half a unit of its last digit."""
    text = cell.replace("≈", "").replace("−", "-").replace("**", "").strip()
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (-decimals + (int(exponent) if exponent else 0))
    assert abs(float(text) - value) <= 0.5 * unit * (1 + 1e-9), (cell, value)


def listed(values, fmt):
    """``values`` as the pages list them: formatted and joined by ', '."""
    return ", ".join(format(v, fmt) for v in values)


# ------------------------------------------------------------------ docs/theory.md
def test_the_distortion_table_reads_as_the_solver_gives():
    rows = table("theory.md", "| b | Max (1960) |")
    assert [int(r[0]) for r in rows] == list(range(1, 9))
    for r in rows:
        b = int(r[0])
        computed = [T.lloyd_max_distortion(b)] + [T.unit_vector_mse(b, d) for d in (64, 128, 1024)]
        for cell, value in zip(r[2:6], computed):
            assert_reads(cell, value)
        lower, upper = T.turboquant_mse_bounds(b)
        assert_reads(r[6], lower)
        assert_reads(r[7], upper)
        if r[1] != "–":                                   # Max (1960): his table, 1e-3 (docs)
            assert number(r[1]) == pytest.approx(T.lloyd_max_distortion(b), rel=1e-3)


def test_the_bit_trade_table_reads_as_the_closed_form():
    rows = table("theory.md", "| b | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |")
    assert rows[0][0].startswith("Gaussian") and rows[1][0] == "d = 128"
    for b, gauss, d128 in zip(range(1, 9), rows[0][1:], rows[1][1:]):
        assert_reads(gauss, T.bit_trade_inflation(b))
        assert_reads(d128, T.bit_trade_inflation(b, 128))


def test_theory_page_lists_read_as_the_closed_forms():
    text = page("theory.md")
    d = 128
    # §3: the unit-vector Panter–Dite constants d·c_d, and 4^b·D_b's approach to them
    constants = [d_ * T.high_rate_distortion(0, "beta", d_) for d_ in (64, 128, 1024)]
    assert f"is smaller, {listed(constants, '.3f')} at d = 64, 128, 1024" in text
    approach = np.array([[4.0 ** b * T.lloyd_max_distortion(b, "beta", d_) / T.high_rate_distortion(0, "beta", d_)
                          for d_ in (16, 64, 128, 1024)] for b in (6, 8)])
    assert np.all(np.abs(approach[0] - 0.97) < 0.01) and np.all((approach[1] > 0.99) & (approach[1] < 0.995))
    # §6: TurboQuant-prod prediction, its bounds, its ratio to the upper bound
    prod = [d * T.turboquant_prod_distortion(b, d) for b in (1, 2, 3, 4)]
    assert f"d·D_prod/‖y‖² = {listed(prod[:3], '.3f')}, {prod[3]:.4f} for b = 1…4" in text
    bounds = [[d * v for v in T.turboquant_prod_bounds(b, d)] for b in (1, 2, 3, 4)]
    assert_reads("4.27", bounds[0][1]) and assert_reads("0.0668", bounds[3][1])
    ratio8 = T.turboquant_prod_distortion(8, d) / T.turboquant_prod_bounds(8, d)[1]
    limit = (1 - 2 / (math.pi * d)) * constants[1] / T.SQRT3_PI_2
    assert f"rises to {ratio8:.3f} at b = 8 (d = 128)" in text and f"= {limit:.3f} there" in text
    # §6 padded: the residual ratio at d = 96 sketched with 128 rows
    assert f"(π/2 − 1/d)·d/d_pad ({T.residual_inflation(96, 128):.3f} at d = 96" in text
    # §7: the scalar code's gap to Shannon's bound, its high-rate limits, QKQV's gap
    gaps = [DB_PER_BIT * n + 10 * math.log10(T.unit_vector_mse(n, d)) for n in range(1, 9)]
    assert f"{listed(gaps, '.2f')} dB for n = 1…8 at d = 128" in text
    assert f"10·log10(d·c_d) = {10 * math.log10(constants[1]):.2f} dB" in text
    assert f"10·log10(π√3/2) = {10 * math.log10(T.SQRT3_PI_2):.2f} dB" in text
    norms_db = DB_PER_BIT * 2 * 16 / d
    qkqv = [DB_PER_BIT * n + 10 * math.log10(T.residual_inflation(d) * T.unit_vector_mse(n - 1, d)) + norms_db
            for n in range(2, 7)]
    assert f"0.25 bit = {norms_db:.2f} dB" in text and f"gives {listed(qkqv, '.2f')} dB at n = 2…6" in text
    # §7: the two angles an SNR implies, at the 2- and 1-bit Lloyd–Max SNRs of d = 128
    for bits, label in ((2, "at 2 bits"), (1, "at 1 bit")):
        snr_db = -10 * math.log10(T.unit_vector_mse(bits, d))
        asin, atan = (float(T.direction_error(snr_db, e)) for e in ("orthogonal_to_reconstruction",
                                                                    "orthogonal_to_signal"))
        excess = f"{100 * (asin / atan - 1):.{1 if bits == 2 else 0}f}%"
        assert f"{excess} {label} (SNR {snr_db:.2f} dB: " in text or f"{excess} {label} ({snr_db:.2f} dB: " in text
        assert f"{asin:.3f} against {atan:.3f}" in text


def test_rank_one_water_level_underflows_where_the_page_says():
    """theory.md §7: θ = λ·2^(−2b) leaves float64 from about 537 bits on one axis."""
    text = page("theory.md")
    lam = np.r_[1.0, np.zeros(127)]
    level = [float(T.water_fill(lam, bits / 128).level) for bits in (537, 538)]
    assert level[0] > 0 and level[1] == 0
    assert "from about 537 bits on one axis" in text and "0 at 538" in text


# ------------------------------------------------------------------ docs/qjl.md
def test_the_sketch_constants_table_reads_as_the_closed_forms():
    rows = table("qjl.md", "| d | family | c·m |")
    assert len(rows) == 9
    for r in rows:
        d, kind = int(r[0]), r[1]
        cm = math.sqrt(math.pi / 2) if kind == "gaussian" else 1 / (math.sqrt(d) * T.sphere_abs_moment(d))
        assert_reads(r[2].split("=")[-1], cm)                     # "√(π/2) = 1.25331"
        for cell, m in zip(r[4:6], (d, 2 * d)):
            assert_reads(cell, T.residual_inflation(d, m, kind))
        for cell, m in zip(r[6:8], (d, 2 * d)):
            assert_reads(cell, T.bit_trade_inflation(4, d, m, kind))


def test_qjl_page_lists_read_as_the_closed_forms():
    text = page("qjl.md")
    # the spiky-key bias of SRHT with the orthogonal constant
    bias = [100 * (1 / (math.sqrt(d) * T.sphere_abs_moment(d)) - 1) for d in (64, 128, 1024)]
    assert (f"+{bias[0]:.1f}% (d = 64), +{bias[1]:.1f}% (d = 128), +{bias[2]:.1f}% (d = 1024)") in text
    # the Gaussian constant on orthogonal rows over-estimates by ≈ 1/(4d)
    over = [100 * (math.sqrt(math.pi / 2) * math.sqrt(d) * T.sphere_abs_moment(d) - 1) for d in (16, 128)]
    assert f"{over[0]:.1f}% at d = 16, {over[1]:.1f}% at d = 128" in text
    # TurboQuant-prod's MSE part shrinks inner products by α = 1 − d·D at d = 16
    alpha = [1 - T.unit_vector_mse(b, 16) for b in (1, 2, 3)]
    assert f"α = {listed(alpha, '.3f')} at 1, 2, 3 bits" in text
    assert alpha[0] == pytest.approx(16 * T.sphere_abs_moment(16) ** 2, rel=1e-9)
    # the ≈ 2π bit trade at d = 128 with m = d
    assert f"= {listed([T.bit_trade_inflation(b, 128) for b in (2, 3, 4)], '.2f')} (`bit_trade_inflation(b, 128)`)" in text
    # reconstruction MSE closed forms at d = m = 64
    assert f"(Gaussian, closed form {T.qjl_reconstruction_mse('gaussian', 64, 64):.3f})" in text
    assert f"(orthogonal, {T.qjl_reconstruction_mse('orthogonal', 64, 64):.3f})" in text
    # the vector error of 3-bit MSE + 1-bit QJL, Gaussian limit
    assert f"(π/2)·D₃ ≈ {math.pi / 2 * T.lloyd_max_distortion(3):.3f}" in text


def test_the_kivi_and_qjl_key_bit_examples_add_up():
    """qjl.md's two worked bit counts, from their stated terms."""
    text = page("qjl.md")
    n, g, outliers, d, m = 100, 32, 8, 128, 256
    qjl_keys = 2 * m * n + 2 * 16 * n + math.ceil(n / g) * outliers * math.ceil(math.log2(d))
    assert qjl_keys == 54624 and f"= {qjl_keys} bits, {qjl_keys / (n * d):.2f} bits per coordinate" in text
    b, d, window = 2, 64, 32
    quantized = n - window
    keys = b * quantized * d + 2 * 16 * math.ceil(quantized / g) * d + 16 * window * d
    assert f"keys {b * quantized * d} + 3072 + 3072 + 32768 bits = {keys / (n * d):.2f} bits" in text


def test_the_pages_refer_to_tests_that_exist():
    """Every test function a page names by its name is defined under tests/."""
    sources = " ".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.rglob("test_*.py"))
    for name in ("theory.md", "qjl.md", "formats.md"):
        for test in set(re.findall(r"`(test_[a-z0-9_]+)`", page(name))):
            assert f"def {test}(" in sources, (name, test)


def test_the_rank_8_bound_reads_as_water_filling_gives():
    """theory.md §7 and formats.md: the low_rank case (rank 8 of 128, noise 0.1) under
    reverse water-filling: bits per strong and per noise axis at 4 bits, SNRs at 1 and 4 bits."""
    from kvstats.data.spectrum import synthetic_spectrum

    lam = np.asarray(synthetic_spectrum("low_rank", 128, {"rank": 8}).eigenvalues)
    at4, at1 = T.water_fill(lam, 4.0), T.water_fill(lam, 1.0)
    strong, weak = float(at4.bits.max()), float(at4.bits.min())
    both = f"{strong:.2f} bits on each of"
    for name in ("theory.md", "formats.md"):
        text = page(name)
        assert both in text and f"{weak:.2f} on each of the 120 noise axes" in text, name
    assert f"{float(at4.snr_db):.1f} dB, 18 dB above the white {DB_PER_BIT * 4:.1f}" in page("theory.md")
    assert f"{float(at1.snr_db):.1f} dB at one bit against {DB_PER_BIT:.1f}" in page("formats.md")


def test_the_orthogonal_variance_along_k_reads_as_the_closed_form():
    """qjl.md §1: for q ∥ k the orthogonal sketch's variance is ≈ (π/2 − 3/2)‖q‖²‖k‖²/d (not
    an O(1/d²) term): d·Var from `qjl_variance` at d = 16, 128, 1024, and its large-d limit."""
    text = page("qjl.md")
    along = [d * float(T.qjl_variance("orthogonal", d, np.eye(d)[0], np.eye(d)[0])) for d in (16, 128, 1024)]
    assert f"is {listed(along, '.3f')} at d = 16, 128, 1024" in text
    assert abs(along[-1] - (math.pi / 2 - 1.5)) < 1e-3
    assert f"π/2 − 3/2 = {math.pi / 2 - 1.5:.4f}" in text
    assert f"(π/2 − 3/2)/(π/2 − 1) ≈ {(math.pi / 2 - 1.5) / (math.pi / 2 - 1):.3f}" in text


def test_the_one_hot_hadamard_row_is_the_closed_form():
    """theory.md §2: a one-hot key's Hadamard-rotated coordinates are all ±1/√d, so its
    relative squared error is (1 − c)², c the centroid (in units of 1/√d) of the cell that
    holds 1/√d — the Monte Carlo row must read so; the Haar row's expectation is
    `unit_vector_mse`."""
    d = 128
    rows = {r[0]: r[1:] for r in table("theory.md", "| bits | 1 | 2 | 3 | 4 |")}
    for b in (1, 2, 3, 4):
        c = T.flat_vector_gain(b, d)   # tests/quant/test_flat_vector_gain.py: the coder's factor
        assert_reads(rows["Hadamard, one-hot"][b - 1], (1 - c) ** 2)
        assert_reads(rows["its expectation, `unit_vector_mse(b, 128)`"][b - 1], T.unit_vector_mse(b, d))
