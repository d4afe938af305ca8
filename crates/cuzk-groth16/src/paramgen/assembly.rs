//! The keypair assembly: a constraint system that records the A, B and C matrices of any
//! bellperson circuit as flat (row, variable, coefficient) triples, without calling the
//! circuit's witness closures, and then evaluates the QAP polynomials u_k(τ), v_k(τ),
//! w_k(τ) of every variable k from the Lagrange coefficients L_j(τ):
//! `u_k(τ) = Σ_j A[j][k] · L_j(τ)` (paper: u_i(x) ↔ `u`, v_i ↔ `v`, w_i ↔ `w`).
//!
//! Variables are numbered as bellperson's prover numbers them: inputs first (`ONE` is
//! input 0), then aux variables, each in allocation order, even when the circuit
//! interleaves `alloc_input` with `alloc`.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rayon::prelude::*;

use super::ParamgenError;
use crate::Scalar;

/// Marks an input in a recorded variable id (aux ids are plain).
pub(super) const INPUT_TAG: u32 = 1 << 31;

/// Coefficient codes of the common small coefficients; a code ≥ [`FIRST_OTHER`] is
/// `FIRST_OTHER + i` for `Terms::other[i]`. Most terms of real and synthetic circuits carry
/// ±1 or 2, which then cost 4 bytes instead of a 32-byte scalar, and an addition instead of
/// a product when evaluated.
const CODE_ONE: u32 = 0;
const CODE_MINUS_ONE: u32 = 1;
const CODE_TWO: u32 = 2;
const FIRST_OTHER: u32 = 3;

/// One sparse matrix, row-major as recorded: term t is `coefficient(codes[t])` at
/// (rows[t], vars[t]).
#[derive(Default, PartialEq)]
pub(super) struct Terms {
    pub rows: Vec<u32>,
    pub vars: Vec<u32>,
    pub codes: Vec<u32>,
    /// The coefficients other than 1, −1 and 2, in order of appearance.
    pub other: Vec<Scalar>,
}

impl Terms {
    /// Records one linear combination; a variable that was never allocated is an error.
    fn push_lc(
        &mut self,
        row: u32,
        lc: &LinearCombination<Scalar>,
        n_inputs: usize,
        n_aux: usize,
    ) -> Result<(), ParamgenError> {
        for (&i, coeff) in lc.iter_inputs() {
            if i >= n_inputs {
                return Err(ParamgenError::UnknownVariable {
                    kind: "input",
                    index: i,
                    allocated: n_inputs,
                });
            }
            // i < n_inputs < 2^31 (checked on allocation), so the tag bit is free.
            self.push(row, i as u32 | INPUT_TAG, coeff)?;
        }
        for (&j, coeff) in lc.iter_aux() {
            if j >= n_aux {
                return Err(ParamgenError::UnknownVariable {
                    kind: "aux",
                    index: j,
                    allocated: n_aux,
                });
            }
            self.push(row, j as u32, coeff)?;
        }
        Ok(())
    }

    fn push(&mut self, row: u32, var: u32, coeff: &Scalar) -> Result<(), ParamgenError> {
        let code = if *coeff == Scalar::ONE {
            CODE_ONE
        } else if *coeff == -Scalar::ONE {
            CODE_MINUS_ONE
        } else if *coeff == Scalar::from(2u64) {
            CODE_TWO
        } else if bool::from(coeff.is_zero()) {
            // A zero coefficient adds nothing to any evaluation.
            return Ok(());
        } else {
            let code = u32::try_from(self.other.len())
                .ok()
                .and_then(|i| i.checked_add(FIRST_OTHER))
                .ok_or(ParamgenError::TooLarge {
                    what: "distinct coefficients",
                    count: self.other.len() as u64,
                })?;
            self.other.push(*coeff);
            code
        };
        self.rows.push(row);
        self.vars.push(var);
        self.codes.push(code);
        Ok(())
    }

    /// Number of recorded (nonzero) terms.
    pub fn len(&self) -> usize {
        self.rows.len()
    }
}

/// The recorded circuit.
#[derive(Default)]
pub(super) struct KeypairAssembly {
    /// Public inputs, `ONE` included.
    pub n_inputs: usize,
    /// Private variables.
    pub n_aux: usize,
    /// Constraints enforced so far (without the `input · 0 = 0` rows).
    pub n_constraints: usize,
    /// The A matrix.
    pub a: Terms,
    /// The B matrix.
    pub b: Terms,
    /// The C matrix.
    pub c: Terms,
    /// The first misuse seen (enforce cannot return errors).
    pub error: Option<ParamgenError>,
    /// Where the terms go while synthesizing, if not kept.
    stream: Option<Streaming>,
}

