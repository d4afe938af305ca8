//! Registered proofs as the wire carries them: Filecoin actor-ABI numbers (the Go side's
//! `abi.RegisteredSealProof`, `abi.RegisteredPoStProof`, `abi.RegisteredUpdateProof`) mapped
//! to filecoin-proofs-api's enums, sector sizes and cuzk's circuit ids (`porep-32g`,
//! `wpost-2k`, ...). Owns [`FilecoinKind`], [`SectorSize`] and [`Registered`]; the parameter
//! file names behind a circuit id live in `params.rs`.
//!
//! The Go numbering differs from the Rust enums' declaration order for PoSt: Go's
//! `StackedDrgWindow*V1_1` (10..14) is the api's `StackedDrgWindow*V1_2` (filecoin-ffi maps
//! it so), see `../shared/filecoin-facts.md`, "More traps".

use cuzk_groth16::KindError;
use filecoin_proofs_api::{
    ApiFeature, ApiVersion, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof,
};

/// The four Filecoin proof kinds cuzk proves. Discriminants are the wire's `ProofKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilecoinKind {
    /// PoRep commit phase 2 from a C1 output (`POREP_SEAL_COMMIT = 1`).
    PoRep = 1,
    /// SnapDeals empty-sector update (`SNAP_DEALS_UPDATE = 2`).
    SnapDeals = 2,
    /// One WindowPoSt partition (`WINDOW_POST_PARTITION = 3`).
    WindowPoSt = 3,
    /// WinningPoSt (`WINNING_POST = 4`).
    WinningPoSt = 4,
}

impl FilecoinKind {
    /// All kinds, in wire order.
    pub const ALL: [FilecoinKind; 4] = [
        FilecoinKind::PoRep,
        FilecoinKind::SnapDeals,
        FilecoinKind::WindowPoSt,
        FilecoinKind::WinningPoSt,
    ];

    /// The kind for a wire `ProofKind` number, `None` for 0 (unspecified) or unknown numbers.
    pub fn from_wire(n: i32) -> Option<FilecoinKind> {
        FilecoinKind::ALL.into_iter().find(|k| *k as i32 == n)
    }

    /// Prefix of this kind's circuit ids: `porep`, `snap`, `wpost`, `winning`.
    pub fn circuit_prefix(self) -> &'static str {
        match self {
            FilecoinKind::PoRep => "porep",
            FilecoinKind::SnapDeals => "snap",
            FilecoinKind::WindowPoSt => "wpost",
            FilecoinKind::WinningPoSt => "winning",
        }
    }

    /// Parses a command-line name: `porep`, `window-post`, `winning-post`, `snap` (and the
    /// circuit-id prefixes `wpost`, `winning`, `snap-deals`).
    ///
    /// # Errors
    /// A message listing the accepted names.
    pub fn from_cli_name(name: &str) -> Result<FilecoinKind, String> {
        match name.to_ascii_lowercase().as_str() {
            "porep" | "porep-c2" | "seal" => Ok(FilecoinKind::PoRep),
            "window-post" | "windowpost" | "wpost" => Ok(FilecoinKind::WindowPoSt),
            "winning-post" | "winningpost" | "winning" => Ok(FilecoinKind::WinningPoSt),
            "snap" | "snap-deals" | "snapdeals" | "update" => Ok(FilecoinKind::SnapDeals),
            other => Err(format!(
                "unknown proof kind {other:?}: expected porep, window-post, winning-post or snap"
            )),
        }
    }
}

impl std::fmt::Display for FilecoinKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FilecoinKind::PoRep => "porep",
            FilecoinKind::SnapDeals => "snap",
            FilecoinKind::WindowPoSt => "window-post",
            FilecoinKind::WinningPoSt => "winning-post",
        })
    }
}

/// The sector sizes Filecoin's ABI defines for these proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SectorSize {
    /// 2 KiB (test networks).
    S2KiB,
    /// 8 MiB (test networks).
    S8MiB,
    /// 512 MiB (test networks).
    S512MiB,
    /// 32 GiB.
    S32GiB,
    /// 64 GiB.
    S64GiB,
}

