//! Host preparation of one partition for the GPU backend, done before the compute token is
//! taken: the shape check against the parameters, and writing a, b, c (zero-padded to the
//! domain) and the three density-compacted scalar vectors straight into the worker slot's
//! pinned staging, in the slot's device layout (`slots.rs`). The staging is filled in
//! batches and each batch's upload is enqueued as soon as it is written
//! ([`fill_batched`]), so the copy of one batch overlaps the filling of the next.

use blstrs::Scalar;
use cuzk_groth16::matrices::RowWitness;
use cuzk_groth16::recorded::{Matrix, R1cs};
use cuzk_groth16::{Assignment, Density, Srs};

use crate::backend::slots::SlotShape;
use crate::device::layout::{as_bytes, FR_BYTES};
use crate::error::{GpuError, Result};

/// The slot shape an SRS implies (domain from the H query: n − 1 points).
pub(crate) fn shape_of_srs(srs: &Srs) -> SlotShape {
    SlotShape {
        lg: srs.lg_domain(),
        n_l: srs.lens().l,
        n_a: srs.lens().a,
        n_b: srs.lens().b,
    }
}

/// The slot shape `asg` needs: its domain and the lengths of its L, A and B scalar vectors
/// (inputs and aux in the A and B densities).
pub(crate) fn shape_of_assignment(asg: &Assignment) -> SlotShape {
    let (ni, nx) = (asg.input_assignment.len(), asg.aux_assignment.len());
    SlotShape {
        lg: asg.lg_domain(),
        n_l: nx,
        n_a: ni + asg.a_aux_density.count_ones_in(0..nx),
        n_b: asg.b_input_density.count_ones_in(0..ni) + asg.b_aux_density.count_ones_in(0..nx),
    }
}

/// The shape of `asg`, checked against the parameters.
pub(crate) fn validate(asg: &Assignment, srs: &Srs) -> Result<SlotShape> {
    let lg = asg.lg_domain();
    let n = 1usize << lg;
    let rows = asg.n_rows();
    let (ni, nx) = (asg.input_assignment.len(), asg.aux_assignment.len());
    if let Some(r1cs) = asg.deferred() {
        // a, b, c come from the recording: the witness must be of its counts.
        if r1cs.n_inputs() != ni || r1cs.n_aux() != nx || rows > n {
            return Err(GpuError::Input(format!(
                "a witness of {ni} inputs and {nx} aux for a recording of {} and {}",
                r1cs.n_inputs(),
                r1cs.n_aux()
            )));
        }
    } else if asg.b().len() != rows || asg.c().len() != rows || rows > n {
        return Err(GpuError::Input(format!(
            "a, b, c have {}, {}, {} rows for a domain of {n}",
            rows,
            asg.b().len(),
            asg.c().len()
        )));
    }
    let lens = srs.lens();
    if lens.h > n {
        return Err(GpuError::Input(format!(
            "h query has {} points for a domain of {n}",
            lens.h
        )));
    }
    let shape = shape_of_assignment(asg);
    for (name, got, want) in [
        ("l", shape.n_l, lens.l),
        ("a", shape.n_a, lens.a),
        ("b_g1", shape.n_b, lens.b),
        (
            "b_g2",
            shape.n_b,
            if srs.is_released() {
                lens.b
            } else {
                srs.b_g2.len()
            },
        ),
    ] {
        if got != want {
            return Err(GpuError::Input(format!(
                "{name} query: assignment uses {got} bases, parameters have {want}"
            )));
        }
    }
    Ok(shape)
}

/// Scalars per piece of the parallel fill (2 MiB of scalars).
const PIECE: usize = 1 << 16;

/// Staging bytes filled before their upload is enqueued: the copy of one batch runs while
/// the host fills the next, so preparation and upload overlap instead of adding up (at
/// 2^24 they were ~70 and ~51 ms one after the other).
pub(crate) const UPLOAD_BATCH: usize = 64 << 20;

/// One unit of the parallel fill, writing the staging bytes `[at, at + len)`.
#[derive(Clone, Copy)]
pub(crate) struct Piece<'a> {
    at: usize,
    len: usize,
    what: Fill<'a>,
}

