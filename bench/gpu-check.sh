#!/usr/bin/env bash
# GPU self-checks (device vs CPU) and microbenchmarks of cuzk-gpu in one go, for a CUDA
# machine without cargo. Build here first:
#   CARGO_TARGET_DIR=target-h2 cargo build --release -p cuzk-gpu --example gpu_bench
#   mkdir -p .carry && cp target-h2/release/examples/gpu_bench .carry/
#   XDG_CACHE_HOME=$PWD/.carry/cache .carry/gpu_bench compile sm_90   # NVRTC cache
# then run this script on the device machine from the repository root. Outputs (JSON
# lines) go to $OUT (default /tmp/cuzk-gpu-out). Each step has its own time limit so one
# hang does not cost the whole run. CUZK_GPU_PROFILE=1 adds per-phase MSM times (stderr).
set -u -o pipefail
BIN=${GPU_BENCH:-.carry/gpu_bench}
OUT=${OUT:-/tmp/cuzk-gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.carry/cache}
export RUST_LOG=${RUST_LOG:-warn}
NTT_SIZES=${NTT_SIZES:-"20 22 24 26 27"}
G1_SIZES=${G1_SIZES:-"16 20 22 24 26"}
G2_SIZES=${G2_SIZES:-"16 20 22 24 26"}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/smi.txt"
step() { # name limit_s args...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$BIN" "$@" 2>&1 | tee "$OUT/$name.jsonl"
  echo "== $name rc=$? in $(( $(date +%s) - t0 )) s"
}
step ntt_check 120 ntt --check --check-max-lg 14
step msm_check 150 msm g1 --check
step ntt 120 ntt --runs 5 $NTT_SIZES
step ntt_coset 60 ntt --coset --runs 5 27
export CUZK_GPU_PROFILE=1
step msm_g1 150 msm g1 --resident --runs 5 $G1_SIZES
step msm_g2 150 msm g2 --resident --runs 5 $G2_SIZES
unset CUZK_GPU_PROFILE
# The GPU backend (issue #4 start) against the CPU backend on synthetic circuits.
step backend 240 backend --seed 7 10 16
