//! The structure of a circuit given as parts ([`Parts`]: a prefix, then sub-circuits of
//! one structure), recorded for parameters from the prefix and one part, and its QAP
//! evaluated part by part on all cores. A 32 GiB PoRep partition's blank circuit is 130M
//! constraints that the whole-circuit recording walks on one thread; here one challenge of
//! the 18 is walked (the first and the last, on two threads, to check that they are the
//! same), and each part's u_k(τ), v_k(τ), w_k(τ) come from that part's terms with rows
//! and variables shifted into its ranges.
//!
//! The shift is the affine layout of `sublayout.rs` (`recorded/parts.rs` builds the
//! prover's recording the same way): in part `j`'s own circuit (the prefix, then
//! sub-circuit `j` alone) a variable below the prefix's count is the prefix's, one above
//! it sits `j` strides further in the whole circuit; rows likewise. The recording here is
//! structure only (the keypair assembly never calls an allocation's value closure), so
//! blank circuits, which have no values, record. The sums are exact field arithmetic in
//! another order, so the QAP, and with it every parameter byte, is what recording the
//! whole circuit gives (tests here and in cuzk-filecoin's testgen).

use bellperson::{Circuit, ConstraintSystem};
use ff::Field;
use rayon::prelude::*;

use super::assembly::{add_term, zeros, Evaluated, KeypairAssembly, Terms, INPUT_TAG};
use super::ParamgenError;
use crate::sublayout::{Parts, SubLayout};
use crate::witness::Counts;
use crate::Scalar;

/// A circuit of parts, recorded: the layout and part 0's recording (the prefix's rows,
/// then sub-circuit 0's).
pub(super) struct PartsRecording {
    pub layout: SubLayout,
    part: KeypairAssembly,
}

impl PartsRecording {
    /// Rows of the whole circuit: its constraints, then bellperson's `input_i · 0 = 0`
    /// row per input.
    pub fn n_rows(&self) -> usize {
        let total = self.layout.total();
        total.constraints + total.inputs
    }

    /// The whole circuit's A, B, C evaluated at the Lagrange coefficients `lagrange`
    /// (at least [`PartsRecording::n_rows`] of them): u, v, w of every variable, the
    /// `input_i · 0 = 0` rows included in A. The three matrices and their parts run as
    /// separate tasks on all cores.
    pub fn evaluate(&self, lagrange: &[Scalar]) -> [Evaluated; 3] {
        let total = self.layout.total();
        let (mut u, (v, w)) = rayon::join(
            || evaluate(&self.part.a, &self.layout, lagrange),
            || {
                rayon::join(
                    || evaluate(&self.part.b, &self.layout, lagrange),
                    || evaluate(&self.part.c, &self.layout, lagrange),
                )
            },
        );
        for (i, acc) in u.inputs.iter_mut().enumerate() {
            *acc += lagrange[total.constraints + i];
        }
        [u, v, w]
    }
}

