//! Parameter files: which standard `v28-*.params` / `.vk` file in the parameter cache
//! (`FIL_PROOFS_PARAMETER_CACHE`, default `/var/tmp/filecoin-proof-parameters`) belongs to
//! each circuit id, and the shape (constraints, inputs, aux) of each circuit for memory
//! admission. Names come from the storage-proofs public parameters exactly as
//! filecoin-proofs computes them: `v28-{prefix}-{sha256(identifier)}`.
//!
//! SnapDeals trap: filecoin-proofs-api's `RegisteredUpdateProof::cache_verifying_key_path`
//! returns the PoRep file; here the update circuit's own `EmptySectorUpdateCompound`
//! identifier is used (`v28-empty-sector-update-…`).

use std::path::{Path, PathBuf};

use cuzk_groth16::{KindError, Synthesizer};
use filecoin_proofs::{MerkleTreeTrait, PoRepConfig, PoStConfig};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_update::{
    constants::TreeRHasher, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
};

use crate::registry::{circuit_id, parse_circuit_id, FilecoinKind, Registered, SectorSize};

/// Version prefix of the parameter files (storage-proofs-core `parameter_cache::VERSION`).
pub const PARAMS_VERSION: usize = storage_proofs_core::parameter_cache::VERSION;

/// The parameter cache filecoin-proofs reads: `$FIL_PROOFS_PARAMETER_CACHE`, else
/// `/var/tmp/filecoin-proof-parameters`.
pub fn default_param_dir() -> PathBuf {
    std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/filecoin-proof-parameters"))
}

/// The storage-proofs cache identifier of `kind` at `size`, e.g.
/// `stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d…`.
///
/// # Errors
/// [`KindError::Other`] if filecoin-proofs cannot set up the public parameters.
pub fn cache_identifier(kind: FilecoinKind, size: SectorSize) -> Result<String, KindError> {
    let reg = Registered::from_abi(kind, Registered::default_abi(kind, size))?;
    match reg {
        Registered::Seal(p) => with_tree!(size, porep_identifier, &p.as_v1_config()),
        Registered::PoSt(p) => with_tree!(size, post_identifier, &p.as_v1_config()),
        Registered::Update(_) => with_tree!(size, update_identifier, size.bytes()),
    }
}

/// File name of the Groth16 parameters of `kind` at `size`: `v28-<identifier>.params`.
///
/// # Errors
/// As [`cache_identifier`].
pub fn params_file_name(kind: FilecoinKind, size: SectorSize) -> Result<String, KindError> {
    Ok(format!(
        "v{PARAMS_VERSION}-{}.params",
        cache_identifier(kind, size)?
    ))
}

/// File name of the verifying key of `kind` at `size`: `v28-<identifier>.vk`.
///
/// # Errors
/// As [`cache_identifier`].
pub fn vk_file_name(kind: FilecoinKind, size: SectorSize) -> Result<String, KindError> {
    Ok(format!(
        "v{PARAMS_VERSION}-{}.vk",
        cache_identifier(kind, size)?
    ))
}

/// Path of the parameters file for a Filecoin circuit id (`porep-32g`, `snap-2k`, ...)
/// under `dir`; `None` when `circuit_id` is not a Filecoin circuit id.
pub fn circuit_params_path(dir: &Path, circuit_id: &str) -> Option<PathBuf> {
    let (kind, size) = parse_circuit_id(circuit_id)?;
    params_file_name(kind, size).ok().map(|name| dir.join(name))
}

/// Every Filecoin circuit id with its parameters file name.
///
/// # Errors
/// As [`cache_identifier`].
pub fn all_circuits() -> Result<Vec<(String, String)>, KindError> {
    let mut out = Vec::new();
    for size in SectorSize::ALL {
        for kind in FilecoinKind::ALL {
            out.push((circuit_id(kind, size), params_file_name(kind, size)?));
        }
    }
    Ok(out)
}

