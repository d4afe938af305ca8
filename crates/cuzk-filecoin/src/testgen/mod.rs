//! Test inputs without downloads: Groth16 parameters for the Filecoin circuits made with
//! cuzk's fast generator (**test-only**: the toxic waste is local and discarded, so anyone
//! holding it could forge proofs; never use these files on a network), and sealed test
//! sectors with the request payloads of all four kinds (`sector.rs`), checked with
//! filecoin-proofs' own verifiers (`verify.rs`), and **fake** requests of the true shape at
//! every size, whose proofs cannot verify (`fake/`, benchmarks only). Owns [`gen_params`]
//! and [`TestgenError`].

mod blank;
mod fake;
mod sector;
mod verify;

pub use fake::{FakeRequest, PayloadShape, FAKE_MINER_ID, FAKE_NOTE, FAKE_SECTOR_NUMBER};
pub use sector::{
    gen_sector, gen_sector_with, hex32, load_sector, SectorManifest, TestSector, C1_FILE, MANIFEST,
};
pub use verify::verify_with_filecoin_proofs;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bellperson::Circuit;
use cuzk_groth16::paramgen::{self, FixedBaseMul, Generated, ToxicWaste};
use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{KindError, Scalar};
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait};
use rand::SeedableRng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_porep::stacked::{StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCompound};
use storage_proofs_update::{constants::TreeRHasher, EmptySectorUpdate, EmptySectorUpdateCompound};

use crate::registry::{FilecoinKind, Registered, SectorSize};

/// A test input could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TestgenError {
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A filecoin-proofs call failed.
    #[error("filecoin-proofs {step}: {message}")]
    Filecoin {
        /// The api function.
        step: &'static str,
        /// Its error.
        message: String,
    },
    /// Parameter generation failed.
    #[error("parameter generation for {circuit_id}: {message}")]
    Params {
        /// The circuit id.
        circuit_id: String,
        /// The generator's error.
        message: String,
    },
    /// A value could not be encoded or decoded (JSON, hex, an ABI number).
    #[error("{0}")]
    Encode(String),
    /// A kind-level error (parameter naming).
    #[error(transparent)]
    Kind(#[from] KindError),
}

impl TestgenError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> TestgenError {
        TestgenError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Writes **test-only** Groth16 parameters (`.params` and `.vk`, standard `v28-*` names)
/// for `kind` at `size` into `dir`, unless the `.params` file is already there; returns
/// its path. For PoRep also the test SnarkPack key that non-interactive PoRep aggregates
/// with ([`gen_aggregation_key`]). The randomness comes from the OS; nobody keeps the toxic waste, but these
/// files are still not the production ones and must not be used on a network.
///
/// # Errors
/// [`TestgenError`] naming the file or the generator's failure.
pub fn gen_params(
    kind: FilecoinKind,
    size: SectorSize,
    dir: &Path,
) -> Result<PathBuf, TestgenError> {
    gen_params_with(
        kind,
        size,
        dir,
        &cuzk_groth16::paramgen::CpuFixedBase::default(),
    )
}

/// [`gen_params`] with the fixed-base multiplications of the query points done by `fbm`
/// (a GPU's `GpuFixedBase` makes the 2 KiB PoRep file in seconds instead of minutes).
///
/// # Errors
/// [`TestgenError`] naming the file or the generator's failure.
pub fn gen_params_with(
    kind: FilecoinKind,
    size: SectorSize,
    dir: &Path,
    fbm: &dyn FixedBaseMul,
) -> Result<PathBuf, TestgenError> {
    gen_params_report(kind, size, dir, fbm, &ParamsOptions::default()).map(|r| r.path)
}

/// How [`gen_params_report`] makes parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ParamsOptions {
    /// Seed of the toxic waste (reproducible files, to compare two generators); `None`:
    /// OS randomness, nobody keeps it.
    pub toxic_seed: Option<u64>,
    /// Record the whole circuit on one thread even when the kind gives it as parts (the
    /// older path, kept to compare against).
    pub whole: bool,
}

/// What [`gen_params_report`] did.
#[derive(Debug)]
pub struct ParamsReport {
    /// The `.params` file.
    pub path: PathBuf,
    /// How it was made; `None` when the files were already there.
    pub made: Option<Made>,
}

