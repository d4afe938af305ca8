//! Our CPU prover against bellperson's on the synthetic PoRep-shaped circuit, without the
//! rest of the workspace: `cargo run --release -p cuzk-groth16 --example
//! prove_vs_bellperson -- LOG_N [REPS]`. `cuzk bench prove` prints the same comparison.

use cuzk_groth16::compare::{compare_with_bellperson, CompareOptions};
use cuzk_groth16::CpuBackend;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lg_n: u32 = args.first().map_or(Ok(16), |a| a.parse())?;
    let reps: usize = args.get(1).map_or(Ok(3), |a| a.parse())?;
    let cmp = compare_with_bellperson(
        &CompareOptions {
            lg_n,
            reps,
            seed: 1,
        },
        &CpuBackend::new(),
    )?;
    let stages: Vec<String> = cmp
        .cuzk_stage_ms
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v:.1}"))
        .collect();
    println!(
        "{{\"op\":\"prove\",\"log_n\":{lg_n},\"backend\":\"cpu\",\"cuzk_ms_median\":{:.1},\"bellperson_ms_median\":{:.1},\"speedup\":{:.3},\"verified\":{},\"cuzk_ms\":{:?},\"bellperson_ms\":{:?},\"stages_ms\":{{{}}}}}",
        cmp.cuzk_ms_median(),
        cmp.bellperson_ms_median(),
        cmp.speedup(),
        cmp.verified,
        cmp.cuzk_ms.iter().map(|v| v.round()).collect::<Vec<_>>(),
        cmp.bellperson_ms.iter().map(|v| v.round()).collect::<Vec<_>>(),
        stages.join(",")
    );
    Ok(())
}
