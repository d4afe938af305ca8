//! Test sectors: seal a small sector with filecoin-proofs (a committed-capacity sector of
//! zeros, as Lotus seals CC sectors) with the seal proof of any [`PoRepVariant`], then
//! write the request payloads a client would send for each kind, plus a manifest with the
//! public values a verifier needs. Owns [`SectorManifest`], [`gen_sector`] and
//! [`load_sector`].
//!
//! Files written under the output folder (the names are fixed; `cuzk gen sector --help`
//! lists them):
//! - `sector.json`: the manifest ([`SectorManifest`], hex for 32-byte values);
//! - `c1.json`: the PoRep C1 wrapper JSON (`{"SectorNum","Phase1Out","SectorSize"}`);
//! - `winning-vanilla-<i>.bin`, `window-vanilla-<i>.bin`: one bincode
//!   `FallbackPoStSectorProof` per sector;
//! - `snap-vanilla-<k>.bin`: one bincode update `PartitionProof` per partition;
//! - `work/`: the sealed and updated replicas and their caches (needed only to make more
//!   vanilla proofs; safe to delete).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use cuzk_groth16::ProofRequest;
use filecoin_proofs_api::{
    post, seal, update, PieceInfo, PrivateReplicaInfo, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use super::TestgenError;
use crate::registry::{FilecoinKind, PoRepVariant, Registered, SectorSize};

/// Manifest file name inside a test-sector folder.
pub const MANIFEST: &str = "sector.json";
/// PoRep C1 wrapper file name.
pub const C1_FILE: &str = "c1.json";

/// The public values of a test sector, as written to `sector.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SectorManifest {
    /// Sector size in bytes.
    pub sector_size: u64,
    /// Sector number.
    pub sector_number: u64,
    /// Miner (actor) id; the prover id is its LEB128 encoding.
    pub miner_id: u64,
    /// ABI number of the seal proof: V1_1 (5..=9), V1_1 synthetic (10..=14) or V1_2
    /// non-interactive (15..=19).
    pub porep_registered_proof: u64,
    /// ABI number of the WinningPoSt proof.
    pub winning_registered_proof: u64,
    /// ABI number of the WindowPoSt proof (V1_1 on the wire, the api's V1_2).
    pub window_registered_proof: u64,
    /// ABI number of the update proof.
    pub update_registered_proof: u64,
    /// Replica commitment of the sealed sector (hex).
    pub comm_r: String,
    /// Data commitment of the sealed sector (hex).
    pub comm_d: String,
    /// Sealing ticket (hex).
    pub ticket: String,
    /// Interactive PoRep seed (hex).
    pub seed: String,
    /// PoSt randomness used for both PoSt kinds (hex).
    pub randomness: String,
    /// Replica commitment after the SnapDeals update (hex).
    pub comm_r_new: String,
    /// Data commitment of the update's data (hex).
    pub comm_d_new: String,
    /// Number of `winning-vanilla-<i>.bin` files.
    pub winning_vanilla: usize,
    /// Number of `window-vanilla-<i>.bin` files.
    pub window_vanilla: usize,
    /// Number of `snap-vanilla-<k>.bin` files.
    pub snap_vanilla: usize,
}

/// A loaded test sector: its folder and manifest.
#[derive(Clone, Debug)]
pub struct TestSector {
    /// The folder holding the files.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: SectorManifest,
}

/// Seals a `size` sector with interactive PoRep under `out` and writes the payloads of
/// all four kinds; see [`gen_sector_with`].
///
/// # Errors
/// [`TestgenError`] naming the filecoin-proofs step or the file that failed.
pub fn gen_sector(size: SectorSize, out: &Path, seed: u64) -> Result<SectorManifest, TestgenError> {
    gen_sector_with(size, PoRepVariant::Interactive, out, seed)
}

