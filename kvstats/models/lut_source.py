"""The C source of :mod:`kvstats.models.lut_kernel`'s loops (compiled and loaded there).

Six loops, each checked by its caller before it reads or writes anything: ``lut_scores``
and ``lut_accumulate`` (a query against, and weights over, tokens whose packed codes are
looked up in a small table), ``encode`` (TurboQuant-mse/prod codes of a decode step's
tokens, straight into the cache's buffers), ``sign_scores`` (QJL key scores from
packed sign bits by per-byte tables of sketched-query sums, for
:class:`~kvstats.models.group_codes.QJLKeySide`) and ``group_scores`` /
``token_accumulate`` (KIVI's uniform key and value codes, ``code · scale + zero``, read
from their packed bytes, for :class:`~kvstats.models.group_codes.KIVIKeySide` and
:class:`~kvstats.models.group_codes.TokenValueSide`). Held apart from the Python that compiles
and checks them so that each module stays one idea under the line limit.
"""

__all__ = ["SOURCE"]

SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define MAXD 4096

/* IEEE binary16 <-> binary32, round to nearest even (as torch's .to(float16)). */
static inline uint16_t f2h(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    if (exp == 255) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int32_t e = exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t hm = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = mant >> 13, rem = mant & 0x1fffu;
    uint32_t h = sign | ((uint32_t)e << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) h++;
    return (uint16_t)h;
}

static inline float h2f(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu, x;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    x = (e == 31) ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    float f; memcpy(&f, &x, 4); return f;
}

static void pack(const uint8_t *codes, int n, int bits, uint8_t *out) {
    const int groups = (n + 7) / 8;
    for (int g = 0; g < groups; ++g) {
        uint64_t w = 0;
        for (int k = 0; k < 8; ++k) {
            int j = g * 8 + k;
            w |= (uint64_t)(j < n ? codes[j] : 0) << (k * bits);
        }
        for (int i = 0; i < bits; ++i) out[g * bits + i] = (uint8_t)(w >> (8 * i));
    }
}

/* TurboQuant-mse (+ prod residual) codes of x (BH, n, d), float16 norms; output row t of
   bh at (bh * os0 + t) (os0 = n: contiguous; = capacity: straight into a token buffer).
   signs (Hs, d) with 1/sqrt(d_pad) folded in, hd (d, dpad): NULL for no rotation
   (dpad == d). Head of row bh: bh % H when Hs > 1. sketch (Hs, m, d) or NULL.
   Returns 1 on a norm beyond float16 (or non-finite), 2 on sizes beyond MAXD. */
int encode(const float *x, const float *signs, const float *hd, const float *bnd, const float *cent,
           const float *sketch, int BH, int H, int Hs, int n, int d, int dpad, int bits, int m,
           uint8_t *codes, uint16_t *norms, uint8_t *sbits, uint16_t *rnorms, long os0) {
    if (dpad > MAXD || m > MAXD || d > MAXD) return 2;
    float u[MAXD], y[MAXD], r[MAXD];
    uint8_t c[MAXD];
    const int nb = (1 << bits) - 1, cbytes = (dpad + 7) / 8 * bits, sbytes = (m + 7) / 8;
    for (int bh = 0; bh < BH; ++bh) {
        const int h = Hs > 1 ? bh % H : 0;
        const float *sg = signs ? signs + (long)h * d : 0;
        for (int t = 0; t < n; ++t) {
            const long row = (long)bh * n + t, orow = (long)bh * os0 + t;  /* input, output rows */
            const float *xv = x + row * d;
            float ss = 0.0f;
            for (int j = 0; j < d; ++j) ss += xv[j] * xv[j];
            float norm = sqrtf(ss);
            if (!(norm <= 65504.0f)) return 1;
            float inv = norm > 0 ? (float)(1.0 / (double)norm) : 0.0f;
            for (int j = 0; j < d; ++j) u[j] = xv[j] * inv;
            if (hd) {
                for (int j = 0; j < d; ++j) u[j] *= sg[j];
                for (int k = 0; k < dpad; ++k) y[k] = 0.0f;
                for (int j = 0; j < d; ++j) {
                    const float uj = u[j], *hr = hd + (long)j * dpad;
                    for (int k = 0; k < dpad; ++k) y[k] += uj * hr[k];
                }
            } else {
                for (int k = 0; k < dpad; ++k) y[k] = u[k];
            }
            for (int k = 0; k < dpad; ++k) {  /* codes: boundaries strictly below y */
                int lo = 0, hi = nb;
                while (lo < hi) { int mid = (lo + hi) / 2; if (bnd[mid] < y[k]) lo = mid + 1; else hi = mid; }
                c[k] = (uint8_t)lo;
            }
            pack(c, dpad, bits, codes + orow * cbytes);
            uint16_t hn = f2h(norm);
            norms[orow] = hn;
            if (!sketch) continue;
            const float sn = h2f(hn);
            /* residual r = x - norm * R^T centroids (as the torch coder: unrotate, signs, norm) */
            for (int j = 0; j < d; ++j) {
                float acc = 0.0f;
                if (hd) {
                    const float *hr = hd + (long)j * dpad;
                    for (int k = 0; k < dpad; ++k) acc += cent[c[k]] * hr[k];
                    acc *= sg[j];
                } else {
                    acc = cent[c[j]];
                }
                r[j] = xv[j] - acc * sn;
            }
            const float *sk = sketch + (long)h * m * d;
            uint8_t *sb = sbits + orow * sbytes;
            memset(sb, 0, sbytes);
            for (int i = 0; i < m; ++i) {
                float p = 0.0f;
                for (int j = 0; j < d; ++j) p += r[j] * sk[(long)i * d + j];
                if (p >= 0.0f) sb[i / 8] |= (uint8_t)(1u << (i % 8));
            }
            float rs = 0.0f;
            for (int j = 0; j < d; ++j) rs += r[j] * r[j];
            float rn = sqrtf(rs);
            if (!(rn <= 65504.0f)) return 1;
            rnorms[orow] = f2h(rn);
        }
    }
    return 0;
}

