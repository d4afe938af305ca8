//! **Fake** real-size requests: payloads of the true shape for any sector size (32 GiB and
//! 64 GiB included) made from random data in seconds, without sealing, so that real-size
//! synthesis and proving can be benchmarked on a machine that never sealed a sector.
//! **Their proofs cannot verify**: the labels, leaves and siblings are random, so the
//! circuits' constraints do not hold. Only benchmarks accept them, through
//! [`ParseOptions::fake_ok`](crate::ParseOptions); the production parsers refuse them.
//!
//! What is real about them (so that the circuits have exactly the production shape): the
//! counts (partitions, challenges, sectors, Merkle path depths and arities, column rows,
//! parents), the challenge positions (derived from the seed, replica id, randomness or
//! `comm_r_new` as the provers derive them, so each path's index bits select the right
//! siblings), the replica id (`generate_replica_id` of the ticket and `comm_d`),
//! `comm_r = Poseidon2(comm_c, comm_r_last)`, and what the circuits *assert* in Rust rather
//! than constrain (SnapDeals: `leaf_r_new = leaf_r_old + leaf_d_new · rho`, one tree-D
//! partition path per partition). See `../shared/synthesis-notes.md` §5.
//!
//! Owns [`FakeRequest`] (generation, and the request file `cuzk gen request` writes) and
//! [`PayloadShape`] (the structure counts of any payload, real or fake). The per-kind
//! generators live in `porep.rs`, `post.rs` and `snap.rs`; the request parsers stay in the
//! kind modules.

mod porep;
mod post;
mod snap;

pub(super) use porep::structure_challenge;

use std::io::Write as _;
use std::path::Path;

use cuzk_groth16::ProofRequest;
use filecoin_hashers::Domain;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::TestgenError;
use crate::registry::{FilecoinKind, SectorSize};

/// The first line of every fake request file, and the note a fake PoRep payload carries
/// in its `Fake` field: whoever opens one learns what it is.
pub const FAKE_NOTE: &str =
    "FAKE cuzk request (cuzk gen request --fake): random data of the true shape; its proofs cannot verify";

/// Miner id of every fake request (the prover id is its LEB128 encoding).
pub const FAKE_MINER_ID: u64 = 1000;
/// Sector number of every fake request (WindowPoSt sectors are numbered from it).
pub const FAKE_SECTOR_NUMBER: u64 = 1;

/// A fake request of `kind` at `size`: the wire fields a client would send, filled with
/// random data of the true shape. Its proofs cannot verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeRequest {
    /// The proof kind.
    pub kind: FilecoinKind,
    /// The sector size.
    pub size: SectorSize,
    /// The seed it was made from (the same seed makes the same bytes).
    pub seed: u64,
    /// The request, as the server hands it to the parsers.
    pub request: ProofRequest,
}

impl FakeRequest {
    /// Makes a fake request of `kind` at `size` from `seed`, on all cores.
    ///
    /// # Errors
    /// [`TestgenError`] when a filecoin-proofs set-up call fails.
    pub fn generate(
        kind: FilecoinKind,
        size: SectorSize,
        seed: u64,
    ) -> Result<FakeRequest, TestgenError> {
        let request = match kind {
            FilecoinKind::PoRep => porep::request(size, seed)?,
            FilecoinKind::WindowPoSt | FilecoinKind::WinningPoSt => {
                post::request(kind, size, seed)?
            }
            FilecoinKind::SnapDeals => snap::request(size, seed)?,
        };
        Ok(FakeRequest {
            kind,
            size,
            seed,
            request,
        })
    }

    /// The file name `cuzk gen request` uses when none is given: it says "fake".
    pub fn default_file_name(kind: FilecoinKind, size: SectorSize, seed: u64) -> String {
        format!("fake-{kind}-{size}-seed{seed}.cuzkreq")
    }

    /// Payload bytes (all of `vanilla_proof` and `vanilla_proofs`).
    pub fn payload_bytes(&self) -> usize {
        self.request.vanilla_proof.len()
            + self
                .request
                .vanilla_proofs
                .iter()
                .map(Vec::len)
                .sum::<usize>()
    }

    /// Writes the request file: [`FAKE_NOTE`] and a newline, then the bincode of the kind,
    /// size, seed and wire fields.
    ///
    /// # Errors
    /// [`TestgenError::Io`] naming the file.
    pub fn write(&self, path: &Path) -> Result<(), TestgenError> {
        let body = FileBody::from(self);
        let bytes = bincode::serialize(&body)
            .map_err(|e| TestgenError::Encode(format!("fake request: {e}")))?;
        let io = |e| TestgenError::io(path, e);
        let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
        file.write_all(FAKE_NOTE.as_bytes()).map_err(io)?;
        file.write_all(b"\n").map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.flush().map_err(io)
    }

