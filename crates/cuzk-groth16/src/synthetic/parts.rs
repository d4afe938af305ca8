//! A [`SyntheticCircuit`] as its prefix and parts (a child module of `synthetic.rs`).

use super::*;

/// One piece of a [`SyntheticCircuit`] given as its [`Parts`]: the prefix, followed by
/// sub-circuit `part` when that is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticPart {
    circuit: SyntheticCircuit,
    part: Option<usize>,
}

impl Circuit<Scalar> for SyntheticPart {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let pieces = self.part.map_or(Pieces::Prefix, Pieces::Part);
        Generator::new(&self.circuit).run(cs, &self.circuit, pieces)
    }
}

/// A circuit of [`SyntheticShape::parts`] ≥ 2 as its prefix and sub-circuits; a sequential
/// one has no parts (`n_parts` 0).
impl Parts for SyntheticCircuit {
    type Part = SyntheticPart;

    fn n_parts(&self) -> usize {
        self.split().parts
    }

    fn part(&self, j: usize) -> Result<SyntheticPart, crate::SynthesisError> {
        if j >= self.n_parts() {
            return Err(crate::SynthesisError::Part {
                part: j,
                reason: format!("a synthetic circuit of {} parts", self.n_parts()),
            });
        }
        Ok(SyntheticPart {
            circuit: *self,
            part: Some(j),
        })
    }

    fn prefix(&self) -> Result<Option<SyntheticPart>, crate::SynthesisError> {
        Ok((self.n_parts() > 0).then_some(SyntheticPart {
            circuit: *self,
            part: None,
        }))
    }
}

/// The (log2 rows, parts, public inputs) cases the recording and parameter tests split
/// with [`parted`]: two to eighteen parts, with and without inputs in the parts.
#[cfg(test)]
pub(crate) const PARTED_CASES: [(u32, usize, Option<usize>); 4] = [
    (10, 2, None),
    (12, 3, Some(40)),
    (12, 18, None),
    (13, 7, Some(64)),
];

/// The circuit the recording and parameter tests split: 2^`lg` rows as `parts` parts, seed
/// 5, `inputs` public inputs (the shape's default when `None`), a quarter of them in B.
#[cfg(test)]
pub(crate) fn parted(lg: u32, parts: usize, inputs: Option<usize>) -> SyntheticCircuit {
    let shape = super::SyntheticShape {
        parts,
        n_inputs: inputs,
        b_input_fraction: 0.25,
        ..super::SyntheticShape::default()
    };
    SyntheticCircuit::with_log_n(lg, 5, shape).expect("valid size")
}