/// One generation's figures.
#[derive(Debug)]
pub struct Made {
    /// Whether the structure was recorded from the circuit's prefix and one part.
    pub from_parts: bool,
    /// Rows of the circuit (constraints and one per input).
    pub n_rows: usize,
    /// Wall time of each stage ([`Generated::stages`], "save" last).
    pub stages: Vec<(&'static str, Duration)>,
    /// The fixed-base implementation's breakdown ([`Generated::fixed_base_stages`]).
    pub fixed_base_stages: Vec<(&'static str, Vec<(&'static str, Duration)>)>,
}

/// [`gen_params_with`] with options, reporting the stage times. PoRep's circuit is
/// recorded from its prefix and one challenge, PoSt's from one sector
/// ([`paramgen::generate_parts`]) unless `opts.whole`; SnapDeals' is recorded whole.
///
/// # Errors
/// [`TestgenError`] naming the file or the generator's failure.
pub fn gen_params_report(
    kind: FilecoinKind,
    size: SectorSize,
    dir: &Path,
    fbm: &dyn FixedBaseMul,
    opts: &ParamsOptions,
) -> Result<ParamsReport, TestgenError> {
    let params = dir.join(crate::params_file_name(kind, size)?);
    let vk = dir.join(crate::vk_file_name(kind, size)?);
    if kind == FilecoinKind::PoRep {
        gen_aggregation_key(dir)?;
    }
    let present = || params.is_file() && vk.is_file();
    if present() {
        return Ok(ParamsReport {
            path: params,
            made: None,
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| TestgenError::io(dir, e))?;
    // Two processes making the same pair would each write a verifying key and rename
    // their parameters in turn, and could leave one's parameters beside the other's key;
    // a reader could also open the pair between the two. One makes it, the other waits
    // and finds it made.
    let _made_here = lock_exclusive(&params.with_extension("params.lock"))?;
    if present() {
        return Ok(ParamsReport {
            path: params,
            made: None,
        });
    }
    let circuit_id = crate::circuit_id(kind, size);
    let reg = Registered::from_abi(kind, Registered::default_abi(kind, size))?;
    let target = Target {
        circuit_id: &circuit_id,
        params: &params,
        vk: &vk,
        fbm,
        opts,
    };
    let made = match reg {
        Registered::Seal(p) => with_tree!(size, gen_porep, &p.as_v1_config(), size, &target),
        Registered::PoSt(p) => with_tree!(size, gen_post, &p.as_v1_config(), &target),
        Registered::Update(_) => with_tree!(size, gen_update, size, &target),
    }?;
    Ok(ParamsReport {
        path: params,
        made: Some(made),
    })
}

/// Holds an exclusive advisory lock on `path` (created if absent) until dropped; the
/// lock goes with the process, so one killed mid-generation blocks nobody.
fn lock_exclusive(path: &Path) -> Result<std::fs::File, TestgenError> {
    use fs2::FileExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| TestgenError::io(path, e))?;
    file.lock_exclusive()
        .map_err(|e| TestgenError::io(path, e))?;
    Ok(file)
}

/// Proofs the test SnarkPack key can aggregate: 128, the power of two above the 126
/// partitions of a 32/64 GiB non-interactive PoRep.
const TEST_AGGREGATION_PROOFS: usize = 128;

/// Writes a **test-only** SnarkPack inner-product key under its standard name
/// (`v28-fil-inner-product-v1.srs`) into `dir`, unless one is there; returns its path.
/// Made from a random trapdoor that is discarded, able to aggregate up to 128 proofs; the
/// production key comes from a ceremony and must be used on a network.
///
/// # Errors
/// [`TestgenError::Io`] naming the file.
pub fn gen_aggregation_key(dir: &Path) -> Result<PathBuf, TestgenError> {
    let path = crate::snarkpack::srs_path(dir);
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(dir).map_err(|e| TestgenError::io(dir, e))?;
    // A prover and a verifier that read two processes' keys would not agree.
    let _made_here = lock_exclusive(&path.with_extension("srs.lock"))?;
    if path.is_file() {
        return Ok(path);
    }
    crate::snarkpack::write_test_srs(&path, TEST_AGGREGATION_PROOFS)
        .map_err(|e| TestgenError::io(&path, e))?;
    Ok(path)
}

/// Where one generation writes.
struct Target<'a> {
    circuit_id: &'a str,
    params: &'a Path,
    vk: &'a Path,
    fbm: &'a dyn FixedBaseMul,
    opts: &'a ParamsOptions,
}