/// Size of one partition's circuit: R1CS constraints, public inputs (with ONE) and
/// private (aux) variables, as measured in `../shared/filecoin-facts.md` §5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitShape {
    /// Constraints of the circuit itself (bellperson adds one per input on top).
    pub constraints: usize,
    /// Public inputs including ONE.
    pub inputs: usize,
    /// Private variables.
    pub aux: usize,
}

impl CircuitShape {
    /// The measured shape of one partition of `kind` at `size`.
    pub fn of(kind: FilecoinKind, size: SectorSize) -> CircuitShape {
        use FilecoinKind as K;
        use SectorSize as S;
        let (constraints, inputs, aux) = match (kind, size) {
            (K::PoRep, S::S2KiB) => (2_687_921, 40, 2_685_673),
            (K::PoRep, S::S8MiB) => (3_844_929, 40, 3_842_449),
            (K::PoRep, S::S512MiB) => (4_423_433, 40, 4_420_837),
            (K::PoRep, S::S32GiB) => (130_278_541, 328, 130_169_893),
            (K::PoRep, S::S64GiB) => (131_185_849, 328, 131_076_643),
            (K::WinningPoSt, S::S2KiB) => (90_750, 133, 91_674),
            (K::WinningPoSt, S::S8MiB) => (230_670, 133, 233_442),
            (K::WinningPoSt, S::S512MiB) => (300_630, 133, 304_326),
            (K::WinningPoSt, S::S32GiB) => (370_590, 133, 375_210),
            (K::WinningPoSt, S::S64GiB) => (391_314, 133, 396_000),
            (K::WindowPoSt, S::S2KiB) => (21_866, 23, 22_128),
            (K::WindowPoSt, S::S8MiB) => (64_266, 23, 65_088),
            (K::WindowPoSt, S::S512MiB) => (85_466, 23, 86_568),
            (K::WindowPoSt, S::S32GiB) => (125_279_217, 25_840, 126_902_376),
            (K::WindowPoSt, S::S64GiB) => (129_887_900, 25_301, 131_500_200),
            (K::SnapDeals, S::S2KiB) => (1_705_039, 5, 1_703_569),
            (K::SnapDeals, S::S8MiB) => (10_007_503, 5, 9_998_039),
            (K::SnapDeals, S::S512MiB) => (57_450_479, 5, 57_401_314),
            (K::SnapDeals, S::S32GiB) => (81_049_499, 5, 80_978_488),
            (K::SnapDeals, S::S64GiB) => (85_006_101, 5, 84_931_220),
        };
        CircuitShape {
            constraints,
            inputs,
            aux,
        }
    }

    /// Host bytes of one synthesized partition: a, b, c (one scalar per constraint and per
    /// input), the witness, and three density bitmaps.
    pub fn host_bytes(&self) -> usize {
        let rows = self.constraints + self.inputs;
        32 * 3 * rows + self.witness_bytes()
    }

    /// Host bytes of one partition whose a, b, c are left to the backend (a recorded
    /// shape with deferral on): the witness, the density bitmaps, and the byte per aux
    /// value of the row witness a host evaluating a, b, c makes (`R1cs::row_witness`).
    pub fn witness_bytes(&self) -> usize {
        32 * (self.inputs + self.aux) + 3 * self.aux.div_ceil(8) + self.aux
    }

    /// What admission charges a partition that `synth` synthesizes:
    /// [`CircuitShape::witness_bytes`] while it defers a, b, c (the engine's does), else
    /// [`CircuitShape::host_bytes`].
    pub fn admission_bytes(&self, synth: &Synthesizer) -> usize {
        match synth.defers() {
            true => self.witness_bytes(),
            false => self.host_bytes(),
        }
    }
}

fn porep_identifier<Tree: 'static + MerkleTreeTrait>(
    cfg: &PoRepConfig,
) -> Result<String, KindError> {
    cfg.get_cache_identifier::<Tree>()
        .map_err(|e| KindError::Other(format!("porep parameter identifier: {e:#}")))
}

