// fixed_base.cu: many scalars times one fixed base point (parameter generation), by a
// signed-digit fixed-base comb: with the host-built table T[k][j - 1] = j 2^(w k) B for
// j = 1..2^(w-1), s B = sum_k sign(d_k) T[k][|d_k| - 1], one mixed addition per window and
// no doublings (Hankerson, Menezes, Vanstone, "Guide to Elliptic Curve Cryptography",
// section 3.3.1). One thread per scalar; results leave as Jacobian points.
#include "ec.cuh"
#include "digits.cuh"

template <class F>
__device__ __forceinline__ void fixed_base(const affine_t<F>* table, u32 w, u32 nwin,
                                           const fr_t* scalars, u32 n, jacobian_t<F>* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const fr_t s = scalars[i].from_mont();
    const u32 half = 1u << (w - 1);
    xyzz_t<F> acc = xyzz_t<F>::inf();
    u32 carry = 0, neg = 0;
    for (u32 k = 0; k < nwin; k++) {
        u32 d = signed_digit(s.v, k, w, carry, neg);
        if (d) {
            affine_t<F> q = table[k * half + d - 1];
            acc.add_affine(neg ? q.neg() : q);
        }
    }
    out[i] = acc.to_jacobian();
}

extern "C" __global__ void fixed_base_g1(const g1_affine_t* table, u32 w, u32 nwin,
                                         const fr_t* scalars, u32 n, g1_jacobian_t* out) {
    fixed_base<fp_t>(table, w, nwin, scalars, n, out);
}
extern "C" __global__ void fixed_base_g2(const g2_affine_t* table, u32 w, u32 nwin,
                                         const fr_t* scalars, u32 n, g2_jacobian_t* out) {
    fixed_base<fp2_t>(table, w, nwin, scalars, n, out);
}