    /// Reads a request file written by [`FakeRequest::write`].
    ///
    /// # Errors
    /// [`TestgenError::Io`] when it cannot be read, [`TestgenError::Encode`] when it is not
    /// a fake request file.
    pub fn read(path: &Path) -> Result<FakeRequest, TestgenError> {
        let bytes = std::fs::read(path).map_err(|e| TestgenError::io(path, e))?;
        let body = bytes
            .strip_prefix(FAKE_NOTE.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"\n"))
            .ok_or_else(|| {
                TestgenError::Encode(format!(
                    "{}: not a fake request file (written by `cuzk gen request --fake`)",
                    path.display()
                ))
            })?;
        let body: FileBody = bincode::deserialize(body)
            .map_err(|e| TestgenError::Encode(format!("{}: {e}", path.display())))?;
        body.into_request()
            .map_err(|e| TestgenError::Encode(format!("{}: {e}", path.display())))
    }
}

/// The request file's body (bincode).
#[derive(Serialize, Deserialize)]
struct FileBody {
    kind: i32,
    sector_size: u64,
    seed: u64,
    registered_proof: u64,
    vanilla_proof: Vec<u8>,
    vanilla_proofs: Vec<Vec<u8>>,
    sector_number: u64,
    miner_id: u64,
    randomness: Vec<u8>,
    partition_index: u32,
    comm_r_old: Vec<u8>,
    comm_r_new: Vec<u8>,
    comm_d_new: Vec<u8>,
}

impl From<&FakeRequest> for FileBody {
    fn from(f: &FakeRequest) -> FileBody {
        let r = f.request.clone();
        FileBody {
            kind: f.kind as i32,
            sector_size: f.size.bytes(),
            seed: f.seed,
            registered_proof: r.registered_proof,
            vanilla_proof: r.vanilla_proof,
            vanilla_proofs: r.vanilla_proofs,
            sector_number: r.sector_number,
            miner_id: r.miner_id,
            randomness: r.randomness,
            partition_index: r.partition_index,
            comm_r_old: r.comm_r_old,
            comm_r_new: r.comm_r_new,
            comm_d_new: r.comm_d_new,
        }
    }
}

impl FileBody {
    fn into_request(self) -> Result<FakeRequest, String> {
        let kind = FilecoinKind::from_wire(self.kind)
            .ok_or_else(|| format!("unknown proof kind {}", self.kind))?;
        let size = SectorSize::from_bytes(self.sector_size)
            .ok_or_else(|| format!("unknown sector size {}", self.sector_size))?;
        Ok(FakeRequest {
            kind,
            size,
            seed: self.seed,
            request: ProofRequest {
                sector_size: self.sector_size,
                registered_proof: self.registered_proof,
                vanilla_proof: self.vanilla_proof,
                vanilla_proofs: self.vanilla_proofs,
                sector_number: self.sector_number,
                miner_id: self.miner_id,
                randomness: self.randomness,
                partition_index: self.partition_index,
                comm_r_old: self.comm_r_old,
                comm_r_new: self.comm_r_new,
                comm_d_new: self.comm_d_new,
            },
        })
    }
}

/// The structure of a payload, real or fake, read back with the storage-proofs types:
/// what must match between a fake and a real request of the same kind and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadShape {
    /// Partitions (PoRep, SnapDeals); 1 for a WindowPoSt request.
    pub partitions: usize,
    /// Per partition: challenges (PoRep, SnapDeals) or sectors (WindowPoSt).
    pub per_partition: usize,
    /// Every Merkle path of one challenge (or sector), by name, as siblings per level from
    /// the leaf up (tree D: 1 per level; tree R/C of a 32 GiB sector: 7 × 9, then 7).
    pub paths: Vec<(String, Vec<usize>)>,
    /// Other counts of one challenge (or sector): column rows, parents, apex leaves, ...
    pub counts: Vec<(String, usize)>,
    /// Whether every challenge (or sector) of every partition has the same paths and
    /// counts as the first.
    pub uniform: bool,
}

impl PayloadShape {
    /// Reads the structure of `request`'s payload for `kind`.
    ///
    /// # Errors
    /// [`TestgenError::Encode`] when the payload does not decode.
    pub fn of(kind: FilecoinKind, request: &ProofRequest) -> Result<PayloadShape, TestgenError> {
        match kind {
            FilecoinKind::PoRep => porep::shape(request),
            FilecoinKind::WindowPoSt | FilecoinKind::WinningPoSt => post::shape(request),
            FilecoinKind::SnapDeals => snap::shape(request),
        }
    }

