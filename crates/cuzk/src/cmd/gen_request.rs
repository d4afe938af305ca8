//! `cuzk gen request --fake`: writes a **fake** request of the true shape (PoRep C2,
//! WindowPoSt partition, WinningPoSt or SnapDeals, any sector size up to 64 GiB) made from random data
//! in seconds, for benchmarks at real size without sealing. Its proofs cannot verify; only
//! `cuzk bench batch --fake` proves it (see `cuzk_filecoin::testgen::FakeRequest`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use cuzk_filecoin::testgen::{FakeRequest, PayloadShape, FAKE_NOTE};
use cuzk_filecoin::{FilecoinKind, SectorSize};

const AFTER_HELP: &str = "\
FAKE REQUESTS CANNOT VERIFY. The payload is random data with the exact structure of a real
request (partitions, challenges, sectors, Merkle path depths and arities, column rows,
parents, challenge positions), so its circuits have the production shape and size, but
their constraints do not hold: the proof made from it does not verify.

Only `cuzk bench batch --fake --request FILE` proves it (the parse skips the vanilla-proof
checks and the final verification only there); the daemon, `cuzk prove` and every
production path refuse it. The file's first line says what it is; then bincode of the
wire fields (the payload a client sends: the C1 wrapper JSON for porep, one bincode sector
proof per sector for window-post and winning-post, one bincode partition proof per
partition for snap).

At 32GiB: porep is 10 partitions x 18 challenges (~45 MB of JSON), window-post one
partition of 2,349 sectors x 10 challenges, winning-post one sector x 66 challenges (one
partition of 370,590 constraints), snap 16 partitions x 86 challenges.";

/// Flags of `cuzk gen request`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Proof kind: porep, window-post, winning-post or snap.
    #[arg(long)]
    pub kind: String,
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long, default_value = "32GiB")]
    pub sector_size: String,
    /// Required: make a fake request (random data; its proofs cannot verify). Real
    /// requests come from `cuzk gen sector`.
    #[arg(long)]
    pub fake: bool,
    /// Output file (default: fake-KIND-SIZE-seedSEED.cuzkreq here).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the random data: the same seed makes the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the subcommand: writes the file and prints one JSON line describing it.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.fake {
        bail!(
            "gen request makes fake requests only, whose proofs cannot verify: pass --fake \
             (real requests come from `cuzk gen sector`)"
        );
    }
    let kind = FilecoinKind::from_cli_name(&args.kind).map_err(anyhow::Error::msg)?;
    let size = SectorSize::parse(&args.sector_size).map_err(anyhow::Error::msg)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(FakeRequest::default_file_name(kind, size, args.seed)));
    let t = Instant::now();
    let fake = FakeRequest::generate(kind, size, args.seed)
        .with_context(|| format!("making a fake {kind} {size} request"))?;
    let generate_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    fake.write(&out)
        .with_context(|| format!("writing {}", out.display()))?;
    let write_ms = t.elapsed().as_secs_f64() * 1e3;
    let shape = PayloadShape::of(kind, &fake.request).context("reading the payload back")?;
    tracing::warn!(
        fake = true,
        %kind,
        %size,
        file = %out.display(),
        "FAKE request written: random data of the true shape, its proofs cannot verify"
    );
    let line = serde_json::json!({
        "op": "gen_request",
        "fake": true,
        "note": FAKE_NOTE,
        "kind": kind.to_string(),
        "sector_size": size.to_string(),
        "seed": args.seed,
        "file": out.display().to_string(),
        "partitions": shape.partitions,
        "per_partition": shape.per_partition,
        "paths": shape.paths.iter().map(|(n, l)| (n.clone(), serde_json::json!(l))).collect::<serde_json::Map<_, _>>(),
        "counts": shape.counts.iter().map(|(n, c)| (n.clone(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "uniform": shape.uniform,
        "payload_bytes": fake.payload_bytes(),
        "generate_ms": super::round1(generate_ms),
        "write_ms": super::round1(write_ms),
        "threads": super::threads(),
    });
    println!("{line}");
    Ok(())
}
