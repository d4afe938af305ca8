// classify.cu: split a scalar vector into 0 / 1 / other and compact, in order, the indices
// of the ones and the (index, scalar) pairs of the others, so that the bases with scalar 1
// are summed by batch_add.cu and only the others go through an MSM. Two phases: per-block
// counts, then (after scan_exclusive_u32 in msm.cu over those counts) a stable scatter.
#include "field.cuh"

#define CLASSIFY_THREADS 1024

extern "C" __global__ void classify_count(const fr_t* scalars, u32 n, u32* ones, u32* others) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 is_one = 0, is_other = 0;
    if (i < n) {
        fr_t s = scalars[i];
        is_one = s.is_one();
        is_other = !is_one && !s.is_zero();
    }
    u32 c1 = __syncthreads_count(is_one);
    u32 c2 = __syncthreads_count(is_other);
    if (threadIdx.x == 0) {
        ones[blockIdx.x] = c1;
        others[blockIdx.x] = c2;
    }
}

// Exclusive prefix of `flag` over the block (blockDim.x == CLASSIFY_THREADS).
__device__ __forceinline__ u32 block_prefix(u32 flag, u32* warp_sums) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 ballot = __ballot_sync(0xffffffffu, flag);
    const u32 before = __popc(ballot & ((1u << lane) - 1));
    __syncthreads();
    if (lane == 0) warp_sums[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {
        u32 v = warp_sums[lane];
        for (u32 off = 1; off < 32; off <<= 1) {
            u32 o = __shfl_up_sync(0xffffffffu, v, off);
            if (lane >= off) v += o;
        }
        warp_sums[lane] = v;  // inclusive
    }
    __syncthreads();
    return (warp ? warp_sums[warp - 1] : 0) + before;
}

extern "C" __global__ void classify_scatter(const fr_t* scalars, u32 n, const u32* one_off,
                                            const u32* other_off, u32* one_idx, u32* other_idx,
                                            fr_t* other_scalars) {
    __shared__ u32 warp_sums[32];
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 is_one = 0, is_other = 0;
    fr_t s = fr_t::zero();
    if (i < n) {
        s = scalars[i];
        is_one = s.is_one();
        is_other = !is_one && !s.is_zero();
    }
    u32 p1 = block_prefix(is_one, warp_sums);
    u32 p2 = block_prefix(is_other, warp_sums);
    if (is_one) one_idx[one_off[blockIdx.x] + p1] = i;
    if (is_other) {
        u32 pos = other_off[blockIdx.x] + p2;
        other_idx[pos] = i;
        other_scalars[pos] = s;
    }
}

// out[i] = bases[idx[i]] for i < count, points of W 16-byte words (6 in G1, 12 in G2): the
// others' bases packed densely before their MSM, so that its bucket accumulation gathers
// from a compact array (one index level fewer, a working set that L2 can hold) instead of
// from the whole query through the index list. `count` (on the device, from the
// classification; null: n) is at most the bound n the output is sized for; the grid is
// sized for the bound but capped, and strides over the words, so idle threads are few.
extern "C" __global__ void gather_points(const uint4* bases, const u32* idx, u32 n,
                                         const u32* count, u32 W, uint4* out) {
    const u64 live = (u64)(count ? min(*count, n) : n) * W;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < live; t += stride) {
        const u64 i = t / W;
        const u32 k = (u32)(t - i * W);
        out[t] = bases[(u64)idx[i] * W + k];
    }
}
