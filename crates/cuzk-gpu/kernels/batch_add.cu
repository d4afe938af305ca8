// batch_add.cu: the sum of the bases whose scalar is 1 (bit-scalar batch addition). Each
// thread adds K affine points (gathered through an index list, or consecutive) into one
// XYZZ partial; msm.cu's sum_groups_{g} then reduces the partials and to_jacobian_{g}
// converts the last one. A sum streamed in chunks keeps its partials across chunks
// instead (batch_add_acc_{g}) and reduces them once, after its last chunk.
#include "ec.cuh"

// The sum of points b..e of the list (through `idx` when given).
template <class F>
__device__ __forceinline__ xyzz_t<F> batch_range(const affine_t<F>* bases, const u32* idx,
                                                 u32 b, u32 e) {
    xyzz_t<F> acc = xyzz_t<F>::inf();
    if constexpr (sizeof(F) == sizeof(fp_t)) {
        // G1, one point ahead as in msm.cu's accumulate: the next gather overlaps this add.
        if (b < e) {
            affine_t<F> q = bases[idx ? idx[b] : b];
            for (u32 p = b; p < e; p++) {
                affine_t<F> next = q;
                if (p + 1 < e) next = bases[idx ? idx[p + 1] : p + 1];
                hot_add_affine(acc, q);
                q = next;
            }
        }
    } else {
        for (u32 p = b; p < e; p++) acc.add_affine(bases[idx ? idx[p] : p]);
    }
    return acc;
}

// The points summed are the first `count` of n (count on the device, from the
// classification; null: all n). The grid covers the partials of n points and every one is
// written: those past the count are infinity, so the reduction over ceil(n / K) partials
// that follows needs no count. An idle thread reads one word and writes one point.
template <class F>
__device__ __forceinline__ void batch_add(const affine_t<F>* bases, const u32* idx, u32 n,
                                          const u32* count, u32 K, xyzz_t<F>* out) {
    u32 id = blockIdx.x * blockDim.x + threadIdx.x;
    // At least one partial: with n = 0 thread 0 writes infinity (the reduction and the
    // conversion read out[0] whatever n is).
    const u32 nout = n ? (n + K - 1) / K : 1;
    if (id >= nout) return;
    const u32 live = count ? min(*count, n) : n;
    const u32 b = id * K, e = min(live, b + K);
    out[id] = batch_range(bases, idx, b, e);
}

// One chunk of a streamed sum: the first `count` of n points (as above) spread over the
// `parts` partials `acc`, thread t adding its ceil(count / parts) consecutive points to
// acc[t], which the earlier chunks' launches left (infinity before the first). The work
// per thread follows the count, so a chunk costs its points, not a reduction.
template <class F>
__device__ __forceinline__ void batch_add_acc(const affine_t<F>* bases, const u32* idx, u32 n,
                                              const u32* count, u32 parts, xyzz_t<F>* acc) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= parts) return;
    const u32 live = count ? min(*count, n) : n;
    const u32 K = (live + parts - 1) / parts;
    const u64 b = (u64)t * K;
    if (b >= live) return;
    xyzz_t<F> sum = batch_range(bases, idx, (u32)b, (u32)min((u64)live, b + K));
    xyzz_t<F> part = acc[t];
    part.add(sum);
    acc[t] = part;
}

extern "C" __global__ void batch_add_g1(const g1_affine_t* bases, const u32* idx, u32 n,
                                        const u32* count, u32 K, g1_xyzz_t* out) {
    batch_add<fp_t>(bases, idx, n, count, K, out);
}
extern "C" __global__ void batch_add_g2(const g2_affine_t* bases, const u32* idx, u32 n,
                                        const u32* count, u32 K, g2_xyzz_t* out) {
    batch_add<fp2_t>(bases, idx, n, count, K, out);
}
extern "C" __global__ void batch_add_acc_g1(const g1_affine_t* bases, const u32* idx, u32 n,
                                            const u32* count, u32 parts, g1_xyzz_t* acc) {
    batch_add_acc<fp_t>(bases, idx, n, count, parts, acc);
}
extern "C" __global__ void batch_add_acc_g2(const g2_affine_t* bases, const u32* idx, u32 n,
                                            const u32* count, u32 parts, g2_xyzz_t* acc) {
    batch_add_acc<fp2_t>(bases, idx, n, count, parts, acc);
}
