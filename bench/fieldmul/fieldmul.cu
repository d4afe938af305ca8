// fieldmul.cu: microbenchmark of BLS12-381 Fp Montgomery product variants on the GPU.
//
// V0 is field.cuh's CIOS operator* behind a __noinline__ wrapper (the reference; until the
// FP64 product replaced it, that was fp_mul_ool, which every point formula calls); the other
// variants live in variants.cuh (shared with the host test) and are wrapped here in the same
// __noinline__ calling convention (fp_t by value in, fp_t out):
//   V0   fp_mul_cios(a, b)    32-bit CIOS, PTX carry chains (field.cuh operator*)
//   V0s  fp_mul_cios(a, a)    reference for the squarings
//   V1   fp_sqr_v1(a)         32-bit carry chains, dedicated squaring
//   V2   fp_mul_v2(a, b)      28-bit sub-limbs, 64-bit accumulation (IMAD.WIDE.U32)
//   V3   fp_mul_v3(a, b)      FP64 DFMA.RZ, 48-bit limbs (Emmart, Zheng, Weems)
//   V4   fp_sqr_v4(a)         V2 scheme, dedicated squaring
//   V5   fp_sqr_v5(a)         V3 scheme, dedicated squaring
//
// Run: fieldmul [--seed N] [--check-n N] [--iters N] [--reps N] [--quick]
// Output: JSON lines only ({"info"...}, {"check"...}, {"bench"...}) then a summary table.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../crates/cuzk-gpu/kernels/field.cuh"
#include "variants.cuh"

// field.cuh's CIOS product, out of line like the variants.
__device__ __noinline__ fp_t fp_mul_cios(const fp_t a, const fp_t b) { return a * b; }

__device__ __noinline__ fp_t fp_sqr_v1(const fp_t a) {
    fp_t r;
    fm::sqr_v1(r.v, a.v);
    return r;
}
__device__ __noinline__ fp_t fp_mul_v2(const fp_t a, const fp_t b) {
    fp_t r;
    fm::mul_v2(r.v, a.v, b.v);
    return r;
}
__device__ __noinline__ fp_t fp_mul_v3(const fp_t a, const fp_t b) {
    fp_t r;
    fm::mul_v3(r.v, a.v, b.v);
    return r;
}
__device__ __noinline__ fp_t fp_sqr_v4(const fp_t a) {
    fp_t r;
    fm::sqr_v4(r.v, a.v);
    return r;
}
__device__ __noinline__ fp_t fp_sqr_v5(const fp_t a) {
    fp_t r;
    fm::sqr_v5(r.v, a.v);
    return r;
}

// Variant ids.
enum { K_V0 = 0, K_V0S, K_V1, K_V2, K_V3, K_V4, K_V5, K_M03, K_M23, K_COUNT };
static const char* kName[K_COUNT] = {"V0", "V0s", "V1", "V2", "V3", "V4", "V5", "M03", "M23"};
static const bool kSqr[K_COUNT] = {false, true, true, false, false, true, true, false, false};
static const char* kDesc[K_COUNT] = {"field.cuh a*b (CIOS, 32-bit carry chains)",
                                     "field.cuh a*a",
                                     "sqr, 32-bit carry chains",
                                     "mul, 28-bit limbs, IMAD.WIDE 64-bit accumulation",
                                     "mul, FP64 DFMA.RZ, 48-bit limbs",
                                     "sqr, 28-bit limbs, IMAD.WIDE",
                                     "sqr, FP64 DFMA.RZ, 48-bit limbs",
                                     "mul, even chains V0, odd chains V3 (integer and FP64 pipes)",
                                     "mul, even chains V2, odd chains V3"};

template <int V>
__device__ __forceinline__ fp_t apply(const fp_t& x, const fp_t& y) {
    if constexpr (V == K_V0) return fp_mul_cios(x, y);
    else if constexpr (V == K_V0S) return fp_mul_cios(x, x);
    else if constexpr (V == K_V1) return fp_sqr_v1(x);
    else if constexpr (V == K_V2) return fp_mul_v2(x, y);
    else if constexpr (V == K_V3) return fp_mul_v3(x, y);
    else if constexpr (V == K_V4) return fp_sqr_v4(x);
    else if constexpr (V == K_V5) return fp_sqr_v5(x);
    else return fp_mul_v3(x, y);  // the mixes' check: their V3 half (V0/V2 are checked alone)
}