/// Records `parts` from its prefix and one part. `Ok(None)` when it has fewer than 2
/// parts or cannot give its prefix alone: record the whole circuit instead.
///
/// # Errors
/// [`ParamgenError::Part`] when a part or the prefix cannot be built, the circuit's own
/// errors as for a whole circuit, and [`ParamgenError::PartsMismatch`] when the parts do
/// not make one circuit of the prefix and equal sub-circuits: a part that does not start
/// with the prefix's rows, no private variable per part, or a last part recorded
/// otherwise than the first.
pub(super) fn record_parts<P: Parts>(parts: &P) -> Result<Option<PartsRecording>, ParamgenError> {
    let n = parts.n_parts();
    if n < 2 {
        return Ok(None);
    }
    let part = |j: usize| record(parts.part(j).map_err(ParamgenError::Part)?);
    // Each piece is built on the thread that records it (a part need not be Send).
    let (prefix, (first, last)) = rayon::join(
        || match parts.prefix().map_err(ParamgenError::Part)? {
            Some(prefix) => record(prefix).map(Some),
            None => Ok(None),
        },
        || rayon::join(|| part(0), || part(n - 1)),
    );
    let Some(prefix) = prefix? else {
        return Ok(None);
    };
    let (first, last) = (first?, last?);
    let mismatch = |what: String| Err(ParamgenError::PartsMismatch(what));
    let (p, one) = (counts(&prefix), counts(&first));
    let stride = match (
        one.inputs.checked_sub(p.inputs),
        one.aux.checked_sub(p.aux),
        one.constraints.checked_sub(p.constraints),
    ) {
        (Some(inputs), Some(aux), Some(constraints)) if aux > 0 => Counts {
            inputs,
            aux,
            constraints,
        },
        _ => {
            return mismatch(format!(
                "a part of {one} does not extend its prefix of {p} by a private variable"
            ))
        }
    };
    for (name, pre, part) in [
        ("A", &prefix.a, &first.a),
        ("B", &prefix.b, &first.b),
        ("C", &prefix.c, &first.c),
    ] {
        if !starts_with(part, pre, p.constraints) {
            return mismatch(format!(
                "part 0's {name} does not start with the prefix's {} rows",
                p.constraints
            ));
        }
    }
    if counts(&last) != one || last.a != first.a || last.b != first.b || last.c != first.c {
        return mismatch(format!(
            "part {} is not recorded as part 0 is ({} against {one})",
            n - 1,
            counts(&last)
        ));
    }
    let layout = SubLayout {
        prefix: p,
        stride,
        n_parts: n,
    };
    let total = layout.total();
    let variables = total.inputs as u64 + total.aux as u64;
    if variables >= u64::from(INPUT_TAG) {
        return Err(ParamgenError::TooLarge {
            what: "variables",
            count: variables,
        });
    }
    let rows = total.constraints as u64 + total.inputs as u64;
    if rows >= u64::from(u32::MAX) {
        return Err(ParamgenError::TooLarge {
            what: "constraints",
            count: rows,
        });
    }
    Ok(Some(PartsRecording {
        layout,
        part: first,
    }))
}

/// Runs `circuit` (ONE allocated first) into a keypair assembly that keeps its terms.
fn record<C: Circuit<Scalar>>(circuit: C) -> Result<KeypairAssembly, ParamgenError> {
    let mut cs = KeypairAssembly::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    match cs.error.take() {
        Some(e) => Err(e),
        None => Ok(cs),
    }
}

fn counts(cs: &KeypairAssembly) -> Counts {
    Counts {
        inputs: cs.n_inputs,
        aux: cs.n_aux,
        constraints: cs.n_constraints,
    }
}

/// Whether `part`'s terms on its first `rows` rows are `prefix`'s, coefficients included
/// (codes number the other coefficients in order of appearance, so the prefix's table
/// starts the part's).
fn starts_with(part: &Terms, prefix: &Terms, rows: usize) -> bool {
    let head = part.rows.partition_point(|&r| (r as usize) < rows);
    head == prefix.len()
        && part.rows[..head] == prefix.rows[..]
        && part.vars[..head] == prefix.vars[..]
        && part.codes[..head] == prefix.codes[..]
        && part.other.get(..prefix.other.len()) == Some(&prefix.other[..])
}