/* Values of the n codes of one token. bytetab (or NULL): for bits dividing 8, the values
   of the codes in each byte (256 x 8/bits floats) -- one copy per byte instead of a shift,
   mask and load per code; for 3 bits, the values of each pair of codes (64 x 2 floats),
   four copies per 24-bit word of eight codes. Other widths: shifts with a constant width. */
static inline __attribute__((always_inline)) void unpack_const(const uint8_t *p, int n, const int bits,
                                                               const float *table, float *out) {
    const uint64_t mask = (1ull << bits) - 1;
    const int groups = (n + 7) / 8;
    for (int g = 0; g < groups; ++g) {
        uint64_t w = 0;
        for (int i = 0; i < bits; ++i) w |= (uint64_t)p[g * bits + i] << (8 * i);
        for (int k = 0; k < 8; ++k) out[g * 8 + k] = table[(w >> (k * bits)) & mask];
    }
}

static inline void unpack(const uint8_t *p, int n, int bits, const float *table,
                          const float *bytetab, float *out) {
    if (bytetab && bits == 3) {
        const int groups = (n + 7) / 8;
        for (int g = 0; g < groups; ++g) {
            const uint8_t *q = p + 3 * g;
            const uint32_t w = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16);
            memcpy(out + 8 * g, bytetab + 2 * (w & 63u), 8);
            memcpy(out + 8 * g + 2, bytetab + 2 * ((w >> 6) & 63u), 8);
            memcpy(out + 8 * g + 4, bytetab + 2 * ((w >> 12) & 63u), 8);
            memcpy(out + 8 * g + 6, bytetab + 2 * (w >> 18), 8);
        }
        return;
    }
    if (bytetab) {
        const int per = 8 / bits, nbytes = (n + per - 1) / per;
        switch (per) {  /* constant sizes: inlined copies, not a libc call per byte */
        case 1: for (int b = 0; b < nbytes; ++b) out[b] = bytetab[p[b]]; break;
        case 2: for (int b = 0; b < nbytes; ++b) memcpy(out + 2 * b, bytetab + 2 * p[b], 8); break;
        case 4: for (int b = 0; b < nbytes; ++b) memcpy(out + 4 * b, bytetab + 4 * p[b], 16); break;
        default: for (int b = 0; b < nbytes; ++b) memcpy(out + 8 * b, bytetab + 8 * p[b], 32); break;
        }
        return;
    }
    switch (bits) {
    case 1: unpack_const(p, n, 1, table, out); break;
    case 2: unpack_const(p, n, 2, table, out); break;
    case 3: unpack_const(p, n, 3, table, out); break;
    case 4: unpack_const(p, n, 4, table, out); break;
    case 5: unpack_const(p, n, 5, table, out); break;
    case 6: unpack_const(p, n, 6, table, out); break;
    case 7: unpack_const(p, n, 7, table, out); break;
    default: unpack_const(p, n, 8, table, out); break;
    }
}

