"""Tests for kvstats.quant.mse: the TurboQuant-mse quantizer."""

import warnings

import numpy as np
import pytest

from kvstats._checks import replicate_scale
from kvstats.quant.codebook import lloyd_max_codebook
from kvstats.quant.mse import MSECodes, MSEQuantizer
from kvstats.quant.packing import unpack_codes
from kvstats.quant.rotation import Rotation, make_rotation


def reference_roundtrip(q, x):
    """Plain reference with the dense rotation matrix and searchsorted on the boundaries."""
    m = q.rotation.matrix()  # (out_dim, d) for draws=()
    norms = np.linalg.norm(x, axis=-1)
    u = x / np.where(norms > 0, norms, 1.0)[..., None]
    y = u @ m.T
    codes = np.searchsorted(q.codebook.boundaries, y)
    x_hat = (q.codebook.centroids[codes] @ m) * norms.astype(q.norm_dtype).astype(float)[..., None]
    return codes, x_hat


@pytest.mark.parametrize("rotation", ["hadamard", "haar", "identity"])
@pytest.mark.parametrize("d,bits", [(64, 1), (96, 2), (128, 3), (128, 4), (64, 5), (32, 8)])
def test_fast_path_equals_dense_reference(rotation, d, bits):
    q = MSEQuantizer(d, bits, rotation=rotation, seed=4)
    x = np.random.default_rng(d + bits).standard_normal((200, d))
    codes_ref, x_hat_ref = reference_roundtrip(q, x)
    c = q.encode(x)
    codes = unpack_codes(c.codes, bits, q.n_coords)
    # identical codes except where y is within rounding of a boundary (then adjacent)
    diff = codes.astype(int) - codes_ref
    assert np.all(np.abs(diff) <= 1) and np.mean(diff == 0) > 0.9999
    same = np.all(diff == 0, axis=-1)
    np.testing.assert_allclose(q.decode(c)[same], x_hat_ref[same], rtol=0, atol=1e-12)


@pytest.mark.parametrize("rotation", ["hadamard", "haar"])
@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_unit_vector_error_equals_codebook_distortion(rotation, bits):
    """E||u - u_hat||^2 = d * mse_beta(bits, d) for u uniform on the sphere (a rotation of a
    uniform vector is uniform, so each rotated coordinate has exactly the sphere law the
    codebook was built for). Gaussian inputs, norms stored in float64 so the only error is
    the codebook's. Mean over n vectors within 4 standard errors."""
    d, n = 128, 4000
    q = MSEQuantizer(d, bits, rotation=rotation, seed=bits, norm_dtype=np.float64)
    x = np.random.default_rng(100 + bits).standard_normal((n, d))
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    err = np.sum((u - q.decode(q.encode(u))) ** 2, axis=-1)
    expected = d * lloyd_max_codebook(bits, "beta", dim=d).mse
    assert abs(err.mean() - expected) < 4 * err.std(ddof=1) / np.sqrt(n)


@pytest.mark.slow
def test_padded_dimension_error():
    """d = 96 padded to d_pad = 128. A rotated coordinate is exactly sqrt(96/128) times a
    sphere coordinate of dimension 96 (variance 1/128 like the Beta(128) law the codebook
    assumes, slightly different shape), so the error e = y - y_hat in the rotated space has
    E||e||^2 close to 128 * mse_beta(128) (within 2%). Decoding applies R^T, an orthogonal
    projection onto the 96-dim image, so per vector ||u - u_hat||^2 <= ||e||^2 exactly, and
    on average about d/d_pad = 0.75 of it once the error is spread (measured 0.754 at
    4 bits; 0.84 at 1 bit where the error is correlated with the signal)."""
    n = 4000 if replicate_scale() == "ci" else 40_000
    x = np.random.default_rng(5).standard_normal((n, 96))
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    for bits in (1, 2, 4):
        q = MSEQuantizer(96, bits, seed=6, norm_dtype=np.float64)
        c = q.encode(u)
        y = q.rotation.apply(u)
        e = np.sum((y - q.codebook.centroids[unpack_codes(c.codes, bits, 128)]) ** 2, -1)
        err = np.sum((u - q.decode(c)) ** 2, -1)
        assert e.mean() == pytest.approx(128 * lloyd_max_codebook(bits, "beta", dim=128).mse,
                                         rel=0.02)
        assert np.all(err <= e + 1e-12)
        assert 0.75 - 0.03 < err.mean() / e.mean() < (0.78 if bits == 4 else 0.9)


