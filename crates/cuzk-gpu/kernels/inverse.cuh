// inverse.cuh: the inverse in Fp of a Montgomery-form element by binary extended Euclid,
// shared by the MSM's batch-affine pair rounds (pair.cu) and the window-table build
// (table.cu); both batch their inversions with Montgomery's trick and call this once per
// thread.
#pragma once
#include "field.cuh"

// 12-limb integer helpers for the inversion (little-endian u32 limbs).
__device__ __forceinline__ u32 big_add(u32* r, const u32* a, const u32* b) {
    u64 carry = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const u64 s = (u64)a[i] + b[i] + carry;
        r[i] = (u32)s;
        carry = s >> 32;
    }
    return (u32)carry;
}
__device__ __forceinline__ u32 big_sub(u32* r, const u32* a, const u32* b) {
    u64 borrow = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const u64 d = (u64)a[i] - b[i] - borrow;
        r[i] = (u32)d;
        borrow = d >> 63;
    }
    return (u32)borrow;
}
// a = (a + top * 2^384) / 2.
__device__ __forceinline__ void big_shr1(u32* a, u32 top) {
#pragma unroll
    for (int i = 0; i < 11; i++) a[i] = (a[i] >> 1) | (a[i + 1] << 31);
    a[11] = (a[11] >> 1) | (top << 31);
}
__device__ __forceinline__ bool big_is_one(const u32* a) {
    u32 acc = a[0] ^ 1u;
#pragma unroll
    for (int i = 1; i < 12; i++) acc |= a[i];
    return acc == 0;
}
// b := b / 2 mod p for b < p (b + p < 2^382 never overflows 384 bits).
__device__ __forceinline__ void half_mod(u32* b, const u32* P) {
    u32 top = 0;
    if (b[0] & 1u) top = big_add(b, b, P);
    big_shr1(b, top);
}
// b := b - c mod p for b, c < p.
__device__ __forceinline__ void sub_mod(u32* b, const u32* c, const u32* P) {
    if (big_sub(b, b, c)) big_add(b, b, P);
}

// The Montgomery form of a^-1 from that of a (a != 0). Binary extended Euclid (Hankerson,
// Menezes, Vanstone, "Guide to Elliptic Curve Cryptography", Algorithm 2.22) on the
// representative x = aR mod p (invariants b x = u, c x = v mod p; ~800 steps of 12-limb
// shifts and subtractions, a few times shorter in latency than the ~480 dependent products
// of a^(p - 2)), giving x^-1 = a^-1 R^-1; one product by R^3 mod p makes it a^-1 R.
__device__ __noinline__ fp_t fp_inverse(const fp_t x) {
    u32 P[12], u[12], v[12], b[12], c[12];
#pragma unroll
    for (int i = 0; i < 12; i++) {
        P[i] = FpParams::m(i);
        u[i] = x.v[i];
        v[i] = P[i];
        b[i] = 0;
        c[i] = 0;
    }
    b[0] = 1;
    while (!big_is_one(u) && !big_is_one(v)) {
        if ((u[0] & 1u) == 0) {
            big_shr1(u, 0);
            half_mod(b, P);
        } else if ((v[0] & 1u) == 0) {
            big_shr1(v, 0);
            half_mod(c, P);
        } else {
            u32 d[12];
            if (!big_sub(d, u, v)) {
#pragma unroll
                for (int i = 0; i < 12; i++) u[i] = d[i];
                sub_mod(b, c, P);
            } else {
                big_sub(v, v, u);
                sub_mod(c, b, P);
            }
        }
    }
    fp_t r;
    const bool u_one = big_is_one(u);
#pragma unroll
    for (int i = 0; i < 12; i++) r.v[i] = u_one ? b[i] : c[i];
    // R^3 mod p, R = 2^384.
    constexpr u32 R3[12] = {0xd94ca1e0, 0xed48ac6b, 0x03a7adf8, 0x315f831e,
                            0x615e29dd, 0x9a53352a, 0x921e1761, 0x34c04e5e,
                            0x65724728, 0x2512d435, 0x91755d4d, 0x0aa63460};
    fp_t r3;
#pragma unroll
    for (int i = 0; i < 12; i++) r3.v[i] = R3[i];
    return r * r3;
}