/* The values of token t of row bh into c: looked up from its packed codes, or (dense, a
   decoded copy of those values) copied from row bh*ds0 + t*ds1 -- either way the arithmetic
   that follows is the same code on the same numbers, so both sources give identical sums. */
static inline void token_values(const uint8_t *codes, const float *dense, int bh, int t, int D, int bits,
                                const float *table, const float *bytetab, long cs0, long cs1, long ds0,
                                long ds1, float *c) {
    if (dense) memcpy(c, dense + bh * ds0 + (long)t * ds1, sizeof(float) * D);
    else unpack(codes + bh * cs0 + (long)t * cs1, D, bits, table, bytetab, c);
}

/* q (BH, G, D) contiguous; codes: token t of bh at codes + bh*cs0 + t*cs1 (or dense float
   values at dense + bh*ds0 + t*ds1 when dense is not NULL); scale: float16 at
   scale + bh*ss0 + t; out (BH, G, n) contiguous. */
int lut_scores(const float *q, const uint8_t *codes, const uint16_t *scale, const float *table,
               const float *bytetab, float *out, int BH, int G, int D, int n, int bits, long cs0, long cs1,
               long ss0, const float *dense, long ds0, long ds1) {
    if (D > MAXD) return 1;
    /* eight tokens at a time, their values transposed (ct[j][tt]): the dot products then
       vectorise across tokens, with no horizontal sum per token */
    float c[MAXD + 8], ct[MAXD * 8];
    for (int bh = 0; bh < BH; ++bh) {
        const float *qb = q + (long)bh * G * D;
        float *ob = out + (long)bh * G * n;
        for (int t0 = 0; t0 < n; t0 += 8) {
            const int nt = n - t0 < 8 ? n - t0 : 8;
            float s[8];
            for (int tt = 0; tt < 8; ++tt) {
                if (tt < nt) {
                    token_values(codes, dense, bh, t0 + tt, D, bits, table, bytetab, cs0, cs1, ds0, ds1, c);
                    s[tt] = h2f(scale[(long)bh * ss0 + t0 + tt]);
                } else {
                    memset(c, 0, sizeof(float) * D);
                    s[tt] = 0.0f;
                }
                for (int j = 0; j < D; ++j) ct[j * 8 + tt] = c[j];
            }
            for (int g = 0; g < G; ++g) {
                const float *qg = qb + (long)g * D;
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int j = 0; j < D; ++j) {
                    const float qj = qg[j];
                    for (int tt = 0; tt < 8; ++tt) acc[tt] += qj * ct[j * 8 + tt];
                }
                for (int tt = 0; tt < nt; ++tt) ob[(long)g * n + t0 + tt] = acc[tt] * s[tt];
            }
        }
    }
    return 0;
}

/* acc[g] += (w[g, t] * s) * c[j] for the G queries of one (batch, head): a decoded token
   added to every query's sum (the two accumulate loops). */
static inline void add_token(const float *wb, float *ab, int G, int D, int n, int t, float s, const float *c) {
    for (int g = 0; g < G; ++g) {
        const float wt = wb[(long)g * n + t] * s;
        float *ag = ab + (long)g * D;
        for (int j = 0; j < D; ++j) ag[j] += wt * c[j];
    }
}

/* w (BH, G, n) contiguous, weighted by mult * scale (float16, as in lut_scores);
   acc (BH, G, D) contiguous, overwritten; codes or dense as in lut_scores. */
int lut_accumulate(const float *w, const uint8_t *codes, const uint16_t *scale, float mult, const float *table,
                   const float *bytetab, float *acc, int BH, int G, int D, int n, int bits, long cs0,
                   long cs1, long ss0, const float *dense, long ds0, long ds1) {
    if (D > MAXD) return 1;
    float c[MAXD + 8];
    memset(acc, 0, sizeof(float) * (size_t)BH * G * D);
    for (int bh = 0; bh < BH; ++bh) {
        const float *wb = w + (long)bh * G * n;
        float *ab = acc + (long)bh * G * D;
        for (int t = 0; t < n; ++t) {
            token_values(codes, dense, bh, t, D, bits, table, bytetab, cs0, cs1, ds0, ds1, c);
            add_token(wb, ab, G, D, n, t, mult * h2f(scale[(long)bh * ss0 + t]), c);
        }
    }
    return 0;
}

