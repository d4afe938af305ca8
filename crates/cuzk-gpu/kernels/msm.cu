// msm.cu: Pippenger multi-scalar multiplication for G1 and G2 with signed c-bit window
// digits (Pippenger 1976; the signed-digit bucket method as in Bernstein et al.,
// "Faster batch forgery identification", INDOCRYPT 2012, and the ZPrize 2022 MSM entries).
//
// Phases, one kernel each (the host sequence lives in msm.rs):
//   msm_scalars_canonical  Montgomery -> canonical scalars.
//   msm_histogram          count each (window, bucket) pair: digit d != 0 goes to bucket |d|-1
//                          (of its window's set: one set per window, or fewer with a table).
//   scan_exclusive_u32     bucket start offsets (counting sort; the total lands at [m]).
//   msm_scatter            scalar indices sorted by bucket, sign in bit 31.
//   msm_accumulate_{g}     each thread sums K consecutive sorted points into XYZZ buckets
//                          (whole buckets directly, boundary-crossing ones as partials).
//                          With `sorted` null the points are the bases in order.
//   msm_fixup_{g}          one thread per bucket: adds the partials of crossing buckets.
//   msm_bucket_add_{g}     one thread per bucket: a chunk's buckets added onto the sums of
//                          a streamed MSM's earlier chunks (its accumulators).
//   msm_segments_{g}       per bucket set, runs of SEG buckets: sum (b+1) B_b by running sums.
//   sum_groups_{g}         reduce rows of partial sums by a factor K (repeat until 1).
//   to_jacobian_{g}        the window sums to Jacobian; Horner over windows runs on the CPU.
#include "ec.cuh"
#include "digits.cuh"

// The scalar phases read the first `count` of n scalars: `count` is on the device (the
// classification's, for the MSM of the "other" scalars) or null for all n. Their grids are
// sized for n, capped when a count is given, and stride over the scalars.
__device__ __forceinline__ u32 live_count(u32 n, const u32* count) {
    return count ? min(*count, n) : n;
}

extern "C" __global__ void msm_scalars_canonical(const fr_t* scalars, u32* out, u32 n,
                                                 const u32* count) {
    const u32 live = live_count(n, count);
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < live; i += gridDim.x * blockDim.x) {
        fr_t s = scalars[i].from_mont();
#pragma unroll
        for (int j = 0; j < 8; j++) out[(u64)i * 8 + j] = s.v[j];
    }
}

// Window w's digits go to bucket set w % sets and read their point from row w / sets of
// the bases, `stride` points apart: sets = nwin and stride 0 is the plain MSM (one set per
// window, every window reading bases[i]); sets < nwin is an MSM over a window table
// (table.cu), whose row k holds 2^(c·sets·k) times each base.
extern "C" __global__ void msm_histogram(const u32* canon, u32 n, const u32* count, u32 c,
                                         u32 nwin, u32 sets, u32* counts) {
    const u32 live = live_count(n, count);
    const u32 nb = 1u << (c - 1);
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < live; i += gridDim.x * blockDim.x) {
        const u32* s = canon + (u64)i * 8;
        u32 carry = 0, neg = 0;
        for (u32 w = 0; w < nwin; w++) {
            u32 d = signed_digit(s, w, c, carry, neg);
            if (d) atomicAdd(&counts[(w % sets) * nb + d - 1], 1u);
        }
    }
}

extern "C" __global__ void msm_scatter(const u32* canon, u32 n, const u32* count, u32 c,
                                       u32 nwin, u32 sets, u32 stride, u32* cursor,
                                       u32* sorted) {
    const u32 live = live_count(n, count);
    const u32 nb = 1u << (c - 1);
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < live; i += gridDim.x * blockDim.x) {
        const u32* s = canon + (u64)i * 8;
        u32 carry = 0, neg = 0;
        for (u32 w = 0; w < nwin; w++) {
            u32 d = signed_digit(s, w, c, carry, neg);
            if (d) {
                u32 pos = atomicAdd(&cursor[(w % sets) * nb + d - 1], 1u);
                sorted[pos] = ((w / sets) * stride + i) | (neg << 31);
            }
        }
    }
}