__host__ __device__ __forceinline__ u64 splitmix64(u64& s) {
    u64 z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Random value in [0, p): 381 random bits, minus p once if >= p (2^381 < 2p). Mode bits mix in
// values close to p and small values.
__device__ __forceinline__ fp_t rand_fp(u64& s) {
    fp_t x;
#pragma unroll
    for (int i = 0; i < 12; i += 2) {
        u64 z = splitmix64(s);
        x.v[i] = (u32)z;
        x.v[i + 1] = (u32)(z >> 32);
    }
    x.v[11] &= 0x1fffffffu;
    const u32 mode = (u32)splitmix64(s) & 15;
    if (mode == 0) {  // p - 1 - (small), below
#pragma unroll
        for (int i = 4; i < 12; i++) x.v[i] = 0;
    }
    fm::reduce_once12(x.v);
    if (mode == 0) {
        fp_t pm1;
#pragma unroll
        for (int i = 0; i < 12; i++) pm1.v[i] = fm::p32(i);
        pm1.v[0] -= 1;
        x = pm1 - x;  // field.cuh subtraction, x small so the result is near p
    } else if (mode == 1) {
#pragma unroll
        for (int i = 6; i < 12; i++) x.v[i] = 0;
    }
    return x;
}

static const u32 kEdges[][12] = {
    {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},
    {0x00000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},
    {0x00000002, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},
    {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3},  // R mod p (Montgomery one)
    {0xffffaaaa, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea},  // p-1
    {0xffffaaa9, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea},  // p-2
    {0xfffcaaae, 0x43f5ffff, 0xed47fffd, 0x32b7fff2, 0xa2e99d69, 0x07e83a49, 0x8332bb7a, 0xeca8f331, 0xa0f4c069, 0xef148d1e, 0x3eff0206, 0x040ab326},  // -1 (Montgomery)
    {0xffffd555, 0xdcff7fff, 0x58a9ffff, 0x0f55ffff, 0x7b587b12, 0xb3986950, 0x79c2895f, 0xb23ba5c2, 0x21a5d66b, 0x258dd3db, 0x1cbff34d, 0x0d0088f5},  // (p-1)/2
    {0xffffd556, 0xdcff7fff, 0x58a9ffff, 0x0f55ffff, 0x7b587b12, 0xb3986950, 0x79c2895f, 0xb23ba5c2, 0x21a5d66b, 0x258dd3db, 0x1cbff34d, 0x0d0088f5},  // (p+1)/2
    {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x10000000},  // 2^380
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x00000000},  // 2^352-1
    {0xffffaaab, 0xb9fefffe, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea},  // p-2^32
    {0xffffaaaa, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38511bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea},  // p-2^200-1
    {0xffffffff, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  // 2^32-1
    {0xffffffff, 0xffffffff, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  // 2^64-1
    {0x1c341746, 0xf4df1f34, 0x09d104f1, 0x0a76e6a6, 0x4c95b6d5, 0x8de5476c, 0x939d83c0, 0x67eb88a9, 0xb519952d, 0x9a793e85, 0x92cae3aa, 0x11988fe5},  // R^2 mod p
    {0xffffaaa8, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0xb97fe69a, 0x1a0111e9},  // p-3-2^351
    {0x00005554, 0x46010000, 0x4eac0000, 0xe1540001, 0x094f09db, 0x98cf2d5f, 0x0c7aed40, 0x9b88b47b, 0xbcb45328, 0xb4e45849, 0xc6801965, 0x05feee15},  // 2^381-1-p
};
static const int kNumEdges = sizeof(kEdges) / sizeof(kEdges[0]);

// Checks variant V against V0 on n cases: the first nedge^2 are all edge pairs, the rest
// random (every 8th with b == a). Squarings compare V(a) against fp_mul_cios(a, a).
template <int V>
__global__ void check_kernel(u64 seed, u64 n, const fp_t* edges, int nedge, unsigned long long* bad,
                             unsigned long long* first_bad) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride) {
        fp_t a, b;
        if (t < (u64)nedge * nedge) {
            a = edges[t / nedge];
            b = edges[t % nedge];
        } else {
            u64 s = seed ^ (t * 0xd1342543de82ef95ull);
            a = rand_fp(s);
            b = (t & 7) == 0 ? a : rand_fp(s);
        }
        fp_t want, got;
        if (V == K_V0S || V == K_V1 || V == K_V4 || V == K_V5) {
            want = fp_mul_cios(a, a);
            got = apply<V>(a, a);
        } else {
            want = fp_mul_cios(a, b);
            got = apply<V>(a, b);
        }
        if (!(want == got)) {
            atomicAdd(bad, 1ull);
            atomicMin(first_bad, (unsigned long long)t);
        }
    }
}