#[derive(Clone, Copy)]
enum Fill<'a> {
    /// The scalars as they are.
    Copy(&'a [Scalar]),
    /// Zeros (the padding of a, b, c to the domain).
    Zero,
    /// The scalars whose bit in the density (from bit `first` on) is set; bits past the
    /// density's length count as unset.
    Compact(&'a [Scalar], &'a Density, usize),
    /// Rows `first..` of a, b or c of a deferred assignment, evaluated from its recorded
    /// matrix and witness as they are written (no host vector in between).
    Rows(Products<'a>, Matrix, usize),
}

/// What the rows of a deferred assignment's a, b, c are evaluated from.
#[derive(Clone, Copy)]
struct Products<'a> {
    r1cs: &'a R1cs,
    z: &'a RowWitness<'a>,
}

impl Piece<'_> {
    /// One past the last staging byte this piece writes.
    fn end(&self) -> usize {
        self.at + self.len
    }

    fn fill(&self, out: &mut [u8]) {
        match self.what {
            Fill::Copy(v) => out.copy_from_slice(as_bytes(v)),
            Fill::Zero => out.fill(0),
            Fill::Rows(p, m, first) => {
                for (i, out) in out.chunks_exact_mut(FR_BYTES).enumerate() {
                    let row = p.r1cs.eval_row(m, first + i, p.z);
                    out.copy_from_slice(as_bytes(std::slice::from_ref(&row)));
                }
            }
            Fill::Compact(v, d, first) => {
                let kept = d.ones_in(first..first + v.len());
                for (out, i) in out.chunks_exact_mut(FR_BYTES).zip(kept) {
                    out.copy_from_slice(as_bytes(std::slice::from_ref(&v[i - first])));
                }
            }
        }
    }
}

/// The pieces writing `parts` (each filtered by its density when given) one after another
/// from staging offset `at`, in order; returns the offset after the last. The set bits of
/// each compacted piece, counted a word at a time, fix where its output goes: at 2^27
/// ~4 M words on this thread. This was the prepare stage's one parallel loop: at e3ff2af a
/// critical lane's call ran outside any pool of its own, and its prepare took 0.3–0.9 s in
/// two of five calls under a PoRep load, likely queued in the process-wide pool behind
/// synthesis (docs/runs/2026-12-06.md).
fn vector_pieces<'a>(
    mut at: usize,
    parts: &[(&'a [Scalar], Option<&'a Density>)],
    out: &mut Vec<Piece<'a>>,
) -> usize {
    for &(v, d) in parts {
        for b in (0..v.len()).step_by(PIECE) {
            let e = (b + PIECE).min(v.len());
            let (what, count) = match d {
                None => (Fill::Copy(&v[b..e]), e - b),
                Some(d) => (Fill::Compact(&v[b..e], d, b), d.count_ones_in(b..e)),
            };
            out.push(Piece {
                at,
                len: count * FR_BYTES,
                what,
            });
            at += count * FR_BYTES;
        }
    }
    at
}

/// The pieces writing rows `0..rows` of matrix `m`'s products from staging offset `at`;
/// returns the offset after the last.
fn row_pieces<'a>(
    mut at: usize,
    rows: usize,
    products: Products<'a>,
    m: Matrix,
    out: &mut Vec<Piece<'a>>,
) -> usize {
    for first in (0..rows).step_by(PIECE) {
        let len = (rows - first).min(PIECE) * FR_BYTES;
        out.push(Piece {
            at,
            len,
            what: Fill::Rows(products, m, first),
        });
        at += len;
    }
    at
}

/// Zero pieces covering `[at, end)`.
fn zero_pieces(mut at: usize, end: usize, out: &mut Vec<Piece<'_>>) {
    while at < end {
        let len = (end - at).min(PIECE * FR_BYTES);
        out.push(Piece {
            at,
            len,
            what: Fill::Zero,
        });
        at += len;
    }
}

