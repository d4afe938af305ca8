//! A PoSt request's sectors run witness-only through the real circuit and through their
//! native mirror (`native/post_sector.rs`, the path the parts' witness takes), for tests
//! and benchmarks: whether the two give the same witness, and how long each took.

use std::ops::Range;
use std::time::Instant;

use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{KindError, ProofRequest};
use filecoin_proofs::{MerkleTreeTrait, PoStConfig};

use super::{post_config, FallbackPoStProof};
use crate::native::Collected;
use crate::registry::{FilecoinKind, SectorSize};

/// What [`compare_native_witness`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeComparison {
    /// `None` when every compared sector's mirror gives the real circuit's values in the
    /// same order and the same constraint count, else where the first one differs.
    pub difference: Option<String>,
    /// Sectors compared.
    pub n_sectors: usize,
    /// Witness-only time of the real one-sector circuits, summed, on this thread.
    pub gadget_ms: f64,
    /// Witness-only time of their mirrors, summed, on this thread.
    pub native_ms: f64,
}

/// Sectors `sectors` (all when `None`) of a WindowPoSt or WinningPoSt request, each run
/// witness-only through the real one-sector circuit and then through its native mirror,
/// one after the other on this thread. For tests and benchmarks; parses as
/// [`super::parse`] does. Witness generation does not check constraints, so fake requests
/// serve (their mirrors check no value).
///
/// # Errors
/// As [`super::parse`], and [`KindError::Synthesis`] naming the sector when either run
/// fails or the sector does not exist.
pub fn compare_native_witness(
    kind: FilecoinKind,
    req: &ProofRequest,
    opts: crate::ParseOptions,
    sectors: Option<Range<usize>>,
) -> Result<NativeComparison, KindError> {
    let (size, cfg) = post_config(kind, req)?;
    with_tree!(size, of, kind, size, cfg, req, opts, sectors)
}

fn of<Tree: 'static + MerkleTreeTrait>(
    kind: FilecoinKind,
    size: SectorSize,
    cfg: PoStConfig,
    req: &ProofRequest,
    opts: crate::ParseOptions,
    sectors: Option<Range<usize>>,
) -> Result<NativeComparison, KindError> {
    let proof = FallbackPoStProof::<Tree>::new(kind, size, cfg, req, opts)?;
    let parts = proof.sectors(proof.circuit()?);
    let mut found = NativeComparison {
        difference: None,
        n_sectors: 0,
        gadget_ms: 0.0,
        native_ms: 0.0,
    };
    for j in sectors.unwrap_or(0..parts.n_parts()) {
        let failed = |e: String| KindError::Synthesis {
            partition_idx: 0,
            reason: format!("sector {j}: {e}"),
        };
        let start = Instant::now();
        let gadgets = parts
            .part(j)
            .map_err(|e| failed(e.to_string()))
            .and_then(|p| Collected::of(p).map_err(|e| failed(e.to_string())))?;
        let gadget_done = Instant::now();
        let native = parts
            .witness_part(j)
            .map_err(|e| failed(e.to_string()))
            .and_then(|p| Collected::of(p).map_err(|e| failed(e.to_string())))?;
        found.gadget_ms += (gadget_done - start).as_secs_f64() * 1e3;
        found.native_ms += gadget_done.elapsed().as_secs_f64() * 1e3;
        found.n_sectors += 1;
        if let Some(diff) = native.difference(&gadgets) {
            found.difference = Some(format!("sector {j}: {diff}"));
            break;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use filecoin_proofs::SectorShape2KiB;

    use super::*;
    use crate::native::NativeSector;
    use crate::testgen::FakeRequest;
    use crate::ParseOptions;

    /// A fake 2 KiB WindowPoSt request's proof (its vanilla proofs unverified).
    fn fake_2k() -> FallbackPoStProof<SectorShape2KiB> {
        let kind = FilecoinKind::WindowPoSt;
        let fake = FakeRequest::generate(kind, SectorSize::S2KiB, 5).expect("fake");
        let (size, cfg) = post_config(kind, &fake.request).expect("a 2 KiB WindowPoSt");
        FallbackPoStProof::new(
            kind,
            size,
            cfg,
            &fake.request,
            ParseOptions { fake_ok: true },
        )
        .expect("parses")
    }

    /// On a verified request the mirror checks its Poseidon results against the vanilla
    /// proof. A fake's comm_r is `H(comm_c ‖ comm_r_last)` as a real one is, but its paths
    /// open to random roots, as a wrong digest of the mirror would give: the checked run
    /// refuses by name, the unchecked one (fakes, whose proofs are never verified) goes on;
    /// with another comm_r the checked run is refused at the comm_r check. See: #17.
    #[test]
    fn a_checked_native_sector_refuses_values_the_proof_contradicts() {
        let proof = fake_2k();
        let circuit = proof.circuit().expect("circuit");
        let vanilla = &proof.vanilla.sectors[0];
        let sector = &circuit.sectors[0];
        let native = |sector, check| NativeSector::new(sector, vanilla, check).expect("mirror");
        assert!(Collected::of(native(sector, false)).is_ok());
        let err = Collected::of(native(sector, true)).expect_err("random paths");
        assert!(
            err.to_string().contains(
                "native post witness is wrong, not proving with it: the tree-R root of challenge 0"
            ),
            "{err}"
        );
        let mut other = sector.clone();
        other.comm_r = other.comm_c;
        assert!(Collected::of(native(&other, false)).is_ok());
        let err = Collected::of(native(&other, true)).expect_err("another comm_r");
        assert!(err.to_string().contains("is not comm_r"), "{err}");
    }

    /// A sector's mirror made from another sector's vanilla proof is refused by name (its
    /// leaves are not the circuit's), and so is a sector beyond the partition, both when the
    /// parts hand them out. See: #17.
    #[test]
    fn a_native_sector_of_another_proof_is_refused() {
        let proof = fake_2k();
        let circuit = proof.circuit().expect("circuit");
        let Err(err) = NativeSector::new(&circuit.sectors[0], &proof.vanilla.sectors[1], false)
        else {
            panic!("sector 0's circuit mirrored with sector 1's paths");
        };
        assert!(err.to_string().contains("is not its circuit's"), "{err}");
        let parts = proof.sectors(circuit);
        let Err(err) = parts.witness_part(2) else {
            panic!("a third sector of a 2-sector partition");
        };
        assert!(
            err.to_string().contains("a partition of 2 sectors"),
            "{err}"
        );
    }
}