/// A term moved into its variable range's bucket: (row, column − range start, code).
type Entry = (u32, u32, u32);

impl KeypairAssembly {
    /// Appends bellperson's `input_i · 0 = 0` rows, which put every input in the A query.
    pub fn add_input_rows(&mut self) -> Result<(), ParamgenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for i in 0..self.n_inputs {
            let row = self.row_id()?;
            self.a.push(row, i as u32 | INPUT_TAG, &Scalar::ONE)?;
            self.n_constraints += 1;
        }
        Ok(())
    }

    fn row_id(&self) -> Result<u32, ParamgenError> {
        u32::try_from(self.n_constraints)
            .ok()
            .filter(|&r| r < u32::MAX)
            .ok_or(ParamgenError::TooLarge {
                what: "constraints",
                count: self.n_constraints as u64,
            })
    }

    fn check_var_count(&mut self) -> Result<(), ParamgenError> {
        let count = self.n_inputs as u64 + self.n_aux as u64;
        if count >= u64::from(INPUT_TAG) {
            return Err(ParamgenError::TooLarge {
                what: "variables",
                count,
            });
        }
        Ok(())
    }

    /// Evaluates Σ_j M[j][k] · lagrange[j] for every variable k, taking the terms (they
    /// are freed afterwards): the inputs' values, then the aux variables'. Rows must be
    /// `< lagrange.len()`.
    ///
    /// On all cores, without a full transpose: the inputs and the aux variables are split
    /// into ranges (a few per core), the terms are partitioned by range (a parallel
    /// counting sort by range only, keeping recorded order within a range), and each range
    /// accumulates its own terms into its own slice of the result.
    pub fn evaluate(&self, m: Terms, lagrange: &[Scalar]) -> Result<Evaluated, ParamgenError> {
        let (n_inputs, n_aux) = (self.n_inputs, self.n_aux);
        if let Some(&row) = m.rows.par_iter().max() {
            if row as usize >= lagrange.len() {
                return Err(ParamgenError::TooLarge {
                    what: "constraint rows for the domain",
                    count: u64::from(row) + 1,
                });
            }
        }
        let tasks = rayon::current_num_threads() * 4;
        let per_range = (n_inputs + n_aux).div_ceil(tasks).max(1);
        let input_ranges = n_inputs.div_ceil(per_range);
        let n_ranges = input_ranges + n_aux.div_ceil(per_range);
        // (range, index in range) of a recorded variable id: the inputs' ranges first.
        // push_lc refused any id beyond the counts.
        let range_of = |var: u32| -> (usize, u32) {
            match var & INPUT_TAG != 0 {
                true => {
                    let i = (var & !INPUT_TAG) as usize;
                    (i / per_range, (i % per_range) as u32)
                }
                false => {
                    let j = var as usize;
                    (input_ranges + j / per_range, (j % per_range) as u32)
                }
            }
        };
        let per_piece = m.len().div_ceil(tasks).max(1);

        // counts[p][r]: terms of piece p (a run of recorded terms) in variable range r.
        let counts: Vec<Vec<usize>> = m
            .vars
            .par_chunks(per_piece)
            .map(|vars| {
                let mut c = vec![0usize; n_ranges];
                for &v in vars {
                    c[range_of(v).0] += 1;
                }
                c
            })
            .collect();
        // Range-major, piece-minor slots: range r's terms are contiguous, in recorded order.
        let mut entries: Vec<Entry> = vec![(0, 0, 0); m.len()];
        let mut by_piece: Vec<Vec<&mut [Entry]>> = (0..counts.len()).map(|_| Vec::new()).collect();
        let mut by_range: Vec<usize> = vec![0; n_ranges];
        {
            let mut rest: &mut [Entry] = &mut entries;
            for (r, total) in by_range.iter_mut().enumerate() {
                for (p, c) in counts.iter().enumerate() {
                    let (slot, tail) = rest.split_at_mut(c[r]);
                    by_piece[p].push(slot);
                    *total += c[r];
                    rest = tail;
                }
            }
            by_piece
                .into_par_iter()
                .enumerate()
                .for_each(|(p, mut slots)| {
                    let mut next = vec![0usize; n_ranges];
                    let span = p * per_piece..((p + 1) * per_piece).min(m.len());
                    for t in span {
                        let (r, k) = range_of(m.vars[t]);
                        slots[r][next[r]] = (m.rows[t], k, m.codes[t]);
                        next[r] += 1;
                    }
                });
        }
        let Terms { other, .. } = m;
        let mut buckets: Vec<&[Entry]> = Vec::with_capacity(n_ranges);
        let mut rest: &[Entry] = &entries;
        for &len in &by_range {
            let (b, tail) = rest.split_at(len);
            buckets.push(b);
            rest = tail;
        }
        let mut inputs = vec![Scalar::ZERO; n_inputs];
        let mut aux = zeros(n_aux);
        inputs
            .par_chunks_mut(per_range)
            .chain(aux.par_chunks_mut(per_range))
            .zip(buckets)
            .for_each(|(out, bucket)| {
                for &(row, k, code) in bucket {
                    add_term(&mut out[k as usize], &lagrange[row as usize], code, &other);
                }
            });
        Ok(Evaluated { inputs, aux })
    }
}

