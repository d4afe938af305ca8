//! The synthetic proof kind: a PoRep-like request of `n_partitions` partitions, each a
//! circuit of 2^log_n rows whose witness is drawn from a seed, so that every engine
//! feature (priorities, budgets, cancellation, multi-partition assembly and batch
//! verification) can be exercised without Filecoin inputs. Its parameters are generated
//! with `cuzk_groth16::paramgen` on first use and cached in the param dir as
//! `cuzk-synthetic-<structure seed>-<log_n>.params` (test-only toxic waste).
//!
//! Payload (`vanilla_proof`, 24 bytes, little-endian): the magic `CUZKSYN1`, `log_n: u32`,
//! `n_partitions: u32`, `seed: u64`. On the wire the kind is `ProofKind::SYNTHETIC` (100).
//!
//! Each partition is `cuzk_groth16::synthetic::SyntheticCircuit` (PoRep-shaped densities)
//! of exactly 2^log_n rows with one fixed structure seed, so parameters depend on log_n
//! only; the request seed and the partition index choose the witness. Public inputs are
//! recorded when a partition is synthesized, for the verification at assembly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, ProofRequest, Scalar, VerifyingKey,
};
use parking_lot::Mutex;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::registry::{KindRegistry, ParamsProvider};
use crate::ProofKindId;

/// Magic prefix of a synthetic payload.
pub const MAGIC: &[u8; 8] = b"CUZKSYN1";
/// Payload length in bytes.
pub const PAYLOAD_LEN: usize = 24;
/// Smallest and largest log2 of the domain served.
pub const LOG_N_RANGE: std::ops::RangeInclusive<u32> = 5..=27;
/// Most partitions per request.
pub const MAX_PARTITIONS: u32 = 64;

/// The parameters of a synthetic request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticSpec {
    /// log2 of each partition's domain.
    pub log_n: u32,
    /// Partitions in the request.
    pub n_partitions: u32,
    /// Witness seed.
    pub seed: u64,
}

impl SyntheticSpec {
    /// The `vanilla_proof` bytes of this request.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PAYLOAD_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.log_n.to_le_bytes());
        out.extend_from_slice(&self.n_partitions.to_le_bytes());
        out.extend_from_slice(&self.seed.to_le_bytes());
        out
    }

    /// Parses and validates a payload.
    ///
    /// # Errors
    /// [`KindError::InvalidField`] naming `vanilla_proof` and what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<SyntheticSpec, KindError> {
        let bad = |reason: String| KindError::InvalidField {
            field: "vanilla_proof",
            reason,
        };
        if bytes.is_empty() {
            return Err(bad(
                "empty; a synthetic request needs its 24-byte parameters".into(),
            ));
        }
        if bytes.len() != PAYLOAD_LEN {
            return Err(bad(format!(
                "synthetic parameters are {PAYLOAD_LEN} bytes, got {}",
                bytes.len()
            )));
        }
        if &bytes[..8] != MAGIC {
            return Err(bad("not synthetic parameters (bad magic)".into()));
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&bytes[16..24]);
        let spec = SyntheticSpec {
            log_n: u32_at(8),
            n_partitions: u32_at(12),
            seed: u64::from_le_bytes(seed),
        };
        if !LOG_N_RANGE.contains(&spec.log_n) {
            return Err(bad(format!("log_n {} outside {LOG_N_RANGE:?}", spec.log_n)));
        }
        if spec.n_partitions == 0 || spec.n_partitions > MAX_PARTITIONS {
            return Err(bad(format!(
                "n_partitions {} outside 1..={MAX_PARTITIONS}",
                spec.n_partitions
            )));
        }
        Ok(spec)
    }

    /// The circuit id of its parameters.
    pub fn circuit_id(&self) -> String {
        format!("synthetic-{}", self.log_n)
    }
}

/// Registers the synthetic kind and its parameters provider.
pub fn register(registry: &mut KindRegistry) {
    registry.register(ProofKindId::Synthetic, |req: &ProofRequest| {
        Ok(Arc::new(SyntheticProof::parse(req)?) as Arc<dyn PartitionedProof>)
    });
    registry.add_params(Arc::new(SyntheticParams));
}

/// A parsed synthetic request.
#[derive(Debug)]
pub struct SyntheticProof {
    spec: SyntheticSpec,
    /// Public inputs (without `ONE`) of each partition synthesized so far.
    inputs: Mutex<Vec<Option<Vec<Scalar>>>>,
}

