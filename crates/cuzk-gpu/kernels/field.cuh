// field.cuh: Montgomery arithmetic over the two BLS12-381 prime fields, one template
// (`mont_t<Params>`) instantiated for Fp (381-bit, 12 x 32-bit limbs) and Fr (255-bit,
// 8 x 32-bit limbs), plus Fp2 = Fp[u]/(u^2 + 1).
//
// Representation: little-endian 32-bit limbs of a*R mod m with R = 2^(32N), always fully
// reduced into [0, m). This is bit-for-bit blst's layout (blst_fp = 6 x u64, blst_fr =
// 4 x u64, both Montgomery, little-endian), so blstrs values go to the device unchanged.
//
// Fr products, and the Fp products of the point formulas (fp_mul_ool, fp_sqr_ool below), run
// on the FP64 pipe (fp_dfma.cuh). The inline Fp product is CIOS (Koc, Acar, Kaliski,
// "Analyzing and comparing Montgomery multiplication algorithms", IEEE Micro 1996,
// section 3) with PTX carry chains: per row
// one pass of mad.lo.cc/madc.lo.cc and one of mad.hi.cc/madc.hi.cc for a*b[i], and the same
// for m*p. That is 4N^2 + N 32-bit multiply(-add) instructions per product: 588 for Fp,
// 264 for Fr (the count `cuzk bench` uses for its fraction of the multiply ceiling).
// Separate asm statements share the carry flag, so every one is `asm volatile`: the
// compiler then neither reorders them nor deletes one whose output is dead (the low limb
// of t + m*p is always zero and unused, yet its mad.lo.cc produces the carry the chain
// needs; without volatile NVVM dropped it and every product was wrong).
#pragma once

#include "fp_dfma.cuh"

typedef unsigned int u32;
typedef unsigned long long u64;

struct FpParams {
    static constexpr int N = 12;
    static constexpr u32 INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    __device__ __forceinline__ static u32 m(int i) {
        constexpr u32 P[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe,
                               0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
                               0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
        return P[i];
    }
    __device__ __forceinline__ static u32 one(int i) {  // R mod p
        constexpr u32 O[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b,
                               0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853,
                               0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
        return O[i];
    }
};

struct FrParams {
    static constexpr int N = 8;
    static constexpr u32 INV = 0xffffffffu;  // -r^-1 mod 2^32
    __device__ __forceinline__ static u32 m(int i) {
        constexpr u32 P[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                              0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
        return P[i];
    }
    __device__ __forceinline__ static u32 one(int i) {  // R mod r
        constexpr u32 O[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                              0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
        return O[i];
    }
};

// The moduli leave the top bit of the top limb clear, so a + b < 2m fits in N limbs and
// the CIOS result (< 2m) needs no extra limb.
static_assert(FpParams::N == 12 && FrParams::N == 8, "limb counts");

template <class P>
struct mont_t {
    static constexpr int N = P::N;
    u32 v[N];

    __device__ __forceinline__ static mont_t zero() {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    __device__ __forceinline__ static mont_t one() {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool is_one() const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ P::one(i);
        return acc == 0;
    }
    __device__ __forceinline__ bool operator==(const mont_t& b) const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ b.v[i];
        return acc == 0;
    }

    // r = t - m if t >= m else t, for t < 2m held in N limbs.
    __device__ __forceinline__ static void reduce_once(u32 t[N]) {
        u32 s[N], borrow;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(t[0]), "r"(P::m(0)));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(s[i]) : "r"(t[i]), "r"(P::m(i)));
        asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
        // borrow == 0xffffffff when t < m: keep t.
#pragma unroll
        for (int i = 0; i < N; i++) t[i] = borrow ? t[i] : s[i];
    }

    __device__ __forceinline__ friend mont_t operator+(const mont_t& a, const mont_t& b) {
        mont_t r;
        asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(a.v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r.v[i]) : "r"(a.v[i]), "r"(b.v[i]));
        reduce_once(r.v);
        return r;
    }

    __device__ __forceinline__ friend mont_t operator-(const mont_t& a, const mont_t& b) {
        mont_t r;
        u32 borrow;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(a.v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r.v[i]) : "r"(a.v[i]), "r"(b.v[i]));
        asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
        // On borrow add m back (masked), so the result lands in [0, m).
        asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(r.v[0]) : "r"(P::m(0) & borrow));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(r.v[i]) : "r"(P::m(i) & borrow));
        return r;
    }

    __device__ __forceinline__ mont_t neg() const {
        return is_zero() ? *this : zero() - *this;
    }
    __device__ __forceinline__ mont_t dbl() const { return *this + *this; }

    __device__ __forceinline__ friend mont_t operator*(const mont_t& a, const mont_t& b) {
#ifndef FR_CIOS
        // Fr products run on the FP64 pipe (fp_dfma.cuh); -DFR_CIOS (CUZK_NVRTC_OPTS)
        // restores the CIOS product below for comparison.
        if constexpr (N == 8) {
            mont_t r;
            fp_dfma::fr_mul(r.v, a.v, b.v);
            reduce_once(r.v);
            return r;
        }
#endif
        return cios(a, b);
    }

    // CIOS: Fp's inline products (the point formulas use fp_mul_ool) and, with FR_CIOS, Fr's.
    __device__ __forceinline__ static mont_t cios(const mont_t& a, const mont_t& b) {
        u32 t[N + 2];
#pragma unroll
        for (int j = 0; j < N + 2; j++) t[j] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const u32 bi = b.v[i];
            // t += a * b[i]: low halves, then high halves shifted by one limb.
            asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
            for (int j = 1; j < N; j++)
                asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(a.v[j]), "r"(bi));
            asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
            for (int j = 1; j < N; j++)
                asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(a.v[j]), "r"(bi));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            // t += m * modulus with m chosen so the low limb cancels.
            const u32 mq = t[0] * P::INV;
            asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(mq), "r"(P::m(0)));
