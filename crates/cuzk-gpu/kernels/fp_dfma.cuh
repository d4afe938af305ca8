// fp_dfma.cuh: the Fp Montgomery product and square on the FP64 pipe. On an H200 the 32-bit
// CIOS product of field.cuh is bound by the integer multiply pipe (each madc is an IMAD plus
// an IADD3.X); this one makes the 48 x 48-bit limb products with double-precision FMAs
// (Emmart, Zheng, Weems, "Faster Modular Exponentiation Using Double Precision Floating
// Point Arithmetic on the GPU", ARITH 2018) and keeps only the column sums and the
// reduction quotients on the integer pipes. Measured with bench/fieldmul on the H200: 1.27x
// the products per second of the CIOS product, and 1.58x for the square (docs/runs/2026-11-30.md,
// "Fp products on the FP64 pipe").
//
// Same values in and out as field.cuh's fp_t: 12 little-endian 32-bit limbs, Montgomery form
// with R = 2^384, inputs in [0, p). The result is a b / R in [0, 2p); the caller subtracts p
// once (mont_t::reduce_once).
//
// Radix 2^48, 8 limbs (8 * 48 = 384, so R is unchanged). For integers 0 <= x, y < 2^48 held
// exactly in doubles, x y < 2^96 and
//   hi = fma_rz(x, y, 2^100):  x y + 2^100 lies in [2^100, 2^101), where the spacing of
//        doubles is 2^48, so rounding toward zero gives 2^100 + H 2^48, H = floor(x y / 2^48);
//        its bit pattern is 0x463 << 52 | H.
//   lo = fma_rz(x, y, (2^100 + 2^52) - hi):  the addend is 2^52 - H 2^48, exact; the sum
//        x y - H 2^48 + 2^52 = 2^52 + L, L = x y mod 2^48, lies in [2^52, 2^53) where the
//        spacing is 1: exact, bit pattern 0x433 << 52 | L.
// So H lands in the next 48-bit column and L in this one. Each column sums the raw bit
// patterns as 64-bit integers and subtracts the known exponent bits (mod 2^64 the raw sums
// may wrap; the true sums do not).
//
// Product scanning with the Montgomery reduction interleaved, columns k = 0..15:
//   S_k = carry + sum L(a_i b_j, i + j = k) + sum H(a_i b_j, i + j = k - 1)
//               + sum L(m_i p_j, i + j = k, i < k) + sum H(m_i p_j, i + j = k - 1)
//   k < 8:  m_k = S_k (-p^-1) mod 2^48 (integer multiply); adding m_k p_0 makes S_k divisible
//           by 2^48 (its H goes to column k + 1).
//   k >= 8: result limb k - 8 = S_k mod 2^48.
//   carry = S_k >> 48.
// Bounds: a column takes at most 16 L and 16 H terms below 2^48 (below 2^49 for the doubled
// cross terms of the square), so S_k < 2^54 + 2^55 plus a carry below 2^8: no overflow. With
// M = sum m_k 2^(48 k) < R, the result (a b + M p) / R < (p^2 + R p) / R < 2p < 2^382, so the
// carry out of column 15 is zero.
//
// The Fr product at the end uses the same limb products with a 16-bit last reduction step.
//
// Included by field.cuh for the device. bench/fieldmul's host test includes it with
// FP_DFMA_HOST defined (fma() under fesetround(FE_TOWARDZERO)) to check it against Python
// integers.
#pragma once

#ifdef FP_DFMA_HOST
#include <math.h>
#include <string.h>
#define FP_DFMA_FN inline
#else
#define FP_DFMA_FN __device__ __forceinline__
#endif

