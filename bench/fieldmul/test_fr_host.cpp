// Host test of the crate's Fr product on the FP64 pipe (fp_dfma::fr_mul in
// crates/cuzk-gpu/kernels/fp_dfma.cuh), against a plain 64-bit-limb CIOS Montgomery
// product with R = 2^256. Random operands below r plus edge values; build and run through
// test_host.sh. Exits nonzero on a mismatch.
#include <algorithm>
#include <array>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define FP_DFMA_HOST
#include "../../crates/cuzk-gpu/kernels/fp_dfma.cuh"

#pragma STDC FENV_ACCESS ON

typedef unsigned __int128 u128;
static const uint64_t R64[4] = {0xffffffff00000001ull, 0x53bda402fffe5bfeull,
                                0x3339d80809a1d805ull, 0x73eda753299d7d48ull};
static const uint64_t RINV64 = 0xfffffffeffffffffull;  // -r^-1 mod 2^64

static bool geq_r(const uint64_t a[4]) {
    for (int i = 3; i >= 0; i--) {
        if (a[i] != R64[i]) return a[i] > R64[i];
    }
    return true;
}
static void sub_r(uint64_t a[4]) {
    uint64_t borrow = 0;
    for (int i = 0; i < 4; i++) {
        u128 d = (u128)a[i] - R64[i] - borrow;
        a[i] = (uint64_t)d;
        borrow = (uint64_t)(d >> 64) & 1;
    }
}
// a b / 2^256 mod r, fully reduced (CIOS, 64-bit limbs).
static void ref_mul(uint64_t out[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t t[6] = {0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        uint64_t carry = 0;
        for (int j = 0; j < 4; j++) {
            u128 s = (u128)a[j] * b[i] + t[j] + carry;
            t[j] = (uint64_t)s;
            carry = (uint64_t)(s >> 64);
        }
        u128 s = (u128)t[4] + carry;
        t[4] = (uint64_t)s;
        t[5] = (uint64_t)(s >> 64);
        const uint64_t m = t[0] * RINV64;
        carry = 0;
        for (int j = 0; j < 4; j++) {
            u128 s2 = (u128)m * R64[j] + t[j] + carry;
            t[j] = (uint64_t)s2;
            carry = (uint64_t)(s2 >> 64);
        }
        s = (u128)t[4] + carry;
        t[4] = (uint64_t)s;
        t[5] += (uint64_t)(s >> 64);
        for (int j = 0; j < 5; j++) t[j] = t[j + 1];
        t[5] = 0;
    }
    for (int i = 0; i < 4; i++) out[i] = t[i];
    if (t[4] || geq_r(out)) sub_r(out);
}
static void to32(uint32_t o[8], const uint64_t a[4]) {
    for (int i = 0; i < 4; i++) {
        o[2 * i] = (uint32_t)a[i];
        o[2 * i + 1] = (uint32_t)(a[i] >> 32);
    }
}
static bool check(const uint64_t a[4], const uint64_t b[4]) {
    uint64_t want[4];
    ref_mul(want, a, b);
    uint32_t a32[8], b32[8], got[8], w32[8];
    to32(a32, a);
    to32(b32, b);
    fp_dfma::fr_mul(got, a32, b32);
    uint64_t g[4];
    for (int i = 0; i < 4; i++) g[i] = (uint64_t)got[2 * i] | (uint64_t)got[2 * i + 1] << 32;
    if (geq_r(g)) sub_r(g);  // fr_mul returns a value below 2r
    to32(got, g);
    to32(w32, want);
    for (int i = 0; i < 8; i++)
        if (got[i] != w32[i]) return false;
    return true;
}

int main(int argc, char** argv) {
    if (fesetround(FE_TOWARDZERO) != 0) {
        printf("FAIL: fesetround\n");
        return 1;
    }
    volatile double one = 1.0, tiny = -0x1p-60;
    if (!(fma(one, one, tiny) < 1.0)) {
        printf("FAIL: fma() does not round toward zero\n");
        return 1;
    }
    const unsigned long n = argc > 1 ? strtoul(argv[1], nullptr, 10) : 200000;
    const unsigned long seed = argc > 2 ? strtoul(argv[2], nullptr, 10) : std::random_device{}();
    std::mt19937_64 rng(seed);
    std::vector<std::array<uint64_t, 4>> edges = {
        {0, 0, 0, 0},
        {1, 0, 0, 0},
        {2, 0, 0, 0},
        {R64[0] - 1, R64[1], R64[2], R64[3]},  // r - 1
        {R64[0] - 2, R64[1], R64[2], R64[3]},  // r - 2
        {0x00000001fffffffeull, 0x5884b7fa00034802ull, 0x998c4fefecbc4ff5ull,
         0x1824b159acc5056full},  // R mod r (Montgomery one)
        {0x7fffffff80000000ull, 0xa9ded2017fff2dffull, 0x199cec0404d0ec02ull,
         0x39f6d3a994cebea4ull},  // (r - 1) / 2
        {0, 0, 0, 1ull << 62},  // 2^254
        {~0ull, ~0ull, ~0ull, 0x3fffffffffffffffull},  // 2^254 - 1
        {~0ull, 0, 0, 0},
        {0xffffull << 48, ~0ull, 0, 0},
    };
    // The reference itself: R mod r is the Montgomery one, so one * x = x.
    for (int k = 0; k < 1000; k++) {
        uint64_t x[4], y[4];
        do {
            for (int i = 0; i < 4; i++) x[i] = rng();
            x[3] &= 0x7fffffffffffffffull;
        } while (geq_r(x));
        ref_mul(y, edges[5].data(), x);
        if (!std::equal(x, x + 4, y)) {
            printf("FAIL: the reference product is wrong (one * x != x)\n");
            return 1;
        }
    }
    unsigned long fails = 0, total = 0;
    for (auto& a : edges)
        for (auto& b : edges) {
            total++;
            if (!check(a.data(), b.data())) {
                fails++;
                if (fails < 5) printf("mismatch on edge pair %lu\n", total);
            }
        }
    for (unsigned long k = 0; k < n; k++) {
        uint64_t a[4], b[4];
        for (uint64_t* v : {a, b}) {
            do {
                for (int i = 0; i < 4; i++) v[i] = rng();
                v[3] &= 0x7fffffffffffffffull;
            } while (geq_r(v));
        }
        if (k % 8 == 0) std::copy(a, a + 4, b);
        total++;
        if (!check(a, b)) {
            fails++;
            if (fails < 5) printf("mismatch on random case %lu (seed %lu)\n", k, seed);
        }
    }
    printf("%s Fr mul (FP64, 48-bit limbs): %lu checks, %lu mismatches (seed %lu)\n",
           fails ? "FAIL" : "PASS", total, fails, seed);
    return fails ? 1 : 0;
}
