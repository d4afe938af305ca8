#!/usr/bin/env bash
# The GPU backend on synthetic PoRep-shaped circuits (parameters made on the device with
# GpuFixedBase), one JSON line per case:
#   - backend: per size, resident and streamed proves (median of 3 after a verified
#     warm-up, per-stage host and device times; sums compared with the CPU backend up to
#     2^16), then at the largest size the overlap case: 20 partitions from 2 workers on one
#     backend, busy fraction = sum of token_held / wall (target >= 0.95). The overlap runs
#     on the same parameters as backend 24 because generating 2^24 parameters twice would
#     not fit one device call; `gpu_bench overlap 24 --partitions 20 --workers 2` is the
#     stand-alone form.
#   - overlap 20: the stand-alone form with one witness per worker, resident and streamed.
#   - fault: an injected launch failure, then two proofs that must verify.
# Build first, as bench/gpu-check.sh says; the test binary is run by the caller.
set -u -o pipefail
BIN=${GPU_BENCH:-.carry/gpu_bench}
OUT=${OUT:-/tmp/cuzk-gpu-out}
SIZES=${SIZES:-10 16 20 22 24}
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
step fault 60 fault --stage msm_l 12
# shellcheck disable=SC2086
step backend "${BACKEND_LIMIT:-240}" backend --runs 3 --seed 7 --overlap 20 --workers 2 $SIZES
step overlap20 60 overlap 20 --partitions 20 --workers 2
step overlap20_streamed 60 overlap 20 --partitions 20 --workers 2 --streamed