// Exclusive prefix sum of in[0..m) into out[0..m), total into out[m]; `copy` (optional)
// receives the same offsets. One block of 1024 threads, each scanning a contiguous chunk.
extern "C" __global__ void scan_exclusive_u32(const u32* in, u32* out, u32* copy, u32 m) {
    __shared__ u32 sums[1024];
    const u32 t = threadIdx.x;
    const u32 chunk = (m + 1023) / 1024;
    const u64 b = (u64)t * chunk;
    const u64 e = min((u64)m, b + chunk);
    u32 s = 0;
    for (u64 i = b; i < e; i++) s += in[i];
    sums[t] = s;
    __syncthreads();
    for (u32 off = 1; off < 1024; off <<= 1) {
        u32 v = t >= off ? sums[t - off] : 0;
        __syncthreads();
        sums[t] += v;
        __syncthreads();
    }
    u32 run = sums[t] - s;
    for (u64 i = b; i < e; i++) {
        u32 x = in[i];
        out[i] = run;
        if (copy) copy[i] = run;
        run += x;
    }
    if (t == 1023) out[m] = sums[1023];
}

// Bucket accumulation, load-balanced: thread t sums the sorted entries [t K, (t+1) K)
// (of T = starts[m] in all), whatever buckets they belong to, so a thread's work does not
// depend on bucket sizes (one thread per bucket ran each warp as long as its largest
// bucket: Poisson-sized buckets of ~13 points cost 1.8x, and a skewed bucket serialized).
// A bucket that lies wholly inside one range is written to `buckets` directly; one that
// crosses a range boundary leaves partial sums, at most two per thread: `first[t]` for the
// bucket the range starts inside (begun by an earlier thread), `last[t]` for the bucket
// begun inside the range that runs past its end. msm_fixup_{g} then adds those up.
// Multi-block exclusive scan of m words for large m (a single block walking 6.8M bucket
// counts took ~20 ms): scan_tile_sums sums tiles of 1024 words, scan_exclusive_u32 scans
// those sums, scan_tile_apply scans each tile and adds its offset. Block size 1024.
__device__ __forceinline__ u32 block_exclusive_scan(u32 v, u32* warp_sums) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 x = v;
#pragma unroll
    for (u32 off = 1; off < 32; off <<= 1) {
        const u32 y = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= off) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 w = warp_sums[lane];
#pragma unroll
        for (u32 off = 1; off < 32; off <<= 1) {
            const u32 y = __shfl_up_sync(0xffffffffu, w, off);
            if (lane >= off) w += y;
        }
        warp_sums[lane] = w;
    }
    __syncthreads();
    return x - v + (warp ? warp_sums[warp - 1] : 0);
}

extern "C" __global__ void scan_tile_sums(const u32* in, u32 m, u32* tile_sums) {
    __shared__ u32 warp_sums[32];
    const u64 i = (u64)blockIdx.x * 1024 + threadIdx.x;
    const u32 v = i < m ? in[i] : 0;
    block_exclusive_scan(v, warp_sums);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = warp_sums[31];
}

// tile_offs: the exclusive scan of the tile sums, with the total at [gridDim.x].
extern "C" __global__ void scan_tile_apply(const u32* in, u32 m, const u32* tile_offs, u32* out,
                                           u32* copy) {
    __shared__ u32 warp_sums[32];
    const u64 i = (u64)blockIdx.x * 1024 + threadIdx.x;
    const u32 v = i < m ? in[i] : 0;
    const u32 x = block_exclusive_scan(v, warp_sums) + tile_offs[blockIdx.x];
    if (i < m) {
        out[i] = x;
        if (copy) copy[i] = x;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) out[m] = tile_offs[gridDim.x];
}

template <class F>
__device__ __forceinline__ void flush_run(xyzz_t<F>& acc, u32 b, u32 bs, u32 be, u32 rb,
                                          u32 re, u32 t, xyzz_t<F>* buckets, xyzz_t<F>* first,
                                          xyzz_t<F>* last) {
    if (bs < rb)
        first[t] = acc;
    else if (be > re)
        last[t] = acc;
    else
        buckets[b] = acc;
    acc = xyzz_t<F>::inf();
}

// Entries per accumulation thread for T sorted entries: T spread over `threads` threads,
// at least `min_k` each. Computed on the device from the sort's total, so an MSM whose
// point count is known only on the device (the classified others) still keeps `threads`
// busy; the grid covers `threads` (>= ceil(T / K)), and the threads past the entries exit.
__device__ __forceinline__ u32 acc_k(u32 T, u32 threads, u32 min_k) {
    return max((u32)(((u64)T + threads - 1) / threads), min_k);
}