/// One matrix evaluated at τ: the inputs' values (`ONE` first), then the aux variables'.
#[derive(Debug, Default)]
pub(super) struct Evaluated {
    pub inputs: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

/// `n` zeros, written on all cores (a single-threaded `vec!` of 2^27 scalars takes
/// seconds).
pub(super) fn zeros(n: usize) -> Vec<Scalar> {
    let mut v = Vec::with_capacity(n);
    v.par_extend(rayon::iter::repeat_n(Scalar::ZERO, n));
    v
}

/// `acc += coefficient(code) · l`.
pub(super) fn add_term(acc: &mut Scalar, l: &Scalar, code: u32, other: &[Scalar]) {
    match code {
        CODE_ONE => *acc += l,
        CODE_MINUS_ONE => *acc -= l,
        CODE_TWO => *acc += l.double(),
        c => *acc += *l * other[(c - FIRST_OTHER) as usize],
    }
}

/// Terms per batch sent to a [`Streaming`] evaluator.
const STREAM_BATCH: usize = 1 << 20;

/// Evaluation during synthesis, when the domain is known beforehand: the assembly sends
/// each matrix's terms in batches to its own thread, which adds them into growing
/// per-variable sums, so the QAP evaluation runs beside the (single-threaded) synthesis
/// and the terms are never held whole.
pub(super) struct Streaming {
    sinks: [std::sync::mpsc::SyncSender<Terms>; 3],
}

impl Streaming {
    /// The assembly side of three evaluator threads spawned on `scope`, and their
    /// handles (A, B, C), each returning its matrix's [`Evaluated`] or the first row
    /// outside the domain.
    pub fn spawn<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        lagrange: &'env [Scalar],
    ) -> (
        Streaming,
        [std::thread::ScopedJoinHandle<'scope, Result<Evaluated, u32>>; 3],
    ) {
        let spawn_one = || {
            // A few batches in flight at most: the evaluator is faster than synthesis.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Terms>(4);
            let h = scope.spawn(move || {
                let mut out = Evaluated::default();
                for t in rx {
                    for ((&row, &var), &code) in t.rows.iter().zip(&t.vars).zip(&t.codes) {
                        let l = lagrange.get(row as usize).ok_or(row)?;
                        let (v, k) = match var & INPUT_TAG != 0 {
                            true => (&mut out.inputs, (var & !INPUT_TAG) as usize),
                            false => (&mut out.aux, var as usize),
                        };
                        if k >= v.len() {
                            v.resize((k + 1).max(2 * v.len()), Scalar::ZERO);
                        }
                        add_term(&mut v[k], l, code, &t.other);
                    }
                }
                Ok(out)
            });
            (tx, h)
        };
        let (a, ha) = spawn_one();
        let (b, hb) = spawn_one();
        let (c, hc) = spawn_one();
        (Streaming { sinks: [a, b, c] }, [ha, hb, hc])
    }
}

impl KeypairAssembly {
    /// An assembly that streams its terms to `stream` instead of keeping them.
    pub fn streaming(stream: Streaming) -> KeypairAssembly {
        KeypairAssembly {
            stream: Some(stream),
            ..KeypairAssembly::default()
        }
    }

    /// Sends each matrix's terms once it holds a batch (all of them when `all`); a gone
    /// evaluator is an error.
    pub fn flush(&mut self, all: bool) -> Result<(), ParamgenError> {
        let Some(stream) = &self.stream else {
            return Ok(());
        };
        for (m, sink) in [&mut self.a, &mut self.b, &mut self.c]
            .into_iter()
            .zip(&stream.sinks)
        {
            if m.len() >= STREAM_BATCH || (all && m.len() > 0) {
                sink.send(std::mem::take(m))
                    .map_err(|_| ParamgenError::Evaluator)?;
            }
        }
        Ok(())
    }

