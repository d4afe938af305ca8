//! SnarkPack aggregation of a non-interactive PoRep's partition proofs (FIP-0090): the
//! chain verifies one aggregate of all partitions, as filecoin-proofs' `seal_commit_phase2`
//! makes it (`aggregate_seal_commit_proofs(.., AggregateVersion::V2)`, filecoin-proofs
//! 19.1 `api/seal.rs`) and `verify_seal` checks it (`verify_aggregate_seal_commit_proofs`).
//! Owns the inner-product key file `v28-fil-inner-product-v1.srs` (read here exactly as
//! filecoin-proofs reads it, cached per process) and the aggregate-then-verify step; the
//! partition proofs themselves come from `porep.rs`.
//!
//! The aggregate of n partition proofs (padded to a power of two by repeating the last
//! proof and its public inputs) is bound to a transcript of SHA-256(comm_r): for
//! NI-PoRep the seed is not part of it, since no seed draws the challenges.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use bellperson::groth16::aggregate::{
    aggregate_proofs, verify_aggregate_proof, AggregateVersion, GenericSRS, ProverSRS, VerifierSRS,
};
use bellperson::groth16::prepare_verifying_key;
use blstrs::{Bls12, G1Affine, G2Affine};
use cuzk_groth16::{KindError, Proof, Scalar, VerifyingKey};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

/// How many powers filecoin-proofs reads from each of the key file's four vectors
/// (storage-proofs-core 19.1 `parameter_cache::read_cached_srs_key`, `max_len`). The
/// verifier key depends on it (`h_alpha_d` is the power at `len - n`), so cuzk reads
/// exactly as many; the production file holds 2^20 per vector.
const SRS_POWERS_READ: usize = (2 << 14) + 1;

/// The SnarkPack version filecoin-proofs uses for NI-PoRep.
const VERSION: AggregateVersion = AggregateVersion::V2;

/// File name of the inner-product key in the parameter cache:
/// `v28-fil-inner-product-v1.srs` (storage-proofs-core `parameter_cache_srs_key_path`).
pub fn srs_file_name() -> String {
    use storage_proofs_core::parameter_cache::{SRS_KEY_EXT, SRS_SHARED_KEY_NAME, VERSION};
    format!("v{VERSION}-{SRS_SHARED_KEY_NAME}.{SRS_KEY_EXT}")
}

/// Path of the inner-product key under `param_dir`.
pub fn srs_path(param_dir: &Path) -> PathBuf {
    param_dir.join(srs_file_name())
}

