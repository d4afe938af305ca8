// digits.cuh: signed c-bit window digits of a canonical (not Montgomery) 256-bit scalar,
// shared by the MSM (msm.cu) and fixed-base multiplication (fixed_base.cu). Digit k is
// d_k in [-2^(c-1), 2^(c-1)] with s = sum_k d_k 2^(c k); with ceil(256 / c) windows the top
// window absorbs the last carry because s < 2^255.
#pragma once
#include "field.cuh"

__device__ __forceinline__ u32 window_bits(const u32* s, u32 off, u32 c) {
    const u32 limb = off >> 5, sh = off & 31;
    u64 v = s[limb];
    if (limb + 1 < 8) v |= (u64)s[limb + 1] << 32;
    return (u32)(v >> sh) & ((1u << c) - 1);
}

// Signed digit of window w given the carry from window w - 1; returns the magnitude
// (0 means no bucket) and updates carry / neg.
__device__ __forceinline__ u32 signed_digit(const u32* s, u32 w, u32 c, u32& carry, u32& neg) {
    u32 d = window_bits(s, w * c, c) + carry;
    const u32 half = 1u << (c - 1);
    if (d > half) {
        d = (1u << c) - d;
        neg = 1;
        carry = 1;
    } else {
        neg = 0;
        carry = 0;
    }
    return d;
}

