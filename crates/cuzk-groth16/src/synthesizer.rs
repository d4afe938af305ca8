//! [`Synthesizer`]: how partitions are synthesized, as a value the engine builds from its
//! config and passes to every synthesis. It holds the cache of recorded circuit shapes
//! behind [`Synthesizer::synthesize`] and [`Synthesizer::synthesize_parts`] (one [`R1cs`]
//! per circuit id, made by the first call of the id, whose assignment is the recording
//! run's own; kept within the synthesizer's byte budget; for circuits given as [`Parts`],
//! the [`SubLayout`] found by the same first call), the [`PoolGate`] that lets circuits
//! given as parts onto the rayon pool in arrival order, whether assignments of recorded
//! shapes are deferred (a, b, c left to the backend,
//! [`Abc::Deferred`](crate::Abc::Deferred)) and which way it synthesizes
//! ([`CachedPath`]). Two synthesizers made by [`Synthesizer::new`] share nothing, so two
//! engines in one process keep their own shapes and budgets; the views
//! [`Synthesizer::with_defer`] and [`Synthesizer::with_path`] share their original's
//! cache and gate. The recording itself and the witness-only paths live in `recorded.rs`
//! and `sublayout.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bellperson::Circuit;
use parking_lot::Mutex;

use crate::pool_gate::PoolGate;
use crate::recorded::R1cs;
use crate::sublayout::{witness_of_part, witness_parts, Parts, SubLayout};
use crate::synthesis::SynthesisError;
use crate::witness::Counts;
use crate::{Assignment, Scalar};

/// The default recording budget: 16 GiB, enough for the largest Filecoin partition
/// (~130M constraints, ~10 GB recorded).
pub const DEFAULT_BUDGET: u64 = 16 << 30;

/// Which way a [`Synthesizer`] synthesizes (benchmarks and tests compare the paths on the
/// same request, [`Synthesizer::with_path`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CachedPath {
    /// Plain synthesis, the cache untouched.
    Plain,
    /// The recording, the witness of the whole circuit on the calling thread.
    Whole,
    /// The recording, the witness part by part in parallel when the circuit came as parts
    /// (else as `Whole`).
    #[default]
    Parts,
}

/// How circuits are synthesized: a recorded-shape cache with its byte budget, a pool gate,
/// deferral and a path. Cheap to clone: a clone is the same synthesizer (same cache, same
/// gate). Build one per engine from its config ([`Synthesizer::new`]); a per-call
/// variation is a view ([`Synthesizer::with_defer`], [`Synthesizer::with_path`]), never
/// thread state.
#[derive(Clone)]
pub struct Synthesizer {
    shared: Arc<Shared>,
    /// Whether assignments of recorded shapes leave a, b, c to the backend.
    defer: bool,
    path: CachedPath,
}

/// What a synthesizer and its views share.
struct Shared {
    shapes: ShapeCache,
    /// Host bytes recordings may take (0: never record).
    budget_bytes: u64,
    gate: PoolGate,
}

impl Synthesizer {
    /// A synthesizer whose recordings may take `budget_bytes` of host memory (0: never
    /// record, every call synthesizes the plain way), with an empty cache and gate of its
    /// own, deferral off and the [`CachedPath::Parts`] path.
    pub fn new(budget_bytes: u64) -> Synthesizer {
        Synthesizer {
            shared: Arc::new(Shared {
                shapes: ShapeCache::default(),
                budget_bytes,
                gate: PoolGate::new(),
            }),
            defer: false,
            path: CachedPath::Parts,
        }
    }

    /// This synthesizer returning deferred assignments (a, b, c left to the backend,
    /// [`Abc::Deferred`](crate::Abc::Deferred)) for recorded shapes when `on`, or
    /// evaluated ones; it shares this one's cache and gate. Off for [`Synthesizer::new`]:
    /// a caller that reads a, b, c itself gets them. Every `Backend` takes either (the CPU
    /// backend evaluates the products, the GPU backend on the device); the engine turns
    /// it on.
    pub fn with_defer(&self, on: bool) -> Synthesizer {
        Synthesizer {
            defer: on,
            ..self.clone()
        }
    }

    /// This synthesizer taking `path`; it shares this one's cache and gate.
    pub fn with_path(&self, path: CachedPath) -> Synthesizer {
        Synthesizer {
            path,
            ..self.clone()
        }
    }

