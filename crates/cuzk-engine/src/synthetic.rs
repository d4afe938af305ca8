//! The synthetic proof kind: a PoRep-like request of `n_partitions` partitions, each a
//! circuit of 2^log_n rows whose witness is drawn from a seed, so that every engine
//! feature (priorities, budgets, cancellation, multi-partition assembly and batch
//! verification) can be exercised without Filecoin inputs. Its parameters are generated
//! with `cuzk_groth16::paramgen` on first use and cached in the param dir as
//! `cuzk-synthetic-<log_n>.params` (test-only toxic waste).
//!
//! Payload (`vanilla_proof`, 24 bytes, little-endian): the magic `CUZKSYN1`, `log_n: u32`,
//! `n_partitions: u32`, `seed: u64`. On the wire the kind is `ProofKind::SYNTHETIC` (100).
//!
//! Circuit shape (fixed by log_n, values by seed and partition): one public input `out`;
//! aux `x_0`, then pairs of a boolean constraint `b_i · (1 − b_i) = 0` and a multiplication
//! `x_i · (x_i + b_i) = x_{i+1}`, and `x_m · 1 = out`. Rows (constraints plus the two
//! `input · 0 = 0` rows) fill the 2^log_n domain exactly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, ProofRequest, Scalar, VerifyingKey,
};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::registry::{KindRegistry, ParamsProvider};
use crate::ProofKindId;

/// Magic prefix of a synthetic payload.
pub const MAGIC: &[u8; 8] = b"CUZKSYN1";
/// Payload length in bytes.
pub const PAYLOAD_LEN: usize = 24;
/// Smallest and largest log2 of the domain served.
pub const LOG_N_RANGE: std::ops::RangeInclusive<u32> = 4..=27;
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
#[derive(Clone, Debug)]
pub struct SyntheticProof {
    spec: SyntheticSpec,
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
        Ok(SyntheticProof {
            spec: SyntheticSpec::decode(&req.vanilla_proof)?,
        })
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
        let circuit =
            ChainCircuit::with_witness(self.spec.log_n, self.partition_seed(partition_idx));
        cuzk_groth16::synthesize(circuit).map_err(|e| KindError::Synthesis {
            partition_idx,
            reason: e.to_string(),
        })
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        let circuit =
            ChainCircuit::with_witness(self.spec.log_n, self.partition_seed(partition_idx));
        Ok(vec![circuit.output()])
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
    param_dir.join(format!("cuzk-synthetic-{log_n}.params"))
}

/// Circuit ids `synthetic-<log_n>` → `cuzk-synthetic-<log_n>.params`, generated on demand.
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
        cuzk_groth16::paramgen::generate_to_file(
            ChainCircuit::blank(log_n),
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

/// The synthetic circuit (see the module docs for its shape).
struct ChainCircuit {
    log_n: u32,
    /// Witness seed; `None` for the blank circuit parameters are generated from.
    seed: Option<u64>,
}

impl ChainCircuit {
    fn blank(log_n: u32) -> Self {
        ChainCircuit { log_n, seed: None }
    }

    fn with_witness(log_n: u32, seed: u64) -> Self {
        ChainCircuit {
            log_n,
            seed: Some(seed),
        }
    }

    /// Constraints: the domain minus the two `input · 0 = 0` rows (ONE and `out`).
    fn n_constraints(&self) -> usize {
        (1usize << self.log_n) - 2
    }

    /// The witness: x_0 and the bits, or `None` for the blank circuit.
    fn witness(&self) -> Option<(Scalar, Vec<bool>)> {
        let seed = self.seed?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let x0 = Scalar::random(&mut rng);
        let n_bits = (self.n_constraints() - 1).div_ceil(2);
        let bits = (0..n_bits)
            .map(|_| rand::Rng::gen::<bool>(&mut rng))
            .collect();
        Some((x0, bits))
    }

    /// The public output x_m (zero for the blank circuit).
    fn output(&self) -> Scalar {
        let Some((mut x, bits)) = self.witness() else {
            return Scalar::ZERO;
        };
        let pairs = (self.n_constraints() - 1) / 2;
        for b in bits.iter().take(pairs) {
            x *= x + if *b { Scalar::ONE } else { Scalar::ZERO };
        }
        x
    }
}

impl Circuit<Scalar> for ChainCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let witness = self.witness();
        let n = self.n_constraints();
        let pairs = (n - 1) / 2;
        let bit = |i: usize| {
            witness
                .as_ref()
                .map(|(_, bits)| if bits[i] { Scalar::ONE } else { Scalar::ZERO })
        };
        let mut x_val = witness.as_ref().map(|(x0, _)| *x0);
        let mut x = cs.alloc(|| "x_0", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 0..pairs {
            let b_val = bit(i);
            let b = cs.alloc(|| "b", || b_val.ok_or(SynthesisError::AssignmentMissing))?;
            // b · (1 − b) = 0
            cs.enforce(|| "bit", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
            let next_val = x_val.zip(b_val).map(|(x, b)| x * (x + b));
            let next = cs.alloc(|| "x", || next_val.ok_or(SynthesisError::AssignmentMissing))?;
            // x_i · (x_i + b_i) = x_{i+1}
            cs.enforce(|| "mul", |lc| lc + x, |lc| lc + x + b, |lc| lc + next);
            x = next;
            x_val = next_val;
        }
        if (n - 1) % 2 == 1 {
            // One row left over: one more boolean constraint keeps the domain full.
            let b_val = bit(pairs);
            let b = cs.alloc(
                || "b_pad",
                || b_val.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(|| "bit_pad", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
        }
        let out = cs.alloc_input(|| "out", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        // x_m · 1 = out
        cs.enforce(|| "out", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + out);
        Ok(())
    }
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
    fn circuit_fills_the_domain_and_matches_its_output() {
        for log_n in [4, 5, 8] {
            let proof = SyntheticProof {
                spec: SyntheticSpec {
                    log_n,
                    n_partitions: 2,
                    seed: 7,
                },
            };
            let asg = proof.synthesize(1).expect("synthesis");
            assert_eq!(asg.n_rows(), 1 << log_n);
            assert_eq!(
                asg.input_assignment[1..],
                proof.public_inputs(1).expect("inputs")[..]
            );
            let other = proof.synthesize(0).expect("synthesis");
            assert_ne!(
                other.input_assignment[1], asg.input_assignment[1],
                "partitions differ"
            );
        }
    }
}