    /// Ends the stream: sends the rest and closes the channels, so the evaluators finish.
    pub fn close_stream(&mut self) -> Result<(), ParamgenError> {
        self.flush(true)?;
        self.stream = None;
        Ok(())
    }
}

impl ConstraintSystem<Scalar> for KeypairAssembly {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // No witness here: the value closure is never called (as in bellperson's generator).
        self.n_aux += 1;
        if let Err(e) = self.check_var_count() {
            self.error.get_or_insert(e);
        }
        Ok(Variable(Index::Aux(self.n_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_inputs += 1;
        if let Err(e) = self.check_var_count() {
            self.error.get_or_insert(e);
        }
        Ok(Variable(Index::Input(self.n_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let row = match self.row_id() {
            Ok(row) => row,
            Err(e) => {
                self.error.get_or_insert(e);
                return;
            }
        };
        let (n_in, n_aux) = (self.n_inputs, self.n_aux);
        let recorded = self
            .a
            .push_lc(row, &a(LinearCombination::zero()), n_in, n_aux)
            .and_then(|()| {
                self.b
                    .push_lc(row, &b(LinearCombination::zero()), n_in, n_aux)
            })
            .and_then(|()| {
                self.c
                    .push_lc(row, &c(LinearCombination::zero()), n_in, n_aux)
            });
        if let Err(e) = recorded.and_then(|()| self.flush(false)) {
            self.error.get_or_insert(e);
        }
        self.n_constraints += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// The range-partitioned evaluation equals a plain dense one on a random system with
    /// inputs allocated between aux variables, every coefficient kind (1, −1, 2, 0, any),
    /// repeated terms, and more variables than ranges.
    #[test]
    fn evaluate_matches_dense_sums() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut cs = KeypairAssembly::default();
        let mut vars = vec![cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).expect("alloc")];
        let coeff = |rng: &mut rand_chacha::ChaCha8Rng, i: usize| match i % 5 {
            0 => Scalar::ONE,
            1 => -Scalar::ONE,
            2 => Scalar::from(2u64),
            3 => Scalar::ZERO,
            _ => Scalar::random(&mut *rng),
        };
        // dense[m][row][col]
        let (n_rows, n_cols) = (300usize, 200usize);
        let mut dense = vec![vec![vec![Scalar::ZERO; n_cols]; n_rows]; 3];
        let col_of = |v: &Variable, n_in: usize| match v.get_unchecked() {
            Index::Input(i) => i,
            Index::Aux(j) => n_in + j,
        };
        let mut terms: Vec<(usize, usize, usize, Scalar)> = Vec::new();
        for row in 0..n_rows {
            if vars.len() < n_cols {
                let v = match row % 7 {
                    3 => cs.alloc_input(|| "in", || Ok(Scalar::ONE)),
                    _ => cs.alloc(|| "aux", || Ok(Scalar::ONE)),
                };
                vars.push(v.expect("alloc"));
            }
            let mut lcs = [
                LinearCombination::zero(),
                LinearCombination::zero(),
                LinearCombination::zero(),
            ];
            for (m, lc) in lcs.iter_mut().enumerate() {
                for t in 0..(row + m) % 4 {
                    let v = vars[(row * 31 + t * 17 + m) % vars.len()];
                    let c = coeff(&mut rng, row + t + m);
                    *lc = lc.clone() + (c, v);
                    terms.push((m, row, 0, c));
                    let last = terms.len() - 1;
                    terms[last].2 = vars.iter().position(|x| *x == v).expect("var");
                }
            }
            let [la, lb, lc] = lcs;
            cs.enforce(|| "row", |_| la, |_| lb, |_| lc);
        }
        cs.add_input_rows().expect("rows");
        let n_in = cs.n_inputs;
        for (m, row, var, c) in terms {
            dense[m][row][col_of(&vars[var], n_in)] += c;
        }
        for i in 0..n_in {
            dense[0].push(vec![Scalar::ZERO; n_cols]);
            let row = dense[0].len() - 1;
            dense[0][row][i] = Scalar::ONE;
        }
        let lagrange: Vec<Scalar> = (0..cs.n_constraints)
            .map(|_| Scalar::random(&mut rng))
            .collect();
        let n_vars = cs.n_inputs + cs.n_aux;
        for (m, terms) in [
            std::mem::take(&mut cs.a),
            std::mem::take(&mut cs.b),
            std::mem::take(&mut cs.c),
        ]
        .into_iter()
        .enumerate()
        {
            let got = cs.evaluate(terms, &lagrange).expect("evaluates");
            assert_eq!(got.inputs.len(), cs.n_inputs);
            let got: Vec<Scalar> = got.inputs.into_iter().chain(got.aux).collect();
            assert_eq!(got.len(), n_vars);
            for (k, g) in got.iter().enumerate() {
                let want: Scalar = dense[m]
                    .iter()
                    .enumerate()
                    .map(|(j, row)| row.get(k).copied().unwrap_or(Scalar::ZERO) * lagrange[j])
                    .sum();
                assert_eq!(*g, want, "matrix {m}, column {k}");
            }
        }
    }
}
