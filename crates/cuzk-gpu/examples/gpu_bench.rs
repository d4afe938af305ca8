//! The GPU microbenchmarks and device self-checks without the full `cuzk` binary (which
//! pulls in the whole Filecoin stack), for a device machine that has no cargo:
//!
//! ```text
//! gpu_bench msm g1|g2 [--resident [--table]] [--check] [--runs N] [--seed S] LOG_N...
//! gpu_bench ntt [--coset] [--quotient] [--check] [--check-max-lg K] [--runs N] [--seed S] LOG_N...
//! gpu_bench backend [--runs N] [--seed S] [--cpu-max-lg K] [--chunk P] LOG_N...
//!                  [--overlap P [--workers W]]
//!                              # resident and streamed GPU proves, timed and verified;
//!                              # --overlap: then the overlap case at the largest LOG_N
//! gpu_bench overlap LOG_N [--partitions P] [--workers W] [--streamed]
//!                              # P partitions from W threads on one backend: busy fraction
//! gpu_bench fault [--stage NAME] [LOG_N]  # injected launch failure, then proofs again
//! gpu_bench check-backend LOG_N...       # sums vs the CPU backend, both placements
//! gpu_bench compile ARCH...    # fill the NVRTC disk cache (no GPU needed), e.g. sm_90
//! ```
//! Output is the same JSON lines as `cuzk bench msm` / `cuzk bench ntt`.

use cuzk_gpu::backend_bench::{run_backend, run_fault, run_overlap, BackendBench, OverlapBench};
use cuzk_gpu::bench::{run_msm, run_ntt, MsmBench, NttBench};
use cuzk_gpu::msm::Group;
use cuzk_gpu::Residency;

fn failures(n: usize) -> Result<(), cuzk_gpu::GpuError> {
    if n > 0 {
        return Err(cuzk_gpu::GpuError::Input(format!("{n} checks failed")));
    }
    Ok(())
}

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
    let (mut resident, mut check, mut coset, mut quotient) = (false, false, false, false);
    let mut table = false;
    let (mut runs, mut seed, mut check_max_lg) = (5usize, None, 14u32);
    let (mut cpu_max_lg, mut chunk, mut partitions, mut workers) =
        (16u32, 1usize << 22, 20usize, 2usize);
    let mut overlap = None;
    let (mut streamed, mut stage) = (false, "msm_l".to_string());
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
            "--table" => table = true,
            "--coset" => coset = true,
            "--quotient" => quotient = true,
            "--runs" => runs = num("--runs")? as usize,
            "--seed" => seed = Some(num("--seed")?),
            "--check-max-lg" => check_max_lg = num("--check-max-lg")? as u32,
            "--cpu-max-lg" => cpu_max_lg = num("--cpu-max-lg")? as u32,
            "--chunk" => chunk = num("--chunk")? as usize,
            "--partitions" => partitions = num("--partitions")? as usize,
            "--workers" => workers = num("--workers")? as usize,
            "--streamed" => streamed = true,
            "--overlap" => overlap = Some(num("--overlap")? as usize),
            "--stage" => stage = it.next().ok_or("--stage needs a name")?.clone(),
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
            table,
            seed,
            device: 0,
        }),
        "check-backend" => {
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
            failures(failed)
        }
        "backend" => {
            let failed = run_backend(&BackendBench {
                log_n,
                runs: runs.max(1),
                seed: seed.unwrap_or(7),
                cpu_max_lg,
                chunk_points: chunk,
                device: 0,
                overlap: overlap.map(|p| (p, workers)),
            })
            .map_err(|e| e.to_string())?;
            failures(failed)
        }
        "overlap" => {
            let failed = run_overlap(&OverlapBench {
                log_n: log_n.first().copied().unwrap_or(20),
                partitions,
                workers,
                seed: seed.unwrap_or(7),
                residency: if streamed {
                    Residency::Streamed
                } else {
                    Residency::Auto
                },
                device: 0,
            })
            .map_err(|e| e.to_string())?;
            failures(failed)
        }
        "fault" => {
            let lg = log_n.first().copied().unwrap_or(12);
            let failed = run_fault(0, lg, &stage, seed.unwrap_or(7)).map_err(|e| e.to_string())?;
            failures(failed)
        }
        "ntt" => run_ntt(&NttBench {
            log_n,
            coset,
            quotient,
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
