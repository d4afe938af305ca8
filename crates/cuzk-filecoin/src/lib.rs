//! Filecoin proof kinds for cuzk: parse requests, build each partition's circuit with the
//! storage-proofs crates, assemble and verify multi-partition proofs in filecoin-proofs'
//! byte format, name parameter files, and make test sectors and parameters.
//!
//! Entry point: [`parse`] turns a kind-neutral [`ProofRequest`] into a
//! `Box<dyn PartitionedProof>` for one of the four [`FilecoinKind`]s, choosing the sector
//! shape from `registered_proof` (every size the ABI defines: 2 KiB, 8 MiB, 512 MiB,
//! 32 GiB, 64 GiB; for PoRep every seal proof: interactive, synthetic and
//! non-interactive). Each kind lives in its own module (`porep.rs`, `post.rs`, `snap.rs`);
//! `partition.rs` holds what they share (synthesis into cuzk's [`Assignment`], proof
//! layout and the batch verification that filecoin-proofs' verifiers run); `snarkpack.rs`
//! aggregates a non-interactive PoRep's partition proofs; `params.rs` maps circuit ids to
//! the standard `v28-*` parameter files; `testgen/` makes test-only parameters and sealed
//! test sectors.
//!
//! [`Assignment`]: cuzk_groth16::Assignment
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Calls the generic function `$f::<Tree>($args..)` with the sector shape (merkle tree
/// type) of `$size` (a [`SectorSize`]), as filecoin-proofs' `with_shape!` does, but
/// without its panic on sizes it does not know: [`SectorSize`] has only valid sizes.
macro_rules! with_tree {
    ($size:expr, $f:ident $(, $args:expr)* $(,)?) => {
        match $size {
            $crate::SectorSize::S2KiB => $f::<filecoin_proofs::SectorShape2KiB>($($args),*),
            $crate::SectorSize::S8MiB => $f::<filecoin_proofs::SectorShape8MiB>($($args),*),
            $crate::SectorSize::S512MiB => $f::<filecoin_proofs::SectorShape512MiB>($($args),*),
            $crate::SectorSize::S32GiB => $f::<filecoin_proofs::SectorShape32GiB>($($args),*),
            $crate::SectorSize::S64GiB => $f::<filecoin_proofs::SectorShape64GiB>($($args),*),
        }
    };
}

pub mod engine;
mod native;
pub mod params;
mod partition;
pub mod porep;
pub mod post;
pub mod registry;
pub mod snap;
pub mod snarkpack;
pub mod testgen;

pub use params::{
    all_circuits, circuit_params_path, default_param_dir, params_file_name, vk_file_name,
};
pub use registry::{
    circuit_id, parse_circuit_id, FilecoinKind, PoRepVariant, Registered, SectorSize,
};

use cuzk_groth16::{KindError, PartitionedProof, ProofRequest};

/// Parses and validates a request of `kind`, returning the proof ready to be proved
/// partition by partition; files beyond the circuit's parameters (a non-interactive
/// PoRep's SnarkPack key) are looked up in [`default_param_dir`]. The production parse:
/// fake requests are refused.
///
/// # Errors
/// [`KindError::InvalidField`] naming the first bad field (`registered_proof`,
/// `sector_size`, `vanilla_proof`, `vanilla_proofs`, `randomness`, `comm_r_old`, ...).
pub fn parse(
    kind: FilecoinKind,
    req: &ProofRequest,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    parse_in(kind, req, &default_param_dir())
}

/// [`parse`] with the parameter directory given: where a non-interactive PoRep's
/// SnarkPack key (`v28-fil-inner-product-v1.srs`) must be.
///
/// # Errors
/// As [`parse`]; [`KindError::Other`] when that key is missing.
pub fn parse_in(
    kind: FilecoinKind,
    req: &ProofRequest,
    param_dir: &std::path::Path,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    parse_with(kind, req, param_dir, ParseOptions::default())
}

/// How [`parse_with`] treats a request. The default is production's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Accept fake requests (`cuzk gen request --fake`, [`testgen::FakeRequest`]): skip
    /// the checks of the vanilla proofs against the request's commitments before
    /// synthesis, and the verification of the assembled proof after proving (a fake's
    /// proof cannot verify; it is returned unverified). **Benchmarks only**: `cuzk bench
    /// batch --fake` sets it; the daemon and every production path never do.
    pub fake_ok: bool,
}

/// [`parse_in`] with `opts`.
///
/// # Errors
/// As [`parse_in`]; with `fake_ok`, vanilla proofs that do not verify are accepted.
pub fn parse_with(
    kind: FilecoinKind,
    req: &ProofRequest,
    param_dir: &std::path::Path,
    opts: ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    match kind {
        FilecoinKind::PoRep => porep::parse(req, param_dir, opts),
        FilecoinKind::WindowPoSt | FilecoinKind::WinningPoSt => post::parse(kind, req, opts),
        FilecoinKind::SnapDeals => snap::parse(req, opts),
    }
}

/// Runs `f`, turning a panic inside the storage-proofs crates (which index into
/// deserialized proofs without checks) into [`KindError::InvalidField`] on `field`, so
/// that a malformed payload fails its job instead of a worker thread.
pub(crate) fn guard<T>(field: &'static str, f: impl FnOnce() -> T) -> Result<T, KindError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        KindError::InvalidField {
            field,
            reason: format!("rejected by filecoin-proofs: {msg}"),
        }
    })
}

/// The prover id filecoin-ffi derives from a miner (actor) id: the id as an unsigned
/// LEB128 varint, zero-padded to 32 bytes.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            break;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_id_is_leb128() {
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
        assert_eq!(prover_id(u64::MAX)[9], 0x01);
    }
}