impl Target<'_> {
    fn fail(&self, message: impl std::fmt::Display) -> TestgenError {
        TestgenError::Params {
            circuit_id: self.circuit_id.to_string(),
            message: message.to_string(),
        }
    }

    fn toxic(&self) -> ToxicWaste {
        match self.opts.toxic_seed {
            Some(seed) => ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(seed)),
            None => ToxicWaste::random(&mut rand::rngs::OsRng),
        }
    }

    /// Generates parameters for `blank` and writes both files.
    fn generate<C: Circuit<Scalar>>(&self, blank: C) -> Result<Made, TestgenError> {
        let tmp = self.tmp();
        let g = paramgen::generate_in_domain(blank, &self.toxic(), self.fbm, None, Some(&tmp))
            .map_err(|e| self.fail(e))?;
        self.finish(&tmp, g, false)
    }

    /// As [`Target::generate`], from the circuit's prefix and one part when `parts` gives
    /// them; a parts failure is logged and `blank` generated whole (which reports the
    /// circuit's own error, if it has one).
    fn generate_parts<C: Circuit<Scalar>, P: Parts>(
        &self,
        blank: C,
        parts: &P,
    ) -> Result<Made, TestgenError> {
        if self.opts.whole {
            return self.generate(blank);
        }
        let tmp = self.tmp();
        match paramgen::generate_parts(parts, &self.toxic(), self.fbm, Some(&tmp)) {
            Ok(Some(g)) => self.finish(&tmp, g, true),
            Ok(None) => self.generate(blank),
            Err(e) => {
                tracing::warn!(
                    circuit_id = self.circuit_id,
                    "generating from the whole circuit, not from parts: {e}"
                );
                self.generate(blank)
            }
        }
    }

    /// The parameters' temporary name, so that a crash never leaves a truncated file
    /// under the standard name; per process: two test processes may generate the same
    /// file.
    fn tmp(&self) -> PathBuf {
        self.params
            .with_extension(format!("params.partial-{}", std::process::id()))
    }

    /// Writes the verifying key and moves the parameters written at `tmp` to their name;
    /// the toxic waste is dropped with `g`.
    fn finish(&self, tmp: &Path, g: Generated, from_parts: bool) -> Result<Made, TestgenError> {
        let mut vk_bytes = Vec::new();
        g.srs.vk.write(&mut vk_bytes).map_err(|e| self.fail(e))?;
        std::fs::write(self.vk, vk_bytes).map_err(|e| TestgenError::io(self.vk, e))?;
        std::fs::rename(tmp, self.params).map_err(|e| TestgenError::io(self.params, e))?;
        Ok(Made {
            from_parts,
            n_rows: g.n_rows,
            stages: g.stages,
            fixed_base_stages: g.fixed_base_stages,
        })
    }
}

fn gen_porep<Tree: 'static + MerkleTreeTrait>(
    cfg: &filecoin_proofs::PoRepConfig,
    size: SectorSize,
    target: &Target<'_>,
) -> Result<Made, TestgenError> {
    let pp = filecoin_proofs::parameters::public_params::<Tree>(cfg)
        .map_err(|e| target.fail(format!("{e:#}")))?;
    let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::blank_circuit(&pp);
    let parts = blank::BlankChallenges::new(&pp, size)?;
    target.generate_parts(blank, &parts)
}

fn gen_post<Tree: 'static + MerkleTreeTrait>(
    cfg: &filecoin_proofs::PoStConfig,
    target: &Target<'_>,
) -> Result<Made, TestgenError> {
    let pp = match cfg.typ {
        filecoin_proofs::PoStType::Winning => {
            filecoin_proofs::parameters::winning_post_public_params::<Tree>(cfg)
        }
        filecoin_proofs::PoStType::Window => {
            filecoin_proofs::parameters::window_post_public_params::<Tree>(cfg)
        }
    }
    .map_err(|e| target.fail(format!("{e:#}")))?;
    let blank =
        <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::blank_circuit(
            &pp,
        );
    let parts = blank::BlankSectors::new(&blank);
    target.generate_parts(blank, &parts)
}

fn gen_update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    target: &Target<'_>,
) -> Result<Made, TestgenError> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(size.bytes());
    let blank = <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::blank_circuit(&pp);
    target.generate(blank)
}