    /// Whether assignments of recorded shapes are deferred (the engine's admission
    /// estimates a partition's host bytes from it).
    pub fn defers(&self) -> bool {
        self.defer
    }

    /// The path this synthesizer takes.
    pub fn path(&self) -> CachedPath {
        self.path
    }

    /// Whether recordings may be made (the budget is not 0).
    pub fn recording_on(&self) -> bool {
        self.shared.budget_bytes > 0
    }

    /// Host bytes held by this synthesizer's recordings.
    pub fn recorded_bytes(&self) -> u64 {
        self.shared.shapes.bytes.load(Ordering::Relaxed)
    }

    /// Whether `circuit_id`'s shape is recorded and kept.
    pub fn is_recorded(&self, circuit_id: &str) -> bool {
        self.recorded(circuit_id).is_some()
    }

    /// The recorded shape of `circuit_id`, if recorded and kept: what a backend may load
    /// ahead of the first prove (the GPU backend's matrices).
    pub fn recorded(&self, circuit_id: &str) -> Option<Arc<R1cs>> {
        let slot = self.shared.shapes.get(circuit_id)?;
        Some(slot.shape.get()?.as_ref()?.r1cs.clone())
    }

    /// The parts layout found for `circuit_id`, if its shape is recorded and came as parts.
    pub fn layout(&self, circuit_id: &str) -> Option<SubLayout> {
        let slot = self.shared.shapes.get(circuit_id)?;
        slot.shape.get()?.as_ref()?.layout
    }

    /// [`crate::synthesize`] through the recording of `circuit_id`'s shape: the first call
    /// for an id records it (when the budget allows), later calls only run the witness and
    /// the parallel products. An instance that does not match its id's recording, or an id
    /// whose recording failed or did not fit, is synthesized the plain way. Same result
    /// either way.
    ///
    /// # Errors
    /// As [`crate::synthesize`].
    pub fn synthesize<C: Circuit<Scalar> + Clone>(
        &self,
        circuit_id: &str,
        circuit: C,
    ) -> Result<Assignment, SynthesisError> {
        self.cached(circuit_id, circuit, None::<&NoParts>)
    }

    /// [`Synthesizer::synthesize`] for a circuit that is also given as its [`Parts`]: once
    /// the shape is recorded, later calls compute the witness part by part on the current
    /// rayon pool, through this synthesizer's gate. The first call records the shape from
    /// the prefix and one part when the parts can give their prefix and are of one
    /// structure ([`R1cs::record_parts`], `recorded/parts.rs`), its own witness already
    /// part by part; otherwise it records the whole circuit, finds the layout from two
    /// parts (the first and the last) and checks their values against the recording run's
    /// witness. A circuit whose parts do not split keeps the whole-circuit witness. Same
    /// result either way.
    ///
    /// # Errors
    /// As [`crate::synthesize`].
    pub fn synthesize_parts<C: Circuit<Scalar> + Clone, P: Parts>(
        &self,
        circuit_id: &str,
        circuit: C,
        parts: &P,
    ) -> Result<Assignment, SynthesisError> {
        self.cached(circuit_id, circuit, Some(parts))
    }