/// Σ_rows M[row][k] · lagrange[row] for every variable k of the whole circuit, from part
/// 0's matrix `m`: the prefix's rows once, then part 0's own rows once per part, part j's
/// rows and own variables moved j strides on. Each part adds into its own variables'
/// slices and its own sums of the prefix variables it names; those sums are added up last.
fn evaluate(m: &Terms, layout: &SubLayout, lagrange: &[Scalar]) -> Evaluated {
    let (p, s, n) = (layout.prefix, layout.stride, layout.n_parts);
    let total = layout.total();
    let head = m.rows.partition_point(|&r| (r as usize) < p.constraints);
    let mut inputs = vec![Scalar::ZERO; total.inputs];
    let mut aux = zeros(total.aux);
    let (prefix_inputs, own_inputs) = inputs.split_at_mut(p.inputs);
    let (prefix_aux, own_aux) = aux.split_at_mut(p.aux);
    let own = split_parts(own_inputs, s.inputs, n)
        .into_par_iter()
        .zip(split_parts(own_aux, s.aux, n))
        .enumerate();
    let shared = own
        .map(|(j, (ins, auxs))| {
            // The prefix variables' sums of this part: inputs, then aux.
            let mut shared = vec![Scalar::ZERO; p.inputs + p.aux];
            let moved = j * s.constraints;
            for t in head..m.len() {
                let l = &lagrange[m.rows[t] as usize + moved];
                let var = m.vars[t];
                let acc = match var & INPUT_TAG != 0 {
                    true => match (var & !INPUT_TAG) as usize {
                        i if i < p.inputs => &mut shared[i],
                        i => &mut ins[i - p.inputs],
                    },
                    false => match var as usize {
                        k if k < p.aux => &mut shared[p.inputs + k],
                        k => &mut auxs[k - p.aux],
                    },
                };
                add_term(acc, l, m.codes[t], &m.other);
            }
            shared
        })
        .reduce(
            || vec![Scalar::ZERO; p.inputs + p.aux],
            |mut x, y| {
                x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
                x
            },
        );
    // The prefix's rows name prefix variables only (a row names variables allocated
    // before it).
    for t in 0..head {
        let var = m.vars[t];
        let acc = match var & INPUT_TAG != 0 {
            true => &mut prefix_inputs[(var & !INPUT_TAG) as usize],
            false => &mut prefix_aux[var as usize],
        };
        add_term(acc, &lagrange[m.rows[t] as usize], m.codes[t], &m.other);
    }
    let (shared_inputs, shared_aux) = shared.split_at(p.inputs);
    for (acc, x) in prefix_inputs.iter_mut().zip(shared_inputs) {
        *acc += x;
    }
    for (acc, x) in prefix_aux.iter_mut().zip(shared_aux) {
        *acc += x;
    }
    Evaluated { inputs, aux }
}

