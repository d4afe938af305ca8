// ntt.cu: radix-2 NTT over Fr in passes of up to NTT_MAX_LG levels each, done in shared
// memory. A transform of 2^k points is planned (on the host, ntt.rs) as passes over
// sub-transforms of 2^R points (R = k, k - L0, ...): each pass does an L-level transform
// along the top L bits of the R-bit index with roots of order 2^L, and multiplies by the
// twist w_R^(lo * k1) that couples it to the next pass (the four-step / Cooley-Tukey split,
// Bailey, "FFTs in external or hierarchical memory", J. Supercomputing 4, 1990).
//
// `ntt_dif_pass` runs the passes natural -> bit-reversed (decimation in frequency);
// `ntt_dit_pass` runs the transpose of the same network, bit-reversed -> natural
// (decimation in time), with the passes in reverse order. Twiddles come from device tables
// built by `ntt_powers`: w^e = lo[e & (2^h - 1)] * hi[e >> h] for the 2^k-th root w; a pass
// of R <= 18 may be given `tw`, its twists w_R^j (j < 2^R) read with no product.
#include "field.cuh"

// 2^10 elements of 32 bytes = 32 KiB of shared memory per block.
#define NTT_MAX_LG 10
static_assert(NTT_MAX_LG <= 10, "one block holds 2^NTT_MAX_LG elements in 48 KiB");

__device__ __forceinline__ fr_t load_fr(const fr_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = q[0], b = q[1];
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}

__device__ __forceinline__ void store_fr(fr_t* p, const fr_t& r) {
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(r.v[0], r.v[1], r.v[2], r.v[3]);
    q[1] = make_uint4(r.v[4], r.v[5], r.v[6], r.v[7]);
}

__device__ __forceinline__ u32 bitrev(u32 x, u32 bits) {
    return bits == 0 ? 0 : (__brev(x) >> (32 - bits));
}

// w^e from the two-level table.
__device__ __forceinline__ fr_t table_pow(const fr_t* lo, const fr_t* hi, u32 h, u64 e) {
    u64 mask = (1ull << h) - 1;
    return load_fr(lo + (e & mask)) * load_fr(hi + (e >> h));
}

// x times the twist w_R^(lo * k1) of a pass over sub-transforms of 2^R points (w_R =
// w^(2^(k-R))): from the pass's own table `tw` when given (one product), else from the
// two-level table of w (two).
__device__ __forceinline__ fr_t twisted(const fr_t& x, u64 lo, u64 k1, u32 k, u32 R,
                                        const fr_t* lo_t, const fr_t* hi_t, u32 h,
                                        const fr_t* tw) {
    const u64 j = (lo * k1) & ((1ull << R) - 1);
    if (j == 0) return x;
    return x * (tw ? load_fr(tw + j) : table_pow(lo_t, hi_t, h, j << (k - R)));
}

// out[i] = factor * base^i for i < count.
extern "C" __global__ void ntt_powers(fr_t* out, fr_t base, fr_t factor, u32 count) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    store_fr(out + i, factor * base.pow(i));
}

// Threads per block of a pass (ntt.rs picks them): 2^(L-1) butterflies per level, 256
// threads at most, each looping over its butterflies. A pass of L = 10 runs 256 threads of
// two butterflies each: 512 threads of ~72 registers left one block per SM, and the 2^20
// transform ran at 1.15x the time it took with the CIOS product.

// The output scaling of a transform's final pass (`mode`):
//   0  none;
//   1  every element times `scale`;
//   2  element of coefficient index i times s_lo[i & (2^h - 1)] * s_hi[i >> h]: the coset
//      shift g^(+-i) with 1/n folded into s_hi (ntt.rs builds those tables), fused here
//      instead of a separate pass over memory.
__device__ __forceinline__ fr_t out_scale(const fr_t& x, u32 mode, const fr_t& scale,
                                          const fr_t* s_lo, const fr_t* s_hi, u32 h, u64 idx) {
    if (mode == 1) return x * scale;
    if (mode == 2) return x * table_pow(s_lo, s_hi, h, idx);
    return x;
}