impl SyntheticProof {
    /// Parses a request: only `vanilla_proof` is read; the Filecoin fields must be empty.
    ///
    /// # Errors
    /// [`KindError::InvalidField`] naming the field.
    pub fn parse(req: &ProofRequest) -> Result<SyntheticProof, KindError> {
        if !req.vanilla_proofs.is_empty() {
            return Err(KindError::InvalidField {
                field: "vanilla_proofs",
                reason: "must be empty for a synthetic request".into(),
            });
        }
        let spec = SyntheticSpec::decode(&req.vanilla_proof)?;
        let inputs = Mutex::new(vec![None; spec.n_partitions as usize]);
        Ok(SyntheticProof { spec, inputs })
    }

    /// The request's parameters.
    pub fn spec(&self) -> SyntheticSpec {
        self.spec
    }

    fn partition_seed(&self, partition_idx: usize) -> u64 {
        self.spec
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(partition_idx as u64 + 1)
    }
}

impl PartitionedProof for SyntheticProof {
    fn circuit_id(&self) -> String {
        self.spec.circuit_id()
    }

    fn params_path(&self, param_dir: &Path) -> PathBuf {
        params_file(param_dir, self.spec.log_n)
    }

    fn num_partitions(&self) -> usize {
        self.spec.n_partitions as usize
    }

    fn partition_host_bytes(&self) -> usize {
        // a, b, c and about one aux scalar per row, plus the density words.
        (1usize << self.spec.log_n) * (4 * 32 + 3)
    }

    fn synthesize(&self, partition_idx: usize) -> Result<Assignment, KindError> {
        let fail = |reason: String| KindError::Synthesis {
            partition_idx,
            reason,
        };
        let circuit = circuit(self.spec.log_n, self.partition_seed(partition_idx)).map_err(fail)?;
        let asg = cuzk_groth16::synthesize(circuit).map_err(|e| fail(e.to_string()))?;
        if let Some(slot) = self.inputs.lock().get_mut(partition_idx) {
            *slot = Some(asg.input_assignment.get(1..).unwrap_or_default().to_vec());
        }
        Ok(asg)
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        if let Some(Some(inputs)) = self.inputs.lock().get(partition_idx) {
            return Ok(inputs.clone());
        }
        // Not synthesized in this process: derive them by synthesizing once.
        let asg = self.synthesize(partition_idx)?;
        Ok(asg.input_assignment.get(1..).unwrap_or_default().to_vec())
    }

    fn assemble_and_verify(
        &self,
        proofs: &[Proof],
        vk: &VerifyingKey,
    ) -> Result<Vec<u8>, KindError> {
        if proofs.len() != self.num_partitions() {
            return Err(KindError::Verification {
                reason: format!(
                    "{} partition proofs for {} partitions",
                    proofs.len(),
                    self.num_partitions()
                ),
            });
        }
        let inputs = (0..proofs.len())
            .map(|i| self.public_inputs(i))
            .collect::<Result<Vec<_>, _>>()?;
        let pvk = bellperson::groth16::prepare_verifying_key(vk);
        let refs: Vec<&Proof> = proofs.iter().collect();
        let ok =
            bellperson::groth16::verify_proofs_batch(&pvk, &mut rand::rngs::OsRng, &refs, &inputs)
                .map_err(|e| KindError::Verification {
                    reason: e.to_string(),
                })?;
        if !ok {
            return Err(KindError::Verification {
                reason: "batch verification rejected the partition proofs".into(),
            });
        }
        let mut bytes = Vec::with_capacity(192 * proofs.len());
        for proof in proofs {
            proof
                .write(&mut bytes)
                .map_err(|e| KindError::Other(format!("writing proof: {e}")))?;
        }
        Ok(bytes)
    }
}

/// The parameters file of `synthetic-<log_n>`.
pub fn params_file(param_dir: &Path, log_n: u32) -> PathBuf {
    param_dir.join(format!("cuzk-synthetic-{STRUCTURE_SEED:x}-{log_n}.params"))
}

/// Circuit ids `synthetic-<log_n>` → `cuzk-synthetic-<seed>-<log_n>.params`, made on demand.
struct SyntheticParams;

fn parse_circuit_id(circuit_id: &str) -> Option<u32> {
    circuit_id
        .strip_prefix("synthetic-")?
        .parse()
        .ok()
        .filter(|n| LOG_N_RANGE.contains(n))
}

impl ParamsProvider for SyntheticParams {
    fn params_path(&self, circuit_id: &str, param_dir: &Path) -> Option<PathBuf> {
        parse_circuit_id(circuit_id).map(|log_n| params_file(param_dir, log_n))
    }

