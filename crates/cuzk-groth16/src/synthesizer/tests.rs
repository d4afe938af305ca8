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
    let synth = Synthesizer::default();
    let id = "gated-8";
    let (open, gate) = mpsc::channel();
    let gated = Gated {
        circuit: c,
        gate: Some(Arc::new(Mutex::new(gate))),
    };
    let recorder = {
        let synth = synth.clone();
        std::thread::spawn(move || synth.synthesize(id, gated))
    };
    // Wait until the recorder holds the id.
    let slot = loop {
        if let Some(slot) = synth.shared.shapes.get(id) {
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
        .install(|| synth.synthesize(id, ungated(8)))
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
    let waiter = synth.clone();
    std::thread::spawn(move || {
        let _ = done.send(waiter.synthesize(id, ungated(9)));
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
    assert!(synth.layout(id).is_none() && slot.shape.get().is_some_and(|s| s.is_some()));
}

/// Two synthesizers share nothing: one with a budget records the shape and defers, one
/// with a budget of 0 never records and evaluates, on the same circuit id, and each gives
/// plain synthesis's assignment. A view made with `with_defer` or `with_path` shares its
/// original's recordings. See: #31.
#[test]
fn two_synthesizers_keep_their_own_shapes_and_budgets() {
    let c = SyntheticCircuit::with_log_n(7, 5, SyntheticShape::default()).expect("valid");
    let id = "two-synthesizers-7";
    let recording = Synthesizer::new(DEFAULT_BUDGET).with_defer(true);
    let never = Synthesizer::new(0);
    for seed in [1, 2, 3] {
        let inst = c.with_witness_seed(seed);
        let want = crate::synthesize(inst).expect("plain");
        let kept = recording.synthesize(id, inst).expect("recorded");
        let plain = never.synthesize(id, inst).expect("plain");
        assert!(kept.is_deferred(), "seed {seed}");
        assert_eq!(*kept.evaluated().expect("evaluates"), want, "seed {seed}");
        assert_eq!(plain, want, "seed {seed}");
    }
    assert!(recording.is_recorded(id) && recording.recorded_bytes() > 0);
    assert!(!never.is_recorded(id) && never.recorded_bytes() == 0);
    assert!(!never.recording_on());

    let view = recording.with_defer(false).with_path(CachedPath::Whole);
    assert!(view.is_recorded(id) && !view.defers() && view.path() == CachedPath::Whole);
    assert_eq!(view.recorded_bytes(), recording.recorded_bytes());
    let inst = c.with_witness_seed(4);
    let got = view.synthesize(id, inst).expect("recorded");
    assert!(!got.is_deferred());
    assert_eq!(got, crate::synthesize(inst).expect("plain"));
    assert!(recording.defers(), "the view left its original deferring");
}

/// A budget smaller than the recording keeps nothing: the call is synthesized from the
/// recording it made, then the recording is dropped, and later calls are plain.
#[test]
fn a_recording_over_the_budget_is_not_kept() {
    let c = SyntheticCircuit::with_log_n(7, 5, SyntheticShape::default()).expect("valid");
    let synth = Synthesizer::new(1).with_defer(true);
    for seed in [1, 2] {
        let inst = c.with_witness_seed(seed);
        let got = synth
            .synthesize("tiny-budget-7", inst)
            .expect("synthesizes");
        assert!(!got.is_deferred(), "nothing recorded to defer to");
        assert_eq!(got, crate::synthesize(inst).expect("plain"));
    }
    assert!(!synth.is_recorded("tiny-budget-7"));
    assert_eq!(synth.recorded_bytes(), 0);
}