/* QJL key scores from packed sign bits (bit i of a token: byte i/8, bit i%8, 1 -> +1):
   out[bh, g, t] = scale * norm(bh, t) * sum_i sq[bh, g, i] * (bit i of token t ? +1 : -1).
   Per (bh, g) the ceil(m/8) tables of 256 sums tab[p][b] = sum_{i<8} (bit i of b ? +1 : -1)
   * sq[8p + i] (255 adds each, by doubling; coordinates past m count 0), then one look-up
   per byte of each token: 32 loads for m = 256 instead of 256 multiply-adds.
   sq (BH, G, m) contiguous; signs: token t of bh at signs + bh*s0 + t*s1; norms float16 at
   norms + bh*ns0 + t; tab: room for G * ceil(m/8) * 256 floats; out (BH, G, n) contiguous. */
int sign_scores(const float *sq, const uint8_t *signs, const uint16_t *norms, float scale, float *tab,
                float *out, int BH, int G, int m, int n, long s0, long s1, long ns0) {
    const int nb = (m + 7) / 8;
    for (int bh = 0; bh < BH; ++bh) {
        for (int g = 0; g < G; ++g) {
            const float *q = sq + ((long)bh * G + g) * m;
            for (int p = 0; p < nb; ++p) {
                float *T = tab + ((long)g * nb + p) * 256, s = 0.0f, d[8];
                for (int i = 0; i < 8; ++i) {
                    const float v = 8 * p + i < m ? q[8 * p + i] : 0.0f;
                    s += v;
                    d[i] = 2.0f * v;
                }
                T[0] = -s;  /* all bits 0; setting bit i adds 2 sq[8p + i] */
                for (int i = 0; i < 8; ++i)
                    for (int b = 0; b < (1 << i); ++b) T[(1 << i) + b] = T[b] + d[i];
            }
        }
        const uint8_t *sb = signs + bh * s0;
        for (int t = 0; t < n; ++t) {
            const uint8_t *by = sb + (long)t * s1;
            const float c = scale * h2f(norms[bh * ns0 + t]);
            for (int g = 0; g < G; ++g) {
                const float *T = tab + (long)g * nb * 256;
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;  /* four chains of loads */
                int p = 0;
                for (; p + 4 <= nb; p += 4) {
                    a0 += T[p * 256 + by[p]];
                    a1 += T[(p + 1) * 256 + by[p + 1]];
                    a2 += T[(p + 2) * 256 + by[p + 2]];
                    a3 += T[(p + 3) * 256 + by[p + 3]];
                }
                for (; p < nb; ++p) a0 += T[p * 256 + by[p]];
                out[((long)bh * G + g) * n + t] = ((a0 + a1) + (a2 + a3)) * c;
            }
        }
    }
    return 0;
}
/* KIVI-style uniform codes (value = code * scale + zero, float16 scale/zero) read straight
   from their packed bytes: one token's codes into registers/L1, no float copy of the cache. */
static inline __attribute__((always_inline)) void ints_const(const uint8_t *p, int n, const int bits, float *out,
                                                             const int os) {
    const uint64_t mask = (1ull << bits) - 1;
    const int nbytes = (n * bits + 7) / 8;  /* pack_codes' row: the last word may be cut short */
    for (int g = 0; g < (n + 7) / 8; ++g) {
        uint64_t w = 0;
        if ((g + 1) * bits <= nbytes)
            for (int i = 0; i < bits; ++i) w |= (uint64_t)p[g * bits + i] << (8 * i);
        else
            for (int i = 0; g * bits + i < nbytes; ++i) w |= (uint64_t)p[g * bits + i] << (8 * i);
        for (int k = 0; k < 8; ++k) out[(g * 8 + k) * os] = (float)((w >> (k * bits)) & mask);
    }
}

/* The n codes at p as floats into out[j * os] (os = 1, or 8: a column of eight tokens). */
#define INTS(OS) switch (bits) { \
    case 1: ints_const(p, n, 1, out, OS); break; case 2: ints_const(p, n, 2, out, OS); break; \
    case 3: ints_const(p, n, 3, out, OS); break; case 4: ints_const(p, n, 4, out, OS); break; \
    case 5: ints_const(p, n, 5, out, OS); break; case 6: ints_const(p, n, 6, out, OS); break; \
    case 7: ints_const(p, n, 7, out, OS); break; default: ints_const(p, n, 8, out, OS); break; }
