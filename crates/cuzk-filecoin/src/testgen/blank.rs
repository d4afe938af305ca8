//! The blank PoRep and PoSt circuits given as parts, for parameters. PoRep: the prefix
//! (replica id and its
//! bits, comm_d, comm_r, comm_r_last, comm_c and `comm_r = H(comm_c ‖ comm_r_last)`), then
//! one sub-circuit per challenge of a partition, each the same gadget code over another
//! challenge. `cuzk_groth16::paramgen::generate_parts` records the prefix and one
//! challenge instead of the 18 challenges of a 32 GiB partition on one thread.
//!
//! storage-proofs-porep keeps its circuit-side challenge proof (`Proof::empty`, used by
//! `blank_circuit`) in a private module, so a challenge here is the circuit of one fake
//! vanilla proof of the true shape (`fake/porep.rs`) converted as the prover converts real
//! ones. Its values are never read: the keypair assembly calls no allocation's value
//! closure, and the circuit's structure does not depend on its values (a Groth16 circuit's
//! parameters fix it). PoSt: no prefix (ONE alone), then one sub-circuit per sector, each
//! the blank sector of `blank_circuit` (a 32 GiB WindowPoSt partition is 2,349 of them,
//! 125M constraints). Tests check both QAPs against `blank_circuit`'s, whole.

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::Scalar;
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait};
use storage_proofs_porep::stacked::{self, StackedCircuit};
use storage_proofs_post::fallback::{FallbackPoStCircuit, Sector};

use super::TestgenError;
use crate::registry::SectorSize;

/// A PoRep partition's blank circuit as its challenges.
pub(super) struct BlankChallenges<Tree: 'static + MerkleTreeTrait> {
    /// The one challenge every part synthesizes (fake values of the true shape).
    challenge: filecoin_proofs::VanillaSealProof<Tree>,
    /// Challenges per partition.
    n_challenges: usize,
}

impl<Tree: 'static + MerkleTreeTrait> BlankChallenges<Tree> {
    /// The blank circuit of a partition of `pp` for sectors of `size`.
    pub fn new(
        pp: &stacked::PublicParams<Tree>,
        size: SectorSize,
    ) -> Result<BlankChallenges<Tree>, TestgenError> {
        Ok(BlankChallenges {
            challenge: super::fake::structure_challenge(pp, size)?,
            n_challenges: pp.challenges.num_challenges_per_partition(),
        })
    }
}

/// The prefix alone (no challenge), or the prefix and one challenge.
pub(super) struct BlankPiece<Tree: 'static + MerkleTreeTrait> {
    challenge: Option<filecoin_proofs::VanillaSealProof<Tree>>,
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for BlankPiece<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        // No public value: as `blank_circuit`, every value is None.
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            None,
            None,
            None,
            None,
            None,
            self.challenge.map(Into::into).into_iter().collect(),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> Parts for BlankChallenges<Tree> {
    type Part = BlankPiece<Tree>;

    fn n_parts(&self) -> usize {
        self.n_challenges
    }

    fn part(&self, j: usize) -> Result<BlankPiece<Tree>, cuzk_groth16::SynthesisError> {
        if j >= self.n_challenges {
            return Err(cuzk_groth16::SynthesisError::Part {
                part: j,
                reason: format!("a partition of {} challenges", self.n_challenges),
            });
        }
        Ok(BlankPiece {
            challenge: Some(self.challenge.clone()),
        })
    }

    fn prefix(&self) -> Result<Option<BlankPiece<Tree>>, cuzk_groth16::SynthesisError> {
        Ok(Some(BlankPiece { challenge: None }))
    }
}

/// A PoSt partition's blank circuit as its sectors.
pub(super) struct BlankSectors<Tree: 'static + MerkleTreeTrait> {
    /// The blank sector every part synthesizes; `None` for a circuit without sectors.
    sector: Option<Sector<Tree>>,
    n_sectors: usize,
}

