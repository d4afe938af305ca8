//! Circuits that are a short shared prefix followed by independent, identically shaped
//! sub-circuits (a PoRep partition: 571 variables, then 18 challenges of 7,231,629 aux
//! each at 32 GiB), and their witness computed part by part on many threads. Owns
//! [`Parts`] (how a caller hands out the parts), [`SubLayout`] (where each part's
//! variables sit in the whole circuit's vectors) and [`witness_parts`]. The recording and
//! the a, b, c products stay in `recorded.rs`.
//!
//! Part `j` is a circuit of its own: the prefix again, then sub-circuit `j` alone. Its
//! variables land at affine places in the whole circuit: the prefix at the start, part
//! `j`'s own aux at `prefix.aux + j·stride.aux` (inputs likewise, `ONE` in the prefix).
//! Every part computes the prefix (its sub-circuit reads the prefix's values), and only
//! part 0 keeps it. That is valid witness-only: no linear combination is ever evaluated,
//! so the part-local variable indices never meet the whole circuit's.

use bellperson::Circuit;
use ff::Field;
use rayon::prelude::*;

use crate::pool_gate::PoolGate;
use crate::synthesis::SynthesisError;
use crate::witness::{Counts, PartCs, Region, WitnessCs};
use crate::Scalar;

/// A circuit given as its parts: part `j` synthesizes the shared prefix and then
/// sub-circuit `j` alone, and the whole circuit is the prefix followed by sub-circuits
/// `0..n_parts()` in order. Parts must not depend on each other's values.
pub trait Parts: Sync {
    /// One part's circuit.
    type Part: Circuit<Scalar>;

    /// Number of sub-circuits.
    fn n_parts(&self) -> usize;

    /// Part `j` (`j < n_parts()`).
    ///
    /// # Errors
    /// [`SynthesisError::Part`] when the part cannot be built.
    fn part(&self, j: usize) -> Result<Self::Part, SynthesisError>;

    /// Part `j` for a witness-only run ([`witness_parts`]): a circuit that allocates
    /// exactly what [`Self::part`] allocates, in the same order with the same values, and
    /// counts as many constraints, but need not build its constraints (its `enforce`
    /// closures are never called). Shapes are always recorded from [`Self::part`]. The
    /// default is [`Self::part`].
    ///
    /// # Errors
    /// [`SynthesisError::Part`] when the part cannot be built.
    fn witness_part(&self, j: usize) -> Result<Self::Part, SynthesisError> {
        self.part(j)
    }

    /// The shared prefix alone, as a circuit, when the caller can build one: it lets a
    /// shape be recorded from the prefix and one part instead of the whole circuit
    /// (`recorded/parts.rs`). `None` (the default): record the whole circuit.
    ///
    /// # Errors
    /// [`SynthesisError::Part`] when the prefix cannot be built.
    fn prefix(&self) -> Result<Option<Self::Part>, SynthesisError> {
        Ok(None)
    }
}

/// Where the parts' variables sit: a prefix, then `n_parts` blocks of `stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubLayout {
    /// The shared prefix (inputs include `ONE`).
    pub prefix: Counts,
    /// One sub-circuit.
    pub stride: Counts,
    /// Number of sub-circuits.
    pub n_parts: usize,
}

