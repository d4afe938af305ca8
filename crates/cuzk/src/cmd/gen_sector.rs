//! `cuzk gen sector`: seals a small test sector with filecoin-proofs (interactive,
//! synthetic or non-interactive PoRep) and writes the request payloads a client would send
//! for PoRep C2, WinningPoSt, WindowPoSt and SnapDeals, with a manifest of the public
//! values (see `cuzk_filecoin::testgen`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use cuzk_filecoin::{testgen, PoRepVariant, SectorSize};

const AFTER_HELP: &str = "\
Files written under --out:
  sector.json             manifest: sizes, ABI registered-proof numbers, miner id, sector number,
                          comm_r, comm_d, ticket, seed, PoSt randomness, comm_r_new, comm_d_new (hex)
  c1.json                 PoRep C2 payload: {\"SectorNum\",\"Phase1Out\" (base64 C1 JSON),\"SectorSize\"},
                          for the seal proof --porep chose (sector.json's porep_registered_proof)
  winning-vanilla-<i>.bin WinningPoSt payload: one bincode FallbackPoStSectorProof per sector
  window-vanilla-<i>.bin  WindowPoSt payload (partition 0): one bincode FallbackPoStSectorProof per sector
  snap-vanilla-<k>.bin    SnapDeals payload: one bincode update PartitionProof per partition
  work/                   sealed and updated replicas with their caches (only needed to make more proofs)

The SDR parent cache goes to $FIL_PROOFS_PARENT_CACHE (default /var/tmp/filecoin-parents).";

/// Flags of this subcommand.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB (sealing 32/64 GiB takes hours).
    #[arg(long, default_value = "2KiB")]
    pub sector_size: String,
    /// Output folder (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Seed for the ticket, PoRep seed, PoSt randomness and update data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How the sector is sealed: interactive (V1_1), synthetic (V1_1 synthetic PoRep) or
    /// non-interactive (V1_2 NI-PoRep, FIP-0090; its C2 aggregates 13 partitions at test
    /// sizes, 126 at 32/64 GiB).
    #[arg(long, default_value = "interactive", value_parser = PoRepVariant::from_cli_name)]
    pub porep: PoRepVariant,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let size = SectorSize::parse(&args.sector_size).map_err(anyhow::Error::msg)?;
    let t = Instant::now();
    let m =
        testgen::gen_sector_with(size, args.porep, &args.out, args.seed).with_context(|| {
            format!(
                "sealing a {size} {} test sector into {}",
                args.porep,
                args.out.display()
            )
        })?;
    tracing::info!(
        porep = %args.porep,
        registered_proof = m.porep_registered_proof,
        ms = t.elapsed().as_millis() as u64,
        comm_r = %m.comm_r,
        snap_partitions = m.snap_vanilla,
        "test sector written"
    );
    println!("{}", args.out.join(testgen::MANIFEST).display());
    Ok(())
}
