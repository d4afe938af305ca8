//! Plugging the four Filecoin kinds into `cuzk-engine`: one parser per wire kind and a
//! parameters provider that maps circuit ids (`porep-32g`, `wpost-2k`, ...) to the
//! standard `v28-*` files in the engine's param dir. The engine never names a Filecoin
//! circuit itself; the daemon calls [`register`] once at start-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk_engine::{KindRegistry, ParamsProvider, ProofKindId};

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
    let param_dir = Arc::new(param_dir);
    for (id, kind) in KINDS {
        let dir = param_dir.clone();
        registry.register(id, move |req| {
            crate::parse_in(kind, req, &dir).map(Arc::from)
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
}
