// ec.cuh: short-Weierstrass (a = 0) point arithmetic over any field type F from field.cuh
// (fp_t for G1, fp2_t for G2).
//
// Inputs are affine points as blst stores them ({x, y}, infinity = all-zero words).
// Accumulators are XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity: ZZ = 0), whose mixed
// addition costs 8M + 2S; formulas from the Explicit-Formulas Database,
// https://hyperelliptic.org/EFD/g1p/auto-shortw-xyzz.html (madd-2008-s, add-2008-s,
// dbl-2008-s-1). Results leave as Jacobian (x = X/Z^2, y = Y/Z^3), which is blst_p1/blst_p2.
#pragma once
#include "field.cuh"

// Products in the point formulas go through fmul/fsqr. For Fp they call the out-of-line
// product and square (fp_mul_ool, fp_sqr_ool, on the FP64 pipe: field.cuh): a mixed
// addition with its ten products inlined is ~12,000 instructions (~190 KB of code), more
// than the SM's instruction caches hold, and an H200 profile of the bucket accumulation
// showed warps waiting on instruction fetch; with the products out of line the hot loop is
// one product plus glue, and the 2^24 accumulation went from 210 to 149 ms. Fp2 products
// call fp_mul_ool too.
template <class F>
__device__ __forceinline__ F fmul(const F& a, const F& b) {
    if constexpr (sizeof(F) == sizeof(fp_t))
        return fp_mul_ool(a, b);
    else
        return a * b;
}
template <class F>
__device__ __forceinline__ F fsqr(const F& a) {
    if constexpr (sizeof(F) == sizeof(fp_t))
        return fp_sqr_ool(a);
    else
        return a.sqr();
}

// dbl, add and add_affine are __noinline__: one out-of-line copy per module keeps NVRTC and
// ptxas time and code size bounded (an inlined G2 addition is ~25k instructions).
// add_affine_inline is the inlined mixed addition for G1's hot loops.

template <class F>
struct affine_t {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    __device__ __forceinline__ affine_t neg() const { return {x, y.neg()}; }
};

template <class F>
struct jacobian_t {
    F X, Y, Z;
};

template <class F>
struct xyzz_t {
    F X, Y, ZZ, ZZZ;

    __device__ __forceinline__ static xyzz_t inf() {
        return {F::zero(), F::zero(), F::zero(), F::zero()};
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }

    __device__ __forceinline__ static xyzz_t from_affine(const affine_t<F>& p) {
        if (p.is_inf()) return inf();
        return {p.x, p.y, F::one(), F::one()};
    }

    // dbl-2008-s-1 with a = 0.
    __device__ __noinline__ xyzz_t dbl() const {
        if (is_inf()) return *this;
        F U = Y.dbl();
        F V = fsqr(U);
        F W = fmul(U, V);
        F S = fmul(X, V);
        F X2 = fsqr(X);
        F M = X2.dbl() + X2;
        xyzz_t r;
        r.X = fsqr(M) - S.dbl();
        r.Y = fmul(M, S - r.X) - fmul(W, Y);
        r.ZZ = fmul(V, ZZ);
        r.ZZZ = fmul(W, ZZZ);
        return r;
    }

    // this += q (affine), madd-2008-s; falls back to doubling when q equals this.
    __device__ __noinline__ void add_affine(const affine_t<F>& q) { add_affine_inline(q); }

    // The same, inlined: G1 hot loops (bucket accumulation, batch addition) call this so
    // the accumulator stays in registers instead of a local-memory frame behind `this`,
    // and the next point's gather can be scheduled across the addition. G2 keeps the
    // out-of-line copy (compile time, see above).
    __device__ __forceinline__ void add_affine_inline(const affine_t<F>& q) {
        if (q.is_inf()) return;
        if (is_inf()) {
            *this = from_affine(q);
            return;
        }
        F U2 = fmul(q.x, ZZ);
        F S2 = fmul(q.y, ZZZ);
        F P = U2 - X;
        F R = S2 - Y;
        if (P.is_zero()) {
            if (R.is_zero()) {
                *this = from_affine(q).dbl();
            } else {
                *this = inf();
            }
            return;
        }
        F PP = fsqr(P);
        F PPP = fmul(P, PP);
        F Q = fmul(X, PP);
        X = fsqr(R) - PPP - Q.dbl();
        Y = fmul(R, Q - X) - fmul(Y, PPP);
        ZZ = fmul(ZZ, PP);
        ZZZ = fmul(ZZZ, PPP);
    }

    // this += q (XYZZ), add-2008-s.
    __device__ __noinline__ void add(const xyzz_t& q) {
        if (q.is_inf()) return;
        if (is_inf()) {
            *this = q;
            return;
        }
        F U1 = fmul(X, q.ZZ);
        F U2 = fmul(q.X, ZZ);
        F S1 = fmul(Y, q.ZZZ);
        F S2 = fmul(q.Y, ZZZ);
        F P = U2 - U1;
        F R = S2 - S1;
        if (P.is_zero()) {
            if (R.is_zero()) {
                *this = dbl();
            } else {
                *this = inf();
            }
            return;
        }
        F PP = fsqr(P);
        F PPP = fmul(P, PP);
        F Q = fmul(U1, PP);
        X = fsqr(R) - PPP - Q.dbl();
        Y = fmul(R, Q - X) - fmul(S1, PPP);
        ZZ = fmul(fmul(ZZ, q.ZZ), PP);
        ZZZ = fmul(fmul(ZZZ, q.ZZZ), PPP);
    }

    // k * this for a small k (double-and-add, most significant bit first).
    __device__ __forceinline__ xyzz_t mul_small(u32 k) const {
        xyzz_t r = inf();
        if (k == 0) return r;
        for (int b = 31 - __clz(k); b >= 0; b--) {
            r = r.dbl();
            if ((k >> b) & 1) r.add(*this);
        }
        return r;
    }

    // With ZZ = Z^2, ZZZ = Z^3, Jacobian (X ZZ^2, Y ZZZ^2, ZZZ) has Z' = Z^3:
    // X'/Z'^2 = X Z^4 / Z^6 = X/ZZ and Y'/Z'^3 = Y Z^6 / Z^9 = Y/ZZZ. Infinity keeps Z' = 0.
    __device__ __forceinline__ jacobian_t<F> to_jacobian() const {
        if (is_inf()) return {F::one(), F::one(), F::zero()};
        return {fmul(X, fsqr(ZZ)), fmul(Y, fsqr(ZZZ)), ZZZ};
    }
};

typedef affine_t<fp_t> g1_affine_t;
typedef affine_t<fp2_t> g2_affine_t;
typedef xyzz_t<fp_t> g1_xyzz_t;
typedef xyzz_t<fp2_t> g2_xyzz_t;
typedef jacobian_t<fp_t> g1_jacobian_t;
typedef jacobian_t<fp2_t> g2_jacobian_t;

// acc += q in a hot loop: the inlined mixed addition in G1, the out-of-line one in G2.
template <class F>
__device__ __forceinline__ void hot_add_affine(xyzz_t<F>& acc, const affine_t<F>& q) {
    if constexpr (sizeof(F) == sizeof(fp_t)) {
        acc.add_affine_inline(q);
    } else {
        acc.add_affine(q);
    }
}
