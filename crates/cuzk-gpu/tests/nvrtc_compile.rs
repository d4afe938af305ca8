//! Every kernel module compiles with NVRTC for sm_80 and sm_90, with no GPU present.
//! Needs libnvrtc.so.13 (CI installs the nvidia-cuda-nvrtc==13.0.88 wheel); without it the
//! test prints `skipped: no libnvrtc` and passes, unless CUZK_REQUIRE_NVRTC=1 (as CI sets),
//! where a missing libnvrtc fails it. With CUZK_FILL_KERNEL_CACHE=1 the CUBINs go into
//! the kernel cache (`$XDG_CACHE_HOME/cuzk/kernels`) too, for a GPU machine to skip NVRTC.

use cuzk_gpu::device::kernels::{compile_cubin, nvrtc_available, store_cubin, KernelId};

#[test]
fn every_kernel_compiles_for_sm80_and_sm90() {
    if let Err(e) = nvrtc_available() {
        assert!(
            std::env::var("CUZK_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "CUZK_REQUIRE_NVRTC=1: {e}"
        );
        println!("skipped: no libnvrtc ({e})");
        return;
    }
    let jobs: Vec<(KernelId, &str)> = ["sm_80", "sm_90"]
        .iter()
        .flat_map(|a| KernelId::ALL.iter().map(move |k| (*k, *a)))
        .collect();
    // Two at a time: CI has two cores and the msm module takes the longest.
    let results: Vec<(String, Result<usize, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(jobs.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|&(k, a)| {
                            let r = compile_cubin(k, a)
                                .map(|c| c.len())
                                .map_err(|e| e.to_string());
                            (format!("{} {a}", k.name()), r)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    assert_eq!(results.len(), jobs.len(), "a compile thread panicked");
    for (what, r) in &results {
        match r {
            Ok(bytes) => assert!(*bytes > 1000, "{what}: cubin of {bytes} bytes"),
            Err(e) => panic!("{what}: {e}"),
        }
    }
    if std::env::var("CUZK_FILL_KERNEL_CACHE").as_deref() == Ok("1") {
        for &(k, a) in &jobs {
            let cubin = compile_cubin(k, a).expect("compiled above");
            store_cubin(k, a, &cubin).expect("kernel cache written");
        }
        println!("kernel cache filled: {} CUBINs", jobs.len());
    }
}

#[test]
fn compile_error_is_a_value() {
    if nvrtc_available().is_err() {
        println!("skipped: no libnvrtc");
        return;
    }
    let e = compile_cubin(KernelId::Ntt, "sm_1").expect_err("sm_1 is not an architecture");
    assert!(
        matches!(e, cuzk_gpu::GpuError::Compile { module: "ntt", .. }),
        "{e}"
    );
}
