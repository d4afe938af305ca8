#!/usr/bin/env bash
# Session of 2026-11-30 11:00 UTC on an H200 (docs/benchmarks.md):
#   part v: the device checks of commits 95c7226 and 6861da6 (shared msm_others/check_split,
#           classification through scan_exclusive, never run on a device before), the GPU
#           backend at 2^20/2^22/2^24 with the 20-partition two-worker overlap at 2^24, and
#           synthesis on the host's 16 cores (plain against recorded).
# Usage: bash bench/h200-s10.sh v   (fits one 600 s device call)
set -u -o pipefail
OUT=${OUT:-/tmp/cuzk-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=${RUST_LOG:-warn}
LOG=$OUT/part-$1.log
exec > >(tee "$LOG") 2>&1
t() { echo "== $* [$(date +%T)]"; }
case $1 in
v)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 150 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 260 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  t "synthesis on 16 cores"; timeout 60 .carry/cuzk bench synth --log-n 22 --reps 2 2>&1 | tail -4
  ;;
esac
t done
