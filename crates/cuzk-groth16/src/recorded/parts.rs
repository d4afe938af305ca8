//! Recording a circuit shape from its [`Parts`]: the prefix and ONE part are recorded, and
//! the whole circuit's [`R1cs`] is built by repeating that part's rows with their columns
//! shifted into each part's variable ranges. A 32 GiB PoRep partition is 571 variables then
//! 18 challenges of one structure; recording all of it took 128.6 s and 7.34 GB of
//! recording on the H200 host, recording one challenge takes 1/18 of the walk, and the
//! copies are memory-bandwidth work.
//!
//! The index map is affine (`sublayout.rs`): in part `j`'s own circuit (the prefix, then
//! sub-circuit `j` alone) a variable below the prefix's count is the prefix's, the same in
//! the whole circuit; one above it sits `j` strides further in the whole circuit; rows
//! likewise. That holds when every part has one structure (its rows depend on the part's
//! position only through the values), as the Groth16 circuits given as parts have: their
//! parameters fix the structure, and each part is the same gadget code over another
//! challenge. It is checked here on the first and the last part, whose recordings must be
//! identical in the parts' own indices; anything else is refused and the caller records the
//! whole circuit. The result is the `R1cs` the whole circuit's recording gives (tests).

use bellperson::Circuit;
use rayon::prelude::*;

use super::{Csr, R1cs, INPUT};
use crate::pool_gate::PoolGate;
use crate::sublayout::{witness_of_prefix, witness_parts, Parts, SubLayout};
use crate::synthesis::SynthesisError;
use crate::witness::Counts;
use crate::{Density, Scalar};

impl R1cs {
    /// The recording of the circuit `parts` describes, made from its prefix and one part,
    /// and the parts' layout. `Ok(None)` when `parts` cannot give its prefix alone
    /// ([`Parts::prefix`]) or has fewer than 2 parts: record the whole circuit instead.
    ///
    /// # Errors
    /// The circuit's own error ([`SynthesisError::Circuit`], [`SynthesisError::Part`]), or
    /// [`SynthesisError::ShapeMismatch`] when the counts do not split into the prefix and
    /// equal parts, the first and the last part differ in structure, or the whole circuit
    /// is too large for the recording's 32-bit indices.
    pub fn record_parts<P: Parts>(parts: &P) -> Result<Option<(R1cs, SubLayout)>, SynthesisError> {
        let n = parts.n_parts();
        if n < 2 {
            return Ok(None);
        }
        let Some(prefix) = witness_of_prefix(parts)? else {
            return Ok(None);
        };
        let prefix = prefix.counts();
        let record = |j: usize| -> Result<R1cs, SynthesisError> {
            R1cs::record(parts.part(j)?).map_err(|e| match e {
                SynthesisError::Circuit { .. } | SynthesisError::Part { .. } => e,
                other => SynthesisError::Part {
                    part: j,
                    reason: other.to_string(),
                },
            })
        };
        let (first, last) = rayon::join(|| record(0), || record(n - 1));
        let (first, last) = (first?, last?);
        let mismatch = |what: String| SynthesisError::ShapeMismatch { what };
        let one = first.counts();
        let stride = (
            one.inputs.checked_sub(prefix.inputs),
            one.aux.checked_sub(prefix.aux),
            one.constraints.checked_sub(prefix.constraints),
        );
        let layout = match stride {
            (Some(inputs), Some(aux), Some(constraints)) if aux > 0 => SubLayout {
                prefix,
                stride: Counts {
                    inputs,
                    aux,
                    constraints,
                },
                n_parts: n,
            },
            _ => {
                return Err(mismatch(format!(
                    "a part of {one} does not start with its prefix of {prefix}"
                )))
            }
        };
        if !same_structure(&first, &last) {
            return Err(mismatch(format!(
                "part {} is not recorded as part 0 is ({} against {one})",
                n - 1,
                last.counts()
            )));
        }
        let total = layout.total();
        if total.inputs >= INPUT as usize || total.aux >= INPUT as usize {
            return Err(mismatch(format!(
                "{total}: column indices need fewer than 2^31"
            )));
        }
        let (a, (b, c)) = rayon::join(
            || repeat_rows(&first.a, &layout),
            || {
                rayon::join(
                    || repeat_rows(&first.b, &layout),
                    || repeat_rows(&first.c, &layout),
                )
            },
        );
        let whole = R1cs {
            id: super::next_id(),
            n_inputs: total.inputs,
            n_aux: total.aux,
            coeffs: first.coeffs.clone(),
            a: a?,
            b: b?,
            c: c?,
            a_aux_density: repeat_bits(&first.a_aux_density, prefix.aux, layout.stride.aux, n),
            b_input_density: repeat_bits(
                &first.b_input_density,
                prefix.inputs,
                layout.stride.inputs,
                n,
            ),
            b_aux_density: repeat_bits(&first.b_aux_density, prefix.aux, layout.stride.aux, n),
        };
        Ok(Some((whole, layout)))
    }
}

