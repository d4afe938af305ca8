// sparse.cu: the recorded constraint matrices times the witness, out[i] = Σ_k coeffs[coeff[k]]
// · z[col[k]] over row i's entries k (compressed rows, cuzk-groth16's recorded.rs layout): a
// column is aux j as j, input j as j | INPUT_COLUMN, so z = inputs ‖ aux is read from two
// arrays; a coefficient is an index into a small table whose entry 0 is ONE (no product).
// Witness values are mostly bits (synthesis-notes §3), so a zero value adds nothing and a
// one adds the coefficient: most entries cost one Fr addition, not a product.
//
// Load balance: rows of at most `long_len` entries take one thread each (sparse_rows_fr);
// longer rows (SHA-256's MultiEq packs hundreds of terms into one row) are skipped there and
// summed by a whole warp each (sparse_long_rows_fr, from a host-made list of them), so one
// long row does not hold 31 threads of its warp idle for its whole length.
//
// Every index read from memory is checked against the counts passed in, so the kernels stay
// inside their arrays whatever the matrices hold; the host uploads only checked recordings,
// where the checks never fail.
#include "field.cuh"

#define INPUT_COLUMN 0x80000000u

// coeffs[k] · z[c], 0 for an index out of range.
__device__ __forceinline__ fr_t sparse_term(u32 c, u32 k, const fr_t* coeffs, u32 n_coeffs,
                                            const fr_t* inputs, u32 n_inputs, const fr_t* aux,
                                            u32 n_aux) {
    const u32 j = c & ~INPUT_COLUMN;
    const bool is_input = (c & INPUT_COLUMN) != 0;
    if (j >= (is_input ? n_inputs : n_aux) || k >= n_coeffs) return fr_t::zero();
    const fr_t v = is_input ? inputs[j] : aux[j];
    if (v.is_zero()) return fr_t::zero();
    if (k == 0) return v;
    const fr_t w = coeffs[k];
    return v.is_one() ? w : v * w;
}

// One thread per row i < n_rows; rows longer than long_len are left to sparse_long_rows_fr.
extern "C" __global__ void sparse_rows_fr(const u32* row_start, const u32* col, const u32* coeff,
                                          const fr_t* coeffs, const fr_t* inputs, const fr_t* aux,
                                          u32 n_rows, u32 nnz, u32 n_coeffs, u32 n_inputs,
                                          u32 n_aux, u32 long_len, fr_t* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows) return;
    const u32 b = min(row_start[i], nnz), e = min(row_start[i + 1], nnz);
    if (e > b && e - b > long_len) return;
    fr_t acc = fr_t::zero();
    for (u32 k = b; k < e; k++)
        acc = acc + sparse_term(col[k], coeff[k], coeffs, n_coeffs, inputs, n_inputs, aux, n_aux);
    out[i] = acc;
}

// One warp per listed row rows[r], r < n_long: lanes stride over the entries, then a
// shuffle reduction; lane 0 writes.
extern "C" __global__ void sparse_long_rows_fr(const u32* row_start, const u32* col,
                                               const u32* coeff, const fr_t* coeffs,
                                               const fr_t* inputs, const fr_t* aux, u32 n_rows,
                                               u32 nnz, u32 n_coeffs, u32 n_inputs, u32 n_aux,
                                               const u32* rows, u32 n_long, fr_t* out) {
    const u32 r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u32 lane = threadIdx.x & 31;
    // Whole warps leave together: the shuffles below need all 32 lanes.
    if (r >= n_long) return;
    const u32 i = rows[r];
    if (i >= n_rows) return;
    const u32 b = min(row_start[i], nnz), e = min(row_start[i + 1], nnz);
    fr_t acc = fr_t::zero();
    for (u32 k = b + lane; k < e; k += 32)
        acc = acc + sparse_term(col[k], coeff[k], coeffs, n_coeffs, inputs, n_inputs, aux, n_aux);
#pragma unroll
    for (u32 off = 16; off > 0; off >>= 1) {
        fr_t o;
#pragma unroll
        for (int l = 0; l < fr_t::N; l++) o.v[l] = __shfl_down_sync(0xffffffffu, acc.v[l], off);
        acc = acc + o;
    }
    if (lane == 0) out[i] = acc;
}