template <class F>
__device__ __forceinline__ void accumulate(const affine_t<F>* bases, const u32* base_idx,
                                           const u32* sorted, const u32* starts, u32 m,
                                           u32 threads, u32 min_k, xyzz_t<F>* buckets,
                                           xyzz_t<F>* first, xyzz_t<F>* last) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 T = starts[m];
    const u32 K = acc_k(T, threads, min_k);
    const u64 rb64 = (u64)t * K;
    if (rb64 >= T) return;
    const u32 rb = (u32)rb64, re = (u32)min((u64)T, rb64 + K);
    // The bucket holding entry rb: the largest b < m with starts[b] <= rb.
    u32 lo = 0, hi = m - 1;
    while (lo < hi) {
        const u32 mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= rb)
            lo = mid;
        else
            hi = mid - 1;
    }
    u32 b = lo, bs = starts[b], be = starts[b + 1];
    xyzz_t<F> acc = xyzz_t<F>::inf();
    // After adding entry p: close the run when its bucket or the range ends, then move to
    // the next non-empty bucket, which starts at p + 1.
    auto step = [&](u32 p) {
        if (p + 1 == be || p + 1 == re) {
            flush_run(acc, b, bs, be, rb, re, t, buckets, first, last);
            if (p + 1 < re) {
                do {
                    b++;
                } while (starts[b + 1] <= p + 1);
                bs = p + 1;
                be = starts[b + 1];
            }
        }
    };
    if constexpr (sizeof(F) == sizeof(fp_t)) {
        // G1, one point ahead: the gathers of entry p + 1 (entry, index, 96 bytes of base)
        // are in flight while entry p is added (inlined, accumulator in registers).
        u32 ent = sorted ? sorted[rb] : rb;
        const u32 j0 = ent & 0x7fffffffu;
        affine_t<F> q = bases[base_idx ? base_idx[j0] : j0];
        for (u32 p = rb; p < re; p++) {
            const u32 sign = ent >> 31;
            affine_t<F> next = q;
            if (p + 1 < re) {
                ent = sorted ? sorted[p + 1] : p + 1;
                const u32 j = ent & 0x7fffffffu;
                next = bases[base_idx ? base_idx[j] : j];
            }
            hot_add_affine(acc, sign ? q.neg() : q);
            q = next;
            step(p);
        }
    } else {
        // G2: a prefetched 192-byte point would cost 48 registers of a 190-register kernel.
        for (u32 p = rb; p < re; p++) {
            const u32 ent = sorted ? sorted[p] : p;
            u32 i = ent & 0x7fffffffu;
            if (base_idx) i = base_idx[i];
            affine_t<F> q = bases[i];
            if (ent >> 31) q = q.neg();
            acc.add_affine(q);
            step(p);
        }
    }
}

// One thread per bucket: an empty bucket becomes infinity; one that crossed range
// boundaries is last[t0] + first[t0 + 1] + ... + first[t1] (t0, t1: the ranges holding its
// first and last entry); one inside a single range was written by the accumulation.
template <class F>
__device__ __forceinline__ void fixup(const u32* starts, u32 m, u32 threads, u32 min_k,
                                      const xyzz_t<F>* first, const xyzz_t<F>* last,
                                      xyzz_t<F>* buckets) {
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= m) return;
    const u32 K = acc_k(starts[m], threads, min_k);
    const u32 s = starts[b], e = starts[b + 1];
    if (s == e) {
        buckets[b] = xyzz_t<F>::inf();
        return;
    }
    const u32 t0 = s / K, t1 = (e - 1) / K;
    if (t0 == t1) return;
    xyzz_t<F> acc = last[t0];
    for (u32 t = t0 + 1; t <= t1; t++) acc.add(first[t]);
    buckets[b] = acc;
}

template <class F>
__device__ __forceinline__ void segments(const xyzz_t<F>* buckets, u32 nb, u32 nwin, u32 seg,
                                         xyzz_t<F>* partial) {
    const u32 nseg = nb / seg;
    u32 id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= nwin * nseg) return;
    const u32 w = id / nseg, j = id % nseg;
    const xyzz_t<F>* B = buckets + (u64)w * nb + (u64)j * seg;
    // sum_{r < seg} (j seg + r + 1) B_r = acc + (j seg) T with T = sum B_r.
    xyzz_t<F> T = xyzz_t<F>::inf(), acc = xyzz_t<F>::inf();
    for (int r = (int)seg - 1; r >= 0; r--) {
        T.add(B[r]);
        acc.add(T);
    }
    if (j) acc.add(T.mul_small(j * seg));
    partial[id] = acc;
}

template <class F>
__device__ __forceinline__ void sum_groups(const xyzz_t<F>* in, u32 rows, u32 len_in, u32 K,
                                           xyzz_t<F>* out) {
    const u32 len_out = (len_in + K - 1) / K;
    u32 id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= rows * len_out) return;
    const u32 r = id / len_out, j = id % len_out;
    const u32 b = j * K, e = min(len_in, b + K);
    xyzz_t<F> acc = xyzz_t<F>::inf();
    for (u32 p = b; p < e; p++) acc.add(in[(u64)r * len_in + p]);
    out[(u64)r * len_out + j] = acc;
}

