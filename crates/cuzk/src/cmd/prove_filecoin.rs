//! `cuzk prove --kind K --sector DIR`: one Filecoin proof in-process from a test sector's
//! payloads (`cuzk gen sector`): every partition synthesized and proved on the chosen
//! backend, the proof assembled and batch-verified by the kind, then checked once more by
//! filecoin-proofs' own verifier against the sector's manifest. Prints a stage table per
//! partition and one JSON line.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cuzk_filecoin::testgen::{load_sector, verify_with_filecoin_proofs};
use cuzk_filecoin::FilecoinKind;
use cuzk_groth16::{Backend, Srs, SrsOptions, Synthesizer};

/// Proves `kind` for the sector in `sector_dir` with parameters from `param_dir`.
pub fn run(
    kind: &str,
    sector_dir: &Path,
    param_dir: &Path,
    backend: &dyn Backend,
) -> anyhow::Result<()> {
    let kind = FilecoinKind::from_cli_name(kind).map_err(anyhow::Error::msg)?;
    // One proof per process: recording the shape would cost more than it saves.
    let synthesizer = Synthesizer::new(0);
    // filecoin-proofs' verifier finds its .vk files through this variable.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", param_dir);
    let sector = load_sector(sector_dir)
        .with_context(|| format!("loading the test sector in {}", sector_dir.display()))?;
    let request = sector.request(kind)?;
    let proof = cuzk_filecoin::parse_in(kind, &request, param_dir)?;
    let params = proof.params_path(param_dir);
    let t = Instant::now();
    // The reader's errors name the file: the context does not repeat it.
    let srs = Srs::load(&params, SrsOptions::default()).context("loading the parameters")?;
    let srs_load = t.elapsed();
    println!(
        "{kind} {}: {} partition(s), parameters {} loaded in {:.1} ms",
        proof.circuit_id(),
        proof.num_partitions(),
        params.display(),
        srs_load.as_secs_f64() * 1e3
    );
    let mut proofs = Vec::new();
    let (mut synth_total, mut prove_total) = (Duration::ZERO, Duration::ZERO);
    let mut constraints = 0;
    for k in 0..proof.num_partitions() {
        let t = Instant::now();
        let asg = proof.synthesize(&synthesizer, k)?;
        let synth = t.elapsed();
        constraints = asg.n_rows();
        let t = Instant::now();
        let (p, report) = cuzk_groth16::prove_random(&asg, &srs, backend, &mut rand::thread_rng())
            .with_context(|| format!("proving partition {k}"))?;
        let prove = t.elapsed();
        synth_total += synth;
        prove_total += prove;
        println!(
            "partition {k}: {} rows ({} inputs, {} aux), domain 2^{}, backend {}",
            asg.n_rows(),
            asg.input_assignment.len(),
            asg.aux_assignment.len(),
            asg.lg_domain(),
            report.backend
        );
        println!("  {:<14} {:>12}", "stage", "wall_ms");
        println!("  {:<14} {:>12.3}", "synthesis", synth.as_secs_f64() * 1e3);
        for s in &report.stages {
            println!("  {:<14} {:>12.3}", s.stage, s.wall.as_secs_f64() * 1e3);
        }
        println!(
            "  {:<14} {:>12.3}",
            "prove total",
            prove.as_secs_f64() * 1e3
        );
        proofs.push(p);
    }
    let t = Instant::now();
    let bytes = proof.assemble_and_verify(&proofs, &srs.vk)?;
    let assemble = t.elapsed();
    let t = Instant::now();
    let ok = verify_with_filecoin_proofs(kind, &sector.manifest, &bytes)?;
    let fil_verify = t.elapsed();
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    println!(
        "{}",
        serde_json::json!({
            "op": "prove_filecoin",
            "kind": kind.to_string(),
            "circuit_id": proof.circuit_id(),
            "partitions": proof.num_partitions(),
            "rows_per_partition": constraints,
            "backend": backend.name(),
            "srs_load_ms": ms(srs_load),
            "synthesis_ms": ms(synth_total),
            "prove_ms": ms(prove_total),
            "assemble_verify_ms": ms(assemble),
            "filecoin_verify_ms": ms(fil_verify),
            "proof_bytes": bytes.len(),
            "verified_by_filecoin_proofs": ok,
        })
    );
    if !ok {
        bail!("filecoin-proofs rejected the {kind} proof");
    }
    println!("proof verified by filecoin-proofs ({} bytes)", bytes.len());
    Ok(())
}