namespace fp_dfma {

typedef unsigned int u32;
typedef unsigned long long u64;

constexpr u64 LO_BITS = 0x4330000000000000ull;  // bit pattern of 2^52
constexpr u64 HI_BITS = 0x4630000000000000ull;  // bit pattern of 2^100
constexpr u64 MASK48 = 0xffffffffffffull;
constexpr u64 PINV48 = 0xfffcfffcfffdull;  // -p^-1 mod 2^48
constexpr double C1 = 1267650600228229401496703205376.0;                    // 2^100
constexpr double C2 = 1267650600228229401496703205376.0 + 4503599627370496.0;  // 2^100 + 2^52
constexpr double TWO52 = 4503599627370496.0;

// p in radix 2^48.
FP_DFMA_FN double p48(int i) {
    constexpr u64 P[8] = {0xffffffffaaabull, 0xb153ffffb9feull, 0xf6241eabfffeull,
                          0x6730d2a0f6b0ull, 0x4b84f38512bfull, 0x434bacd76477ull,
                          0xe69a4b1ba7b6ull, 0x1a0111ea397full};
    return (double)P[i];
}

FP_DFMA_FN double as_double(u64 x) {
#ifdef FP_DFMA_HOST
    double d;
    memcpy(&d, &x, 8);
    return d;
#else
    return __longlong_as_double((long long)x);
#endif
}

FP_DFMA_FN u64 bits(double d) {
#ifdef FP_DFMA_HOST
    u64 x;
    memcpy(&x, &d, 8);
    return x;
#else
    return (u64)__double_as_longlong(d);
#endif
}

// Round toward zero (the host test sets that rounding mode for fma()).
FP_DFMA_FN double fma_rz(double x, double y, double z) {
#ifdef FP_DFMA_HOST
    return fma(x, y, z);
#else
    return __fma_rz(x, y, z);
#endif
}

// x < 2^52 as a double, exactly: the pattern 2^52 + x, minus 2^52.
FP_DFMA_FN double to_double(u64 x) { return as_double(x | LO_BITS) - TWO52; }

// 12 x 32-bit limbs -> 8 x 48-bit limbs as doubles (three words make two limbs).
FP_DFMA_FN void split(double d[8], const u32 a[12]) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
        d[2 * u] = to_double((u64)a[3 * u] | (u64)(a[3 * u + 1] & 0xffffu) << 32);
        d[2 * u + 1] = to_double((u64)(a[3 * u + 1] >> 16) | (u64)a[3 * u + 2] << 16);
    }
}

// 8 x 48-bit limbs -> 12 x 32-bit limbs.
FP_DFMA_FN void join(u32 r[12], const u64 q[8]) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
        r[3 * u] = (u32)q[2 * u];
        r[3 * u + 1] = (u32)(q[2 * u] >> 32) | (u32)q[2 * u + 1] << 16;
        r[3 * u + 2] = (u32)(q[2 * u + 1] >> 16);
    }
}

// The running column: s (this column's L patterns and the carry), sn (the next column's H
// patterns) and how many patterns of each were added, whose exponent bits come off at the
// column's end.
struct Column {
    u64 s, sn;
    u32 nl, nh;

    FP_DFMA_FN void product(double x, double y) {
        const double hi = fma_rz(x, y, C1);
        const double lo = fma_rz(x, y, C2 - hi);
        s += bits(lo);
        sn += bits(hi);
        nl++;
        nh++;
    }

    // Takes the exponent bits of this column's L patterns off: s is then the true sum.
    FP_DFMA_FN void settle() {
        s -= (u64)nl * LO_BITS;
        nl = 0;
    }

    // Adds the reduction quotient's low term m p_0, which makes s divisible by the quotient's
    // radix; returns the quotient as a double. `pinv` is -p^-1 modulo 2^48, `mask` selects
    // the bits of this step (2^48 - 1, or fewer for a last partial step).
    FP_DFMA_FN double quotient(u64 pinv, u64 mask, double p0) {
        settle();
        const double m = to_double((s * pinv) & mask);
        product(m, p0);
        settle();
        return m;
    }

    // Moves to the next column: the carry plus the H patterns of this one.
    FP_DFMA_FN void next() {
        s = (s >> 48) + (sn - (u64)nh * HI_BITS);
        sn = 0;
        nh = 0;
    }

    // Ends column k of an Fp product: the quotient m[k] (k < 8) or result limb q[k - 8].
    FP_DFMA_FN void end(int k, double m[8], u64 q[8]) {
        if (k < 8) {
            m[k] = quotient(PINV48, MASK48, p48(0));
        } else {
            settle();
            q[k - 8] = s & MASK48;
        }
        next();
    }
};

// The limb products x_i y_j of column k (i + j = k), N limbs each.
template <int N>
FP_DFMA_FN void product_terms(Column& c, int k, const double x[N], const double y[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int j = k - i;
        if (j >= 0 && j < N) c.product(x[i], y[j]);
    }
}

// The quotient terms m_i n_j of column k (i < k: m_k's n_0 term comes with its quotient),
// with n_j = mod(j), the modulus in radix 2^48.
template <int N, double (*mod)(int)>
FP_DFMA_FN void reduce_terms(Column& c, int k, const double m[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int j = k - i;
        if (i < k && j >= 0 && j < N) c.product(m[i], mod(j));
    }
}

