// fixed_base.cu: many scalars times one fixed base point (parameter generation), by a
// signed-digit fixed-base comb: with the host-built table T[k][j - 1] = j 2^(w k) B for
// j = 1..2^(w-1), s B = sum_k sign(d_k) T[k][|d_k| - 1], one mixed addition per window and
// no doublings (Hankerson, Menezes, Vanstone, "Guide to Elliptic Curve Cryptography",
// section 3.3.1). Results leave in blst's affine encoding, converted here: the host only
// copies them.
//
// Each thread takes FB_G scalars of its block, strided by the block size so that the
// scalar reads and point writes of a warp are coalesced: index
// blockIdx.x * blockDim.x * FB_G + k * blockDim.x + threadIdx.x for k < FB_G. It sums each
// in XYZZ, parks X and Y in the output and ZZ, ZZZ in local memory, then converts all of
// them with one inversion (Montgomery's trick on d = ZZ ZZZ: x = X ZZZ / d = X / ZZ,
// y = Y ZZ / d = Y / ZZZ), as table.cu does. A zero scalar gives infinity (all-zero words)
// and counts as d = 1. The host launches ceil(ceil(n / FB_G) / blockDim.x) blocks.
#include "ec.cuh"
#include "digits.cuh"
#include "inverse.cuh"

#define FB_G 8

// The inverse of a nonzero element: fp_inverse in Fp; in Fp2 = Fp[u]/(u^2 + 1),
// (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2).
template <class F>
__device__ __forceinline__ F finv(const F& a) {
    if constexpr (sizeof(F) == sizeof(fp_t)) {
        return fp_inverse(a);
    } else {
        const fp_t t = fp_inverse(fp_mul_ool(a.c0, a.c0) + fp_mul_ool(a.c1, a.c1));
        return {fp_mul_ool(a.c0, t), fp_mul_ool(a.c1, t).neg()};
    }
}

template <class F>
__device__ __forceinline__ void fixed_base(const affine_t<F>* table, u32 w, u32 nwin,
                                           const fr_t* scalars, u32 n, affine_t<F>* out) {
    const u64 base = (u64)blockIdx.x * blockDim.x * FB_G + threadIdx.x;
    if (base >= n) return;
    const u32 half = 1u << (w - 1);
    F zz[FB_G], zzz[FB_G], pre[FB_G];
    F acc = F::one();
    u32 cnt = 0;
    for (u32 k = 0; k < FB_G; k++) {
        const u64 i = base + (u64)k * blockDim.x;
        if (i >= n) break;
        cnt++;
        const fr_t s = scalars[i].from_mont();
        xyzz_t<F> p = xyzz_t<F>::inf();
        u32 carry = 0, neg = 0;
        for (u32 win = 0; win < nwin; win++) {
            const u32 d = signed_digit(s.v, win, w, carry, neg);
            if (d) {
                const affine_t<F> q = table[win * half + d - 1];
                hot_add_affine(p, neg ? q.neg() : q);
            }
        }
        pre[k] = acc;
        zz[k] = p.ZZ;
        zzz[k] = p.ZZZ;
        if (p.is_inf()) {
            out[i] = {F::zero(), F::zero()};
            continue;
        }
        out[i] = {p.X, p.Y};
        acc = fmul(acc, fmul(p.ZZ, p.ZZZ));
    }
    F inv = finv(acc);
    for (u32 k = cnt; k-- > 0;) {
        if (zz[k].is_zero()) continue;
        const u64 i = base + (u64)k * blockDim.x;
        const F d_inv = fmul(inv, pre[k]);
        inv = fmul(inv, fmul(zz[k], zzz[k]));
        affine_t<F> q = out[i];
        q.x = fmul(q.x, fmul(d_inv, zzz[k]));
        q.y = fmul(q.y, fmul(d_inv, zz[k]));
        out[i] = q;
    }
}

extern "C" __global__ void fixed_base_g1(const g1_affine_t* table, u32 w, u32 nwin,
                                         const fr_t* scalars, u32 n, g1_affine_t* out) {
    fixed_base<fp_t>(table, w, nwin, scalars, n, out);
}
extern "C" __global__ void fixed_base_g2(const g2_affine_t* table, u32 w, u32 nwin,
                                         const fr_t* scalars, u32 n, g2_affine_t* out) {
    fixed_base<fp2_t>(table, w, nwin, scalars, n, out);
}