impl SectorSize {
    /// All sizes, smallest first.
    pub const ALL: [SectorSize; 5] = [
        SectorSize::S2KiB,
        SectorSize::S8MiB,
        SectorSize::S512MiB,
        SectorSize::S32GiB,
        SectorSize::S64GiB,
    ];

    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            SectorSize::S2KiB => 2 << 10,
            SectorSize::S8MiB => 8 << 20,
            SectorSize::S512MiB => 512 << 20,
            SectorSize::S32GiB => 32 << 30,
            SectorSize::S64GiB => 64 << 30,
        }
    }

    /// The size for a byte count, `None` if Filecoin defines no such sector size.
    pub fn from_bytes(bytes: u64) -> Option<SectorSize> {
        SectorSize::ALL.into_iter().find(|s| s.bytes() == bytes)
    }

    /// Short name used in circuit ids: `2k`, `8m`, `512m`, `32g`, `64g`.
    pub fn short_name(self) -> &'static str {
        match self {
            SectorSize::S2KiB => "2k",
            SectorSize::S8MiB => "8m",
            SectorSize::S512MiB => "512m",
            SectorSize::S32GiB => "32g",
            SectorSize::S64GiB => "64g",
        }
    }

    /// Parses `2KiB`, `2k`, `2048`, `8MiB`, `512MiB`, `32GiB`, `64g`, ... (case-insensitive).
    ///
    /// # Errors
    /// A message naming the accepted sizes.
    pub fn parse(text: &str) -> Result<SectorSize, String> {
        let t = text.trim().to_ascii_lowercase();
        let t = t
            .strip_suffix("ib")
            .or_else(|| t.strip_suffix('b'))
            .unwrap_or(&t);
        let found = SectorSize::ALL
            .into_iter()
            .find(|s| t == s.short_name() || t.parse::<u64>().ok() == Some(s.bytes()));
        found.ok_or_else(|| {
            format!(
                "unknown sector size {text:?}: expected one of 2KiB, 8MiB, 512MiB, 32GiB, 64GiB"
            )
        })
    }
}

impl std::fmt::Display for SectorSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SectorSize::S2KiB => "2KiB",
            SectorSize::S8MiB => "8MiB",
            SectorSize::S512MiB => "512MiB",
            SectorSize::S32GiB => "32GiB",
            SectorSize::S64GiB => "64GiB",
        })
    }
}

/// A registered proof resolved from the wire: the api enum that configures filecoin-proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registered {
    /// A PoRep (seal) proof.
    Seal(RegisteredSealProof),
    /// A WindowPoSt or WinningPoSt proof.
    PoSt(RegisteredPoStProof),
    /// A SnapDeals update proof.
    Update(RegisteredUpdateProof),
}

