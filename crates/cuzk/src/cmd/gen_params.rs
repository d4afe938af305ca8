//! `cuzk gen_params` (owner fills this in).

/// Flags of this subcommand.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