/// Writes a **test-only** inner-product key able to aggregate up to `max_proofs` proofs
/// (from a random, discarded trapdoor: anyone holding it could forge aggregates) to
/// `path`, in the layout filecoin-proofs reads.
///
/// # Errors
/// The OS error when the file cannot be written.
pub fn write_test_srs(path: &Path, max_proofs: usize) -> std::io::Result<()> {
    let srs = bellperson::groth16::aggregate::setup_fake_srs::<Bls12, _>(
        &mut rand::rngs::OsRng,
        max_proofs,
    );
    let mut bytes = Vec::new();
    srs.write(&mut bytes)?;
    let tmp = path.with_extension(format!("srs.partial-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Aggregates `proofs` (partition k's proof verifies against `inputs[k]`) into one
/// SnarkPack proof for the sector `comm_r`, verifies the aggregate as `verify_seal` does,
/// and returns its bytes.
///
/// # Errors
/// [`KindError::Other`] when the key file cannot be read or is too small;
/// [`KindError::Verification`] when the aggregate does not verify.
pub fn aggregate_and_verify(
    srs_file: &Path,
    proofs: &[Proof],
    inputs: &[Vec<Scalar>],
    vk: &VerifyingKey,
    comm_r: &[u8; 32],
) -> Result<Vec<u8>, KindError> {
    if proofs.is_empty() || proofs.len() != inputs.len() {
        return Err(KindError::Verification {
            reason: format!(
                "{} partition proofs for {} partitions",
                proofs.len(),
                inputs.len()
            ),
        });
    }
    // filecoin-proofs `get_aggregate_target_len`: the next power of two, at least 2.
    let n = proofs.len().next_power_of_two().max(2);
    let keys = specialized(srs_file, n)?;
    let mut padded = proofs.to_vec();
    let mut padded_inputs = inputs.to_vec();
    // Repeat the last proof and its inputs (filecoin-proofs `pad_proofs_to_target`,
    // `pad_inputs_to_target`); both sides are non-empty, checked above.
    while padded.len() < n {
        padded.push(padded[padded.len() - 1].clone());
        padded_inputs.push(padded_inputs[padded_inputs.len() - 1].clone());
    }
    let transcript: [u8; 32] = Sha256::digest(comm_r).into();
    let aggregate = aggregate_proofs::<Bls12>(&keys.prover, &transcript, &padded, VERSION)
        .map_err(|e| KindError::Other(format!("snarkpack aggregation: {e}")))?;
    let mut bytes = Vec::new();
    aggregate
        .write(&mut bytes)
        .map_err(|e| KindError::Other(format!("writing the aggregate proof: {e}")))?;

    let pvk = prepare_verifying_key(vk);
    let ok = verify_aggregate_proof(
        &keys.verifier,
        &pvk,
        rand::rngs::OsRng,
        &padded_inputs,
        &aggregate,
        &transcript,
        VERSION,
    )
    .map_err(|e| KindError::Verification {
        reason: format!("aggregate verifier error: {e}"),
    })?;
    if !ok {
        return Err(KindError::Verification {
            reason: format!("the snarkpack aggregate of {n} proofs does not verify"),
        });
    }
    Ok(bytes)
}

/// The prover and verifier keys for aggregating `n` proofs.
struct Specialized {
    prover: ProverSRS<Bls12>,
    verifier: VerifierSRS<Bls12>,
}

/// The keys for `n` proofs from `srs_file`, read and specialized once per process (the
/// production file takes seconds to decode; specializing precomputes tables).
fn specialized(srs_file: &Path, n: usize) -> Result<Arc<Specialized>, KindError> {
    type Cache = Mutex<HashMap<(PathBuf, usize), Arc<Specialized>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = (srs_file.to_path_buf(), n);
    // A poisoned lock only means a load panicked; the map itself is still consistent.
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = map.get(&key) {
        return Ok(found.clone());
    }
    let generic = read_srs(srs_file)?;
    // `specialize` asserts 2n powers in each vector.
    let have = generic
        .g_alpha_powers
        .len()
        .min(generic.g_beta_powers.len())
        .min(generic.h_alpha_powers.len())
        .min(generic.h_beta_powers.len());
    if have < 2 * n {
        return Err(KindError::Other(format!(
            "{}: {have} powers, aggregating {n} proofs needs {}",
            srs_file.display(),
            2 * n
        )));
    }
    let (prover, verifier) = generic.specialize(n);
    let keys = Arc::new(Specialized { prover, verifier });
    map.insert(key, keys.clone());
    Ok(keys)
}

/// Reads the first [`SRS_POWERS_READ`] powers of each vector of a GenericSRS file
/// (`u32` big-endian length, then compressed points: g_alpha, g_beta in G1, h_alpha,
/// h_beta in G2), checking every point is on the curve and in the subgroup.
fn read_srs(path: &Path) -> Result<GenericSRS<Bls12>, KindError> {
    let fail = |what: String| KindError::Other(format!("{}: {what}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(format!("{e}")))?;
    let mut r = std::io::BufReader::new(file);
    let g1 = |b: &[u8; 48]| Option::from(G1Affine::from_compressed(b));
    let g2 = |b: &[u8; 96]| Option::from(G2Affine::from_compressed(b));
    let g_alpha_powers = read_vec(&mut r, g1).map_err(&fail)?;
    let g_beta_powers = read_vec(&mut r, g1).map_err(&fail)?;
    let h_alpha_powers = read_vec(&mut r, g2).map_err(&fail)?;
    let h_beta_powers = read_vec(&mut r, g2).map_err(&fail)?;
    Ok(GenericSRS {
        g_alpha_powers,
        h_alpha_powers,
        g_beta_powers,
        h_beta_powers,
    })
}

/// One vector of `N`-byte compressed points: its first `SRS_POWERS_READ` points decoded,
/// the rest skipped.
fn read_vec<const N: usize, P: Send>(
    r: &mut std::io::BufReader<std::fs::File>,
    decode: impl Fn(&[u8; N]) -> Option<P> + Sync,
) -> Result<Vec<P>, String> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)
        .map_err(|e| format!("reading a vector length: {e}"))?;
    let len = u32::from_be_bytes(len) as usize;
    let take = len.min(SRS_POWERS_READ);
    let mut raw = vec![0u8; take * N];
    r.read_exact(&mut raw)
        .map_err(|e| format!("truncated: {take} points of {N} bytes: {e}"))?;
    let skip = ((len - take) * N) as i64;
    r.seek_relative(skip)
        .map_err(|e| format!("skipping {} points: {e}", len - take))?;
    raw.par_chunks_exact(N)
        .enumerate()
        .map(|(i, chunk)| {
            // `par_chunks_exact(N)` yields slices of exactly N bytes.
            let bytes: &[u8; N] = chunk.try_into().map_err(|_| "chunk size".to_string())?;
            decode(bytes).ok_or_else(|| format!("point {i} is not a valid point"))
        })
        .collect()
}
