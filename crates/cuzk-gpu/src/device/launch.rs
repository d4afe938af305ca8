//! One safe wrapper per kernel of `kernels/*.cu`, and the only kernel-launch `unsafe` of
//! the crate. Each wrapper takes the kernel's arguments typed ([`Buf`] regions, optional
//! regions, `u32`, `u64`, Fr words), checks every region against the bytes the kernel
//! reads or writes through it (computed from the other arguments), and launches on the
//! device's compute stream. The declarations below are the kernels' signatures as Rust
//! sees them; the test `every_kernel_has_one_wrapper_with_its_signature` parses the `.cu`
//! files and fails when a kernel and its wrapper disagree in argument count or kind, or
//! when a kernel has no wrapper (see: issue #19, `ntt_powers` launched with 3 of its 4
//! arguments). What a region holds beyond its size (indices below a count, sorted
//! entries) is the callers' to keep: the kernels check their thread index against the
//! counts they are given, not the data they read.

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::device::arena::DevRegion;
use crate::device::kernels::KernelId;
use crate::device::layout::{Group, FR_BYTES, G1_AFFINE_BYTES};
use crate::device::Device;
use crate::error::{drv, GpuError, Result};

/// How one kernel argument is passed: the Rust parameter, the value pushed, its C kind.
pub(crate) trait KernelArg {
    /// The wrapper's parameter type.
    type Param<'p>;
    /// What is pushed to the launch.
    type Raw: DeviceRepr;
    /// The C parameter kind the `.cu` signature must have: "ptr" for any pointer, else the
    /// type name.
    #[cfg_attr(not(test), allow(dead_code))]
    const C: &'static str;
    /// The value pushed.
    fn raw(p: &Self::Param<'_>) -> Self::Raw;
    /// Bytes behind a region argument (`None`: not a region, or a null one).
    fn bytes(_p: &Self::Param<'_>) -> Option<usize> {
        None
    }
}

/// A device region passed as a pointer.
pub(crate) struct Buf;
/// A device region or null.
pub(crate) struct OptBuf;
/// An Fr element by value (eight little-endian u32 words, Montgomery form).
pub(crate) struct Fr;

impl KernelArg for Buf {
    type Param<'p> = &'p DevRegion<'p>;
    type Raw = u64;
    const C: &'static str = "ptr";
    fn raw(p: &Self::Param<'_>) -> u64 {
        p.ptr()
    }
    fn bytes(p: &Self::Param<'_>) -> Option<usize> {
        Some(p.bytes())
    }
}

impl KernelArg for OptBuf {
    type Param<'p> = Option<&'p DevRegion<'p>>;
    type Raw = u64;
    const C: &'static str = "ptr";
    fn raw(p: &Self::Param<'_>) -> u64 {
        p.map_or(0, |r| r.ptr())
    }
    fn bytes(p: &Self::Param<'_>) -> Option<usize> {
        p.map(|r| r.bytes())
    }
}

impl KernelArg for Fr {
    type Param<'p> = [u32; 8];
    type Raw = [u32; 8];
    const C: &'static str = "fr_t";
    fn raw(p: &[u32; 8]) -> [u32; 8] {
        *p
    }
}

impl KernelArg for u32 {
    type Param<'p> = u32;
    type Raw = u32;
    const C: &'static str = "u32";
    fn raw(p: &u32) -> u32 {
        *p
    }
}

impl KernelArg for u64 {
    type Param<'p> = u64;
    type Raw = u64;
    const C: &'static str = "u64";
    fn raw(p: &u64) -> u64 {
        *p
    }
}

/// One kernel's declaration, for the signature test.
#[cfg(test)]
pub(crate) struct KernelSig {
    /// Its module.
    pub(crate) module: KernelId,
    /// Its name(s): one, or the `_g1` and `_g2` instantiations.
    pub(crate) names: &'static [&'static str],
    /// The C kind of each argument ([`KernelArg::C`]).
    pub(crate) args: &'static [&'static str],
}

/// [`GpuError::Launch`] unless a region argument holds `need` bytes.
fn check_len(
    kernel: &'static str,
    arg: &'static str,
    have: Option<usize>,
    need: usize,
) -> Result<()> {
    match have {
        Some(have) if have < need => Err(GpuError::Launch {
            kernel,
            arg,
            need,
            have,
        }),
        _ => Ok(()),
    }
}

