// table.cu: one row of a fixed-base window table for the MSM (msm/table.rs). Row k + 1 of
// the table holds 2^(c·sets) times each point of row k, in blst's affine encoding, so that
// an MSM over the table's points needs only `sets` bucket sets instead of one per window:
// the points of window w are read from row w / sets into set w % sets. Built once, when an
// SRS becomes resident; nothing here is on a prove's path.
//
// Thread t takes TABLE_G consecutive points: doubles each `dbls` times in XYZZ, parks X and
// Y in the output and ZZ, ZZZ in local memory, then converts all of them with one inversion
// (Montgomery's trick on d = ZZ·ZZZ: x = X·ZZZ/d, y = Y·ZZ/d). A point at infinity (all
// zero words) stays at infinity and counts as d = 1.
#include "ec.cuh"
#include "inverse.cuh"

#define TABLE_G 16

extern "C" __global__ void table_row_g1(const g1_affine_t* in, g1_affine_t* out, u32 n,
                                        u32 dbls) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u64 b = (u64)t * TABLE_G;
    if (b >= n) return;
    const u32 cnt = (u32)min((u64)n - b, (u64)TABLE_G);
    fp_t zz[TABLE_G], zzz[TABLE_G], pre[TABLE_G];
    fp_t acc = fp_t::one();
    for (u32 k = 0; k < cnt; k++) {
        g1_xyzz_t p = g1_xyzz_t::from_affine(in[b + k]);
        for (u32 j = 0; j < dbls; j++) p = p.dbl();
        pre[k] = acc;
        zz[k] = p.ZZ;
        zzz[k] = p.ZZZ;
        if (p.is_inf()) {
            out[b + k] = {fp_t::zero(), fp_t::zero()};
            continue;
        }
        out[b + k] = {p.X, p.Y};
        acc = fmul(acc, fmul(p.ZZ, p.ZZZ));
    }
    fp_t inv = fp_inverse(acc);
    for (u32 k = cnt; k-- > 0;) {
        if (zz[k].is_zero()) continue;
        const fp_t d_inv = fmul(inv, pre[k]);
        inv = fmul(inv, fmul(zz[k], zzz[k]));
        g1_affine_t q = out[b + k];
        q.x = fmul(q.x, fmul(d_inv, zzz[k]));
        q.y = fmul(q.y, fmul(d_inv, zz[k]));
        out[b + k] = q;
    }
}
