//! filecoin-proofs' own top-level verifiers (`verify_seal`, `verify_winning_post`,
//! `verify_window_post`, `verify_empty_sector_update_proof`, through filecoin-proofs-api)
//! applied to a proof of a test sector, with the public values taken from a
//! [`SectorManifest`] that a test may alter (wrong comm_r, randomness, miner id).
//!
//! These read the verifying key from `$FIL_PROOFS_PARAMETER_CACHE`, which filecoin-proofs
//! reads once per process: set it before the first call.

use filecoin_proofs_api::{post, seal, update, SectorId};

use super::sector::{hex32, post_proof, replicas, seal_proof, update_proof, SectorManifest};
use super::TestgenError;
use crate::registry::FilecoinKind;

/// Verifies `proof` of `kind` against the public values in `m` with filecoin-proofs.
/// `Ok(false)` means the verifier rejected it.
///
/// # Errors
/// [`TestgenError::Filecoin`] when the verifier cannot run (missing `.vk`, a value that
/// is not a field element).
pub fn verify_with_filecoin_proofs(
    kind: FilecoinKind,
    m: &SectorManifest,
    proof: &[u8],
) -> Result<bool, TestgenError> {
    let prover_id = crate::prover_id(m.miner_id);
    let step = |name: &'static str| {
        move |e: anyhow::Error| TestgenError::Filecoin {
            step: name,
            message: format!("{e:#}"),
        }
    };
    let comm_r = hex32(&m.comm_r)?;
    match kind {
        FilecoinKind::PoRep => seal::verify_seal(
            seal_proof(m.porep_registered_proof)?,
            comm_r,
            hex32(&m.comm_d)?,
            prover_id,
            SectorId::from(m.sector_number),
            hex32(&m.ticket)?,
            hex32(&m.seed)?,
            proof,
        )
        .map_err(step("verify_seal")),
        FilecoinKind::WinningPoSt => {
            let p = post_proof(kind, m.winning_registered_proof)?;
            post::verify_winning_post(
                &hex32(&m.randomness)?,
                proof,
                &replicas(p, m.sector_number, comm_r),
                prover_id,
            )
            .map_err(step("verify_winning_post"))
        }
        FilecoinKind::WindowPoSt => {
            let p = post_proof(kind, m.window_registered_proof)?;
            post::verify_window_post(
                &hex32(&m.randomness)?,
                &[(p, proof)],
                &replicas(p, m.sector_number, comm_r),
                prover_id,
            )
            .map_err(step("verify_window_post"))
        }
        FilecoinKind::SnapDeals => update::verify_empty_sector_update_proof(
            update_proof(m.update_registered_proof)?,
            proof,
            comm_r,
            hex32(&m.comm_r_new)?,
            hex32(&m.comm_d_new)?,
        )
        .map_err(step("verify_empty_sector_update_proof")),
    }
}