def test_float16_norm_error_is_bounded():
    """Norms stored in float16 change x_hat by the norm's relative rounding, <= 2^-11."""
    x = np.random.default_rng(3).standard_normal((500, 64)) * 3.0
    a = MSEQuantizer(64, 4, seed=0)
    b = MSEQuantizer(64, 4, seed=0, norm_dtype=np.float64)
    xa, xb = a.decode(a.encode(x)), b.decode(b.encode(x))
    rel = np.linalg.norm(xa - xb, axis=-1) / np.linalg.norm(xb, axis=-1)
    assert np.all(rel <= 2.0 ** -11) and rel.max() > 0


def test_error_decreases_about_fourfold_per_bit():
    x = np.random.default_rng(0).standard_normal((2000, 64))
    errs = []
    for bits in range(1, 9):
        q = MSEQuantizer(64, bits, seed=1)
        errs.append(np.mean(np.sum((x - q.decode(q.encode(x))) ** 2, -1) / np.sum(x * x, -1)))
    assert np.all(np.diff(errs) < 0)
    assert 3.5 < errs[4] / errs[5] < 4.5


@pytest.mark.parametrize("rotation", ["hadamard", "haar", "identity"])
def test_draws_batch_equals_loop_over_draws(rotation):
    """Fast batched path vs a plain loop over per-draw quantizers built from each draw's
    rotation: bit-identical codes for the Hadamard and identity paths (same elementwise
    arithmetic); Haar goes through batched BLAS, so codes may differ at rounding ties.
    The float32 Hadamard decode runs the fwht's first stages as a dense BLAS product
    whose rounding depends on the array's shape: within a few ulps of |x| ~ 4 there."""
    d, draws = 48, (3, 2)
    qb = MSEQuantizer(d, 3, rotation=rotation, seed=9, draws=draws)
    x = np.random.default_rng(1).standard_normal((3, 2, 10, d)).astype(np.float32)
    cb = qb.encode(x)
    assert cb.codes.shape == (3, 2, 10, 3 * qb.n_coords // 8)
    xb = qb.decode(cb)
    for i in range(3):
        for j in range(2):
            rot = qb.rotation.draw((i, j)) if qb.rotation.draws else qb.rotation
            q1 = MSEQuantizer(d, 3, rotation=rot)
            c1 = q1.encode(x[i, j])
            np.testing.assert_array_equal(c1.norms, cb.norms[i, j])
            if rotation == "haar":
                assert np.mean(c1.codes == cb.codes[i, j]) > 0.99
            else:
                np.testing.assert_array_equal(c1.codes, cb.codes[i, j])
                if rotation == "identity":
                    np.testing.assert_array_equal(q1.decode(c1), xb[i, j])
                else:
                    np.testing.assert_allclose(q1.decode(c1), xb[i, j], rtol=0, atol=2e-6)


def test_shared_input_broadcasts_against_draws():
    q = MSEQuantizer(16, 2, seed=0, draws=5)
    x = np.random.default_rng(0).standard_normal((7, 16))
    c = q.encode(x)
    assert c.codes.shape == (5, 7, 4) and c.norms.shape == (5, 7)
    assert q.decode(c).shape == (5, 7, 16)


def test_seeds():
    x = np.random.default_rng(0).standard_normal((50, 128))
    a = MSEQuantizer(128, 4, seed=1).encode(x)
    b = MSEQuantizer(128, 4, seed=1).encode(x)
    c = MSEQuantizer(128, 4, seed=2).encode(x)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.norms, b.norms)
    assert not np.array_equal(MSEQuantizer(128, 4, seed=1).rotation.signs,
                              MSEQuantizer(128, 4, seed=2).rotation.signs)
    assert np.mean(a.codes == c.codes) < 0.5


