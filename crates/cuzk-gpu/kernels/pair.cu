// pair.cu: batch-affine pre-reduction of G1 MSM buckets (fewer multiplies per addition).
//
// After the counting sort every bucket is a run of points to be summed. One round here
// adds the points of each run in pairs, (0,1), (2,3), ..., in affine coordinates, and
// writes the halved runs (an odd last point is copied) to a dense array: a bucket of s
// points becomes ceil(s / 2). An affine sum P + Q costs one inversion, 2M + 1S; with the
// inversions batched (Montgomery's trick: 3M per element plus one inversion per batch) a
// pair costs about 6 products, against 8M + 2S for the mixed XYZZ addition msm.cu's
// accumulation uses. (Montgomery, "Speeding the Pollard and elliptic curve methods of
// factorization", Math. Comp. 48, 1987, section 10.3.1, for the shared inversion.) A few rounds bring the runs down to ~2 points, and msm.cu's
// accumulation sums what is left into XYZZ buckets.
//
// One round is three launches (msm.rs sequences them, with the halved counts and their
// scan before):
//   pair_forward_g1   thread t takes G consecutive output positions: each pair's
//                     denominator d, the exclusive prefix products (pre[k * threads + t])
//                     and their product tot[t].
//   pair_invert       replaces tot[] by its inverses, G2 per thread (Montgomery's trick
//                     again, one binary-Euclid inversion per thread; a Fermat inversion's
//                     ~480 dependent products made each launch take ~1 ms whatever its
//                     size).
//   pair_backward_g1  walks its G positions backward: 1/d_k = inv * pre[k], inv *= d_k,
//                     and writes each sum.
// Denominators: x_Q - x_P for a proper addition, 2 y_P for a doubling (P = Q), 1 for the
// cases without a division (an unpaired point, a point at infinity, P = -Q).
//
// Input of round 0 is the sorted entry list itself (index | sign << 31 into the bases,
// optionally through base_idx); later rounds read the previous round's dense array.
// Points at infinity are blst's all-zero affine encoding, in and out.
#include "ec.cuh"
#include "inverse.cuh"

// Where a round's input points live.
struct pair_src {
    const g1_affine_t* bases;  // round 0: the MSM's bases
    const u32* base_idx;       // round 0: optional index list into bases
    const u32* sorted;         // round 0: sorted entries; null in later rounds
    const g1_affine_t* pts;    // later rounds: the previous round's output

    __device__ __forceinline__ g1_affine_t load(u32 i) const {
        if (sorted == nullptr) return pts[i];
        const u32 e = sorted[i], j = e & 0x7fffffffu;
        const g1_affine_t q = bases[base_idx ? base_idx[j] : j];
        return (e >> 31) ? q.neg() : q;
    }
    __device__ __forceinline__ fp_t load_x(u32 i) const {
        if (sorted == nullptr) return pts[i].x;
        const u32 j = sorted[i] & 0x7fffffffu;
        return bases[base_idx ? base_idx[j] : j].x;
    }
};

enum pair_kind : u32 { COPY_P = 0, COPY_Q = 1, INFINITY_PQ = 2, ADD_PQ = 3, DOUBLE_P = 4 };

// The largest b < m with starts[b] <= o (the bucket holding position o).
__device__ __forceinline__ u32 bucket_of(const u32* starts, u32 m, u32 o) {
    u32 lo = 0, hi = m - 1;
    while (lo < hi) {
        const u32 mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= o)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Output position o of bucket b: the input pair at i, i + 1 (has_q false when i is the
// bucket's last point).
__device__ __forceinline__ void pair_at(const u32* in_starts, const u32* out_starts, u32 b,
                                        u32 o, u32& i, bool& has_q) {
    i = in_starts[b] + 2 * (o - out_starts[b]);
    has_q = i + 1 < in_starts[b + 1];
}

// The case of the pair (p, q) and its denominator.
__device__ __forceinline__ pair_kind kind_of(const g1_affine_t& p, const g1_affine_t& q,
                                             bool has_q, fp_t& d) {
    d = fp_t::one();
    if (!has_q || q.is_inf()) return COPY_P;
    if (p.is_inf()) return COPY_Q;
    if (!(p.x == q.x)) {
        d = q.x - p.x;
        return ADD_PQ;
    }
    if (p.y == q.y && !p.y.is_zero()) {
        d = p.y.dbl();
        return DOUBLE_P;
    }
    return INFINITY_PQ;
}

// The denominator of the pair at i, from the x-coordinates alone on the common path (both
// nonzero, so neither point is infinity, and distinct); the full points otherwise.
__device__ __forceinline__ fp_t denominator(const pair_src& src, u32 i, bool has_q) {
    if (!has_q) return fp_t::one();
    const fp_t x1 = src.load_x(i), x2 = src.load_x(i + 1);
    if (!(x1.is_zero() || x2.is_zero() || x1 == x2)) return x2 - x1;
    fp_t d;
    kind_of(src.load(i), src.load(i + 1), true, d);
    return d;
}

extern "C" __global__ void pair_halve_counts(const u32* in_starts, u32 m, u32* counts) {
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= m) return;
    counts[b] = (in_starts[b + 1] - in_starts[b] + 1) >> 1;
}

extern "C" __global__ void pair_forward_g1(const g1_affine_t* bases, const u32* base_idx,
                                           const u32* sorted, const g1_affine_t* pts,
                                           const u32* in_starts, const u32* out_starts, u32 m,
                                           u32 G, u32 threads, fp_t* pre, fp_t* tot) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const pair_src src{bases, base_idx, sorted, pts};
    const u32 total = out_starts[m];
    const u64 o0 = (u64)t * G;
    fp_t acc = fp_t::one();
    if (o0 < total) {
        const u32 end = (u32)min((u64)total, o0 + G);
        u32 b = bucket_of(out_starts, m, (u32)o0);
        for (u32 o = (u32)o0, k = 0; o < end; o++, k++) {
            while (out_starts[b + 1] <= o) b++;
            u32 i;
            bool has_q;
            pair_at(in_starts, out_starts, b, o, i, has_q);
            pre[(u64)k * threads + t] = acc;
            acc = fmul(acc, denominator(src, i, has_q));
        }
    }
    tot[t] = acc;
}