/// The shape cache's first call of a circuit given as parts: its recording from the prefix
/// and one part, the layout, and this instance's witness `(inputs, aux)`, part by part.
/// The caller makes the assignment (deferred, or with the products) as later calls do, so
/// a deferred first call never computes a, b, c on the host. `None` when the parts cannot
/// be recorded that way (no prefix, another structure per part, a failure): the caller
/// records the whole circuit, which also reports a failing circuit's own error. The
/// witness takes its turn on the pool at `gate`.
pub(crate) fn record_from_parts<P: Parts>(
    circuit_id: &str,
    parts: &P,
    gate: &PoolGate,
) -> Option<(R1cs, SubLayout, Vec<Scalar>, Vec<Scalar>)> {
    let (r1cs, layout) = match R1cs::record_parts(parts) {
        Ok(Some(made)) => made,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(
                circuit_id,
                "recording the whole circuit, not from parts: {e}"
            );
            return None;
        }
    };
    match witness_parts(&layout, parts, gate) {
        Ok((inputs, aux)) => Some((r1cs, layout, inputs, aux)),
        Err(e) => {
            tracing::warn!(
                circuit_id,
                "recording the whole circuit, the parts' witness failed: {e}"
            );
            None
        }
    }
}

/// Whether two recordings are the same constraint system, coefficient table included.
fn same_structure(x: &R1cs, y: &R1cs) -> bool {
    let csr = |p: &Csr, q: &Csr| p.row_start == q.row_start && p.col == q.col && p.coeff == q.coeff;
    x.counts() == y.counts()
        && x.coeffs == y.coeffs
        && csr(&x.a, &y.a)
        && csr(&x.b, &y.b)
        && csr(&x.c, &y.c)
        && x.a_aux_density == y.a_aux_density
        && x.b_input_density == y.b_input_density
        && x.b_aux_density == y.b_aux_density
}

/// The whole circuit's matrix from one part's recording `m` (the prefix's rows, then the
/// part's): the prefix rows as they are, then the part's rows once per part, part `j`'s
/// own columns moved `j` strides on. Parts are filled in parallel.
fn repeat_rows(m: &Csr, layout: &SubLayout) -> Result<Csr, SynthesisError> {
    let (p, s, n) = (layout.prefix, layout.stride, layout.n_parts);
    let head = m.row_start[p.constraints] as usize;
    let part = m.entries() - head;
    let entries = head as u64 + (n as u64) * (part as u64);
    if entries >= u64::from(u32::MAX) {
        return Err(SynthesisError::ShapeMismatch {
            what: format!("{entries} nonzeros in one matrix: the recording needs fewer than 2^32"),
        });
    }
    let rows = p.constraints + n * s.constraints;
    let mut row_start = vec![0u32; rows + 1];
    let mut col = vec![0u32; entries as usize];
    let mut coeff = vec![0u32; entries as usize];
    row_start[..=p.constraints].copy_from_slice(&m.row_start[..=p.constraints]);
    col[..head].copy_from_slice(&m.col[..head]);
    coeff[..head].copy_from_slice(&m.coeff[..head]);
    let own_rows = &m.row_start[p.constraints + 1..];
    let (own_col, own_coeff) = (&m.col[head..], &m.coeff[head..]);
    // Each part's slices: its rows' ends, its columns and its coefficient ids.
    let blocks = row_start[p.constraints + 1..]
        .par_chunks_mut(s.constraints.max(1))
        .zip(col[head..].par_chunks_mut(part.max(1)))
        .zip(coeff[head..].par_chunks_mut(part.max(1)));
    let shift = |j: usize, c: u32| -> u32 {
        if c & INPUT != 0 {
            let i = (c & !INPUT) as usize;
            match i < p.inputs {
                true => c,
                false => (i + j * s.inputs) as u32 | INPUT,
            }
        } else if (c as usize) < p.aux {
            c
        } else {
            c + (j * s.aux) as u32
        }
    };
    if s.constraints > 0 && part > 0 {
        blocks.enumerate().for_each(|(j, ((ends, cols), coeffs))| {
            let moved = (j * part) as u32;
            for (e, &o) in ends.iter_mut().zip(own_rows) {
                *e = o + moved;
            }
            for (c, &o) in cols.iter_mut().zip(own_col) {
                *c = shift(j, o);
            }
            coeffs.copy_from_slice(own_coeff);
        });
    } else {
        // Parts without rows or without entries: every row end is the prefix's last.
        for (j, ends) in row_start[p.constraints + 1..]
            .chunks_mut(s.constraints.max(1))
            .enumerate()
        {
            for (e, &o) in ends.iter_mut().zip(own_rows) {
                *e = o + (j * part) as u32;
            }
        }
    }
    Ok(Csr {
        row_start,
        col,
        coeff,
    })
}