impl Registered {
    /// Resolves the actor-ABI number `abi` for `kind`.
    ///
    /// # Errors
    /// [`KindError::InvalidField`] on `registered_proof` when the number is unknown to the
    /// actor ABI for `kind`, naming the numbers that kind accepts.
    pub fn from_abi(kind: FilecoinKind, abi: u64) -> Result<Registered, KindError> {
        use RegisteredPoStProof as P;
        use RegisteredSealProof as S;
        use RegisteredUpdateProof as U;
        let bad = |reason: String| KindError::InvalidField {
            field: "registered_proof",
            reason,
        };
        let idx = usize::try_from(abi).unwrap_or(usize::MAX);
        fn pick<T: Copy>(table: &[T], idx: usize) -> Option<T> {
            table.get(idx).copied()
        }
        match kind {
            FilecoinKind::PoRep => {
                let table = [
                    S::StackedDrg2KiBV1,
                    S::StackedDrg8MiBV1,
                    S::StackedDrg512MiBV1,
                    S::StackedDrg32GiBV1,
                    S::StackedDrg64GiBV1,
                    S::StackedDrg2KiBV1_1,
                    S::StackedDrg8MiBV1_1,
                    S::StackedDrg512MiBV1_1,
                    S::StackedDrg32GiBV1_1,
                    S::StackedDrg64GiBV1_1,
                    S::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
                    S::StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
                    S::StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
                    S::StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
                    S::StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
                    S::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
                    S::StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
                    S::StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
                    S::StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
                    S::StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
                ];
                pick(&table, idx).map(Registered::Seal).ok_or_else(|| {
                    bad(format!(
                        "{abi} is not a RegisteredSealProof: expected 0..=4 (V1), 5..=9 (V1_1), \
                         10..=14 (V1_1 synthetic) or 15..=19 (V1_2 non-interactive)"
                    ))
                })
            }
            FilecoinKind::WinningPoSt => {
                let table = [
                    P::StackedDrgWinning2KiBV1,
                    P::StackedDrgWinning8MiBV1,
                    P::StackedDrgWinning512MiBV1,
                    P::StackedDrgWinning32GiBV1,
                    P::StackedDrgWinning64GiBV1,
                ];
                pick(&table, idx).map(Registered::PoSt).ok_or_else(|| {
                    bad(format!(
                        "{abi} is not a WinningPoSt RegisteredPoStProof: expected 0..=4"
                    ))
                })
            }
            FilecoinKind::WindowPoSt => {
                // Go numbers: 5..=9 Window V1, 10..=14 Window V1_1 (the api's V1_2).
                let table = [
                    P::StackedDrgWindow2KiBV1,
                    P::StackedDrgWindow8MiBV1,
                    P::StackedDrgWindow512MiBV1,
                    P::StackedDrgWindow32GiBV1,
                    P::StackedDrgWindow64GiBV1,
                    P::StackedDrgWindow2KiBV1_2,
                    P::StackedDrgWindow8MiBV1_2,
                    P::StackedDrgWindow512MiBV1_2,
                    P::StackedDrgWindow32GiBV1_2,
                    P::StackedDrgWindow64GiBV1_2,
                ];
                idx.checked_sub(5)
                    .and_then(|i| table.get(i).copied())
                    .map(Registered::PoSt)
                    .ok_or_else(|| {
                        bad(format!(
                            "{abi} is not a WindowPoSt RegisteredPoStProof: expected 5..=9 (V1) \
                             or 10..=14 (V1_1)"
                        ))
                    })
            }
            FilecoinKind::SnapDeals => {
                let table = [
                    U::StackedDrg2KiBV1,
                    U::StackedDrg8MiBV1,
                    U::StackedDrg512MiBV1,
                    U::StackedDrg32GiBV1,
                    U::StackedDrg64GiBV1,
                ];
                pick(&table, idx).map(Registered::Update).ok_or_else(|| {
                    bad(format!(
                        "{abi} is not a RegisteredUpdateProof: expected 0..=4"
                    ))
                })
            }
        }
    }

    /// The actor-ABI number of the newest registered proof of `kind` at `size` (the one a
    /// client would send today): Seal V1_1, Winning V1, Window V1_1 (api V1_2), Update V1.
    pub fn default_abi(kind: FilecoinKind, size: SectorSize) -> u64 {
        let i = SectorSize::ALL.iter().position(|s| *s == size).unwrap_or(0) as u64;
        match kind {
            FilecoinKind::PoRep => 5 + i,
            FilecoinKind::WinningPoSt => i,
            FilecoinKind::WindowPoSt => 10 + i,
            FilecoinKind::SnapDeals => i,
        }
    }

    /// The sector size this proof is registered for.
    pub fn sector_size(self) -> SectorSize {
        let bytes = match self {
            Registered::Seal(p) => u64::from(p.sector_size()),
            Registered::PoSt(p) => u64::from(p.sector_size()),
            Registered::Update(p) => u64::from(p.sector_size()),
        };
        // Every variant of the three enums above has one of the five ABI sizes.
        SectorSize::from_bytes(bytes).unwrap_or(SectorSize::S2KiB)
    }

    /// The api version filecoin-proofs runs this proof with.
    pub fn api_version(self) -> ApiVersion {
        match self {
            Registered::Seal(p) => p.version(),
            Registered::PoSt(p) => p.version(),
            Registered::Update(p) => p.version(),
        }
    }
}