impl<Tree: 'static + MerkleTreeTrait> BlankSectors<Tree> {
    /// The parts of `blank` (every sector of a blank circuit is the same blank sector).
    pub fn new(blank: &FallbackPoStCircuit<Tree>) -> BlankSectors<Tree> {
        BlankSectors {
            sector: blank.sectors.first().cloned(),
            n_sectors: blank.sectors.len(),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Parts for BlankSectors<Tree> {
    type Part = FallbackPoStCircuit<Tree>;

    fn n_parts(&self) -> usize {
        self.n_sectors
    }

    fn part(&self, j: usize) -> Result<FallbackPoStCircuit<Tree>, cuzk_groth16::SynthesisError> {
        match (&self.sector, j < self.n_sectors) {
            (Some(sector), true) => Ok(FallbackPoStCircuit {
                prover_id: None,
                sectors: vec![sector.clone()],
            }),
            _ => Err(cuzk_groth16::SynthesisError::Part {
                part: j,
                reason: format!("a partition of {} sectors", self.n_sectors),
            }),
        }
    }

    fn prefix(&self) -> Result<Option<FallbackPoStCircuit<Tree>>, cuzk_groth16::SynthesisError> {
        Ok(Some(FallbackPoStCircuit {
            prover_id: None,
            sectors: Vec::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{FilecoinKind, Registered};
    use cuzk_groth16::paramgen::Qap;
    use ff::Field;
    use rand::SeedableRng;
    use storage_proofs_core::compound_proof::CompoundProof;
    use storage_proofs_porep::stacked::{StackedCompound, StackedDrg};

    /// The 2 KiB PoRep blank circuit given as its challenges has the QAP of
    /// `blank_circuit` recorded whole, so its parameters are the same bytes for one toxic
    /// waste (paramgen's own tests compare whole files). See: #17.
    #[test]
    fn blank_porep_from_challenges_has_the_whole_circuits_qap() {
        type Tree = filecoin_proofs::SectorShape2KiB;
        let size = SectorSize::S2KiB;
        let abi = Registered::default_abi(FilecoinKind::PoRep, size);
        let Ok(Registered::Seal(reg)) = Registered::from_abi(FilecoinKind::PoRep, abi) else {
            panic!("2 KiB PoRep is a seal proof");
        };
        let pp = filecoin_proofs::parameters::public_params::<Tree>(&reg.as_v1_config())
            .expect("public params");
        let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::blank_circuit(&pp);
        let parts = BlankChallenges::new(&pp, size).expect("parts");
        assert_eq!(parts.n_parts(), 2);
        let tau = Scalar::random(rand_chacha::ChaCha20Rng::seed_from_u64(17));
        let whole = Qap::of_circuit(blank, tau).expect("whole");
        let from_parts = Qap::of_parts(&parts, tau)
            .expect("parts")
            .expect("a circuit of parts");
        assert_eq!(
            (from_parts.n_inputs, from_parts.n_aux, from_parts.n_rows),
            (whole.n_inputs, whole.n_aux, whole.n_rows)
        );
        assert!(from_parts == whole, "the QAPs differ");
    }

    /// The 2 KiB WindowPoSt blank circuit given as its sectors has the QAP of
    /// `blank_circuit` recorded whole. See: #17.
    #[test]
    fn blank_window_post_from_sectors_has_the_whole_circuits_qap() {
        use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCompound};
        type Tree = filecoin_proofs::SectorShape2KiB;
        let abi = Registered::default_abi(FilecoinKind::WindowPoSt, SectorSize::S2KiB);
        let Ok(Registered::PoSt(reg)) = Registered::from_abi(FilecoinKind::WindowPoSt, abi) else {
            panic!("2 KiB WindowPoSt is a PoSt proof");
        };
        let pp =
            filecoin_proofs::parameters::window_post_public_params::<Tree>(&reg.as_v1_config())
                .expect("public params");
        let blank =
            <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::blank_circuit(
                &pp,
            );
        let parts = BlankSectors::new(&blank);
        assert!(parts.n_parts() >= 2, "{} sectors", parts.n_parts());
        let tau = Scalar::random(rand_chacha::ChaCha20Rng::seed_from_u64(19));
        let whole = Qap::of_circuit(blank, tau).expect("whole");
        let from_parts = Qap::of_parts(&parts, tau)
            .expect("parts")
            .expect("a circuit of parts");
        assert!(from_parts == whole, "the QAPs differ");
    }
}
