#!/usr/bin/env bash
# The GPU backend against the CPU backend on synthetic PoRep-shaped circuits (parameters
# made on the device with GpuFixedBase), a whole GPU proof verified by bellperson's
# verifier, then the primitive checks once more. Build first, as bench/gpu-check.sh says.
set -u -o pipefail
BIN=${GPU_BENCH:-.carry/gpu_bench}
OUT=${OUT:-/tmp/cuzk-gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.carry/cache}
export RUST_LOG=${RUST_LOG:-warn}
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/smi.txt"
step() { # name limit_s args...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$BIN" "$@" 2>&1 | tee "$OUT/$name.jsonl"
  echo "== $name rc=$? in $(( $(date +%s) - t0 )) s"
}
step backend_small 120 backend --seed 7 10 11 16
step backend_large 300 backend --seed 9 20 22
step ntt_check 120 ntt --check --check-max-lg 14
step msm_check 150 msm g1 --check