// One pass of the natural -> bit-reversed transform. Block g handles the 2^L elements
// index = outer * 2^R + v * 2^(R-L) + lo for v < 2^L; blockDim.x = min(2^(L-1), 256).
// `inner` holds w_L^j (j < 2^(L-1)); the twist uses the table (lo_t, hi_t, h) of w_k,
// the 2^k-th root. On the last pass (R = L) `mode` scales the outputs (out_scale, with
// index bitrev_k(position): the output is bit-reversed), and a non-null `out` receives
// each output at out[bitrev_k(position)], i.e. in natural order, out of place.
extern "C" __global__ void ntt_dif_pass(fr_t* data, u32 k, u32 R, u32 L, const fr_t* inner,
                                        const fr_t* lo_t, const fr_t* hi_t, u32 h,
                                        const fr_t* tw, u32 mode,
                                        fr_t scale, const fr_t* s_lo, const fr_t* s_hi,
                                        fr_t* out) {
    // uint4 storage: 16-byte shared accesses, conflict-free per quarter warp.
    __shared__ uint4 s_raw[2 << NTT_MAX_LG];
    fr_t* s = reinterpret_cast<fr_t*>(s_raw);
    const u32 half_n = 1u << (L - 1);
    const u64 g = blockIdx.x;
    const u32 lo_bits = R - L;
    const u64 lo = g & ((1ull << lo_bits) - 1);
    const u64 outer = g >> lo_bits;
    const u64 base = (outer << R) + lo;
    const u64 stride = 1ull << lo_bits;

    for (u32 vi = threadIdx.x; vi < 2 * half_n; vi += blockDim.x)
        store_fr(s + vi, load_fr(data + base + (u64)vi * stride));
    __syncthreads();

    for (u32 t = 0; t < L; t++) {
        const u32 hsz = 1u << (L - 1 - t);
        for (u32 bi = threadIdx.x; bi < half_n; bi += blockDim.x) {
            const u32 m = bi & (hsz - 1);
            const u32 a = ((bi >> (L - 1 - t)) << (L - t)) + m;
            const u32 b = a + hsz;
            fr_t u = load_fr(s + a), v = load_fr(s + b);
            store_fr(s + a, u + v);
            // The last level's twiddle is w^0 = 1 for every butterfly.
            store_fr(s + b, hsz == 1 ? u - v : (u - v) * load_fr(inner + (m << t)));
        }
        __syncthreads();
    }

    for (u32 vi = threadIdx.x; vi < 2 * half_n; vi += blockDim.x) {
        fr_t x = load_fr(s + vi);
        const u64 pos = base + (u64)vi * stride;
        if (lo_bits != 0) x = twisted(x, lo, bitrev(vi, L), k, R, lo_t, hi_t, h, tw);
        const u64 idx = bitrev((u32)pos, k);
        x = out_scale(x, mode, scale, s_lo, s_hi, h, idx);
        store_fr(out ? out + idx : data + pos, x);
    }
}

// The transpose of `ntt_dif_pass`: twist first, then the L levels in reverse order with
// butterflies (u, v) -> (u + w v, u - w v). Bit-reversed input, natural output when the
// passes run in reverse plan order; on the last of them (R = k) `mode` scales the outputs
// with index = position.
extern "C" __global__ void ntt_dit_pass(fr_t* data, u32 k, u32 R, u32 L, const fr_t* inner,
                                        const fr_t* lo_t, const fr_t* hi_t, u32 h,
                                        const fr_t* tw, u32 mode,
                                        fr_t scale, const fr_t* s_lo, const fr_t* s_hi) {
    // uint4 storage: 16-byte shared accesses, conflict-free per quarter warp.
    __shared__ uint4 s_raw[2 << NTT_MAX_LG];
    fr_t* s = reinterpret_cast<fr_t*>(s_raw);
    const u32 half_n = 1u << (L - 1);
    const u64 g = blockIdx.x;
    const u32 lo_bits = R - L;
    const u64 lo = g & ((1ull << lo_bits) - 1);
    const u64 outer = g >> lo_bits;
    const u64 base = (outer << R) + lo;
    const u64 stride = 1ull << lo_bits;

    for (u32 vi = threadIdx.x; vi < 2 * half_n; vi += blockDim.x) {
        fr_t x = load_fr(data + base + (u64)vi * stride);
        if (lo_bits != 0) x = twisted(x, lo, bitrev(vi, L), k, R, lo_t, hi_t, h, tw);
        store_fr(s + vi, x);
    }
    __syncthreads();

    for (int t = (int)L - 1; t >= 0; t--) {
        const u32 hsz = 1u << (L - 1 - t);
        for (u32 bi = threadIdx.x; bi < half_n; bi += blockDim.x) {
            const u32 m = bi & (hsz - 1);
            const u32 a = ((bi >> (L - 1 - t)) << (L - t)) + m;
            const u32 b = a + hsz;
            fr_t u = load_fr(s + a);
            fr_t v = load_fr(s + b);
            // The first level's twiddle is w^0 = 1 for every butterfly.
            if (hsz != 1) v = v * load_fr(inner + (m << t));
            store_fr(s + a, u + v);
            store_fr(s + b, u - v);
        }
        __syncthreads();
    }

    for (u32 vi = threadIdx.x; vi < 2 * half_n; vi += blockDim.x) {
        const u64 pos = base + (u64)vi * stride;
        store_fr(data + pos, out_scale(load_fr(s + vi), mode, scale, s_lo, s_hi, h, pos));
    }
}

// In-place bit-reversal permutation of 2^k elements.
extern "C" __global__ void ntt_bitrev(fr_t* data, u32 k) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >> k) return;
    u64 j = bitrev((u32)i, k);
    if (i < j) {
        fr_t a = load_fr(data + i), b = load_fr(data + j);
        store_fr(data + i, b);
        store_fr(data + j, a);
    }
}

// data[pos] *= g^idx with idx = pos (natural order) or bitrev(pos) (bit-reversed order),
// g^idx from the two-level table of g: the coset shift x -> x * g^i of a coefficient vector.
extern "C" __global__ void ntt_coset_scale(fr_t* data, u32 k, u32 bitreversed,
                                           const fr_t* lo_t, const fr_t* hi_t, u32 h) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >> k) return;
    u64 idx = bitreversed ? bitrev((u32)i, k) : i;
    if (idx == 0) return;
    store_fr(data + i, load_fr(data + i) * table_pow(lo_t, hi_t, h, idx));
}

// out[i] = (a[i] * b[i] - c[i]) * zinv: the quotient step h = (a b - c) / Z on the coset,
// where Z(g w^i) = g^n - 1 is the same constant at every coset point. `out` may be `a`.
extern "C" __global__ void fr_ab_minus_c(fr_t* out, const fr_t* a, const fr_t* b, const fr_t* c,
                                         u64 n, fr_t zinv) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t x = load_fr(a + i) * load_fr(b + i) - load_fr(c + i);
    store_fr(out + i, x * zinv);
}