/// The name of a kernel declared once for both groups.
macro_rules! kernel_name {
    ($name:ident) => {
        stringify!($name)
    };
    ($name:ident, $g:ident) => {
        match $g {
            Group::G1 => concat!(stringify!($name), "_g1"),
            Group::G2 => concat!(stringify!($name), "_g2"),
        }
    };
}

/// The names a declaration stands for.
#[cfg(test)]
macro_rules! kernel_names {
    ($name:ident) => {
        &[stringify!($name)]
    };
    ($name:ident, $g:ident) => {
        &[
            concat!(stringify!($name), "_g1"),
            concat!(stringify!($name), "_g2"),
        ]
    };
}

/// Declares the wrappers: `Module name[group](arg: Kind [bytes it needs], ...)`, `[group]`
/// for a kernel instantiated as `name_g1` and `name_g2`, `[bytes]` for a region the
/// kernel reads or writes that many bytes of (an expression over the other arguments).
macro_rules! kernels {
    ($(
        $(#[$doc:meta])*
        $module:ident $name:ident $([$g:ident])? ( $( $arg:ident : $kind:ident $([$need:expr])? ),* $(,)? );
    )*) => {
        $(
            $(#[$doc])*
            #[allow(clippy::too_many_arguments, clippy::needless_lifetimes)]
            pub(crate) fn $name<'p>(
                dev: &Device,
                $($g: Group,)?
                cfg: LaunchConfig,
                $( $arg: <$kind as KernelArg>::Param<'p> ),*
            ) -> Result<()> {
                let name: &'static str = kernel_name!($name $(, $g)?);
                $( $( check_len(name, stringify!($arg), <$kind as KernelArg>::bytes(&$arg), $need)?; )? )*
                let f = dev.function(KernelId::$module, name)?;
                $( let $arg = <$kind as KernelArg>::raw(&$arg); )*
                let stream = dev.compute_stream();
                let mut b = stream.launch_builder(&f);
                $( b.arg(&$arg); )*
                // SAFETY: the arguments follow the kernel's parameter list in its .cu file
                // (kind by kind: every_kernel_has_one_wrapper_with_its_signature), each
                // region holds at least the bytes the kernel touches through it for these
                // counts (checked above), and the kernel checks its thread index against
                // those counts.
                let r = unsafe { b.launch(cfg) };
                drv(dev.ordinal(), || format!("launch {name}"), r.map(|_| ()))
            }
        )*

        /// Every declared kernel, for the signature test.
        #[cfg(test)]
        pub(crate) const SIGNATURES: &[KernelSig] = &[
            $( KernelSig {
                module: KernelId::$module,
                names: kernel_names!($name $(, $g)?),
                args: &[ $( <$kind as KernelArg>::C ),* ],
            }, )*
        ];
    };
}

/// 2^k Fr elements in bytes.
const fn frs(k: u32) -> usize {
    FR_BYTES << k
}

kernels! {
    /// out[i] = factor · base^i for i < count (`ntt.cu`).
    Ntt ntt_powers(out: Buf [count as usize * FR_BYTES], base: Fr, factor: Fr, count: u32);
    /// One decimation-in-frequency pass over levels [r − l, r) of a 2^k transform, its
    /// twists from `tw` (w_r^j, j < 2^r) when given, else from lo/hi; the last pass may
    /// scale (mode 1: by `scale`, 2: by the s_lo/s_hi table) and write `out`.
    Ntt ntt_dif_pass(
        data: Buf [frs(k)], k: u32, r: u32, l: u32, inner: Buf [frs(l) / 2],
        lo: Buf [frs(h)], hi: Buf [frs(k - h)], h: u32, tw: OptBuf [frs(r)], mode: u32, scale: Fr,
        s_lo: OptBuf [frs(h)], s_hi: OptBuf [frs(k - h)], out: OptBuf [frs(k)],
    );
    /// One decimation-in-time pass (as `ntt_dif_pass`, in place).
    Ntt ntt_dit_pass(
        data: Buf [frs(k)], k: u32, r: u32, l: u32, inner: Buf [frs(l) / 2],
        lo: Buf [frs(h)], hi: Buf [frs(k - h)], h: u32, tw: OptBuf [frs(r)], mode: u32, scale: Fr,
        s_lo: OptBuf [frs(h)], s_hi: OptBuf [frs(k - h)],
    );
    /// The bit-reversal permutation of 2^k elements.
    Ntt ntt_bitrev(data: Buf [frs(k)], k: u32);
    /// data[i] *= g^i (or g^bitrev(i)) from the two-level table lo/hi.
    Ntt ntt_coset_scale(
        data: Buf [frs(k)], k: u32, bitreversed: u32, lo: Buf [frs(h)],
        hi: Buf [frs(k - h)], h: u32,
    );
    /// out[i] = (a[i]·b[i] − c[i]) · zinv for i < n.
    Ntt fr_ab_minus_c(
        out: Buf [n as usize * FR_BYTES], a: Buf [n as usize * FR_BYTES],
        b: Buf [n as usize * FR_BYTES], c: Buf [n as usize * FR_BYTES], n: u64, zinv: Fr,
    );
    /// Per block of 1024 scalars: how many are one and how many neither zero nor one.
    Classify classify_count(
        scalars: Buf [n as usize * FR_BYTES], n: u32,
        ones: Buf [(n as usize).div_ceil(1024) * 4], others: Buf [(n as usize).div_ceil(1024) * 4],
    );
    /// Compacts, in order, the indices of the ones and the (index, scalar) pairs of the others.
    Classify classify_scatter(
        scalars: Buf [n as usize * FR_BYTES], n: u32,
        one_off: Buf [(n as usize).div_ceil(1024) * 4], other_off: Buf [(n as usize).div_ceil(1024) * 4],
        one_idx: Buf [n as usize * 4], other_idx: Buf [n as usize * 4],
        other_scalars: Buf [n as usize * FR_BYTES],
    );
    /// out[i] = bases[idx[i]] for i < count (on the device; all n without it), points of w
    /// 16-byte words.
    Classify gather_points(
        bases: Buf, idx: Buf [n as usize * 4], n: u32, count: OptBuf [4], w: u32,
        out: Buf [n as usize * w as usize * 16],
    );
    /// Partial sums of K bases each (through `idx` when given) over the first `count` of n
    /// (on the device; all n without it), ceil(n / K) of them, infinity past the count.
    BatchAdd batch_add[group](
        bases: Buf [if idx.is_none() { n as usize * group.affine_bytes() } else { 0 }],
        idx: OptBuf [n as usize * 4], n: u32, count: OptBuf [4], k: u32,
        out: Buf [(n as usize).div_ceil(k.max(1) as usize).max(1) * group.xyzz_bytes()],
    );
    /// One chunk of a streamed sum: the first `count` of n bases (through `idx` when
    /// given) spread over the `parts` partials `acc` and added to them.
    BatchAdd batch_add_acc[group](
        bases: Buf [if idx.is_none() { n as usize * group.affine_bytes() } else { 0 }],
        idx: OptBuf [n as usize * 4], n: u32, count: OptBuf [4], parts: u32,
        acc: Buf [parts as usize * group.xyzz_bytes()],
    );
    /// scalars[i] times the fixed base of the window table, in affine form, for i < n.
    FixedBase fixed_base[group](
        table: Buf [nwin as usize * (1usize << w.saturating_sub(1)) * group.affine_bytes()],
        w: u32, nwin: u32, scalars: Buf [n as usize * FR_BYTES], n: u32,
        out: Buf [n as usize * group.affine_bytes()],
    );
    /// Montgomery to canonical scalars (eight u32 words each), the first `count` of n (on
    /// the device; all n without it).
    Msm msm_scalars_canonical(
        scalars: Buf [n as usize * FR_BYTES], out: Buf [n as usize * 32], n: u32, count: OptBuf [4],
    );
    /// Counts each (bucket set, bucket) pair of the signed c-bit digits (of the first
    /// `count` of n scalars).
    Msm msm_histogram(
        canon: Buf [n as usize * 32], n: u32, count: OptBuf [4], c: u32, nwin: u32, sets: u32,
        counts: Buf [((sets as usize) << c.saturating_sub(1)) * 4],
    );
    /// The counting sort's scatter: entries sorted by bucket, sign in bit 31.
    Msm msm_scatter(
        canon: Buf [n as usize * 32], n: u32, count: OptBuf [4], c: u32, nwin: u32, sets: u32, stride: u32,
        cursor: Buf [((sets as usize) << c.saturating_sub(1)) * 4],
        sorted: Buf [n as usize * nwin as usize * 4],
    );
    /// Exclusive prefix sum of m words in one block of 1024 threads (total at out[m]).
    Msm scan_exclusive_u32(input: Buf [m as usize * 4], out: Buf [(m as usize + 1) * 4], copy: OptBuf [m as usize * 4], m: u32);
    /// Per tile of 1024 words: its sum.
    Msm scan_tile_sums(input: Buf [m as usize * 4], m: u32, tile_sums: Buf [(m as usize).div_ceil(1024) * 4]);
    /// Per tile: the exclusive scan plus the tile's offset (total at out[m]).
    Msm scan_tile_apply(
        input: Buf [m as usize * 4], m: u32, tile_offs: Buf [(m as usize).div_ceil(1024) * 4],
        out: Buf [(m as usize + 1) * 4], copy: OptBuf [m as usize * 4],
    );
    /// Load-balanced bucket accumulation: the sorted entries spread over `threads` threads
    /// (at least `min_k` each) into m buckets; the buckets crossing threads go to the
    /// first/last partials (one per launched thread).
    Msm msm_accumulate[group](
        bases: Buf, base_idx: OptBuf, sorted: OptBuf, starts: Buf [(m as usize + 1) * 4],
        m: u32, threads: u32, min_k: u32,
        buckets: Buf [m as usize * group.xyzz_bytes()], first: Buf, last: Buf,
    );
    /// Adds the thread partials of the buckets that cross threads.
    Msm msm_fixup[group](
        starts: Buf [(m as usize + 1) * 4], m: u32, threads: u32, min_k: u32,
        first: Buf, last: Buf, buckets: Buf [m as usize * group.xyzz_bytes()],
    );
    /// dst[b] += src[b] for m buckets (a chunk's onto a streamed MSM's accumulators).
    Msm msm_bucket_add[group](
        src: Buf [m as usize * group.xyzz_bytes()], m: u32,
        dst: Buf [m as usize * group.xyzz_bytes()],
    );
    /// Per bucket set, runs of `seg` buckets: Σ (b + 1)·B_b by running sums.
    Msm msm_segments[group](
        buckets: Buf [nwin as usize * nb as usize * group.xyzz_bytes()], nb: u32, nwin: u32,
        seg: u32, partial: Buf [nwin as usize * (nb / seg.max(1)) as usize * group.xyzz_bytes()],
    );
    /// Reduces `rows` rows of len_in points by a factor K.
    Msm sum_groups[group](
        input: Buf [rows as usize * len_in as usize * group.xyzz_bytes()], rows: u32, len_in: u32,
        k: u32, out: Buf [rows as usize * len_in.div_ceil(k.max(1)) as usize * group.xyzz_bytes()],
    );
    /// XYZZ to Jacobian, n points.
    Msm to_jacobian[group](input: Buf [n as usize * group.xyzz_bytes()], out: Buf [n as usize * group.jacobian_bytes()], n: u32);
    /// One row of a G1 window table: each point doubled `dbls` times.
    Table table_row_g1(input: Buf [n as usize * G1_AFFINE_BYTES], out: Buf [n as usize * G1_AFFINE_BYTES], n: u32, dbls: u32);
    /// out[i] = Σ coeffs[coeff[k]]·z[col[k]] over row i's entries, one thread per row of at
    /// most `long_len` entries (longer rows are `sparse_long_rows_fr`'s).
    Sparse sparse_rows_fr(
        row_start: Buf [(n_rows as usize + 1) * 4], col: Buf [nnz as usize * 4],
        coeff: Buf [nnz as usize * 4], coeffs: Buf [n_coeffs as usize * FR_BYTES],
        inputs: Buf [n_inputs as usize * FR_BYTES], aux: Buf [n_aux as usize * FR_BYTES],
        n_rows: u32, nnz: u32, n_coeffs: u32, n_inputs: u32, n_aux: u32, long_len: u32,
        out: Buf [n_rows as usize * FR_BYTES],
    );
    /// The same sum for the listed rows, one warp per row.
    Sparse sparse_long_rows_fr(
        row_start: Buf [(n_rows as usize + 1) * 4], col: Buf [nnz as usize * 4],
        coeff: Buf [nnz as usize * 4], coeffs: Buf [n_coeffs as usize * FR_BYTES],
        inputs: Buf [n_inputs as usize * FR_BYTES], aux: Buf [n_aux as usize * FR_BYTES],
        n_rows: u32, nnz: u32, n_coeffs: u32, n_inputs: u32, n_aux: u32,
        rows: Buf [n_long as usize * 4], n_long: u32, out: Buf [n_rows as usize * FR_BYTES],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `extern "C" __global__` kernels of a `.cu` source: name and argument kinds.
    fn parse_kernels(src: &str) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let mut rest = src;
        while let Some(at) = rest.find("extern \"C\" __global__ void") {
            rest = &rest[at + "extern \"C\" __global__ void".len()..];
            let open = rest.find('(').expect("a kernel has a parameter list");
            let mut head = rest[..open].trim();
            // __launch_bounds__(a, b) comes before the name.
            if head.starts_with("__launch_bounds__") {
                let close = rest.find(')').expect("launch bounds close");
                rest = &rest[close + 1..];
                let open2 = rest.find('(').expect("a kernel has a parameter list");
                head = rest[..open2].trim();
                rest = &rest[open2..];
            } else {
                rest = &rest[open..];
            }
            let close = rest.find(')').expect("parameter list closes");
            let params = &rest[1..close];
            let kinds = params
                .split(',')
                .map(|p| p.trim())
                .filter(|p| !p.is_empty())
                .map(|p| {
                    if p.contains('*') {
                        "ptr".to_string()
                    } else {
                        let words: Vec<&str> =
                            p.split_whitespace().filter(|w| *w != "const").collect();
                        words[..words.len() - 1].join(" ")
                    }
                })
                .collect();
            out.push((head.to_string(), kinds));
        }
        out
    }

    // See: #19 (device.rs launched ntt_powers with 3 of its 4 arguments).
    #[test]
    fn every_kernel_has_one_wrapper_with_its_signature() {
        let mut seen = Vec::new();
        for id in KernelId::ALL {
            for (name, kinds) in parse_kernels(id.source()) {
                let sig = SIGNATURES
                    .iter()
                    .find(|s| s.names.contains(&name.as_str()))
                    .unwrap_or_else(|| panic!("kernel {name} in {}.cu has no wrapper", id.name()));
                assert_eq!(sig.module, id, "{name}: declared in the wrong module");
                assert_eq!(
                    sig.args,
                    kinds.as_slice(),
                    "{name}: arguments differ from the .cu"
                );
                seen.push(name);
            }
        }
        for sig in SIGNATURES {
            for name in sig.names {
                assert!(
                    seen.contains(&name.to_string()),
                    "wrapper {name} has no kernel"
                );
            }
        }
    }

    #[test]
    fn the_parser_sees_a_drifted_signature() {
        let src = "extern \"C\" __global__ void ntt_powers(fr_t* out, fr_t base, u32 count) {}";
        let got = parse_kernels(src);
        assert_eq!(got.len(), 1);
        let sig = SIGNATURES
            .iter()
            .find(|s| s.names == ["ntt_powers"])
            .unwrap();
        assert_ne!(sig.args, got[0].1.as_slice());
    }

    #[test]
    fn a_short_region_is_a_launch_error() {
        let e = check_len("k", "out", Some(10), 11).unwrap_err();
        assert!(matches!(
            e,
            GpuError::Launch {
                kernel: "k",
                arg: "out",
                need: 11,
                have: 10
            }
        ));
        assert!(check_len("k", "out", Some(11), 11).is_ok());
        assert!(check_len("k", "out", None, 11).is_ok());
    }
}