    fn cached<C: Circuit<Scalar> + Clone, P: Parts>(
        &self,
        circuit_id: &str,
        circuit: C,
        parts: Option<&P>,
    ) -> Result<Assignment, SynthesisError> {
        let (path, budget, gate) = (self.path, self.shared.budget_bytes, &self.shared.gate);
        if budget == 0 || path == CachedPath::Plain {
            return crate::synthesize(circuit);
        }
        let shapes = &self.shared.shapes;
        let cell = shapes.slot(circuit_id);
        // The first call of an id records the shape and keeps the assignment of that same
        // run; later calls find the recording (or `None`). Calls meanwhile wait for it: the
        // plain way would hold a, b, c and the constraint bookkeeping, about four times the
        // witness that admission charges a partition while a, b, c are deferred (a 32 GiB
        // PoRep partition: ~17 GB against 4.2 GB; fourteen of them at once exhausted a
        // 128 GiB host), and a recording from parts takes seconds. A call on a rayon worker
        // does not wait (the recording may need that worker): it synthesizes the plain way.
        if cell.shape.get().is_none()
            && cell.recording.load(Ordering::Acquire)
            && rayon::current_thread_index().is_some()
        {
            return crate::synthesize(circuit);
        }
        let mut first: Option<Result<First, SynthesisError>> = None;
        let recorded = cell.shape.get_or_init(|| {
            cell.recording.store(true, Ordering::Release);
            let t = std::time::Instant::now();
            // From the prefix and one part where the parts allow it (`recorded/parts.rs`),
            // else the whole circuit.
            let from_parts = parts
                .filter(|_| path == CachedPath::Parts)
                .and_then(|p| crate::recorded::record_from_parts(circuit_id, p, gate));
            let (r1cs, layout, made) = match from_parts {
                Some((r1cs, layout, inputs, aux)) => {
                    (r1cs, Some(layout), First::Witness(inputs, aux))
                }
                None => {
                    let (r1cs, asg) = match R1cs::record_with_assignment(circuit.clone()) {
                        Ok(done) => done,
                        Err(e) => {
                            tracing::warn!(circuit_id, "not recorded, synthesizing each time: {e}");
                            first = Some(Err(e));
                            return None;
                        }
                    };
                    let layout = parts.and_then(|p| match find_layout(&asg, r1cs.counts(), p) {
                        Ok(layout) => Some(layout),
                        Err(why) => {
                            tracing::warn!(circuit_id, "witness of the whole circuit: {why}");
                            None
                        }
                    });
                    (r1cs, layout, First::Assigned(asg))
                }
            };
            let bytes = r1cs.host_bytes() as u64;
            let used = shapes.bytes.load(Ordering::Relaxed);
            if used + bytes > budget {
                tracing::info!(
                    circuit_id,
                    bytes,
                    used,
                    "recording over budget, synthesizing each time"
                );
                // The recording is dropped here: this call's a, b, c come from it first.
                first = Some(Ok(First::Assigned(made.assigned(&r1cs))));
                return None;
            }
            first = Some(Ok(made));
            shapes.bytes.fetch_add(bytes, Ordering::Relaxed);
            tracing::info!(
                circuit_id,
                bytes,
                constraints = r1cs.n_constraints(),
                parts = layout.map_or(1, |l| l.n_parts),
                ms = t.elapsed().as_millis() as u64,
                "constraint system recorded"
            );
            Some(Arc::new(Shape {
                r1cs: Arc::new(r1cs),
                layout,
            }))
        });
        let defer = self.defer;
        if let Some(done) = first {
            return match (done?, recorded) {
                // Deferred, the host keeps no a, b, c (a recording from parts made none).
                (made, Some(shape)) if defer => {
                    let (inputs, aux) = made.into_witness();
                    shape.r1cs.with_witness(inputs, aux)
                }
                (made, Some(shape)) => Ok(made.assigned(&shape.r1cs)),
                (First::Assigned(asg), None) => Ok(asg),
                // Not made: an unkept recording's call gets its a, b, c before it is dropped.
                (First::Witness(..), None) => crate::synthesize(circuit),
            };
        }
        let Some(shape) = recorded else {
            return crate::synthesize(circuit);
        };
        let assigned = match (shape.layout, parts, path, defer) {
            (Some(layout), Some(parts), CachedPath::Parts, false) => {
                shape.r1cs.assign_parts(&layout, parts, gate)
            }
            // `with_witness` checks the parts' witness against the recorded counts.
            (Some(layout), Some(parts), CachedPath::Parts, true) => {
                witness_parts(&layout, parts, gate)
                    .and_then(|(inputs, aux)| shape.r1cs.with_witness(inputs, aux))
            }
            (.., false) => shape.r1cs.assign(circuit.clone()),
            (.., true) => shape.r1cs.assign_deferred(circuit.clone()),
        };
        match assigned {
            Err(SynthesisError::ShapeMismatch { what }) => {
                tracing::warn!(
                    circuit_id,
                    "instance of another shape ({what}), synthesizing"
                );
                crate::synthesize(circuit)
            }
            other => other,
        }
    }
}

impl Default for Synthesizer {
    /// [`Synthesizer::new`] with the [`DEFAULT_BUDGET`].
    fn default() -> Self {
        Synthesizer::new(DEFAULT_BUDGET)
    }
}

impl fmt::Debug for Synthesizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Synthesizer")
            .field("budget_bytes", &self.shared.budget_bytes)
            .field("recorded_bytes", &self.recorded_bytes())
            .field("defer", &self.defer)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A recorded shape and, when its circuit came as parts that split cleanly, their layout.