/// The pieces of `asg`'s staging in the slot layout of `shape`, in staging order: a, b, c
/// zero-padded to the domain, then the L, A and B scalar vectors compacted by density. A
/// deferred assignment's a, b, c are evaluated row by row from its recording and `rows`
/// ([`R1cs::row_witness`], which checked the witness) as the staging is filled, so the
/// host holds them only in the staging: 12.9 GB less per partition at 2^27 than
/// evaluating them into vectors first and copying those. Without `rows` a deferred
/// assignment's a, b, c get no pieces: the device computes them, and its staging begins
/// at the witness vectors.
pub(crate) fn staging_pieces<'a>(
    shape: &SlotShape,
    asg: &'a Assignment,
    rows: Option<&'a RowWitness<'a>>,
) -> Vec<Piece<'a>> {
    let (lay, _) = shape.layout();
    let mut out = Vec::new();
    for (k, (off, bytes)) in lay[..3].iter().copied().enumerate() {
        let end = match (asg.deferred(), rows) {
            (Some(r1cs), Some(z)) => row_pieces(
                off,
                r1cs.n_rows(),
                Products { r1cs, z },
                Matrix::ALL[k],
                &mut out,
            ),
            (Some(_), None) => continue,
            (None, _) => vector_pieces(off, &[([asg.a(), asg.b(), asg.c()][k], None)], &mut out),
        };
        zero_pieces(end, off + bytes, &mut out);
    }
    let compacted: [&[(&[Scalar], Option<&Density>)]; 3] = [
        &[(&asg.aux_assignment, None)],
        &[
            (&asg.input_assignment, None),
            (&asg.aux_assignment, Some(&asg.a_aux_density)),
        ],
        &[
            (&asg.input_assignment, Some(&asg.b_input_density)),
            (&asg.aux_assignment, Some(&asg.b_aux_density)),
        ],
    ];
    for (parts, (off, _)) in compacted.into_iter().zip(&lay[3..]) {
        vector_pieces(*off, parts, &mut out);
    }
    out
}

/// The pieces (in staging order, none crossing a vector's end) that lie inside `range`,
/// a byte range of the slot layout that starts and ends on vector boundaries.
pub(crate) fn pieces_within<'p, 'a>(
    pieces: &'p [Piece<'a>],
    range: &std::ops::Range<usize>,
) -> &'p [Piece<'a>] {
    let cut = |at: usize| pieces.partition_point(|p| p.end() <= at);
    &pieces[cut(range.start)..cut(range.end)]
}

