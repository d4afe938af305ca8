// batch_add.cu: the sum of the bases whose scalar is 1 (bit-scalar batch addition). Each
// thread adds K affine points (gathered through an index list, or consecutive) into one
// XYZZ partial; msm.cu's sum_groups_{g} then reduces the partials and to_jacobian_{g}
// converts the last one.
#include "ec.cuh"

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
    out[id] = acc;
}

extern "C" __global__ void batch_add_g1(const g1_affine_t* bases, const u32* idx, u32 n,
                                        const u32* count, u32 K, g1_xyzz_t* out) {
    batch_add<fp_t>(bases, idx, n, count, K, out);
}
extern "C" __global__ void batch_add_g2(const g2_affine_t* bases, const u32* idx, u32 n,
                                        const u32* count, u32 K, g2_xyzz_t* out) {
    batch_add<fp2_t>(bases, idx, n, count, K, out);
}
