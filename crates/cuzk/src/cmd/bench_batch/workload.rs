//! What `cuzk bench batch` proves: synthetic proofs made here, or one Filecoin request
//! (real from a test sector, or fake from `cuzk gen request`) proved over and over; and
//! the published figure each case compares against.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use cuzk_engine::synthetic::SyntheticSpec;
use cuzk_engine::{ProofKindId, ProofRequest};
use cuzk_filecoin::testgen::{load_sector, FakeRequest, SectorManifest};
use cuzk_filecoin::{FilecoinKind, ParseOptions};

use super::Args;

/// What is proved: synthetic proofs made here, or one Filecoin request over and over.
#[derive(Clone)]
pub(super) enum Workload {
    Synthetic {
        log_n: u32,
        partitions: u32,
    },
    Filecoin {
        kind: FilecoinKind,
        wire: ProofKindId,
        request: Arc<ProofRequest>,
        fake: bool,
        circuit_id: String,
        partitions: usize,
        /// A real test sector's manifest: every completed proof is checked once more
        /// with filecoin-proofs' own verifier against it.
        manifest: Option<Arc<SectorManifest>>,
    },
}

impl Workload {
    pub(super) fn from_args(args: &Args) -> anyhow::Result<Workload> {
        if ProofKindId::from_name(&args.kind) == Some(ProofKindId::Synthetic) {
            if args.sector.is_some() || args.request.is_some() {
                bail!("--sector and --request go with a Filecoin --kind, not synthetic");
            }
            return Ok(Workload::Synthetic {
                log_n: args.log_n,
                partitions: args.partitions,
            });
        }
        let kind = FilecoinKind::from_cli_name(&args.kind).map_err(anyhow::Error::msg)?;
        let (request, fake, manifest) = match (&args.sector, &args.request) {
            (Some(dir), None) => {
                let sector = load_sector(dir)
                    .with_context(|| format!("loading the test sector in {}", dir.display()))?;
                (
                    sector.request(kind)?,
                    false,
                    Some(Arc::new(sector.manifest)),
                )
            }
            (None, Some(file)) => {
                let fake = FakeRequest::read(file)?;
                if !args.fake {
                    bail!(
                        "{} is a FAKE request (random data, its proofs cannot verify): pass \
                         --fake to benchmark it",
                        file.display()
                    );
                }
                if fake.kind != kind {
                    bail!("{} is a {} request, not {kind}", file.display(), fake.kind);
                }
                (fake.request, true, None)
            }
            _ => bail!("--kind {kind} needs --sector DIR (real) or --request FILE --fake (fake)"),
        };
        Workload::filecoin(kind, request, fake, manifest, &args.param_dir_or_default())
    }

    /// A fake request file's workload, of the kind the file says (`--critical-request`).
    pub(super) fn fake_file(file: &Path, param_dir: &Path) -> anyhow::Result<Workload> {
        let fake = FakeRequest::read(file)?;
        Workload::filecoin(fake.kind, fake.request, true, None, param_dir)
    }

    fn filecoin(
        kind: FilecoinKind,
        request: ProofRequest,
        fake: bool,
        manifest: Option<Arc<SectorManifest>>,
        param_dir: &Path,
    ) -> anyhow::Result<Workload> {
        let wire = cuzk_filecoin::engine::KINDS
            .iter()
            .find(|(_, k)| *k == kind)
            .map(|(id, _)| *id)
            .context("no wire kind")?;
        // Parsed here once for the circuit id and the partition count; the engine parses
        // each submission again, as it would a client's.
        let parsed =
            cuzk_filecoin::parse_with(kind, &request, param_dir, ParseOptions { fake_ok: fake })
                .with_context(|| format!("parsing the {kind} request"))?;
        Ok(Workload::Filecoin {
            kind,
            wire,
            request: Arc::new(request),
            fake,
            circuit_id: parsed.circuit_id(),
            partitions: parsed.num_partitions(),
            manifest,
        })
    }

    pub(super) fn circuit_id(&self) -> String {
        match self {
            Workload::Synthetic { log_n, .. } => SyntheticSpec {
                log_n: *log_n,
                n_partitions: 1,
                seed: 0,
            }
            .circuit_id(),
            Workload::Filecoin { circuit_id, .. } => circuit_id.clone(),
        }
    }

    pub(super) fn is_fake(&self) -> bool {
        matches!(self, Workload::Filecoin { fake: true, .. })
    }

    /// The kind and manifest whose proofs filecoin-proofs checks (real test sectors).
    pub(super) fn filecoin_check(&self) -> Option<(FilecoinKind, &SectorManifest)> {
        match self {
            Workload::Filecoin {
                kind,
                manifest: Some(m),
                ..
            } => Some((*kind, m)),
            _ => None,
        }
    }

    pub(super) fn partitions(&self) -> usize {
        match self {
            Workload::Synthetic { partitions, .. } => *partitions as usize,
            Workload::Filecoin { partitions, .. } => *partitions,
        }
    }

    /// The i-th job's kind and request.
    pub(super) fn job(&self, i: usize) -> (ProofKindId, ProofRequest) {
        match self {
            Workload::Synthetic { log_n, partitions } => {
                let spec = SyntheticSpec {
                    log_n: *log_n,
                    n_partitions: *partitions,
                    seed: i as u64 + 1,
                };
                let request = ProofRequest {
                    vanilla_proof: spec.encode(),
                    ..ProofRequest::default()
                };
                (ProofKindId::Synthetic, request)
            }
            Workload::Filecoin { wire, request, .. } => (*wire, (**request).clone()),
        }
    }

    /// The case's name in the table and the timeline's title: says FAKE for fakes.
    pub(super) fn label(&self) -> String {
        match self {
            Workload::Synthetic { log_n, partitions } => {
                format!("synthetic 2^{log_n} x {partitions} partitions")
            }
            Workload::Filecoin {
                circuit_id, fake, ..
            } => format!("{circuit_id}{}", if *fake { " FAKE" } else { "" }),
        }
    }

    /// The published figure this case is compared against, if there is one.
    pub(super) fn reference(&self) -> Option<&'static str> {
        match self {
            Workload::Filecoin {
                kind, circuit_id, ..
            } if *kind == FilecoinKind::PoRep && circuit_id.ends_with("-32g") => Some(
                "Curio cuzk 32.1-37.7 s/proof (96-core Threadripper, RTX 5070 Ti, 512+ GiB); \
                     SupraSeal C2 138-143 s/proof; target <= 30 s/proof on one H200 (#17)",
            ),
            _ => None,
        }
    }
}
