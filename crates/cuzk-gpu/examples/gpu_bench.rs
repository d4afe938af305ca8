//! The GPU microbenchmarks and device self-checks without the full `cuzk` binary (which
//! pulls in the whole Filecoin stack), for a device machine that has no cargo:
//!
//! ```text
//! gpu_bench msm g1|g2 [--resident] [--check] [--runs N] [--seed S] LOG_N...
//! gpu_bench ntt [--coset] [--check] [--check-max-lg K] [--runs N] [--seed S] LOG_N...
//! gpu_bench backend LOG_N...  # GPU backend vs CPU backend on a synthetic circuit
//! gpu_bench compile ARCH...    # fill the NVRTC disk cache (no GPU needed), e.g. sm_90
//! ```
//! Output is the same JSON lines as `cuzk bench msm` / `cuzk bench ntt`.

use cuzk_gpu::bench::{run_msm, run_ntt, MsmBench, NttBench};
use cuzk_gpu::msm::Group;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let mut it = args.iter();
    let op = it
        .next()
        .ok_or("usage: gpu_bench msm|ntt|compile ...")?
        .clone();
    if op == "compile" {
        for arch in it {
            let t = std::time::Instant::now();
            cuzk_gpu::kernels::cubin_all(arch).map_err(|e| e.to_string())?;
            println!("{arch}: all modules in {} ms", t.elapsed().as_millis());
        }
        return Ok(());
    }
    let mut group = Group::G1;
    let (mut resident, mut check, mut coset) = (false, false, false);
    let (mut runs, mut seed, mut check_max_lg) = (5usize, None, 14u32);
    let mut log_n = Vec::new();
    while let Some(a) = it.next() {
        let mut num = |what: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{what} needs a number"))
        };
        match a.as_str() {
            "g1" => group = Group::G1,
            "g2" => group = Group::G2,
            "--resident" => resident = true,
            "--check" => check = true,
            "--coset" => coset = true,
            "--runs" => runs = num("--runs")? as usize,
            "--seed" => seed = Some(num("--seed")?),
            "--check-max-lg" => check_max_lg = num("--check-max-lg")? as u32,
            v => log_n.push(
                v.parse::<u32>()
                    .map_err(|_| format!("unknown argument {v:?}"))?,
            ),
        }
    }
    let r = match op.as_str() {
        "msm" => run_msm(&MsmBench {
            group,
            log_n,
            resident,
            chunk_log: 22,
            runs,
            check,
            seed,
            device: 0,
        }),
        "backend" => {
            let dev = cuzk_gpu::Device::open(0).map_err(|e| e.to_string())?;
            let seed = seed.unwrap_or(7);
            let mut failed = 0;
            for lg in log_n {
                for r in
                    cuzk_gpu::check::check_backend(&dev, lg, seed).map_err(|e| e.to_string())?
                {
                    failed += usize::from(!r.ok);
                    println!(
                        "{{\"check\":\"{}\",\"ok\":{},\"detail\":\"{}\"}}",
                        r.name, r.ok, r.detail
                    );
                }
            }
            if failed > 0 {
                return Err(format!("{failed} backend checks failed"));
            }
            Ok(())
        }
        "ntt" => run_ntt(&NttBench {
            log_n,
            coset,
            runs,
            check,
            check_max_lg,
            seed,
            device: 0,
        }),
        o => return Err(format!("unknown op {o:?}")),
    };
    r.map_err(|e| e.to_string())
}