/// `n` consecutive slices of `len` (all empty when `len` is 0).
fn split_parts(mut rest: &mut [Scalar], len: usize, n: usize) -> Vec<&mut [Scalar]> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (part, tail) = rest.split_at_mut(len);
        out.push(part);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{generate_parts, generate_with, CpuFixedBase, Qap, ToxicWaste};
    use super::*;
    use crate::synthetic::parts::{parted, PARTED_CASES};
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    use rand_chacha::rand_core::SeedableRng;

    fn tau(seed: u64) -> Scalar {
        Scalar::random(rand_chacha::ChaCha20Rng::seed_from_u64(seed))
    }

    /// The QAP evaluated from the prefix and one part is the whole circuit's, for several
    /// part counts, with and without public inputs in the parts. See: #17.
    #[test]
    fn the_qap_from_parts_is_the_whole_circuits() {
        for (lg, parts, inputs) in PARTED_CASES {
            let c = parted(lg, parts, inputs);
            let whole = Qap::of_circuit(c, tau(lg.into())).expect("whole");
            let from_parts = Qap::of_parts(&c, tau(lg.into()))
                .expect("parts")
                .expect("a circuit of parts");
            assert_eq!(from_parts.n_rows, whole.n_rows, "2^{lg}, {parts} parts");
            assert!(
                from_parts == whole,
                "2^{lg}, {parts} parts: the QAPs differ"
            );
        }
    }

    /// The files made from parts are byte for byte the whole circuit's for one toxic
    /// waste, and every fixed-base product is its own stage.
    #[test]
    fn parameters_from_parts_are_byte_identical() {
        let c = parted(11, 5, Some(24));
        let toxic = ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(8));
        let fb = CpuFixedBase::default();
        let whole = generate_with(c, &toxic, &fb).expect("whole");
        let from_parts = generate_parts(&c, &toxic, &fb, None)
            .expect("parts")
            .expect("a circuit of parts");
        let bytes = |g: &super::super::Generated| {
            let mut b = Vec::new();
            g.srs.write_to(&mut b).expect("writes");
            b
        };
        assert!(bytes(&from_parts) == bytes(&whole), "parameters differ");
        let names: Vec<_> = from_parts.stages.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "synthesis",
                "lagrange",
                "qap",
                "fb_h",
                "fb_a",
                "fb_b_g1",
                "fb_b_g2",
                "fb_l"
            ]
        );
    }

    /// A sequential circuit is not one of parts: the caller generates it whole.
    #[test]
    fn a_sequential_circuit_has_no_parts() {
        let c = SyntheticCircuit::with_log_n(9, 5, SyntheticShape::default()).expect("valid");
        assert!(Qap::of_parts(&c, tau(1)).expect("no error").is_none());
    }

    /// A prefix of one row x·x = y, then parts of `rows[j]` rows over one private
    /// variable each, part j's rows scaled by `scale[j]`; a part's prefix row has
    /// `c·x` in A, c = `part_prefix_coeff`.
    #[derive(Clone)]
    struct Uneven {
        rows: Vec<usize>,
        scale: Vec<u64>,
        part_prefix_coeff: u64,
    }

    struct UnevenPart {
        rows: usize,
        scale: u64,
        part_prefix_coeff: u64,
    }

    impl bellperson::Circuit<Scalar> for UnevenPart {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), bellperson::SynthesisError> {
            let x = cs.alloc_input(|| "x", || Ok(Scalar::ONE))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::ONE))?;
            let c = Scalar::from(self.part_prefix_coeff);
            cs.enforce(|| "c·x·x = y", |lc| lc + (c, x), |lc| lc + x, |lc| lc + y);
            if self.rows > 0 {
                let z = cs.alloc(|| "z", || Ok(Scalar::ONE))?;
                let k = Scalar::from(self.scale);
                for _ in 0..self.rows {
                    cs.enforce(|| "k·z·y = x", |lc| lc + (k, z), |lc| lc + y, |lc| lc + x);
                }
            }
            Ok(())
        }
    }

    impl Parts for Uneven {
        type Part = UnevenPart;

        fn n_parts(&self) -> usize {
            self.rows.len()
        }

        fn part(&self, j: usize) -> Result<UnevenPart, crate::SynthesisError> {
            Ok(UnevenPart {
                rows: self.rows[j],
                scale: self.scale[j],
                part_prefix_coeff: self.part_prefix_coeff,
            })
        }

        fn prefix(&self) -> Result<Option<UnevenPart>, crate::SynthesisError> {
            Ok(Some(UnevenPart {
                rows: 0,
                scale: 0,
                part_prefix_coeff: 1,
            }))
        }
    }

    /// Parts that are not one prefix and equal sub-circuits are refused with the reason,
    /// never evaluated as if they were; equal ones are accepted.
    #[test]
    fn parts_of_other_structures_are_refused() {
        let ok = Uneven {
            rows: vec![3; 4],
            scale: vec![5; 4],
            part_prefix_coeff: 1,
        };
        assert!(Qap::of_parts(&ok, tau(2)).expect("equal parts").is_some());
        let refused = |parts: Uneven, what: &str| match Qap::of_parts(&parts, tau(2)) {
            Err(ParamgenError::PartsMismatch(m)) => assert!(m.contains(what), "{m}"),
            other => panic!("expected a mismatch naming {what:?}, got {other:?}"),
        };
        let mut longer = ok.clone();
        longer.rows[3] = 4;
        refused(longer, "part 3 is not recorded as part 0");
        let mut scaled = ok.clone();
        scaled.scale[3] = 6;
        refused(scaled, "part 3 is not recorded as part 0");
        refused(
            Uneven {
                part_prefix_coeff: 2,
                ..ok.clone()
            },
            "does not start with the prefix",
        );
        refused(
            Uneven {
                rows: vec![0; 4],
                ..ok
            },
            "by a private variable",
        );
    }
}