#pragma unroll
            for (int j = 1; j < N; j++)
                asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(mq), "r"(P::m(j)));
            asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(mq), "r"(P::m(0)));
#pragma unroll
            for (int j = 1; j < N; j++)
                asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(mq), "r"(P::m(j)));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            // t[0] is now zero: divide by 2^32.
#pragma unroll
            for (int j = 0; j < N + 1; j++) t[j] = t[j + 1];
            t[N + 1] = 0;
        }
        mont_t r;
#pragma unroll
        for (int j = 0; j < N; j++) r.v[j] = t[j];
        reduce_once(r.v);
        return r;
    }

    __device__ __forceinline__ mont_t sqr() const { return *this * *this; }

    // Montgomery form -> canonical integer (multiply by R^-1): a*R * 1 * R^-1 = a.
    __device__ __forceinline__ mont_t from_mont() const {
        mont_t one_raw = zero();
        one_raw.v[0] = 1;
        return *this * one_raw;
    }

    __device__ __forceinline__ mont_t pow(u64 e) const {
        mont_t r = one(), b = *this;
        while (e) {
            if (e & 1) r = r * b;
            b = b.sqr();
            e >>= 1;
        }
        return r;
    }
};

typedef mont_t<FpParams> fp_t;
typedef mont_t<FrParams> fr_t;

// The Fp product and square every point formula calls (ec.cuh's fmul/fsqr, Fp2 below), out
// of line: G2 formulas inline ~40 Fp products per point addition, and fully inlining them
// made NVRTC/ptxas take minutes per module. Both run on the FP64 pipe (fp_dfma.cuh), which
// on an H200 gives 1.27x (product) and 1.58x (square) the throughput of the CIOS
// product (mont_t::cios), which stays for the few inline Fp products elsewhere.
__device__ __noinline__ fp_t fp_mul_ool(const fp_t a, const fp_t b) {
    fp_t r;
    fp_dfma::mul(r.v, a.v, b.v);
    fp_t::reduce_once(r.v);
    return r;
}
__device__ __noinline__ fp_t fp_sqr_ool(const fp_t a) {
    fp_t r;
    fp_dfma::sqr(r.v, a.v);
    fp_t::reduce_once(r.v);
    return r;
}

// Fp2 = Fp[u] / (u^2 + 1), stored (c0, c1) as blst_fp2 is.
struct fp2_t {
    fp_t c0, c1;

    __device__ __forceinline__ static fp2_t zero() { return {fp_t::zero(), fp_t::zero()}; }
    __device__ __forceinline__ static fp2_t one() { return {fp_t::one(), fp_t::zero()}; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ friend fp2_t operator+(const fp2_t& a, const fp2_t& b) {
        return {a.c0 + b.c0, a.c1 + b.c1};
    }
    __device__ __forceinline__ friend fp2_t operator-(const fp2_t& a, const fp2_t& b) {
        return {a.c0 - b.c0, a.c1 - b.c1};
    }
    __device__ __forceinline__ fp2_t neg() const { return {c0.neg(), c1.neg()}; }
    __device__ __forceinline__ fp2_t dbl() const { return {c0.dbl(), c1.dbl()}; }
    // Karatsuba: 3 Fp products.
    __device__ __forceinline__ friend fp2_t operator*(const fp2_t& a, const fp2_t& b) {
        fp_t t0 = fp_mul_ool(a.c0, b.c0);
        fp_t t1 = fp_mul_ool(a.c1, b.c1);
        fp_t t2 = fp_mul_ool(a.c0 + a.c1, b.c0 + b.c1);
        return {t0 - t1, t2 - t0 - t1};
    }
    // (c0 + c1 u)^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u: 2 Fp products.
    __device__ __forceinline__ fp2_t sqr() const {
        fp_t t = fp_mul_ool(c0, c1);
        return {fp_mul_ool(c0 + c1, c0 - c1), t.dbl()};
    }
};
