#!/usr/bin/env bash
# A/B of the G1 hot-loop change (inlined mixed addition + one-point-ahead gather in bucket
# accumulation and batch addition): GPU tests and MSM checks on the new kernels, then
# resident G1 MSMs with the old (.carry/gpu_bench_old) and new binaries, then the GPU
# backend at 2^24 with the new kernels.
set -u -o pipefail
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=warn
echo "== gpu tests (new kernels)"; timeout 90 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "test |result"
echo "== msm checks (new)"; timeout 120 .carry/gpu_bench msm g1 --check 2>&1 | tail -2
for b in old new; do
  bin=.carry/gpu_bench; [ $b = old ] && bin=.carry/gpu_bench_old
  echo "== msm g1 resident ($b)"; timeout 120 $bin msm g1 --resident --runs 3 22 24 26 2>&1 | grep '^{'
done
echo "== backend 24 (new)"; timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 24 2>&1 | grep '^{' | cut -c1-700
