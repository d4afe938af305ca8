//! `cuzk bench msm` and `cuzk bench ntt` (owner fills this in).

/// Flags of `bench msm`.
#[derive(clap::Args)]
pub struct MsmArgs {}

/// Flags of `bench ntt`.
#[derive(clap::Args)]
pub struct NttArgs {}

/// Runs `bench msm`.
pub fn run_msm(_args: MsmArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}

/// Runs `bench ntt`.
pub fn run_ntt(_args: NttArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