impl SubLayout {
    /// The layout of a circuit of `total` counts made of `n_parts` parts, one of which
    /// (prefix and one sub-circuit) counts `one_part`: `stride = (total − one_part) /
    /// (n_parts − 1)`, `prefix = one_part − stride`. `None` when the counts do not split
    /// that way (not an integer stride, a prefix below zero), when there are fewer than 2
    /// parts, or when a sub-circuit has no aux.
    pub fn derive(total: Counts, one_part: Counts, n_parts: usize) -> Option<SubLayout> {
        if n_parts < 2 {
            return None;
        }
        let split = |total: usize, one: usize| -> Option<(usize, usize)> {
            let rest = total.checked_sub(one)?;
            if rest % (n_parts - 1) != 0 {
                return None;
            }
            let stride = rest / (n_parts - 1);
            Some((one.checked_sub(stride)?, stride))
        };
        let (pi, si) = split(total.inputs, one_part.inputs)?;
        let (pa, sa) = split(total.aux, one_part.aux)?;
        let (pc, sc) = split(total.constraints, one_part.constraints)?;
        if sa == 0 || pi == 0 {
            return None;
        }
        let layout = SubLayout {
            prefix: Counts {
                inputs: pi,
                aux: pa,
                constraints: pc,
            },
            stride: Counts {
                inputs: si,
                aux: sa,
                constraints: sc,
            },
            n_parts,
        };
        debug_assert_eq!(layout.total(), total);
        Some(layout)
    }

    /// The whole circuit's counts: `prefix + n_parts · stride`.
    pub fn total(&self) -> Counts {
        let n = self.n_parts;
        Counts {
            inputs: self.prefix.inputs + n * self.stride.inputs,
            aux: self.prefix.aux + n * self.stride.aux,
            constraints: self.prefix.constraints + n * self.stride.constraints,
        }
    }

    /// One part's counts: `prefix + stride`.
    pub fn one_part(&self) -> Counts {
        Counts {
            inputs: self.prefix.inputs + self.stride.inputs,
            aux: self.prefix.aux + self.stride.aux,
            constraints: self.prefix.constraints + self.stride.constraints,
        }
    }
}

/// Runs part `j` witness-only into growing vectors (to derive or check a layout).
pub(crate) fn witness_of_part<P: Parts>(parts: &P, j: usize) -> Result<WitnessCs, SynthesisError> {
    witness_of(parts.part(j)?)
}

/// Runs the prefix alone witness-only, when `parts` can build it ([`Parts::prefix`]).
pub(crate) fn witness_of_prefix<P: Parts>(parts: &P) -> Result<Option<WitnessCs>, SynthesisError> {
    parts.prefix()?.map(witness_of).transpose()
}

fn witness_of<C: Circuit<Scalar>>(circuit: C) -> Result<WitnessCs, SynthesisError> {
    let mut cs = WitnessCs::with_capacity(Counts::default());
    circuit
        .synthesize(&mut cs)
        .map_err(|source| SynthesisError::Circuit {
            n_constraints: cs.constraints,
            source,
        })?;
    Ok(cs)
}