    /// The siblings per level of the path named `name`, if there is one.
    pub fn path(&self, name: &str) -> Option<&[usize]> {
        self.paths
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The count named `name`, if there is one.
    pub fn count(&self, name: &str) -> Option<usize> {
        self.counts.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// Siblings per level of a storage-proofs Merkle path.
fn levels<D>(path: &[(Vec<D>, usize)]) -> Vec<usize> {
    path.iter().map(|(siblings, _)| siblings.len()).collect()
}

/// The arities of tree R and tree C (Poseidon) for a sector size: base, sub, top (0: no
/// such level), from filecoin-proofs' `SectorShape*` types.
#[derive(Clone, Copy, Debug)]
struct TreeShape {
    base_arity: usize,
    base_levels: usize,
    sub_arity: usize,
    top_arity: usize,
}

impl TreeShape {
    fn of(size: SectorSize) -> TreeShape {
        let nodes = size.bytes() as usize / 32;
        let (sub_arity, top_arity) = match size {
            SectorSize::S2KiB | SectorSize::S8MiB | SectorSize::S512MiB => (0, 0),
            SectorSize::S32GiB => (8, 0),
            SectorSize::S64GiB => (8, 2),
        };
        let base_leaves = nodes / sub_arity.max(1) / top_arity.max(1);
        TreeShape {
            base_arity: 8,
            // 8-ary levels: log2(leaves) / 3.
            base_levels: base_leaves.trailing_zeros() as usize / 3,
            sub_arity,
            top_arity,
        }
    }

    /// Levels of a whole path (base, then one sub and one top level where they exist).
    fn path_len(&self) -> usize {
        self.base_levels + usize::from(self.sub_arity > 0) + usize::from(self.top_arity > 0)
    }

    /// A path to leaf `node` in `MerkleProof::from_parts`' form: random siblings, the index
    /// at each level taken from `node`'s digits (base levels least significant first, then
    /// the sub-tree, then the top-tree).
    fn path<D: Domain>(&self, node: usize, rng: &mut ChaCha8Rng) -> Vec<(Vec<D>, usize)> {
        let mut path = Vec::with_capacity(self.path_len());
        let mut rest = node;
        for _ in 0..self.base_levels {
            path.push((
                random_domains(rng, self.base_arity - 1),
                rest % self.base_arity,
            ));
            rest /= self.base_arity;
        }
        for arity in [self.sub_arity, self.top_arity] {
            if arity > 0 {
                path.push((random_domains(rng, arity - 1), rest % arity));
                rest /= arity;
            }
        }
        path
    }
}

/// A binary (tree D, SHA-256) path of `levels` levels to leaf `node`.
fn binary_path<D: Domain>(
    levels: usize,
    node: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<(Vec<D>, usize)> {
    (0..levels)
        .map(|i| (vec![random_domain(rng)], (node >> i) & 1))
        .collect()
}

/// A random field element as a domain value: 254 random bits are always below the
/// BLS12-381 scalar modulus (≈ 2^254.86), so every value is canonical.
fn random_domain<D: Domain>(rng: &mut ChaCha8Rng) -> D {
    D::from(random_bytes32(rng))
}

fn random_domains<D: Domain>(rng: &mut ChaCha8Rng, n: usize) -> Vec<D> {
    (0..n).map(|_| random_domain(rng)).collect()
}

/// 32 random bytes that are a canonical field element (top two bits clear).
fn random_bytes32(rng: &mut ChaCha8Rng) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

/// The random stream of item `index` of part `part` of a fake made from `seed`: each
/// item draws from its own stream, so the bytes do not depend on the thread count.
fn item_rng(seed: u64, part: u64, index: u64) -> ChaCha8Rng {
    use rand::SeedableRng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream((part << 48) | index);
    rng
}

/// `(0..n).map(f)` on all cores, in order.
fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .clamp(1, n.max(1));
    let chunk = n.div_ceil(threads);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (t * chunk..((t + 1) * chunk).min(n))
                        .map(f)
                        .collect::<Vec<T>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| -> Vec<T> {
                // A panic in `f` is a bug in this module: pass it on unchanged.
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
            .collect()
    })
}

/// Maps a filecoin-proofs set-up error.
fn setup_error(step: &'static str) -> impl Fn(anyhow::Error) -> TestgenError {
    move |e| TestgenError::Filecoin {
        step,
        message: format!("{e:#}"),
    }
}

#[cfg(test)]
mod tests;