/// How a sector's PoRep challenges are drawn. Each variant has its own registered seal
/// proofs, but at one sector size all three prove the same circuit with the same `v28-*`
/// parameter file: the challenges per partition are equal (2 at test sizes, 18 at
/// 32/64 GiB); only the number of partitions and the challenge derivation differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoRepVariant {
    /// Interactive PoRep (V1, V1_1): challenges drawn from the chain's seed; 1 partition at
    /// test sizes, 10 at 32/64 GiB.
    Interactive,
    /// Synthetic PoRep (V1_1 `Feat_SyntheticPoRep`, ABI 10..=14): vanilla proofs of 2^18
    /// synthetic challenges are made once after precommit, and the seed selects the
    /// interactive number of them at commit; partitions as interactive.
    Synthetic,
    /// Non-interactive PoRep (FIP-0090, V1_2 `Feat_NonInteractivePoRep`, ABI 15..=19):
    /// challenges derived from comm_r and the replica id alone, 13 partitions at test
    /// sizes and 126 at 32/64 GiB (12.6x the interactive work), whose proofs are
    /// aggregated with SnarkPack into the one proof the chain verifies.
    NonInteractive,
}

impl PoRepVariant {
    /// All variants.
    pub const ALL: [PoRepVariant; 3] = [
        PoRepVariant::Interactive,
        PoRepVariant::Synthetic,
        PoRepVariant::NonInteractive,
    ];

    /// The variant of a registered seal proof.
    pub fn of(proof: RegisteredSealProof) -> PoRepVariant {
        if proof.feature_enabled(ApiFeature::NonInteractivePoRep) {
            PoRepVariant::NonInteractive
        } else if proof.feature_enabled(ApiFeature::SyntheticPoRep) {
            PoRepVariant::Synthetic
        } else {
            PoRepVariant::Interactive
        }
    }

    /// The actor-ABI number of this variant's newest seal proof at `size`: V1_1 (5..=9),
    /// V1_1 synthetic (10..=14) or V1_2 non-interactive (15..=19).
    pub fn abi(self, size: SectorSize) -> u64 {
        let base = match self {
            PoRepVariant::Interactive => 5,
            PoRepVariant::Synthetic => 10,
            PoRepVariant::NonInteractive => 15,
        };
        base + SectorSize::ALL.iter().position(|s| *s == size).unwrap_or(0) as u64
    }

    /// Parses a command-line name: `interactive`, `synthetic`, `non-interactive` (or `ni`).
    ///
    /// # Errors
    /// A message listing the accepted names.
    pub fn from_cli_name(name: &str) -> Result<PoRepVariant, String> {
        match name.to_ascii_lowercase().as_str() {
            "interactive" => Ok(PoRepVariant::Interactive),
            "synthetic" | "synth" => Ok(PoRepVariant::Synthetic),
            "non-interactive" | "noninteractive" | "ni" => Ok(PoRepVariant::NonInteractive),
            other => Err(format!(
                "unknown PoRep variant {other:?}: expected interactive, synthetic or non-interactive"
            )),
        }
    }
}

impl std::fmt::Display for PoRepVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoRepVariant::Interactive => "interactive",
            PoRepVariant::Synthetic => "synthetic",
            PoRepVariant::NonInteractive => "non-interactive",
        })
    }
}

/// cuzk's circuit id for `kind` at `size`, e.g. `porep-32g`, `wpost-2k`, `snap-512m`.
pub fn circuit_id(kind: FilecoinKind, size: SectorSize) -> String {
    format!("{}-{}", kind.circuit_prefix(), size.short_name())
}