/// Fills `part`, the bytes `range` of the slot layout, from `pieces` (in staging order,
/// disjoint, inside `range`) in batches of about `batch` bytes, each filled in parallel and
/// then handed to `upload(bytes, offset)`, which enqueues its copy and returns; the next
/// batch is filled while that copy runs. Every byte of `range` is handed over exactly once,
/// the gaps between the vectors included, each batch borrowed for as long as `part` is (an
/// upload scope keeps it until its copy is done).
///
/// # Errors
/// [`GpuError::Input`] if the pieces do not fit `range` or `part`; `upload`'s errors
/// (the batches handed over before it failed may still be in flight).
pub(crate) fn fill_batched<'s>(
    part: &'s mut [u8],
    range: std::ops::Range<usize>,
    pieces: &[Piece<'_>],
    batch: usize,
    mut upload: impl FnMut(&'s [u8], usize) -> Result<()>,
) -> Result<()> {
    use rayon::prelude::*;
    let total = range.end;
    if range.start > total
        || range.len() > part.len()
        || pieces.iter().any(|p| p.at < range.start || p.end() > total)
    {
        return Err(GpuError::Input(
            "slot staging smaller than its layout".into(),
        ));
    }
    let mut rest = &mut part[..range.len()];
    let (mut done, mut i) = (range.start, 0usize);
    while done < total {
        // The pieces of this batch: up to the first that ends `batch` bytes past `done`.
        let mut j = i;
        let mut end = done;
        while j < pieces.len() && end - done < batch {
            end = end.max(pieces[j].end());
            j += 1;
        }
        if j == pieces.len() {
            end = total;
        }
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(end - done);
        {
            let mut outs = Vec::with_capacity(j - i);
            let mut free = &mut mine[..];
            let mut at = done;
            for p in &pieces[i..j] {
                if p.at < at {
                    return Err(GpuError::Input("staging pieces overlap".into()));
                }
                let (_, t) = std::mem::take(&mut free).split_at_mut(p.at - at);
                let (out, t) = t.split_at_mut(p.len);
                outs.push(out);
                free = t;
                at = p.end();
            }
            pieces[i..j]
                .par_iter()
                .zip(outs)
                .for_each(|(p, out)| p.fill(out));
        }
        let mine: &'s [u8] = mine;
        upload(mine, done)?;
        rest = tail;
        done = end;
        i = j;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills a staging of `total` bytes from `pieces` in batches of `batch`, checking that
    /// the batches tile [0, total) in order.
    fn fill(total: usize, pieces: &[Piece<'_>], batch: usize) -> Vec<u8> {
        let mut buf = vec![0xa5u8; total + 7];
        let mut seen = Vec::new();
        let mut next = 0;
        fill_batched(&mut buf, 0..total, pieces, batch, |b, off| {
            assert_eq!(off, next, "batches in order, no gap");
            next = off + b.len();
            seen.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(next, total);
        assert_eq!(&seen[..], &buf[..total]);
        seen
    }

    #[test]
    fn compaction_keeps_density_order() {
        let v: Vec<Scalar> = (0..10u64).map(Scalar::from).collect();
        let mut d = Density::new(0);
        for i in 0..10 {
            d.push(i % 3 == 0);
        }
        assert_eq!(d.count_ones_in(0..10), 4);
        let mut pieces = Vec::new();
        let end = vector_pieces(0, &[(&v[..2], None), (&v, Some(&d))], &mut pieces);
        assert_eq!(end, 6 * FR_BYTES);
        let want: Vec<Scalar> = [0u64, 1, 0, 3, 6, 9]
            .into_iter()
            .map(Scalar::from)
            .collect();
        for batch in [1, FR_BYTES, 1 << 20] {
            assert_eq!(fill(end, &pieces, batch), as_bytes(&want));
        }
    }

    #[test]
    fn compaction_across_pieces_matches_a_plain_filter() {
        let n = 3 * PIECE + 77;
        let v: Vec<Scalar> = (0..n as u64).map(Scalar::from).collect();
        let mut d = Density::new(0);
        for i in 0..n - 5 {
            d.push(i % 7 == 1 || i % 64 == 0);
        }
        let inputs: Vec<Scalar> = (0..5u64).map(|i| Scalar::from(1000 + i)).collect();
        let want: Vec<Scalar> = inputs
            .iter()
            .chain(
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| *i < n - 5 && (i % 7 == 1 || i % 64 == 0))
                    .map(|(_, s)| s),
            )
            .copied()
            .collect();
        let mut pieces = Vec::new();
        let end = vector_pieces(0, &[(&inputs, None), (&v, Some(&d))], &mut pieces);
        assert_eq!(end, want.len() * FR_BYTES);
        for batch in [1000, 1 << 16, UPLOAD_BATCH] {
            assert_eq!(fill(end, &pieces, batch), as_bytes(&want));
        }
    }

    #[test]
    fn staging_matches_the_slot_layout() {
        // 3 rows in a domain of 8, two inputs, five aux with A and B densities.
        let sc = |x: u64| Scalar::from(x);
        let mut asg = Assignment {
            abc: cuzk_groth16::Abc::Evaluated {
                a: (1..4).map(sc).collect(),
                b: (11..14).map(sc).collect(),
                c: (21..24).map(sc).collect(),
            },
            input_assignment: vec![sc(100), sc(101)],
            aux_assignment: (200..205).map(sc).collect(),
            ..Default::default()
        };
        let bits = |b: &[bool]| {
            let mut d = Density::new(0);
            b.iter().for_each(|&x| d.push(x));
            d
        };
        asg.a_aux_density = bits(&[true, false, true, false, false]);
        asg.b_input_density = bits(&[false, true]);
        asg.b_aux_density = bits(&[false, false, false, true, true]);
        let shape = SlotShape {
            lg: 3,
            n_l: 5,
            n_a: 4,
            n_b: 3,
        };
        let (lay, total) = shape.layout();
        let pieces = staging_pieces(&shape, &asg, None);
        for batch in [1, 100, 1 << 20] {
            let got = fill(total, &pieces, batch);
            let at = |v: usize| &got[lay[v].0..lay[v].0 + lay[v].1];
            let pad = |v: &[u64]| {
                let mut x: Vec<Scalar> = v.iter().map(|&x| sc(x)).collect();
                x.resize(8, <Scalar as ff::Field>::ZERO);
                x
            };
            assert_eq!(at(0), as_bytes(&pad(&[1, 2, 3])));
            assert_eq!(at(1), as_bytes(&pad(&[11, 12, 13])));
            assert_eq!(at(2), as_bytes(&pad(&[21, 22, 23])));
            assert_eq!(at(3), as_bytes(&asg.aux_assignment));
            let a: Vec<Scalar> = [100, 101, 200, 202].into_iter().map(sc).collect();
            assert_eq!(at(4), as_bytes(&a));
            let b: Vec<Scalar> = [101, 203, 204].into_iter().map(sc).collect();
            assert_eq!(at(5), as_bytes(&b));
            // In parts (the backend fills a, b, c and the witness one after another): the
            // same bytes.
            let abc_end = lay[3].0;
            let mut buf = vec![0xa5u8; total];
            let mut next = 0;
            for range in [0..abc_end, abc_end..total] {
                let part = pieces_within(&pieces, &range);
                let bytes = &mut buf[range.clone()];
                fill_batched(bytes, range, part, batch, |b, off| {
                    assert_eq!(off, next, "batches in order, no gap");
                    next = off + b.len();
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(next, total);
            assert_eq!(buf, got);
        }
    }

    /// A deferred assignment's staging, its a, b, c evaluated row by row as it is
    /// written, is byte for byte the staging of the same assignment evaluated first, over
    /// several pieces (2^17 rows), with input rows and padding, in any batch size.
    #[test]
    fn a_deferred_staging_equals_the_evaluated_one() {
        use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
        for (lg, seed) in [(8u32, 3u64), (17, 5)] {
            let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default())
                .expect("valid size");
            let r1cs = std::sync::Arc::new(R1cs::record(c).expect("records"));
            let deferred = r1cs
                .assign_deferred(c.with_witness_seed(3))
                .expect("assigns");
            let evaluated = deferred.evaluated().expect("evaluates").into_owned();
            let shape = shape_of_assignment(&deferred);
            let total = shape.layout().1;
            let want = fill(
                total,
                &staging_pieces(&shape, &evaluated, None),
                UPLOAD_BATCH,
            );
            let z = r1cs
                .row_witness(&deferred.input_assignment, &deferred.aux_assignment)
                .expect("a witness of the recording");
            for batch in [4096, UPLOAD_BATCH] {
                let got = fill(total, &staging_pieces(&shape, &deferred, Some(&z)), batch);
                assert!(got == want, "2^{lg}, batches of {batch}");
            }
            // Without the row witness the device computes a, b, c: no pieces before the
            // witness vectors, whose bytes are the same.
            let l = shape.layout().0[3].0;
            let device = staging_pieces(&shape, &deferred, None);
            assert!(device.first().is_some_and(|p| p.at == l), "2^{lg}");
            let got = fill(total, &device, UPLOAD_BATCH);
            assert!(got[l..] == want[l..], "2^{lg}, the witness vectors");
        }
    }

    #[test]
    fn a_staging_too_small_is_an_error() {
        let v: Vec<Scalar> = (0..4u64).map(Scalar::from).collect();
        let mut pieces = Vec::new();
        let end = vector_pieces(0, &[(&v, None)], &mut pieces);
        let mut buf = vec![0u8; end - 1];
        let r = fill_batched(&mut buf, 0..end, &pieces, 64, |_, _| Ok(()));
        assert!(matches!(r, Err(GpuError::Input(_))));
    }
}
