// variants.cuh: BLS12-381 Fp Montgomery product variants, single source for host and device.
//
// Every function here works on raw little-endian 12 x u32 limbs (the layout of fp_t::v in
// crates/cuzk-gpu/kernels/field.cuh and of blst_fp): inputs fully reduced in [0, p),
// Montgomery form with R = 2^384, output a*b*R^-1 mod p fully reduced in [0, p).
//
// Compiled by nvcc (device code, __CUDA_ARCH__ defined: PTX carry chains, __fma_rz, ...) and
// by g++ for the host test (__CUDA_ARCH__ undefined: the same algorithms with carry flags
// emulated in C and FP64 round-toward-zero through fesetround(FE_TOWARDZERO) + fma()).
//
//   mul_v2 : 14 x 28-bit sub-limbs, product scanning (FIPS) with one 64-bit accumulator:
//            every 28x28 product is one IMAD.WIDE.U32 into the accumulator, no carry chains.
//   sqr_v1 : 32-bit limbs, PTX carry chains (the style of field.cuh): off-diagonal products
//            once, doubled, plus the diagonal, then a CIOS-style reduction of the low half.
//   sqr_v4 : squaring in the V2 scheme (off-diagonals against 2*a, plus diagonal).
//   mul_v3 : FP64 pipe: 8 x 48-bit limbs as doubles, exact limb products with two
//            round-toward-zero DFMAs (Emmart, Zheng, Weems, ARITH 2018), integer column sums;
//            the crate's fp_dfma::mul (crates/cuzk-gpu/kernels/fp_dfma.cuh).
//   sqr_v5 : squaring in the V3 scheme: the crate's fp_dfma::sqr.
#pragma once

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifndef __CUDACC__
#define FP_DFMA_HOST
#include "../../crates/cuzk-gpu/kernels/fp_dfma.cuh"
#endif

#ifdef __CUDACC__
#define HD __host__ __device__ __forceinline__
#else
#define HD inline
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

