//! Plugging the four Filecoin kinds into `cuzk-engine`: one parser per wire kind and a
//! parameters provider that maps circuit ids (`porep-32g`, `wpost-2k`, ...) to the
//! standard `v28-*` files in the engine's param dir. The engine never names a Filecoin
//! circuit itself; the daemon calls [`register`] once at start-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk_engine::{KindRegistry, ParamsProvider, ProofKindId};
use cuzk_groth16::{KindError, Synthesizer};

use crate::registry::{circuit_id, parse_circuit_id, SectorSize};
use crate::testgen::FakeRequest;
use crate::FilecoinKind;

/// The engine's wire kind for each Filecoin kind.
pub const KINDS: [(ProofKindId, FilecoinKind); 4] = [
    (ProofKindId::PorepSealCommit, FilecoinKind::PoRep),
    (ProofKindId::SnapDealsUpdate, FilecoinKind::SnapDeals),
    (ProofKindId::WindowPostPartition, FilecoinKind::WindowPoSt),
    (ProofKindId::WinningPost, FilecoinKind::WinningPoSt),
];

/// Registers PoRep C2, SnapDeals, WindowPoSt and WinningPoSt with their parameter files,
/// other files they need (a non-interactive PoRep's SnarkPack key) looked up in
/// [`crate::default_param_dir`].
pub fn register(registry: &mut KindRegistry) {
    register_in(registry, crate::default_param_dir());
}

/// [`register`] with the engine's parameter directory, where the parsers look for files
/// beyond the circuits' parameters (the SnarkPack key of non-interactive PoRep).
pub fn register_in(registry: &mut KindRegistry, param_dir: PathBuf) {
    register_with(registry, param_dir, crate::ParseOptions::default());
}

/// [`register_in`] with parse options: `fake_ok` makes an engine that proves fake
/// requests (benchmarks only, never the daemon).
pub fn register_with(registry: &mut KindRegistry, param_dir: PathBuf, opts: crate::ParseOptions) {
    let param_dir = Arc::new(param_dir);
    for (id, kind) in KINDS {
        let dir = param_dir.clone();
        registry.register(id, move |req| {
            crate::parse_with(kind, req, &dir, opts).map(Arc::from)
        });
    }
    registry.add_params(Arc::new(FilecoinParams));
}

/// Circuit ids of every Filecoin kind and sector size → their `v28-*.params` files.
/// Missing files are not generated here (production parameters come from the Filecoin
/// parameter download; test ones from `cuzk gen params --kind`).
pub struct FilecoinParams;

impl ParamsProvider for FilecoinParams {
    fn params_path(&self, circuit_id: &str, param_dir: &Path) -> Option<PathBuf> {
        crate::circuit_params_path(param_dir, circuit_id)
    }

    fn circuit_ids(&self) -> Vec<String> {
        crate::all_circuits()
            .map(|all| all.into_iter().map(|(id, _)| id).collect())
            .unwrap_or_default()
    }

    fn record_shape(&self, synth: &Synthesizer, circuit_id: &str) -> Result<bool, KindError> {
        match parse_circuit_id(circuit_id) {
            Some((kind, size)) => record_shape(synth, kind, size),
            None => Ok(false),
        }
    }
}

/// Records the prover's shape of `kind` at `size` in `synth` (the engine's
/// `cuzk_groth16::Synthesizer`) before any request of it arrives: the first partition of a
/// **fake** request of the true shape (`testgen::FakeRequest`, random data) is synthesized
/// through it, which records the shape, and the result is dropped. No proof is
/// made from it. The data cannot change what is recorded: a Groth16 circuit's structure
/// is fixed by its parameters, and a later request whose witness does not fit the
/// recording is synthesized the plain way (the cache checks counts). `Ok(false)` when
/// the shape is already recorded, recording is off, or the kind has no fake request
/// (WinningPoSt: one small partition, recorded by its first request in about a second).
///
/// # Errors
/// [`KindError`] when the fake request cannot be made or its synthesis fails.
pub fn record_shape(
    synth: &Synthesizer,
    kind: FilecoinKind,
    size: SectorSize,
) -> Result<bool, KindError> {
    let id = circuit_id(kind, size);
    if kind == FilecoinKind::WinningPoSt || !synth.recording_on() || synth.is_recorded(&id) {
        return Ok(false);
    }
    let fake = FakeRequest::generate(kind, size, 0)
        .map_err(|e| KindError::Other(format!("fake {kind} request at {size}: {e}")))?;
    let opts = crate::ParseOptions { fake_ok: true };
    let proof = crate::parse_with(kind, &fake.request, &crate::default_param_dir(), opts)?;
    drop(proof.synthesize(synth, 0)?);
    Ok(synth.is_recorded(&id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_groth16::CachedPath;

    /// A shape recorded before any request (from a fake request of the true shape, at
    /// preload) is the one later requests use, and assigns them as plain synthesis does:
    /// PoRep (recorded from its prefix and one challenge), WindowPoSt and SnapDeals at
    /// 2 KiB. WinningPoSt has no fake request and is left to its first request. See: #17.
    #[test]
    fn shapes_recorded_ahead_assign_later_requests_as_plain() {
        let size = SectorSize::S2KiB;
        let synth = Synthesizer::default().with_defer(true);
        let plain_way = synth.with_path(CachedPath::Plain);
        for kind in [
            FilecoinKind::PoRep,
            FilecoinKind::WindowPoSt,
            FilecoinKind::SnapDeals,
        ] {
            let id = circuit_id(kind, size);
            assert!(!synth.is_recorded(&id), "{id}");
            assert!(record_shape(&synth, kind, size).expect("records"), "{id}");
            assert!(synth.is_recorded(&id), "{id}");
            assert!(
                !record_shape(&synth, kind, size).expect("nothing to do"),
                "{id}"
            );
            let later = FakeRequest::generate(kind, size, 5).expect("fake");
            let opts = crate::ParseOptions { fake_ok: true };
            let proof = crate::parse_with(kind, &later.request, &crate::default_param_dir(), opts)
                .expect("parse");
            for k in 0..proof.num_partitions() {
                let plain = proof.synthesize(&plain_way, k).expect("plain");
                let got = proof.synthesize(&synth, k).expect("recorded");
                assert!(got.is_deferred(), "{id} partition {k}");
                assert!(
                    *got.evaluated().expect("evaluates") == plain,
                    "{id} partition {k}"
                );
            }
        }
        assert!(!record_shape(&synth, FilecoinKind::WinningPoSt, size).expect("no fake"));
    }
}