fn post_identifier<Tree: 'static + MerkleTreeTrait>(cfg: &PoStConfig) -> Result<String, KindError> {
    cfg.get_cache_identifier::<Tree>()
        .map_err(|e| KindError::Other(format!("post parameter identifier: {e:#}")))
}

fn update_identifier<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_bytes: u64,
) -> Result<String, KindError> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(sector_bytes);
    Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<
        EmptySectorUpdateCircuit<Tree>,
        storage_proofs_update::PublicParams,
    >>::cache_identifier(&pp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_charges_the_witness_only_while_a_b_c_are_deferred() {
        let shape = CircuitShape::of(FilecoinKind::PoRep, SectorSize::S32GiB);
        let synth = Synthesizer::default();
        let deferred = shape.admission_bytes(&synth.with_defer(true));
        let evaluated = shape.admission_bytes(&synth.with_defer(false));
        assert_eq!(deferred, shape.witness_bytes());
        assert_eq!(evaluated, shape.host_bytes());
        // 130,170,221 witness scalars (4.17 GB), three density bits and the row witness's
        // kind byte per aux value, against 15.5 GiB with a, b, c.
        assert_eq!(
            deferred,
            32 * (328 + 130_169_893) + 3 * 130_169_893usize.div_ceil(8) + 130_169_893
        );
        assert!(evaluated > 3 * deferred, "{evaluated} vs {deferred}");
    }

    #[test]
    fn two_kib_names_match_the_published_parameters() {
        let name = |k| params_file_name(k, SectorSize::S2KiB).expect("name");
        let porep = name(FilecoinKind::PoRep);
        assert!(
            porep.starts_with("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138")
                && porep.ends_with("832f.params"),
            "{porep}"
        );
        let winning = name(FilecoinKind::WinningPoSt);
        assert!(
            winning.contains("poseidon_hasher-8-0-0-3ea05428") && winning.ends_with("ea9e.params"),
            "{winning}"
        );
        let window = name(FilecoinKind::WindowPoSt);
        assert!(
            window.contains("poseidon_hasher-8-0-0-0170db1f") && window.ends_with("96b0.params"),
            "{window}"
        );
        let snap = name(FilecoinKind::SnapDeals);
        assert!(
            snap.starts_with("v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-fb9e095b")
                && snap.ends_with("0194.params"),
            "{snap}"
        );
    }

    #[test]
    fn every_circuit_has_its_own_published_file() {
        let all = all_circuits().expect("names");
        assert_eq!(all.len(), 20);
        let mut names: Vec<_> = all.iter().map(|(_, n)| n.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 20, "two circuit ids share a file");
        for (id, name) in &all {
            let known = storage_proofs_core::parameter_cache::get_parameter_data_from_id(name);
            assert!(known.is_some(), "{id}: {name} not in parameters.json");
        }
    }

    /// Synthetic and non-interactive PoRep prove with the interactive PoRep's files (the
    /// challenges per partition, which name the circuit, are the same). See: #18.
    #[test]
    fn every_porep_variant_uses_the_interactive_parameter_file() {
        for size in SectorSize::ALL {
            let interactive = cache_identifier(FilecoinKind::PoRep, size).expect("id");
            for variant in crate::PoRepVariant::ALL {
                let reg = Registered::from_abi(FilecoinKind::PoRep, variant.abi(size));
                let Ok(Registered::Seal(p)) = reg else {
                    panic!("{variant} {size}: {reg:?}");
                };
                let id = with_tree!(size, porep_identifier, &p.as_v1_config()).expect("id");
                assert_eq!(id, interactive, "{variant} at {size}");
            }
        }
    }

    #[test]
    fn circuit_params_path_joins_the_dir() {
        let p = circuit_params_path(Path::new("/p"), "wpost-32g").expect("known id");
        assert!(p.starts_with("/p") && p.to_string_lossy().contains("proof-of-spacetime-fallback"));
        assert!(circuit_params_path(Path::new("/p"), "synthetic-20").is_none());
    }
}