// tot[0..n) := their inverses (none is zero), G2 consecutive values per thread.
extern "C" __global__ void pair_invert(fp_t* tot, u32 n, u32 G2, fp_t* pre2) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u64 b = (u64)t * G2;
    if (b >= n) return;
    const u32 cnt = (u32)min((u64)n - b, (u64)G2);
    const u32 threads = (n + G2 - 1) / G2;
    fp_t acc = fp_t::one();
    for (u32 k = 0; k < cnt; k++) {
        pre2[(u64)k * threads + t] = acc;
        acc = acc * tot[b + k];
    }
    fp_t inv = fp_inverse(acc);
    for (u32 k = cnt; k-- > 0;) {
        const fp_t v = tot[b + k];
        tot[b + k] = inv * pre2[(u64)k * threads + t];
        inv = inv * v;
    }
}

// At most 128 registers (4 blocks of 128 per SM): with its products out of line the kernel
// would take 141 and fit 3 blocks; the cap spills ~50 bytes.
extern "C" __global__ void __launch_bounds__(128, 4)
    pair_backward_g1(const g1_affine_t* bases, const u32* base_idx, const u32* sorted,
                     const g1_affine_t* pts, const u32* in_starts, const u32* out_starts, u32 m,
                     u32 G, u32 threads, const fp_t* pre, const fp_t* tot_inv,
                     g1_affine_t* out) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const pair_src src{bases, base_idx, sorted, pts};
    const u32 total = out_starts[m];
    const u64 o0 = (u64)t * G;
    if (o0 >= total) return;
    const u32 cnt = (u32)min((u64)total - o0, (u64)G);
    u32 b = bucket_of(out_starts, m, (u32)o0 + cnt - 1);
    fp_t inv = tot_inv[t];
    // (Fetching the next pair's points ahead, as msm.cu's accumulation does, took 164
    // registers and made this kernel slower on an H200: 114 against 110 ms at 2^24.)
    for (u32 k = cnt; k-- > 0;) {
        const u32 o = (u32)o0 + k;
        while (out_starts[b] > o) b--;
        u32 i;
        bool has_q;
        pair_at(in_starts, out_starts, b, o, i, has_q);
        const g1_affine_t p = src.load(i);
        const g1_affine_t q = has_q ? src.load(i + 1) : p;
        fp_t d;
        const pair_kind kind = kind_of(p, q, has_q, d);
        g1_affine_t r;
        if (kind == ADD_PQ || kind == DOUBLE_P) {
            const fp_t dinv = fmul(inv, pre[(u64)k * threads + t]);
            inv = fmul(inv, d);
            fp_t lambda;
            if (kind == ADD_PQ) {
                lambda = fmul(q.y - p.y, dinv);
            } else {
                const fp_t xx = fsqr(p.x);
                lambda = fmul(xx.dbl() + xx, dinv);
            }
            // x_q = x_p when doubling.
            r.x = fsqr(lambda) - p.x - q.x;
            r.y = fmul(lambda, p.x - r.x) - p.y;
        } else if (kind == COPY_P) {
            r = p;
        } else if (kind == COPY_Q) {
            r = q;
        } else {
            r.x = fp_t::zero();
            r.y = fp_t::zero();
        }
        out[o] = r;
    }
}