template <class F>
__device__ __forceinline__ void to_jacobian(const xyzz_t<F>* in, jacobian_t<F>* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i].to_jacobian();
}

// Blocks per SM the G1 accumulation asks ptxas to fit (registers then capped at 65536 /
// (128 * n)); 1: no cap (the FP64 product leaves the kernel at ~250 registers). Set by
// CUZK_NVRTC_OPTS=-DACC_G1_MIN_BLOCKS=n for benchmarking.
#ifndef ACC_G1_MIN_BLOCKS
#define ACC_G1_MIN_BLOCKS 1
#endif
// dst[b] += src[b] for the m buckets: a chunk's buckets (every one written by the fixup,
// infinity where empty) onto the earlier chunks' sums. Kept out of the accumulation: a
// per-run addition there would run divergently, one warp lane at a time, for every run
// that ends, and slow each step of the hot loop (2.1x at 8 points per bucket, #26).
template <class F>
__device__ __forceinline__ void bucket_add(const xyzz_t<F>* src, u32 m, xyzz_t<F>* dst) {
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= m) return;
    const xyzz_t<F> s = src[b];
    if (s.is_inf()) return;
    xyzz_t<F> d = dst[b];
    d.add(s);
    dst[b] = d;
}

extern "C" __global__ void __launch_bounds__(128, ACC_G1_MIN_BLOCKS) msm_accumulate_g1(const g1_affine_t* bases, const u32* base_idx,
                                             const u32* sorted, const u32* starts, u32 m,
                                             u32 threads, u32 min_k, g1_xyzz_t* buckets,
                                             g1_xyzz_t* first, g1_xyzz_t* last) {
    accumulate<fp_t>(bases, base_idx, sorted, starts, m, threads, min_k, buckets, first, last);
}
extern "C" __global__ void msm_accumulate_g2(const g2_affine_t* bases, const u32* base_idx,
                                             const u32* sorted, const u32* starts, u32 m,
                                             u32 threads, u32 min_k, g2_xyzz_t* buckets,
                                             g2_xyzz_t* first, g2_xyzz_t* last) {
    accumulate<fp2_t>(bases, base_idx, sorted, starts, m, threads, min_k, buckets, first, last);
}
extern "C" __global__ void msm_fixup_g1(const u32* starts, u32 m, u32 threads, u32 min_k,
                                        const g1_xyzz_t* first, const g1_xyzz_t* last,
                                        g1_xyzz_t* buckets) {
    fixup<fp_t>(starts, m, threads, min_k, first, last, buckets);
}
extern "C" __global__ void msm_fixup_g2(const u32* starts, u32 m, u32 threads, u32 min_k,
                                        const g2_xyzz_t* first, const g2_xyzz_t* last,
                                        g2_xyzz_t* buckets) {
    fixup<fp2_t>(starts, m, threads, min_k, first, last, buckets);
}
extern "C" __global__ void msm_bucket_add_g1(const g1_xyzz_t* src, u32 m, g1_xyzz_t* dst) {
    bucket_add<fp_t>(src, m, dst);
}
extern "C" __global__ void msm_bucket_add_g2(const g2_xyzz_t* src, u32 m, g2_xyzz_t* dst) {
    bucket_add<fp2_t>(src, m, dst);
}
extern "C" __global__ void msm_segments_g1(const g1_xyzz_t* buckets, u32 nb, u32 nwin, u32 seg,
                                           g1_xyzz_t* partial) {
    segments<fp_t>(buckets, nb, nwin, seg, partial);
}
extern "C" __global__ void msm_segments_g2(const g2_xyzz_t* buckets, u32 nb, u32 nwin, u32 seg,
                                           g2_xyzz_t* partial) {
    segments<fp2_t>(buckets, nb, nwin, seg, partial);
}
extern "C" __global__ void sum_groups_g1(const g1_xyzz_t* in, u32 rows, u32 len_in, u32 K,
                                         g1_xyzz_t* out) {
    sum_groups<fp_t>(in, rows, len_in, K, out);
}
extern "C" __global__ void sum_groups_g2(const g2_xyzz_t* in, u32 rows, u32 len_in, u32 K,
                                         g2_xyzz_t* out) {
    sum_groups<fp2_t>(in, rows, len_in, K, out);
}
extern "C" __global__ void to_jacobian_g1(const g1_xyzz_t* in, g1_jacobian_t* out, u32 n) {
    to_jacobian<fp_t>(in, out, n);
}
extern "C" __global__ void to_jacobian_g2(const g2_xyzz_t* in, g2_jacobian_t* out, u32 n) {
    to_jacobian<fp2_t>(in, out, n);
}