namespace fm {

HD u32 p32(int i) {
    constexpr u32 P[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
                           0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
    return P[i];
}
constexpr u32 INV32 = 0xfffcfffdu;  // -p^-1 mod 2^32

// ---------------------------------------------------------------------------------------
// Carry-flag primitives: PTX on the device, an explicit flag `cf` on the host. A function
// using them starts with CF_DECL. On the device every one is asm volatile, as in field.cuh,
// so that the compiler neither reorders them nor drops one whose result is dead.
// ---------------------------------------------------------------------------------------
#ifdef __CUDA_ARCH__
#define CF_DECL
#define MAD_LO_CC(d, a, b) asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(d) : "r"(a), "r"(b))
#define MADC_LO_CC(d, a, b) asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(d) : "r"(a), "r"(b))
#define MAD_HI_CC(d, a, b) asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(d) : "r"(a), "r"(b))
#define MADC_HI_CC(d, a, b) asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(d) : "r"(a), "r"(b))
#define MADC_HI(d, a, b) asm volatile("madc.hi.u32 %0, %1, %2, %0;" : "+r"(d) : "r"(a), "r"(b))
#define ADD_CC(d, x) asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(d) : "r"(x))
#define ADDC_CC(d, x) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(d) : "r"(x))
#define ADDC(d, x) asm volatile("addc.u32 %0, %0, %1;" : "+r"(d) : "r"(x))
#define SUB_CC(d, a, b) asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define SUBC_CC(d, a, b) asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define SUBC(d, a, b) asm volatile("subc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
// S += a * b (32 x 32 -> 64, no carry flag). Explicit PTX: written in C, NVVM kept the 28-bit
// limbs as 64-bit values and ptxas emitted an extra IADD3 of a zero high word per product.
#define MADW(S, a, b) asm("mad.wide.u32 %0, %1, %2, %0;" : "+l"(S) : "r"((u32)(a)), "r"((u32)(b)))
#else
#define CF_DECL u32 cf = 0; (void)cf;
#define MAD_LO_CC(d, a, b) { u64 s_ = (u64)(u32)((u64)(a) * (b)) + (d); d = (u32)s_; cf = (u32)(s_ >> 32); }
#define MADC_LO_CC(d, a, b) { u64 s_ = (u64)(u32)((u64)(a) * (b)) + (d) + cf; d = (u32)s_; cf = (u32)(s_ >> 32); }
#define MAD_HI_CC(d, a, b) { u64 s_ = (((u64)(a) * (b)) >> 32) + (d); d = (u32)s_; cf = (u32)(s_ >> 32); }
#define MADC_HI_CC(d, a, b) { u64 s_ = (((u64)(a) * (b)) >> 32) + (d) + cf; d = (u32)s_; cf = (u32)(s_ >> 32); }
#define MADC_HI(d, a, b) { d = (u32)((((u64)(a) * (b)) >> 32) + (d) + cf); }
#define ADD_CC(d, x) { u64 s_ = (u64)(d) + (x); d = (u32)s_; cf = (u32)(s_ >> 32); }
#define ADDC_CC(d, x) { u64 s_ = (u64)(d) + (x) + cf; d = (u32)s_; cf = (u32)(s_ >> 32); }
#define ADDC(d, x) { d = (u32)((u64)(d) + (x) + cf); }
#define SUB_CC(d, a, b) { u64 s_ = (u64)(a) - (b); d = (u32)s_; cf = (u32)(s_ >> 32) & 1; }
#define SUBC_CC(d, a, b) { u64 s_ = (u64)(a) - (b) - cf; d = (u32)s_; cf = (u32)(s_ >> 32) & 1; }
#define SUBC(d, a, b) { d = (u32)((u64)(a) - (b) - cf); }
#define MADW(S, a, b) { S += (u64)(u32)(a) * (u32)(b); }
#endif

// t = t - p if t >= p, for t < 2p held in 12 limbs (p < 2^381, so 2p < 2^384).
HD void reduce_once12(u32 t[12]) {
    CF_DECL
    u32 s[12], borrow;
    SUB_CC(s[0], t[0], p32(0));
#pragma unroll
    for (int i = 1; i < 12; i++) SUBC_CC(s[i], t[i], p32(i));
    SUBC(borrow, 0u, 0u);  // 0xffffffff when t < p
#pragma unroll
    for (int i = 0; i < 12; i++) t[i] = borrow ? t[i] : s[i];
}

// =======================================================================================
// V1: dedicated squaring, 32-bit limbs, PTX carry chains.
//   t = sum_{i<j} a_i a_j 2^(32(i+j))   (66 products, row by row: lo pass + hi pass)
//   t = 2t + sum_i a_i^2 2^(64 i)        (funnel shifts, then one 24-word carry chain)
//   U = (t_lo + M p) / 2^384             (12 CIOS rows of m*p on the low half, as field.cuh)
//   r = U + t_hi, then one conditional subtraction.
// (t + M p)/R < (p^2 + R p)/R < 2p, so U + t_hi < 2p fits 12 limbs.
// 32-bit multiply instructions: 132 + 24 + 288 = 444 (V0: 588).
// =======================================================================================
HD void sqr_v1(u32 r[12], const u32 a[12]) {
    CF_DECL
    u32 t[24];
#pragma unroll
    for (int k = 0; k < 24; k++) t[k] = 0;
    // Off-diagonal rows. Before row i, t[i+12] <= 1 and t[i+13] == 0; the partial sum after
    // row i is < 2^(32(i+13)), so the final carry of the hi pass stops in t[i+13].
#pragma unroll
    for (int i = 0; i < 11; i++) {
        MAD_LO_CC(t[2 * i + 1], a[i], a[i + 1]);
#pragma unroll
        for (int j = i + 2; j < 12; j++) MADC_LO_CC(t[i + j], a[i], a[j]);
        ADDC(t[i + 12], 0u);
        MAD_HI_CC(t[2 * i + 2], a[i], a[i + 1]);
#pragma unroll
        for (int j = i + 2; j < 12; j++) MADC_HI_CC(t[i + j + 1], a[i], a[j]);
        ADDC(t[i + 13], 0u);
    }
    // Double (2 * off-diagonal < a^2 < 2^768: no bit leaves t[23]).
#pragma unroll
    for (int k = 23; k > 0; k--) {
#ifdef __CUDA_ARCH__
        t[k] = __funnelshift_l(t[k - 1], t[k], 1);
#else
        t[k] = (t[k] << 1) | (t[k - 1] >> 31);
#endif
    }
    t[0] <<= 1;
    // Diagonal.
    MAD_LO_CC(t[0], a[0], a[0]);
    MADC_HI_CC(t[1], a[0], a[0]);
#pragma unroll
    for (int i = 1; i < 11; i++) {
        MADC_LO_CC(t[2 * i], a[i], a[i]);
        MADC_HI_CC(t[2 * i + 1], a[i], a[i]);
    }
    MADC_LO_CC(t[22], a[11], a[11]);
    MADC_HI(t[23], a[11], a[11]);
    // Montgomery reduction of the low half, 14-word window as field.cuh's CIOS.
    u32 w[14];
#pragma unroll
    for (int j = 0; j < 12; j++) w[j] = t[j];
    w[12] = 0;
    w[13] = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const u32 mq = w[0] * INV32;
        MAD_LO_CC(w[0], mq, p32(0));
#pragma unroll
        for (int j = 1; j < 12; j++) MADC_LO_CC(w[j], mq, p32(j));
        ADDC_CC(w[12], 0u);
        ADDC(w[13], 0u);
        MAD_HI_CC(w[1], mq, p32(0));
#pragma unroll
        for (int j = 1; j < 12; j++) MADC_HI_CC(w[j + 1], mq, p32(j));
        ADDC(w[13], 0u);
#pragma unroll
        for (int j = 0; j < 13; j++) w[j] = w[j + 1];
        w[13] = 0;
    }
    // w[0..11] = U <= p, w[12] == 0. r = U + t_hi < 2p.
    ADD_CC(w[0], t[12]);
#pragma unroll
    for (int j = 1; j < 11; j++) ADDC_CC(w[j], t[12 + j]);
    ADDC(w[11], t[23]);
#pragma unroll
    for (int j = 0; j < 12; j++) r[j] = w[j];
    reduce_once12(r);
}

// =======================================================================================
// V2: 28-bit sub-limbs, 64-bit accumulation (IMAD.WIDE.U32), product scanning with the
// Montgomery reduction interleaved by columns (Koc et al.'s FIPS):
//   a, b -> 14 limbs of 28 bits (bits 364..383 in limb 13).
//   column k = 0..27:  S += sum_{i+j=k} a_i b_j + sum_{i+j=k, i<k} m_i p_j
//     k <= 12: m_k = S * (-p^-1) mod 2^28;   S += m_k p_0;  (S = 0 mod 2^28)  S >>= 28
//     k == 13: m_13 = S * (-p^-1) mod 2^20;  S += m_13 p_0; (S = 0 mod 2^20)  q_0 = S mod 2^28
//     k >= 14: q_{k-13} = S mod 2^28
//     S >>= 28
//   The quotient M = sum m_k 2^(28k) < 2^(364+20) = 2^384 = R exactly, so
//   result = (sum q_t 2^(28t)) >> 20 = (ab + M p) / R < 2p; then one conditional subtraction.
// Bounds: every limb < 2^28, so every product < 2^56; a column holds <= 14 a*b products and
// <= 14 m*p products plus the carry (< 2^33): S < 28 * 2^56 + 2^33 < 2^61. No overflow.
// 392 IMAD.WIDE.U32 (196 + 196) plus 14 IMAD for the quotients. Note: ptxas (CUDA 13.0,
// sm_90) does not keep the serial accumulate chain: it issues the products as independent
// IMAD.WIDE.U32 ..., RZ and sums pairs with IADD3 + IADD3.X (about one ALU op per product).
// =======================================================================================
HD u32 p28(int i) {
    constexpr u32 P[14] = {0xfffaaab, 0xfefffff, 0x3ffffb9, 0xfffeb15, 0x6241eab, 0xa0f6b0f, 0xf6730d2,
                           0xf38512b, 0x4774b84, 0x4bacd76, 0xba7b643, 0xe69a4b1, 0x1ea397f, 0x1a011};
    return P[i];
}
constexpr u32 PINV28 = 0xffcfffdu;  // -p^-1 mod 2^28
constexpr u32 M28 = 0xfffffffu;
constexpr u32 M20 = 0xfffffu;

HD void split28(u32 A[14], const u32 a[12]) {
#pragma unroll
    for (int i = 0; i < 14; i++) {
        const int o = 28 * i, w = o / 32, sh = o % 32;
        u64 x = a[w];
        if (w + 1 < 12) x |= (u64)a[w + 1] << 32;
        A[i] = (u32)(x >> sh) & M28;
    }
}

// q[0..14] hold X = sum q_t 2^(28t); r = X >> 20 (12 words), then reduce.
HD void pack28_shift20(u32 r[12], const u32 q[15]) {
#pragma unroll
    for (int w = 0; w < 12; w++) {
        const int s = 32 * w + 20, t0 = s / 28, sh = s % 28;
        u32 v = (q[t0] >> sh) | (q[t0 + 1] << (28 - sh));
        if (sh > 24) v |= q[t0 + 2] << (56 - sh);
        r[w] = v;
    }
    reduce_once12(r);
}

HD void mul_v2(u32 r[12], const u32 a[12], const u32 b[12]) {
    u32 A[14], B[14], m[14], q[15];
    split28(A, a);
    split28(B, b);
    u64 S = 0;
#pragma unroll
    for (int k = 0; k < 28; k++) {
#pragma unroll
        for (int i = 0; i < 14; i++) {
            const int j = k - i;
            if (j >= 0 && j < 14) MADW(S, A[i], B[j]);
        }
#pragma unroll
        for (int i = 0; i < 14; i++) {
            const int j = k - i;
            if (i < k && j >= 0 && j < 14) MADW(S, m[i], p28(j));
        }
        if (k < 13) {
            m[k] = ((u32)S * PINV28) & M28;
            MADW(S, m[k], p28(0));
        } else if (k == 13) {
            m[13] = ((u32)S * PINV28) & M20;
            MADW(S, m[13], p28(0));
            q[0] = (u32)S & M28;
        } else {
            q[k - 13] = (u32)S & M28;
        }
        S >>= 28;
    }
    pack28_shift20(r, q);
}

// V4: V2 squaring. Off-diagonals a_i * (2 a_j), i < j, plus the diagonal a_i^2:
// 91 + 14 = 105 products for a^2 instead of 196. 2 a_j < 2^29, so a column holds
// <= 7 products < 2^57, one < 2^56 and <= 14 m*p < 2^56: S < 2^60 + 2^33.
HD void sqr_v4(u32 r[12], const u32 a[12]) {
    u32 A[14], A2[14], m[14], q[15];
    split28(A, a);
#pragma unroll
    for (int i = 0; i < 14; i++) A2[i] = A[i] << 1;
    u64 S = 0;
#pragma unroll
    for (int k = 0; k < 28; k++) {
#pragma unroll
        for (int i = 0; i < 14; i++) {
            const int j = k - i;
            if (j > i && j < 14) MADW(S, A2[i], A[j]);
        }
        if ((k & 1) == 0 && k / 2 < 14) MADW(S, A[k / 2], A[k / 2]);
#pragma unroll
        for (int i = 0; i < 14; i++) {
            const int j = k - i;
            if (i < k && j >= 0 && j < 14) MADW(S, m[i], p28(j));
        }
        if (k < 13) {
            m[k] = ((u32)S * PINV28) & M28;
            MADW(S, m[k], p28(0));
        } else if (k == 13) {
            m[13] = ((u32)S * PINV28) & M20;
            MADW(S, m[13], p28(0));
            q[0] = (u32)S & M28;
        } else {
            q[k - 13] = (u32)S & M28;
        }
        S >>= 28;
    }
    pack28_shift20(r, q);
}

// =======================================================================================
// V3 / V5: the FP64-pipe product and square, which are the crate's own code
// (crates/cuzk-gpu/kernels/fp_dfma.cuh, where the method and its bounds are written down):
// field.cuh brings it in for the device; the host test includes it with FP_DFMA_HOST
// (fma() under fesetround(FE_TOWARDZERO)). It returns a value below 2p; reduce once here.
// =======================================================================================
HD void mul_v3(u32 r[12], const u32 a[12], const u32 b[12]) {
#if !defined(__CUDACC__) || defined(__CUDA_ARCH__)
    fp_dfma::mul(r, a, b);
    reduce_once12(r);
#endif
}

HD void sqr_v5(u32 r[12], const u32 a[12]) {
#if !defined(__CUDACC__) || defined(__CUDA_ARCH__)
    fp_dfma::sqr(r, a);
    reduce_once12(r);
#endif
}

}  // namespace fm