/// Seals a `size` sector with the newest seal proof of `variant` under `out` and writes
/// the payloads of all four kinds (the PoSt and SnapDeals payloads do not depend on how
/// the sector was sealed). `seed` makes the ticket, PoRep seed, randomness and update
/// data reproducible. A synthetic sector gets its synthetic vanilla proofs made after
/// precommit, as Curio does, and C1 selects from them; a non-interactive one ignores the
/// PoRep seed (its challenges come from comm_r), which is still written.
///
/// # Errors
/// [`TestgenError`] naming the filecoin-proofs step or the file that failed.
pub fn gen_sector_with(
    size: SectorSize,
    variant: PoRepVariant,
    out: &Path,
    seed: u64,
) -> Result<SectorManifest, TestgenError> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut rand32 = || {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        b[31] &= 0x3f; // a field element, as the chain's randomness is masked
        b
    };
    let (ticket, porep_seed, randomness) = (rand32(), rand32(), rand32());
    let (sector_number, miner_id) = (1u64, 1000u64);
    let prover_id = crate::prover_id(miner_id);
    let sector_id = SectorId::from(sector_number);
    let abi = |kind| match kind {
        FilecoinKind::PoRep => variant.abi(size),
        _ => Registered::default_abi(kind, size),
    };
    let seal_proof = seal_proof(abi(FilecoinKind::PoRep))?;
    let winning_proof = post_proof(FilecoinKind::WinningPoSt, abi(FilecoinKind::WinningPoSt))?;
    let window_proof = post_proof(FilecoinKind::WindowPoSt, abi(FilecoinKind::WindowPoSt))?;
    let update_proof = update_proof(abi(FilecoinKind::SnapDeals))?;

    let work = out.join("work");
    let (cache, sealed, staged) = (work.join("cache"), work.join("sealed"), work.join("staged"));
    let (update_cache, updated, update_staged) = (
        work.join("update-cache"),
        work.join("updated"),
        work.join("update-staged"),
    );
    for d in [out, &work, &cache, &update_cache] {
        fs::create_dir_all(d).map_err(|e| TestgenError::io(d, e))?;
    }

    // Seal a CC sector: one piece of zeros filling it.
    let unpadded = UnpaddedBytesAmount::from(filecoin_proofs::PaddedBytesAmount(size.bytes()));
    let zeros = std::io::repeat(0).take_exact(u64::from(unpadded));
    let pieces = write_piece(seal_proof, zeros, &staged, unpadded)?;
    fs::File::create(&sealed).map_err(|e| TestgenError::io(&sealed, e))?;
    let step = |name: &'static str| {
        move |e: anyhow::Error| TestgenError::Filecoin {
            step: name,
            message: format!("{e:#}"),
        }
    };
    let pc1 = seal::seal_pre_commit_phase1(
        seal_proof, &cache, &staged, &sealed, prover_id, sector_id, ticket, &pieces,
    )
    .map_err(step("seal_pre_commit_phase1"))?;
    let pc2 = seal::seal_pre_commit_phase2(pc1, &cache, &sealed)
        .map_err(step("seal_pre_commit_phase2"))?;
    let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
    if variant == PoRepVariant::Synthetic {
        seal::generate_synth_proofs(
            &cache,
            &sealed,
            prover_id,
            sector_id,
            ticket,
            pc2.clone(),
            &pieces,
        )
        .map_err(step("generate_synth_proofs"))?;
    }
    let c1 = seal::seal_commit_phase1(
        &cache, &sealed, prover_id, sector_id, ticket, porep_seed, pc2, &pieces,
    )
    .map_err(step("seal_commit_phase1"))?;
    let c1_json =
        serde_json::to_vec(&c1).map_err(|e| TestgenError::Encode(format!("C1 output: {e}")))?;
    let wrapper = serde_json::json!({
        "SectorNum": sector_number,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(c1_json),
        "SectorSize": size.bytes(),
    });
    write(&out.join(C1_FILE), wrapper.to_string().as_bytes())?;

    // PoSt vanilla proofs for the one sector.
    let replica = |p| PrivateReplicaInfo::new(p, comm_r, cache.clone(), sealed.clone());
    let mut post_files = Vec::new();
    for (name, proof) in [("winning", winning_proof), ("window", window_proof)] {
        let challenges =
            post::generate_fallback_sector_challenges(proof, &randomness, &[sector_id], prover_id)
                .map_err(step("generate_fallback_sector_challenges"))?;
        let ours = challenges
            .get(&sector_id)
            .ok_or_else(|| TestgenError::Filecoin {
                step: "generate_fallback_sector_challenges",
                message: "no challenges for the sector".into(),
            })?;
        let vanilla = post::generate_single_vanilla_proof(proof, sector_id, &replica(proof), ours)
            .map_err(step("generate_single_vanilla_proof"))?;
        write(&out.join(format!("{name}-vanilla-0.bin")), &vanilla)?;
        post_files.push(1);
    }

    // SnapDeals: encode random data into the CC sector, prove every partition.
    let mut data = vec![0u8; u64::from(unpadded) as usize];
    rng.fill_bytes(&mut data);
    let update_pieces = write_piece(seal_proof, &data[..], &update_staged, unpadded)?;
    // The new replica must exist with the sector key's size before encoding.
    let replica = fs::File::create(&updated).map_err(|e| TestgenError::io(&updated, e))?;
    replica
        .set_len(size.bytes())
        .map_err(|e| TestgenError::io(&updated, e))?;
    drop(replica);
    let encoded = update::empty_sector_update_encode_into(
        update_proof,
        &updated,
        &update_cache,
        &sealed,
        &cache,
        &update_staged,
        &update_pieces,
    )
    .map_err(step("empty_sector_update_encode_into"))?;
    let partitions = update::generate_partition_proofs(
        update_proof,
        comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sealed,
        &cache,
        &updated,
        &update_cache,
    )
    .map_err(step("generate_partition_proofs"))?;
    for (k, p) in partitions.iter().enumerate() {
        write(&out.join(format!("snap-vanilla-{k}.bin")), &p.0)?;
    }

    let manifest = SectorManifest {
        sector_size: size.bytes(),
        sector_number,
        miner_id,
        porep_registered_proof: abi(FilecoinKind::PoRep),
        winning_registered_proof: abi(FilecoinKind::WinningPoSt),
        window_registered_proof: abi(FilecoinKind::WindowPoSt),
        update_registered_proof: abi(FilecoinKind::SnapDeals),
        comm_r: hex::encode(comm_r),
        comm_d: hex::encode(comm_d),
        ticket: hex::encode(ticket),
        seed: hex::encode(porep_seed),
        randomness: hex::encode(randomness),
        comm_r_new: hex::encode(encoded.comm_r_new),
        comm_d_new: hex::encode(encoded.comm_d_new),
        winning_vanilla: post_files[0],
        window_vanilla: post_files[1],
        snap_vanilla: partitions.len(),
    };
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| TestgenError::Encode(format!("manifest: {e}")))?;
    write(&out.join(MANIFEST), &text)?;
    Ok(manifest)
}