/// The kind and size a circuit id names, `None` if it is not a Filecoin circuit id.
pub fn parse_circuit_id(id: &str) -> Option<(FilecoinKind, SectorSize)> {
    let (prefix, size) = id.split_once('-')?;
    let kind = FilecoinKind::ALL
        .into_iter()
        .find(|k| k.circuit_prefix() == prefix)?;
    let size = SectorSize::ALL
        .into_iter()
        .find(|s| s.short_name() == size)?;
    Some((kind, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_numbers_resolve_to_the_right_size_and_version() {
        for size in SectorSize::ALL {
            for kind in FilecoinKind::ALL {
                let abi = Registered::default_abi(kind, size);
                let reg = Registered::from_abi(kind, abi).expect("default abi resolves");
                assert_eq!(reg.sector_size(), size, "{kind} {abi}");
            }
        }
        assert_eq!(
            Registered::from_abi(FilecoinKind::WindowPoSt, 10).ok(),
            Some(Registered::PoSt(
                RegisteredPoStProof::StackedDrgWindow2KiBV1_2
            ))
        );
        assert_eq!(
            Registered::from_abi(FilecoinKind::WindowPoSt, 8).ok(),
            Some(Registered::PoSt(
                RegisteredPoStProof::StackedDrgWindow32GiBV1
            ))
        );
        assert_eq!(
            Registered::from_abi(FilecoinKind::PoRep, 8).ok(),
            Some(Registered::Seal(RegisteredSealProof::StackedDrg32GiBV1_1))
        );
        assert_eq!(
            Registered::from_abi(FilecoinKind::WinningPoSt, 0)
                .map(|r| r.api_version())
                .ok(),
            Some(ApiVersion::V1_0_0)
        );
    }

    #[test]
    fn bad_abi_numbers_name_registered_proof() {
        for (kind, abi) in [
            (FilecoinKind::PoRep, 20),
            (FilecoinKind::PoRep, u64::MAX),
            (FilecoinKind::WindowPoSt, 4),
            (FilecoinKind::WindowPoSt, 15),
            (FilecoinKind::WinningPoSt, 5),
            (FilecoinKind::SnapDeals, u64::MAX),
        ] {
            match Registered::from_abi(kind, abi) {
                Err(KindError::InvalidField { field, reason }) => {
                    assert_eq!(field, "registered_proof");
                    assert!(reason.contains("expected"), "{kind} {abi}: {reason}");
                }
                other => panic!("{kind} {abi}: expected InvalidField, got {other:?}"),
            }
        }
    }

    #[test]
    fn every_seal_variant_resolves_at_every_size() {
        for size in SectorSize::ALL {
            for variant in PoRepVariant::ALL {
                let abi = variant.abi(size);
                match Registered::from_abi(FilecoinKind::PoRep, abi) {
                    Ok(reg @ Registered::Seal(p)) => {
                        assert_eq!(reg.sector_size(), size, "{variant} {abi}");
                        assert_eq!(PoRepVariant::of(p), variant, "{abi}");
                    }
                    other => panic!("{variant} at {size}: {abi} gave {other:?}"),
                }
            }
        }
        assert_eq!(
            Registered::from_abi(FilecoinKind::PoRep, 18).ok(),
            Some(Registered::Seal(
                RegisteredSealProof::StackedDrg32GiBV1_2_Feat_NonInteractivePoRep
            ))
        );
        assert_eq!(
            Registered::from_abi(FilecoinKind::PoRep, 10).ok(),
            Some(Registered::Seal(
                RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep
            ))
        );
        assert_eq!(
            PoRepVariant::of(RegisteredSealProof::StackedDrg2KiBV1),
            PoRepVariant::Interactive
        );
        assert_eq!(
            PoRepVariant::from_cli_name("NI"),
            Ok(PoRepVariant::NonInteractive)
        );
        assert!(PoRepVariant::from_cli_name("aggregate").is_err());
    }

    #[test]
    fn circuit_ids_round_trip() {
        for size in SectorSize::ALL {
            for kind in FilecoinKind::ALL {
                let id = circuit_id(kind, size);
                assert_eq!(parse_circuit_id(&id), Some((kind, size)), "{id}");
            }
        }
        assert_eq!(
            circuit_id(FilecoinKind::PoRep, SectorSize::S32GiB),
            "porep-32g"
        );
        assert_eq!(
            circuit_id(FilecoinKind::WindowPoSt, SectorSize::S32GiB),
            "wpost-32g"
        );
        assert_eq!(
            circuit_id(FilecoinKind::WinningPoSt, SectorSize::S32GiB),
            "winning-32g"
        );
        assert_eq!(
            circuit_id(FilecoinKind::SnapDeals, SectorSize::S32GiB),
            "snap-32g"
        );
        assert_eq!(parse_circuit_id("synthetic-20"), None);
        assert_eq!(parse_circuit_id("porep-1k"), None);
    }

    #[test]
    fn sector_sizes_parse() {
        assert_eq!(SectorSize::parse("2KiB"), Ok(SectorSize::S2KiB));
        assert_eq!(SectorSize::parse("2k"), Ok(SectorSize::S2KiB));
        assert_eq!(SectorSize::parse("2048"), Ok(SectorSize::S2KiB));
        assert_eq!(SectorSize::parse("32GiB"), Ok(SectorSize::S32GiB));
        assert_eq!(SectorSize::parse("512m"), Ok(SectorSize::S512MiB));
        assert!(SectorSize::parse("4KiB").is_err());
    }
}