def test_zero_vectors_decode_to_zero():
    x = np.random.default_rng(0).standard_normal((4, 3, 96)).astype(np.float32)
    x[1, 2] = 0.0
    x[3] = 0.0
    for rotation in ("hadamard", "haar", "identity"):
        q = MSEQuantizer(96, 3, rotation=rotation, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = q.decode(q.encode(x))
        assert np.all(np.isfinite(out))
        assert np.all(out[1, 2] == 0) and np.all(out[3] == 0)
        assert np.all(np.linalg.norm(out[0], axis=-1) > 0)


def test_dtypes_and_accounting():
    q = MSEQuantizer(96, 3, seed=0)
    x64 = np.random.default_rng(0).standard_normal((5, 96))
    c = q.encode(x64.astype(np.float32))
    assert isinstance(c, MSECodes)
    assert q.decode(c).dtype == np.float32
    assert q.decode(q.encode(x64)).dtype == np.float64
    assert q.decode(q.encode(np.ones((2, 96), dtype=np.int32))).dtype == np.float64
    assert c.codes.dtype == np.uint8 and c.codes.shape == (5, 48)  # 3 bits x 128 / 8
    assert c.norms.dtype == np.float16 and c.n_coords == 128 and c.bits == 3
    assert c.nbytes == 5 * (48 + 2)
    assert q.bits_per_vector() == {"codes": 384, "norm": 16}
    assert MSEQuantizer(128, 4, norm_dtype=np.float32).bits_per_vector() == {"codes": 512, "norm": 32}
    np.testing.assert_array_equal(c.norms, np.linalg.norm(x64.astype(np.float32), axis=-1)
                                  .astype(np.float16))
    d = q.describe()
    assert d["rotation"] == "hadamard" and d["n_coords"] == 128 and d["norm_dtype"] == "float16"


def test_bad_input():
    q = MSEQuantizer(8, 2, seed=0)
    with pytest.raises(ValueError, match="finite"):
        q.encode(np.array([[np.nan] * 8]))
    with pytest.raises(ValueError, match="finite"):
        q.encode(np.array([[np.inf] + [0.0] * 7]))
    with pytest.raises(ValueError, match="last axis of length 8"):
        q.encode(np.ones((2, 7)))
    with pytest.raises(ValueError, match="norm_dtype=np.float32"):
        q.encode(np.full((1, 8), 1e5))
    big = MSEQuantizer(8, 2, seed=0, norm_dtype=np.float32)
    out = big.decode(big.encode(np.full((1, 8), 1e5)))
    assert np.all(np.isfinite(out))
    huge = np.full((1, 8), 1e300)  # squares overflow: the norm is recomputed with scaling
    c = MSEQuantizer(8, 2, norm_dtype=np.float64).encode(huge)
    assert c.norms[0] == pytest.approx(1e300 * np.sqrt(8))
    with pytest.raises(ValueError, match=r"bits must be an integer in \[1, 8\]"):
        MSEQuantizer(8, 0)
    with pytest.raises(ValueError, match="rotation must be one of"):
        MSEQuantizer(8, 2, rotation="dct")
    with pytest.raises(ValueError, match="rotation must have dim 8"):
        MSEQuantizer(8, 2, rotation=make_rotation("haar", 4))
    with pytest.raises(ValueError, match=r"draws must be \(\) when rotation is a Rotation"):
        MSEQuantizer(8, 2, rotation=make_rotation("haar", 8), draws=3)
    with pytest.raises(ValueError, match="norm_dtype must be one of"):
        MSEQuantizer(8, 2, norm_dtype=np.int8)
    with pytest.raises(TypeError, match="codes must be MSECodes"):
        q.decode(np.zeros((1, 2), np.uint8))
    with pytest.raises(ValueError, match="bits=2"):
        q.decode(MSEQuantizer(8, 3).encode(np.ones((1, 8))))


def test_decode_refuses_codes_it_cannot_have_made():
    """decode names codes and what is wrong, where numpy would say only that two shapes do
    not broadcast: a batch that does not broadcast against the draws, norms of another
    batch shape than the codes, a dtype encode never records (float32/float64 only)."""
    x = np.random.default_rng(0).standard_normal((4, 10, 64))
    c4 = MSEQuantizer(64, 3, draws=4).encode(x)
    with pytest.raises(ValueError, match=r"codes' batch axes \(4,\) must broadcast against "
                                         r"the draws \(3,\)"):
        MSEQuantizer(64, 3, draws=3).decode(c4)
    q = MSEQuantizer(64, 3)
    with pytest.raises(ValueError, match=r"codes.norms must have shape \(4, 10\).*\(2, 10\)"):
        q.decode(MSECodes(c4.codes, c4.norms[:2], 3, 64, np.dtype(np.float64)))
    with pytest.raises(ValueError, match=r"codes.dtype must be float32 or float64; received float16"):
        q.decode(MSECodes(c4.codes, c4.norms, 3, 64, np.dtype(np.float16)))


@pytest.mark.parametrize("bits", [3, 4])
def test_chunked_rows_equal_batched_path(bits):
    """draws=() codes rows in cache-sized chunks; a rotation with draws=(1,) and the same
    signs takes the one-pass batched path: the codes and decoded vectors must agree
    across several chunk boundaries (and a remainder)."""
    d = 64
    q = MSEQuantizer(d, bits, seed=3)
    rows = 3 * (2 ** 16 // d) + 7
    x = np.random.default_rng(bits).standard_normal((rows, d)).astype(np.float32)
    x[5] = 0.0
    c = q.encode(x)
    batched = MSEQuantizer(d, bits, rotation=Rotation("hadamard", d, d, (1,), q.rotation.signs[None]))
    cb = batched.encode(x[None])
    np.testing.assert_array_equal(c.codes, cb.codes[0])
    np.testing.assert_array_equal(c.norms, cb.norms[0])
    # float32 decode: a few ulps apart (the dense BLAS stage rounds by shape; 1.3e-6 seen)
    np.testing.assert_allclose(q.decode(c), batched.decode(cb)[0], rtol=0, atol=3e-6)
    assert np.all(q.decode(c)[5] == 0)


def test_protocol_and_export():
    from kvstats.quant.coder import Coder, ExportableCoder

    q = MSEQuantizer(96, 3, seed=4, norm_dtype=np.float32)
    assert isinstance(q, Coder) and isinstance(q, ExportableCoder)
    assert q.nominal_bits == 3 and q.describe()["coder"] == "mse"
    assert q.stored_bits(7) == {"codes": 3 * 128 * 7, "norm": 32 * 7}
    ex = q.export()
    # the exported arrays are the coder's own: signs of its Hadamard rotation, its codebook
    assert np.array_equal(ex.signs, q.rotation.signs) and ex.dim_padded == 128 and ex.dim == 96
    assert np.array_equal(ex.centroids, q.codebook.centroids)
    assert np.array_equal(ex.boundaries, q.codebook.boundaries)
    assert ex.sketch is None and ex.sketch_scale == 0.0 and ex.m == 0
    assert ex.norm_dtype == np.float32 and ex.coder == "mse" and ex.bits == 3
    assert MSEQuantizer(64, 2, rotation="identity").export().signs is None
    with pytest.raises(ValueError, match="rotation must be 'hadamard' or 'identity'"):
        MSEQuantizer(64, 2, rotation="haar").export()
    with pytest.raises(ValueError, match="draws must be"):
        MSEQuantizer(64, 2, draws=2).export()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d,draws,n", [(96, (), 300), (1000, 3, 100), (128, (2, 3), 9)])
def test_hadamard_signs_held_in_int8_code_bit_for_bit(dtype, d, draws, n):
    # hold_matrices_as keeps a Hadamard rotation's +-1 signs in int8 (Rotation.held_as): the
    # codes, norms and decodes of both dtypes, on every path (whole chunks, roundtrip's
    # pieces spanning draws, padding), equal those of float64 signs; the export stays float64
    from kvstats.quant.prod import ProdQuantizer

    x = np.random.default_rng(5).standard_normal(((*np.atleast_1d(draws), n) if draws else (n,)) + (d,))
    x = x.astype(dtype)
    for make in (lambda: MSEQuantizer(d, 3, seed=4, draws=draws),
                 lambda: ProdQuantizer(d, 3, sketch="srht", seed=4, draws=draws)):
        ref, held = make(), make()
        held.hold_matrices_as(np.float32)
        rot = getattr(held, "mse", held).rotation
        assert rot.signs.dtype == np.int8 and getattr(ref, "mse", ref).rotation.signs.dtype == np.float64
        a, b = ref.encode(x), held.encode(x)
        for u, v in [(a.codes, b.codes), (a.norms, b.norms)] if isinstance(ref, MSEQuantizer) else \
                [(a.mse.codes, b.mse.codes), (a.residual.signs, b.residual.signs), (a.residual.norms, b.residual.norms)]:
            np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(held.decode(b), ref.decode(a))
        np.testing.assert_array_equal(held.roundtrip(x), ref.roundtrip(x))
        if not draws:
            ex = held.export()
            assert ex.signs.dtype == np.float64 and np.array_equal(ex.signs, ref.export().signs)


@pytest.mark.parametrize("rotation", ["hadamard", "identity", "haar"])
@pytest.mark.parametrize("n,d,draws", [(1024, 128, 7), (120, 96, (3, 4)), (16, 256, 13)])
def test_chunked_draws_equal_one_pass(monkeypatch, rotation, n, d, draws):
    """The draws path works in chunks of whole draws; with the chunk bound lifted it is
    one pass over the whole batch (the arithmetic before chunking). Codes, norms and
    decoded/round-tripped vectors must be bit-identical: the Hadamard chunks hold a
    multiple of 96 rows of the fwht's dense BLAS stage, which rounds a row by its place
    in the call (cutting at every draw instead fails here for n = 1024 on OpenBLAS's
    Haswell kernels; checked by mutating _BLAS_ROWS to 1)."""
    import kvstats.quant.mse as mse

    rng = np.random.default_rng(n)
    batch = (draws,) if isinstance(draws, int) else draws
    x = (rng.standard_normal(batch + (n, d)) * rng.gamma(1.0, size=batch + (n, 1))).astype(np.float32)
    x[..., 3, :] = 0.0
    q = MSEQuantizer(d, 3, rotation=rotation, seed=5, draws=draws, norm_dtype=np.float32)
    monkeypatch.setattr(mse, "_CHUNK_VALUES", 1 << 12)  # small chunks: several per batch
    c, rt = q.encode(x), q.roundtrip(x)
    dec = q.decode(c)
    assert len(q._plan(c.shape)[1]) > 2
    monkeypatch.setattr(mse, "_CHUNK_VALUES", 1 << 40)
    assert len(q._plan(c.shape)[1]) == 1
    c1 = q.encode(x)
    np.testing.assert_array_equal(c.codes, c1.codes)
    np.testing.assert_array_equal(c.norms, c1.norms)
    np.testing.assert_array_equal(dec, q.decode(c1))
    np.testing.assert_array_equal(rt, q.roundtrip(x))
    np.testing.assert_array_equal(rt, dec)


def test_nonfinite_input_is_found_by_the_norm_pass():
    """x is not scanned for NaN/inf separately: the norms see every value. A NaN in any
    chunk (not only the first) and an inf that the overflow rescaling would hide are
    reported as by as_float_array, for every path that takes x."""
    q1, qd = MSEQuantizer(64, 2, seed=0), MSEQuantizer(64, 2, seed=0, draws=4)
    for q, shape in ((q1, (5000, 64)), (qd, (4, 600, 64))):
        for bad in (np.nan, np.inf, -np.inf):
            x = np.ones(shape)
            x[(-1,) * (len(shape) - 1) + (7,)] = bad
            for fn in (q.encode, q.roundtrip):
                with pytest.raises(ValueError, match=r"x must be finite; received 1 NaN/inf"):
                    fn(x)
    huge = np.full((3, 64), 1e300)  # finite: squares overflow, the norm is rescaled
    huge[1, 0] = np.inf
    with pytest.raises(ValueError, match="x must be finite"):
        MSEQuantizer(64, 2, norm_dtype=np.float64).encode(huge)


@pytest.mark.parametrize("rotation", ["hadamard", "haar", "identity"])
@pytest.mark.parametrize("dtype,scale", [(np.float32, 2.0 ** -140), (np.float64, 2.0 ** -1060)])
def test_a_norm_whose_inverse_overflows_codes_its_direction(rotation, dtype, scale):
    """A vector of norm below 1 / finfo(dtype).max (subnormal entries) has an inverse norm
    that overflows its dtype: the unit vector must still be x / ||x||, not inf or NaN.
    Its codes are those of the same vector scaled up by an exact power of two (up to the
    norm's last-bit rounding, which moves a code only at a boundary), and roundtrip
    equals decode(encode()) for it."""
    x = np.random.default_rng(6).standard_normal((200, 96)).astype(dtype)
    tiny = x * dtype(scale)                              # subnormal entries (rounded)
    big = (tiny.astype(np.float64) / scale).astype(dtype)  # the same bits, exponent shifted
    q = MSEQuantizer(96, 3, rotation=rotation, seed=2, norm_dtype=np.float64)
    with np.errstate(over="raise", invalid="raise"):  # no inf * 0 on the way
        c_tiny, c_big = q.encode(tiny), q.encode(big)
        rt = q.roundtrip(tiny)
    same = unpack_codes(c_tiny.codes, 3, q.n_coords) == unpack_codes(c_big.codes, 3, q.n_coords)
    assert same.mean() > 0.999
    # float64 norms of ~1e-318 are subnormal themselves: as precise as their spacing
    np.testing.assert_allclose(c_tiny.norms / scale, c_big.norms, rtol=1e-6,
                               atol=np.finfo(np.float64).smallest_subnormal / scale)
    np.testing.assert_array_equal(rt, q.decode(c_tiny))


def test_a_norm_beyond_the_inputs_dtype_is_refused():
    """x decodes in its own dtype (norm times direction): a float32 vector whose norm
    exceeds float32's largest value would decode as inf even with float64 norms, so
    encode and roundtrip refuse it (naming x, float32 and float64); as float64 it codes."""
    x = np.random.default_rng(7).standard_normal((3, 96)).astype(np.float32) * np.float32(1e38)
    assert np.isfinite(x).all()
    q = MSEQuantizer(96, 3, seed=0, norm_dtype=np.float64)
    for fn in (q.encode, q.roundtrip):
        with pytest.raises(ValueError, match=r"x has a vector norm of .*above the largest "
                                             r"float32.*as float64"):
            fn(x)
    assert np.isfinite(q.roundtrip(x.astype(np.float64))).all()


def test_roundtrip_out_argument():
    """roundtrip(x, out=buf) writes the same numbers into buf (MSE and Prod, with and
    without draws); a wrong shape/dtype/layout or an out overlapping x is refused."""
    from kvstats.quant.prod import ProdQuantizer

    x = np.random.default_rng(4).standard_normal((3, 50, 48)).astype(np.float32)
    for q in (MSEQuantizer(48, 3, seed=1), MSEQuantizer(48, 3, seed=1, draws=3),
              ProdQuantizer(48, 3, seed=1), ProdQuantizer(48, 3, seed=1, draws=3)):
        buf = np.full_like(x, np.nan)
        assert q.roundtrip(x, out=buf) is buf
        np.testing.assert_array_equal(buf, q.roundtrip(x))
        for bad in (np.empty((3, 50, 47), np.float32), np.empty_like(x, dtype=np.float64),
                    np.empty((3, 48, 50), np.float32).transpose(0, 2, 1), x[:, :, :],
                    [[0.0]]):
            with pytest.raises(ValueError, match="out must"):
                q.roundtrip(x, out=bad)


@pytest.mark.parametrize("d", [1024, 1000])
def test_roundtrip_pieces_spanning_draws_equal_encode_decode(d):
    """`roundtrip` runs the MSE steps on cache-sized pieces (60 rows at d_pad = 1024), here
    spanning draws of 100 rows and, for d = 1000, padded: bit for bit the chunk-at-a-time
    steps of encode and decode (the codes agree too)."""
    from threadpoolctl import threadpool_limits

    from kvstats.quant.prod import ProdQuantizer

    q = MSEQuantizer(d, 3, seed=4, draws=3, norm_dtype="float32")
    x = np.random.default_rng(5).standard_normal((3, 100, d)).astype(np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        codes = q.encode(x)
        np.testing.assert_array_equal(q.roundtrip(x), q.decode(codes))
        pq = ProdQuantizer(d, 4, seed=4, draws=3, norm_dtype="float32")
        pc = pq.encode(x)
        np.testing.assert_array_equal(pc.mse.codes, pq.mse.encode(x).codes)


# --- inner products: biased by the factor theory gives -----------------------------------
# For a Haar rotation R and a unit x, E[R^T c(R x)] = alpha x (the law of R is invariant
# under rotations fixing x), with alpha = E<y, c(y)> = d E[y_1 c(y_1)] for y = R x uniform on
# the sphere. The Lloyd centroid condition E[y_1 | cell] = c gives E[y_1 c(y_1)] = E[c(y_1)^2]
# and so mse = E y_1^2 - E[y_1 c(y_1)] = 1/d - E[y_1 c(y_1)]: alpha = 1 - d * mse. Hence
# E<q, x_hat> = (1 - d * mse_beta(b, d)) <q, x> for every q: the MSE scheme shrinks inner
# products (TurboQuant, Zandieh et al. 2025, Sec. 3.2: 2/pi at b = 1 for large d).
Z_MAX = 4.5  # two-sided p ~ 7e-6 per comparison


@pytest.mark.parametrize("bits", [1, 2, 3])
def test_inner_products_shrink_by_one_minus_d_times_the_codebook_mse(bits):
    d = 16
    n_draws = {"ci": 6000, "full": 60000}[replicate_scale()]
    rng = np.random.default_rng(5)
    x, q = rng.standard_normal((3, d)), rng.standard_normal((3, d))
    q[0] = x[0]  # parallel: the largest shrinkage
    mq = MSEQuantizer(d, bits, rotation="haar", seed=9, draws=n_draws, norm_dtype=np.float64)
    ip = (q * mq.decode(mq.encode(x))).sum(-1)  # (draws, 3); draws independent
    truth = (q * x).sum(-1)
    se = ip.std(0, ddof=1) / np.sqrt(n_draws)
    alpha = 1 - d * lloyd_max_codebook(bits, "beta", dim=d).mse
    assert np.abs((ip.mean(0) - alpha * truth) / se).max() < Z_MAX
    # power: the unbiased mean (alpha = 1) is rejected (alpha = 0.66, 0.89, 0.97 here)
    assert abs((ip.mean(0)[0] - truth[0]) / se[0]) > 3 * Z_MAX


@pytest.mark.parametrize("d", [3, 16, 128, 1024])
def test_one_bit_shrinkage_is_d_times_the_squared_mean_absolute_coordinate(d):
    """b = 1: the centroids are +-E|y_1|, so alpha = d (E|y_1|)^2, with
    E|y_1| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)); it tends to 2/pi."""
    from scipy.special import gammaln
    mean_abs = np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi)
    alpha = 1 - d * lloyd_max_codebook(1, "beta", dim=d).mse
    assert alpha == pytest.approx(d * mean_abs ** 2, rel=1e-10)  # the mse is exact to ~1e-12
    if d == 1024:
        assert alpha == pytest.approx(2 / np.pi, rel=1e-3)