    fn ensure(&self, circuit_id: &str, path: &Path) -> Result<(), KindError> {
        if path.is_file() {
            return Ok(());
        }
        let log_n = parse_circuit_id(circuit_id).ok_or_else(|| {
            KindError::Other(format!("{circuit_id} is not a synthetic circuit id"))
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| KindError::Other(format!("creating {}: {e}", dir.display())))?;
        }
        tracing::info!(circuit_id, path = %path.display(), "generating synthetic parameters (test-only toxic waste)");
        // Write beside the target and rename, so a reader never sees half a file.
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = path.with_extension(format!("params.tmp{}-{nonce}", std::process::id()));
        let mut rng = ChaCha20Rng::from_entropy();
        let blank = circuit(log_n, 0).map_err(KindError::Other)?;
        cuzk_groth16::paramgen::generate_to_file(
            blank,
            &mut rng,
            &tmp,
            &cuzk_groth16::paramgen::CpuFixedBase::default(),
        )
        .map_err(|e| KindError::Other(format!("generating {circuit_id} parameters: {e}")))?;
        std::fs::rename(&tmp, path)
            .map_err(|e| KindError::Other(format!("renaming {}: {e}", tmp.display())))
    }

    fn can_generate(&self, circuit_id: &str) -> bool {
        parse_circuit_id(circuit_id).is_some()
    }
}

/// The structure seed of every synthetic circuit: parameters are per log_n, and requests
/// differ only in their witness.
const STRUCTURE_SEED: u64 = 0x6375_7a6b;

/// The PoRep-shaped circuit of 2^log_n rows, with the witness of `witness_seed`.
fn circuit(log_n: u32, witness_seed: u64) -> Result<SyntheticCircuit, String> {
    SyntheticCircuit::with_log_n(log_n, STRUCTURE_SEED, SyntheticShape::default())
        .map(|c| c.with_witness_seed(witness_seed))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(bytes: Vec<u8>) -> ProofRequest {
        ProofRequest {
            vanilla_proof: bytes,
            ..ProofRequest::default()
        }
    }

    #[test]
    fn payload_round_trips() {
        let spec = SyntheticSpec {
            log_n: 10,
            n_partitions: 3,
            seed: 42,
        };
        assert_eq!(SyntheticSpec::decode(&spec.encode()).ok(), Some(spec));
    }

    #[test]
    fn bad_payloads_name_the_field() {
        let good = SyntheticSpec {
            log_n: 10,
            n_partitions: 3,
            seed: 42,
        }
        .encode();
        let mut bad_magic = good.clone();
        bad_magic[0] = b'X';
        let big_log = SyntheticSpec {
            log_n: 40,
            n_partitions: 1,
            seed: 0,
        }
        .encode();
        let no_parts = SyntheticSpec {
            log_n: 10,
            n_partitions: 0,
            seed: 0,
        }
        .encode();
        for bytes in [
            Vec::new(),
            good[..23].to_vec(),
            bad_magic,
            big_log,
            no_parts,
            vec![0xff; 1000],
        ] {
            match SyntheticProof::parse(&request(bytes)) {
                Err(KindError::InvalidField {
                    field: "vanilla_proof",
                    ..
                }) => {}
                other => panic!("expected InvalidField(vanilla_proof), got {other:?}"),
            }
        }
        let mut req = request(good);
        req.vanilla_proofs = vec![vec![1]];
        assert!(matches!(
            SyntheticProof::parse(&req),
            Err(KindError::InvalidField {
                field: "vanilla_proofs",
                ..
            })
        ));
    }

    #[test]
    fn partitions_fill_the_domain_and_record_their_inputs() {
        for log_n in [5, 8] {
            let spec = SyntheticSpec {
                log_n,
                n_partitions: 2,
                seed: 7,
            };
            let proof = SyntheticProof::parse(&request(spec.encode())).expect("parse");
            let fresh = SyntheticProof::parse(&request(spec.encode())).expect("parse");
            let asg = proof.synthesize(1).expect("synthesis");
            assert_eq!(asg.n_rows(), 1 << log_n);
            let inputs = proof.public_inputs(1).expect("inputs");
            assert_eq!(asg.input_assignment[1..], inputs[..]);
            assert_eq!(
                fresh.public_inputs(1).expect("inputs"),
                inputs,
                "deterministic in the seed"
            );
            let other = proof.synthesize(0).expect("synthesis");
            assert_ne!(
                other.aux_assignment, asg.aux_assignment,
                "partitions have their own witness"
            );
        }
    }
}