#[derive(Debug)]
struct Shape {
    r1cs: Arc<R1cs>,
    layout: Option<SubLayout>,
}

/// One circuit id's recording, made once (`None` when it failed or did not fit), and
/// whether a call is making it.
#[derive(Default)]
struct SlotState {
    shape: OnceLock<Option<Arc<Shape>>>,
    recording: AtomicBool,
}

type Slot = Arc<SlotState>;

/// Recordings kept by circuit id, and the bytes they hold.
#[derive(Default)]
struct ShapeCache {
    entries: Mutex<HashMap<String, Slot>>,
    bytes: AtomicU64,
}

impl ShapeCache {
    /// `circuit_id`'s slot, if a call has asked for it.
    fn get(&self, circuit_id: &str) -> Option<Slot> {
        self.entries.lock().get(circuit_id).cloned()
    }

    /// `circuit_id`'s slot, made empty on the first call.
    fn slot(&self, circuit_id: &str) -> Slot {
        self.entries
            .lock()
            .entry(circuit_id.to_string())
            .or_default()
            .clone()
    }
}

/// What the recording run made of its own instance: the assignment (the whole circuit's
/// recording computes a, b, c as it goes) or the witness alone (a recording from parts).
enum First {
    Assigned(Assignment),
    Witness(Vec<Scalar>, Vec<Scalar>),
}

impl First {
    /// The assignment with a, b, c, from `r1cs` when only the witness was made.
    fn assigned(self, r1cs: &R1cs) -> Assignment {
        match self {
            First::Assigned(asg) => asg,
            First::Witness(inputs, aux) => r1cs.products(inputs, aux),
        }
    }

    /// The witness `(inputs, aux)`.
    fn into_witness(self) -> (Vec<Scalar>, Vec<Scalar>) {
        match self {
            First::Assigned(asg) => (asg.input_assignment, asg.aux_assignment),
            First::Witness(inputs, aux) => (inputs, aux),
        }
    }
}

/// The layout of `parts` in a circuit of `total` counts whose witness is `asg`: derived
/// from the first part's counts, then checked on values, the first part against the start
/// of `asg` and the last part against the prefix and the end.
fn find_layout<P: Parts>(asg: &Assignment, total: Counts, parts: &P) -> Result<SubLayout, String> {
    let n = parts.n_parts();
    if n < 2 {
        return Err(format!("{n} part(s), nothing to split"));
    }
    let (first, last) = rayon::join(
        || witness_of_part(parts, 0),
        || witness_of_part(parts, n - 1),
    );
    let (first, last) = (
        first.map_err(|e| e.to_string())?,
        last.map_err(|e| e.to_string())?,
    );
    let layout = SubLayout::derive(total, first.counts(), n).ok_or_else(|| {
        format!(
            "{n} parts of {} do not split a circuit of {total}",
            first.counts()
        )
    })?;
    if last.counts() != layout.one_part() {
        return Err(format!(
            "the last part has {} but the first {}",
            last.counts(),
            first.counts()
        ));
    }
    let (p, s) = (layout.prefix, layout.stride);
    let (ins, aux) = (&asg.input_assignment, &asg.aux_assignment);
    let (last_in, last_aux) = (p.inputs + (n - 1) * s.inputs, p.aux + (n - 1) * s.aux);
    let same = first.inputs[..] == ins[..p.inputs + s.inputs]
        && first.aux[..] == aux[..p.aux + s.aux]
        && last.inputs[..p.inputs] == ins[..p.inputs]
        && last.aux[..p.aux] == aux[..p.aux]
        && last.inputs[p.inputs..] == ins[last_in..]
        && last.aux[p.aux..] == aux[last_aux..];
    if !same {
        return Err(format!(
            "parts laid out as {layout:?} do not give the recording run's witness"
        ));
    }
    Ok(layout)
}

/// The `parts` of a circuit given whole.
struct NoParts;

impl Parts for NoParts {
    type Part = Never;

    fn n_parts(&self) -> usize {
        0
    }

    fn part(&self, j: usize) -> Result<Never, SynthesisError> {
        Err(SynthesisError::Part {
            part: j,
            reason: "a circuit given whole has no parts".into(),
        })
    }
}

/// The circuit type of [`NoParts`]: never built.
enum Never {}

impl Circuit<Scalar> for Never {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        _: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        match self {}
    }
}

#[cfg(test)]
mod tests;