/// A density over the whole circuit's variables from one part's (`prefix` bits, then the
/// part's `stride`): the prefix's bits, then the part's own bits once per part. A prefix
/// variable's bit is the same in every part's recording (one structure), so the one part's
/// bit is the whole circuit's.
fn repeat_bits(d: &Density, prefix: usize, stride: usize, n: usize) -> Density {
    let mut out = Density::new(prefix + n * stride);
    for i in 0..prefix {
        if d.get(i) {
            out.set(i);
        }
    }
    let own: Vec<usize> = (prefix..prefix + stride).filter(|&i| d.get(i)).collect();
    for j in 0..n {
        for &i in &own {
            out.set(i + j * stride);
        }
    }
    out
}

/// Records `circuit` whole and from `parts`, and says whether the two recordings are the
/// same constraint system (`Ok(None)`) or how they differ; for tests and benchmarks that
/// check a kind's parts against its circuit.
///
/// # Errors
/// As [`R1cs::record`] and [`R1cs::record_parts`]; [`SynthesisError::ShapeMismatch`] when
/// `parts` cannot give its prefix.
pub fn compare_recordings<C: Circuit<Scalar>, P: Parts>(
    circuit: C,
    parts: &P,
) -> Result<Option<String>, SynthesisError> {
    let whole = R1cs::record(circuit)?;
    let Some((from_parts, _)) = R1cs::record_parts(parts)? else {
        return Err(SynthesisError::ShapeMismatch {
            what: "the parts cannot give their prefix alone".into(),
        });
    };
    if same_structure(&whole, &from_parts) {
        return Ok(None);
    }
    let m = |r: &R1cs| {
        format!(
            "{} with {}/{}/{} nonzeros, {} coefficients",
            r.counts(),
            r.a.entries(),
            r.b.entries(),
            r.c.entries(),
            r.coeffs.len()
        )
    };
    Ok(Some(format!(
        "whole: {}; from parts: {}",
        m(&whole),
        m(&from_parts)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::parts::{parted, PARTED_CASES};
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};

    /// The recording made from the prefix and one part is the whole circuit's recording,
    /// matrices, coefficient table and densities, for several part counts, with and
    /// without public inputs in the parts; and it assigns other witnesses as plain
    /// synthesis does. See: #17.
    #[test]
    fn recording_from_parts_is_the_whole_recording() {
        for (lg, parts, inputs) in PARTED_CASES {
            let c = parted(lg, parts, inputs);
            let whole = R1cs::record(c).expect("records");
            let (from_parts, layout) = R1cs::record_parts(&c)
                .expect("records")
                .expect("a circuit of parts");
            assert_eq!(layout.n_parts, parts);
            assert_eq!(layout.total(), whole.counts());
            assert!(
                same_structure(&whole, &from_parts),
                "2^{lg}, {parts} parts: {:?}",
                compare_recordings(c, &c)
            );
            assert_eq!(compare_recordings(c, &c).expect("records"), None);
            let inst = c.with_witness_seed(99);
            let want = crate::synthesize(inst).expect("plain");
            assert_eq!(
                from_parts
                    .assign_parts(&layout, &inst, &PoolGate::new())
                    .expect("parts"),
                want
            );
            assert_eq!(from_parts.assign(inst).expect("whole witness"), want);
        }
    }

    /// Through the shape cache: the first call records from the parts and returns the
    /// plain assignment, as do the later ones (parts in parallel, or the whole witness).
    #[test]
    fn the_cache_records_from_parts_and_assigns_as_plain() {
        use crate::{synthesizer::CachedPath, Synthesizer};
        let c = parted(11, 6, Some(20));
        let (synth, id) = (Synthesizer::default(), "parts-11-6");
        let whole = synth.with_path(CachedPath::Whole);
        for w in [3u64, 4, 5] {
            let inst = c.with_witness_seed(w);
            let want = crate::synthesize(inst).expect("plain");
            let got = synth.synthesize_parts(id, inst, &inst).expect("cached");
            assert_eq!(got, want, "witness {w}");
            let got = whole.synthesize_parts(id, inst, &inst).expect("whole");
            assert_eq!(got, want, "witness {w}");
        }
        assert_eq!(synth.layout(id).map(|l| l.n_parts), Some(6));
    }

    /// A sequential circuit has no parts to record from: the caller records it whole.
    #[test]
    fn a_sequential_circuit_is_not_recorded_from_parts() {
        let c = SyntheticCircuit::with_log_n(10, 5, SyntheticShape::default()).expect("valid");
        assert!(R1cs::record_parts(&c).expect("no error").is_none());
    }
}