static inline void ints_row(const uint8_t *p, int n, int bits, float *out) { INTS(1) }
static inline void ints_col(const uint8_t *p, int n, int bits, float *out) { INTS(8) }

/* KIVI keys (per-channel scale/zero over groups of `group` tokens):
   out[bh, g, t] = sum_j (q_j s_j) x_tj + sum_j q_j z_j with s, z of token t's group, q·s and
   q·z once per group (into qs, room for G * D floats). q (BH, G, D) contiguous; codes: token
   t of bh at codes + bh*cs0 + t*cs1; float16 scale (zero): group i of bh at + bh*ss0 + i*ss1
   (bh*zs0 + i*zs1);
   out (BH, G, n) contiguous. Eight tokens at a time, unpacked straight into columns. */
int group_scores(const float *q, const uint8_t *codes, const uint16_t *scale, const uint16_t *zero, float *qs,
                 float *out, int BH, int G, int D, int n, int bits, int group, long cs0, long cs1, long ss0,
                 long ss1, long zs0, long zs1) {
    if (D > MAXD || G > MAXD) return 1;
    float ct[MAXD * 8], qz[MAXD];
    for (int bh = 0; bh < BH; ++bh) {
        const float *qb = q + (long)bh * G * D;
        float *ob = out + (long)bh * G * n;
        for (int gs = 0; gs < n; gs += group) {
            const int ge = n - gs < group ? n : gs + group;
            const uint16_t *sg = scale + bh * ss0 + (long)(gs / group) * ss1;
            const uint16_t *zg = zero + bh * zs0 + (long)(gs / group) * zs1;
            for (int g = 0; g < G; ++g) {
                const float *qg = qb + (long)g * D;
                float a = 0.0f;
                for (int j = 0; j < D; ++j) {
                    qs[(long)g * D + j] = qg[j] * h2f(sg[j]);
                    a += qg[j] * h2f(zg[j]);
                }
                qz[g] = a;
            }
            for (int t0 = gs; t0 < ge; t0 += 8) {
                const int nt = ge - t0 < 8 ? ge - t0 : 8;
                for (int tt = 0; tt < 8; ++tt) {
                    if (tt < nt) ints_col(codes + bh * cs0 + (long)(t0 + tt) * cs1, D, bits, ct + tt);
                    else for (int j = 0; j < D; ++j) ct[j * 8 + tt] = 0.0f;
                }
                for (int g = 0; g < G; ++g) {
                    const float *qg = qs + (long)g * D;
                    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    for (int j = 0; j < D; ++j) {
                        const float qj = qg[j];
                        for (int tt = 0; tt < 8; ++tt) acc[tt] += qj * ct[j * 8 + tt];
                    }
                    for (int tt = 0; tt < nt; ++tt) ob[(long)g * n + t0 + tt] = acc[tt] + qz[g];
                }
            }
        }
    }
    return 0;
}

/* Per-token values (scale/zero per group of `group` channels: token t of bh at + bh*ss0 +
   t*ss1 (zero: zs0, zs1), channel j's at [j / group]): acc[bh, g] = sum_t w[bh, g, t] (x_t s + z), each
   token decoded once into L1. w (BH, G, n), acc (BH, G, D) contiguous; codes as above. */
int token_accumulate(const float *w, const uint8_t *codes, const uint16_t *scale, const uint16_t *zero,
                     float *acc, int BH, int G, int D, int n, int bits, int group, long cs0, long cs1, long ss0,
                     long ss1, long zs0, long zs1) {
    if (D > MAXD) return 1;
    float c[MAXD + 8];
    memset(acc, 0, sizeof(float) * (size_t)BH * G * D);
    for (int bh = 0; bh < BH; ++bh) {
        const float *wb = w + (long)bh * G * n;
        float *ab = acc + (long)bh * G * D;
        for (int t = 0; t < n; ++t) {
            const uint16_t *sg = scale + bh * ss0 + (long)t * ss1, *zg = zero + bh * zs0 + (long)t * zs1;
            ints_row(codes + bh * cs0 + (long)t * cs1, D, bits, c);
            for (int j0 = 0; j0 < D; j0 += group) {
                const int je = D - j0 < group ? D : j0 + group;
                const float s = h2f(sg[j0 / group]), z = h2f(zg[j0 / group]);
                for (int j = j0; j < je; ++j) c[j] = c[j] * s + z;
            }
            add_token(wb, ab, G, D, n, t, 1.0f, c);   /* w * 1 is w exactly */
        }
    }
    return 0;
}
"""