/// Reads a test sector written by [`gen_sector`].
///
/// # Errors
/// [`TestgenError`] when `sector.json` is missing or malformed.
pub fn load_sector(dir: &Path) -> Result<TestSector, TestgenError> {
    let path = dir.join(MANIFEST);
    let text = fs::read(&path).map_err(|e| TestgenError::io(&path, e))?;
    let manifest = serde_json::from_slice(&text)
        .map_err(|e| TestgenError::Encode(format!("{}: {e}", path.display())))?;
    Ok(TestSector {
        dir: dir.to_path_buf(),
        manifest,
    })
}

impl TestSector {
    /// The request a client would send for `kind` on this sector.
    ///
    /// # Errors
    /// [`TestgenError`] when a payload file cannot be read or the manifest's hex is bad.
    pub fn request(&self, kind: FilecoinKind) -> Result<ProofRequest, TestgenError> {
        let m = &self.manifest;
        let files = |prefix: &str, n: usize| -> Result<Vec<Vec<u8>>, TestgenError> {
            (0..n)
                .map(|i| self.read(&format!("{prefix}-vanilla-{i}.bin")))
                .collect()
        };
        let mut req = ProofRequest {
            sector_size: m.sector_size,
            sector_number: m.sector_number,
            miner_id: m.miner_id,
            ..Default::default()
        };
        match kind {
            FilecoinKind::PoRep => {
                req.registered_proof = m.porep_registered_proof;
                req.vanilla_proof = self.read(C1_FILE)?;
            }
            FilecoinKind::WinningPoSt => {
                req.registered_proof = m.winning_registered_proof;
                req.vanilla_proofs = files("winning", m.winning_vanilla)?;
                req.randomness = hex32(&m.randomness)?.to_vec();
            }
            FilecoinKind::WindowPoSt => {
                req.registered_proof = m.window_registered_proof;
                req.vanilla_proofs = files("window", m.window_vanilla)?;
                req.randomness = hex32(&m.randomness)?.to_vec();
                req.partition_index = 0;
            }
            FilecoinKind::SnapDeals => {
                req.registered_proof = m.update_registered_proof;
                req.vanilla_proofs = files("snap", m.snap_vanilla)?;
                req.comm_r_old = hex32(&m.comm_r)?.to_vec();
                req.comm_r_new = hex32(&m.comm_r_new)?.to_vec();
                req.comm_d_new = hex32(&m.comm_d_new)?.to_vec();
            }
        }
        Ok(req)
    }