/// The whole circuit's witness `(inputs, aux)`, `ONE` first, computed part by part on the
/// current rayon pool, each part writing straight into its ranges. Callers from outside
/// the pool take it in arrival order through `gate` (`pool_gate.rs`; one per
/// [`crate::Synthesizer`]), a few circuits at a time, so that the oldest finishes first
/// instead of every caller's parts sharing the pool.
///
/// # Errors
/// The first failing part's [`SynthesisError::Circuit`] or [`SynthesisError::Part`], or
/// [`SynthesisError::ShapeMismatch`] when `parts` has another number of parts than the
/// layout or a part allocates other counts than `layout.one_part()`.
pub fn witness_parts<P: Parts>(
    layout: &SubLayout,
    parts: &P,
    gate: &PoolGate,
) -> Result<(Vec<Scalar>, Vec<Scalar>), SynthesisError> {
    if parts.n_parts() != layout.n_parts {
        return Err(SynthesisError::ShapeMismatch {
            what: format!(
                "{} parts against a layout of {}",
                parts.n_parts(),
                layout.n_parts
            ),
        });
    }
    // Before the buffers: a caller waiting for the pool holds no witness memory.
    let _place = gate.enter_pool(layout.n_parts);
    let total = layout.total();
    let zeros = |n: usize| {
        let mut v = Vec::with_capacity(n);
        v.par_extend(rayon::iter::repeat_n(Scalar::ZERO, n));
        v
    };
    let mut inputs = zeros(total.inputs);
    let mut aux = zeros(total.aux);
    inputs[0] = Scalar::ONE; // layout.prefix.inputs ≥ 1: `derive` refuses 0

    let (in_head, in_rest) = inputs.split_at_mut(layout.prefix.inputs);
    let (aux_head, aux_rest) = aux.split_at_mut(layout.prefix.aux);
    let in_own = split_blocks(in_rest, layout.stride.inputs, layout.n_parts);
    let aux_own = split_blocks(aux_rest, layout.stride.aux, layout.n_parts);
    let mut heads = Some((in_head, aux_head));
    let tasks: Vec<_> = in_own
        .into_iter()
        .zip(aux_own)
        .enumerate()
        .map(|(j, (i_own, a_own))| {
            let (i_prefix, a_prefix) = heads.take().unzip();
            let cs = PartCs {
                inputs: Region {
                    prefix: i_prefix,
                    own: i_own,
                    n_prefix: layout.prefix.inputs,
                    next: 1, // ONE
                },
                aux: Region {
                    prefix: a_prefix,
                    own: a_own,
                    n_prefix: layout.prefix.aux,
                    next: 0,
                },
                constraints: 0,
            };
            (j, cs)
        })
        .collect();
    tasks.into_par_iter().with_max_len(1).try_for_each(
        |(j, mut cs)| -> Result<(), SynthesisError> {
            parts
                .witness_part(j)?
                .synthesize(&mut cs)
                .map_err(|source| SynthesisError::Circuit {
                    n_constraints: cs.constraints,
                    source,
                })?;
            let want = layout.one_part();
            if cs.counts() != want {
                return Err(SynthesisError::ShapeMismatch {
                    what: format!("part {j} has {} against {want}", cs.counts()),
                });
            }
            Ok(())
        },
    )?;
    Ok((inputs, aux))
}