__global__ void init_kernel(fp_t* buf, u64 n, u64 seed) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride) {
        u64 s = seed ^ (t * 0x9e3779b97f4a7c15ull) ^ 0x5555;
        buf[t] = rand_fp(s);
    }
}

// Each thread: CH independent chains x_c = op(x_c, y), iters times; XOR of the chains stored.
template <int V, int CH>
__global__ void __launch_bounds__(128) bench_kernel(const fp_t* in, fp_t* out, int iters) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nthr = (u64)gridDim.x * blockDim.x;
    const fp_t y = in[tid];
    fp_t x[CH];
#pragma unroll
    for (int c = 0; c < CH; c++) x[c] = in[(c + 1) * nthr + tid];
#pragma unroll 1
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int c = 0; c < CH; c++) {
            if constexpr (V == K_M03) x[c] = (c & 1) ? fp_mul_v3(x[c], y) : fp_mul_cios(x[c], y);
            else if constexpr (V == K_M23) x[c] = (c & 1) ? fp_mul_v3(x[c], y) : fp_mul_v2(x[c], y);
            else x[c] = apply<V>(x[c], y);
        }
    }
    fp_t acc = x[0];
#pragma unroll
    for (int c = 1; c < CH; c++)
#pragma unroll
        for (int i = 0; i < 12; i++) acc.v[i] ^= x[c].v[i];
    out[tid] = acc;
}

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            printf("{\"error\":\"%s\",\"at\":\"%s:%d\"}\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

typedef void (*check_fn)(u64, u64, const fp_t*, int, unsigned long long*, unsigned long long*);
typedef void (*bench_fn)(const fp_t*, fp_t*, int);

template <int V>
static void launch_check(int grid, u64 seed, u64 n, const fp_t* e, int ne, unsigned long long* bad,
                         unsigned long long* fb) {
    check_kernel<V><<<grid, 128>>>(seed, n, e, ne, bad, fb);
}
static void run_check(int v, int grid, u64 seed, u64 n, const fp_t* e, int ne, unsigned long long* bad,
                      unsigned long long* fb) {
    switch (v) {
        case K_V0: launch_check<K_V0>(grid, seed, n, e, ne, bad, fb); break;
        case K_V0S: launch_check<K_V0S>(grid, seed, n, e, ne, bad, fb); break;
        case K_V1: launch_check<K_V1>(grid, seed, n, e, ne, bad, fb); break;
        case K_V2: launch_check<K_V2>(grid, seed, n, e, ne, bad, fb); break;
        case K_V3: launch_check<K_V3>(grid, seed, n, e, ne, bad, fb); break;
        case K_V4: launch_check<K_V4>(grid, seed, n, e, ne, bad, fb); break;
        case K_V5: launch_check<K_V5>(grid, seed, n, e, ne, bad, fb); break;
        case K_M03: launch_check<K_M03>(grid, seed, n, e, ne, bad, fb); break;
        case K_M23: launch_check<K_M23>(grid, seed, n, e, ne, bad, fb); break;
    }
}
template <int CH>
static void run_bench_ch(int v, int grid, const fp_t* in, fp_t* out, int iters) {
    switch (v) {
        case K_V0: bench_kernel<K_V0, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V0S: bench_kernel<K_V0S, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V1: bench_kernel<K_V1, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V2: bench_kernel<K_V2, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V3: bench_kernel<K_V3, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V4: bench_kernel<K_V4, CH><<<grid, 128>>>(in, out, iters); break;
        case K_V5: bench_kernel<K_V5, CH><<<grid, 128>>>(in, out, iters); break;
        case K_M03: bench_kernel<K_M03, CH><<<grid, 128>>>(in, out, iters); break;
        case K_M23: bench_kernel<K_M23, CH><<<grid, 128>>>(in, out, iters); break;
    }
}
template <int CH>
static int occ_ch(int v) {
    int n = 0;
    switch (v) {
        case K_V0: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V0, CH>, 128, 0); break;
        case K_V0S: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V0S, CH>, 128, 0); break;
        case K_V1: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V1, CH>, 128, 0); break;
        case K_V2: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V2, CH>, 128, 0); break;
        case K_V3: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V3, CH>, 128, 0); break;
        case K_V4: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V4, CH>, 128, 0); break;
        case K_V5: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_V5, CH>, 128, 0); break;
        case K_M03: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_M03, CH>, 128, 0); break;
        case K_M23: cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, bench_kernel<K_M23, CH>, 128, 0); break;
    }
    return n;
}
// Resident 128-thread blocks per SM the occupancy calculator allows (register-limited here).
static int occupancy(int v, int ch) { return ch == 2 ? occ_ch<2>(v) : occ_ch<4>(v); }
static int kernel_regs(int v, int ch) {
    cudaFuncAttributes a{};
    const void* f = nullptr;
    if (ch == 2) {
        const void* t[K_COUNT] = {(const void*)bench_kernel<K_V0, 2>, (const void*)bench_kernel<K_V0S, 2>,
                                  (const void*)bench_kernel<K_V1, 2>, (const void*)bench_kernel<K_V2, 2>,
                                  (const void*)bench_kernel<K_V3, 2>, (const void*)bench_kernel<K_V4, 2>,
                                  (const void*)bench_kernel<K_V5, 2>, (const void*)bench_kernel<K_M03, 2>,
                                  (const void*)bench_kernel<K_M23, 2>};
        f = t[v];
    } else {
        const void* t[K_COUNT] = {(const void*)bench_kernel<K_V0, 4>, (const void*)bench_kernel<K_V0S, 4>,
                                  (const void*)bench_kernel<K_V1, 4>, (const void*)bench_kernel<K_V2, 4>,
                                  (const void*)bench_kernel<K_V3, 4>, (const void*)bench_kernel<K_V4, 4>,
                                  (const void*)bench_kernel<K_V5, 4>, (const void*)bench_kernel<K_M03, 4>,
                                  (const void*)bench_kernel<K_M23, 4>};
        f = t[v];
    }
    if (cudaFuncGetAttributes(&a, f) != cudaSuccess) return -1;
    return a.numRegs;
}
static void run_bench(int v, int ch, int grid, const fp_t* in, fp_t* out, int iters) {
    if (ch == 2) run_bench_ch<2>(v, grid, in, out, iters);
    else run_bench_ch<4>(v, grid, in, out, iters);
}

