#!/usr/bin/env bash
# Session of 2026-11-30 23:35 UTC on an H200 (docs/benchmarks.md):
#   part v: the review commit's binaries (7a2de63, host code only): GPU tests, the backend at
#           2^22 with the two-worker overlap, and the per-phase device profile of one
#           resident prove at 2^24 (where the token's time goes now).
#   part c: the witness sums on a second stream beside the quotient and the H sum: GPU tests,
#           the backend at 2^20, 2^22 and 2^24 (resident and streamed, and the two-worker
#           overlap) with the sums on two streams (default) and on one (CUZK_GPU_LANES=1).
#   part f: #4's head-to-head in one run with the binaries of c359da4: GPU tests, cuzk GPU vs
#           SupraSeal C2 vs the cuzk CPU backend at 2^20, 2^22 and 2^24 (PoRep-like
#           shape), then the two-worker overlap at 2^22.
#   part d: the head-to-head at 2^24 on the dense shape (--bit-fraction 0).
#   part e: the binaries of 43bce8a (the witness sums as a struct): GPU tests, NTT and MSM
#           checks, and the 2 KiB PoRep C2 proved on the GPU through the engine and checked
#           by filecoin-proofs' verifier.
#   part r: the review commit's binaries (c2fd7df): GPU tests, the backend at 2^20 and 2^22
#           (resident, streamed, the two-worker overlap at 2^22).
# Usage: bash bench/h200-s15.sh v|c|f|d|e|r   (each part fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
gpu_info
case $1 in
v)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror|WARN"
  t "backend 22, overlap 20 partitions x 2 workers"
  RUST_LOG=warn timeout 120 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 22 2>&1 | grep -E '^\{|WARN' | cut -c1-1400
  t "profile: backend 24"
  CUZK_GPU_PROFILE=1 RUST_LOG=cuzk_gpu=info timeout 200 .carry/gpu_bench backend --runs 1 --seed 7 24 2>&1 | grep -v '^$' | cut -c1-1400
  ;;
c)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror|WARN"
  for lanes in 2 1; do
    t "backend 20 22 24, overlap 20 partitions x 2 workers, sums on $lanes stream(s)"
    if [ $lanes = 1 ]; then export CUZK_GPU_LANES=1; fi
    timeout 220 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep -E '^\{|WARN' | cut -c1-1400
  done
  ;;
f)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "test result|panicked|rror"
  h2h 70 20 --compare supraseal,cpu
  h2h 130 22 --compare supraseal,cpu
  h2h 330 24 --compare supraseal,cpu
  t "backend 22, overlap 20 partitions x 2 workers"
  timeout 60 .carry/gpu_bench backend --runs 1 --seed 7 --overlap 20 --workers 2 22 2>&1 | grep -E '"op":"gpu_overlap"' | cut -c1-1400
  ;;
d)
  h2h 500 24 --compare supraseal --bit-fraction 0
  ;;
e)
  gpu_checks
  export FIL_PROOFS_PARAMETER_CACHE=/tmp/cuzk-params FIL_PROOFS_PARENT_CACHE=/tmp/cuzk-parents
  t "porep 2KiB: parameters, sector, prove on the GPU"
  timeout 200 .carry/cuzk gen params --kind porep --sector-size 2KiB --dir /tmp/cuzk-params 2>&1 | tail -2
  timeout 150 .carry/cuzk gen sector --sector-size 2KiB --out /tmp/cuzk-sector 2>&1 | tail -2
  RUST_LOG=info timeout 150 .carry/cuzk prove --kind porep --sector /tmp/cuzk-sector --param-dir /tmp/cuzk-params --backend gpu 2>&1 | grep -vE '^\s*$' | tail -6 | cut -c1-600
  ;;
r)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "test result|panicked|rror"
  t "backend 20 22, overlap 20 partitions x 2 workers"
  timeout 120 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 2>&1 | grep -E '^\{' | cut -c1-700
  ;;
esac
