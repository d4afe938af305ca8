//! Host preparation of one partition for the GPU backend, done before the compute token is
//! taken: the shape check against the parameters, and writing a, b, c (zero-padded to the
//! domain) and the three density-compacted scalar vectors straight into the worker slot's
//! pinned staging, in the slot's device layout (`slots.rs`), so one copy uploads them.

use blstrs::Scalar;
use cuzk_groth16::{Assignment, Density, Srs};

use crate::error::{GpuError, Result};
use crate::layout::{as_bytes, FR_BYTES};
use crate::slots::{Slot, SlotShape};

/// The slot shape an SRS implies (domain from the H query: n − 1 points).
pub(crate) fn shape_of_srs(srs: &Srs) -> SlotShape {
    SlotShape {
        lg: (srs.h.len() + 1).next_power_of_two().trailing_zeros(),
        n_l: srs.l.len(),
        n_a: srs.a.len(),
        n_b: srs.b_g1.len(),
    }
}

/// Number of set bits among the first `len` of `d`.
pub(crate) fn density_count(d: &Density, len: usize) -> usize {
    if d.len() == len {
        d.count_ones()
    } else {
        (0..len.min(d.len())).filter(|&i| d.get(i)).count()
    }
}

/// The shape of `asg`, checked against the parameters.
pub(crate) fn validate(asg: &Assignment, srs: &Srs) -> Result<SlotShape> {
    let lg = asg.lg_domain();
    let n = 1usize << lg;
    let rows = asg.n_rows();
    if asg.b.len() != rows || asg.c.len() != rows || rows > n {
        return Err(GpuError::Input(format!(
            "a, b, c have {}, {}, {} rows for a domain of {n}",
            rows,
            asg.b.len(),
            asg.c.len()
        )));
    }
    if srs.h.len() > n {
        return Err(GpuError::Input(format!(
            "h query has {} points for a domain of {n}",
            srs.h.len()
        )));
    }
    let (ni, nx) = (asg.input_assignment.len(), asg.aux_assignment.len());
    let shape = SlotShape {
        lg,
        n_l: nx,
        n_a: ni + density_count(&asg.a_aux_density, nx),
        n_b: density_count(&asg.b_input_density, ni) + density_count(&asg.b_aux_density, nx),
    };
    for (name, got, want) in [
        ("l", shape.n_l, srs.l.len()),
        ("a", shape.n_a, srs.a.len()),
        ("b_g1", shape.n_b, srs.b_g1.len()),
        ("b_g2", shape.n_b, srs.b_g2.len()),
    ] {
        if got != want {
            return Err(GpuError::Input(format!(
                "{name} query: assignment uses {got} bases, parameters have {want}"
            )));
        }
    }
    Ok(shape)
}

/// Scalars per piece of [`compact_into`]'s parallel compaction.
const PIECE: usize = 1 << 16;

/// Writes `parts` (each filtered by its density when given; bits past a density's length
/// count as unset) into `dst` as raw scalars, in order. Pieces of [`PIECE`] scalars are
/// counted, then copied, in parallel: one thread compacting the 2^24 aux scalars of a
/// partition took ~140 ms of the GPU backend's host preparation.
pub(crate) fn compact_into(dst: &mut [u8], parts: &[(&[Scalar], Option<&Density>)]) {
    use rayon::prelude::*;
    let bit = |d: &Density, i: usize| i < d.len() && d.words()[i / 64] >> (i % 64) & 1 == 1;
    let pieces: Vec<(usize, usize, usize)> = parts
        .iter()
        .enumerate()
        .flat_map(|(p, (v, _))| {
            (0..v.len())
                .step_by(PIECE)
                .map(move |b| (p, b, (b + PIECE).min(v.len())))
        })
        .collect();
    let counts: Vec<usize> = pieces
        .par_iter()
        .map(|&(p, b, e)| match parts[p].1 {
            None => e - b,
            Some(d) => (b..e).filter(|&i| bit(d, i)).count(),
        })
        .collect();
    let mut outs = Vec::with_capacity(pieces.len());
    let mut rest = dst;
    for c in &counts {
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(c * FR_BYTES);
        outs.push(mine);
        rest = tail;
    }
    pieces
        .into_par_iter()
        .zip(outs)
        .for_each(|((p, b, e), out)| {
            let (v, d) = parts[p];
            match d {
                None => out.copy_from_slice(as_bytes(&v[b..e])),
                Some(d) => {
                    let mut at = 0;
                    for (i, s) in v[b..e].iter().enumerate() {
                        if bit(d, b + i) {
                            out[at..at + FR_BYTES]
                                .copy_from_slice(as_bytes(std::slice::from_ref(s)));
                            at += FR_BYTES;
                        }
                    }
                }
            }
        });
}

/// Fills the slot's pinned staging for `asg`: a, b, c zero-padded to the domain and the
/// three compacted scalar vectors, in the slot layout, the six in parallel.
pub(crate) fn fill_staging(slot: &mut Slot, shape: &SlotShape, asg: &Assignment) -> Result<()> {
    let (lay, total) = shape.layout();
    let buf = slot.staging_mut()?;
    if buf.len() < total {
        return Err(GpuError::Input(
            "slot staging smaller than its layout".into(),
        ));
    }
    let mut rest = &mut buf[..total];
    let mut parts: Vec<&mut [u8]> = Vec::with_capacity(6);
    let mut at = 0;
    for (off, bytes) in lay {
        let (_, tail) = rest.split_at_mut(off - at);
        let (mine, tail) = tail.split_at_mut(bytes);
        parts.push(mine);
        rest = tail;
        at = off + bytes;
    }
    let [pa, pb, pc, pl, psa, psb]: [&mut [u8]; 6] = parts
        .try_into()
        .map_err(|_| GpuError::Input("six slot vectors".into()))?;
    let evals = |dst: &mut [u8], v: &[Scalar]| {
        let src = as_bytes(v);
        crate::residency::copy_parallel(&mut dst[..src.len()], src);
        dst[src.len()..].fill(0);
    };
    rayon::scope(|s| {
        s.spawn(|_| evals(pa, &asg.a));
        s.spawn(|_| evals(pb, &asg.b));
        s.spawn(|_| evals(pc, &asg.c));
        s.spawn(|_| compact_into(pl, &[(&asg.aux_assignment, None)]));
        s.spawn(|_| {
            compact_into(
                psa,
                &[
                    (&asg.input_assignment, None),
                    (&asg.aux_assignment, Some(&asg.a_aux_density)),
                ],
            )
        });
        s.spawn(|_| {
            compact_into(
                psb,
                &[
                    (&asg.input_assignment, Some(&asg.b_input_density)),
                    (&asg.aux_assignment, Some(&asg.b_aux_density)),
                ],
            )
        });
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_density_order() {
        let v: Vec<Scalar> = (0..10u64).map(Scalar::from).collect();
        let mut d = Density::new(0);
        for i in 0..10 {
            d.push(i % 3 == 0);
        }
        assert_eq!(density_count(&d, 10), 4);
        let mut out = vec![0u8; 6 * FR_BYTES];
        compact_into(&mut out, &[(&v[..2], None), (&v, Some(&d))]);
        let want: Vec<Scalar> = [0u64, 1, 0, 3, 6, 9]
            .into_iter()
            .map(Scalar::from)
            .collect();
        assert_eq!(out, as_bytes(&want));
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
        let mut out = vec![0u8; want.len() * FR_BYTES];
        compact_into(&mut out, &[(&inputs, None), (&v, Some(&d))]);
        assert_eq!(out, as_bytes(&want));
    }
}
