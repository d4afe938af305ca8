//! What the four kinds share once their circuits exist: synthesizing a storage-proofs
//! circuit into cuzk's `Assignment`, laying partition proofs out in filecoin-proofs' byte
//! format (192-byte compressed proofs concatenated in partition order, no header), and the
//! check that filecoin-proofs' compound verifiers run (`CompoundProof::verify`): the bytes
//! are read back the way `MultiProof::new_from_bytes` reads them and batch-verified with
//! bellperson against each partition's public inputs.
//!
//! Request parsing, circuits and public inputs stay in the kind modules.

use bellperson::groth16::{prepare_verifying_key, verify_proofs_batch};
use bellperson::Circuit;
use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{Assignment, KindError, Proof, Scalar, Synthesizer, VerifyingKey};

/// Bytes of one compressed Groth16 proof (G1 48 ‖ G2 96 ‖ G1 48).
pub const PROOF_BYTES: usize = 192;

/// Synthesizes `circuit` (partition `partition_idx` of a `circuit_id` proof), also given
/// as its parts (a shared prefix, then sub-circuits of one structure: PoRep's and
/// SnapDeals' challenges, PoSt's sectors), with cuzk's constraint system through `synth`'s
/// recording of the circuit id's shape (`cuzk_groth16::Synthesizer`): the first call
/// records it from the prefix and one part where the parts allow it, and later calls
/// compute only the witness, part by part on the rayon pool (`cuzk_groth16::sublayout`).
pub(crate) fn synthesize_parts<C: Circuit<Scalar> + Clone, P: Parts>(
    synth: &Synthesizer,
    circuit_id: &str,
    circuit: C,
    parts: &P,
    partition_idx: usize,
) -> Result<Assignment, KindError> {
    synth
        .synthesize_parts(circuit_id, circuit, parts)
        .map_err(|e| KindError::Synthesis {
            partition_idx,
            reason: e.to_string(),
        })
}

/// A circuit that is not `Clone`, as a cloneable handle on the function that builds it:
/// each `synthesize` builds a fresh one. A build that fails (it succeeded once before
/// this handle was made, and is deterministic) reports a missing assignment.
pub(crate) struct Rebuild<'a, F>(pub &'a F);

impl<F> Clone for Rebuild<'_, F> {
    fn clone(&self) -> Self {
        Rebuild(self.0)
    }
}

impl<C, E, F> Circuit<Scalar> for Rebuild<'_, F>
where
    C: Circuit<Scalar>,
    F: Fn() -> Result<C, E>,
{
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        match (self.0)() {
            Ok(circuit) => circuit.synthesize(cs),
            Err(_) => Err(bellperson::SynthesisError::AssignmentMissing),
        }
    }
}

/// Maps a circuit-construction error from the storage-proofs crates.
pub(crate) fn circuit_error(partition_idx: usize, err: impl std::fmt::Display) -> KindError {
    KindError::Synthesis {
        partition_idx,
        reason: format!("building the circuit: {err:#}"),
    }
}

/// Writes `proofs` in partition order and verifies them against `inputs[k]` (partition k's
/// public inputs without ONE), returning the bytes.
pub(crate) fn assemble_and_verify(
    proofs: &[Proof],
    inputs: &[Vec<Scalar>],
    vk: &VerifyingKey,
) -> Result<Vec<u8>, KindError> {
    let bytes = assemble(proofs, inputs.len())?;
    verify_bytes(&bytes, inputs, vk)?;
    Ok(bytes)
}

/// Writes `proofs` in partition order, unverified: only for fake requests
/// (`ParseOptions::fake_ok`), whose proofs cannot verify.
pub(crate) fn assemble_fake(
    circuit_id: &str,
    proofs: &[Proof],
    partitions: usize,
) -> Result<Vec<u8>, KindError> {
    tracing::warn!(
        circuit_id,
        partitions,
        "FAKE request: proof assembled without verification (random inputs: it cannot verify)"
    );
    assemble(proofs, partitions)
}

fn assemble(proofs: &[Proof], partitions: usize) -> Result<Vec<u8>, KindError> {
    if proofs.len() != partitions {
        return Err(KindError::Verification {
            reason: format!(
                "{} partition proofs for {partitions} partitions",
                proofs.len()
            ),
        });
    }
    let mut bytes = Vec::with_capacity(PROOF_BYTES * proofs.len());
    for proof in proofs {
        proof
            .write(&mut bytes)
            .map_err(|e| KindError::Other(format!("writing a proof: {e}")))?;
    }
    Ok(bytes)
}

/// Logs that a fake request was accepted (once per parse): every log line about a fake
/// says so.
pub(crate) fn warn_fake(kind: crate::FilecoinKind, size: crate::SectorSize) {
    tracing::warn!(
        %kind,
        %size,
        "FAKE request accepted (benchmark only): vanilla proofs unchecked, its proof cannot verify"
    );
}

/// Verifies proof bytes in filecoin-proofs' layout against per-partition public inputs.
///
/// # Errors
/// [`KindError::Verification`] when the bytes do not decode or a partition fails.
pub fn verify_bytes(
    bytes: &[u8],
    inputs: &[Vec<Scalar>],
    vk: &VerifyingKey,
) -> Result<(), KindError> {
    if bytes.len() != PROOF_BYTES * inputs.len() {
        return Err(KindError::Verification {
            reason: format!(
                "{} proof bytes for {} partitions (need {})",
                bytes.len(),
                inputs.len(),
                PROOF_BYTES * inputs.len()
            ),
        });
    }
    // Decompress with subgroup checks, as filecoin-proofs' verifiers do.
    let decoded = Proof::read_many(bytes, inputs.len()).map_err(|e| KindError::Verification {
        reason: format!("proof bytes do not decode: {e}"),
    })?;
    let refs: Vec<&Proof> = decoded.iter().collect();
    let pvk = prepare_verifying_key(vk);
    let ok = verify_proofs_batch(&pvk, &mut rand::rngs::OsRng, &refs, inputs).map_err(|e| {
        KindError::Verification {
            reason: format!("verifier error: {e}"),
        }
    })?;
    if ok {
        Ok(())
    } else {
        Err(KindError::Verification {
            reason: "the batch of partition proofs does not verify against the public inputs"
                .to_string(),
        })
    }
}

/// Reads a 32-byte field of the request.
pub(crate) fn bytes32(field: &'static str, value: &[u8]) -> Result<[u8; 32], KindError> {
    <[u8; 32]>::try_from(value).map_err(|_| KindError::InvalidField {
        field,
        reason: format!("must be 32 bytes, got {}", value.len()),
    })
}

/// Checks the request's `sector_size` (0 = not given) against the registered proof's.
pub(crate) fn check_sector_size(
    req_bytes: u64,
    registered: crate::SectorSize,
) -> Result<(), KindError> {
    if req_bytes != 0 && req_bytes != registered.bytes() {
        return Err(KindError::InvalidField {
            field: "sector_size",
            reason: format!(
                "{req_bytes} does not match registered_proof's sector size {registered} ({} bytes)",
                registered.bytes()
            ),
        });
    }
    Ok(())
}