int main(int argc, char** argv) {
    u64 seed = (u64)std::chrono::high_resolution_clock::now().time_since_epoch().count() ^
               ((u64)std::random_device{}() << 32);
    u64 check_n = 1ull << 21;
    int iters = 4096, reps = 5;
    bool quick = false;
    double budget_s = 55.0;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
        if (a == "--seed") seed = strtoull(next(), nullptr, 0);
        else if (a == "--check-n") check_n = strtoull(next(), nullptr, 0);
        else if (a == "--iters") iters = atoi(next());
        else if (a == "--reps") reps = std::max(1, atoi(next()));
        else if (a == "--budget") budget_s = atof(next());
        else if (a == "--quick") quick = true;
        else {
            printf("{\"error\":\"unknown argument %s\",\"usage\":\"fieldmul [--seed N] [--check-n N] [--iters N] [--reps N] [--budget S] [--quick]\"}\n", a.c_str());
            return 2;
        }
    }
    const auto t_start = std::chrono::steady_clock::now();
    auto elapsed = [&]() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int nsm = prop.multiProcessorCount;
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("{\"info\":\"fieldmul\",\"device\":\"%s\",\"sm\":\"%d.%d\",\"sms\":%d,\"clock_khz\":%d,\"seed\":%llu,\"check_n\":%llu,\"iters\":%d,\"reps\":%d}\n",
           prop.name, prop.major, prop.minor, nsm, clock_khz, (unsigned long long)seed,
           (unsigned long long)check_n, iters, reps);
    fflush(stdout);

    // ---------------- correctness on the device ----------------
    fp_t* d_edges;
    unsigned long long *d_bad, *d_first;
    CK(cudaMalloc(&d_edges, sizeof(kEdges)));
    CK(cudaMemcpy(d_edges, kEdges, sizeof(kEdges), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_bad, 8));
    CK(cudaMalloc(&d_first, 8));
    bool ok[K_COUNT];
    const u64 n_total = check_n + (u64)kNumEdges * kNumEdges;
    for (int v = 0; v < K_COUNT; v++) {
        if (v == K_V0) { ok[v] = true; continue; }  // the reference itself
        unsigned long long zero = 0, big = ~0ull, bad = 0, first = 0;
        CK(cudaMemcpy(d_bad, &zero, 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_first, &big, 8, cudaMemcpyHostToDevice));
        run_check(v, nsm * 8, seed + v, n_total, d_edges, kNumEdges, d_bad, d_first);
        cudaError_t e = cudaDeviceSynchronize();
        if (e == cudaSuccess) e = cudaGetLastError();
        if (e != cudaSuccess) {
            printf("{\"check\":\"%s\",\"ok\":false,\"error\":\"%s\"}\n", kName[v], cudaGetErrorString(e));
            ok[v] = false;
            if (e != cudaErrorInvalidValue && e != cudaErrorLaunchOutOfResources) {
                printf("{\"error\":\"sticky CUDA error, stopping\"}\n");
                return 1;
            }
            continue;
        }
        CK(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&first, d_first, 8, cudaMemcpyDeviceToHost));
        ok[v] = bad == 0;
        printf("{\"check\":\"%s\",\"ok\":%s,\"n\":%llu,\"edge_pairs\":%d,\"mismatches\":%llu,\"first_bad\":%lld,\"vs\":\"%s\",\"desc\":\"%s\"}\n",
               kName[v], ok[v] ? "true" : "false", (unsigned long long)n_total, kNumEdges * kNumEdges, bad,
               bad ? (long long)first : -1LL, kSqr[v] ? "V0 a*a" : "V0 a*b", kDesc[v]);
        fflush(stdout);
    }

    // ---------------- timing ----------------
    const int ks_full[3] = {4, 8, 16};
    const int chs_full[2] = {2, 4};
    const int nks = quick ? 1 : 3, nchs = quick ? 1 : 2;
    const int ks_quick[1] = {8}, chs_quick[1] = {2};
    const int* ks = quick ? ks_quick : ks_full;
    const int* chs = quick ? chs_quick : chs_full;
    const u64 max_thr = (u64)nsm * 16 * 128;
    fp_t *d_in, *d_out;
    CK(cudaMalloc(&d_in, sizeof(fp_t) * max_thr * 5));
    CK(cudaMalloc(&d_out, sizeof(fp_t) * max_thr));
    init_kernel<<<nsm * 8, 128>>>(d_in, max_thr * 5, seed);
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    // results[v][ki][ci] = products per second (0 = not run)
    double res[K_COUNT][3][2] = {};
    const int order[K_COUNT] = {K_V0, K_V2, K_V3, K_M03, K_M23, K_V0S, K_V1, K_V4, K_V5};
    for (int oi = 0; oi < K_COUNT; oi++) {
        const int v = order[oi];
        if (!ok[v]) {
            printf("{\"bench\":\"%s\",\"skipped\":\"failed the device check\"}\n", kName[v]);
            continue;
        }
        for (int ki = 0; ki < nks; ki++)
            for (int ci = 0; ci < nchs; ci++) {
                const int grid = nsm * ks[ki], ch = chs[ci];
                if (elapsed() > budget_s) {
                    printf("{\"bench\":\"%s\",\"blocks\":%d,\"chains\":%d,\"skipped\":\"time budget %.0f s spent\"}\n",
                           kName[v], grid, ch, budget_s);
                    continue;
                }
                run_bench(v, ch, grid, d_in, d_out, iters);  // warm-up
                cudaError_t e = cudaDeviceSynchronize();
                if (e == cudaSuccess) e = cudaGetLastError();
                if (e != cudaSuccess) {
                    printf("{\"bench\":\"%s\",\"blocks\":%d,\"chains\":%d,\"error\":\"%s\"}\n", kName[v], grid, ch,
                           cudaGetErrorString(e));
                    if (e != cudaErrorInvalidValue && e != cudaErrorLaunchOutOfResources) return 1;
                    continue;
                }
                std::vector<float> ms;
                for (int r = 0; r < reps; r++) {
                    CK(cudaEventRecord(e0));
                    run_bench(v, ch, grid, d_in, d_out, iters);
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float t;
                    CK(cudaEventElapsedTime(&t, e0, e1));
                    ms.push_back(t);
                }
                std::sort(ms.begin(), ms.end());
                const double med = ms[ms.size() / 2];
                const double prods = (double)grid * 128 * ch * iters;
                const double pps = prods / (med * 1e-3);
                res[v][ki][ci] = pps;
                const int ref = kSqr[v] ? K_V0S : K_V0;
                const double rel = res[ref][ki][ci] > 0 ? pps / res[ref][ki][ci] : 0.0;
                printf("{\"bench\":\"%s\",\"op\":\"%s\",\"blocks\":%d,\"threads\":128,\"blocks_per_sm\":%d,\"resident_blocks_per_sm\":%d,\"kernel_regs\":%d,\"chains\":%d,\"iters\":%d,"
                       "\"products\":%.0f,\"ms_median\":%.4f,\"ms_min\":%.4f,\"ms_max\":%.4f,\"products_per_s\":%.4e,"
                       "\"ns_per_product_per_sm\":%.4f,\"rel_to\":\"%s\",\"rel\":%.4f}\n",
                       kName[v], kSqr[v] ? "sqr" : "mul", grid, ks[ki], occupancy(v, ch), kernel_regs(v, ch), ch, iters, prods, med, ms.front(), ms.back(), pps,
                       med * 1e6 * nsm / prods, kName[ref], rel);
                fflush(stdout);
            }
    }

    // ---------------- summary ----------------
    printf("\nsummary: Gproducts/s (relative to V0 for mul, V0s for sqr), 128-thread blocks, %d iters, median of %d\n",
           iters, reps);
    printf("%-5s %-4s", "var", "op");
    for (int ki = 0; ki < nks; ki++)
        for (int ci = 0; ci < nchs; ci++) printf("  %3dxSM ch%d     ", ks[ki], chs[ci]);
    printf("  check\n");
    for (int oi = 0; oi < K_COUNT; oi++) {
        const int v = order[oi], ref = kSqr[v] ? K_V0S : K_V0;
        printf("%-5s %-4s", kName[v], kSqr[v] ? "sqr" : "mul");
        for (int ki = 0; ki < nks; ki++)
            for (int ci = 0; ci < nchs; ci++) {
                if (res[v][ki][ci] > 0 && res[ref][ki][ci] > 0)
                    printf("  %6.2f (%5.3fx)", res[v][ki][ci] * 1e-9, res[v][ki][ci] / res[ref][ki][ci]);
                else
                    printf("  %-15s", "-");
            }
        printf("  %s\n", v == K_V0 ? "ref" : (ok[v] ? "ok" : "FAIL"));
    }
    printf("total %.1f s\n", elapsed());
    return 0;
}