// r = a b / R mod p, in [0, 2p).
FP_DFMA_FN void mul(u32 r[12], const u32 a[12], const u32 b[12]) {
    double x[8], y[8], m[8];
    u64 q[8];
    split(x, a);
    split(y, b);
    Column c = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        product_terms<8>(c, k, x, y);
        reduce_terms<8, p48>(c, k, m);
        c.end(k, m, q);
    }
    join(r, q);
}

// r = a^2 / R mod p, in [0, 2p): the cross terms once against 2 a_j (below 2^49, still
// exact: x y < 2^97 keeps hi in [2^100, 2^101)), plus the squares: 36 limb products for a^2
// instead of 64.
FP_DFMA_FN void sqr(u32 r[12], const u32 a[12]) {
    double x[8], x2[8], m[8];
    u64 q[8];
    split(x, a);
#pragma unroll
    for (int i = 0; i < 8; i++) x2[i] = x[i] + x[i];
    Column c = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 16; k++) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int j = k - i;
            if (j > i && j < 8) c.product(x2[i], x[j]);
        }
        if (k % 2 == 0 && k / 2 < 8) c.product(x[k / 2], x[k / 2]);
        reduce_terms<8, p48>(c, k, m);
        c.end(k, m, q);
    }
    join(r, q);
}

// ---------------------------------------------------------------------------------------
// Fr (the scalar field, r < 2^255, 8 x 32-bit limbs, R = 2^256) with the same limb
// products. 256 is not a multiple of 48: the operands are 5 limbs of 48 bits and one of
// 16, and the reduction takes 5 quotient steps of 48 bits and a last one of 16 bits
// (m_5 = S_5 (-r^-1) mod 2^16 clears the low 16 bits of column 5), so that
// M = sum m_i 2^(48 i) < 2^256 = R and the result, (a b + M r) / 2^256 < 2r, is columns
// 5..11 shifted right by 16 bits. 36 + 36 limb products against CIOS's 8 x 8 x 2 32-bit
// multiply-adds; columns take at most 12 L and 12 H terms below 2^48: no overflow.
// ---------------------------------------------------------------------------------------

constexpr u64 RINV48 = 0xfffeffffffffull;  // -r^-1 mod 2^48

// r in radix 2^48 (the top limb holds 15 bits).
FP_DFMA_FN double r48(int i) {
    constexpr u64 R[6] = {0xffff00000001ull, 0xfffe5bfeffffull, 0xd80553bda402ull,
                          0x3339d80809a1ull, 0xa753299d7d48ull, 0x73edull};
    return (double)R[i];
}

// 8 x 32-bit limbs -> 5 limbs of 48 bits and one of 16, as doubles.
FP_DFMA_FN void split_fr(double d[6], const u32 a[8]) {
#pragma unroll
    for (int u = 0; u < 3; u++) {
        const u32 hi = u < 2 ? a[3 * u + 2] : 0u;
        d[2 * u] = to_double((u64)a[3 * u] | (u64)(a[3 * u + 1] & 0xffffu) << 32);
        d[2 * u + 1] = to_double((u64)(a[3 * u + 1] >> 16) | (u64)hi << 16);
    }
}

// r = a b / 2^256 mod r, in [0, 2r); 8 x 32-bit limbs in and out.
FP_DFMA_FN void fr_mul(u32 out[8], const u32 a[8], const u32 b[8]) {
    double x[6], y[6], m[6];
    u64 q[7];
    split_fr(x, a);
    split_fr(y, b);
    Column c = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 12; k++) {
        product_terms<6>(c, k, x, y);
        reduce_terms<6, r48>(c, k, m);
        if (k < 6) m[k] = c.quotient(RINV48, k < 5 ? MASK48 : 0xffffull, r48(0));
        else c.settle();
        if (k >= 5) q[k - 5] = c.s & MASK48;
        c.next();
    }
    // out = (sum q_t 2^(48 t)) >> 16: word w is bits [16 + 32 w, 48 + 32 w).
#pragma unroll
    for (int w = 0; w < 8; w++) {
        const int b0 = 16 + 32 * w, t = b0 / 48, off = b0 % 48;
        u64 v = q[t] >> off;
        if (off > 16) v |= q[t + 1] << (48 - off);
        out[w] = (u32)v;
    }
}

}  // namespace fp_dfma
