#!/usr/bin/env bash
# Session of 2026-11-30 17:00 UTC on an H200 (docs/benchmarks.md):
#   part a: checks of the commits since the last device run (window widths with top windows
#           of at least 8 bits, pair.cu through fmul/fsqr), of the Fp product and square on
#           the FP64 pipe and of the batched fill/upload: GPU tests, MSM checks in G1 and G2
#           (G1 also with 3 pair rounds forced), G1 and G2 MSMs, the G1 accumulation capped
#           at 168 registers, G1 MSMs at 2^14, 2^16, 2^18 with the new widths against the
#           old ones forced, the backend at 2^20/2^22/2^24 with the 2^24 two-worker overlap.
#   part m: the Fp product microbenchmark (bench/fieldmul): variants checked against the
#           CIOS product on the device, then timed.
#   part b: the Fp product microbenchmark rebuilt on the crate's fp_dfma.cuh (one
#           configuration); downloads wait for the compute stream before copying: the
#           backend at 2^24 with the two-worker overlap, and the head-to-head against
#           SupraSeal C2 at 2^24, PoRep-like default shape, with the cuzk CPU backend.
#   part q: the head-to-head at 2^24 on the dense shape (--bit-fraction 0).
#   part e: Nsight Compute sections of the G1 accumulation with the FP64 products (2^22),
#           and the engine over 40 partitions of 2^24 with 14 synthesis workers and 2 GPU
#           workers (cuzk bench batch).
#   part f: Fr products on the FP64 pipe: GPU tests, NTT checks against the CPU to 2^16, MSM
#           checks, NTTs at 2^20/2^22/2^24 (and coset 2^24) against the CIOS Fr product
#           (-DFR_CIOS), the backend at 2^24 with the two-worker overlap, and the
#           head-to-head against SupraSeal C2 at 2^24 (PoRep-like default shape).
#   part g: the final kernels (the Fr operand split as a loop): GPU tests, NTT and MSM checks.
# Usage: bash bench/h200-s12.sh a|m|b|q|e|f|g   (each fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
case $1 in
a)
  gpu_info
  t gpu tests; timeout 150 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  for g in g1 g2; do
    t "msm checks $g"; timeout 90 .carry/gpu_bench msm $g --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  done
  t "msm checks g1, 3 pair rounds forced"
  CUZK_GPU_MSM_PAIR=3 timeout 60 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm g1 resident 14 16 18 20 22 24, g2 resident 20 22"
  timeout 60 .carry/gpu_bench msm g1 --resident --runs 5 --seed 5 14 16 18 20 22 24 2>&1 | grep '^{' | cut -c1-300
  timeout 60 .carry/gpu_bench msm g2 --resident --runs 3 --seed 5 20 22 2>&1 | grep '^{' | cut -c1-300
  t "msm g1 resident 24 profiled"
  CUZK_GPU_PROFILE=1 timeout 60 .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 24 2>&1 | grep -E 'profile' | tail -1
  t "msm g1 resident, accumulation capped at 168 registers (3 blocks per SM)"
  CUZK_NVRTC_OPTS=-DACC_G1_MIN_BLOCKS=3 timeout 90 .carry/gpu_bench msm g1 --resident --runs 5 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
  for lc in "14 10" "16 12" "18 14"; do
    set -- $lc
    t "msm g1 resident 2^$1, old width c = $2"
    CUZK_GPU_MSM_C=$2 timeout 30 .carry/gpu_bench msm g1 --resident --runs 5 --seed 5 $1 2>&1 | grep '^{' | cut -c1-300
  done
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 200 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1400
  ;;
m)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  t "fieldmul"; timeout 200 .carry/fieldmul --budget 120 2>&1 | tail -80
  ;;
b)
  gpu_info
  t "fieldmul --quick: the crate's fp_dfma.cuh (V3, V5) against the CIOS product"
  timeout 60 .carry/fieldmul --quick 2>&1 | grep -E '"check"|^V|^var'
  t "backend 24, overlap 20 partitions x 2 workers (downloads after a stream sync)"
  timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 24 2>&1 | grep '^{' | cut -c1-1400
  h2h 400 24 --compare supraseal,cpu
  ;;
q)
  h2h 290 24 --compare supraseal --bit-fraction 0
  ;;
f)
  gpu_info; gpu_checks
  for v in fp64 cios; do
    env=(); [ $v = cios ] && env=(CUZK_NVRTC_OPTS=-DFR_CIOS)
    t "ntt 20 22 24 and coset 24, Fr products: $v"
    env "${env[@]}" timeout 60 .carry/gpu_bench ntt --runs 5 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
    env "${env[@]}" timeout 60 .carry/gpu_bench ntt --coset --runs 5 --seed 5 24 2>&1 | grep '^{' | cut -c1-300
  done
  t "backend 24, overlap 20 partitions x 2 workers"
  timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 24 2>&1 | grep '^{' | cut -c1-1400
  h2h 250 24 --compare supraseal
  ;;
g)
  gpu_info; gpu_checks
  t "ntt 20 24"; timeout 60 .carry/gpu_bench ntt --runs 5 --seed 5 20 24 2>&1 | grep '^{' | cut -c1-300
  ;;
e)
  gpu_info
  t "ncu: the G1 accumulation with the FP64 products, 2^22"
  NCU=$(which ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 150 $NCU --clock-control none --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section LaunchStats -k regex:msm_accumulate_g1 -c 1 \
    .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 > $OUT/ncu-acc.txt 2>&1
  echo "ncu rc $?"
  grep -E "Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|Issued Warp|No Eligible|Stall|Pipe|Duration" $OUT/ncu-acc.txt | head -40
  t "the engine: 2^24 synthetic partitions through cuzk bench batch, 2 GPU workers"
  PD=/tmp/cuzk-params; mkdir -p $PD
  timeout 120 .carry/cuzk gen params --log-n 24 --seed 1668643435 --out $PD/cuzk-synthetic-63757a6b-24.params 2>&1 | tail -1 | cut -c1-300
  timeout 300 .carry/cuzk bench batch --log-n 24 --partitions 2 --count 20 --concurrency 10 \
    --param-dir $PD --synthesis-workers 14 --gpu-workers 2 --timeline $OUT/timeline-2e24.svg 2>&1 | grep -E '^\{' | cut -c1-2500
  ;;
esac
