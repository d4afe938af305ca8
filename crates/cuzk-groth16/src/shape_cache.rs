//! The process-wide cache of recorded circuit shapes behind [`synthesize_cached`] and
//! [`synthesize_cached_parts`]: one [`R1cs`] per circuit id, made by the first call of the
//! id (that call's assignment is the recording run's own), kept within a byte budget, and,
//! for circuits given as [`Parts`], the [`SubLayout`] found by the same first call. With
//! deferral on ([`set_deferred`], [`with_deferred`]) the assignments of recorded shapes
//! leave a, b, c to the backend (`Assignment::deferred`). The recording itself and the
//! witness-only paths live in `recorded.rs` and `sublayout.rs`.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bellperson::Circuit;
use parking_lot::Mutex;

use crate::recorded::R1cs;
use crate::sublayout::{witness_of_part, witness_parts, Parts, SubLayout};
use crate::synthesis::SynthesisError;
use crate::witness::Counts;
use crate::{Assignment, Scalar};

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

/// Recordings kept by circuit id, within a byte budget.
struct ShapeCache {
    entries: Mutex<HashMap<String, Slot>>,
    bytes: AtomicU64,
}

fn cache() -> &'static ShapeCache {
    static CACHE: OnceLock<ShapeCache> = OnceLock::new();
    CACHE.get_or_init(|| ShapeCache {
        entries: Mutex::new(HashMap::new()),
        bytes: AtomicU64::new(0),
    })
}

/// Host bytes recordings may take in this process (0: never record).
static BUDGET: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET);

/// The default recording budget: 16 GiB, enough for the largest Filecoin partition
/// (~130M constraints, ~10 GB recorded).
pub const DEFAULT_BUDGET: u64 = 16 << 30;

/// Sets the bytes recordings may take from now on (0 turns recording off; recordings
/// already made stay).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// Host bytes held by recordings.
pub fn recorded_bytes() -> u64 {
    cache().bytes.load(Ordering::Relaxed)
}

/// Whether recordings may be made (the budget is not 0).
pub fn recording_on() -> bool {
    BUDGET.load(Ordering::Relaxed) > 0
}

/// Whether `circuit_id`'s shape is recorded and kept.
pub fn is_recorded(circuit_id: &str) -> bool {
    let slot = cache().entries.lock().get(circuit_id).cloned();
    slot.is_some_and(|s| s.shape.get().is_some_and(Option::is_some))
}

/// The parts layout found for `circuit_id`, if its shape is recorded and came as parts.
pub fn layout(circuit_id: &str) -> Option<SubLayout> {
    let slot = cache().entries.lock().get(circuit_id).cloned()?;
    slot.shape.get()?.as_ref()?.layout
}

/// Which way the cached entry points synthesize on a thread (see [`with_path`]).
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

thread_local! {
    static PATH: Cell<CachedPath> = const { Cell::new(CachedPath::Parts) };
    static DEFER_HERE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether assignments of recorded shapes are deferred, unless a thread says otherwise.
static DEFER: AtomicBool = AtomicBool::new(false);

/// Makes the cached entry points return deferred assignments (a, b, c left to the
/// backend, `Assignment::deferred`) for recorded shapes from now on, or evaluated ones.
/// Off by default: a caller that reads a, b, c itself gets them. Every `Backend` takes
/// either (the CPU backend evaluates the products, the GPU backend on the device); the
/// engine turns it on.
pub fn set_deferred(on: bool) {
    DEFER.store(on, Ordering::Relaxed);
}

/// Runs `f` with deferral ([`set_deferred`]) set to `on` on this thread only, then
/// restores the previous setting (tests compare both on the same request).
pub fn with_deferred<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let before = DEFER_HERE.with(|d| d.replace(Some(on)));
    let out = f();
    DEFER_HERE.with(|d| d.set(before));
    out
}

/// Whether assignments of recorded shapes are deferred now on this thread (the engine's
/// admission estimates a partition's host bytes from it).
pub fn deferred() -> bool {
    deferring()
}

fn deferring() -> bool {
    DEFER_HERE
        .with(Cell::get)
        .unwrap_or_else(|| DEFER.load(Ordering::Relaxed))
}

/// Runs `f` with the cached entry points taking `path` on this thread (benchmarks and
/// tests compare the paths on the same request), then restores the previous one.
pub fn with_path<R>(path: CachedPath, f: impl FnOnce() -> R) -> R {
    let before = PATH.with(|p| p.replace(path));
    let out = f();
    PATH.with(|p| p.set(before));
    out
}

/// [`crate::synthesize`] through the recording of `circuit_id`'s shape: the first call
/// for an id records it (when the budget allows), later calls only run the witness and the
/// parallel products. An instance that does not match its id's recording, or an id whose
/// recording failed or did not fit, is synthesized the plain way. Same result either way.
///
/// # Errors
/// As [`crate::synthesize`].
pub fn synthesize_cached<C: Circuit<Scalar> + Clone>(
    circuit_id: &str,
    circuit: C,
) -> Result<Assignment, SynthesisError> {
    cached(circuit_id, circuit, None::<&NoParts>)
}

