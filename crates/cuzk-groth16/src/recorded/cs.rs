//! The recording constraint system of `recorded.rs`: cuzk's synthesis system plus the
//! A, B, C matrices captured as each constraint is enforced (a child module, for the
//! matrices' private fields).

use super::*;

/// cuzk's [`SynthesisCs`] (witness, a/b/c values, densities, unknown-variable errors)
/// plus the A, B, C matrices captured as each constraint is enforced.
pub(super) struct RecordingCs {
    pub(super) cs: SynthesisCs,
    /// Distinct coefficients; index 0 is ONE.
    pub(super) coeffs: Vec<Scalar>,
    pub(super) coeff_ids: HashMap<[u8; 32], u32>,
    pub(super) a: Csr,
    pub(super) b: Csr,
    pub(super) c: Csr,
}

impl RecordingCs {
    fn coeff_id(&mut self, c: &Scalar) -> u32 {
        let next = self.coeffs.len() as u32;
        let id = *self.coeff_ids.entry(c.to_bytes_le()).or_insert(next);
        if id == next {
            self.coeffs.push(*c);
        }
        id
    }

    /// Appends `lc`'s row to matrix `m` (0, 1, 2: A, B, C): its nonzero terms on allocated
    /// variables (an unknown one is `SynthesisCs`'s error to record).
    fn push_row(&mut self, lc: &LinearCombination<Scalar>, m: usize) {
        let (n_in, n_aux) = (self.cs.n_inputs(), self.cs.n_aux());
        let mut entries: Vec<(u32, u32)> = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if i < n_in && *coeff != Scalar::ZERO {
                entries.push((i as u32 | INPUT, self.coeff_id(coeff)));
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if i < n_aux && *coeff != Scalar::ZERO {
                entries.push((i as u32, self.coeff_id(coeff)));
            }
        }
        let m = match m {
            0 => &mut self.a,
            1 => &mut self.b,
            _ => &mut self.c,
        };
        for (col, coeff) in entries {
            m.col.push(col);
            m.coeff.push(coeff);
        }
        m.row_start.push(m.col.len() as u32);
    }
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, name: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.cs.alloc(name, f)
    }

    fn alloc_input<F, A, AR>(
        &mut self,
        name: A,
        f: F,
    ) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.cs.alloc_input(name, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, name: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        self.push_row(&la, 0);
        self.push_row(&lb, 1);
        self.push_row(&lc, 2);
        self.cs.enforce(name, |_| la, |_| lb, |_| lc);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