    fn read(&self, name: &str) -> Result<Vec<u8>, TestgenError> {
        let path = self.dir.join(name);
        fs::read(&path).map_err(|e| TestgenError::io(&path, e))
    }
}

/// Decodes a 64-digit hex string.
///
/// # Errors
/// [`TestgenError::Encode`] when it is not 32 bytes of hex.
pub fn hex32(text: &str) -> Result<[u8; 32], TestgenError> {
    let bytes =
        hex::decode(text).map_err(|e| TestgenError::Encode(format!("hex {text:?}: {e}")))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| TestgenError::Encode(format!("{text:?} is not 32 bytes")))
}

/// The api enum for a seal ABI number.
pub(crate) fn seal_proof(abi: u64) -> Result<RegisteredSealProof, TestgenError> {
    match Registered::from_abi(FilecoinKind::PoRep, abi) {
        Ok(Registered::Seal(p)) => Ok(p),
        other => Err(TestgenError::Encode(format!("seal proof {abi}: {other:?}"))),
    }
}

/// The api enum for a PoSt ABI number.
pub(crate) fn post_proof(
    kind: FilecoinKind,
    abi: u64,
) -> Result<RegisteredPoStProof, TestgenError> {
    match Registered::from_abi(kind, abi) {
        Ok(Registered::PoSt(p)) => Ok(p),
        other => Err(TestgenError::Encode(format!(
            "{kind} proof {abi}: {other:?}"
        ))),
    }
}

/// The api enum for an update ABI number.
pub(crate) fn update_proof(abi: u64) -> Result<RegisteredUpdateProof, TestgenError> {
    match Registered::from_abi(FilecoinKind::SnapDeals, abi) {
        Ok(Registered::Update(p)) => Ok(p),
        other => Err(TestgenError::Encode(format!(
            "update proof {abi}: {other:?}"
        ))),
    }
}

/// Writes one piece filling the sector to a new staged file.
fn write_piece(
    proof: RegisteredSealProof,
    source: impl std::io::Read,
    path: &Path,
    unpadded: UnpaddedBytesAmount,
) -> Result<Vec<PieceInfo>, TestgenError> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| TestgenError::io(path, e))?;
    let (info, _) = seal::add_piece(proof, source, file, unpadded, &[]).map_err(|e| {
        TestgenError::Filecoin {
            step: "add_piece",
            message: format!("{e:#}"),
        }
    })?;
    Ok(vec![info])
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), TestgenError> {
    fs::write(path, bytes).map_err(|e| TestgenError::io(path, e))
}

/// A reader of exactly `n` bytes from an endless one.
trait TakeExact: std::io::Read + Sized {
    fn take_exact(self, n: u64) -> std::io::Take<Self> {
        self.take(n)
    }
}
impl<R: std::io::Read> TakeExact for R {}

/// Public values of a sector for filecoin-proofs' verifiers, from the manifest.
pub(crate) fn replicas(
    proof: RegisteredPoStProof,
    sector_number: u64,
    comm_r: [u8; 32],
) -> BTreeMap<SectorId, filecoin_proofs_api::PublicReplicaInfo> {
    let mut map = BTreeMap::new();
    map.insert(
        SectorId::from(sector_number),
        filecoin_proofs_api::PublicReplicaInfo::new(proof, comm_r),
    );
    map
}