/// The first `n · len` values of `v` as `n` consecutive blocks of `len` (`len` may be 0:
/// a sub-circuit without inputs). The caller sized `v` from the same layout.
fn split_blocks(mut v: &mut [Scalar], len: usize, n: usize) -> Vec<&mut [Scalar]> {
    let mut blocks = Vec::with_capacity(n);
    for _ in 0..n {
        let (block, rest) = std::mem::take(&mut v).split_at_mut(len);
        blocks.push(block);
        v = rest;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorded::R1cs;
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::ConstraintSystem;

    /// A prefix (`x` as an input and 3 of its bits), then one sub-circuit per seed: `y =
    /// x·seed`, the input `z = y + j`, `w = y²`, plus `extra` more values in part `extra_in`.
    #[derive(Clone, Debug)]
    struct Toy {
        x: u64,
        seeds: Vec<u64>,
        /// Synthesize only this sub-circuit (a part) instead of all.
        only: Option<usize>,
        /// A sub-circuit that allocates one value more (another shape).
        odd: Option<usize>,
    }

    impl Circuit<Scalar> for Toy {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), bellperson::SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(self.x)))?;
            x.inputize(cs.namespace(|| "x input"))?;
            for i in 0..3 {
                let bit = self.x >> i & 1;
                let b = cs.alloc(|| "bit", || Ok(Scalar::from(bit)))?;
                cs.enforce(|| "boolean", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
            }
            for (j, &seed) in self.seeds.iter().enumerate() {
                if self.only.is_some_and(|o| o != j) {
                    continue;
                }
                let s = Scalar::from(seed);
                let y = AllocatedNum::alloc(cs.namespace(|| "y"), || {
                    x.get_value()
                        .map(|x| x * s)
                        .ok_or(bellperson::SynthesisError::AssignmentMissing)
                })?;
                cs.enforce(
                    || "y = x·seed",
                    |lc| lc + x.get_variable(),
                    |lc| lc + (s, CS::one()),
                    |lc| lc + y.get_variable(),
                );
                let jj = Scalar::from(j as u64);
                let z = cs.alloc_input(
                    || "z",
                    || {
                        y.get_value()
                            .map(|y| y + jj)
                            .ok_or(bellperson::SynthesisError::AssignmentMissing)
                    },
                )?;
                cs.enforce(
                    || "z = y + j",
                    |lc| lc + y.get_variable() + (jj, CS::one()),
                    |lc| lc + CS::one(),
                    |lc| lc + z,
                );
                y.square(cs.namespace(|| "w"))?;
                if self.odd == Some(j) {
                    AllocatedNum::alloc(cs.namespace(|| "odd"), || Ok(s))?;
                }
            }
            Ok(())
        }
    }

    impl Parts for Toy {
        type Part = Toy;

        fn n_parts(&self) -> usize {
            self.seeds.len()
        }

        fn part(&self, j: usize) -> Result<Toy, SynthesisError> {
            Ok(Toy {
                only: Some(j),
                ..self.clone()
            })
        }

        /// No sub-circuit is `usize::MAX`: the prefix alone.
        fn prefix(&self) -> Result<Option<Toy>, SynthesisError> {
            Ok(Some(Toy {
                only: Some(usize::MAX),
                ..self.clone()
            }))
        }
    }

    fn toy(x: u64, n: usize) -> Toy {
        Toy {
            x,
            seeds: (0..n as u64).map(|j| 3 + 7 * j).collect(),
            only: None,
            odd: None,
        }
    }

    /// The parts' witness, with a, b, c from the recording, is the whole circuit's
    /// assignment, for 2, 3 and 17 parts and several instances.
    #[test]
    fn parts_give_the_whole_circuits_assignment() {
        for n in [2usize, 3, 17] {
            let r = R1cs::record(toy(1, n)).expect("records");
            let one = witness_of_part(&toy(1, n), 0).expect("part 0").counts();
            let layout = SubLayout::derive(r.counts(), one, n).expect("splits");
            let prefix = Counts {
                inputs: 2,
                aux: 4,
                constraints: 4,
            };
            let stride = Counts {
                inputs: 1,
                aux: 2,
                constraints: 3,
            };
            assert_eq!(
                (layout.prefix, layout.stride),
                (prefix, stride),
                "{n} parts"
            );
            for x in [5u64, 6, 1 << 40] {
                let want = crate::synthesize(toy(x, n)).expect("synthesizes");
                let got = r
                    .assign_parts(&layout, &toy(x, n), &PoolGate::new())
                    .expect("assigns");
                assert_eq!(got, want, "{n} parts, x = {x}");
            }
        }
    }

    /// Shapes come from `part`, witnesses from `witness_part`.
    struct Witnessed {
        shape: Toy,
        witness: Toy,
    }

    impl Parts for Witnessed {
        type Part = Toy;

        fn n_parts(&self) -> usize {
            self.shape.n_parts()
        }

        fn part(&self, j: usize) -> Result<Toy, SynthesisError> {
            self.shape.part(j)
        }

        fn witness_part(&self, j: usize) -> Result<Toy, SynthesisError> {
            self.witness.part(j)
        }
    }

    /// The parts' witness is computed from `witness_part` (a witness-only mirror of a
    /// part, PoRep's native challenges): parts whose witness parts are another instance
    /// give that instance's assignment over the recorded shape. See: #17.
    #[test]
    fn the_witness_is_computed_from_witness_part() {
        let r = R1cs::record(toy(1, 3)).expect("records");
        let one = witness_of_part(&toy(1, 3), 0).expect("part 0").counts();
        let layout = SubLayout::derive(r.counts(), one, 3).expect("splits");
        let parts = Witnessed {
            shape: toy(1, 3),
            witness: toy(9, 3),
        };
        let got = r
            .assign_parts(&layout, &parts, &PoolGate::new())
            .expect("assigns");
        assert_eq!(got, crate::synthesize(toy(9, 3)).expect("plain"));
    }

    /// A part of another shape, or another number of parts, is refused by name.
    #[test]
    fn a_part_of_another_shape_is_refused() {
        let r = R1cs::record(toy(1, 4)).expect("records");
        let one = witness_of_part(&toy(1, 4), 0).expect("part 0").counts();
        let layout = SubLayout::derive(r.counts(), one, 4).expect("splits");
        let odd = Toy {
            odd: Some(2),
            ..toy(9, 4)
        };
        let err = r
            .assign_parts(&layout, &odd, &PoolGate::new())
            .expect_err("part 2 is longer");
        assert!(err.to_string().contains("part 2 has"), "{err}");
        let err = r
            .assign_parts(&layout, &toy(9, 5), &PoolGate::new())
            .expect_err("5 parts");
        assert!(err.to_string().contains("5 parts against"), "{err}");
    }

    /// The toy's parts are not of one structure (part j's constant `j` sits in a
    /// coefficient): recording it from one part is refused, naming the last part, and the
    /// cache records it whole. (The synthetic circuit's parts are of one structure:
    /// `recorded/parts.rs` tests those.)
    #[test]
    fn parts_of_another_structure_are_not_recorded_from_one() {
        let err = R1cs::record_parts(&toy(1, 4)).expect_err("part 3 differs");
        assert!(
            err.to_string().contains("part 3 is not recorded as part 0"),
            "{err}"
        );
        let (synth, id) = (crate::Synthesizer::default(), "toy-structures");
        for x in [7u64, 8] {
            let got = synth.synthesize_parts(id, toy(x, 4), &toy(x, 4));
            assert_eq!(
                got.expect("cached"),
                crate::synthesize(toy(x, 4)).expect("plain")
            );
        }
        assert_eq!(synth.layout(id).map(|l| l.n_parts), Some(4));
    }

    /// Counts that do not split give no layout.
    #[test]
    fn counts_that_do_not_split_give_no_layout() {
        let c = |inputs, aux, constraints| Counts {
            inputs,
            aux,
            constraints,
        };
        assert_eq!(SubLayout::derive(c(4, 10, 10), c(4, 10, 10), 1), None);
        // (10 − 4) / 2 = 3 aux per part, but 4 − 3 constraints... 11 − 4 = 7 is odd.
        assert_eq!(SubLayout::derive(c(4, 10, 11), c(2, 4, 4), 3), None);
        // A part larger than the whole.
        assert_eq!(SubLayout::derive(c(4, 10, 10), c(2, 11, 4), 3), None);
        let l = SubLayout::derive(c(4, 10, 10), c(2, 4, 4), 3).expect("splits");
        assert_eq!((l.prefix, l.stride), (c(1, 1, 1), c(1, 3, 3)));
        assert_eq!(l.total(), c(4, 10, 10));
    }

    /// Through the cache: the first call records and finds the layout, the next ones take
    /// the parts (or, asked to, the whole circuit) and give the plain assignment.
    #[test]
    fn cached_parts_match_plain_synthesis() {
        use crate::{synthesizer::CachedPath, Synthesizer};
        let (synth, id) = (Synthesizer::default(), "toy-5");
        let whole = synth.with_path(CachedPath::Whole);
        for x in [11u64, 12, 13] {
            let want = crate::synthesize(toy(x, 5)).expect("plain");
            let got = synth.synthesize_parts(id, toy(x, 5), &toy(x, 5));
            assert_eq!(got.expect("cached"), want, "x = {x}");
            let got = whole.synthesize_parts(id, toy(x, 5), &toy(x, 5));
            assert_eq!(got.expect("whole"), want, "x = {x}");
        }
        let l = synth.layout(id).expect("a layout");
        assert_eq!(l.n_parts, 5);
        // Parts that do not give the circuit's witness (another x) are found out at the
        // first call, and the id keeps the whole-circuit witness.
        let id = "toy-lies";
        let got = synth.synthesize_parts(id, toy(11, 5), &toy(12, 5));
        assert_eq!(
            got.expect("cached"),
            crate::synthesize(toy(11, 5)).expect("plain")
        );
        assert_eq!(synth.layout(id), None);
    }
}