/// [`synthesize_cached`] for a circuit that is also given as its [`Parts`]: once the shape
/// is recorded, later calls compute the witness part by part on the current rayon pool.
/// The first call records the shape from the prefix and one part when the parts can give
/// their prefix and are of one structure ([`R1cs::record_parts`], `recorded/parts.rs`), its
/// own witness already part by part; otherwise it records the whole circuit, finds the
/// layout from two parts (the first and the last) and checks their values against the
/// recording run's witness. A circuit whose parts do not split keeps the whole-circuit
/// witness. Same result either way.
///
/// # Errors
/// As [`crate::synthesize`].
pub fn synthesize_cached_parts<C: Circuit<Scalar> + Clone, P: Parts>(
    circuit_id: &str,
    circuit: C,
    parts: &P,
) -> Result<Assignment, SynthesisError> {
    cached(circuit_id, circuit, Some(parts))
}

fn cached<C: Circuit<Scalar> + Clone, P: Parts>(
    circuit_id: &str,
    circuit: C,
    parts: Option<&P>,
) -> Result<Assignment, SynthesisError> {
    let path = PATH.with(Cell::get);
    if BUDGET.load(Ordering::Relaxed) == 0 || path == CachedPath::Plain {
        return crate::synthesize(circuit);
    }
    let cell = cache()
        .entries
        .lock()
        .entry(circuit_id.to_string())
        .or_default()
        .clone();
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
            .and_then(|p| crate::recorded::record_from_parts(circuit_id, p));
        let (r1cs, layout, made) = match from_parts {
            Some((r1cs, layout, inputs, aux)) => (r1cs, Some(layout), First::Witness(inputs, aux)),
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
        let used = cache().bytes.load(Ordering::Relaxed);
        if used + bytes > BUDGET.load(Ordering::Relaxed) {
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
        cache().bytes.fetch_add(bytes, Ordering::Relaxed);
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
    let defer = deferring();
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
            shape.r1cs.assign_parts(&layout, parts)
        }
        // `with_witness` checks the parts' witness against the recorded counts.
        (Some(layout), Some(parts), CachedPath::Parts, true) => witness_parts(&layout, parts)
            .and_then(|(inputs, aux)| shape.r1cs.with_witness(inputs, aux)),
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
mod tests {
    use super::*;
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    use std::sync::mpsc;
    use std::time::Duration;

    /// A synthetic circuit that, when `gate` is set, waits for it before synthesizing.
    #[derive(Clone)]
    struct Gated {
        circuit: SyntheticCircuit,
        gate: Option<Arc<Mutex<mpsc::Receiver<()>>>>,
    }

    impl Circuit<Scalar> for Gated {
        fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), bellperson::SynthesisError> {
            if let Some(gate) = &self.gate {
                let _ = gate.lock().recv_timeout(Duration::from_secs(60));
            }
            self.circuit.synthesize(cs)
        }
    }

    /// While the first call of an id records, another call of the same id from outside the
    /// rayon pool waits for the recording and gets its assignment through it (the plain way
    /// would hold four times the memory admission charged); a call on a rayon worker does
    /// not wait and synthesizes the plain way. See: #17.
    #[test]
    fn calls_during_a_recording_wait_for_it_outside_the_rayon_pool() {
        let c = SyntheticCircuit::with_log_n(8, 3, SyntheticShape::default()).expect("valid");
        let id = "test-shape-cache-gated-8";
        let (open, gate) = mpsc::channel();
        let gated = Gated {
            circuit: c,
            gate: Some(Arc::new(Mutex::new(gate))),
        };
        let recorder = std::thread::spawn(move || synthesize_cached(id, gated));
        // Wait until the recorder holds the id.
        let slot = loop {
            if let Some(slot) = cache().entries.lock().get(id).cloned() {
                if slot.recording.load(Ordering::Acquire) {
                    break slot;
                }
            }
            std::thread::yield_now();
        };
        let ungated = move |seed| Gated {
            circuit: c.with_witness_seed(seed),
            gate: None,
        };
        // On a rayon worker: plain, at once, while the recording is still under way.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let on_pool = pool
            .install(|| synthesize_cached(id, ungated(8)))
            .expect("synthesizes");
        assert!(
            slot.shape.get().is_none(),
            "the recording is still under way"
        );
        assert_eq!(
            on_pool,
            crate::synthesize(c.with_witness_seed(8)).expect("plain")
        );
        // Outside the pool: waits for the recording.
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(synthesize_cached(id, ungated(9)));
        });
        assert!(
            finished.recv_timeout(Duration::from_millis(300)).is_err(),
            "the second call returned while the first was still recording"
        );
        open.send(()).expect("release the recorder");
        let got = finished
            .recv_timeout(Duration::from_secs(30))
            .expect("the second call returns once the recording is made")
            .expect("synthesizes");
        assert_eq!(
            got,
            crate::synthesize(c.with_witness_seed(9)).expect("plain")
        );
        let first = recorder.join().expect("recorder").expect("records");
        assert_eq!(first, crate::synthesize(c).expect("plain"));
        assert!(layout(id).is_none() && slot.shape.get().is_some_and(|s| s.is_some()));
    }
}
